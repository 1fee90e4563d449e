#include "io/gguf_value.h"

#include <cstring>
#include <sstream>
#include <utility>

namespace loom {
namespace {

bool IsUnsignedType(GgufType type) {
  return type == GgufType::kU8 || type == GgufType::kU16 || type == GgufType::kU32 ||
         type == GgufType::kU64;
}

bool IsSignedType(GgufType type) {
  return type == GgufType::kI8 || type == GgufType::kI16 || type == GgufType::kI32 ||
         type == GgufType::kI64;
}

bool IsIntegerType(GgufType type) { return IsUnsignedType(type) || IsSignedType(type); }

}  // namespace

GgufValue GgufValue::Unsigned(GgufType type, uint64_t v) {
  GgufValue value(type);
  value.bits_ = v;
  return value;
}

GgufValue GgufValue::Signed(GgufType type, int64_t v) {
  GgufValue value(type);
  value.bits_ = static_cast<uint64_t>(v);
  return value;
}

GgufValue GgufValue::Float(GgufType type, double v) {
  GgufValue value(type);
  std::memcpy(&value.bits_, &v, sizeof(v));
  return value;
}

GgufValue GgufValue::String(std::string v) {
  GgufValue value(GgufType::kString);
  value.string_ = std::move(v);
  return value;
}

GgufValue GgufValue::Array(GgufType element_type, std::vector<GgufValue> elements) {
  for (const GgufValue& e : elements) {
    CHECK(e.type() == element_type)
        << "GGUF array of " << GgufTypeName(element_type) << " holds a " << GgufTypeName(e.type());
  }
  GgufValue value(GgufType::kArray);
  value.array_type_ = element_type;
  value.elements_ = std::move(elements);
  return value;
}

GgufValue GgufValue::StringArray(const std::vector<std::string>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (const std::string& s : v) elements.push_back(String(s));
  return Array(GgufType::kString, std::move(elements));
}

GgufValue GgufValue::F32Array(const std::vector<float>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (float f : v) elements.push_back(F32(f));
  return Array(GgufType::kF32, std::move(elements));
}

GgufValue GgufValue::I32Array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (int32_t i : v) elements.push_back(I32(i));
  return Array(GgufType::kI32, std::move(elements));
}

GgufType GgufValue::array_type() const {
  CHECK(type_ == GgufType::kArray) << "array_type() of a " << GgufTypeName(type_);
  return array_type_;
}

bool GgufValue::is_integer() const { return IsIntegerType(type_); }

Status GgufValue::TypeError(std::string_view expected) const {
  std::string found(GgufTypeName(type_));
  if (type_ == GgufType::kArray) found += " of " + std::string(GgufTypeName(array_type_));
  return InvalidArgumentError("expected " + std::string(expected) + ", found " + found);
}

StatusOr<int64_t> GgufValue::AsInt() const {
  if (IsSignedType(type_)) return raw_signed();
  if (IsUnsignedType(type_)) {
    if (bits_ > static_cast<uint64_t>(INT64_MAX)) {
      return OutOfRangeError("value " + std::to_string(bits_) + " does not fit in int64");
    }
    return static_cast<int64_t>(bits_);
  }
  return TypeError("an integer");
}

StatusOr<double> GgufValue::AsFloat() const {
  if (is_float()) return raw_float();
  if (IsSignedType(type_)) return static_cast<double>(raw_signed());
  if (IsUnsignedType(type_)) return static_cast<double>(bits_);
  return TypeError("a number");
}

StatusOr<bool> GgufValue::AsBool() const {
  if (type_ == GgufType::kBool) return bits_ != 0;
  return TypeError("a bool");
}

StatusOr<std::string> GgufValue::AsString() const {
  if (type_ == GgufType::kString) return string_;
  return TypeError("a string");
}

StatusOr<std::vector<std::string>> GgufValue::AsStringArray() const {
  if (type_ != GgufType::kArray || array_type_ != GgufType::kString) {
    return TypeError("an array of string");
  }
  std::vector<std::string> out;
  out.reserve(elements_.size());
  for (const GgufValue& e : elements_) out.push_back(e.string_);
  return out;
}

StatusOr<std::vector<float>> GgufValue::AsFloatArray() const {
  if (type_ != GgufType::kArray || !(IsIntegerType(array_type_) || array_type_ == GgufType::kF32 ||
                                     array_type_ == GgufType::kF64)) {
    return TypeError("an array of numbers");
  }
  std::vector<float> out;
  out.reserve(elements_.size());
  for (const GgufValue& e : elements_) {
    ASSIGN_OR_RETURN(double d, e.AsFloat());
    out.push_back(static_cast<float>(d));
  }
  return out;
}

StatusOr<std::vector<int64_t>> GgufValue::AsIntArray() const {
  if (type_ != GgufType::kArray || !IsIntegerType(array_type_)) {
    return TypeError("an array of integers");
  }
  std::vector<int64_t> out;
  out.reserve(elements_.size());
  for (const GgufValue& e : elements_) {
    ASSIGN_OR_RETURN(int64_t i, e.AsInt());
    out.push_back(i);
  }
  return out;
}

uint64_t GgufValue::raw_unsigned() const {
  CHECK(IsUnsignedType(type_)) << "raw_unsigned() of a " << GgufTypeName(type_);
  return bits_;
}

int64_t GgufValue::raw_signed() const {
  CHECK(IsSignedType(type_)) << "raw_signed() of a " << GgufTypeName(type_);
  return static_cast<int64_t>(bits_);
}

double GgufValue::raw_float() const {
  CHECK(is_float()) << "raw_float() of a " << GgufTypeName(type_);
  double d;
  std::memcpy(&d, &bits_, sizeof(d));
  return d;
}

bool GgufValue::raw_bool() const {
  CHECK(type_ == GgufType::kBool) << "raw_bool() of a " << GgufTypeName(type_);
  return bits_ != 0;
}

const std::string& GgufValue::raw_string() const {
  CHECK(type_ == GgufType::kString) << "raw_string() of a " << GgufTypeName(type_);
  return string_;
}

const std::vector<GgufValue>& GgufValue::elements() const {
  CHECK(type_ == GgufType::kArray) << "elements() of a " << GgufTypeName(type_);
  return elements_;
}

std::string GgufValue::DebugString() const {
  std::ostringstream ss;
  if (type_ == GgufType::kString) {
    ss << '"' << string_ << '"';
  } else if (type_ == GgufType::kBool) {
    ss << (bits_ != 0 ? "true" : "false");
  } else if (is_float()) {
    ss << raw_float();
  } else if (type_ == GgufType::kArray) {
    ss << "[" << GgufTypeName(array_type_) << " x " << elements_.size() << "]";
  } else if (IsSignedType(type_)) {
    ss << raw_signed();
  } else {
    ss << bits_;
  }
  return ss.str();
}

bool GgufValue::operator==(const GgufValue& other) const {
  if (type_ != other.type_) return false;
  switch (type_) {
    case GgufType::kString:
      return string_ == other.string_;
    case GgufType::kArray:
      return array_type_ == other.array_type_ && elements_ == other.elements_;
    case GgufType::kF32:
    case GgufType::kF64:
      return raw_float() == other.raw_float();
    default:
      return bits_ == other.bits_;
  }
}

}  // namespace loom
