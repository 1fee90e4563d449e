#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/utf8.h"
#include "grammar/integer_range.h"
#include "grammar/regex_grammar.h"

namespace loom {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default",    "examples", "$schema",
    "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};

const std::set<std::string, std::less<>> kSupported = {"type",
                                                       "enum",
                                                       "const",
                                                       "anyOf",
                                                       "oneOf",
                                                       "allOf",
                                                       "$ref",
                                                       "$defs",
                                                       "definitions",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "items",
                                                       "prefixItems",
                                                       "additionalItems",
                                                       "minItems",
                                                       "maxItems",
                                                       "minLength",
                                                       "maxLength",
                                                       "pattern",
                                                       "format",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum"};

const std::vector<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::vector<std::string> kArrayKeys = {"items", "prefixItems", "additionalItems", "minItems",
                                             "maxItems"};
const std::vector<std::string> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::vector<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum",
                                              "exclusiveMaximum"};

// Anchored regexes of the supported string formats (RFC 3339 dates and times, RFC 4122 UUIDs, a
// practical subset of RFC 5321 addresses, RFC 3986 URIs by their character set).
const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)"},
    {"time", R"(^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
    {"date-time",
     R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
    {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
    {"email",
     R"(^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$)"},
    // scheme ":" then //authority path-abempty, path-absolute or path-rootless, query, fragment,
    // with %XX escapes (no IP literals; a non-empty hier-part, as ajv-formats requires).
    {"uri",
     R"(^[A-Za-z][A-Za-z0-9+.\-]*:(//(([A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*@)?([A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*(:[0-9]*)?(/([A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*|/(([A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+(/([A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)?|([A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+(/([A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*)(\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?(#([A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?$)"},
    {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
    {"hostname",
     R"(^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$)"},
};

constexpr int64_t kMaxCount = 100000;  // minLength / maxLength / minItems / maxItems

std::string PointerToken(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool IsAnnotation(std::string_view key) { return kAnnotations.count(key) > 0; }

bool HasAny(const Json& s, const std::vector<std::string>& keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return s.contains(k); });
}

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    char32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// The JSON type names a value satisfies ("integer" values are numbers too).
bool ValueHasType(const Json& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options,
                 const GrammarBudget& budget = {})
      : root_(root), options_(options), budget_(budget) {}

  StatusOr<Grammar> Run() {
    const int32_t root = g_.AddRule("root");
    ASSIGN_OR_RETURN(const GrammarElement value, Compile(root_, "#"));
    GrammarSequence seq;
    Ws(&seq);
    seq.push_back(value);
    Ws(&seq);
    g_.AddAlternative(root, std::move(seq));
    g_.set_root(root);
    RETURN_IF_ERROR(g_.Validate().WithContext("JSON Schema"));
    return std::move(g_);
  }

  Grammar AnyValueGrammar() {
    const int32_t root = g_.AddRule("root");
    GrammarSequence seq;
    Ws(&seq);
    seq.push_back(AnyValue());
    Ws(&seq);
    g_.AddAlternative(root, std::move(seq));
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  static Status Err(const std::string& path, const std::string& what) {
    return InvalidArgumentError(path + ": " + what);
  }
  static Status Unsupported(const std::string& path, std::string_view key) {
    return Err(path, "keyword \"" + std::string(key) + "\" is not supported");
  }

  // --- Small pieces. ---

  void Ws(GrammarSequence* seq) {
    if (!options_.flexible_whitespace) return;
    if (ws_.rule_idx < 0) {
      ByteSet space;
      for (char c : {' ', '\t', '\n', '\r'}) space.Add(static_cast<uint8_t>(c));
      ws_ = g_.Repeat({GrammarElement::Bytes(space)}, 0, -1, "ws")[0];
    }
    seq->push_back(ws_);
  }
  static void Lit(std::string_view s, GrammarSequence* seq) { Grammar::AppendLiteral(s, seq); }
  GrammarElement LitElement(std::string_view s) {
    GrammarSequence seq;
    Lit(s, &seq);
    return g_.Group({std::move(seq)}, "literal");
  }
  // ws "," ws (", " spaced)
  void Sep(GrammarSequence* seq) {
    Ws(seq);
    Lit(Spaced() ? ", " : ",", seq);
    Ws(seq);
  }
  // ws ":" ws (": " spaced)
  void Colon(GrammarSequence* seq) {
    Ws(seq);
    Lit(Spaced() ? ": " : ":", seq);
    Ws(seq);
  }
  bool Spaced() const { return options_.spaced_separators && !options_.flexible_whitespace; }

  GrammarElement RegexElement(const std::string& anchored, std::string_view name) {
    StatusOr<GrammarSequence> seq = LowerRegex(anchored, RegexTarget::kRaw, &g_);
    CHECK(seq.ok()) << seq.status().ToString();
    return g_.Group({std::move(*seq)}, name);
  }

  // One character of a JSON string, any escape allowed.
  GrammarElement StringChar() {
    if (string_char_.rule_idx >= 0) return string_char_;
    const int32_t idx = g_.AddRule("string-char");
    g_.AddAlternative(idx, {g_.CodePointClass({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true)});
    GrammarSequence esc;
    Lit("\\", &esc);
    ByteSet simple;
    for (char c : std::string_view("\"\\/bfnrt")) simple.Add(static_cast<uint8_t>(c));
    esc.push_back(GrammarElement::Bytes(simple));
    g_.AddAlternative(idx, std::move(esc));
    // \uXXXX: any code unit but a surrogate, or a high + low surrogate pair (a lone surrogate
    // is not a character; most JSON parsers reject it).
    ByteSet hex = ByteSet::Range('0', '9');
    hex.AddRange('a', 'f');
    hex.AddRange('A', 'F');
    ByteSet not_d, d = ByteSet::Single('d'), high = ByteSet::Range('8', '9'),
                   low = ByteSet::Range('c', 'f');
    d.Add('D');
    for (int v = 0; v < 256; ++v) {
      if (hex.Contains(static_cast<uint8_t>(v)) && v != 'd' && v != 'D') {
        not_d.Add(static_cast<uint8_t>(v));
      }
    }
    high.AddRange('a', 'b');
    high.AddRange('A', 'B');
    low.AddRange('C', 'F');
    const GrammarElement h = GrammarElement::Bytes(hex);
    auto unit = [&](std::initializer_list<ByteSet> lead) {
      GrammarSequence s;
      Lit("\\u", &s);
      for (const ByteSet& b : lead) s.push_back(GrammarElement::Bytes(b));
      while (s.size() < 6) s.push_back(h);
      return s;
    };
    g_.AddAlternative(idx, unit({not_d}));
    g_.AddAlternative(idx, unit({d, ByteSet::Range('0', '7')}));
    GrammarSequence pair = unit({d, high});
    for (const GrammarElement& e : unit({d, low})) pair.push_back(e);
    g_.AddAlternative(idx, std::move(pair));
    string_char_ = GrammarElement::Rule(idx);
    return string_char_;
  }

  GrammarElement PlainString() {
    if (plain_string_.rule_idx >= 0) return plain_string_;
    GrammarSequence seq;
    Lit("\"", &seq);
    for (GrammarElement& e : g_.Repeat({StringChar()}, 0, -1, "string")) seq.push_back(e);
    Lit("\"", &seq);
    plain_string_ = g_.Group({std::move(seq)}, "string");
    return plain_string_;
  }

  GrammarElement PlainNumber() {
    if (number_.rule_idx < 0) {
      number_ = RegexElement(R"(^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$)", "number");
    }
    return number_;
  }

  GrammarElement AnyValue() {
    if (any_.rule_idx >= 0) return any_;
    const int32_t value = g_.AddRule("value");
    any_ = GrammarElement::Rule(value);
    // object ::= "{" ws "}" | "{" ws member (sep member)* ws "}"
    const int32_t member = g_.AddRule("member");
    {
      GrammarSequence m = {PlainString()};
      Colon(&m);
      m.push_back(any_);
      g_.AddAlternative(member, std::move(m));
    }
    auto container = [&](std::string_view name, char open, char close, GrammarElement item) {
      const int32_t idx = g_.AddRule(name);
      GrammarSequence empty;
      Lit(std::string(1, open), &empty);
      Ws(&empty);
      Lit(std::string(1, close), &empty);
      g_.AddAlternative(idx, std::move(empty));
      GrammarSequence full;
      Lit(std::string(1, open), &full);
      Ws(&full);
      full.push_back(item);
      GrammarSequence more;
      Sep(&more);
      more.push_back(item);
      for (GrammarElement& e : g_.Repeat(std::move(more), 0, -1, name)) full.push_back(e);
      Ws(&full);
      Lit(std::string(1, close), &full);
      g_.AddAlternative(idx, std::move(full));
      return GrammarElement::Rule(idx);
    };
    const GrammarElement object = container("object", '{', '}', GrammarElement::Rule(member));
    const GrammarElement array = container("array", '[', ']', any_);
    g_.AddAlternative(value, {object});
    g_.AddAlternative(value, {array});
    g_.AddAlternative(value, {PlainString()});
    g_.AddAlternative(value, {PlainNumber()});
    for (std::string_view lit : {"true", "false", "null"}) {
      GrammarSequence s;
      Lit(lit, &s);
      g_.AddAlternative(value, std::move(s));
    }
    return any_;
  }

  // --- References and merging. ---

  // The schema at local JSON pointer `pointer` ("" = the root), or null.
  const Json* ResolvePointer(std::string_view pointer) const {
    const Json* cur = &root_;
    if (pointer.empty()) return cur;
    if (pointer[0] != '/') return nullptr;
    size_t pos = 1;
    for (;;) {
      const size_t next = pointer.find('/', pos);
      std::string token(pointer.substr(pos, next == std::string_view::npos ? next : next - pos));
      std::string unescaped;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() &&
            (token[i + 1] == '0' || token[i + 1] == '1')) {
          unescaped.push_back(token[i + 1] == '0' ? '~' : '/');
          ++i;
        } else {
          unescaped.push_back(token[i]);
        }
      }
      if (cur->is_object()) {
        const auto it = cur->find(unescaped);
        if (it == cur->end()) return nullptr;
        cur = &*it;
      } else if (cur->is_array()) {
        if (unescaped.empty() || unescaped.size() > 9 ||
            unescaped.find_first_not_of("0123456789") != std::string::npos) {
          return nullptr;
        }
        const size_t idx = std::stoul(unescaped);
        if (idx >= cur->size()) return nullptr;
        cur = &(*cur)[idx];
      } else {
        return nullptr;
      }
      if (next == std::string_view::npos) return cur;
      pos = next + 1;
    }
  }

  StatusOr<const Json*> RefTarget(const Json& ref, const std::string& path) const {
    if (!ref.is_string()) return Err(path, "keyword \"$ref\" must be a string");
    const std::string& r = ref.get_ref<const std::string&>();
    if (r.empty() || r[0] != '#') {
      return Err(path, "$ref \"" + r + "\" is not supported (only local references \"#...\")");
    }
    const Json* target = ResolvePointer(std::string_view(r).substr(1));
    if (target == nullptr) return Err(path, "$ref \"" + r + "\" does not resolve");
    return target;
  }

  StatusOr<GrammarElement> RefRule(const Json& ref, const std::string& path) {
    ASSIGN_OR_RETURN(const Json* target, RefTarget(ref, path));
    const std::string& r = ref.get_ref<const std::string&>();
    if (const auto it = ref_rules_.find(r); it != ref_rules_.end()) {
      return GrammarElement::Rule(it->second);
    }
    const int32_t idx = g_.AddRule("ref" + r.substr(1));
    ref_rules_[r] = idx;
    ASSIGN_OR_RETURN(const GrammarElement e, Compile(*target, r));
    g_.AddAlternative(idx, {e});
    return GrammarElement::Rule(idx);
  }

  // `s` without its annotations and the given keys.
  static Json Without(const Json& s, std::initializer_list<std::string_view> keys) {
    Json out = Json::object();
    for (const auto& [k, v] : s.items()) {
      if (IsAnnotation(k) || std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      out[k] = v;
    }
    return out;
  }

  // An object schema equivalent to `s` with top-level $ref and allOf merged in (for merging).
  StatusOr<Json> Flatten(const Json& s, const std::string& path, int depth) const {
    if (depth > 32) return Err(path, "$ref / allOf nesting is too deep to merge (recursive?)");
    if (s.is_boolean()) {
      if (s.get<bool>()) return Json::object();
      return Err(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return Err(path, "a schema must be an object or a boolean");
    Json out = Without(s, {"$ref", "allOf", "$defs", "definitions"});
    if (s.contains("$ref")) {
      ASSIGN_OR_RETURN(const Json* target, RefTarget(s["$ref"], path));
      ASSIGN_OR_RETURN(Json t, Flatten(*target, s["$ref"].get<std::string>(), depth + 1));
      ASSIGN_OR_RETURN(out, Merge(t, out, path));
    }
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.empty()) return Err(path, "\"allOf\" must be a non-empty array");
      for (size_t i = 0; i < all.size(); ++i) {
        ASSIGN_OR_RETURN(Json m, Flatten(all[i], path + "/allOf/" + std::to_string(i), depth + 1));
        ASSIGN_OR_RETURN(out, Merge(out, m, path));
      }
    }
    return out;
  }

  static StatusOr<std::vector<std::string>> TypeList(const Json& t, const std::string& path) {
    std::vector<std::string> out;
    if (t.is_string()) {
      out.push_back(t.get<std::string>());
    } else if (t.is_array()) {
      for (const Json& x : t) {
        if (!x.is_string()) return Err(path, "\"type\" entries must be strings");
        out.push_back(x.get<std::string>());
      }
    } else {
      return Err(path, "\"type\" must be a string or an array");
    }
    return out;
  }

  // Both flattened (no $ref / allOf at the top).
  StatusOr<Json> Merge(const Json& a, const Json& b, const std::string& path) const {
    Json out = a;
    for (const auto& [k, v] : b.items()) {
      if (IsAnnotation(k)) continue;
      if (!out.contains(k)) {
        out[k] = v;
        continue;
      }
      Json& cur = out[k];
      if (cur == v) continue;
      if (k == "properties" && cur.is_object() && v.is_object()) {
        for (const auto& [name, sub] : v.items()) {
          if (cur.contains(name) && cur[name] != sub) {
            cur[name] = Json{{"allOf", Json::array({cur[name], sub})}};
          } else {
            cur[name] = sub;
          }
        }
      } else if (k == "required" && cur.is_array() && v.is_array()) {
        for (const Json& name : v) {
          if (std::find(cur.begin(), cur.end(), name) == cur.end()) cur.push_back(name);
        }
      } else if (k == "type") {
        ASSIGN_OR_RETURN(const auto ta, TypeList(cur, path));
        ASSIGN_OR_RETURN(const auto tb, TypeList(v, path));
        Json both = Json::array();
        for (const std::string& x : ta) {
          for (const std::string& y : tb) {
            if (x == y || (x == "integer" && y == "number")) both.push_back(x);
            if (x == "number" && y == "integer") both.push_back(y);
          }
        }
        if (both.empty()) return Err(path, "allOf: the members' \"type\"s have no common type");
        cur = both;
      } else if ((k == "minLength" || k == "minItems" || k == "minimum" ||
                  k == "exclusiveMinimum") &&
                 cur.is_number() && v.is_number()) {
        if (v.get<double>() > cur.get<double>()) cur = v;
      } else if ((k == "maxLength" || k == "maxItems" || k == "maximum" ||
                  k == "exclusiveMaximum") &&
                 cur.is_number() && v.is_number()) {
        if (v.get<double>() < cur.get<double>()) cur = v;
      } else if (k == "additionalProperties" && (cur == false || v == false)) {
        cur = false;
      } else {
        return Err(path,
                   "allOf: keyword \"" + k + "\" differs between members, which is not supported");
      }
    }
    return out;
  }

  // --- Schemas. ---

  StatusOr<GrammarElement> Compile(const Json& s, const std::string& path) {
    if (Status st = budget_.Check(g_.rules().size()); !st.ok()) return st.WithContext(path);
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      return Err(path, "the schema false matches nothing");
    }
    if (!s.is_object()) return Err(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (IsAnnotation(k) || kSupported.count(k) > 0) continue;
      if (k == "uniqueItems" && v == false) continue;
      // Property names are strings anyway (zod 4's z.record emits this form).
      if (k == "propertyNames" &&
          (v == true || v == Json::object() || v == Json{{"type", "string"}})) {
        continue;
      }
      return Unsupported(path, k);
    }
    if (s.contains("$ref")) {
      if (Without(s, {"$ref", "$defs", "definitions"}).empty()) return RefRule(s["$ref"], path);
      ASSIGN_OR_RETURN(const Json flat, Flatten(s, path, 0));
      return Compile(flat, path);
    }
    if (s.contains("allOf")) {
      ASSIGN_OR_RETURN(const Json flat, Flatten(s, path, 0));
      return Compile(flat, path);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) {
      if (s.contains("anyOf") && s.contains("oneOf")) {
        return Err(path, "\"anyOf\" together with \"oneOf\" is not supported");
      }
      const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
      const Json& branches = s[key];
      if (!branches.is_array() || branches.empty()) {
        return Err(path, "\"" + key + "\" must be a non-empty array");
      }
      const Json siblings = Without(s, {"anyOf", "oneOf", "$defs", "definitions"});
      if (key == "oneOf") RETURN_IF_ERROR(CheckDisjoint(branches, siblings, path));
      std::vector<GrammarSequence> alts;
      for (size_t i = 0; i < branches.size(); ++i) {
        const std::string bpath = path + "/" + key + "/" + std::to_string(i);
        if (siblings.empty()) {
          ASSIGN_OR_RETURN(const GrammarElement e, Compile(branches[i], bpath));
          alts.push_back({e});
          continue;
        }
        ASSIGN_OR_RETURN(const Json flat, Flatten(branches[i], bpath, 0));
        ASSIGN_OR_RETURN(const Json merged, Merge(siblings, flat, bpath));
        ASSIGN_OR_RETURN(const GrammarElement e, Compile(merged, bpath));
        alts.push_back({e});
      }
      return g_.Group(std::move(alts), key);
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      ASSIGN_OR_RETURN(types, TypeList(s["type"], path));
      for (const std::string& t : types) {
        static const std::set<std::string, std::less<>> kTypes = {
            "null", "boolean", "string", "integer", "number", "object", "array"};
        if (kTypes.count(t) == 0) return Err(path, "unknown type \"" + t + "\"");
      }
    }
    if (s.contains("enum") || s.contains("const")) return Constants(s, types, path);
    if (!s.contains("type")) {
      if (HasAny(s, kObjectKeys)) types.push_back("object");
      if (HasAny(s, kArrayKeys)) types.push_back("array");
      if (HasAny(s, kStringKeys)) types.push_back("string");
      if (HasAny(s, kNumberKeys)) types.push_back("number");
      if (types.empty()) return AnyValue();
    }
    std::vector<GrammarSequence> alts;
    for (const std::string& t : types) {
      ASSIGN_OR_RETURN(const GrammarElement e, CompileType(s, t, path));
      alts.push_back({e});
    }
    return g_.Group(std::move(alts), "type");
  }

  // What a oneOf branch can match, coarsely, to show branches disjoint: its JSON types (integer
  // counted as number), its values when it is an enum / const, and the required properties it
  // pins to one value (a discriminator). Empty types: anything.
  struct BranchShape {
    std::set<std::string> types;
    std::optional<std::vector<Json>> values;
    std::map<std::string, Json> pinned;
  };
  StatusOr<BranchShape> ShapeOf(const Json& branch, const Json& siblings,
                                const std::string& path) const {
    ASSIGN_OR_RETURN(Json flat, Flatten(branch, path, 0));
    if (!siblings.empty()) {
      ASSIGN_OR_RETURN(flat, Merge(siblings, flat, path));
    }
    BranchShape shape;
    auto add_type = [&](std::string t) { shape.types.insert(t == "integer" ? "number" : t); };
    if (flat.contains("const") || flat.contains("enum")) {
      shape.values = flat.contains("const")
                         ? std::vector<Json>{flat["const"]}
                         : std::vector<Json>(flat["enum"].begin(), flat["enum"].end());
      for (const Json& v : *shape.values) {
        add_type(v.is_null()      ? "null"
                 : v.is_boolean() ? "boolean"
                 : v.is_number()  ? "number"
                 : v.is_string()  ? "string"
                 : v.is_array()   ? "array"
                                  : "object");
      }
    } else if (flat.contains("type")) {
      ASSIGN_OR_RETURN(const auto types, TypeList(flat["type"], path));
      for (const std::string& t : types) add_type(t);
    }
    if (flat.contains("properties") && flat["properties"].is_object() &&
        flat.contains("required")) {
      for (const Json& name : flat["required"]) {
        if (!name.is_string() || !flat["properties"].contains(name.get<std::string>())) continue;
        const Json& p = flat["properties"][name.get<std::string>()];
        if (p.is_object() && p.contains("const"))
          shape.pinned[name.get<std::string>()] = p["const"];
        if (p.is_object() && p.contains("enum") && p["enum"].is_array() && p["enum"].size() == 1) {
          shape.pinned[name.get<std::string>()] = p["enum"][0];
        }
      }
    }
    return shape;
  }
  static bool Disjoint(const BranchShape& a, const BranchShape& b) {
    if (a.values && b.values) {
      for (const Json& v : *a.values) {
        if (std::find(b.values->begin(), b.values->end(), v) != b.values->end()) return false;
      }
      return true;
    }
    if (a.types.empty() || b.types.empty()) return false;
    std::vector<std::string> common;
    std::set_intersection(a.types.begin(), a.types.end(), b.types.begin(), b.types.end(),
                          std::back_inserter(common));
    if (common.empty()) return true;
    if (common != std::vector<std::string>{"object"}) return false;
    for (const auto& [name, v] : a.pinned) {
      const auto it = b.pinned.find(name);
      if (it != b.pinned.end() && it->second != v) return true;
    }
    return false;
  }
  // oneOf is compiled as anyOf, which is exact only when no document matches two branches:
  // refused unless the branches are disjoint by type, by value, or by a discriminator property.
  Status CheckDisjoint(const Json& branches, const Json& siblings, const std::string& path) const {
    std::vector<BranchShape> shapes;
    for (size_t i = 0; i < branches.size(); ++i) {
      ASSIGN_OR_RETURN(BranchShape shape,
                       ShapeOf(branches[i], siblings, path + "/oneOf/" + std::to_string(i)));
      for (size_t j = 0; j < shapes.size(); ++j) {
        if (!Disjoint(shapes[j], shape)) {
          return Err(path, "\"oneOf\" branches " + std::to_string(j) + " and " + std::to_string(i) +
                               " may both match a document, which is not supported (anyOf is, "
                               "and so are branches that differ by type, by value or by a "
                               "required const property)");
        }
      }
      shapes.push_back(std::move(shape));
    }
    return OkStatus();
  }

  StatusOr<GrammarElement> Constants(const Json& s, const std::vector<std::string>& types,
                                     const std::string& path) {
    std::vector<Json> values;
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) {
        return Err(path, "\"enum\" must be a non-empty array");
      }
      for (const Json& v : s["enum"]) {
        if (!s.contains("const") || v == s["const"]) values.push_back(v);
      }
    } else {
      values.push_back(s["const"]);
    }
    std::vector<GrammarSequence> alts;
    for (const Json& v : values) {
      const bool typed =
          types.empty() || std::any_of(types.begin(), types.end(),
                                       [&](const std::string& t) { return ValueHasType(v, t); });
      if (!typed) continue;
      GrammarSequence seq;
      Lit(v.dump(-1, ' ', false, Json::error_handler_t::replace), &seq);
      alts.push_back(std::move(seq));
    }
    if (alts.empty()) return Err(path, "no \"enum\" / \"const\" value satisfies the schema");
    return g_.Group(std::move(alts), "enum");
  }

  StatusOr<GrammarElement> CompileType(const Json& s, const std::string& t,
                                       const std::string& path) {
    if (t == "null") return LitElement("null");
    if (t == "boolean") return g_.Group({{LitElement("true")}, {LitElement("false")}}, "boolean");
    if (t == "string") return String(s, path);
    if (t == "integer") return Integer(s, path);
    if (t == "number") return Number(s, path);
    if (t == "object") return Object(s, path);
    return Array(s, path);
  }

  static StatusOr<std::optional<int64_t>> Count(const Json& s, const char* key,
                                                const std::string& path) {
    if (!s.contains(key)) return std::optional<int64_t>();
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Err(path, std::string("\"") + key + "\" must be a non-negative integer");
    }
    if (v.get<int64_t>() > kMaxCount) {
      return Err(path, std::string("\"") + key + "\" larger than 100000 is not supported");
    }
    return std::optional<int64_t>(v.get<int64_t>());
  }

  StatusOr<GrammarElement> String(const Json& s, const std::string& path) {
    ASSIGN_OR_RETURN(const auto min_len, Count(s, "minLength", path));
    ASSIGN_OR_RETURN(const auto max_len, Count(s, "maxLength", path));
    const bool has_pattern = s.contains("pattern"), has_format = s.contains("format");
    if (has_pattern && has_format) {
      return Err(path, "keyword \"format\" together with \"pattern\" is not supported");
    }
    if ((has_pattern || has_format) && (min_len || max_len)) {
      return Err(path, std::string("keyword \"") + (min_len ? "minLength" : "maxLength") +
                           "\" together with \"" + (has_pattern ? "pattern" : "format") +
                           "\" is not supported");
    }
    if (has_pattern || has_format) {
      std::string regex;
      if (has_pattern) {
        if (!s["pattern"].is_string()) return Err(path, "\"pattern\" must be a string");
        regex = s["pattern"].get<std::string>();
      } else {
        const Json& f = s["format"];
        const auto it = f.is_string() ? kFormats.find(f.get<std::string>()) : kFormats.end();
        if (it == kFormats.end()) return Err(path, "format " + f.dump() + " is not supported");
        regex = it->second;
      }
      StatusOr<GrammarSequence> body = LowerRegex(regex, RegexTarget::kJsonString, &g_);
      if (!body.ok()) {
        return Err(path, "keyword \"" + std::string(has_pattern ? "pattern" : "format") +
                             "\": " + body.status().message());
      }
      GrammarSequence seq;
      Lit("\"", &seq);
      for (GrammarElement& e : *body) seq.push_back(e);
      Lit("\"", &seq);
      return g_.Group({std::move(seq)}, "pattern");
    }
    if (!min_len && !max_len) return PlainString();
    const int64_t lo = min_len.value_or(0), hi = max_len ? *max_len : -1;
    if (hi >= 0 && lo > hi) return Err(path, "\"minLength\" is larger than \"maxLength\"");
    GrammarSequence seq;
    Lit("\"", &seq);
    for (GrammarElement& e : g_.Repeat({StringChar()}, lo, hi, "string")) seq.push_back(e);
    Lit("\"", &seq);
    return g_.Group({std::move(seq)}, "string");
  }

  // Calls fn(value, exclusive, key) for each bound keyword of one side present in `s`: minimum /
  // maximum (exclusive when draft 4's boolean exclusiveMinimum / exclusiveMaximum says so), then
  // draft 6+'s numeric exclusiveMinimum / exclusiveMaximum.
  template <typename Fn>
  static Status ForEachBound(const Json& s, bool lower, Fn fn) {
    const char* inc_key = lower ? "minimum" : "maximum";
    const char* exc_key = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    const bool draft4_exclusive = s.contains(exc_key) && s[exc_key].is_boolean();
    if (s.contains(inc_key)) {
      RETURN_IF_ERROR(fn(s[inc_key], draft4_exclusive && s[exc_key].get<bool>(), inc_key));
    }
    if (s.contains(exc_key) && !draft4_exclusive) RETURN_IF_ERROR(fn(s[exc_key], true, exc_key));
    return OkStatus();
  }

  // An integer bound: the tightest inclusive int64 bound, or nullopt when absent.
  static StatusOr<std::optional<int64_t>> Bound(const Json& s, bool lower,
                                                const std::string& path) {
    std::optional<int64_t> out;
    auto tighten = [&](int64_t v) {
      if (!out || (lower ? v > *out : v < *out)) out = v;
    };
    auto convert = [&](const Json& v, bool exclusive, const char* key) -> Status {
      if (!v.is_number()) return Err(path, std::string("\"") + key + "\" must be a number");
      constexpr double kLimit = 9.0e18;
      if (v.is_number_integer() &&
          !(v.is_number_unsigned() && v.get<uint64_t>() > 9000000000000000000u)) {
        const int64_t x = v.get<int64_t>();
        if (x > 9000000000000000000 || x < -9000000000000000000) {
          return Err(path, std::string("\"") + key + "\" is out of the supported range");
        }
        tighten(exclusive ? (lower ? x + 1 : x - 1) : x);
        return OkStatus();
      }
      const double d = v.get<double>();
      if (!(std::fabs(d) < kLimit)) {
        return Err(path, std::string("\"") + key + "\" is out of the supported range");
      }
      if (lower) {
        tighten(static_cast<int64_t>(exclusive ? std::floor(d) + 1 : std::ceil(d)));
      } else {
        tighten(static_cast<int64_t>(exclusive ? std::ceil(d) - 1 : std::floor(d)));
      }
      return OkStatus();
    };
    RETURN_IF_ERROR(ForEachBound(s, lower, convert));
    return out;
  }

  // The integer range a "format" on an integer or a number implies: OpenAPI's "int32" / "int64"
  // (checked by ajv-formats; int64 within the +-9e18 the integer bounds support), none for
  // "float" / "double" (no check beyond being a number) and for the string formats (they do not
  // apply to numbers); any other format is refused rather than ignored.
  static StatusOr<std::optional<std::pair<int64_t, int64_t>>> NumberFormat(
      const Json& s, const std::string& path) {
    using Range = std::optional<std::pair<int64_t, int64_t>>;
    if (!s.contains("format")) return Range();
    const Json& f = s["format"];
    if (f == "int32") return Range({-2147483648LL, 2147483647LL});
    if (f == "int64") return Range({-9000000000000000000LL, 9000000000000000000LL});
    if (f == "float" || f == "double" || (f.is_string() && kFormats.count(f.get<std::string>()))) {
      return Range();
    }
    return Err(path, "format " + f.dump() + " is not supported on a number");
  }

  StatusOr<GrammarElement> Integer(const Json& s, const std::string& path) {
    ASSIGN_OR_RETURN(auto lo, Bound(s, true, path));
    ASSIGN_OR_RETURN(auto hi, Bound(s, false, path));
    ASSIGN_OR_RETURN(const auto format_range, NumberFormat(s, path));
    if (format_range) {
      lo = std::max(lo.value_or(format_range->first), format_range->first);
      hi = std::min(hi.value_or(format_range->second), format_range->second);
    }
    if (lo && hi && *lo > *hi) {
      return Err(path, "the integer range [" + std::to_string(*lo) + ", " + std::to_string(*hi) +
                           "] is empty");
    }
    if (!lo && !hi) {
      if (integer_.rule_idx < 0) integer_ = RegexElement(R"(^-?(0|[1-9][0-9]*)$)", "integer");
      return integer_;
    }
    return RegexElement(IntegerRangeRegex(lo, hi), "integer");
  }

  // A number bound with integer value: the tightest of the inclusive and exclusive keywords
  // (draft 4's boolean exclusiveMinimum / exclusiveMaximum too), or nullopt when absent.
  struct NumberBound {
    int64_t value;
    bool exclusive;
  };
  static StatusOr<std::optional<NumberBound>> NumberBoundOf(const Json& s, bool lower,
                                                            const std::string& path) {
    std::optional<NumberBound> out;
    auto tighten = [&](const Json& v, bool exclusive, const char* key) -> Status {
      if (!v.is_number()) return Err(path, std::string("\"") + key + "\" must be a number");
      const double d = v.get<double>();
      if (std::floor(d) != d || !(std::fabs(d) < 9.0e18)) {
        return Err(path, std::string("keyword \"") + key + "\" on a number is only supported " +
                             "with an integer value (got " + v.dump() + ")");
      }
      const NumberBound b{static_cast<int64_t>(d), exclusive};
      const bool tighter = !out || (lower ? b.value > out->value : b.value < out->value) ||
                           (b.value == out->value && exclusive);
      if (tighter) out = b;
      return OkStatus();
    };
    RETURN_IF_ERROR(ForEachBound(s, lower, tighten));
    return out;
  }

  // Alternatives for a magnitude m = I(.F)? (I an integer part, no exponent) with lo <= m (lo <
  // m when lo_exclusive), lo >= 0, and m <= hi (m < hi) unless hi is absent.
  void MagnitudeAlternatives(int64_t lo, bool lo_exclusive, std::optional<int64_t> hi,
                             bool hi_exclusive, std::vector<GrammarSequence>* out) {
    auto any_fraction = [&] { return RegexElement(R"(^(\.[0-9]+)?$)", "fraction"); };
    // I == lo with a non-zero fraction: just above an exclusive lower bound.
    if (lo_exclusive && (!hi || *hi > lo)) {
      GrammarSequence seq;
      Lit(std::to_string(lo), &seq);
      seq.push_back(RegexElement(R"(^\.[0-9]*[1-9][0-9]*$)", "non-zero-fraction"));
      out->push_back(std::move(seq));
    }
    // I in [start, end] with any fraction: strictly inside the bounds.
    const int64_t start = lo_exclusive ? lo + 1 : lo;
    if (!hi || start <= *hi - 1) {
      GrammarSequence seq = {RegexElement(
          IntegerRangeRegex(start, hi ? std::optional<int64_t>(*hi - 1) : std::nullopt),
          "integer-part")};
      seq.push_back(any_fraction());
      out->push_back(std::move(seq));
    }
    // I == hi with a zero fraction: an inclusive upper bound itself.
    if (hi && !hi_exclusive && *hi >= start) {
      GrammarSequence seq;
      Lit(std::to_string(*hi), &seq);
      seq.push_back(RegexElement(R"(^(\.0+)?$)", "zero-fraction"));
      out->push_back(std::move(seq));
    }
  }

  // A number between integer bounds: the non-negative part as a magnitude, the negative part
  // as "-" and a magnitude > 0, without exponents (a bounded number never needs one).
  StatusOr<GrammarElement> BoundedNumber(std::optional<NumberBound> lo,
                                         std::optional<NumberBound> hi, const std::string& path) {
    std::vector<GrammarSequence> alts;
    const bool non_negative = !hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive);
    if (non_negative) {
      const bool from_lo = lo && lo->value >= 0;
      MagnitudeAlternatives(from_lo ? lo->value : 0, from_lo && lo->exclusive,
                            hi ? std::optional<int64_t>(hi->value) : std::nullopt,
                            hi && hi->exclusive, &alts);
    }
    if (!lo || lo->value < 0) {
      // x = -m: lo <= x <= hi  <=>  -hi <= m <= -lo, and m > 0.
      const bool from_hi = hi && hi->value < 0;
      std::vector<GrammarSequence> neg;
      MagnitudeAlternatives(from_hi ? -hi->value : 0, from_hi ? hi->exclusive : true,
                            lo ? std::optional<int64_t>(-lo->value) : std::nullopt,
                            lo && lo->exclusive, &neg);
      if (!neg.empty()) {
        GrammarSequence seq;
        Lit("-", &seq);
        seq.push_back(g_.Group(std::move(neg), "negative"));
        alts.push_back(std::move(seq));
      }
    }
    if (alts.empty()) return Err(path, "the number range is empty");
    return g_.Group(std::move(alts), "number-range");
  }

  StatusOr<GrammarElement> Number(const Json& s, const std::string& path) {
    ASSIGN_OR_RETURN(const auto format_range, NumberFormat(s, path));
    if (format_range) return Integer(s, path);  // int32 / int64: an integer in range
    ASSIGN_OR_RETURN(const auto lo, NumberBoundOf(s, true, path));
    ASSIGN_OR_RETURN(const auto hi, NumberBoundOf(s, false, path));
    if (!lo && !hi) return PlainNumber();
    if (lo && lo->value == 0 && !lo->exclusive && !hi) {
      // Non-negative: exponents keep the sign, so they stay.
      return RegexElement(R"(^(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$)", "non-negative");
    }
    if (lo && hi &&
        (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive)))) {
      return Err(path, "the number range is empty");
    }
    return BoundedNumber(lo, hi, path);
  }

  // A JSON string key (with its quotes) whose decoded value is none of `names`, spelled
  // canonically: a trie over the names' code points, leaving it on the first difference.
  GrammarElement ExtraKey(const std::vector<std::string>& names) {
    if (names.empty()) return PlainString();
    struct TrieNode {
      std::map<char32_t, int> children;
      bool terminal = false;
    };
    std::vector<TrieNode> trie(1);
    for (const std::string& name : names) {
      int cur = 0;
      for (char32_t cp : DecodeUtf8(name)) {
        auto it = trie[cur].children.find(cp);
        if (it == trie[cur].children.end()) {
          trie.push_back({});
          it = trie[cur].children.emplace(cp, static_cast<int>(trie.size()) - 1).first;
        }
        cur = it->second;
      }
      trie[cur].terminal = true;
    }
    GrammarSequence any_rest = g_.Repeat({JsonStringCharClass({{0, 0x10FFFF}}, &g_)}, 0, -1, "key");
    std::vector<int32_t> rules(trie.size());
    for (size_t i = 0; i < trie.size(); ++i) rules[i] = g_.AddRule("extra-key");
    for (size_t i = 0; i < trie.size(); ++i) {
      if (!trie[i].terminal) g_.AddAlternative(rules[i], {});
      std::vector<CodePointRange> taken;
      for (const auto& [cp, child] : trie[i].children) {
        std::string spelled;
        if (cp < 0x20 || cp == '"' || cp == '\\') {
          spelled = JsonEscape(cp);
        } else {
          AppendUtf8(cp, &spelled);
        }
        GrammarSequence seq;
        Lit(spelled, &seq);
        seq.push_back(GrammarElement::Rule(rules[child]));
        g_.AddAlternative(rules[i], std::move(seq));
        taken.push_back({cp, cp});
      }
      GrammarSequence other = {JsonStringCharClass(NormalizeRanges(taken, true), &g_)};
      for (const GrammarElement& e : any_rest) other.push_back(e);
      g_.AddAlternative(rules[i], std::move(other));
    }
    GrammarSequence key;
    Lit("\"", &key);
    key.push_back(GrammarElement::Rule(rules[0]));
    Lit("\"", &key);
    return g_.Group({std::move(key)}, "extra-key");
  }

  StatusOr<GrammarElement> Object(const Json& s, const std::string& path) {
    struct Property {
      std::string name;
      const Json* schema;
      bool required;
    };
    static const Json kTrue = true;
    std::vector<Property> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Err(path, "\"properties\" must be an object");
      for (const auto& [name, sub] : s["properties"].items()) props.push_back({name, &sub, false});
    }
    // Strictness is for objects that declare their properties: {"type": "object"} alone means
    // any object (a tool parameter taking free-form options), not only {}.
    const Json* extra = options_.strict_additional && s.contains("properties") ? nullptr : &kTrue;
    bool extra_forbidden_explicitly = false;
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (a == false) {
        extra = nullptr;
        extra_forbidden_explicitly = true;
      } else if (a.is_boolean() || a.is_object()) {
        extra = &a;
      } else {
        return Err(path, "\"additionalProperties\" must be a schema");
      }
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Err(path, "\"required\" must be an array");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Err(path, "\"required\" entries must be strings");
        const std::string& name = r.get_ref<const std::string&>();
        auto it = std::find_if(props.begin(), props.end(),
                               [&](const Property& p) { return p.name == name; });
        if (it != props.end()) {
          it->required = true;
        } else if (extra_forbidden_explicitly) {
          return Err(path, "required property \"" + name +
                               "\" is not in \"properties\" and additionalProperties is false");
        } else {
          props.push_back({name, extra != nullptr ? extra : &kTrue, true});
        }
      }
    }
    // Key-value elements. A property whose schema is false cannot appear.
    std::vector<GrammarElement> kv;
    std::vector<bool> required;
    std::vector<std::string> names;
    for (const Property& p : props) {
      names.push_back(p.name);
      const std::string ppath = path + "/properties/" + PointerToken(p.name);
      if (*p.schema == false) {
        if (p.required) return Err(ppath, "a required property has the schema false");
        continue;
      }
      ASSIGN_OR_RETURN(const GrammarElement value, Compile(*p.schema, ppath));
      GrammarSequence seq;
      Lit(Json(p.name).dump(-1, ' ', false, Json::error_handler_t::replace), &seq);
      Colon(&seq);
      seq.push_back(value);
      kv.push_back(g_.Group({std::move(seq)}, "property"));
      required.push_back(p.required);
    }
    std::optional<GrammarElement> extra_kv;
    if (extra != nullptr) {
      ASSIGN_OR_RETURN(const GrammarElement value, Compile(*extra, path + "/additionalProperties"));
      GrammarSequence seq = {ExtraKey(names)};
      Colon(&seq);
      seq.push_back(value);
      extra_kv = g_.Group({std::move(seq)}, "extra-property");
    }
    // first[i]: properties i.. when none was written yet; rest[i]: when one was (comma first).
    const size_t n = kv.size();
    std::vector<int32_t> first(n + 1), rest(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      first[i] = g_.AddRule("object-first");
      rest[i] = g_.AddRule("object-rest");
    }
    g_.AddAlternative(first[n], {});
    g_.AddAlternative(rest[n], {});
    if (extra_kv) {
      GrammarSequence more;
      Sep(&more);
      more.push_back(*extra_kv);
      more.push_back(GrammarElement::Rule(rest[n]));
      g_.AddAlternative(rest[n], std::move(more));
      g_.AddAlternative(first[n], {*extra_kv, GrammarElement::Rule(rest[n])});
    }
    for (size_t j = n; j-- > 0;) {
      g_.AddAlternative(first[j], {kv[j], GrammarElement::Rule(rest[j + 1])});
      GrammarSequence more;
      Sep(&more);
      more.push_back(kv[j]);
      more.push_back(GrammarElement::Rule(rest[j + 1]));
      g_.AddAlternative(rest[j], std::move(more));
      if (!required[j]) {
        g_.AddAlternative(first[j], {GrammarElement::Rule(first[j + 1])});
        g_.AddAlternative(rest[j], {GrammarElement::Rule(rest[j + 1])});
      }
    }
    GrammarSequence obj;
    Lit("{", &obj);
    Ws(&obj);
    obj.push_back(GrammarElement::Rule(first[0]));
    Ws(&obj);
    Lit("}", &obj);
    return g_.Group({std::move(obj)}, "object");
  }

  StatusOr<GrammarElement> Array(const Json& s, const std::string& path) {
    static const Json kTrue = true;
    std::vector<const Json*> prefix;
    std::string prefix_key = "prefixItems";
    const Json* tail = &kTrue;
    std::string tail_path = path + "/items";
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return Err(path, "\"prefixItems\" must be an array");
      for (const Json& p : s["prefixItems"]) prefix.push_back(&p);
      if (s.contains("items")) {
        if (s["items"].is_array()) return Err(path, "\"items\" must be a schema with prefixItems");
        tail = &s["items"];
      }
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix_key = "items";
      for (const Json& p : s["items"]) prefix.push_back(&p);
      if (s.contains("additionalItems")) {
        tail = &s["additionalItems"];
        tail_path = path + "/additionalItems";
      }
    } else if (s.contains("items")) {
      tail = &s["items"];
    }
    if (*tail == false) tail = nullptr;
    ASSIGN_OR_RETURN(const auto min_items, Count(s, "minItems", path));
    ASSIGN_OR_RETURN(const auto max_items, Count(s, "maxItems", path));
    const int64_t k = static_cast<int64_t>(prefix.size());
    const int64_t min = min_items.value_or(0);
    int64_t max = max_items ? *max_items : -1;
    if (tail == nullptr) max = max < 0 ? k : std::min(max, k);
    if (max >= 0 && min > max) {
      return Err(path, "\"minItems\" is larger than the number of items the schema allows");
    }
    std::vector<GrammarElement> items;
    for (int64_t i = 0; i < k && (max < 0 || i < max); ++i) {
      ASSIGN_OR_RETURN(const GrammarElement e,
                       Compile(*prefix[i], path + "/" + prefix_key + "/" + std::to_string(i)));
      items.push_back(e);
    }
    std::optional<GrammarElement> tail_elem;
    if (tail != nullptr && (max < 0 || max > k)) {
      ASSIGN_OR_RETURN(tail_elem, Compile(*tail, tail_path));
    }
    // after(i): the elements after the first i, each behind a comma.
    std::function<GrammarSequence(int64_t)> after = [&](int64_t i) -> GrammarSequence {
      if (i >= k) {
        if (!tail_elem) return {};
        GrammarSequence one;
        Sep(&one);
        one.push_back(*tail_elem);
        return g_.Repeat(std::move(one), std::max<int64_t>(0, min - i), max < 0 ? -1 : max - i,
                         "items");
      }
      const int32_t r = g_.AddRule("items");
      if (i >= min) g_.AddAlternative(r, {});
      if (max < 0 || i < max) {
        GrammarSequence seq;
        Sep(&seq);
        seq.push_back(items[i]);
        for (GrammarElement& e : after(i + 1)) seq.push_back(e);
        g_.AddAlternative(r, std::move(seq));
      }
      g_.MarkDefined(r);
      return {GrammarElement::Rule(r)};
    };
    std::vector<GrammarSequence> alts;
    if (min == 0) {
      GrammarSequence empty;
      Lit("[", &empty);
      Ws(&empty);
      Lit("]", &empty);
      alts.push_back(std::move(empty));
    }
    if (max != 0) {
      GrammarSequence full;
      Lit("[", &full);
      Ws(&full);
      full.push_back(k > 0 ? items[0] : *tail_elem);
      for (GrammarElement& e : after(1)) full.push_back(e);
      Ws(&full);
      Lit("]", &full);
      alts.push_back(std::move(full));
    }
    return g_.Group(std::move(alts), "array");
  }

  const Json& root_;
  JsonSchemaOptions options_;
  const GrammarBudget budget_;
  Grammar g_;
  std::map<std::string, int32_t> ref_rules_;  // "$ref" string -> its rule
  GrammarElement ws_ = GrammarElement::Rule(-1), string_char_ = GrammarElement::Rule(-1),
                 plain_string_ = GrammarElement::Rule(-1), number_ = GrammarElement::Rule(-1),
                 integer_ = GrammarElement::Rule(-1), any_ = GrammarElement::Rule(-1);
};

}  // namespace

StatusOr<Grammar> CompileJsonSchema(const nlohmann::json& schema, const JsonSchemaOptions& options,
                                    const GrammarBudget& budget) {
  // nlohmann::json -> ordered_json through text; invalid UTF-8 in a string becomes U+FFFD
  // instead of an exception.
  const Json ordered =
      Json::parse(schema.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), nullptr,
                  /*allow_exceptions=*/false);
  return SchemaCompiler(ordered, options, budget).Run();
}

StatusOr<Grammar> CompileJsonSchemaText(std::string_view schema_text,
                                        const JsonSchemaOptions& options,
                                        const GrammarBudget& budget) {
  const Json ordered = Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (ordered.is_discarded()) return InvalidArgumentError("JSON Schema: the schema is not JSON");
  return SchemaCompiler(ordered, options, budget).Run();
}

Grammar JsonAnyValueGrammar(const JsonSchemaOptions& options) {
  const Json empty = Json::object();
  return SchemaCompiler(empty, options).AnyValueGrammar();
}

}  // namespace loom
