// TextCodec: what the server needs from a model's text side — tokenize, detokenize, render chat
// messages with the model's chat template. An interface so request handling and streaming can
// be tested without a real tokenizer; TokenizerCodec (tokenizer_codec.h) adapts the real
// Tokenizer + ChatTemplate. Implementations are immutable and thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace loom {

class TextCodec {
 public:
  virtual ~TextCodec() = default;

  // Token ids of `text`. add_special_tokens adds the model's BOS/EOS template. InvalidArgument
  // (naming the byte offset) for ill-formed UTF-8.
  virtual StatusOr<std::vector<TokenId>> Encode(std::string_view text,
                                                bool add_special_tokens) const = 0;
  // Text of `ids`; never invalid UTF-8 (incomplete sequences become U+FFFD).
  virtual std::string Decode(std::span<const TokenId> ids, bool skip_special_tokens) const = 0;
  // The text one token contributes in the middle of a sequence (" there" for SentencePiece's
  // "▁there"; raw bytes for byte-level BPE), as logprobs report it. Default: Decode of {id}.
  virtual std::string TokenText(TokenId id) const {
    return Decode(std::span<const TokenId>(&id, 1), false);
  }
  // A lower bound on the size of Encode(text, add_special_tokens) that costs at most one pass
  // over `text` and no tokenization; 0 when the codec knows none. The server refuses a prompt
  // whose bound reaches the context before paying for its tokenization.
  virtual size_t MinTokenCount(std::string_view /*text*/, bool /*add_special_tokens*/) const {
    return 0;
  }
  // The most bytes of text one token stands for (what MinTokenCount divides by; for messages).
  // 0 when unknown.
  virtual size_t max_bytes_per_token() const { return 0; }
  // Size of the id space; ids in [0, vocab_size()) are valid.
  virtual int vocab_size() const = 0;

  virtual bool has_chat_template() const = 0;
  // Renders `context` (messages, add_generation_prompt, chat_template_kwargs merged in) with the
  // chat template; the codec adds bos_token / eos_token. FailedPrecondition when there is no
  // template; InvalidArgument for template errors (raise_exception etc.).
  virtual StatusOr<std::string> RenderChat(const nlohmann::ordered_json& context) const = 0;
  // The chat template's Jinja source ("" without one); `tools`: the one used when a request
  // has tools (a model may ship a separate "tool_use" template). For detecting the model's
  // tool-call and reasoning markup.
  virtual std::string chat_template_source(bool tools) const {
    (void)tools;
    return "";
  }
};

}  // namespace loom
