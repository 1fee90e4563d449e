// UTF-8 encoding of one code point (the one encoder the tokenizer and the chat-template lexer
// share) and decoding of one sequence (the grammar front ends').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

// Appends code point `cp` to `out` as UTF-8 (1-4 bytes). `cp` is not validated: a surrogate or a
// value past U+10FFFF is encoded by the same bit pattern (the callers pass decoded code points).
inline void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes the UTF-8 sequence starting at s[*pos] (*pos < s.size()): returns its code point and
// moves *pos past it, or returns -1 and leaves *pos alone when the bytes there are not one (a
// stray continuation byte, a truncated sequence, a bad continuation byte). Overlong forms and
// surrogates are not rejected.
inline int32_t DecodeUtf8At(std::string_view s, size_t* pos) {
  const unsigned char c = static_cast<unsigned char>(s[*pos]);
  if (c < 0x80) {
    ++*pos;
    return c;
  }
  const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (n == 0 || *pos + n > s.size()) return -1;
  int32_t cp = c & (0x7F >> n);
  for (int i = 1; i < n; ++i) {
    const unsigned char cc = static_cast<unsigned char>(s[*pos + i]);
    if ((cc & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (cc & 0x3F);
  }
  *pos += n;
  return cp;
}

}  // namespace loom
