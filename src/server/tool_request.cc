#include "server/tool_request.h"

#include "server/json_fields.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A tool name: 1..256 bytes, no whitespace or control characters (OpenAI allows
// [a-zA-Z0-9_-]{1,64}; MCP clients use dots and colons too, so loom is more lenient).
Status CheckToolName(const json& name, const std::string& field, std::string* param) {
  if (!name.is_string()) {
    return FieldError(param, field, field + " is required and must be a string");
  }
  const std::string& s = name.get_ref<const std::string&>();
  if (s.empty() || s.size() > 256) {
    return FieldError(param, field, field + " must be 1 to 256 characters long");
  }
  for (unsigned char c : s) {
    if (c <= ' ' || c == 0x7f) {
      return FieldError(param, field,
                        field + " \"" + s + "\" must not contain whitespace or control characters");
    }
  }
  return OkStatus();
}

// Adds one function to out->tools after checking it.
Status AddFunction(const json& name, const json* description, const json* parameters,
                   const std::string& field, const std::string& params_key, GenerationRequest* out,
                   std::string* param) {
  RETURN_IF_ERROR(CheckToolName(name, field + ".name", param));
  const std::string n = name.get<std::string>();
  for (const ordered_json& t : out->tools) {
    if (t["function"]["name"] == n) {
      return FieldError(param, field + ".name", field + ".name \"" + n + "\" is declared twice");
    }
  }
  ordered_json fn{{"name", n}};
  if (description != nullptr && !description->is_null()) {
    if (!description->is_string()) {
      return FieldError(param, field + ".description",
                        field + ".description must be a string, got " + JsonTypeName(*description));
    }
    fn["description"] = *description;
  }
  if (parameters != nullptr && !parameters->is_null()) {
    if (!parameters->is_object()) {
      return FieldError(param, field + "." + params_key,
                        field + "." + params_key + " must be a JSON Schema object, got " +
                            JsonTypeName(*parameters));
    }
    fn["parameters"] = *parameters;
  } else {
    fn["parameters"] = ordered_json{{"type", "object"}, {"properties", ordered_json::object()}};
  }
  out->tools.push_back(ordered_json{{"type", "function"}, {"function", std::move(fn)}});
  return OkStatus();
}

const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool HasTool(const GenerationRequest& req, const std::string& name) {
  for (const ordered_json& t : req.tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

Status SetNamedChoice(const json* name, const std::string& field, GenerationRequest* out,
                      std::string* param) {
  if (name == nullptr || !name->is_string()) {
    return FieldError(param, field, field + " is required and must be a string");
  }
  if (!HasTool(*out, name->get<std::string>())) {
    return FieldError(
        param, field,
        field + " \"" + name->get<std::string>() + "\" is not one of the request's tools");
  }
  out->tool_choice = ToolChoiceMode::kNamed;
  out->tool_choice_name = name->get<std::string>();
  return OkStatus();
}

// Whether a Responses API tool `type` is a hosted tool the model is simply not shown (rather than
// a 400): web search is optional to an answer, and Codex declares it in every request.
bool IsSkippedHostedTool(const std::string& type) {
  return type == "web_search" || type == "web_search_preview" ||
         type.rfind("web_search_preview_", 0) == 0;
}

// One Responses function tool ({"type": "function", "name", ...}) at `field`.
Status AddResponsesFunction(const json& t, const ordered_json* ordered, const std::string& field,
                            GenerationRequest* out, std::string* param) {
  RETURN_IF_ERROR(AddFunction(t.contains("name") ? t["name"] : json(), Member(t, "description"),
                              Member(t, "parameters"), field, "parameters", out, param));
  if (const json* strict = Member(t, "strict"); strict != nullptr && !strict->is_boolean()) {
    return FieldError(param, field + ".strict", field + ".strict must be a boolean");
  }
  if (ordered != nullptr && ordered->is_object() && ordered->contains("parameters") &&
      (*ordered)["parameters"].is_object()) {
    out->tools.back()["function"]["parameters"] = (*ordered)["parameters"];
  }
  return OkStatus();
}

}  // namespace

Status ParseResponsesTools(const json& tools, const ordered_json* ordered_tools,
                           GenerationRequest* out, std::map<std::string, std::string>* namespaces,
                           std::string* param) {
  if (!tools.is_array()) {
    return FieldError(param, "tools", "tools must be an array, got " + JsonTypeName(tools));
  }
  auto ordered_at = [](const ordered_json* list, size_t i) -> const ordered_json* {
    return list != nullptr && list->is_array() && i < list->size() ? &(*list)[i] : nullptr;
  };
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string name = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return FieldError(param, name, name + " must be an object");
    const json* type = Member(t, "type");
    if (type == nullptr || !type->is_string()) {
      return FieldError(param, name + ".type", name + ".type is required and must be a string");
    }
    const std::string ty = type->get<std::string>();
    const ordered_json* ordered = ordered_at(ordered_tools, i);
    if (ty == "function") {
      if (Member(t, "function") != nullptr && Member(t, "name") == nullptr) {
        return FieldError(param, name + ".name",
                          name +
                              ".name is required: Responses API function tools are flat "
                              "({\"type\": \"function\", \"name\", \"parameters\"}), "
                              "not nested under \"function\"");
      }
      RETURN_IF_ERROR(AddResponsesFunction(t, ordered, name, out, param));
    } else if (ty == "namespace") {
      const json* ns = Member(t, "name");
      if (ns == nullptr || !ns->is_string() || ns->get<std::string>().empty()) {
        return FieldError(param, name + ".name", name + ".name is required and must be a string");
      }
      const json* inner = Member(t, "tools");
      if (inner == nullptr || !inner->is_array()) {
        return FieldError(param, name + ".tools", name + ".tools must be an array of tools");
      }
      const ordered_json* ordered_inner =
          ordered != nullptr && ordered->contains("tools") ? &(*ordered)["tools"] : nullptr;
      for (size_t j = 0; j < inner->size(); ++j) {
        const std::string iname = name + ".tools[" + std::to_string(j) + "]";
        const json& it = (*inner)[j];
        if (!it.is_object() || it.value("type", "") != "function") {
          return FieldError(param, iname + ".type",
                            iname + ".type must be \"function\" (a namespace groups functions)");
        }
        RETURN_IF_ERROR(AddResponsesFunction(it, ordered_at(ordered_inner, j), iname, out, param));
        (*namespaces)[it["name"].get<std::string>()] = ns->get<std::string>();
      }
    } else if (IsSkippedHostedTool(ty)) {
      continue;
    } else {
      return FieldError(param, name + ".type",
                        name + ".type \"" + ty +
                            "\" is not supported: loom runs function tools only (web_search is "
                            "accepted and not used)");
    }
  }
  return OkStatus();
}

Status ParseResponsesToolChoice(const json& choice, GenerationRequest* out, std::string* param) {
  if (choice.is_object()) {
    const json* type = Member(choice, "type");
    if (type == nullptr || *type != "function") {
      return FieldError(param, "tool_choice.type",
                        "tool_choice.type must be \"function\" (loom runs function tools only)" +
                            std::string(type != nullptr && type->is_string()
                                            ? ", got \"" + type->get<std::string>() + "\""
                                            : ""));
    }
    RETURN_IF_ERROR(SetNamedChoice(Member(choice, "name"), "tool_choice.name", out, param));
    return OkStatus();
  }
  // "auto" without tools asks for nothing (Codex-style requests whose only tool is web_search).
  if (choice == "auto" && out->tools.empty()) return OkStatus();
  return ParseOpenAiToolChoice(choice, "tool_choice", out, param);
}

Status ParseOpenAiTools(const json& tools, const std::string& field, GenerationRequest* out,
                        std::string* param) {
  if (!tools.is_array()) {
    return FieldError(param, field, field + " must be an array, got " + JsonTypeName(tools));
  }
  const bool legacy = field == "functions";
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string name = field + "[" + std::to_string(i) + "]";
    if (!t.is_object()) return FieldError(param, name, name + " must be an object");
    if (legacy) {
      RETURN_IF_ERROR(AddFunction(t.contains("name") ? t["name"] : json(), Member(t, "description"),
                                  Member(t, "parameters"), name, "parameters", out, param));
      continue;
    }
    const json* type = Member(t, "type");
    if (type == nullptr || !type->is_string()) {
      return FieldError(param, name + ".type", name + ".type is required and must be \"function\"");
    }
    if (*type != "function") {
      return FieldError(param, name + ".type",
                        name + ".type \"" + type->get<std::string>() +
                            "\" is not supported: loom runs function tools only");
    }
    const json* fn = Member(t, "function");
    if (fn == nullptr || !fn->is_object()) {
      return FieldError(param, name + ".function",
                        name + ".function is required and must be an object");
    }
    RETURN_IF_ERROR(AddFunction(fn->contains("name") ? (*fn)["name"] : json(),
                                Member(*fn, "description"), Member(*fn, "parameters"),
                                name + ".function", "parameters", out, param));
  }
  return OkStatus();
}

Status ParseAnthropicTools(const json& tools, GenerationRequest* out, std::string* param) {
  if (!tools.is_array()) {
    return FieldError(param, "tools", "tools must be an array, got " + JsonTypeName(tools));
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string name = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return FieldError(param, name, name + " must be an object");
    if (const json* type = Member(t, "type"); type != nullptr && *type != "custom") {
      return FieldError(param, name + ".type",
                        name + ".type " + type->dump() +
                            " is a server tool, which loom cannot run; declare client tools (with "
                            "input_schema) only");
    }
    const json* schema = Member(t, "input_schema");
    if (schema == nullptr) {
      return FieldError(param, name + ".input_schema", name + ".input_schema is required");
    }
    RETURN_IF_ERROR(AddFunction(t.contains("name") ? t["name"] : json(), Member(t, "description"),
                                schema, name, "input_schema", out, param));
  }
  return OkStatus();
}

Status ParseOpenAiToolChoice(const json& choice, const std::string& field, GenerationRequest* out,
                             std::string* param) {
  if (choice.is_string()) {
    const std::string c = choice.get<std::string>();
    if (c == "none") {
      out->tool_choice = ToolChoiceMode::kNone;
    } else if (c == "auto") {
      out->tool_choice = ToolChoiceMode::kAuto;
    } else if (c == "required" && field == "tool_choice") {
      out->tool_choice = ToolChoiceMode::kRequired;
    } else {
      return FieldError(param, field,
                        field + " \"" + c + "\" is unknown; expected " +
                            (field == "tool_choice" ? "none, auto, required" : "none, auto") +
                            " or an object naming a function");
    }
  } else if (choice.is_object()) {
    if (field == "function_call") {
      RETURN_IF_ERROR(SetNamedChoice(Member(choice, "name"), field + ".name", out, param));
    } else {
      const json* type = Member(choice, "type");
      if (type == nullptr || *type != "function") {
        return FieldError(param, field + ".type", field + ".type must be \"function\"");
      }
      const json* fn = Member(choice, "function");
      if (fn == nullptr || !fn->is_object()) {
        return FieldError(param, field + ".function", field + ".function must be an object");
      }
      RETURN_IF_ERROR(SetNamedChoice(Member(*fn, "name"), field + ".function.name", out, param));
    }
  } else {
    return FieldError(param, field,
                      field + " must be a string or an object, got " + JsonTypeName(choice));
  }
  if (out->tool_choice != ToolChoiceMode::kNone && out->tools.empty()) {
    return FieldError(param, field, field + " is set but the request declares no tools");
  }
  return OkStatus();
}

Status ParseAnthropicToolChoice(const json& choice, GenerationRequest* out, std::string* param) {
  if (!choice.is_object()) {
    return FieldError(param, "tool_choice",
                      "tool_choice must be an object with a \"type\", got " + JsonTypeName(choice));
  }
  const json* type = Member(choice, "type");
  if (type == nullptr || !type->is_string()) {
    return FieldError(param, "tool_choice.type",
                      "tool_choice.type is required and must be a string");
  }
  const std::string t = type->get<std::string>();
  if (t == "auto") {
    out->tool_choice = ToolChoiceMode::kAuto;
  } else if (t == "none") {
    out->tool_choice = ToolChoiceMode::kNone;
  } else if (t == "any") {
    out->tool_choice = ToolChoiceMode::kRequired;
  } else if (t == "tool") {
    RETURN_IF_ERROR(SetNamedChoice(Member(choice, "name"), "tool_choice.name", out, param));
  } else {
    return FieldError(
        param, "tool_choice.type",
        "tool_choice.type \"" + t + "\" is unknown; expected auto, any, tool or none");
  }
  if (const json* d = Member(choice, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) {
      return FieldError(param, "tool_choice.disable_parallel_tool_use",
                        "tool_choice.disable_parallel_tool_use must be a boolean");
    }
    out->parallel_tool_calls = !d->get<bool>();
  }
  if (out->tool_choice != ToolChoiceMode::kNone && out->tools.empty()) {
    return FieldError(param, "tool_choice", "tool_choice is set but the request declares no tools");
  }
  return OkStatus();
}

ordered_json TemplateToolCall(const std::string& id, const std::string& name,
                              const json& arguments) {
  ordered_json args;
  if (arguments.is_string()) {
    ordered_json parsed = ordered_json::parse(arguments.get<std::string>(), nullptr,
                                              /*allow_exceptions=*/false);
    args = parsed.is_object() ? parsed : ordered_json(arguments.get<std::string>());
  } else {
    args = ordered_json(arguments);
  }
  return ordered_json{{"id", id},
                      {"type", "function"},
                      {"function", ordered_json{{"name", name}, {"arguments", std::move(args)}}}};
}

Status ParseOpenAiAssistantToolCalls(const json& calls, const std::string& field,
                                     ordered_json* message, std::string* param) {
  if (!calls.is_array()) {
    return FieldError(param, field, field + " must be an array, got " + JsonTypeName(calls));
  }
  ordered_json out = ordered_json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const json& c = calls[j];
    const std::string name = field + "[" + std::to_string(j) + "]";
    if (!c.is_object()) return FieldError(param, name, name + " must be an object");
    std::string id;
    if (const json* v = Member(c, "id")) {
      if (!v->is_string()) return FieldError(param, name + ".id", name + ".id must be a string");
      id = v->get<std::string>();
    }
    if (const json* type = Member(c, "type"); type != nullptr && *type != "function") {
      return FieldError(param, name + ".type", name + ".type must be \"function\"");
    }
    const json* fn = Member(c, "function");
    if (fn == nullptr || !fn->is_object()) {
      return FieldError(param, name + ".function",
                        name + ".function is required and must be an object");
    }
    RETURN_IF_ERROR(CheckToolName(fn->contains("name") ? (*fn)["name"] : json(),
                                  name + ".function.name", param));
    json args = json::object();
    if (const json* a = Member(*fn, "arguments")) {
      if (!a->is_string() && !a->is_object()) {
        return FieldError(
            param, name + ".function.arguments",
            name + ".function.arguments must be a string of JSON, got " + JsonTypeName(*a));
      }
      args = *a;
    }
    out.push_back(TemplateToolCall(id, (*fn)["name"].get<std::string>(), args));
  }
  (*message)["tool_calls"] = std::move(out);
  return OkStatus();
}

std::string ToolNameForCallId(const ordered_json& messages, const std::string& id) {
  for (auto m = messages.rbegin(); m != messages.rend(); ++m) {
    if (!m->contains("tool_calls")) continue;
    for (const ordered_json& c : (*m)["tool_calls"]) {
      if (c["id"] == id) return c["function"]["name"].get<std::string>();
    }
  }
  return "";
}

}  // namespace loom
