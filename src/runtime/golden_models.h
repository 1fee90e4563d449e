// The model goldens of tests/goldens/models (tools/goldens/make_model_goldens.py, HF
// transformers in f32) as the runtime tests read them: an architecture's folder, its raw f32
// arrays, and one forward step of a loaded model on any backend. Header-only; tests only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "hf_to_gguf.h"
#include "model/model.h"
#include "runtime/forward_batch.h"

namespace loom::golden {

// The folder of golden `name` ("llama", "gemma2_gguf", ...).
inline std::filesystem::path ModelDir(const std::string& name) {
  return std::filesystem::path(LOOM_SOURCE_DIR) / "tests/goldens/models" / name;
}

// What a test parameter names: "<arch>" is the golden's HF directory; "gguf/<arch>" is that
// directory converted the way llama.cpp's converter writes it (tools/goldens/hf_to_gguf), into a
// file of this process (runtime_test and cuda_golden_test may run at once) that the caller
// removes once the model is loaded (a mapping of it stays valid).
struct GoldenSource {
  std::filesystem::path dir;  // the golden's folder (golden.json, logits)
  std::string path;           // what LoadModel reads; empty when the conversion failed
  bool gguf = false;
};

inline GoldenSource Source(const std::string& param, const std::string& prefix) {
  GoldenSource s;
  std::string name = param;
  s.gguf = name.rfind("gguf/", 0) == 0;
  if (s.gguf) name = name.substr(5);
  s.dir = ModelDir(name);
  s.path = s.dir.string();
  if (!s.gguf) return s;
  auto writer = ConvertHfToGguf(s.path);
  s.path = (std::filesystem::path(::testing::TempDir()) /
            (prefix + std::to_string(::getpid()) + "_" + name + ".gguf"))
               .string();
  Status written = writer.ok() ? writer->WriteFile(s.path) : writer.status();
  if (!written.ok()) {
    ADD_FAILURE() << param << ": " << written.ToString();
    s.path.clear();
  }
  return s;
}

// Test names of the goldens ("gguf/llama" -> "gguf_llama").
inline std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '/', '_');
  return s;
}

// A raw little-endian f32 array.
inline std::vector<float> ReadF32(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v;
  in.seekg(0, std::ios::end);
  v.resize(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

// Runs one step of `seqs` through `model` on its backend; returns f32 logits [rows, vocab] of
// every token (`all_rows`) or of the sampled rows.
inline std::vector<float> ForwardLogits(const Model& model, const std::vector<KvLayer>& kv,
                                        const std::vector<SeqSlice>& seqs, int block_size,
                                        bool all_rows, const ActivationSink* sink = nullptr) {
  Backend& backend = *model.backend();
  HostForwardBatch hb = BuildHostForwardBatch(seqs, block_size);
  if (all_rows) {
    hb.sample_rows.resize(hb.token_ids.size());
    std::iota(hb.sample_rows.begin(), hb.sample_rows.end(), 0);
  }
  ForwardInput in = UploadForwardBatch(hb, block_size, &backend);
  const int64_t vocab = model.config().vocab_size;
  Tensor logits =
      backend.Alloc(DType::kF32, Shape{static_cast<int64_t>(hb.sample_rows.size()), vocab});
  Status s = model.Forward(in, kv, logits, sink);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<float> out(static_cast<size_t>(logits.numel()));
  backend.CopyToHost(logits, out.data());
  return out;
}

}  // namespace loom::golden
