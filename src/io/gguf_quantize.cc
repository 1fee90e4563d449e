#include "io/gguf_quantize.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "base/thread_pool.h"
#include "io/gguf_writer.h"
#include "tensor/quant.h"

namespace loom {
namespace {

// llama.h's llama_ftype ids.
const QuantScheme kSchemes[] = {
    {"F32", 0, DType::kF32},      {"F16", 1, DType::kF16},      {"Q4_0", 2, DType::kQ4_0},
    {"Q8_0", 7, DType::kQ8_0},    {"Q4_K_S", 14, DType::kQ4_K}, {"Q4_K_M", 15, DType::kQ4_K},
    {"Q5_K_S", 16, DType::kQ5_K}, {"Q5_K_M", 17, DType::kQ5_K}, {"Q6_K", 18, DType::kQ6_K},
    {"BF16", 32, DType::kBF16},
};

// What llama.cpp's quantizer calls a tensor's category (tensor_get_category): the first match.
enum class Category { kOutput, kTokenEmbd, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnDown, kOther };

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

Category CategoryOf(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  // attn_qkv and attn_kv_b count as attn_v (category_is_attn_v).
  if (Contains(name, "attn_qkv.weight") || Contains(name, "attn_kv_b.weight") ||
      Contains(name, "attn_v.weight")) {
    return Category::kAttnV;
  }
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up") || Contains(name, "ffn_gate")) return Category::kOther;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// tensor_allows_quantization, for the tensors of the architectures loom reads.
bool Quantizable(const GgufTensorInfo& t) {
  if (t.shape.ndim() < 2) return false;
  const std::string& n = t.name;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  return !Contains(n, "_norm.weight") && !Contains(n, "ffn_gate_inp.weight");
}

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int64_t IntOr(const GgufFile& f, const std::string& key, int64_t def) {
  StatusOr<int64_t> v = f.GetInt(key);
  return v.ok() ? *v : def;
}

// The fallback for rows the type's blocks do not divide (tensor_type_fallback): q8_0, then f16.
DType FitRows(DType t, int64_t cols) {
  if (cols % GetDTypeInfo(t).block_elems == 0) return t;
  if (cols % GetDTypeInfo(DType::kQ8_0).block_elems == 0) return DType::kQ8_0;
  return DType::kF16;
}

// The model facts the mixture reads, and its running counters (file order, as llama.cpp).
struct MixtureState {
  int n_layer = 0, n_expert = 0;
  bool llama_70b = false, tied_embeddings = true;
  int n_attn_v = 0, i_attn_v = 0, i_ffn_down = 0;
};

// llama_tensor_get_type_impl for the schemes in kSchemes (quantized base types only).
StatusOr<DType> MixtureType(const QuantScheme& s, const GgufTensorInfo& t, MixtureState& st) {
  const Category cat = CategoryOf(t.name);
  const std::string& f = s.name;
  DType type = s.base;
  if (cat == Category::kOutput || (st.tied_embeddings && cat == Category::kTokenEmbd)) {
    const int64_t cols = t.shape[t.shape.ndim() - 1];
    if (cols % GetDTypeInfo(type).block_elems != 0) {
      type = DType::kQ8_0;
    } else if (type != DType::kQ8_0) {
      type = DType::kQ6_K;
    }
  } else if (cat == Category::kAttnV) {
    if ((f == "Q4_K_M" || f == "Q5_K_M") && UseMoreBits(st.i_attn_v, st.n_attn_v)) {
      type = DType::kQ6_K;
    } else if (f == "Q4_K_S" && st.i_attn_v < 4) {
      type = DType::kQ5_K;
    }
    if (st.llama_70b && type == DType::kQ4_K) type = DType::kQ5_K;
    if (st.n_expert == 8) type = DType::kQ8_0;
    ++st.i_attn_v;
  } else if (cat == Category::kAttnK) {
    if (st.n_expert == 8) type = DType::kQ8_0;
  } else if (cat == Category::kFfnDown) {
    int layer = st.i_ffn_down;
    if (st.n_expert > 1) {  // experts' tensors are not in layer order: read the layer
      if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) != 1 || layer < 0 || layer >= st.n_layer) {
        return InvalidArgumentError("tensor " + t.name + ": no layer index in [0, " +
                                    std::to_string(st.n_layer) + ") in its name");
      }
    }
    if ((f == "Q4_K_M" || f == "Q5_K_M") && UseMoreBits(layer, st.n_layer)) {
      type = DType::kQ6_K;
    } else if (f == "Q4_K_S" && layer < st.n_layer / 8) {
      type = DType::kQ5_K;
    }
    ++st.i_ffn_down;
  } else if (cat == Category::kAttnOutput) {
    if (st.n_expert == 8 && (f == "Q4_K_S" || f == "Q4_K_M")) type = DType::kQ5_K;
  }
  return type;
}

bool IsPlain(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// llama.cpp's order of a model's tensors (llama_model_loader's weight_name_comparer): by layer
// (tensors outside blk.N first), then by name. llama-quantize walks and writes them in it.
int LayerOf(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}
std::vector<const GgufTensorInfo*> LlamaCppOrder(const GgufFile& f) {
  std::vector<const GgufTensorInfo*> out;
  for (const GgufTensorInfo& t : f.tensors()) out.push_back(&t);
  std::stable_sort(out.begin(), out.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    const int la = LayerOf(a->name), lb = LayerOf(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  return out;
}

}  // namespace

StatusOr<QuantScheme> ParseQuantScheme(const std::string& name) {
  std::string up = name;
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up == "Q4_K") up = "Q4_K_M";
  if (up == "Q5_K") up = "Q5_K_M";
  std::string known;
  for (const QuantScheme& s : kSchemes) {
    if (s.name == up) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  return InvalidArgumentError("quantization type '" + name + "' is not one of " + known);
}

StatusOr<std::vector<TensorQuantPlan>> PlanGgufQuantization(const GgufFile& in,
                                                            const GgufQuantizeOptions& options) {
  if (in.tensors().empty()) return InvalidArgumentError(in.path() + ": the file has no tensors");
  const std::string arch = in.architecture();
  MixtureState st;
  st.n_layer = static_cast<int>(IntOr(in, arch + ".block_count", 0));
  st.n_expert = static_cast<int>(IntOr(in, arch + ".expert_count", 0));
  st.llama_70b = arch == "llama" && st.n_layer == 80 &&
                 IntOr(in, arch + ".attention.head_count", 0) !=
                     IntOr(in, arch + ".attention.head_count_kv", 0);
  for (const GgufTensorInfo& t : in.tensors()) {
    if (CategoryOf(t.name) == Category::kOutput) st.tied_embeddings = false;
    if (CategoryOf(t.name) == Category::kAttnV) ++st.n_attn_v;
  }
  const QuantScheme& s = options.scheme;
  std::vector<TensorQuantPlan> plan;
  for (const GgufTensorInfo* tp : LlamaCppOrder(in)) {
    const GgufTensorInfo& t = *tp;
    DType to = t.dtype;
    if (Quantizable(t)) {
      to = s.base;
      if (s.quantized()) {
        if (!options.pure) {
          StatusOr<DType> mixed = MixtureType(s, t, st);
          if (!mixed.ok()) return mixed.status();
          to = *mixed;
        }
        to = FitRows(to, t.shape[t.shape.ndim() - 1]);
      }
    }
    if (to != t.dtype && !IsPlain(t.dtype) && !options.allow_requantize) {
      return InvalidArgumentError(in.path() + ": tensor " + t.name + " is already " +
                                  std::string(DTypeName(t.dtype)) + "; converting it to " +
                                  std::string(DTypeName(to)) +
                                  " compounds two roundings (--allow-requantize to do it anyway)");
    }
    plan.push_back({t.name, t.shape, t.dtype, to});
  }
  return plan;
}

StatusOr<GgufQuantizeResult> QuantizeGguf(const GgufFile& in, const std::string& out_path,
                                          const GgufQuantizeOptions& options) {
  GgufQuantizeResult result;
  StatusOr<std::vector<TensorQuantPlan>> plan = PlanGgufQuantization(in, options);
  if (!plan.ok()) return plan.status();
  result.plan = std::move(*plan);

  // llama-quantize's metadata: the input's keys in order, without the split keys, then these two
  // (moved to the end when present: gguf_set_val removes a key and appends it).
  GgufWriter w(in.alignment());
  for (const std::string& key : in.metadata_keys()) {
    if (key == "general.quantization_version" || key == "general.file_type" || key == "split.no" ||
        key == "split.count" || key == "split.tensors.count") {
      continue;
    }
    w.Set(key, in.metadata().at(key));
  }
  w.SetU32("general.quantization_version", 2);  // GGML_QNT_VERSION
  w.SetU32("general.file_type", options.scheme.file_type);
  for (const TensorQuantPlan& p : result.plan) w.DeclareTensor(p.name, p.to, p.shape);

  const std::string tmp = out_path + ".part";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (f == nullptr) return InvalidArgumentError(out_path + ": cannot create " + tmp);
  auto fail = [&](const std::string& what) {
    f.reset();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return DataLossError(out_path + ": " + what);
  };
  auto put = [&](const void* p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f.get()) == n; };
  const std::string header = w.Header();
  if (!put(header.data(), header.size())) return fail("write failed");

  uint64_t total = 0;
  for (const GgufTensorInfo& t : in.tensors()) total += t.size_bytes;
  const int threads = std::max(1, options.threads);
  ThreadPool pool(static_cast<size_t>(threads - 1 > 0 ? threads - 1 : 1));
  const std::string zeros(w.alignment(), '\0');
  std::string out;
  uint64_t done = 0;
  for (const TensorQuantPlan& p : result.plan) {
    const GgufTensorInfo& t = *in.FindTensor(p.name);
    StatusOr<Tensor> src = in.GetTensor(t.name);
    if (!src.ok()) return fail(src.status().message());
    const int64_t cols = p.shape[p.shape.ndim() - 1];
    const int64_t rows = p.shape.numel() / cols;
    const size_t out_row = RowBytes(p.to, cols), in_row = RowBytes(p.from, cols);
    const char* in_bytes = static_cast<const char*>(src->data());
    size_t nbytes = static_cast<size_t>(rows) * out_row;
    const char* data = in_bytes;
    if (p.to != p.from) {
      out.resize(nbytes);
      constexpr int64_t kRowsPerItem = 16;
      const size_t items = static_cast<size_t>((rows + kRowsPerItem - 1) / kRowsPerItem);
      std::vector<std::vector<float>> scratch(static_cast<size_t>(threads),
                                              std::vector<float>(static_cast<size_t>(cols)));
      pool.ParallelFor(items, static_cast<size_t>(threads), [&](size_t item, size_t worker) {
        float* row = scratch[worker].data();
        const int64_t end =
            std::min<int64_t>(rows, (static_cast<int64_t>(item) + 1) * kRowsPerItem);
        for (int64_t r = static_cast<int64_t>(item) * kRowsPerItem; r < end; ++r) {
          DequantizeRow(p.from, in_bytes + r * in_row, row, cols);
          QuantizeRow(p.to, row, out.data() + r * out_row, cols);
        }
      });
      data = out.data();
    }
    if (!put(data, nbytes) || !put(zeros.data(), w.PaddingAfter(nbytes))) {
      return fail("write failed (disk full?)");
    }
    result.input_bytes += t.size_bytes;
    result.output_bytes += nbytes;
    done += t.size_bytes;
    if (options.progress) options.progress(done, total);
  }
  if (std::fflush(f.get()) != 0) return fail("write failed (disk full?)");
  f.reset();
  std::error_code ec;
  std::filesystem::rename(tmp, out_path, ec);
  if (ec) return fail("cannot rename " + tmp + ": " + ec.message());
  return result;
}

}  // namespace loom
