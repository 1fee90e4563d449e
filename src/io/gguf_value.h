// GgufValue: one GGUF metadata value (a scalar, a string or an array, arrays may nest), with
// typed accessors that return a Status naming what was found when the type does not fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/gguf_types.h"

namespace loom {

class GgufValue {
 public:
  // Constructors, one per GGUF type. Array() CHECKs that every element has type `element_type`.
  static GgufValue U8(uint8_t v) { return Unsigned(GgufType::kU8, v); }
  static GgufValue I8(int8_t v) { return Signed(GgufType::kI8, v); }
  static GgufValue U16(uint16_t v) { return Unsigned(GgufType::kU16, v); }
  static GgufValue I16(int16_t v) { return Signed(GgufType::kI16, v); }
  static GgufValue U32(uint32_t v) { return Unsigned(GgufType::kU32, v); }
  static GgufValue I32(int32_t v) { return Signed(GgufType::kI32, v); }
  static GgufValue U64(uint64_t v) { return Unsigned(GgufType::kU64, v); }
  static GgufValue I64(int64_t v) { return Signed(GgufType::kI64, v); }
  static GgufValue F32(float v) { return Float(GgufType::kF32, v); }
  static GgufValue F64(double v) { return Float(GgufType::kF64, v); }
  static GgufValue Bool(bool v) { return Unsigned(GgufType::kBool, v ? 1 : 0); }
  static GgufValue String(std::string v);
  static GgufValue Array(GgufType element_type, std::vector<GgufValue> elements);
  static GgufValue StringArray(const std::vector<std::string>& v);
  static GgufValue F32Array(const std::vector<float>& v);
  static GgufValue I32Array(const std::vector<int32_t>& v);

  GgufType type() const { return type_; }
  // The element type of an array (CHECKs type() == kArray).
  GgufType array_type() const;
  bool is_integer() const;  // u8..i64
  bool is_float() const { return type_ == GgufType::kF32 || type_ == GgufType::kF64; }

  // Typed reads. Errors are INVALID_ARGUMENT "expected <what>, found <type>" (callers add the
  // key and file); AsInt of a u64 above INT64_MAX is OUT_OF_RANGE.
  StatusOr<int64_t> AsInt() const;                           // any integer type
  StatusOr<double> AsFloat() const;                          // f32, f64 or any integer type
  StatusOr<bool> AsBool() const;                             // bool
  StatusOr<std::string> AsString() const;                    // string
  StatusOr<std::vector<std::string>> AsStringArray() const;  // array of string
  StatusOr<std::vector<float>> AsFloatArray() const;         // array of f32/f64/integers
  StatusOr<std::vector<int64_t>> AsIntArray() const;         // array of an integer type

  // Raw access for the writer and for nested arrays (each CHECKs the type).
  uint64_t raw_unsigned() const;  // u8/u16/u32/u64
  int64_t raw_signed() const;     // i8/i16/i32/i64
  double raw_float() const;       // f32/f64
  bool raw_bool() const;
  const std::string& raw_string() const;
  const std::vector<GgufValue>& elements() const;  // array

  // A short human-readable form: `"llama"`, `5`, `[string x 512]` (arrays are summarized).
  std::string DebugString() const;

  bool operator==(const GgufValue& other) const;

 private:
  explicit GgufValue(GgufType type) : type_(type) {}
  static GgufValue Unsigned(GgufType type, uint64_t v);
  static GgufValue Signed(GgufType type, int64_t v);
  static GgufValue Float(GgufType type, double v);
  Status TypeError(std::string_view expected) const;

  // Plain members rather than a std::variant: GCC 12 reports false maybe-uninitialized errors
  // on variants of strings and vectors under -fsanitize, and -Werror is on.
  GgufType type_;
  GgufType array_type_ = GgufType::kU8;  // meaningful only for arrays
  uint64_t bits_ = 0;  // integers (signed ones as two's complement), bool, or a double's bits
  std::string string_;
  std::vector<GgufValue> elements_;
};

}  // namespace loom
