#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

using nlohmann::json;

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  if (from.empty() || s->find(from) == std::string::npos) return;
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t f = s->find(from, pos);
    if (f == std::string::npos) break;
    out.append(*s, pos, f - pos);
    out += to;
    pos = f + from.size();
  }
  out.append(*s, pos, std::string::npos);
  s->swap(out);
}

class ByteLevelDecoder final : public Decoder {
 public:
  Kind kind() const override { return Kind::kByteLevel; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes, raw;
    for (const auto& t : *tokens) {
      // A token with a character outside the byte alphabet contributes its UTF-8 bytes as-is.
      if (unicode::ByteLevelToBytes(t, &raw)) {
        bytes += raw;
      } else {
        bytes += t;
      }
    }
    tokens->assign(1, unicode::ToValidUtf8(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepend)
      : replacement_(std::move(replacement)), prepend_(prepend) {}
  Kind kind() const override { return Kind::kMetaspace; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) MapToken(&(*tokens)[i], i == 0);
  }
  bool MapToken(std::string* token, bool first) const override {
    // Rust: every replacement char of the first token is dropped (when prepending), not only
    // the leading one.
    ReplaceAll(token, replacement_, first && prepend_ ? "" : " ");
    return true;
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  Kind kind() const override { return Kind::kByteFallback; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens->size());
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (unicode::IsValidUtf8(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_len; ++k) out.emplace_back(unicode::kReplacementUtf8);
      }
      run.clear();
      run_len = 0;
    };
    for (auto& t : *tokens) {
      int byte = ParseByteToken(t);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens->swap(out);
  }
  // "<0xNN>" -> NN, else -1.
  static int ParseByteToken(std::string_view t) {
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (hi < 0 || lo < 0) return -1;
    return hi * 16 + lo;
  }
};

class FuseDecoder final : public Decoder {
 public:
  Kind kind() const override { return Kind::kFuse; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const auto& t : *tokens) all += t;
    tokens->assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : spec_{content, start, stop} {}
  Kind kind() const override { return Kind::kStrip; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (auto& t : *tokens) MapToken(&t, false);
  }
  bool MapToken(std::string* token, bool) const override {
    std::vector<std::pair<size_t, size_t>> chars;  // (offset, len)
    size_t i = 0;
    while (i < token->size()) {
      size_t len;
      unicode::DecodeAt(*token, i, &len);
      chars.emplace_back(i, len);
      i += len;
    }
    auto cp_at = [&](size_t k) {
      size_t len;
      return unicode::DecodeAt(*token, chars[k].first, &len);
    };
    size_t start_cut = 0;
    for (size_t k = 0; k < spec_.start && k < chars.size(); ++k) {
      if (cp_at(k) != spec_.content) break;
      start_cut = k + 1;
    }
    size_t stop_cut = chars.size();
    for (size_t k = 0; k < spec_.stop && k < chars.size(); ++k) {
      const size_t idx = chars.size() - k - 1;
      if (cp_at(idx) != spec_.content) break;
      stop_cut = idx;
    }
    if (stop_cut <= start_cut) {
      token->clear();
      return true;
    }
    const size_t b = start_cut < chars.size() ? chars[start_cut].first : token->size();
    const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : token->size();
    *token = token->substr(b, e - b);
    return true;
  }
  const StripSpec& spec() const { return spec_; }

 private:
  StripSpec spec_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::unique_ptr<Regex> re, std::string to)
      : from_(std::move(from)), re_(std::move(re)), to_(std::move(to)) {}
  Kind kind() const override { return Kind::kReplace; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (auto& t : *tokens) MapToken(&t, false);
  }
  bool MapToken(std::string* token, bool) const override {
    if (!re_) {
      ReplaceAll(token, from_, to_);
      return true;
    }
    std::vector<std::pair<size_t, size_t>> m;
    re_->FindAll(*token, &m);
    if (m.empty()) return true;
    std::string out;
    size_t pos = 0;
    for (auto [b, e] : m) {
      out.append(*token, pos, b - pos);
      out += to_;
      pos = e;
    }
    out.append(*token, pos, std::string::npos);
    token->swap(out);
    return true;
  }

 private:
  std::string from_;
  std::unique_ptr<Regex> re_;
  std::string to_;
};

// Rust tokenizers' decoders::wordpiece::cleanup.
void Cleanup(std::string* s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) ReplaceAll(s, from, to);
}

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  Kind kind() const override { return Kind::kWordPiece; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) MapToken(&(*tokens)[i], i == 0);
  }
  bool MapToken(std::string* token, bool first) const override {
    if (!first) {
      if (token->compare(0, prefix_.size(), prefix_) == 0) {
        token->erase(0, prefix_.size());
      } else {
        std::string spaced;
        spaced.reserve(token->size() + 1);
        spaced.push_back(' ');
        spaced.append(*token);
        token->swap(spaced);
      }
    }
    if (cleanup_) Cleanup(token);
    return true;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// BPEDecoder: the end-of-word suffix becomes a space, except on the last token.
class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  Kind kind() const override { return Kind::kBpe; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      ReplaceAll(&(*tokens)[i], suffix_, i + 1 == tokens->size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  Kind kind() const override { return Kind::kSequence; }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& s : steps_) s->DecodeChain(tokens);
  }
  const std::vector<std::unique_ptr<Decoder>>& steps() const { return steps_; }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::string Decoder::Decode(std::vector<std::string> tokens) const {
  DecodeChain(&tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::unique_ptr<Decoder> Decoder::MakeByteLevel() { return std::make_unique<ByteLevelDecoder>(); }

std::unique_ptr<Decoder> Decoder::MakeSentencePiece(bool strip_leading_space) {
  std::vector<std::unique_ptr<Decoder>> steps;
  steps.push_back(std::make_unique<ReplaceDecoder>("\xE2\x96\x81", nullptr, " "));
  steps.push_back(std::make_unique<ByteFallbackDecoder>());
  steps.push_back(std::make_unique<FuseDecoder>());
  if (strip_leading_space) steps.push_back(std::make_unique<StripDecoder>(U' ', 1, 0));
  return std::make_unique<SequenceDecoder>(std::move(steps));
}

StatusOr<std::unique_ptr<Decoder>> Decoder::FromJson(const json& j) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& d : j.at("decoders")) {
      ASSIGN_OR_RETURN(auto s, FromJson(d));
      steps.push_back(std::move(s));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(steps)));
  }
  if (type == "ByteLevel") return MakeByteLevel();
  if (type == "Metaspace") {
    bool prepend = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      prepend = j["prepend_scheme"].get<std::string>() != "never";
    } else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean()) {
      prepend = j["add_prefix_space"].get<bool>();
    }
    return std::unique_ptr<Decoder>(
        new MetaspaceDecoder(j.value("replacement", std::string("\xE2\x96\x81")), prepend));
  }
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "Strip") {
    const std::string content = j.at("content").get<std::string>();
    size_t len;
    const char32_t cp = content.empty() ? U' ' : unicode::DecodeAt(content, 0, &len);
    return std::unique_ptr<Decoder>(
        new StripDecoder(cp, j.value("start", size_t{0}), j.value("stop", size_t{0})));
  }
  if (type == "Replace") {
    const auto& p = j.at("pattern");
    std::string content = j.at("content").get<std::string>();
    if (p.contains("String")) {
      return std::unique_ptr<Decoder>(
          new ReplaceDecoder(p.at("String").get<std::string>(), nullptr, content));
    }
    ASSIGN_OR_RETURN(auto re, Regex::Compile(p.at("Regex").get<std::string>()));
    return std::unique_ptr<Decoder>(new ReplaceDecoder("", std::move(re), content));
  }
  if (type == "WordPiece") {
    return std::unique_ptr<Decoder>(
        new WordPieceDecoder(j.value("prefix", std::string("##")), j.value("cleanup", true)));
  }
  if (type == "BPEDecoder") {
    return std::unique_ptr<Decoder>(new BpeDecoder(j.value("suffix", std::string("</w>"))));
  }
  return UnimplementedError("tokenizer.json decoder type '" + type + "' is not supported");
}

std::vector<const Decoder*> FlattenDecoder(const Decoder* decoder) {
  std::vector<const Decoder*> out;
  if (decoder == nullptr) return out;
  if (decoder->kind() != Decoder::Kind::kSequence) {
    out.push_back(decoder);
    return out;
  }
  for (const auto& s : static_cast<const SequenceDecoder*>(decoder)->steps()) {
    auto sub = FlattenDecoder(s.get());
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

StripSpec GetStripSpec(const Decoder* decoder) {
  CHECK(decoder->kind() == Decoder::Kind::kStrip) << "GetStripSpec on a non-Strip decoder";
  return static_cast<const StripDecoder*>(decoder)->spec();
}

}  // namespace loom
