#include "server/grammar_request.h"

#include <vector>

#include "grammar/regex_grammar.h"
#include "server/json_fields.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// `value` at the JSON pointer `pointer` of the body re-read with its key order ("" when absent).
std::string OrderedDump(const std::string& body_text, const std::string& pointer) {
  const ordered_json o = ordered_json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded()) return "";
  const ordered_json::json_pointer p(pointer);
  if (!o.contains(p)) return "";
  return o.at(p).dump();
}

// One candidate field: where it is and how to turn it into a spec.
struct Candidate {
  std::string field;  // the field's name in errors ("response_format.json_schema.schema")
  GrammarSpec spec;
};

Status SchemaSpec(const json& schema, const std::string& field, const std::string& pointer,
                  const std::string& body_text, std::vector<Candidate>* out, std::string* param) {
  GrammarSpec spec;
  spec.kind = GrammarKind::kJsonSchema;
  if (schema.is_string()) {  // guided_json may be the schema's text
    const ordered_json parsed =
        ordered_json::parse(schema.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      return FieldError(param, field,
                        field + " must be a JSON Schema (an object, or its JSON text)");
    }
    spec.text = parsed.dump();
  } else if (schema.is_object() || schema.is_boolean()) {
    spec.text = OrderedDump(body_text, pointer);
    if (spec.text.empty()) spec.text = schema.dump();
  } else {
    return FieldError(param, field,
                      field + " must be a JSON Schema object, got " + JsonTypeName(schema));
  }
  out->push_back({field, std::move(spec)});
  return OkStatus();
}

Status StringSpec(const json& v, GrammarKind kind, const std::string& field,
                  std::vector<Candidate>* out, std::string* param) {
  if (!v.is_string() || v.get<std::string>().empty()) {
    return FieldError(param, field, field + " must be a non-empty string");
  }
  std::string text = v.get<std::string>();
  // A guided regex matches the whole output (vLLM's meaning), not a search as in a schema.
  if (kind == GrammarKind::kRegex) text = AnchorWholeMatch(std::move(text));
  out->push_back({field, GrammarSpec{kind, std::move(text)}});
  return OkStatus();
}

Status ChoiceSpec(const json& v, const std::string& field, std::vector<Candidate>* out,
                  std::string* param) {
  if (!v.is_array() || v.empty()) {
    return FieldError(param, field, field + " must be a non-empty array of strings");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return FieldError(param, field + "[" + std::to_string(i) + "]",
                        field + "[" + std::to_string(i) + "] must be a string");
    }
  }
  out->push_back({field, GrammarSpec{GrammarKind::kChoice, v.dump()}});
  return OkStatus();
}

Status ResponseFormat(const json& r, const std::string& body_text, std::vector<Candidate>* out,
                      std::string* param) {
  if (!r.is_object()) {
    return FieldError(param, "response_format",
                      "response_format must be an object, got " + JsonTypeName(r));
  }
  const std::string type = r.value("type", "");
  if (type == "text") return OkStatus();
  if (type == "json_object") {
    out->push_back(
        {"response_format", GrammarSpec{GrammarKind::kJsonSchema, R"({"type":"object"})"}});
    return OkStatus();
  }
  if (type == "json_schema") {
    auto js = r.find("json_schema");
    if (js == r.end() || !js->is_object()) {
      return FieldError(param, "response_format.json_schema",
                        "response_format.json_schema is required and must be an object with a "
                        "\"schema\"");
    }
    auto schema = js->find("schema");
    if (schema == js->end() || schema->is_null()) {
      // OpenAI allows omitting it (any JSON object then).
      out->push_back({"response_format.json_schema",
                      GrammarSpec{GrammarKind::kJsonSchema, R"({"type":"object"})"}});
      return OkStatus();
    }
    return SchemaSpec(*schema, "response_format.json_schema.schema",
                      "/response_format/json_schema/schema", body_text, out, param);
  }
  return FieldError(param, "response_format.type",
                    "response_format.type \"" + type +
                        "\" is unknown; expected text, json_object or json_schema");
}

}  // namespace

Status ParseOpenAiGrammarFields(const json& body, const std::string& body_text,
                                GenerationRequest* out, std::string* param) {
  JsonFields f(body, param);
  std::vector<Candidate> found;
  if (const json* v = f.Find("response_format")) {
    RETURN_IF_ERROR(ResponseFormat(*v, body_text, &found, param));
  }
  if (const json* v = f.Find("guided_json")) {
    RETURN_IF_ERROR(SchemaSpec(*v, "guided_json", "/guided_json", body_text, &found, param));
  }
  if (const json* v = f.Find("json_schema")) {
    RETURN_IF_ERROR(SchemaSpec(*v, "json_schema", "/json_schema", body_text, &found, param));
  }
  if (const json* v = f.Find("guided_regex")) {
    RETURN_IF_ERROR(StringSpec(*v, GrammarKind::kRegex, "guided_regex", &found, param));
  }
  if (const json* v = f.Find("guided_choice")) {
    RETURN_IF_ERROR(ChoiceSpec(*v, "guided_choice", &found, param));
  }
  if (const json* v = f.Find("guided_grammar")) {
    RETURN_IF_ERROR(StringSpec(*v, GrammarKind::kGbnf, "guided_grammar", &found, param));
  }
  if (const json* v = f.Find("grammar")) {
    RETURN_IF_ERROR(StringSpec(*v, GrammarKind::kGbnf, "grammar", &found, param));
  }
  if (const json* v = f.Find("structured_outputs")) {  // vLLM >= 0.10
    if (!v->is_object()) {
      return f.Error("structured_outputs",
                     "structured_outputs must be an object, got " + JsonTypeName(*v));
    }
    for (auto it = v->begin(); it != v->end(); ++it) {
      const std::string name = "structured_outputs." + it.key();
      if (it->is_null()) continue;
      if (it.key() == "json") {
        RETURN_IF_ERROR(
            SchemaSpec(*it, name, "/structured_outputs/json", body_text, &found, param));
      } else if (it.key() == "regex") {
        RETURN_IF_ERROR(StringSpec(*it, GrammarKind::kRegex, name, &found, param));
      } else if (it.key() == "choice") {
        RETURN_IF_ERROR(ChoiceSpec(*it, name, &found, param));
      } else if (it.key() == "grammar") {
        RETURN_IF_ERROR(StringSpec(*it, GrammarKind::kGbnf, name, &found, param));
      } else if (it.key() == "json_object") {
        if (it->is_boolean() && it->get<bool>()) {
          found.push_back({name, GrammarSpec{GrammarKind::kJsonSchema, R"({"type":"object"})"}});
        }
      } else {
        return FieldError(param, name,
                          name +
                              " is not supported; expected json, regex, choice, grammar "
                              "or json_object");
      }
    }
  }
  if (found.size() > 1) {
    return FieldError(
        param, found[1].field,
        found[1].field + " and " + found[0].field + " both constrain the output; send one of them");
  }
  if (!found.empty()) {
    out->grammar = std::move(found[0].spec);
    out->grammar_field = std::move(found[0].field);
  }
  return OkStatus();
}

Status ParseResponsesTextFormat(const json& text, const std::string& body_text,
                                GenerationRequest* out, std::string* param) {
  if (!text.is_object()) {
    return FieldError(param, "text", "text must be an object, got " + JsonTypeName(text));
  }
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return OkStatus();
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string()) {
    return FieldError(param, "text.format", "text.format must be an object with a string \"type\"");
  }
  const std::string type = (*f)["type"].get<std::string>();
  std::vector<Candidate> found;
  if (type == "text") return OkStatus();
  if (type == "json_object") {
    found.push_back({"text.format", GrammarSpec{GrammarKind::kJsonSchema, R"({"type":"object"})"}});
  } else if (type == "json_schema") {
    auto name = f->find("name");
    if (name != f->end() && !name->is_null() && !name->is_string()) {
      return FieldError(param, "text.format.name", "text.format.name must be a string");
    }
    auto schema = f->find("schema");
    if (schema == f->end() || schema->is_null()) {
      return FieldError(param, "text.format.schema",
                        "text.format.schema is required for type json_schema");
    }
    RETURN_IF_ERROR(
        SchemaSpec(*schema, "text.format.schema", "/text/format/schema", body_text, &found, param));
  } else {
    return FieldError(
        param, "text.format.type",
        "text.format.type \"" + type + "\" is unknown; expected text, json_object or json_schema");
  }
  out->grammar = std::move(found[0].spec);
  out->grammar_field = std::move(found[0].field);
  return OkStatus();
}

void RestoreToolSchemaOrder(const std::string& body_text, GenerationRequest* out) {
  if (out->tools.empty()) return;
  const ordered_json o = ordered_json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) return;
  const ordered_json* list = nullptr;
  const char* key = nullptr;
  for (const char* k : {"tools", "functions"}) {
    if (o.contains(k) && o[k].is_array()) {
      list = &o[k];
      key = k;
      break;
    }
  }
  if (list == nullptr || list->size() != out->tools.size()) return;
  for (size_t i = 0; i < list->size(); ++i) {
    const ordered_json& t = (*list)[i];
    const ordered_json* schema = nullptr;
    if (std::string(key) == "functions") {
      if (t.contains("parameters")) schema = &t["parameters"];
    } else if (t.contains("function") && t["function"].contains("parameters")) {
      schema = &t["function"]["parameters"];  // OpenAI
    } else if (t.contains("input_schema")) {
      schema = &t["input_schema"];  // Anthropic
    }
    if (schema != nullptr && schema->is_object()) {
      out->tools[i]["function"]["parameters"] = *schema;
    }
  }
}

}  // namespace loom
