// `loom quantize MODEL OUT.gguf TYPE [--pure] [--allow-requantize] [--threads N]`: a GGUF model
// converted to one of llama.cpp's quantization schemes (io/gguf_quantize.h), the file
// `llama-quantize MODEL OUT.gguf TYPE` writes. One line per tensor on stderr, as llama-quantize
// prints them, then the sizes. `loom quantize HF_DIR OUT_DIR FP8`: a Hugging Face checkpoint
// written as an FP8 one with 128 x 128 block scales (io/hf_fp8_quantize.h).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/session.h"
#include "io/gguf_quantize.h"
#include "io/hf_fp8_quantize.h"

namespace loom {
namespace {

struct QuantizeFlags {
  std::string model, out, type;
  bool pure = false, allow_requantize = false;
  int threads = 0;
  std::string revision, quant, models_dir;  // a model id's, as ModelFlags
};

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int Threads(const QuantizeFlags& f) {
  return f.threads > 0 ? f.threads
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void RunHfFp8(const std::string& dir, const QuantizeFlags& f) {
  HfFp8Options options;
  options.threads = Threads(f);
  std::fprintf(stderr, "quantizing %s to %s (FP8 e4m3, 128x128 block scales, %d threads)\n",
               dir.c_str(), f.out.c_str(), options.threads);
  options.progress = [](const std::string& name, bool quantized) {
    if (quantized) std::fprintf(stderr, "  %s -> F8_E4M3\n", name.c_str());
  };
  const auto start = std::chrono::steady_clock::now();
  StatusOr<HfFp8Result> r = QuantizeHfToFp8(dir, f.out, options);
  if (!r.ok()) Fail(std::string(r.status().message()));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(
      stderr, "wrote %s: %d tensors quantized, %d copied; %.2f MiB -> %.2f MiB in %.1f s\n",
      f.out.c_str(), r->quantized, r->copied, MiB(r->input_bytes), MiB(r->output_bytes), s);
}

bool IsFp8(std::string type) {
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "fp8";
}

void RunQuantize(const QuantizeFlags& f) {
  const ModelLibrary library(ResolveLibraryOptions(ProcessEnvironment(), f.models_dir));
  StatusOr<ResolvedModel> resolved = library.Resolve(f.model, f.revision, f.quant);
  if (!resolved.ok()) Fail(std::string(resolved.status().message()));
  const std::string& path = resolved->path;
  const bool gguf = path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  if (IsFp8(f.type)) {
    if (gguf) {
      Fail("FP8: loom quantize writes FP8 from a Hugging Face directory (safetensors), not from " +
           path);
    }
    return RunHfFp8(path, f);
  }
  StatusOr<QuantScheme> scheme = ParseQuantScheme(f.type);
  if (!scheme.ok()) Fail(std::string(scheme.status().message()));
  if (!gguf) {
    Fail(path +
         " is not a .gguf file: loom quantize writes GGUF types from GGUF models (convert a "
         "Hugging Face directory with llama.cpp's convert_hf_to_gguf.py first), and FP8 "
         "from Hugging Face directories (TYPE FP8)");
  }
  if (path == f.out) Fail("the output would overwrite the input " + path);
  StatusOr<std::shared_ptr<GgufFile>> in = GgufFile::Open(path);
  if (!in.ok()) Fail(std::string(in.status().message()));

  GgufQuantizeOptions options;
  options.scheme = *scheme;
  options.pure = f.pure;
  options.allow_requantize = f.allow_requantize;
  options.threads = Threads(f);
  StatusOr<std::vector<TensorQuantPlan>> plan = PlanGgufQuantization(**in, options);
  if (!plan.ok()) Fail(std::string(plan.status().message()));
  std::fprintf(stderr, "quantizing %s to %s (%s, %d threads)\n", path.c_str(), f.out.c_str(),
               scheme->name.c_str(), options.threads);
  size_t index = 0;
  options.progress = [&](uint64_t, uint64_t) {
    const TensorQuantPlan& p = (*plan)[index];
    const int64_t cols = p.shape[p.shape.ndim() - 1], rows = p.shape.numel() / cols;
    const uint64_t from = static_cast<uint64_t>(rows) * RowBytes(p.from, cols);
    const uint64_t to = static_cast<uint64_t>(rows) * RowBytes(p.to, cols);
    std::fprintf(stderr, "[%4zu/%4zu] %-36s %-18s %5s -> %-5s %9.2f MiB -> %9.2f MiB\n", index + 1,
                 plan->size(), p.name.c_str(), p.shape.ToString().c_str(),
                 std::string(DTypeName(p.from)).c_str(), std::string(DTypeName(p.to)).c_str(),
                 MiB(from), MiB(to));
    ++index;
  };
  const auto start = std::chrono::steady_clock::now();
  StatusOr<GgufQuantizeResult> r = QuantizeGguf(**in, f.out, options);
  if (!r.ok()) Fail(std::string(r.status().message()));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(
      stderr, "wrote %s: %.2f MiB of tensors -> %.2f MiB (%.1f%% of the input) in %.1f s\n",
      f.out.c_str(), MiB(r->input_bytes), MiB(r->output_bytes),
      r->input_bytes > 0 ? 100.0 * static_cast<double>(r->output_bytes) / r->input_bytes : 0.0, s);
}

}  // namespace

void AddQuantizeCommand(CLI::App& root) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* cmd = root.add_subcommand(
      "quantize", "write a GGUF model quantized with one of llama.cpp's schemes (Q4_K_M, ...)");
  cmd->add_option("model", f->model,
                  "the .gguf file to quantize, a Hugging Face directory (FP8), or a local model id")
      ->required();
  cmd->add_option("out", f->out, "the .gguf file to write (FP8: the directory)")->required();
  cmd->add_option("type", f->type,
                  "Q4_K_M (or Q4_K), Q4_K_S, Q5_K_M (or Q5_K), Q5_K_S, Q6_K, Q8_0, Q4_0, F16, "
                  "BF16, F32; FP8 for a Hugging Face directory")
      ->required();
  cmd->add_flag("--pure", f->pure,
                "every matrix at the type's base format (no q6_K output / attn_v / ffn_down)");
  cmd->add_flag("--allow-requantize", f->allow_requantize,
                "convert tensors that are already quantized (their error compounds)");
  cmd->add_option("--threads,-t", f->threads, "threads (default: every core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--revision", f->revision,
                  "Hugging Face cache: a model id's branch, tag or commit");
  cmd->add_option("--quant", f->quant, "which .gguf of a GGUF repo (as serve's --quant)");
  AddModelsDirFlag(cmd, &f->models_dir);
  cmd->callback([f] { RunQuantize(*f); });
}

}  // namespace loom
