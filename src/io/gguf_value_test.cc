#include "io/gguf_value.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"

namespace loom {
namespace {

using testing::HasError;

TEST(GgufValueTest, IntegersOfEveryWidthReadAsInt) {
  EXPECT_EQ(*GgufValue::U8(200).AsInt(), 200);
  EXPECT_EQ(*GgufValue::I8(-5).AsInt(), -5);
  EXPECT_EQ(*GgufValue::U16(65535).AsInt(), 65535);
  EXPECT_EQ(*GgufValue::I16(-300).AsInt(), -300);
  EXPECT_EQ(*GgufValue::U32(4000000000u).AsInt(), 4000000000);
  EXPECT_EQ(*GgufValue::I32(-7).AsInt(), -7);
  EXPECT_EQ(*GgufValue::I64(INT64_MIN).AsInt(), INT64_MIN);
  EXPECT_EQ(*GgufValue::U64(uint64_t{1} << 40).AsInt(), int64_t{1} << 40);
  EXPECT_TRUE(HasError(GgufValue::U64(UINT64_MAX).AsInt().status(), StatusCode::kOutOfRange,
                       {"18446744073709551615"}));
}

TEST(GgufValueTest, TypeMismatchesSayWhatWasFound) {
  EXPECT_TRUE(HasError(GgufValue::String("x").AsInt().status(), StatusCode::kInvalidArgument,
                       {"expected an integer, found string"}));
  EXPECT_TRUE(HasError(GgufValue::F32(1.f).AsBool().status(), StatusCode::kInvalidArgument,
                       {"expected a bool, found f32"}));
  EXPECT_TRUE(HasError(GgufValue::I32Array({1}).AsStringArray().status(),
                       StatusCode::kInvalidArgument, {"found array of i32"}));
  EXPECT_TRUE(HasError(GgufValue::StringArray({"a"}).AsIntArray().status(),
                       StatusCode::kInvalidArgument, {"found array of string"}));
  EXPECT_TRUE(HasError(GgufValue::Bool(true).AsString().status(), StatusCode::kInvalidArgument,
                       {"found bool"}));
}

TEST(GgufValueTest, FloatsAndArrays) {
  EXPECT_EQ(*GgufValue::F32(1e-5f).AsFloat(), static_cast<double>(1e-5f));
  EXPECT_EQ(*GgufValue::F64(0.1).AsFloat(), 0.1);
  EXPECT_EQ(*GgufValue::U32(10000).AsFloat(), 10000.0);  // rope bases are sometimes integers
  EXPECT_EQ(*GgufValue::Bool(true).AsBool(), true);
  EXPECT_EQ(*GgufValue::StringArray({"a", "", "c"}).AsStringArray(),
            (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(*GgufValue::F32Array({0.5f, -1.f}).AsFloatArray(), (std::vector<float>{0.5f, -1.f}));
  EXPECT_EQ(*GgufValue::I32Array({3, -4}).AsIntArray(), (std::vector<int64_t>{3, -4}));
  GgufValue nested = GgufValue::Array(GgufType::kArray,
                                      {GgufValue::I32Array({1, 2}), GgufValue::StringArray({"x"})});
  EXPECT_EQ(nested.array_type(), GgufType::kArray);
  EXPECT_EQ(nested.elements()[1].elements()[0].raw_string(), "x");
  EXPECT_EQ(nested.DebugString(), "[array x 2]");
  EXPECT_FALSE(nested.AsFloatArray().ok());
  EXPECT_EQ(GgufValue::String("llama").DebugString(), "\"llama\"");
}

TEST(GgufTypesTest, GgmlTypeNamesAndDTypes) {
  EXPECT_EQ(GgmlTypeName(0), "f32");
  EXPECT_EQ(GgmlTypeName(3), "q4_1");
  EXPECT_EQ(GgmlTypeName(6), "q5_0");
  EXPECT_EQ(GgmlTypeName(10), "q2_K");
  EXPECT_EQ(GgmlTypeName(13), "q5_K");
  EXPECT_EQ(GgmlTypeName(16), "iq2_xxs");
  EXPECT_EQ(GgmlTypeName(30), "bf16");
  EXPECT_EQ(GgmlTypeName(4), "unknown(4)");  // retired Q4_2
  EXPECT_EQ(GgmlTypeName(1000), "unknown(1000)");
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_EQ(DTypeFromGgmlType(GgmlTypeFromDType(d)), d) << DTypeName(d);
  }
  EXPECT_EQ(GgmlTypeFromDType(DType::kQ4_K), 12u);
  EXPECT_EQ(GgmlTypeFromDType(DType::kQ6_K), 14u);
  EXPECT_EQ(GgmlTypeFromDType(DType::kQ5_K), 13u);
  EXPECT_FALSE(DTypeFromGgmlType(11).has_value());  // q3_K
}

}  // namespace
}  // namespace loom
