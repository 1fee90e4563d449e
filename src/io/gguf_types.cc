#include "io/gguf_types.h"

#include "base/check.h"

namespace loom {

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  CHECK(false) << "invalid GgufType " << static_cast<uint32_t>(type);
  return "";
}

size_t GgufScalarBytes(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  CHECK(false) << "invalid GgufType " << static_cast<uint32_t>(type);
  return 0;
}

std::string GgmlTypeName(uint32_t ggml_type) {
  // Index = ggml type id; empty = an id that ggml retired (Q4_2, Q4_3, the repacked Q4_0_4_4...).
  static const char* const kNames[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "",       "",      "q5_0",  "q5_1",
      "q8_0",    "q8_1",   "q2_K",    "q3_K",  "q4_K",   "q5_K",  "q6_K",  "q8_K",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
      "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m", "bf16",  "",
      "",        "",       "tq1_0",   "tq2_0", "",       "",      "",      "mxfp4",
  };
  if (ggml_type < sizeof(kNames) / sizeof(kNames[0]) && kNames[ggml_type][0] != '\0') {
    return kNames[ggml_type];
  }
  return "unknown(" + std::to_string(ggml_type) + ")";
}

std::string GgufFileTypeName(int64_t file_type) {
  // Index = llama_ftype; empty = an id llama.cpp retired (Q4_1_SOME_F16, Q4_2, Q4_3, the repacked
  // Q4_0_4_4 / 4_8 / 8_8).
  static const char* const kNames[] = {
      "F32",    "F16",    "Q4_0",  "Q4_1",    "",       "",       "",          "Q8_0",
      "Q5_0",   "Q5_1",   "Q2_K",  "Q3_K_S",  "Q3_K_M", "Q3_K_L", "Q4_K_S",    "Q4_K_M",
      "Q5_K_S", "Q5_K_M", "Q6_K",  "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS",    "IQ3_XXS",
      "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS",    "IQ1_M",
      "BF16",   "",       "",      "",        "TQ1_0",  "TQ2_0",  "MXFP4_MOE",
  };
  if (file_type >= 0 && file_type < static_cast<int64_t>(sizeof(kNames) / sizeof(kNames[0]))) {
    return kNames[file_type];
  }
  return "";
}

std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlF32:
      return DType::kF32;
    case kGgmlF16:
      return DType::kF16;
    case kGgmlBF16:
      return DType::kBF16;
    case kGgmlQ8_0:
      return DType::kQ8_0;
    case kGgmlQ4_0:
      return DType::kQ4_0;
    case kGgmlQ4_K:
      return DType::kQ4_K;
    case kGgmlQ5_K:
      return DType::kQ5_K;
    case kGgmlQ6_K:
      return DType::kQ6_K;
    case kGgmlMXFP4:
      return DType::kMXFP4;
    default:
      return std::nullopt;
  }
}

uint32_t GgmlTypeFromDType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kGgmlF32;
    case DType::kF16:
      return kGgmlF16;
    case DType::kBF16:
      return kGgmlBF16;
    case DType::kQ8_0:
      return kGgmlQ8_0;
    case DType::kQ4_0:
      return kGgmlQ4_0;
    case DType::kQ4_K:
      return kGgmlQ4_K;
    case DType::kQ5_K:
      return kGgmlQ5_K;
    case DType::kQ6_K:
      return kGgmlQ6_K;
    case DType::kMXFP4:
      return kGgmlMXFP4;
    case DType::kI32:
    case DType::kF8E4M3:
    case DType::kFP8:
    case DType::kU8:
      break;
  }
  CHECK(false) << "DType " << DTypeName(dtype) << " has no GGUF type in loom";
  return 0;
}

}  // namespace loom
