#include "tokenizer/unicode.h"

#include <utf8proc.h>

namespace loom::unicode {

size_t ValidSequenceLength(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (avail < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return n;
}

size_t InvalidSubpartLength(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const uint8_t b0 = p[0];
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  // The maximal subpart is the lead byte plus every following byte that still fits the pattern.
  size_t i = 1;
  if (i < avail && p[i] >= lo && p[i] <= hi) {
    ++i;
    while (i < n && i < avail && (p[i] & 0xC0) == 0x80) ++i;
  }
  return i;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = ValidSequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void AppendLossy(std::string_view s, std::string* out) {
  size_t i = 0, run = 0;  // [run, i) is a pending valid stretch
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = ValidSequenceLength(s, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out->append(s.substr(run, i - run));
    out->append(kReplacementUtf8);
    i += InvalidSubpartLength(s, i);
    run = i;
  }
  out->append(s.substr(run));
}

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  AppendLossy(s, &out);
  return out;
}

char32_t DecodeAt(std::string_view s, size_t pos, size_t* len) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if ((b0 >> 5) == 6 && pos + 1 < s.size()) {
    *len = 2;
    return ((b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if ((b0 >> 4) == 14 && pos + 2 < s.size()) {
    *len = 3;
    return ((b0 & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  if ((b0 >> 3) == 30 && pos + 3 < s.size()) {
    *len = 4;
    return ((b0 & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  }
  *len = 1;
  return kReplacementChar;
}

bool IsWhitespace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool IsAlphanumeric(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool IsPunctuation(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

namespace {

struct ByteLevelTables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  ByteLevelTables() {
    // GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the rest to 256+n.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      AppendUtf8(to_cp[b], &to_utf8[b]);
    }
  }
};

const ByteLevelTables& Tables() {
  static const ByteLevelTables tables;
  return tables;
}

}  // namespace

const std::array<char32_t, 256>& ByteToCodepoint() { return Tables().to_cp; }

int CodepointToByte(char32_t cp) {
  if (cp < 256) {
    const bool printable = (cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE);
    return printable ? static_cast<int>(cp) : -1;
  }
  if (cp >= 256 + 68) return -1;  // 68 = number of non-printable bytes
  static const std::array<int, 68> inverse = [] {
    std::array<int, 68> inv{};
    const auto& t = ByteToCodepoint();
    for (int b = 0; b < 256; ++b) {
      if (t[b] >= 256) inv[t[b] - 256] = b;
    }
    return inv;
  }();
  return inverse[cp - 256];
}

std::string BytesToByteLevel(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  const auto& t = Tables().to_utf8;
  for (unsigned char c : s) out += t[c];
  return out;
}

bool ByteLevelToBytes(std::string_view s, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    const char32_t cp = DecodeAt(s, i, &len);
    const int b = CodepointToByte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
    i += len;
  }
  return true;
}

}  // namespace loom::unicode
