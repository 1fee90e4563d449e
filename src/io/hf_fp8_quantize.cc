#include "io/hf_fp8_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/thread_pool.h"
#include "io/json_file.h"
#include "io/safetensors_model.h"
#include "tensor/quant.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kBlock = 128;

bool IsRouter(const std::string& name) {
  return name.ends_with(".mlp.gate.weight") || name.ends_with(".block_sparse_moe.gate.weight") ||
         name.ends_with("shared_expert_gate.weight");
}

bool Quantizes(const std::string& name, const SafetensorsTensorInfo& t) {
  return name.starts_with("model.layers.") && name.ends_with(".weight") && !IsRouter(name) &&
         t.shape.ndim() == 2 &&
         (t.dtype == DType::kF32 || t.dtype == DType::kF16 || t.dtype == DType::kBF16);
}

std::string SafetensorsDType(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    default:
      return "F8_E4M3";
  }
}

// One output tensor: its header entry and where its bytes come from.
struct OutTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::string source;  // the input tensor
  enum Kind { kCopy, kCodes, kScales } kind = kCopy;
};

// The codes (rows x cols) and scale_inv ([ceil(rows/128), ceil(cols/128)]) of one matrix.
void QuantizeMatrix(const Tensor& w, ThreadPool& pool, int threads, std::vector<uint8_t>* codes,
                    std::vector<float>* scales) {
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const int64_t sr = (rows + kBlock - 1) / kBlock, sc = (cols + kBlock - 1) / kBlock;
  codes->assign(static_cast<size_t>(rows * cols), 0);
  scales->assign(static_cast<size_t>(sr * sc), 0.f);
  const size_t row_bytes = RowBytes(w.dtype(), cols);
  const char* in = static_cast<const char*>(w.data());
  pool.ParallelFor(static_cast<size_t>(sr), static_cast<size_t>(threads), [&](size_t item, size_t) {
    const int64_t r0 = static_cast<int64_t>(item) * kBlock, r1 = std::min(rows, r0 + kBlock);
    std::vector<float> f(static_cast<size_t>((r1 - r0) * cols));
    for (int64_t r = r0; r < r1; ++r) {
      DequantizeRow(w.dtype(), in + r * row_bytes, f.data() + (r - r0) * cols, cols);
    }
    float* srow = scales->data() + item * static_cast<size_t>(sc);
    for (int64_t b = 0; b < sc; ++b) {
      const int64_t c0 = b * kBlock, c1 = std::min(cols, c0 + kBlock);
      float amax = 0.f;
      for (int64_t r = 0; r < r1 - r0; ++r) {
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(f[r * cols + c]));
      }
      const float s = amax / 448.f;
      srow[b] = s;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          (*codes)[r * cols + c] = s > 0.f ? F32ToF8E4M3(f[(r - r0) * cols + c] / s) : 0;
        }
      }
    }
  });
}

}  // namespace

StatusOr<HfFp8Result> QuantizeHfToFp8(const std::string& in_dir, const std::string& out_dir,
                                      const HfFp8Options& options) {
  std::error_code ec;
  const fs::path in(in_dir), out(out_dir);
  ASSIGN_OR_RETURN(json config, LoadJsonFile((in / "config.json").string()));
  if (!config.is_object()) return InvalidArgumentError(in_dir + "/config.json: not a JSON object");
  if (config.contains("quantization_config") && !config["quantization_config"].is_null()) {
    return InvalidArgumentError(in_dir +
                                " is already quantized (its config.json has a "
                                "quantization_config)");
  }
  if (fs::equivalent(in, out, ec))
    return InvalidArgumentError("the output would overwrite the input");
  if (fs::exists(out / "config.json", ec)) {
    return InvalidArgumentError(out_dir +
                                " already holds a model (config.json): choose a new "
                                "directory");
  }
  ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::Open(in_dir));
  fs::create_directories(out, ec);
  if (ec) return InvalidArgumentError(out_dir + ": cannot create it: " + ec.message());

  // The output's tensors, in the input's (sorted) order, scale_inv after its weight.
  std::vector<OutTensor> plan;
  for (const std::string& name : st.names()) {
    const SafetensorsTensorInfo& t = *st.Find(name);
    std::vector<int64_t> shape;
    for (int i = 0; i < t.shape.ndim(); ++i) shape.push_back(t.shape[i]);
    if (!Quantizes(name, t)) {
      plan.push_back({name, SafetensorsDType(t.dtype), shape, t.size_bytes, name});
      continue;
    }
    const int64_t rows = shape[0], cols = shape[1];
    plan.push_back(
        {name, "F8_E4M3", shape, static_cast<uint64_t>(rows * cols), name, OutTensor::kCodes});
    const std::vector<int64_t> sshape = {(rows + kBlock - 1) / kBlock,
                                         (cols + kBlock - 1) / kBlock};
    plan.push_back({name + "_scale_inv", "F32", sshape,
                    static_cast<uint64_t>(sshape[0] * sshape[1] * 4), name, OutTensor::kScales});
  }
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const OutTensor& t : plan) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';

  const std::string final_path = (out / "model.safetensors").string();
  const std::string tmp = final_path + ".part";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (f == nullptr) return InvalidArgumentError(out_dir + ": cannot create " + tmp);
  auto fail = [&](const std::string& what) {
    f.reset();
    std::error_code e;
    fs::remove(tmp, e);
    return DataLossError(final_path + ": " + what);
  };
  auto put = [&](const void* p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f.get()) == n; };
  uint64_t hlen = h.size();
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(hlen >> (8 * i));
  if (!put(le, 8) || !put(h.data(), h.size())) return fail("write failed");

  HfFp8Result result;
  const int threads = std::max(1, options.threads);
  ThreadPool pool(static_cast<size_t>(threads > 1 ? threads - 1 : 1));
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  for (const OutTensor& t : plan) {
    StatusOr<Tensor> src = st.GetTensor(t.source);
    if (!src.ok()) return fail(std::string(src.status().message()));
    bool ok = true;
    switch (t.kind) {
      case OutTensor::kCopy:
        ok = put(src->data(), src->nbytes());
        result.input_bytes += src->nbytes();
        ++result.copied;
        break;
      case OutTensor::kCodes:
        QuantizeMatrix(*src, pool, threads, &codes, &scales);
        ok = put(codes.data(), codes.size());
        result.input_bytes += src->nbytes();
        ++result.quantized;
        break;
      case OutTensor::kScales:  // of the matrix just written
        ok = put(scales.data(), scales.size() * 4);
        break;
    }
    if (!ok) return fail("write failed (disk full?)");
    result.output_bytes += t.bytes;
    if (options.progress && t.kind != OutTensor::kScales) {
      options.progress(t.name, t.kind == OutTensor::kCodes);
    }
  }
  if (std::fflush(f.get()) != 0) return fail("write failed (disk full?)");
  f.reset();
  fs::rename(tmp, final_path, ec);
  if (ec) return fail("cannot rename " + tmp + ": " + ec.message());

  config["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {kBlock, kBlock}}};
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> c(
        std::fopen((out / "config.json").string().c_str(), "wb"), &std::fclose);
    const std::string text = config.dump(2) + "\n";
    if (c == nullptr || std::fwrite(text.data(), 1, text.size(), c.get()) != text.size()) {
      return DataLossError(out_dir + "/config.json: write failed");
    }
  }
  for (const auto& entry : fs::directory_iterator(in, ec)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file() || file == "config.json" || file.ends_with(".safetensors") ||
        file == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(entry.path(), out / file, fs::copy_options::overwrite_existing, ec);
    if (ec) return DataLossError(out_dir + "/" + file + ": cannot copy: " + ec.message());
  }
  return result;
}

}  // namespace loom
