#include "grammar/integer_range.h"

#include <vector>

#include "base/check.h"

namespace loom {
namespace {

int NumDigits(uint64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// Alternatives for the numbers between `a` and `b` (decimal strings of equal length, a <= b),
// each prefixed by `prefix`.
void SameLength(const std::string& a, const std::string& b, const std::string& prefix,
                std::vector<std::string>* out) {
  if (a.empty()) {
    out->push_back(prefix);
    return;
  }
  if (a[0] == b[0]) {
    SameLength(a.substr(1), b.substr(1), prefix + a[0], out);
    return;
  }
  const size_t rest = a.size() - 1;
  const bool a_low = a.find_first_not_of('0', 1) == std::string::npos;
  const bool b_high = b.find_first_not_of('9', 1) == std::string::npos;
  const char lo_d = static_cast<char>(a[0] + (a_low ? 0 : 1));
  const char hi_d = static_cast<char>(b[0] - (b_high ? 0 : 1));
  if (!a_low) SameLength(a.substr(1), std::string(rest, '9'), prefix + a[0], out);
  if (lo_d <= hi_d) {
    std::string s = prefix;
    if (lo_d == hi_d) {
      s += lo_d;
    } else {
      s += std::string("[") + lo_d + "-" + hi_d + "]";
    }
    if (rest > 0) s += "[0-9]{" + std::to_string(rest) + "}";
    out->push_back(s);
  }
  if (!b_high) SameLength(std::string(rest, '0'), b.substr(1), prefix + b[0], out);
}

uint64_t MaxOfLength(int n) {  // 10^n - 1, n <= 20 saturating
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v * 10 + 9;
  return v;
}

// Alternatives for magnitudes in [lo, hi] (hi absent: unbounded).
void Magnitudes(uint64_t lo, std::optional<uint64_t> hi, const std::string& prefix,
                std::vector<std::string>* out) {
  const int lo_len = NumDigits(lo);
  const int hi_len = hi ? NumDigits(*hi) : lo_len;
  for (int len = lo_len; len <= hi_len; ++len) {
    const uint64_t first = len == lo_len ? lo : MaxOfLength(len - 1) + 1;
    const uint64_t last = (hi && len == hi_len) ? *hi : MaxOfLength(len);
    SameLength(std::to_string(first), std::to_string(last), prefix, out);
  }
  if (!hi) out->push_back(prefix + "[1-9][0-9]{" + std::to_string(lo_len) + ",}");
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

}  // namespace

std::string IntegerRangeRegex(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  CHECK(!lo || !hi || *lo <= *hi) << *lo << " > " << *hi;
  std::vector<std::string> alts;
  // Negative part: n in [lo, min(hi, -1)] -> "-" magnitudes [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t mag_lo = (hi && *hi < 0) ? Magnitude(*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = Magnitude(*lo);
    Magnitudes(mag_lo, mag_hi, "-", &alts);
  }
  // Non-negative part: [max(lo, 0), hi].
  if (!hi || *hi >= 0) {
    const uint64_t first = (lo && *lo > 0) ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> last;
    if (hi) last = static_cast<uint64_t>(*hi);
    Magnitudes(first, last, "", &alts);
  }
  std::string out = "^(";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i > 0) out += "|";
    out += alts[i];
  }
  return out + ")$";
}

}  // namespace loom
