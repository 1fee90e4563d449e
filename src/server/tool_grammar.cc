#include "server/tool_grammar.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "server/literal_schema_grammar.h"
#include "server/tool_parser_internal.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

std::string Lit(std::string_view s) { return GbnfLiteral(s); }

// `s` as a literal, or nothing when it is empty, followed by a space.
std::string LitSp(std::string_view s) { return s.empty() ? "" : Lit(s) + " "; }

struct Tool {
  std::string name;
  const ordered_json* parameters;
};

std::vector<Tool> SelectedTools(const ToolGrammarRequest& req) {
  std::vector<Tool> out;
  for (const auto& t : *req.tools) {
    const ordered_json& fn = t["function"];
    std::string name = fn["name"].get<std::string>();
    if (!req.only.empty() && name != req.only) continue;
    out.push_back(Tool{std::move(name), &fn["parameters"]});
  }
  return out;
}

// Builds the GBNF text and its parts.
class Builder {
 public:
  explicit Builder(const ToolGrammarRequest& req) : req_(req), tools_(SelectedTools(req)) {}

  StatusOr<GrammarSpec> Build() {
    switch (req_.format) {
      case ToolCallFormat::kHermes:
        JsonCalls("arguments");
        Wrapped("<tool_call>", "\n", "\n</tool_call>", "\n");
        break;
      case ToolCallFormat::kLlama3Json:
        JsonCalls("parameters");
        Rule("rest", "tail (\"; \" call)*", "tail");
        if (req_.forced) {
          Rule("root", "call (\"; \" call)*", "call");
        } else {
          Rule("root", "rest", "rest");
          spec_.trigger = kJsonHead;
          spec_.trigger_at_start = true;
        }
        break;
      case ToolCallFormat::kMistral:
        if (req_.mistral_v11) {
          // Mistral Small 3.2's template writes a call id between the name and the arguments.
          NamedCalls("", "(\"[CALL_ID]\" [a-zA-Z0-9]{9})? \"[ARGS]\"", "");
          Wrapped("[TOOL_CALLS]", "", "", "");
        } else {
          // Mistral Nemo's template writes each call's id after its arguments.
          JsonCalls("arguments", /*with_id=*/true);
          List("[TOOL_CALLS]", "[", ", ", "]");
        }
        break;
      case ToolCallFormat::kPhi4Mini:
        JsonCalls("arguments");
        List("functools[", "", ", ", "]");
        break;
      case ToolCallFormat::kDeepSeekV3:
        NamedCalls("<｜tool▁call▁begin｜>function<｜tool▁sep｜>", Lit("\n```json\n"),
                   "\n```<｜tool▁call▁end｜>");
        List("<｜tool▁calls▁begin｜>", "", "\n", "<｜tool▁calls▁end｜>");
        break;
      case ToolCallFormat::kDeepSeekV31:
        NamedCalls("<｜tool▁call▁begin｜>", Lit("<｜tool▁sep｜>"), "<｜tool▁call▁end｜>");
        List("<｜tool▁calls▁begin｜>", "", "", "<｜tool▁calls▁end｜>");
        break;
      case ToolCallFormat::kQwen3Coder:
        XmlCalls(/*glm=*/false);
        Wrapped("<tool_call>", "\n<function=", "</function>\n</tool_call>", "\n");
        break;
      case ToolCallFormat::kGlm45:
        XmlCalls(/*glm=*/true);
        Wrapped("<tool_call>", "", "</tool_call>", "\n");
        break;
      case ToolCallFormat::kGemma4:
        // Its thought channel comes first through the reasoning wrap (output_parsing.h); the
        // turn ends after calls with <|tool_response>, as its template writes.
        RETURN_IF_ERROR(LiteralCalls(LiteralDialect::kGemma4));
        Wrapped("<|tool_call>", "call:", "<tool_call|>", "", " \"<|tool_response>\"?");
        break;
      case ToolCallFormat::kGemmaToolCode:
        RETURN_IF_ERROR(LiteralCalls(LiteralDialect::kPython));
        List("```tool_code", "\n", "\n", "\n```");
        break;
      case ToolCallFormat::kHarmony:
        RETURN_IF_ERROR(HarmonyCalls());
        break;
    }
    spec_.kind = GrammarKind::kGbnf;
    spec_.text = std::move(text_);
    return std::move(spec_);
  }

 private:
  static constexpr std::string_view kJsonHead = "{\"name\": \"";

  void Rule(std::string_view name, std::string_view body, std::string_view single) {
    text_ += std::string(name) + " ::= " + std::string(req_.parallel ? body : single) + "\n";
  }

  // A part holding tool `i`'s parameter schema (the lazy grammar falls back to any object).
  std::string ArgsPart(size_t i) {
    const std::string name = "args-" + std::to_string(i);
    spec_.parts.push_back(GrammarPart{name, GrammarPart::Kind::kJsonSchema,
                                      tools_[i].parameters->dump(),
                                      req_.forced ? "" : R"({"type": "object"})", /*spaced=*/true});
    return name;
  }

  // call ::= call-0 | call-1 | ...; each call-i ::= `{"name": "NAME", "KEY": ` args-i `}`, and
  // tail ::= the same after `{"name": "` (what a call is once llama3's trigger is seen).
  void JsonCalls(std::string_view key, bool with_id = false) {
    std::string tails;
    for (size_t i = 0; i < tools_.size(); ++i) {
      const std::string args = ArgsPart(i);
      const std::string tail = "tail-" + std::to_string(i);
      text_ += tail + " ::= " +
               Lit(tool_parser_internal::JsonEscape(tools_[i].name) + "\", \"" + std::string(key) +
                   "\": ") +
               " " + args + (with_id ? R"( (", \"id\": \"" [a-zA-Z0-9]{9} "\"")?)" : "") +
               " \"}\"\n";
      tails += (i > 0 ? " | " : "") + tail;
    }
    text_ += "tail ::= " + tails + "\n";
    text_ += "call ::= " + Lit(kJsonHead) + " tail\n";
  }

  // call-i ::= before NAME mid args-i after (the formats that write the name outside the JSON;
  // `mid` is GBNF).
  void NamedCalls(std::string_view before, const std::string& mid, std::string_view after) {
    std::string calls;
    for (size_t i = 0; i < tools_.size(); ++i) {
      const std::string args = ArgsPart(i);
      const std::string seq =
          Lit(std::string(before) + tools_[i].name) + " " + mid + " " + args + " " + LitSp(after);
      calls += (i > 0 ? " | " : "") + ("(" + seq + ")");
    }
    text_ += "call ::= " + calls + "\n";
  }

  // The XML formats: call ::= fn-0 | ...; fn-i ::= NAME (Qwen3-Coder: ">\n") then its
  // parameters in the schema's order.
  void XmlCalls(bool glm) {
    std::string calls;
    for (size_t i = 0; i < tools_.size(); ++i) {
      const ordered_json& params = *tools_[i].parameters;
      std::string seq = Lit(tools_[i].name + (glm ? "\n" : ">\n"));
      const auto props = params.find("properties");
      std::vector<std::string> required;
      if (const auto r = params.find("required"); r != params.end() && r->is_array()) {
        for (const auto& n : *r) {
          if (n.is_string()) required.push_back(n.get<std::string>());
        }
      }
      if (props != params.end() && props->is_object()) {
        size_t j = 0;
        for (const auto& [pname, pschema] : props->items()) {
          const std::string rule = "p-" + std::to_string(i) + "-" + std::to_string(j++);
          text_ += rule + " ::= " + XmlParameter(rule, pname, pschema, params, glm) + "\n";
          const bool req = std::find(required.begin(), required.end(), pname) != required.end();
          seq += " " + rule + (req ? "" : "?");
        }
      }
      calls += (i > 0 ? " | " : "") + ("(" + seq + ")");
    }
    text_ += "call ::= " + calls + "\n";
  }

  // One parameter: its tags around its value.
  std::string XmlParameter(const std::string& rule, const std::string& pname,
                           const ordered_json& pschema, const ordered_json& params, bool glm) {
    const std::string open =
        glm ? "<arg_key>" + pname + "</arg_key>\n<arg_value>" : "<parameter=" + pname + ">\n";
    const std::string close = glm ? "</arg_value>" : "\n</parameter>";
    std::string value;
    // The parsers' rule (tool_parser_internal.h): such a value is read back as raw text.
    if (tool_parser_internal::IsStringOnlySchema(pschema)) {
      const auto e = pschema.find("enum");
      const auto c = pschema.find("const");
      std::vector<std::string> choices;
      if (e != pschema.end() && e->is_array()) {
        for (const auto& v : *e) {
          if (v.is_string()) choices.push_back(v.get<std::string>());
        }
      } else if (c != pschema.end() && c->is_string()) {
        choices.push_back(c->get<std::string>());
      }
      if (choices.empty()) {
        spec_.parts.push_back(GrammarPart{rule + "-text", GrammarPart::Kind::kUpTo, close});
        return Lit(open) + " " + rule + "-text \"\\n\"";
      }
      for (size_t k = 0; k < choices.size(); ++k) value += (k > 0 ? " | " : "") + Lit(choices[k]);
      value = "(" + value + ")";
    } else {
      // The parameter's schema on its own, with the definitions its $refs may point at.
      ordered_json schema = pschema;
      for (const char* defs : {"$defs", "definitions"}) {
        if (params.contains(defs) && schema.is_object() && !schema.contains(defs)) {
          schema[defs] = params[defs];
        }
      }
      spec_.parts.push_back(GrammarPart{rule + "-json", GrammarPart::Kind::kJsonSchema,
                                        schema.dump(), req_.forced ? "" : "{}", /*spaced=*/true});
      value = rule + "-json";
      // Qwen3-Coder's template writes a boolean with Python's str (True / False).
      std::vector<std::string> types;
      tool_parser_internal::AddSchemaTypes(pschema, &types);
      if (!glm && std::find(types.begin(), types.end(), "boolean") != types.end()) {
        value = "(" + value + " | \"True\" | \"False\")";
      }
    }
    return Lit(open) + " " + value + " " + Lit(close + "\n");
  }

  // Calls each behind `open` (forced: root ::= open before call after (sep open before call
  // after)* tail, `tail` being GBNF; lazy: trigger `open`, root ::= before call after, once per
  // trigger).
  void Wrapped(std::string_view open, std::string_view before, std::string_view after,
               std::string_view sep, std::string_view tail = "") {
    const std::string one = "(" + LitSp(before) + "call " + LitSp(after) + ")";
    if (req_.forced) {
      const std::string first = Lit(open) + " " + one;
      const std::string again = "(" + Lit(std::string(sep) + std::string(open)) + " " + one + ")*";
      Rule("root", first + " " + again + std::string(tail), first + std::string(tail));
    } else {
      text_ += "root ::= " + one + "\n";
      spec_.trigger = std::string(open);
      spec_.trigger_repeats = req_.parallel;
    }
  }

  // call ::= NAME args | ... with the arguments as literals (Gemma 4's {...}, Python's (...)),
  // for the tools whose names the format's parser reads (the others are left out of the lazy
  // grammar; forced, they are an error).
  Status LiteralCalls(LiteralDialect dialect) {
    LiteralSchemaGrammar args(dialect, req_.forced, "lit-", &text_, &spec_.parts);
    std::vector<std::string> calls;
    for (const Tool& tool : tools_) {
      const bool gemma4 = dialect == LiteralDialect::kGemma4;
      const bool readable =
          !tool.name.empty() && (gemma4 || tool.name[0] < '0' || tool.name[0] > '9') &&
          std::all_of(tool.name.begin(), tool.name.end(), [&](char c) {
            return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   c == '_' || c == '.' || (gemma4 && c == '-');
          });
      if (!readable) {
        if (!req_.forced) continue;
        return InvalidArgumentError("tool \"" + tool.name + "\": its name cannot be written in " +
                                    std::string(ToolCallFormatName(req_.format)) + " calls");
      }
      StatusOr<std::string> a = args.Arguments(*tool.parameters);
      if (!a.ok()) {
        return InvalidArgumentError("tool \"" + tool.name + "\" parameters " +
                                    std::string(a.status().message()));
      }
      calls.push_back("(" + Lit(tool.name) + " " + *a + ")");
    }
    if (calls.empty()) return InvalidArgumentError("no tool whose calls the format can write");
    text_ += "call ::= ";
    for (size_t i = 0; i < calls.size(); ++i) text_ += (i > 0 ? " | " : "") + calls[i];
    text_ += "\n";
    return OkStatus();
  }

  // gpt-oss's harmony messages (tool_parser_harmony.cc): a call is a message to functions.NAME,
  // its header as the model writes it (<|channel|>commentary to=functions.NAME <|constrain|>json)
  // or as the template does (to=functions.NAME<|channel|>commentary json), its body the JSON
  // arguments; <|call|> ends it and the turn, so a reply holds one call, behind an analysis
  // message (the model's reasoning) when the request reasons. Lazy: trigger "to=functions.".
  Status HarmonyCalls() {
    text_ += "rest ::= (\" \" \"<|constrain|>\"? \"json\")? \"<|message|>\"\n";
    std::string calls;
    for (size_t i = 0; i < tools_.size(); ++i) {
      const std::string& name = tools_[i].name;
      if (name.empty() || name.find_first_of(" \t\r\n<") != std::string::npos) {
        if (!req_.forced) continue;
        return InvalidArgumentError("tool \"" + name + "\": its name cannot be written in " +
                                    "harmony calls");
      }
      const std::string args = ArgsPart(i);
      const std::string head =
          req_.forced ? "(" + Lit("<|channel|>commentary to=functions." + name) + " | \" \"? " +
                            Lit("to=functions." + name + "<|channel|>commentary") + ")"
                      : Lit(name) + " \"<|channel|>commentary\"?";
      calls += std::string(calls.empty() ? "" : " | ") + "(" + head + " rest " + args + ")";
    }
    if (calls.empty()) return InvalidArgumentError("no tool whose calls harmony can write");
    text_ += "call ::= (" + calls + ") \"<|call|>\"?\n";
    if (req_.forced) {
      std::string analysis;
      if (req_.reasoning) {
        spec_.parts.push_back(GrammarPart{"analysis-text", GrammarPart::Kind::kUpTo, "<|end|>"});
        analysis = "(\"<|channel|>analysis<|message|>\" analysis-text \"<|start|>assistant\")? ";
      }
      text_ += "root ::= " + analysis + "call\n";
    } else {
      text_ += "root ::= call\n";
      spec_.trigger = "to=functions.";
      spec_.trigger_repeats = req_.parallel;
    }
    return OkStatus();
  }

  // All calls in one list behind `open` (forced: root ::= open list; lazy: trigger `open`,
  // root ::= list), list ::= first call (sep call)* last.
  void List(std::string_view open, std::string_view first, std::string_view sep,
            std::string_view last) {
    const std::string more = "(" + LitSp(sep) + "call)* ";
    text_ +=
        "list ::= " + LitSp(first) + "call " + (req_.parallel ? more : "") + LitSp(last) + "\n";
    if (req_.forced) {
      text_ += "root ::= " + Lit(open) + " list\n";
    } else {
      text_ += "root ::= list\n";
      spec_.trigger = std::string(open);
      spec_.trigger_repeats = false;
    }
  }

  const ToolGrammarRequest& req_;
  const std::vector<Tool> tools_;
  std::string text_;
  GrammarSpec spec_;
};

}  // namespace

StatusOr<GrammarSpec> ToolCallGrammar(const ToolGrammarRequest& req) {
  return Builder(req).Build();
}

std::vector<std::string> ToolCallGrammarMarkers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kMistral:
      return {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
              "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
    case ToolCallFormat::kGemma4:
      // And the thought channel's, which free text before a call may hold.
      return {"<|tool_call>",     "<tool_call|>", "<|\"|>",
              "<|tool_response>", "<|channel>",   "<channel|>"};
    case ToolCallFormat::kHarmony:
      // Every message's markers: the lazy grammar's free text holds the messages before a call.
      // <|call|> and <|return|> stay end-of-generation tokens where they are EOS ids.
      return {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
              "<|end|>",   "<|call|>",    "<|return|>"};
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
    case ToolCallFormat::kLlama3Json:
    case ToolCallFormat::kGlm45:
    case ToolCallFormat::kPhi4Mini:
    case ToolCallFormat::kGemmaToolCode:
      return {};
  }
  return {};
}

}  // namespace loom
