#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

using nlohmann::json;

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void Normalize(std::string* text) const override {
    for (const auto& s : steps_) s->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(int options) : options_(options) {}
  void Normalize(std::string* text) const override {
    bool ascii = true;
    for (unsigned char c : *text) ascii &= c < 0x80;
    if (ascii) return;  // every normalization form is the identity on ASCII
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text->data()),
                     static_cast<utf8proc_ssize_t>(text->size()), &out,
                     static_cast<utf8proc_option_t>(options_ | UTF8PROC_STABLE));
    if (n >= 0) text->assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }

 private:
  int options_;
};

// Full lowercase mapping, as Rust str::to_lowercase (utf8proc simple mapping + the special
// cases Rust applies: U+0130 -> "i\u0307", final sigma).
class LowercaseNormalizer final : public Normalizer {
 public:
  void Normalize(std::string* text) const override {
    std::string out;
    out.reserve(text->size());
    const std::string& s = *text;
    size_t i = 0;
    while (i < s.size()) {
      size_t len;
      const char32_t cp = unicode::DecodeAt(s, i, &len);
      if (cp < 0x80) {
        out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
      } else if (cp == 0x130) {
        out += "i\xCC\x87";
      } else if (cp == 0x3A3) {
        out += IsFinalSigma(s, i, len) ? "\xCF\x82" : "\xCF\x83";
      } else {
        unicode::AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<int32_t>(cp))),
                            &out);
      }
      i += len;
    }
    text->swap(out);
  }

 private:
  static bool IsCased(char32_t cp) {
    const auto c = utf8proc_category(static_cast<int32_t>(cp));
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
  }
  // Final sigma: preceded by a cased letter and not followed by one (ignoring case-ignorable
  // marks is approximated by skipping nonspacing marks).
  static bool IsFinalSigma(const std::string& s, size_t pos, size_t len) {
    bool before = false;
    size_t j = pos;
    while (j > 0) {
      size_t k = j - 1;
      while (k > 0 && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
      size_t l;
      const char32_t cp = unicode::DecodeAt(s, k, &l);
      if (utf8proc_category(static_cast<int32_t>(cp)) == UTF8PROC_CATEGORY_MN) {
        j = k;
        continue;
      }
      before = IsCased(cp);
      break;
    }
    if (!before) return false;
    size_t k = pos + len;
    while (k < s.size()) {
      size_t l;
      const char32_t cp = unicode::DecodeAt(s, k, &l);
      if (utf8proc_category(static_cast<int32_t>(cp)) == UTF8PROC_CATEGORY_MN) {
        k += l;
        continue;
      }
      return !IsCased(cp);
    }
    return true;
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string* text) const override {
    const std::string& s = *text;
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t len;
        if (!unicode::IsWhitespace(unicode::DecodeAt(s, begin, &len))) break;
        begin += len;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t k = end - 1;
        while (k > begin && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
        size_t len;
        if (!unicode::IsWhitespace(unicode::DecodeAt(s, k, &len))) break;
        end = k;
      }
    }
    *text = s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes nonspacing marks (category Mn); used after NFD like the HF StripAccents normalizer.
void StripMarks(std::string* text) {
  std::string out;
  out.reserve(text->size());
  size_t i = 0;
  while (i < text->size()) {
    size_t len;
    const char32_t cp = unicode::DecodeAt(*text, i, &len);
    if (cp < 0x80 || utf8proc_category(static_cast<int32_t>(cp)) != UTF8PROC_CATEGORY_MN) {
      out.append(*text, i, len);
    }
    i += len;
  }
  text->swap(out);
}

class StripAccentsNormalizer final : public Normalizer {
 public:
  void Normalize(std::string* text) const override { StripMarks(text); }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void Normalize(std::string* text) const override {
    if (!regex_) {
      if (literal_.empty() || text->find(literal_) == std::string::npos) return;
      std::string out;
      out.reserve(text->size() + text->size() / 4);
      size_t pos = 0;
      while (true) {
        const size_t f = text->find(literal_, pos);
        if (f == std::string::npos) break;
        out.append(*text, pos, f - pos);
        out += content_;
        pos = f + literal_.size();
      }
      out.append(*text, pos, std::string::npos);
      text->swap(out);
      return;
    }
    std::vector<std::pair<size_t, size_t>> m;
    regex_->FindAll(*text, &m);
    if (m.empty()) return;
    std::string out;
    size_t pos = 0;
    for (auto [b, e] : m) {
      out.append(*text, pos, b - pos);
      out += content_;
      pos = e;
    }
    out.append(*text, pos, std::string::npos);
    text->swap(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// BertNormalizer: clean_text, handle_chinese_chars, strip_accents, lowercase.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip_accents, bool lowercase)
      : clean_(clean), chinese_(chinese), strip_(strip_accents), lower_(lowercase) {}
  void Normalize(std::string* text) const override {
    std::string out;
    out.reserve(text->size());
    size_t i = 0;
    while (i < text->size()) {
      size_t len;
      const char32_t cp = unicode::DecodeAt(*text, i, &len);
      i += len;
      if (clean_) {
        if (cp == 0 || cp == 0xFFFD || IsControl(cp)) continue;
        if (unicode::IsWhitespace(cp)) {
          out.push_back(' ');
          continue;
        }
      }
      if (chinese_ && IsChinese(cp)) {
        out.push_back(' ');
        unicode::AppendUtf8(cp, &out);
        out.push_back(' ');
        continue;
      }
      unicode::AppendUtf8(cp, &out);
    }
    if (strip_) {
      UnicodeNormalizer(UTF8PROC_DECOMPOSE).Normalize(&out);
      StripMarks(&out);
    }
    if (lower_) LowercaseNormalizer().Normalize(&out);
    text->swap(out);
  }

 private:
  static bool IsControl(char32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    const auto c = utf8proc_category(static_cast<int32_t>(cp));
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CN ||
           c == UTF8PROC_CATEGORY_CO;
  }
  static bool IsChinese(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
  }
  bool clean_, chinese_, strip_, lower_;
};

}  // namespace

std::unique_ptr<Normalizer> Normalizer::MakePrepend(std::string prefix) {
  return std::make_unique<PrependNormalizer>(std::move(prefix));
}
std::unique_ptr<Normalizer> Normalizer::MakeReplace(std::string from, std::string to) {
  return std::make_unique<ReplaceNormalizer>(std::move(from), nullptr, std::move(to));
}
std::unique_ptr<Normalizer> Normalizer::MakeSequence(
    std::vector<std::unique_ptr<Normalizer>> steps) {
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

StatusOr<std::unique_ptr<Normalizer>> Normalizer::FromJson(const json& j) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& s : j.at("normalizers")) {
      ASSIGN_OR_RETURN(auto n, FromJson(s));
      steps.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(steps)));
  }
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UTF8PROC_COMPOSE));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UTF8PROC_DECOMPOSE));
  if (type == "NFKC") {
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
  }
  if (type == "NFKD") {
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(
        new StripNormalizer(j.value("strip_left", true), j.value("strip_right", true)));
  }
  if (type == "Prepend") return MakePrepend(j.at("prepend").get<std::string>());
  if (type == "Replace") {
    const auto& p = j.at("pattern");
    std::string content = j.at("content").get<std::string>();
    if (p.contains("String")) return MakeReplace(p.at("String").get<std::string>(), content);
    ASSIGN_OR_RETURN(auto re, Regex::Compile(p.at("Regex").get<std::string>()));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer("", std::move(re), content));
  }
  if (type == "BertNormalizer") {
    const bool lower = j.value("lowercase", true);
    bool strip = lower;
    if (j.contains("strip_accents") && !j["strip_accents"].is_null()) {
      strip = j["strip_accents"].get<bool>();
    }
    return std::unique_ptr<Normalizer>(new BertNormalizer(
        j.value("clean_text", true), j.value("handle_chinese_chars", true), strip, lower));
  }
  return UnimplementedError("tokenizer.json normalizer type '" + type + "' is not supported");
}

}  // namespace loom
