// Writes a small seed corpus of valid files for a fuzzer:
// `fuzz_make_seeds gguf|safetensors|kv_disk_header DIR`.
// Seeds are built with loom's own writers (GGUF, KV block files) or by hand (safetensors), covering
// every GGUF metadata type, nested arrays, every supported tensor type, and sharing/metadata
// corner cases.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "base/check.h"
#include "io/gguf_writer.h"
#include "kv/kv_disk_store.h"

namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Filled(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + static_cast<char>(i * 7));
  return s;
}

void GgufSeeds(const std::string& dir) {
  using loom::DType;
  using loom::GgufType;
  using loom::GgufValue;
  using loom::Shape;
  loom::GgufWriter meta;
  meta.Set("u8", GgufValue::U8(1));
  meta.Set("i8", GgufValue::I8(-1));
  meta.Set("u16", GgufValue::U16(2));
  meta.Set("i16", GgufValue::I16(-2));
  meta.SetU32("u32", 3);
  meta.SetI32("i32", -3);
  meta.SetU64("u64", 4);
  meta.Set("i64", GgufValue::I64(-4));
  meta.SetF32("f32", 0.5f);
  meta.Set("f64", GgufValue::F64(0.25));
  meta.SetBool("bool", true);
  meta.SetString("general.architecture", "llama");
  meta.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "a"});
  meta.SetF32Array("tokenizer.ggml.scores", {0.f, -1.f, 2.f});
  meta.SetI32Array("tokenizer.ggml.token_type", {2, 3, 1});
  meta.Set("nested", GgufValue::Array(GgufType::kArray, {GgufValue::I32Array({1})}));
  Write(dir + "/metadata.gguf", meta.Serialize());

  loom::GgufWriter tensors(64);
  tensors.SetString("general.architecture", "qwen2");
  tensors.AddTensor("f32", DType::kF32, Shape{2, 3}, Filled(24, 1));
  tensors.AddTensor("f16", DType::kF16, Shape{4}, Filled(8, 2));
  tensors.AddTensor("bf16", DType::kBF16, Shape{1, 2, 2}, Filled(8, 3));
  tensors.AddTensor("q8_0", DType::kQ8_0, Shape{32}, Filled(34, 4));
  tensors.AddTensor("q4_0", DType::kQ4_0, Shape{2, 32}, Filled(36, 5));
  tensors.AddTensor("q4_K", DType::kQ4_K, Shape{256}, Filled(144, 6));
  tensors.AddTensor("q6_K", DType::kQ6_K, Shape{256}, Filled(210, 7));
  Write(dir + "/tensors.gguf", tensors.Serialize());

  loom::GgufWriter empty;
  Write(dir + "/empty.gguf", empty.Serialize());
}

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

void SafetensorsSeeds(const std::string& dir) {
  const std::string h1 =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},)"
      R"("c":{"dtype":"F16","shape":[],"data_offsets":[22,24]}})";
  Write(dir + "/three.safetensors", Le64(h1.size()) + h1 + Filled(24, 9));
  const std::string h2 = R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})";
  Write(dir + "/empty_tensor.safetensors", Le64(h2.size()) + h2);
  const std::string h3 = R"({"x":{"dtype":"F32","shape":[1,1,1,2],"data_offsets":[0,8]}} )";
  Write(dir + "/four_dims.safetensors", Le64(h3.size()) + h3 + Filled(8, 1));
}

// Complete KV block files written by KvDiskStore itself (small blocks, with and without an
// adapter id), and one cut after its header.
void KvDiskHeaderSeeds(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path stage = fs::path(dir) / "stage";
  for (int variant = 0; variant < 2; ++variant) {
    loom::KvDiskFormat f;
    f.model_fingerprint = "fuzz";
    f.kv_dtype = variant == 0 ? "bf16" : "f32";
    f.tokenizer_hash = "tok";
    f.adapter_id = variant == 0 ? "" : "lora-1";
    f.block_size = 2;
    f.num_layers = 1;
    f.num_kv_heads = 1;
    f.head_dim = 2;
    f.block_bytes = variant == 0 ? 16 : 32;
    auto store = loom::KvDiskStore::Open(stage.string(), f, int64_t{1} << 30);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      std::exit(1);
    }
    const std::string payload =
        Filled(static_cast<size_t>(f.block_bytes), static_cast<char>(variant));
    const loom::BlockHash hash{static_cast<uint64_t>(variant) + 1, 42};
    CHECK_OK(
        (*store)->Write(hash, loom::BlockHash{},
                        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()),
                                                 payload.size())));
    const std::string name = variant == 0 ? "/block.kvb" : "/block_adapter.kvb";
    fs::copy_file((*store)->PathOf(hash), dir + name, fs::copy_options::overwrite_existing);
    if (variant == 0) {
      fs::copy_file((*store)->PathOf(hash), dir + "/header_only.kvb",
                    fs::copy_options::overwrite_existing);
      fs::resize_file(dir + "/header_only.kvb", static_cast<uintmax_t>(loom::kKvDiskHeaderBytes));
    }
    store->reset();
    fs::remove_all(stage);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s gguf|safetensors|kv_disk_header DIR\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  if (kind == "gguf") {
    GgufSeeds(argv[2]);
  } else if (kind == "safetensors") {
    SafetensorsSeeds(argv[2]);
  } else if (kind == "kv_disk_header") {
    KvDiskHeaderSeeds(argv[2]);
  } else {
    std::fprintf(stderr, "unknown kind %s\n", kind.c_str());
    return 2;
  }
  return 0;
}
