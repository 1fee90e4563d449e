// gpt-oss on the CPU backend (issue 29):
//   - config.json: sinks, q/k/v/o biases, sliding and full layers in turn, yarn, swiglu_limit;
//   - DequantizeMxfp4: codes low nibble first, e8m0 exponents, errors;
//   - MoeMlp with gpt-oss's router bias, expert biases and clamped SwiGLU against a per-row
//     reference written out longhand;
//   - the loader: the bf16 checkpoint layout (gate_up_proj [E, hidden, 2f] with gate and up
//     columns interleaved, down_proj [E, f, hidden]) and the published MXFP4 one load the same
//     experts, in loom's layout, and serve the same logits; a row's logits do not depend on the
//     step around it;
//   - GGUF: MXFP4 blocks in ggml's layout; a file converted as llama.cpp does serves the
//     checkpoint's logits;
//   - a backend without sinks refuses the model at load, naming the device.
// The transformers golden (tools/goldens/make_model_goldens.py gpt_oss) checks the whole model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "model/arch/arch.h"
#include "model/hf_quantization.h"
#include "model/model.h"
#include "model/weights.h"
#include "runtime/golden_models.h"
#include "runtime/model_test_util.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using model_test::HostF32;
using model_test::MapSource;
using model_test::ParseConfig;
using model_test::RandomValues;
using model_test::SameBytes;

nlohmann::json TinyGptOssJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 64,
    "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "attention_bias": true,
    "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4,
    "swiglu_limit": 0.6, "tie_word_embeddings": false, "hidden_act": "silu",
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false},
    "rope_theta": 150000.0})");
}

TEST(GptOssConfigTest, ReadsTheFamilysFields) {
  ModelConfig cfg = ParseConfig(TinyGptOssJson());
  EXPECT_EQ(cfg.arch, "gpt_oss");
  EXPECT_TRUE(cfg.attention_sinks);
  EXPECT_TRUE(cfg.attention_bias);
  EXPECT_TRUE(cfg.attention_out_bias);
  EXPECT_EQ(cfg.layer_window, (std::vector<int>{4, 0, 4}));
  EXPECT_EQ(cfg.num_experts, 4);
  EXPECT_EQ(cfg.moe_intermediate_size, 32);
  EXPECT_TRUE(cfg.moe_norm_topk_prob);
  EXPECT_EQ(cfg.layer_moe, (std::vector<bool>{true, true, true}));
  EXPECT_FLOAT_EQ(cfg.moe_swiglu_limit, 0.6f);
  EXPECT_EQ(cfg.rope.type, RopeType::kYarn);
  EXPECT_FALSE(cfg.rope.truncate);

  nlohmann::json j = TinyGptOssJson();  // without layer_types: sliding first, then in turn
  j.erase("layer_types");
  j.erase("swiglu_limit");
  j["num_hidden_layers"] = 4;
  cfg = ParseConfig(j);
  EXPECT_EQ(cfg.layer_window, (std::vector<int>{4, 0, 4, 0}));
  EXPECT_FLOAT_EQ(cfg.moe_swiglu_limit, 7.f);

  j["swiglu_limit"] = -1;
  ModelConfig bad;
  Status s = kGptOssArch.from_hf(j, &bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("swiglu_limit"), std::string::npos) << s.ToString();
}

Tensor U8Tensor(const std::vector<uint8_t>& v, Shape shape) {
  Tensor t = HostTensor(DType::kU8, shape);
  std::memcpy(t.data(), v.data(), v.size());
  return t;
}

TEST(Mxfp4Test, DecodesLowNibbleFirstTimesTheGroupsPowerOfTwo) {
  // One row of two groups: the first all codes 0..15 twice (low nibble = even element), scale
  // 2^0; the second code 0x7 (6.0) and 0x9 (-0.5) in every byte, scale 2^-3.
  std::vector<uint8_t> blocks(32), scales = {127, 124};
  for (int j = 0; j < 16; ++j)
    blocks[static_cast<size_t>(j)] = static_cast<uint8_t>((j % 8) * 2 + 16 * ((j % 8) * 2 + 1));
  for (int j = 16; j < 32; ++j) blocks[static_cast<size_t>(j)] = 0x97;
  auto out =
      DequantizeMxfp4(U8Tensor(blocks, Shape{1, 2, 16}), U8Tensor(scales, Shape{1, 2}), "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->dtype(), DType::kBF16);
  ASSERT_EQ(out->shape(), (Shape{1, 64}));
  const float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  const auto* o = out->data_as<const uint16_t>();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(Bf16ToF32(o[i]), kE2M1[i % 16]) << i;
  for (int i = 32; i < 64; i += 2) {
    EXPECT_EQ(Bf16ToF32(o[i]), 6.f / 8) << i;
    EXPECT_EQ(Bf16ToF32(o[i + 1]), -0.5f / 8) << i;
  }

  auto mismatched =
      DequantizeMxfp4(U8Tensor(blocks, Shape{1, 2, 16}), U8Tensor(scales, Shape{2, 1}), "w");
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("w: MXFP4 blocks"), std::string::npos);
  auto nan =
      DequantizeMxfp4(U8Tensor(blocks, Shape{1, 2, 16}), U8Tensor({127, 255}, Shape{1, 2}), "w");
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("255"), std::string::npos) << nan.status().ToString();
}

// GGUF's MXFP4 block (ggml's block_mxfp4): the exponent byte, then element j in the low nibble of
// byte j and element j + 16 in its high nibble; DequantizeMxfp4Blocks keeps the shape, in bf16.
TEST(Mxfp4Test, GgufBlocksHoldElementsJAndJPlus16InAByte) {
  std::vector<uint8_t> raw(2 * sizeof(BlockMXFP4));
  raw[0] = 128;  // 2^1
  for (int j = 0; j < 16; ++j)
    raw[static_cast<size_t>(1 + j)] = static_cast<uint8_t>(j | (15 - j) << 4);
  raw[17] = 126;  // 2^-1, every code 0x7 (6) low, 0x1 (0.5) high
  for (int j = 0; j < 16; ++j) raw[static_cast<size_t>(18 + j)] = 0x17;
  Tensor t = HostTensor(DType::kMXFP4, Shape{1, 64});
  std::memcpy(t.data(), raw.data(), raw.size());
  std::vector<float> row(64);
  DequantizeRow(DType::kMXFP4, t.data(), row.data(), 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(row[static_cast<size_t>(j)], 2 * E2M1ToF32(static_cast<uint8_t>(j))) << j;
    EXPECT_EQ(row[static_cast<size_t>(j + 16)], 2 * E2M1ToF32(static_cast<uint8_t>(15 - j))) << j;
    EXPECT_EQ(row[static_cast<size_t>(32 + j)], 3.f) << j;
    EXPECT_EQ(row[static_cast<size_t>(48 + j)], 0.25f) << j;
  }
  EXPECT_TRUE(CheckMxfp4Scales(t, "w").ok());
  raw[17] = 255;
  std::memcpy(t.data(), raw.data(), raw.size());
  Status nan = CheckMxfp4Scales(t, "w");
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.message().find("w: MXFP4 scale 255 (NaN) in block 1"), std::string::npos);
}

// The checkpoints' packing repacked into GGUF's blocks decodes to the same values, and QuantizeRow
// (OCP's shared exponent, nearest code) round-trips values that are already MXFP4.
TEST(Mxfp4Test, RepackedCheckpointBlocksDecodeToTheSameValues) {
  std::mt19937 rng(5);
  std::vector<uint8_t> blocks(3 * 4 * 16), scales(3 * 4);
  for (auto& b : blocks) b = static_cast<uint8_t>(rng());
  for (auto& s : scales) s = static_cast<uint8_t>(100 + rng() % 50);
  const Tensor hb = U8Tensor(blocks, Shape{3, 4, 16}), hs = U8Tensor(scales, Shape{3, 4});
  auto packed = Mxfp4FromHfBlocks(hb, hs, "w");
  auto ref = DequantizeMxfp4(hb, hs, "w");
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_TRUE(ref.ok());
  ASSERT_EQ(packed->dtype(), DType::kMXFP4);
  ASSERT_EQ(packed->shape(), (Shape{3, 128}));
  std::vector<float> row(128);
  std::vector<uint8_t> again(packed->row_bytes());
  for (int r = 0; r < 3; ++r) {
    const char* src = static_cast<const char*>(packed->data()) + r * packed->row_bytes();
    DequantizeRow(DType::kMXFP4, src, row.data(), 128);
    for (int i = 0; i < 128; ++i) {
      ASSERT_EQ(row[static_cast<size_t>(i)], Bf16ToF32(ref->data_as<const uint16_t>()[r * 128 + i]))
          << r << " " << i;
    }
    QuantizeRow(DType::kMXFP4, row.data(), again.data(), 128);
    std::vector<float> round(128);
    DequantizeRow(DType::kMXFP4, again.data(), round.data(), 128);
    EXPECT_EQ(round, row) << r;
  }
  auto nan = Mxfp4FromHfBlocks(hb, U8Tensor(std::vector<uint8_t>(12, 255), Shape{3, 4}), "w");
  EXPECT_FALSE(nan.ok());
}

// Each row longhand, in double: router logits with the bias, the top-k by logit, a softmax over
// those k, each expert's biased projections through the clamped SwiGLU, the weighted sum.
TEST(GptOssMoeMlpTest, MatchesAPerRowReference) {
  const int64_t n = 23, hidden = 24, experts = 5, f = 10;
  const int top_k = 2;
  const float limit = 0.5f;
  CpuBackend be(2);
  std::vector<float> router = RandomValues(experts * hidden, 1, 0.5f),
                     router_bias = RandomValues(experts, 2, 0.3f),
                     gate = RandomValues(experts * f * hidden, 3, 0.3f),
                     up = RandomValues(experts * f * hidden, 4, 0.3f),
                     down = RandomValues(experts * hidden * f, 5, 0.3f),
                     gate_bias = RandomValues(experts * f, 6, 0.3f),
                     up_bias = RandomValues(experts * f, 7, 0.3f),
                     down_bias = RandomValues(experts * hidden, 8, 0.3f);
  Backend::MoeWeights w;
  w.router = HostF32(router, Shape{experts, hidden});
  w.router_bias = HostF32(router_bias, Shape{experts});
  w.gate = HostF32(gate, Shape{experts, f, hidden});
  w.up = HostF32(up, Shape{experts, f, hidden});
  w.down = HostF32(down, Shape{experts, hidden, f});
  w.gate_bias = HostF32(gate_bias, Shape{experts, f});
  w.up_bias = HostF32(up_bias, Shape{experts, f});
  w.down_bias = HostF32(down_bias, Shape{experts, hidden});
  Backend::MoeParams p;
  p.top_k = top_k;
  p.norm_topk_prob = true;
  p.swiglu_limit = limit;
  std::vector<float> xv = RandomValues(n * hidden, 9, 1.f);
  Tensor x = HostF32(xv, Shape{n, hidden});
  Tensor out = be.Alloc(DType::kF32, Shape{n, hidden});
  Tensor logits = be.Alloc(DType::kF32, Shape{n, experts});
  Tensor ids = be.Alloc(DType::kI32, Shape{n, top_k});
  be.MoeMlp(x, w, p, logits, ids, out);

  int clamped = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = xv.data() + i * hidden;
    std::vector<double> l(experts);
    for (int64_t e = 0; e < experts; ++e) {
      l[e] = router_bias[e];
      for (int64_t c = 0; c < hidden; ++c) l[e] += double{router[e * hidden + c]} * xr[c];
      EXPECT_NEAR(logits.data_as<const float>()[i * experts + e], l[e], 1e-5);
    }
    std::vector<int64_t> order(experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
    double z = 0;
    for (int j = 0; j < top_k; ++j) z += std::exp(l[order[j]] - l[order[0]]);
    std::vector<double> want(hidden, 0.0);
    for (int j = 0; j < top_k; ++j) {
      const int64_t e = order[j];
      EXPECT_EQ(ids.data_as<const int32_t>()[i * top_k + j], e) << "row " << i;
      const double prob = std::exp(l[e] - l[order[0]]) / z;
      std::vector<double> act(f);
      for (int64_t r = 0; r < f; ++r) {
        double g = gate_bias[e * f + r], u = up_bias[e * f + r];
        for (int64_t c = 0; c < hidden; ++c) {
          g += double{gate[(e * f + r) * hidden + c]} * xr[c];
          u += double{up[(e * f + r) * hidden + c]} * xr[c];
        }
        clamped += g > limit || std::fabs(u) > limit;
        g = std::min(g, double{limit});
        u = std::clamp(u, -double{limit}, double{limit});
        act[r] = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
      }
      for (int64_t c = 0; c < hidden; ++c) {
        double y = down_bias[e * hidden + c];
        for (int64_t r = 0; r < f; ++r) y += double{down[(e * hidden + c) * f + r]} * act[r];
        want[c] += prob * y;
      }
    }
    for (int64_t c = 0; c < hidden; ++c) {
      EXPECT_NEAR(out.data_as<const float>()[i * hidden + c], want[c], 2e-5)
          << "row " << i << " col " << c;
    }
  }
  EXPECT_GT(clamped, 20);  // the clamps bind for a fair share of the values
}

// MXFP4 codes and exponents for [E, out, in]: random nibbles, exponents 2^-6 .. 2^-3.
struct Mxfp4 {
  Tensor blocks, scales;
};
Mxfp4 RandomMxfp4(int64_t e, int64_t out, int64_t in, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> b(static_cast<size_t>(e * out * in / 2)),
      s(static_cast<size_t>(e * out * in / 32));
  for (uint8_t& x : b) x = static_cast<uint8_t>(gen() & 0xff);
  for (uint8_t& x : s) x = static_cast<uint8_t>(121 + gen() % 4);
  return {U8Tensor(b, Shape{e, out, in / 32, 16}), U8Tensor(s, Shape{e, out, in / 32})};
}

// [E, a, b] bf16 -> [E, b, a] bf16.
Tensor Transposed(const Tensor& t) {
  const int64_t e = t.dim(0), a = t.dim(1), b = t.dim(2);
  Tensor out = HostTensor(DType::kBF16, Shape{e, b, a});
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t i = 0; i < a; ++i) {
      for (int64_t j = 0; j < b; ++j) {
        out.data_as<uint16_t>()[(x * b + j) * a + i] =
            t.data_as<const uint16_t>()[(x * a + i) * b + j];
      }
    }
  }
  return out;
}

// Every tensor of the tiny config, the experts in MXFP4 (`mxfp4`) or in the bf16 layout they
// decode to (gate_up_proj [E, hidden, 2f], down_proj [E, f, hidden]).
MapSource TinyCheckpoint(const ModelConfig& cfg, bool mxfp4) {
  MapSource src;
  uint32_t seed = 100;
  auto add = [&](const std::string& name, Shape shape, float scale) {
    src.tensors[name] =
        HostF32(RandomValues(static_cast<size_t>(shape.numel()), seed++, scale), shape);
  };
  const int64_t d = cfg.hidden_size, hd = cfg.head_dim, e = cfg.num_experts,
                f = cfg.moe_intermediate_size;
  const int64_t q = cfg.num_heads * hd, kv = cfg.num_kv_heads * hd;
  add("model.embed_tokens.weight", Shape{cfg.vocab_size, d}, 1.f);
  add("model.norm.weight", Shape{d}, 1.f);
  add("lm_head.weight", Shape{cfg.vocab_size, d}, 0.2f);
  for (int i = 0; i < cfg.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", Shape{d}, 1.f);
    add(p + "post_attention_layernorm.weight", Shape{d}, 1.f);
    add(p + "self_attn.q_proj.weight", Shape{q, d}, 0.2f);
    add(p + "self_attn.k_proj.weight", Shape{kv, d}, 0.2f);
    add(p + "self_attn.v_proj.weight", Shape{kv, d}, 0.2f);
    add(p + "self_attn.o_proj.weight", Shape{d, q}, 0.2f);
    add(p + "self_attn.q_proj.bias", Shape{q}, 0.1f);
    add(p + "self_attn.k_proj.bias", Shape{kv}, 0.1f);
    add(p + "self_attn.v_proj.bias", Shape{kv}, 0.1f);
    add(p + "self_attn.o_proj.bias", Shape{d}, 0.1f);
    add(p + "self_attn.sinks", Shape{cfg.num_heads}, 1.f);
    add(p + "mlp.router.weight", Shape{e, d}, 0.5f);
    add(p + "mlp.router.bias", Shape{e}, 0.2f);
    add(p + "mlp.experts.gate_up_proj_bias", Shape{e, 2 * f}, 0.3f);
    add(p + "mlp.experts.down_proj_bias", Shape{e, d}, 0.1f);
    const Mxfp4 gate_up = RandomMxfp4(e, 2 * f, d, seed++), down = RandomMxfp4(e, d, f, seed++);
    const std::string x = p + "mlp.experts.";
    if (mxfp4) {
      src.tensors[x + "gate_up_proj_blocks"] = gate_up.blocks;
      src.tensors[x + "gate_up_proj_scales"] = gate_up.scales;
      src.tensors[x + "down_proj_blocks"] = down.blocks;
      src.tensors[x + "down_proj_scales"] = down.scales;
    } else {
      src.tensors[x + "gate_up_proj"] =
          Transposed(*DequantizeMxfp4(gate_up.blocks, gate_up.scales, ""));
      src.tensors[x + "down_proj"] = Transposed(*DequantizeMxfp4(down.blocks, down.scales, ""));
    }
  }
  return src;
}

// A weight's values, decoded (host tensors).
std::vector<float> Decoded(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t r = 0; r < t.rows(); ++r) {
    DequantizeRow(t.dtype(), static_cast<const char*>(t.data()) + r * t.row_bytes(),
                  out.data() + r * t.cols(), t.cols());
  }
  return out;
}

// The MXFP4 checkpoint's experts stay MXFP4 on the CPU (4.25 bits a weight), with the values the
// bf16 checkpoint holds.
TEST(GptOssLoadTest, Bf16AndMxfp4CheckpointsLoadTheSameExpertsInLoomsLayout) {
  CpuBackend be(2);
  const ModelConfig cfg = ParseConfig(TinyGptOssJson());
  MapSource plain = TinyCheckpoint(cfg, false), packed = TinyCheckpoint(cfg, true);
  auto a = LoadWeights(cfg, plain, TensorNaming::kHuggingFace, &be);
  auto b = LoadWeights(cfg, packed, TensorNaming::kHuggingFace, &be);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (int i = 0; i < cfg.num_layers; ++i) {
    const Backend::MoeWeights& ma = a->layers[static_cast<size_t>(i)].moe;
    const Backend::MoeWeights& mb = b->layers[static_cast<size_t>(i)].moe;
    EXPECT_EQ(ma.gate.shape(), (Shape{4, 32, 64}));
    EXPECT_EQ(ma.down.shape(), (Shape{4, 64, 32}));
    EXPECT_EQ(ma.gate_bias.shape(), (Shape{4, 32}));
    for (auto [x, y] : {std::pair{&ma.gate, &mb.gate}, {&ma.up, &mb.up}, {&ma.down, &mb.down}}) {
      EXPECT_EQ(y->dtype(), DType::kMXFP4);
      EXPECT_EQ(x->shape(), y->shape());
      EXPECT_EQ(Decoded(*x), Decoded(*y)) << "layer " << i;
    }
    for (auto [x, y] : {std::pair{&ma.router, &mb.router},
                        {&ma.router_bias, &mb.router_bias},
                        {&ma.gate_bias, &mb.gate_bias},
                        {&ma.up_bias, &mb.up_bias},
                        {&ma.down_bias, &mb.down_bias}}) {
      EXPECT_TRUE(SameBytes(*x, *y)) << "layer " << i;
    }
    EXPECT_TRUE(a->layers[static_cast<size_t>(i)].sinks.defined());
    EXPECT_TRUE(a->layers[static_cast<size_t>(i)].bo.defined());
  }
  // Expert 3 of layer 1, its gate row 5 and up row 5 are columns 10 and 11 of the checkpoint's
  // [hidden, 2f] matrix; its down row 7 is column 7 of [f, hidden]; the biases likewise.
  const std::string x = "model.layers.1.mlp.experts.";
  const Tensor& gate_up = plain.tensors.at(x + "gate_up_proj");
  const Tensor& down = plain.tensors.at(x + "down_proj");
  const Backend::MoeWeights& m = a->layers[1].moe;
  for (int64_t c = 0; c < 64; ++c) {
    const auto* gu = gate_up.data_as<const uint16_t>() + 3 * 64 * 64 + c * 64;
    EXPECT_EQ(m.gate.data_as<const uint16_t>()[(3 * 32 + 5) * 64 + c], gu[10]);
    EXPECT_EQ(m.up.data_as<const uint16_t>()[(3 * 32 + 5) * 64 + c], gu[11]);
  }
  for (int64_t r = 0; r < 32; ++r) {
    EXPECT_EQ(m.down.data_as<const uint16_t>()[(3 * 64 + 7) * 32 + r],
              down.data_as<const uint16_t>()[(3 * 32 + r) * 64 + 7]);
  }
  const float* gub = plain.tensors.at(x + "gate_up_proj_bias").data_as<const float>();
  EXPECT_EQ(m.gate_bias.data_as<const float>()[3 * 32 + 5], gub[3 * 64 + 10]);
  EXPECT_EQ(m.up_bias.data_as<const float>()[3 * 32 + 5], gub[3 * 64 + 11]);

  MapSource missing = TinyCheckpoint(cfg, true);
  missing.tensors.erase("model.layers.2.mlp.experts.down_proj_blocks");
  model_test::ExpectLoadFails(cfg, missing, &be, "'model.layers.2.mlp.experts.down_proj'");
  MapSource no_sinks = TinyCheckpoint(cfg, true);
  no_sinks.tensors.erase("model.layers.0.self_attn.sinks");
  model_test::ExpectLoadFails(cfg, no_sinks, &be, "self_attn.sinks");
}

// The checkpoint as a Hugging Face directory with its config.json (MXFP4 declared as the
// published files declare it).
std::string WriteHfDir(nlohmann::json config, const MapSource& src, bool mxfp4) {
  const std::string dir = testing::ScratchDir();
  std::vector<testing::StTensor> tensors;
  for (const auto& [name, t] : src.tensors) {
    std::vector<int64_t> shape;
    for (int i = 0; i < t.ndim(); ++i) shape.push_back(t.dim(i));
    const char* dtype = t.dtype() == DType::kF32    ? "F32"
                        : t.dtype() == DType::kBF16 ? "BF16"
                                                    : "U8";
    tensors.push_back(
        {name, dtype, shape, std::string(static_cast<const char*>(t.data()), t.nbytes())});
  }
  testing::WriteBytes(dir + "/model.safetensors", testing::MakeSafetensors(tensors));
  if (mxfp4) {
    config["quantization_config"] = {{"quant_method", "mxfp4"},
                                     {"modules_to_not_convert", {"model.layers.*.self_attn"}}};
  }
  testing::WriteBytes(dir + "/config.json", config.dump());
  return dir;
}

// Through LoadModel: both files serve the same logits, and a row's logits are the same alone,
// batched with another sequence, and decoded after a prefill chunk (the sliding window of 4 is
// crossed; the sinks take weight in every softmax).
TEST(GptOssModelTest, RowsAreTheSameAloneBatchedAndChunkedForBothCheckpoints) {
  CpuBackend be(2);
  const nlohmann::json j = TinyGptOssJson();
  const ModelConfig cfg = ParseConfig(j);
  auto plain = LoadModel(WriteHfDir(j, TinyCheckpoint(cfg, false), false), &be);
  auto packed = LoadModel(WriteHfDir(j, TinyCheckpoint(cfg, true), true), &be);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  std::vector<int32_t> a(19), b(6);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>((i * 7 + 3) % 64);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int32_t>((i * 11 + 1) % 64);
  std::vector<int32_t> ba = {0, 1}, bb = {10};
  const size_t vocab = 64;
  std::vector<float> first;
  for (const auto* model : {&*plain, &*packed}) {
    const Model& m = **model;
    std::vector<KvLayer> kv = m.AllocateKv(16, 16, DType::kF32);
    std::vector<float> alone_a = golden::ForwardLogits(m, kv, {SeqSlice{a, 0, ba, true}}, 16, true);
    std::vector<float> alone_b = golden::ForwardLogits(m, kv, {SeqSlice{b, 0, bb, true}}, 16, true);
    std::vector<float> both = golden::ForwardLogits(
        m, kv, {SeqSlice{b, 0, bb, true}, SeqSlice{a, 0, ba, true}}, 16, true);
    ASSERT_EQ(both.size(), (a.size() + b.size()) * vocab);
    for (size_t i = 0; i < b.size() * vocab; ++i) ASSERT_NEAR(both[i], alone_b[i], 1e-5f) << i;
    for (size_t i = 0; i < a.size() * vocab; ++i) {
      ASSERT_NEAR(both[b.size() * vocab + i], alone_a[i], 1e-5f) << i;
    }
    std::span<const int32_t> all(a);
    golden::ForwardLogits(m, kv, {SeqSlice{all.subspan(0, 18), 0, ba, false}}, 16, false);
    std::vector<float> last =
        golden::ForwardLogits(m, kv, {SeqSlice{all.subspan(18, 1), 18, ba, true}}, 16, false);
    for (size_t i = 0; i < vocab; ++i) ASSERT_NEAR(last[i], alone_a[18 * vocab + i], 1e-5f) << i;
    if (first.empty()) {
      first = alone_a;
    } else {
      EXPECT_EQ(first, alone_a);  // the same bf16 experts from either file: the same bits
    }
  }
}

// The MXFP4 checkpoint converted as llama.cpp's converter does (tools/goldens/hf_to_gguf: arch
// gpt-oss, experts repacked into GGUF MXFP4 blocks, gate and up split, biases beside them,
// post_attention_norm, attn_sinks) serves the very logits of the checkpoint: the same bf16 experts
// either way. GGUF has no key for the clamp (llama.cpp's is 7): another limit is refused.
TEST(GptOssModelTest, TheConvertedGgufServesTheCheckpointsLogits) {
  CpuBackend be(2);
  nlohmann::json j = TinyGptOssJson();
  const ModelConfig small_limit = ParseConfig(j);
  auto refused = ConvertHfToGguf(WriteHfDir(j, TinyCheckpoint(small_limit, true), true));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("swiglu_limit"), std::string::npos);
  j["swiglu_limit"] = 7.0;
  const ModelConfig cfg = ParseConfig(j);
  const std::string dir = WriteHfDir(j, TinyCheckpoint(cfg, true), true);
  auto writer = ConvertHfToGguf(dir);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  const std::string path = dir + ".gguf";
  ASSERT_TRUE(writer->WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->architecture(), "gpt-oss");
  for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.2.ffn_down_exps.weight"}) {
    const GgufTensorInfo* info = (*file)->FindTensor(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, DType::kMXFP4) << name;
  }
  auto gguf = LoadModel(path, &be);
  auto hf = LoadModel(dir, &be);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  const ModelConfig& g = (*gguf)->config();
  EXPECT_EQ(g.arch, "gpt_oss");
  EXPECT_TRUE(g.attention_sinks);
  EXPECT_EQ(g.moe_swiglu_limit, 7.f);
  EXPECT_EQ(g.layer_window, (*hf)->config().layer_window);
  std::vector<int32_t> ids(19);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % 64);
  std::vector<int32_t> blocks = {0, 1};
  std::vector<float> logits[2];
  for (int k = 0; k < 2; ++k) {
    const Model& m = k == 0 ? **hf : **gguf;
    std::vector<KvLayer> kv = m.AllocateKv(4, 16, DType::kF32);
    logits[k] = golden::ForwardLogits(m, kv, {SeqSlice{ids, 0, blocks, true}}, 16, true);
  }
  EXPECT_EQ(logits[0], logits[1]);
}

TEST(GptOssModelTest, ABackendWithoutSinksRefusesTheModelNamingTheDevice) {
  class NoSinks : public CpuBackend {
   public:
    NoSinks() : CpuBackend(1) {}
    bool has_attention_sinks() const override { return false; }
  } be;
  const ModelConfig cfg = ParseConfig(TinyGptOssJson());
  MapSource src = TinyCheckpoint(cfg, true);
  model_test::ExpectLoadFails(cfg, src, &be, "attention sinks: the cpu");
  model_test::ExpectLoadFails(cfg, src, &be, "--device cpu");
}

}  // namespace
}  // namespace loom
