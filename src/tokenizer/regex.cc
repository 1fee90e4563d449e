#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/check.h"

namespace loom {
namespace {

// Per-thread PCRE2 scratch: match data (grown on demand) and a JIT stack large enough for
// backtracking over long whitespace runs (`\s+(?!\S)` on a 10 MB input).
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  pcre2_match_context* context = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(4, nullptr);
    jit_stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchScratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

MatchScratch& Scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

std::string EscapeLiteral(std::string_view s) {
  std::string out = "\\Q";
  size_t pos = 0;
  // \Q...\E cannot contain "\E": split around it.
  while (true) {
    const size_t e = s.find("\\E", pos);
    if (e == std::string_view::npos) {
      out.append(s.substr(pos));
      break;
    }
    out.append(s.substr(pos, e - pos));
    out.append("\\E\\\\E\\Q");
    pos = e + 2;
  }
  out += "\\E";
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(error_code, buf, sizeof(buf));
    return InvalidArgumentError("cannot compile tokenizer regex '" + std::string(pattern) +
                                "' at offset " + std::to_string(error_offset) + ": " +
                                reinterpret_cast<const char*>(buf));
  }
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  re->code_ = code;
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return re;
}

StatusOr<std::unique_ptr<Regex>> Regex::Literal(std::string_view literal) {
  return Compile(EscapeLiteral(literal));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::FindAll(std::string_view subject,
                    std::vector<std::pair<size_t, size_t>>* matches) const {
  matches->clear();
  auto* code = static_cast<pcre2_code*>(code_);
  MatchScratch& scratch = Scratch();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc;
    if (jit_) {
      rc = pcre2_jit_match(code, s, subject.size(), pos, PCRE2_NO_UTF_CHECK, scratch.data,
                           scratch.context);
    } else {
      rc = pcre2_match(code, s, subject.size(), pos, PCRE2_NO_UTF_CHECK, scratch.data,
                       scratch.context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // Any other failure (a resource limit on pathological input) leaves the rest unsplit: the
    // result is still a valid tokenization, just with a coarser pre-split.
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    const size_t start = ov[0], end = ov[1];
    matches->emplace_back(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= subject.size()) break;
      pos = end + 1;
      while (pos < subject.size() && (static_cast<uint8_t>(subject[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace loom
