// GGUF's two type enums: the metadata value types (GgufType) and ggml tensor type ids, with the
// mapping from ggml types onto loom's DType.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensor/dtype.h"

namespace loom {

// Metadata value types, with their on-disk ids.
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

inline bool IsValidGgufType(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::kF64); }
// "u8", "i32", "f32", "bool", "string", "array", ... (CHECKs a valid type).
std::string_view GgufTypeName(GgufType type);
// Encoded size of a scalar type in bytes; 0 for string and array.
size_t GgufScalarBytes(GgufType type);

// ggml tensor type ids (ggml.h `enum ggml_type`) of the types loom loads.
inline constexpr uint32_t kGgmlF32 = 0;
inline constexpr uint32_t kGgmlF16 = 1;
inline constexpr uint32_t kGgmlQ4_0 = 2;
inline constexpr uint32_t kGgmlQ8_0 = 8;
inline constexpr uint32_t kGgmlQ4_K = 12;
inline constexpr uint32_t kGgmlQ5_K = 13;
inline constexpr uint32_t kGgmlQ6_K = 14;
inline constexpr uint32_t kGgmlBF16 = 30;
inline constexpr uint32_t kGgmlMXFP4 = 39;

// The name ggml uses for a type id ("q4_K", "iq2_xxs", ...), or "unknown(<id>)".
std::string GgmlTypeName(uint32_t ggml_type);
// The name of a general.file_type value (llama.h `enum llama_ftype`, without "MOSTLY_"): "F16",
// "Q4_K_M", "Q8_0", ...: the quantization tag llama.cpp and ollama users pick files by; "" for an
// id llama.cpp does not define.
std::string GgufFileTypeName(int64_t file_type);

// The DType a ggml type loads as, or nullopt for types loom does not support.
std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type);
// The ggml type id of a DType (CHECKs that the DType has one; kI32 has none in loom).
uint32_t GgmlTypeFromDType(DType dtype);

}  // namespace loom
