#include "io/gguf_value.h"

#include <sstream>

namespace loom {

GgufValue GgufValue::Array(GgufType element_type, std::vector<GgufValue> elements) {
  for (const GgufValue& e : elements) {
    CHECK(e.type() == element_type)
        << "GGUF array of " << GgufTypeName(element_type) << " holds a " << GgufTypeName(e.type());
  }
  GgufValue v(GgufType::kArray, std::move(elements));
  v.array_type_ = element_type;
  return v;
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

namespace {

bool IsIntegerType(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool GgufValue::is_integer() const { return IsIntegerType(type_); }

Status GgufValue::TypeError(std::string_view expected) const {
  std::string found(GgufTypeName(type_));
  if (type_ == GgufType::kArray) found += " of " + std::string(GgufTypeName(array_type_));
  return InvalidArgumentError("expected " + std::string(expected) + ", found " + found);
}

StatusOr<int64_t> GgufValue::AsInt() const {
  if (std::holds_alternative<int64_t>(rep_) && is_integer()) return std::get<int64_t>(rep_);
  if (std::holds_alternative<uint64_t>(rep_)) {
    uint64_t v = std::get<uint64_t>(rep_);
    if (v > static_cast<uint64_t>(INT64_MAX)) {
      return OutOfRangeError("value " + std::to_string(v) + " does not fit in int64");
    }
    return static_cast<int64_t>(v);
  }
  return TypeError("an integer");
}

StatusOr<double> GgufValue::AsFloat() const {
  if (is_float()) return std::get<double>(rep_);
  if (std::holds_alternative<int64_t>(rep_)) return static_cast<double>(std::get<int64_t>(rep_));
  if (std::holds_alternative<uint64_t>(rep_)) {
    return static_cast<double>(std::get<uint64_t>(rep_));
  }
  return TypeError("a number");
}

StatusOr<bool> GgufValue::AsBool() const {
  if (type_ == GgufType::kBool) return std::get<bool>(rep_);
  return TypeError("a bool");
}

StatusOr<std::string> GgufValue::AsString() const {
  if (type_ == GgufType::kString) return std::get<std::string>(rep_);
  return TypeError("a string");
}

StatusOr<std::vector<std::string>> GgufValue::AsStringArray() const {
  if (type_ != GgufType::kArray || array_type_ != GgufType::kString) {
    return TypeError("an array of string");
  }
  std::vector<std::string> out;
  out.reserve(elements().size());
  for (const GgufValue& e : elements()) out.push_back(e.raw_string());
  return out;
}

StatusOr<std::vector<float>> GgufValue::AsFloatArray() const {
  if (type_ != GgufType::kArray || array_type_ == GgufType::kString ||
      array_type_ == GgufType::kArray || array_type_ == GgufType::kBool) {
    return TypeError("an array of numbers");
  }
  std::vector<float> out;
  out.reserve(elements().size());
  for (const GgufValue& e : elements()) {
    ASSIGN_OR_RETURN(double d, e.AsFloat());
    out.push_back(static_cast<float>(d));
  }
  return out;
}

StatusOr<std::vector<int64_t>> GgufValue::AsIntArray() const {
  if (type_ != GgufType::kArray) return TypeError("an array of integers");
  if (!IsIntegerType(array_type_)) return TypeError("an array of integers");
  std::vector<int64_t> out;
  out.reserve(elements().size());
  for (const GgufValue& e : elements()) {
    ASSIGN_OR_RETURN(int64_t i, e.AsInt());
    out.push_back(i);
  }
  return out;
}

uint64_t GgufValue::raw_unsigned() const {
  CHECK(std::holds_alternative<uint64_t>(rep_)) << "raw_unsigned() of a " << GgufTypeName(type_);
  return std::get<uint64_t>(rep_);
}

int64_t GgufValue::raw_signed() const {
  CHECK(std::holds_alternative<int64_t>(rep_)) << "raw_signed() of a " << GgufTypeName(type_);
  return std::get<int64_t>(rep_);
}

double GgufValue::raw_float() const {
  CHECK(is_float()) << "raw_float() of a " << GgufTypeName(type_);
  return std::get<double>(rep_);
}

bool GgufValue::raw_bool() const {
  CHECK(type_ == GgufType::kBool) << "raw_bool() of a " << GgufTypeName(type_);
  return std::get<bool>(rep_);
}

const std::string& GgufValue::raw_string() const {
  CHECK(type_ == GgufType::kString) << "raw_string() of a " << GgufTypeName(type_);
  return std::get<std::string>(rep_);
}

const std::vector<GgufValue>& GgufValue::elements() const {
  CHECK(type_ == GgufType::kArray) << "elements() of a " << GgufTypeName(type_);
  return std::get<std::vector<GgufValue>>(rep_);
}

std::string GgufValue::DebugString() const {
  std::ostringstream ss;
  switch (type_) {
    case GgufType::kString:
      ss << '"' << raw_string() << '"';
      break;
    case GgufType::kBool:
      ss << (raw_bool() ? "true" : "false");
      break;
    case GgufType::kF32:
    case GgufType::kF64:
      ss << raw_float();
      break;
    case GgufType::kArray:
      ss << "[" << GgufTypeName(array_type_) << " x " << elements().size() << "]";
      break;
    default:
      if (std::holds_alternative<uint64_t>(rep_)) {
        ss << raw_unsigned();
      } else {
        ss << raw_signed();
      }
  }
  return ss.str();
}

bool GgufValue::operator==(const GgufValue& other) const {
  if (type_ != other.type_) return false;
  if (type_ == GgufType::kArray && array_type_ != other.array_type_) return false;
  return rep_ == other.rep_;
}

}  // namespace loom
