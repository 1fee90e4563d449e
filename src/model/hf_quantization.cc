#include "model/hf_quantization.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "io/file_bytes.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using nlohmann::json;

std::string StringAt(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// compressed-tensors: every config group's weights must be 8-bit floats.
Status CheckCompressedTensorsFp8(const json& q, const std::string& where) {
  auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty()) {
    return UnimplementedError(where +
                              ": compressed-tensors quantization_config without "
                              "config_groups is not supported");
  }
  for (const auto& [name, group] : groups->items()) {
    const json* w = group.is_object() && group.contains("weights") ? &group["weights"] : nullptr;
    const bool fp8 = w != nullptr && w->is_object() && StringAt(*w, "type") == "float" &&
                     w->value("num_bits", 0) == 8;
    if (!fp8) {
      return UnimplementedError(where + ": compressed-tensors group '" + name +
                                "' does not quantize weights to 8-bit floats; loom reads FP8 "
                                "(e4m3) compressed-tensors checkpoints only");
    }
  }
  return OkStatus();
}

class Fp8Source final : public TensorSource {
 public:
  Fp8Source(std::unique_ptr<TensorSource> inner, Fp8Checkpoint c)
      : inner_(std::move(inner)), c_(std::move(c)) {}
  bool Has(const std::string& name) const override { return inner_->Has(name); }
  std::string Describe() const override { return inner_->Describe(); }
  int64_t data_bytes() const override { return inner_->data_bytes(); }

  StatusOr<Tensor> Get(const std::string& name) const override {
    ASSIGN_OR_RETURN(Tensor w, inner_->Get(name));
    if (w.dtype() != DType::kF8E4M3) return w;
    std::string scale_name = name + "_scale_inv";
    if (!inner_->Has(scale_name)) scale_name = name + "_scale";
    const std::string what = Describe() + ": F8_E4M3 tensor '" + name + "'";
    if (!inner_->Has(scale_name)) {
      return InvalidArgumentError(what + " has no scale ('" + name + "_scale_inv' or '" + name +
                                  "_scale')");
    }
    ASSIGN_OR_RETURN(Tensor scale, inner_->Get(scale_name));
    const int64_t cols = w.shape()[w.ndim() - 1], rows = w.numel() / cols;
    std::vector<float> s(static_cast<size_t>(scale.numel()));
    DequantizeRow(scale.dtype(), scale.data(), s.data(), scale.numel());
    // Which scale covers element (r, c): one for all, one per row, or one per block.
    int64_t br = 0, bc = 0;
    if (scale.numel() == 1) {
      br = rows, bc = cols;
    } else if (scale.numel() == rows && (scale.ndim() == 1 || scale.shape()[1] == 1)) {
      br = 1, bc = cols;
    } else if (scale.ndim() == 2) {
      br = c_.block_rows > 0 ? c_.block_rows : 128;
      bc = c_.block_cols > 0 ? c_.block_cols : 128;
      if (w.ndim() != 2 || scale.shape()[0] != (rows + br - 1) / br ||
          scale.shape()[1] != (cols + bc - 1) / bc) {
        br = 0;
      }
    }
    if (br == 0) {
      return InvalidArgumentError(
          what + " " + w.shape().ToString() + ": its scale '" + scale_name + "' " +
          scale.shape().ToString() + " is neither one value, one per row, nor one per " +
          std::to_string(c_.block_rows > 0 ? c_.block_rows : 128) + "x" +
          std::to_string(c_.block_cols > 0 ? c_.block_cols : 128) + " block");
    }
    const int64_t scale_cols = (cols + bc - 1) / bc;
    const auto* in = static_cast<const uint8_t*>(w.data());
    if (cols % kQKFP8 == 0 && (bc == cols || bc % kQKFP8 == 0)) {
      // Kept in 1 byte: each run of 128 codes of a row lies under one scale.
      Tensor out = HostTensor(DType::kFP8, w.shape());
      auto* blocks = out.data_as<BlockFP8>();
      const int64_t per_row = cols / kQKFP8;
      for (int64_t r = 0; r < rows; ++r) {
        const float* srow = s.data() + (r / br) * scale_cols;
        for (int64_t j = 0; j < per_row; ++j) {
          BlockFP8& b = blocks[r * per_row + j];
          b.d = srow[j * kQKFP8 / bc];
          std::memcpy(b.qs, in + r * cols + j * kQKFP8, kQKFP8);
        }
      }
      return out;
    }
    Tensor out = HostTensor(DType::kBF16, w.shape());
    auto* o = out.data_as<uint16_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* srow = s.data() + (r / br) * scale_cols;
      for (int64_t c = 0; c < cols; ++c) {
        o[r * cols + c] = F32ToBf16(F8E4M3ToF32(in[r * cols + c]) * srow[c / bc]);
      }
    }
    return out;
  }

 private:
  std::unique_ptr<TensorSource> inner_;
  Fp8Checkpoint c_;
};

}  // namespace

StatusOr<std::optional<Fp8Checkpoint>> ParseHfQuantization(const json& config,
                                                           const std::string& where) {
  auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return std::optional<Fp8Checkpoint>();
  const json& q = *it;
  if (!q.is_object()) return InvalidArgumentError(where + ": quantization_config is not an object");
  const std::string method = StringAt(q, "quant_method");
  Fp8Checkpoint c{method};
  if (method == "fp8") {
    const std::string fmt = StringAt(q, "fmt");
    if (!fmt.empty() && fmt != "e4m3") {
      return UnimplementedError(where + ": FP8 format '" + fmt + "' is not supported (e4m3 is)");
    }
    if (auto b = q.find("weight_block_size"); b != q.end() && !b->is_null()) {
      if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
          !(*b)[1].is_number_integer() || (*b)[0].get<int>() <= 0 || (*b)[1].get<int>() <= 0) {
        return InvalidArgumentError(where + ": weight_block_size must be two positive integers");
      }
      c.block_rows = (*b)[0].get<int>();
      c.block_cols = (*b)[1].get<int>();
    }
    return std::optional<Fp8Checkpoint>(c);
  }
  if (method == "compressed-tensors") {
    RETURN_IF_ERROR(CheckCompressedTensorsFp8(q, where));
    return std::optional<Fp8Checkpoint>(c);
  }
  if (method == "fbgemm_fp8") return std::optional<Fp8Checkpoint>(c);
  if (method == "mxfp4") return std::optional<Fp8Checkpoint>();  // the loader decodes the blocks
  return UnimplementedError(where + ": quantization_config.quant_method '" + method +
                            "' is not supported yet (loom reads FP8 checkpoints: quant_method "
                            "fp8, compressed-tensors float8, fbgemm_fp8; or use a GGUF)");
}

namespace {

// The shapes and scales DequantizeMxfp4 and Mxfp4FromHfBlocks accept.
Status CheckMxfp4Pair(const Tensor& blocks, const Tensor& scales, const std::string& where) {
  const int nd = blocks.ndim();
  bool ok = blocks.dtype() == DType::kU8 && scales.dtype() == DType::kU8 && nd >= 2 && nd <= 4 &&
            scales.ndim() == nd - 1 && blocks.dim(nd - 1) == 16;
  for (int i = 0; ok && i < nd - 1; ++i) ok = blocks.dim(i) == scales.dim(i);
  if (!ok) {
    return InvalidArgumentError(where + ": MXFP4 blocks " + blocks.DebugString() + " and scales " +
                                scales.DebugString() + " (want u8 [..., G, 16] and u8 [..., G])");
  }
  const auto* e = scales.data_as<const uint8_t>();
  for (int64_t g = 0; g < scales.numel(); ++g) {
    if (e[g] == 255) {
      return InvalidArgumentError(where + ": MXFP4 scale 255 (NaN) in group " + std::to_string(g));
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<Tensor> DequantizeMxfp4(const Tensor& blocks, const Tensor& scales,
                                 const std::string& where) {
  RETURN_IF_ERROR(CheckMxfp4Pair(blocks, scales, where));
  const int nd = blocks.ndim();
  const int64_t cols = blocks.dim(nd - 2) * 32;
  const Shape shape = nd == 2   ? Shape{cols}
                      : nd == 3 ? Shape{blocks.dim(0), cols}
                                : Shape{blocks.dim(0), blocks.dim(1), cols};
  Tensor out = HostTensor(DType::kBF16, shape);
  const auto* b = blocks.data_as<const uint8_t>();
  const auto* e = scales.data_as<const uint8_t>();
  auto* o = out.data_as<uint16_t>();
  for (int64_t g = 0; g < scales.numel(); ++g) {
    const int exp = static_cast<int>(e[g]) - 127;
    for (int j = 0; j < 16; ++j) {
      const uint8_t byte = b[g * 16 + j];
      o[g * 32 + 2 * j] = F32ToBf16(std::ldexp(E2M1ToF32(byte & 0xf), exp));
      o[g * 32 + 2 * j + 1] = F32ToBf16(std::ldexp(E2M1ToF32(byte >> 4), exp));
    }
  }
  return out;
}

StatusOr<Tensor> Mxfp4FromHfBlocks(const Tensor& blocks, const Tensor& scales,
                                   const std::string& where) {
  RETURN_IF_ERROR(CheckMxfp4Pair(blocks, scales, where));
  const int nd = blocks.ndim();
  std::vector<int64_t> dims;
  for (int i = 0; i < nd - 2; ++i) dims.push_back(blocks.dim(i));
  dims.push_back(blocks.dim(nd - 2) * kQKMXFP4);
  Tensor out = HostTensor(DType::kMXFP4, ShapeFromDims(dims));
  const auto* b = blocks.data_as<const uint8_t>();
  const auto* e = scales.data_as<const uint8_t>();
  auto* o = out.data_as<BlockMXFP4>();
  for (int64_t g = 0; g < scales.numel(); ++g) {
    const uint8_t* codes = b + g * 16;
    const auto code = [&](int i) { return (codes[i / 2] >> (4 * (i % 2))) & 0xf; };
    o[g].e = e[g];
    for (int j = 0; j < 16; ++j) o[g].qs[j] = static_cast<uint8_t>(code(j) | code(j + 16) << 4);
  }
  return out;
}

Status CheckMxfp4Scales(const Tensor& t, const std::string& where) {
  CHECK(t.dtype() == DType::kMXFP4) << "CheckMxfp4Scales: " << t.DebugString();
  const auto* blocks = t.data_as<const BlockMXFP4>();
  for (int64_t b = 0; b < t.numel() / kQKMXFP4; ++b) {
    if (blocks[b].e == 255) {
      return InvalidArgumentError(where + ": MXFP4 scale 255 (NaN) in block " + std::to_string(b));
    }
  }
  return OkStatus();
}

std::unique_ptr<TensorSource> Fp8CheckpointSource(std::unique_ptr<TensorSource> inner,
                                                  Fp8Checkpoint checkpoint) {
  return std::make_unique<Fp8Source>(std::move(inner), std::move(checkpoint));
}

}  // namespace loom
