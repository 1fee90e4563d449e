// Tool calls in generated text (FEATURES.md F16; issue 22 item 4): each model family writes its
// calls in its own markup (Hermes / Qwen `<tool_call>{json}</tool_call>`, Mistral
// `[TOOL_CALLS]...`, Llama 3 bare JSON, ...). A ToolCallParser splits one choice's visible text,
// as it streams in, into content text and tool calls (a name, then the arguments as JSON text in
// fragments), so partial markup never reaches the content and a marker cut across two chunks is
// still found. ToolCallSource (tool_call_source.h) turns its output into choice events.
//
//   std::unique_ptr<ToolCallParser> p = MakeToolCallParser(ToolCallFormat::kHermes, tools);
//   std::vector<ToolParseEvent> events;
//   p->Feed(chunk, &events);   // per detokenized chunk
//   p->Flush(&events);         // once, when the output ended
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// The call markup of a model family. Names (ToolCallFormatName, --tool-parser) in comments.
enum class ToolCallFormat {
  kHermes,      // "hermes": Hermes 2/3, Qwen2.5, Qwen3: <tool_call>\n{"name",
                // "arguments"}\n</tool_call>
  kQwen3Coder,  // "qwen3_coder": <tool_call>\n<function=NAME>\n<parameter=P>\nV\n</parameter>...
  kLlama3Json,  // "llama3_json": Llama 3.1-3.3: [<|python_tag|>]{"name", "parameters"}[; {...}]
  kMistral,  // "mistral": [TOOL_CALLS] [{"name", "arguments"}, ...] or [TOOL_CALLS]NAME[ARGS]{...}
  kDeepSeekV3,  // "deepseek_v3":
                // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json
  kDeepSeekV31,  // "deepseek_v31": <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{args}<｜tool▁call▁end｜>
  kGlm45,          // "glm45": <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...
  kPhi4Mini,       // "phi4_mini": functools[{"name", "arguments"}, ...]
  kGemma4,         // "gemma4": <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>
  kGemmaToolCode,  // "gemma_tool_code": Gemma 3 prompted so: ```tool_code\nNAME(k="v", n=3)\n```
  kHarmony,  // "harmony": gpt-oss: <|channel|>commentary to=functions.NAME ...<|message|>{args}
             // <|call|>; the analysis channel comes out as kReasoning, final as text
};

// A tool the request declared: its name and its JSON Schema "parameters" object (formats that
// write arguments as untyped text, Qwen3-Coder's and GLM's, use it to type each value).
struct ToolSpec {
  std::string name;
  nlohmann::json parameters = nlohmann::json::object();
};

struct ToolParseEvent {
  enum class Kind {
    kText,       // content text: `text`
    kCallStart,  // a call begins: `text` is the function name
    kCallArgs,   // a fragment of the open call's arguments (JSON object text): `text`
    kReasoning,  // reasoning text (harmony's analysis channel): `text`
  };
  Kind kind = Kind::kText;
  std::string text;
};

// One choice's parser. Not thread-safe. The contract every format keeps:
//   - chunking does not matter: for any split of the same output into chunks, the events,
//     after merging adjacent kText events and adjacent kCallArgs events of one call, are equal;
//   - a call's kCallArgs fragments concatenate to its arguments as a JSON object's text (when
//     the model wrote well-formed markup; "{}" for a call without arguments);
//   - text that might still turn out to be markup is held back until a later chunk or Flush
//     decides; markup that turns out malformed before a call started comes out as kText, so no
//     output is lost; whitespace between and after calls is dropped.
class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // The next chunk of the choice's text; appends what is decided so far.
  virtual void Feed(std::string_view chunk, std::vector<ToolParseEvent>* out) = 0;
  // The output ended: appends whatever was held back.
  virtual void Flush(std::vector<ToolParseEvent>* out) = 0;
};

std::unique_ptr<ToolCallParser> MakeToolCallParser(ToolCallFormat format,
                                                   std::vector<ToolSpec> tools = {});

std::string_view ToolCallFormatName(ToolCallFormat format);
// The format named `name` (ToolCallFormatName's names); nullopt for an unknown name.
std::optional<ToolCallFormat> ToolCallFormatFromName(std::string_view name);
// The names, comma-separated (for --tool-parser's help and its error).
std::string ToolCallFormatNames();
// The format a chat template writes tool calls in, from the markup in its source; nullopt when
// it shows none of the known ones.
std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view chat_template_source);
// True when the format's markers are special tokens ([TOOL_CALLS], <|python_tag|>, DeepSeek's
// <｜tool▁…｜>, Gemma 4's <|tool_call>, harmony's <|channel|>...), so the detokenizer must keep
// special tokens for the parser to see them.
bool ToolCallFormatUsesSpecialTokens(ToolCallFormat format);

}  // namespace loom
