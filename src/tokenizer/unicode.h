// UTF-8 helpers shared by the tokenizer components: decoding/encoding code points, lossy
// validation with the "maximal subpart" policy (identical to Rust's String::from_utf8_lossy,
// Python's bytes.decode("utf-8", "replace") and the WHATWG TextDecoder), the GPT-2 byte-level
// alphabet, and the few Unicode predicates the Rust `tokenizers` crate uses (char::is_whitespace,
// char::is_alphanumeric).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"

namespace loom::unicode {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Length of the valid UTF-8 sequence starting at s[pos], or 0 if the bytes there are not a
// complete valid sequence (invalid lead byte, bad continuation, overlong, surrogate, truncated).
size_t ValidSequenceLength(std::string_view s, size_t pos);

// Length (>= 1) of the maximal subpart of an ill-formed sequence at s[pos] (Unicode 3.9 U+FFFD
// substitution): the bytes one U+FFFD replaces. Precondition: ValidSequenceLength(s, pos) == 0.
size_t InvalidSubpartLength(std::string_view s, size_t pos);

// True when s is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// Appends s to *out with every ill-formed subpart replaced by U+FFFD (lossy decoding).
void AppendLossy(std::string_view s, std::string* out);
std::string ToValidUtf8(std::string_view s);

// Decodes the code point at s[pos] (s must be valid UTF-8 there); stores its byte length.
char32_t DecodeAt(std::string_view s, size_t pos, size_t* len);
// Byte length of the UTF-8 sequence introduced by lead byte b (1 for invalid leads).
inline size_t SequenceLengthFromLead(uint8_t b) {
  return b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
}
using loom::AppendUtf8;  // base/utf8.h

// Rust char::is_whitespace (the Unicode White_Space property).
bool IsWhitespace(char32_t cp);
// Rust char::is_alphanumeric (Alphabetic or Numeric general categories).
bool IsAlphanumeric(char32_t cp);
// Unicode punctuation (general category P*), as used by the Punctuation pre-tokenizer.
bool IsPunctuation(char32_t cp);

// The GPT-2 byte-level alphabet: byte b <-> a printable code point.
const std::array<char32_t, 256>& ByteToCodepoint();
// Inverse mapping: code point -> byte, or -1 when cp is not in the alphabet.
int CodepointToByte(char32_t cp);
// Maps every byte of s to its alphabet code point (UTF-8 encoded).
std::string BytesToByteLevel(std::string_view s);
// Inverse of BytesToByteLevel; returns false (and leaves *out unspecified) when s contains a
// code point outside the alphabet.
bool ByteLevelToBytes(std::string_view s, std::string* out);

}  // namespace loom::unicode
