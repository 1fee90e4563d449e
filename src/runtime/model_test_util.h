// Helpers of the model-level tests that build checkpoints in memory (moe_test, gpt_oss_test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/arch/arch.h"
#include "model/weights.h"

namespace loom::model_test {

// Random f32 values, fixed seed.
inline std::vector<float> RandomValues(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline Tensor HostF32(const std::vector<float>& v, Shape shape) {
  Tensor t = HostTensor(DType::kF32, shape);
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}

// An in-memory checkpoint.
class MapSource : public TensorSource {
 public:
  std::map<std::string, Tensor> tensors;
  bool Has(const std::string& name) const override { return tensors.count(name) > 0; }
  StatusOr<Tensor> Get(const std::string& name) const override {
    auto it = tensors.find(name);
    if (it == tensors.end()) return NotFoundError("no " + name);
    return it->second;
  }
  std::string Describe() const override { return "map"; }
};

// config.json through the architecture registry, validated (failures are test failures).
inline ModelConfig ParseConfig(const nlohmann::json& j) {
  ModelConfig cfg;
  auto arch = FindArchForHfConfig(j);
  EXPECT_TRUE(arch.ok()) << arch.status().ToString();
  Status s = (*arch)->from_hf(j, &cfg);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = cfg.Validate();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return cfg;
}

inline bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Loading `src` for `cfg` fails with a message containing `text`.
inline void ExpectLoadFails(const ModelConfig& cfg, const TensorSource& src, Backend* backend,
                            const std::string& text) {
  auto w = LoadWeights(cfg, src, TensorNaming::kHuggingFace, backend);
  ASSERT_FALSE(w.ok()) << "loaded; expected an error naming " << text;
  EXPECT_NE(w.status().message().find(text), std::string::npos) << w.status().ToString();
}

}  // namespace loom::model_test
