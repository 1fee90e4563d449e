#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

using nlohmann::json;

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Turns the match list of one word into its full segmentation (matches and the gaps between
// them), as tokenizers' Pattern::find_matches does.
void Segments(const std::string& word, const std::vector<std::pair<size_t, size_t>>& matches,
              bool invert, std::vector<Segment>* segs) {
  segs->clear();
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) segs->push_back({prev, b, invert});
    segs->push_back({b, e, !invert});
    prev = e;
  }
  if (prev != word.size()) segs->push_back({prev, word.size(), invert});
}

// NormalizedString::split: applies `behavior` to the segmentation and appends the resulting
// non-empty words to *out.
void ApplyBehavior(const std::string& word, std::vector<Segment>& segs, SplitBehavior behavior,
                   std::vector<std::string>* out) {
  std::vector<Segment> res;
  res.reserve(segs.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (auto s : segs) res.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kRemoved:
      res = segs;
      break;
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (auto s : segs) {
        if (s.is_match == prev_match && !res.empty()) {
          res.back().end = s.end;
        } else {
          res.push_back({s.begin, s.end, false});
        }
        prev_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto s : segs) {
        if (s.is_match && !prev_match && !res.empty()) {
          res.back().end = s.end;
        } else {
          res.push_back({s.begin, s.end, false});
        }
        prev_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev_match = false;
      for (size_t k = segs.size(); k-- > 0;) {
        const Segment s = segs[k];
        if (s.is_match && !prev_match && !res.empty()) {
          res.back().begin = s.begin;
        } else {
          res.push_back({s.begin, s.end, false});
        }
        prev_match = s.is_match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
  }
  for (const auto& s : res) {
    if (s.is_match || s.end == s.begin) continue;
    out->emplace_back(word, s.begin, s.end - s.begin);
  }
}

// Applies a per-word splitting function to every word.
void ForEachWord(std::vector<std::string>* words,
                 const std::function<void(const std::string&, std::vector<std::string>*)>& fn) {
  std::vector<std::string> out;
  out.reserve(words->size() * 2);
  for (const auto& w : *words) fn(w, &out);
  words->swap(out);
}

// Splits `word` where `pred(cp)` holds, with `behavior`.
void SplitOnChars(const std::string& word, const std::function<bool(char32_t)>& pred,
                  SplitBehavior behavior, std::vector<std::string>* out) {
  std::vector<std::pair<size_t, size_t>> matches;
  size_t i = 0;
  while (i < word.size()) {
    size_t len;
    const char32_t cp = unicode::DecodeAt(word, i, &len);
    if (pred(cp)) matches.emplace_back(i, i + len);
    i += len;
  }
  std::vector<Segment> segs;
  Segments(word, matches, false, &segs);
  ApplyBehavior(word, segs, behavior, out);
}

class RegexSplit final : public PreTokenizer {
 public:
  RegexSplit(std::unique_ptr<Regex> re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void PreTokenize(std::vector<std::string>* words, bool) const override {
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<Segment> segs;
    ForEachWord(words, [&](const std::string& w, std::vector<std::string>* out) {
      re_->FindAll(w, &matches);
      Segments(w, matches, invert_, &segs);
      ApplyBehavior(w, segs, behavior_, out);
    });
  }
  bool KeepsEveryByte() const override { return behavior_ != SplitBehavior::kRemoved; }

 private:
  std::unique_ptr<Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, std::unique_ptr<Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  void PreTokenize(std::vector<std::string>* words, bool) const override {
    if (add_prefix_space_) {
      for (auto& w : *words) {
        if (w.empty() || w[0] != ' ') w.insert(0, " ");
      }
    }
    if (!re_) return;
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<Segment> segs;
    ForEachWord(words, [&](const std::string& w, std::vector<std::string>* out) {
      re_->FindAll(w, &matches);
      Segments(w, matches, false, &segs);
      ApplyBehavior(w, segs, SplitBehavior::kIsolated, out);
    });
  }
  bool IsByteLevel() const override { return true; }
  bool KeepsEveryByte() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePre final : public PreTokenizer {
 public:
  MetaspacePre(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void PreTokenize(std::vector<std::string>* words, bool first_section) const override {
    ForEachWord(words, [&](const std::string& w, std::vector<std::string>* out) {
      std::string s;
      s.reserve(w.size() + 8);
      for (char c : w) {
        if (c == ' ') {
          s += replacement_;
        } else {
          s.push_back(c);
        }
      }
      const bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
      // HF checks offsets_original().0 == 0 for "first": only the first word of the first
      // section starts at the beginning of the input.
      const bool at_start = first_section && out->empty();
      if (!starts &&
          (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && at_start))) {
        s.insert(0, replacement_);
      }
      if (!split_) {
        if (!s.empty()) out->push_back(std::move(s));
        return;
      }
      // Split on the replacement, MergedWithNext.
      size_t start = 0, pos = s.find(replacement_, replacement_.size() > 0 ? 1 : 0);
      while (pos != std::string::npos && pos > 0) {
        out->emplace_back(s, start, pos - start);
        start = pos;
        pos = s.find(replacement_, pos + replacement_.size());
      }
      if (start < s.size()) out->emplace_back(s, start, std::string::npos);
    });
  }
  // An empty replacement would drop the spaces.
  bool KeepsEveryByte() const override { return !replacement_.empty(); }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class CharSplitPre final : public PreTokenizer {
 public:
  CharSplitPre(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void PreTokenize(std::vector<std::string>* words, bool) const override {
    ForEachWord(words, [&](const std::string& w, std::vector<std::string>* out) {
      SplitOnChars(w, pred_, behavior_, out);
    });
  }
  bool KeepsEveryByte() const override { return behavior_ != SplitBehavior::kRemoved; }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void PreTokenize(std::vector<std::string>* words, bool first_section) const override {
    for (const auto& s : steps_) s->PreTokenize(words, first_section);
  }
  bool IsByteLevel() const override { return !steps_.empty() && steps_.back()->IsByteLevel(); }
  bool KeepsEveryByte() const override {
    for (const auto& s : steps_) {
      if (!s->KeepsEveryByte()) return false;
    }
    return true;
  }
  const std::vector<std::unique_ptr<PreTokenizer>>& steps() const { return steps_; }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool IsNumeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto c = utf8proc_category(static_cast<int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool IsBertPunctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126)) {
    return true;
  }
  return unicode::IsPunctuation(cp);
}

StatusOr<SplitBehavior> ParseBehavior(const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return InvalidArgumentError("unknown split behavior '" + s + "' in tokenizer.json");
}

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const json& j) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& s : j.at("pretokenizers")) {
      ASSIGN_OR_RETURN(auto p, FromJson(s));
      steps.push_back(std::move(p));
    }
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      if (steps[i]->IsByteLevel()) {
        return UnimplementedError(
            "tokenizer.json: ByteLevel must be the last pre-tokenizer of a "
            "Sequence");
      }
    }
    return std::unique_ptr<PreTokenizer>(new SequencePre(std::move(steps)));
  }
  if (type == "Split") {
    const auto& p = j.at("pattern");
    std::unique_ptr<Regex> re;
    if (p.contains("String")) {
      ASSIGN_OR_RETURN(re, Regex::Literal(p.at("String").get<std::string>()));
    } else {
      ASSIGN_OR_RETURN(re, Regex::Compile(p.at("Regex").get<std::string>()));
    }
    ASSIGN_OR_RETURN(SplitBehavior b, ParseBehavior(j.at("behavior").get<std::string>()));
    return std::unique_ptr<PreTokenizer>(
        new RegexSplit(std::move(re), b, j.value("invert", false)));
  }
  if (type == "ByteLevel") {
    std::unique_ptr<Regex> re;
    if (j.value("use_regex", true)) {
      ASSIGN_OR_RETURN(re, Regex::Compile(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(
        new ByteLevelPre(j.value("add_prefix_space", true), std::move(re)));
  }
  if (type == "Metaspace") {
    std::string replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    PrependScheme scheme = PrependScheme::kAlways;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      scheme = s == "first"   ? PrependScheme::kFirst
               : s == "never" ? PrependScheme::kNever
                              : PrependScheme::kAlways;
    } else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean()) {
      scheme = j["add_prefix_space"].get<bool>() ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    return std::unique_ptr<PreTokenizer>(
        new MetaspacePre(std::move(replacement), scheme, j.value("split", true)));
  }
  if (type == "Digits") {
    const bool individual = j.value("individual_digits", false);
    return std::unique_ptr<PreTokenizer>(new CharSplitPre(
        IsNumeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
  }
  if (type == "Whitespace") {
    ASSIGN_OR_RETURN(auto re, Regex::Compile(R"(\w+|[^\w\s]+)"));
    return std::unique_ptr<PreTokenizer>(
        new RegexSplit(std::move(re), SplitBehavior::kRemoved, /*invert=*/true));
  }
  if (type == "WhitespaceSplit") {
    return std::unique_ptr<PreTokenizer>(
        new CharSplitPre(unicode::IsWhitespace, SplitBehavior::kRemoved));
  }
  if (type == "Punctuation") {
    ASSIGN_OR_RETURN(SplitBehavior b, ParseBehavior(j.value("behavior", std::string("Isolated"))));
    return std::unique_ptr<PreTokenizer>(new CharSplitPre(IsBertPunctuation, b));
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    steps.emplace_back(new CharSplitPre(unicode::IsWhitespace, SplitBehavior::kRemoved));
    steps.emplace_back(new CharSplitPre(IsBertPunctuation, SplitBehavior::kIsolated));
    return std::unique_ptr<PreTokenizer>(new SequencePre(std::move(steps)));
  }
  return UnimplementedError("tokenizer.json pre_tokenizer type '" + type + "' is not supported");
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::MakeRegexSequenceByteLevel(
    const std::vector<std::string>& patterns) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const auto& p : patterns) {
    ASSIGN_OR_RETURN(auto re, Regex::Compile(p));
    steps.emplace_back(new RegexSplit(std::move(re), SplitBehavior::kIsolated, false));
  }
  steps.emplace_back(new ByteLevelPre(false, nullptr));
  return std::unique_ptr<PreTokenizer>(new SequencePre(std::move(steps)));
}

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::MakeGpt2ByteLevel() {
  ASSIGN_OR_RETURN(auto re, Regex::Compile(kGpt2Pattern));
  return std::unique_ptr<PreTokenizer>(new ByteLevelPre(false, std::move(re)));
}

}  // namespace loom
