#include "server/literal_schema_grammar.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>

#include "base/strings.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kGemmaQuote = "<|\"|>";
constexpr int kMaxRepeat = 10000;  // GBNF's largest quantifier bound

// What LiteralArgs reads as a bare key or scalar (tool_parser_literal.cc IsBareChar).
bool IsBareChar(char c) {
  return std::string_view(" \t\r\n:=,{}[]()<>'\"").find(c) == std::string_view::npos;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  });
}

// `s` inside a Python string literal quoted with `quote`.
std::string PythonEscape(std::string_view s, char quote) {
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string Alternatives(const std::vector<std::string>& alts) {
  return alts.size() == 1 ? alts[0] : "(" + JoinStrings(alts, " | ") + ")";
}

// The keywords this writer reads, or leaves to a JSON Schema part, or ignores as annotations.
bool IsKnownKeyword(const std::string& k, const ordered_json& v) {
  if (k == "uniqueItems") return v.is_boolean() && !v.get<bool>();
  static const std::set<std::string> kKnown = {"type",
                                               "nullable",
                                               "enum",
                                               "const",
                                               "anyOf",
                                               "oneOf",
                                               "$ref",
                                               "$defs",
                                               "definitions",
                                               "properties",
                                               "required",
                                               "additionalProperties",
                                               "items",
                                               "minItems",
                                               "maxItems",
                                               "minLength",
                                               "maxLength",
                                               "pattern",
                                               "format",
                                               "minimum",
                                               "maximum",
                                               "exclusiveMinimum",
                                               "exclusiveMaximum",
                                               "title",
                                               "description",
                                               "default",
                                               "examples",
                                               "$schema",
                                               "$id",
                                               "$comment",
                                               "deprecated",
                                               "readOnly",
                                               "writeOnly"};
  return kKnown.contains(k);
}

}  // namespace

std::string GbnfLiteral(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", b);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

LiteralSchemaGrammar::LiteralSchemaGrammar(LiteralDialect dialect, bool forced, std::string prefix,
                                           std::string* text, std::vector<GrammarPart>* parts)
    : dialect_(dialect), forced_(forced), prefix_(std::move(prefix)), text_(text), parts_(parts) {}

StatusOr<std::string> LiteralSchemaGrammar::Arguments(const ordered_json& schema) {
  root_ = &schema;
  refs_.clear();
  error_ = OkStatus();
  const ordered_json* s = &schema;
  if (const auto r = s->find("$ref"); s->is_object() && r != s->end() && r->is_string()) {
    // Only the object form can be a call's arguments: resolve the reference here.
    const std::string pointer = r->get<std::string>();
    try {
      s = &schema.at(ordered_json::json_pointer(pointer.substr(1)));
    } catch (const ordered_json::exception&) {
      return InvalidArgumentError("#: $ref \"" + pointer + "\" does not resolve");
    }
  }
  std::string args;
  if (s->is_object()) {
    if (forced_) {
      for (const auto& [k, v] : s->items()) {
        if (!IsKnownKeyword(k, v)) Fail("#", "keyword \"" + k + "\" is not supported");
      }
    }
    args = Object(*s, "#", /*kwargs=*/dialect_ == LiteralDialect::kPython);
  } else {
    args = Object(ordered_json::object(), "#", dialect_ == LiteralDialect::kPython);
  }
  root_ = nullptr;
  if (!error_.ok()) return error_;
  return args;
}

void LiteralSchemaGrammar::Fail(const std::string& path, const std::string& why) {
  if (forced_ && error_.ok()) {
    error_ = InvalidArgumentError(
        path + ": " + why + " in " +
        (dialect_ == LiteralDialect::kGemma4 ? "Gemma 4's" : "Python's (tool_code)") +
        " call syntax");
  }
}

std::string LiteralSchemaGrammar::NewRule(const std::string& body) {
  const std::string name = prefix_ + std::to_string(num_rules_++);
  *text_ += name + " ::= " + body + "\n";
  return name;
}

std::string LiteralSchemaGrammar::Value(const ordered_json& s, const std::string& path) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) Fail(path, "the schema false accepts no value");
    return AnyValue();
  }
  if (!s.is_object()) return AnyValue();
  if (forced_) {
    for (const auto& [k, v] : s.items()) {
      if (!IsKnownKeyword(k, v)) Fail(path, "keyword \"" + k + "\" is not supported");
    }
  }
  if (const auto r = s.find("$ref"); r != s.end() && r->is_string()) {
    return Ref(r->get<std::string>(), path);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto alts = s.find(key);
    if (alts == s.end() || !alts->is_array() || alts->empty()) continue;
    std::vector<std::string> out;
    for (size_t i = 0; i < alts->size(); ++i) {
      out.push_back(Value((*alts)[i], path + "/" + key + "/" + std::to_string(i)));
    }
    return Alternatives(out);
  }
  if (const auto e = s.find("enum"); e != s.end() && e->is_array() && !e->empty()) {
    std::vector<std::string> out;
    for (const auto& v : *e) out.push_back(Literal(v));
    return Alternatives(out);
  }
  if (const auto c = s.find("const"); c != s.end()) return Literal(*c);
  std::vector<std::string> types;
  if (const auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    if (t->is_array()) {
      for (const auto& e : *t) {
        if (e.is_string()) types.push_back(e.get<std::string>());
      }
    }
  } else {  // inferred from the keywords, as the JSON Schema front end does
    auto has = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
    };
    if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has({"items", "minItems", "maxItems"})) types.push_back("array");
    if (has({"minLength", "maxLength", "pattern"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
      types.push_back("number");
    }
  }
  if (const auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>()) {
    types.push_back("null");
  }
  if (types.empty()) return AnyValue();
  std::vector<std::string> out;
  for (const std::string& t : types) out.push_back(Typed(s, t, path));
  return Alternatives(out);
}

std::string LiteralSchemaGrammar::Typed(const ordered_json& s, const std::string& type,
                                        const std::string& path) {
  const bool python = dialect_ == LiteralDialect::kPython;
  if (type == "string") {
    if (s.contains("pattern") || s.contains("format")) return python ? JsonPart(s, type) : String();
    if (s.contains("minLength") || s.contains("maxLength")) return BoundedString(s);
    return String();
  }
  if (type == "integer" || type == "number") return JsonPart(s, type);
  if (type == "boolean") return python ? R"(("True" | "False"))" : R"(("true" | "false"))";
  if (type == "null") return python ? R"("None")" : R"("null")";
  if (type == "array") return Array(s, path);
  if (type == "object") return Object(s, path, /*kwargs=*/false);
  Fail(path, "type \"" + type + "\" is unknown");
  return AnyValue();
}

std::string LiteralSchemaGrammar::JsonPart(const ordered_json& s, const std::string& type) {
  static const char* const kKeys[] = {"minimum",          "maximum",   "exclusiveMinimum",
                                      "exclusiveMaximum", "minLength", "maxLength",
                                      "pattern",          "format"};
  ordered_json schema = {{"type", type}};
  for (const char* k : kKeys) {
    if (s.contains(k)) schema[k] = s[k];
  }
  const std::string name = prefix_ + "json" + std::to_string(num_rules_++);
  parts_->push_back(GrammarPart{name, GrammarPart::Kind::kJsonSchema, schema.dump(),
                                forced_ ? "" : ordered_json{{"type", type}}.dump()});
  return name;
}

std::string LiteralSchemaGrammar::Array(const ordered_json& s, const std::string& path) {
  const bool python = dialect_ == LiteralDialect::kPython;
  std::string item;
  if (const auto it = s.find("items"); it != s.end() && !it->is_array()) {
    item = Value(*it, path + "/items");
  } else {
    if (it != s.end()) Fail(path, "items as an array (tuple) is not supported");
    item = AnyValue();
  }
  auto bound = [&](const char* key, int64_t dflt) {
    const auto v = s.find(key);
    return v != s.end() && v->is_number_integer() ? v->get<int64_t>() : dflt;
  };
  const int64_t min_items = std::max<int64_t>(0, bound("minItems", 0));
  int64_t max_items = bound("maxItems", -1);
  if (max_items > kMaxRepeat || min_items > kMaxRepeat) {
    if (min_items > kMaxRepeat) Fail(path, "minItems past " + std::to_string(kMaxRepeat));
    max_items = -1;
  }
  if (max_items >= 0 && max_items < min_items) {
    Fail(path, "maxItems below minItems accepts no array");
    max_items = min_items;
  }
  const std::string sep = python ? R"("," " "?)" : R"(",")";
  const std::string more = "(" + sep + " " + item + ")";
  auto repeat = [&](int64_t lo, int64_t hi) {  // `more` lo..hi times (hi < 0: unbounded)
    if (hi < 0) return more + (lo == 0 ? "*" : "{" + std::to_string(lo) + ",}");
    if (hi == 0) return std::string();
    return more + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  };
  std::string body;
  if (max_items == 0) {
    body = R"("[" "]")";
  } else if (min_items == 0) {
    body = R"("[" ()" + item + " " + repeat(0, max_items < 0 ? -1 : max_items - 1) + R"()? "]")";
  } else {
    body = R"("[" )" + item + " " + repeat(min_items - 1, max_items < 0 ? -1 : max_items - 1) +
           R"( "]")";
  }
  return NewRule(body);
}

std::string LiteralSchemaGrammar::Object(const ordered_json& s, const std::string& path,
                                         bool kwargs) {
  const bool python = dialect_ == LiteralDialect::kPython;
  const std::string sep = python ? R"("," " "?)" : R"(",")";
  const std::string open = kwargs ? R"("(")" : R"("{")";
  const std::string close = kwargs ? "\")\"" : "\"}\"";
  std::vector<std::string> required;
  if (const auto r = s.find("required"); r != s.end() && r->is_array()) {
    for (const auto& n : *r) {
      if (n.is_string()) required.push_back(n.get<std::string>());
    }
  }
  const auto props = s.find("properties");
  if (props != s.end() && props->is_object()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : props->items()) keys.push_back(k);
    if (!python) {  // Gemma 4's template: dictsort (case-insensitive)
      std::stable_sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) {
        return Lower(a) < Lower(b);
      });
    }
    for (const std::string& r : required) {
      if (!props->contains(r)) Fail(path, "required property \"" + r + "\" is not in properties");
    }
    std::vector<Member> members;
    for (const std::string& k : keys) {
      const bool req = std::find(required.begin(), required.end(), k) != required.end();
      std::string key;
      if (kwargs) {
        if (IsIdentifier(k)) key = GbnfLiteral(k + "=");
      } else if (python) {
        key = "(" + GbnfLiteral("\"" + PythonEscape(k, '"') + "\"") + " | " +
              GbnfLiteral("'" + PythonEscape(k, '\'') + "'") + R"() ":" " "?)";
      } else if (!k.empty() && std::all_of(k.begin(), k.end(), IsBareChar)) {
        key = GbnfLiteral(k + ":");
      } else if (k.find(kGemmaQuote) == std::string::npos) {
        key = GbnfLiteral(std::string(kGemmaQuote) + k + std::string(kGemmaQuote) + ":");
      }
      if (key.empty()) {  // a name the syntax cannot write: left out, unless it must come
        if (req) Fail(path, "property \"" + k + "\" cannot be written as a key");
        continue;
      }
      members.push_back(Member{key, Value((*props)[k], path + "/properties/" + k), req});
    }
    return NewRule(open + " " + Members(members, sep) + " " + close);
  }
  for (const std::string& r : required) {
    Fail(path, "required property \"" + r + "\" is not in properties");
  }
  // No declared properties: any keys, valued by additionalProperties (false: none).
  const auto extra = s.find("additionalProperties");
  if (extra != s.end() && extra->is_boolean() && !extra->get<bool>()) {
    return open + " " + close;
  }
  const std::string value = extra != s.end() && extra->is_object()
                                ? Value(*extra, path + "/additionalProperties")
                                : AnyValue();
  std::string key;
  if (kwargs) {
    key = R"([a-zA-Z_] [a-zA-Z0-9_]* "=")";
  } else if (python) {
    key = String() + R"( ":" " "?)";
  } else {
    key = R"(([^ \t\r\n:=,{}\[\]()<>'"]+ | )" + String() + R"() ":")";
  }
  const std::string member = "(" + key + " " + value + ")";
  return NewRule(open + " (" + member + " (" + sep + " " + member + ")*)? " + close);
}

std::string LiteralSchemaGrammar::Members(const std::vector<Member>& m, const std::string& sep) {
  // after[k]: members k.. each behind `sep` (one came before them), a rule as two expressions
  // use it (none needed for k = 0); first[k]: members k.. with none before them.
  const size_t n = m.size();
  std::vector<std::string> after(n + 1), first(n + 1);
  for (size_t k = n; k-- > 0;) {
    const std::string one = "(" + m[k].key_gbnf + " " + m[k].value + ")";
    const std::string behind = "(" + sep + " " + one + ")";
    if (k > 0) after[k] = NewRule(behind + (m[k].required ? " " : "? ") + after[k + 1]);
    if (m[k].required) {
      first[k] = one + " " + after[k + 1];
    } else if (first[k + 1].empty()) {
      first[k] = "(" + one + " " + after[k + 1] + ")?";
    } else {
      first[k] = "(" + one + " " + after[k + 1] + " | " + first[k + 1] + ")";
    }
  }
  return first[0].empty() ? "\"\"" : first[0];
}

std::string LiteralSchemaGrammar::Ref(const std::string& pointer, const std::string& path) {
  if (const auto it = refs_.find(pointer); it != refs_.end()) return it->second;
  const ordered_json* target = nullptr;
  if (pointer.starts_with("#")) {
    try {
      target = &root_->at(ordered_json::json_pointer(pointer.substr(1)));
    } catch (const ordered_json::exception&) {
      target = nullptr;
    }
  }
  if (target == nullptr) {
    Fail(path, "$ref \"" + pointer + "\" does not resolve");
    return AnyValue();
  }
  // Named before its body is written: a recursive schema refers to itself by the name.
  const std::string name = prefix_ + std::to_string(num_rules_++);
  refs_[pointer] = name;
  const std::string body = Value(*target, pointer);
  *text_ += name + " ::= " + body + "\n";
  return name;
}

std::string LiteralSchemaGrammar::Literal(const ordered_json& v) {
  const bool python = dialect_ == LiteralDialect::kPython;
  if (v.is_string()) return LiteralString(v.get<std::string>());
  if (v.is_boolean()) {
    return GbnfLiteral(v.get<bool>() ? (python ? "True" : "true") : (python ? "False" : "false"));
  }
  if (v.is_null()) return GbnfLiteral(python ? "None" : "null");
  if (v.is_number()) return GbnfLiteral(v.dump());
  const std::string sep = GbnfLiteral(python ? ", " : ",");
  std::vector<std::string> items;
  if (v.is_array()) {
    for (const auto& e : v) items.push_back(Literal(e));
    return "(" + GbnfLiteral("[") + " " + JoinStrings(items, " " + sep + " ") + " " +
           GbnfLiteral("]") + ")";
  }
  std::vector<std::string> keys;
  for (const auto& [k, e] : v.items()) keys.push_back(k);
  if (!python) {
    std::stable_sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) {
      return Lower(a) < Lower(b);
    });
  }
  for (const std::string& k : keys) {
    const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), IsBareChar);
    const std::string key = python ? "\"" + PythonEscape(k, '"') + "\": "
                            : bare ? k + ":"
                                   : std::string(kGemmaQuote) + k + std::string(kGemmaQuote) + ":";
    items.push_back(GbnfLiteral(key) + " " + Literal(v[k]));
  }
  return "(" + GbnfLiteral("{") + " " + JoinStrings(items, " " + sep + " ") + " " +
         GbnfLiteral("}") + ")";
}

std::string LiteralSchemaGrammar::LiteralString(const std::string& s) {
  if (dialect_ == LiteralDialect::kGemma4) {
    return GbnfLiteral(std::string(kGemmaQuote) + s + std::string(kGemmaQuote));
  }
  return "(" + GbnfLiteral("\"" + PythonEscape(s, '"') + "\"") + " | " +
         GbnfLiteral("'" + PythonEscape(s, '\'') + "'") + ")";
}

std::string LiteralSchemaGrammar::String() {
  if (!string_.empty()) return string_;
  if (dialect_ == LiteralDialect::kGemma4) {
    // Raw text up to and including the closing quote: LiteralArgs reads a string so.
    const std::string upto = prefix_ + "text";
    parts_->push_back(GrammarPart{upto, GrammarPart::Kind::kUpTo, std::string(kGemmaQuote)});
    string_ = NewRule(GbnfLiteral(kGemmaQuote) + " " + upto);
  } else {
    python_escape_ = NewRule(
        R"("\\" ([ntrbf0\\'"] | "x" [0-9a-fA-F]{2} | "u" [0-9a-fA-F]{4} | "U" [0-9a-fA-F]{8}))");
    string_ = NewRule(PythonString("*"));
  }
  return string_;
}

std::string LiteralSchemaGrammar::PythonString(const std::string& count) const {
  return R"("\"" ([^"\\\n] | )" + python_escape_ + ")" + count + R"( "\"" | "'" ([^'\\\n] | )" +
         python_escape_ + ")" + count + R"( "'")";
}

std::string LiteralSchemaGrammar::BoundedString(const ordered_json& s) {
  auto bound = [&](const char* key, int64_t dflt) {
    const auto v = s.find(key);
    return v != s.end() && v->is_number_integer() ? v->get<int64_t>() : dflt;
  };
  const int64_t lo = std::min<int64_t>(std::max<int64_t>(0, bound("minLength", 0)), kMaxRepeat);
  int64_t hi = bound("maxLength", -1);
  if (hi > kMaxRepeat) hi = -1;
  if (hi >= 0 && hi < lo) hi = lo;
  const std::string count = hi < 0 ? "{" + std::to_string(lo) + ",}"
                                   : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  if (dialect_ == LiteralDialect::kPython) {
    String();  // defines the escape rule: each escape is one code point
    return NewRule(PythonString(count));
  }
  // Code points other than '<', so that no closing quote can start inside: a narrower set of
  // strings, each of whose lengths is right.
  return NewRule(GbnfLiteral(kGemmaQuote) + " [^<]" + count + " " + GbnfLiteral(kGemmaQuote));
}

std::string LiteralSchemaGrammar::AnyValue() {
  if (!any_.empty()) return any_;
  const bool python = dialect_ == LiteralDialect::kPython;
  // Named first: the rule refers to itself.
  any_ = prefix_ + std::to_string(num_rules_++);
  const std::string str = String();
  const std::string num = JsonPart(ordered_json::object(), "number");
  const std::string sep = python ? R"("," " "?)" : R"(",")";
  const std::string key =
      python ? str + R"( ":" " "?)" : R"(([^ \t\r\n:=,{}\[\]()<>'"]+ | )" + str + R"() ":")";
  const std::string member = "(" + key + " " + any_ + ")";
  const std::string scalars =
      python ? R"("True" | "False" | "None")" : R"("true" | "false" | "null")";
  *text_ += any_ + " ::= " + str + " | " + num + " | " + scalars + R"( | "{" ()" + member + " (" +
            sep + " " + member + R"()*)? "}" | "[" ()" + any_ + " (" + sep + " " + any_ +
            R"()*)? "]")" + "\n";
  return any_;
}

}  // namespace loom
