// Grammars built around another one, for what the server wraps a request's grammar in:
//
//   Framed           prefix inner suffix (a tool call: `<tool_call>\n` {json} `\n</tool_call>`)
//   Triggered        free text in which a trigger starts inner (tool_choice auto's lazy grammar:
//                    text until the model opens a call with `<tool_call>`, then a valid call)
//   AtStart          inner when the output opens with a trigger, else free text (Llama 3's bare
//                    JSON calls: a call is only a call at the start of the reply)
//   UpTo             any bytes up to and including the first occurrence of a marker (a tool
//                    call's untyped value: Qwen3-Coder's `<parameter=p>\nvalue\n</parameter>`)
//   AfterReasoning   a reasoning section first, free text up to its close marker, then inner:
//                    the grammar applies to the answer only, after `</think>` (the clash vLLM
//                    and SGLang have: a JSON grammar from the first token forbids thinking)
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace loom {

// root ::= prefix inner-root suffix. `inner` must have its root set.
Grammar Framed(Grammar inner, std::string_view prefix, std::string_view suffix);

// Free text in which each occurrence of `trigger` continues with `inner`, then free text again:
//   root ::= text (trigger inner-root text)*      with `repeat`
//   root ::= text (trigger inner-root text')?     without (text' never contains trigger)
// where text is any byte string not containing `trigger` (it may end inside a partial one).
// `trigger` must be non-empty.
Grammar Triggered(Grammar inner, std::string_view trigger, bool repeat);

// root ::= ws (trigger inner-root | text) where ws is [ \t\n\r]* and text is any byte string
// that does not start with `trigger` (the empty one included). `trigger` must be non-empty and
// must not start with whitespace.
Grammar AtStart(Grammar inner, std::string_view trigger);

// The grammar of any byte string that contains `marker` exactly once, at its end. `marker` must
// be non-empty.
Grammar UpTo(std::string_view marker);

// `already_open` (the prompt opened the section, e.g. DeepSeek-R1's "<think>\n"):
//   root ::= any-bytes-up-to-and-including(close) ws inner-root
// otherwise the section is optional (the model may open it or answer at once):
//   root ::= (ws open any-bytes-up-to-and-including(close))? ws inner-root
// where ws is [ \t\n\r]* and the free text contains `close` only at its end. `open` and `close`
// must be non-empty.
Grammar AfterReasoning(Grammar inner, std::string_view open, std::string_view close,
                       bool already_open);

}  // namespace loom
