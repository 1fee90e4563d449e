#include "cli/session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#ifdef LOOM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "base/logging.h"
#include "cli/progress_bar.h"
#include "io/json_file.h"
#include "model/dummy_weights.h"
#include "runtime/decoder_runner.h"
#ifdef LOOM_HAVE_CUDA
#include "runtime/cuda_graph_runner.h"
#endif
#ifdef LOOM_HAVE_TOKENIZER
#include "cli/model_tokenizer.h"
#include "tokenizer/chat_template/chat_template.h"
#endif

namespace loom {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxSamplingThreads = 16;

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

// A set, non-empty environment variable's value, or nullopt.
std::optional<std::string> EnvValue(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  return std::string(v);
}

// An on/off environment variable: 1/true/on or 0/false/off (unset or empty: off).
StatusOr<bool> EnvSwitch(const EnvLookup& env, const char* name, const char* flag) {
  const std::optional<std::string> v = EnvValue(env, name);
  if (!v) return false;
  if (*v == "1" || *v == "true" || *v == "on") return true;
  if (*v == "0" || *v == "false" || *v == "off") return false;
  return InvalidArgumentError(std::string(name) + "=" + *v + ": must be 0 or 1 (or use " + flag +
                              ")");
}

// CLI11 check of one --cuda-tune argument ("" when it parses).
std::string CheckCudaTuneArg(const std::string& key_value) {
  CudaTuning t;
  const Status s = ApplyCudaTuneArg(key_value, &t);
  return s.ok() ? std::string() : s.message();
}

// CLI11 checks of --kv-quant (a scheme or a turbo pair) and --kv-quant-k / -v (one scheme).
std::string CheckKvQuantPair(const std::string& s) {
  const StatusOr<KvQuantPair> p = ParseKvQuantPair(s);
  return p.ok() ? std::string() : std::string(p.status().message());
}
std::string CheckKvQuant(const std::string& s) {
  const StatusOr<KvQuant> q = ParseKvQuant(s);
  return q.ok() ? std::string() : std::string(q.status().message());
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::string HfHubCacheDir(const EnvLookup& env) {
  const std::optional<std::string> home = EnvValue(env, "HOME");
  auto expand = [&](std::string path) {
    if (home && (path == "~" || path.rfind("~/", 0) == 0)) path = *home + path.substr(1);
    return path;
  };
  if (auto v = EnvValue(env, "HF_HUB_CACHE")) return expand(*v);
  if (auto v = EnvValue(env, "HUGGINGFACE_HUB_CACHE")) return expand(*v);
  if (auto v = EnvValue(env, "HF_HOME")) return (fs::path(expand(*v)) / "hub").string();
  if (auto v = EnvValue(env, "XDG_CACHE_HOME")) {
    return (fs::path(expand(*v)) / "huggingface" / "hub").string();
  }
  if (home) return (fs::path(*home) / ".cache" / "huggingface" / "hub").string();
  return "";
}

ModelLibraryOptions ResolveLibraryOptions(const EnvLookup& env, const std::string& models_dir) {
  ModelLibraryOptions o;
  o.hub_cache_dir = HfHubCacheDir(env);
  o.models_dir = models_dir.empty() ? EnvValue(env, "LOOM_MODELS_DIR").value_or("") : models_dir;
  return o;
}

void AddModelsDirFlag(CLI::App* app, std::string* models_dir) {
  app->add_option("--models-dir", *models_dir,
                  "directory of models searched before the Hugging Face cache: DIR/org/name, "
                  "DIR/name, DIR/name*.gguf (LOOM_MODELS_DIR when not given)");
}

Status ResolveModelFlags(const EnvLookup& env, ModelFlags* flags,
                         std::vector<std::string>* warnings) {
  ASSIGN_OR_RETURN(flags->cuda_tuning, ResolveCudaTuning(flags->cuda_tune, env, warnings));
  ASSIGN_OR_RETURN(const bool profile, EnvSwitch(env, "LOOM_CUDA_PROFILE", "--cuda-profile"));
  flags->cuda_profile = flags->cuda_profile || profile;
  ASSIGN_OR_RETURN(const bool trace, EnvSwitch(env, "LOOM_STEP_TRACE", "--step-trace"));
  flags->step_trace = flags->step_trace || trace;
  if (flags->ktrace_file.empty()) {
    flags->ktrace_file = EnvValue(env, "LOOM_KTRACE_FILE").value_or("");
  }
  if (flags->cpu_isa.empty()) {
    const std::optional<std::string> isa = EnvValue(env, "LOOM_CPU_ISA");
    if (isa && !cpu::ParseCpuIsa(*isa)) {
      return InvalidArgumentError("LOOM_CPU_ISA=" + *isa +
                                  ": must be auto, avx512, avx2 or scalar (or use --cpu-isa)");
    }
    flags->cpu_isa = isa.value_or("auto");
  }
  return OkStatus();
}

void ModelFlags::Add(CLI::App* app, bool with_model_positional) {
  if (with_model_positional) {
    app->add_option("model", model,
                    "a Hugging Face model directory, a .gguf file, or a model id found locally "
                    "(org/name[:QUANT], in --models-dir or the Hugging Face cache; `loom list` "
                    "shows them; never downloaded) (default: the embedded model)");
  }
  app->add_option(
      "--revision", revision,
      "Hugging Face cache: the branch, tag or commit hash of a model id (default main)");
  app->add_option("--quant", quant,
                  "which .gguf file of a GGUF repo or directory: its quant tag (Q4_K_M, Q8_0, ...) "
                  "or file name; same as MODEL:TAG");
  AddModelsDirFlag(app, &models_dir);
  app->add_option("--threads,-t", threads,
                  "CPU threads of the model (CPU backend) and of host sampling (at most 16) "
                  "(0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--device", device, "auto (CUDA when a GPU is present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app->add_option("--gpu-memory-fraction", gpu_memory_fraction,
                  "CUDA: fraction of device memory for weights + KV cache")
      ->check(CLI::Range(0.05, 0.99));
  app->add_option("--block-size", block_size, "tokens per KV block")->check(CLI::Range(1, 1024));
  app->add_option("--kv-cache-gb", kv_cache_gb,
                  "KV pool size in GB (0 = auto: min(2 GiB, batch x context))")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--kv-dtype", kv_dtype,
                  "KV cache element type: auto (f32 on the CPU, exact against the reference; bf16 "
                  "on CUDA), f32, f16 or bf16 (CPU; half the KV bytes and memory traffic)")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16"}));
  app->add_option(
         "--kv-quant", kv_quant,
         "quantized KV cache: off, fp8 (e4m3), 8 (int8), 4 (int4) or turbo[:k<8|4>v<8|4|3>] "
         "(rotated, CPU; turbo = k8v3); each token's row of a kv head quantized in groups "
         "of 64 (32, 16) along head_dim with bf16 scales: 1.94x (fp8, int8) / 3.56x "
         "(int4) / 2.78x (turbo) the tokens of bf16 at head_dim 128")
      ->check(CLI::Validator(CheckKvQuantPair, "SCHEME"));
  app->add_option("--kv-quant-k", kv_quant_k,
                  "the keys' scheme (default: --kv-quant's; also turbo8, turbo4)")
      ->check(CLI::Validator(CheckKvQuant, "SCHEME"));
  app->add_option("--kv-quant-v", kv_quant_v,
                  "the values' scheme (default: --kv-quant's; also turbo8, turbo4, turbo3)")
      ->check(CLI::Validator(CheckKvQuant, "SCHEME"));
  app->add_option("--batch,--decode-concurrency", batch, "max concurrent rows per step")
      ->check(CLI::Range(1, 4096));
  app->add_option("--max-batched-tokens", max_batched_tokens, "token budget of one engine step")
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--kv-budget", kv_budget_gb,
                  "cap on the aggregate KV of running requests in GB (0 = off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--memory-budget", memory_budget_gb,
                  "reject requests whose prompt + max_tokens can never fit this many GB (0 = off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--prompt-cache", prompt_cache_gb, "prefix cache (0 disables; on by default)");
  app->add_option("--host-cache", host_cache_gb,
                  "GB of host RAM (page-locked) keeping the prefix cache's KV blocks as they fill, "
                  "copied back up when a prompt's prefix continues there (GPU only; default: off, "
                  "or --ssd-cache-queue's size with --ssd-cache)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--ssd-cache", ssd_cache,
                  "keep the prefix cache's KV blocks in this directory too (written behind as "
                  "they fill, read back when a prompt's prefix continues there; survives "
                  "restarts; several processes may share it)")
      ->type_name("DIR");
  app->add_option("--ssd-cache-max", ssd_cache_max_gb,
                  "GB of --ssd-cache files kept (least recently used deleted first)")
      ->check(CLI::PositiveNumber);
  app->add_option("--ssd-cache-queue", ssd_cache_queue_gb,
                  "GB of KV blocks waiting for the --ssd-cache writer (default 4: a 32k-token 8B "
                  "prompt outruns a 1.7 GB/s disk by ~2 GB); past it new blocks are not written "
                  "(a later miss)")
      ->check(CLI::PositiveNumber);
  app->add_option("--ssd-demote-idle", ssd_demote_idle_s,
                  "after this many seconds idle, the --ssd-cache writer gets the prefix cache's "
                  "blocks whose spill it dropped (a full queue), so that they survive a restart "
                  "(0 = never)")
      ->type_name("SEC")
      ->check(CLI::Range(0.0, 1e6));
  app->add_option("--max-model-len", max_model_len, "context length cap (0 = the model's)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--chat-template", chat_template,
                  "Jinja chat template file overriding the model's")
      ->check(CLI::ExistingFile);
  app->add_option("--tokenizer", tokenizer,
                  "HF directory whose tokenizer (and chat template) replace the model's; with "
                  "--dummy-weights, a random model with a real tokenizer (protocol tests)")
      ->check(CLI::ExistingDirectory);
  app->add_flag("--debug-integrity", debug_integrity, "check KV/scheduler invariants every step");
  app->add_flag("--step-trace", step_trace,
                "per engine step, its size and host timings on stderr (also LOOM_STEP_TRACE=1)");
  app->add_option("--dummy-weights", dummy_weights,
                  "build the model from this config.json (or its directory) with random weights "
                  "(benchmarks; no tokenizer unless --tokenizer; MODEL is ignored)");
  app->add_option("--quantize", quantize,
                  "re-encode the decoder layers' bf16/f16/f32 matrices at load: fp8 (e4m3, one "
                  "scale per 128 weights of a row; half of bf16's bytes). The embedding, output "
                  "head and routers stay as stored; quantized checkpoints are kept as they are")
      ->check(CLI::IsMember({"fp8"}));
  app->add_flag("!--no-cuda-graphs", cuda_graphs,
                "CUDA: run decode steps eagerly instead of replaying CUDA graphs");
  app->add_flag("--mmap", mmap_weights,
                "CPU: read the weights in place from the file mapping instead of copying them "
                "into huge-page memory at load (less memory while the file is in the page cache; "
                "decode is slower through 4 KiB pages)");
  app->add_flag("--bf16-activations", bf16_activations,
                "CPU: bf16 weights meet activations rounded to bf16 (AVX512-BF16 dot products; "
                "faster batched decode, numerics no longer exact against the f32 reference)");
  app->add_flag("!--no-device-sampling", device_sampling,
                "CUDA: copy every sampled row's logits to the host, greedy rows and "
                "temperature/top-k/top-p/min-p draws (with or without penalties / logit_bias) "
                "too (A/B, debug)");
  app->add_option("--grammar-threads", grammar_threads,
                  "threads computing grammar masks while a device step runs (0: on the engine "
                  "thread after the step; default: half of --threads, at most 8, with CUDA, 0 on "
                  "the CPU backend, whose step holds every core)")
      ->check(CLI::Range(-1, 64));
  app->add_flag("--jump-forward", jump_forward,
                "grammar-constrained rows: append the text the grammar forces next (a JSON key, "
                "the call markup of a tool) without sampling it, computed with the next token; "
                "the forced text is spelled longest token first, its last token left to the "
                "model; not for rows asking logprobs");
  app->add_option("--draft-kind", draft_kind,
                  "speculative decoding: none, or ngram (each row's draft is what followed the "
                  "last earlier occurrence of its last --ngram-max .. --ngram-min tokens in its "
                  "prompt and output; verified in the row's next step, lossless)")
      ->check(CLI::IsMember({"none", "ngram"}));
  app->add_option("--num-draft-tokens", num_draft_tokens,
                  "speculative decoding: most draft tokens a row verifies per step (ngram: 10)")
      ->check(CLI::Range(1, 64));
  app->add_option("--ngram-max", ngram_max, "n-gram drafts: longest suffix looked up (3)")
      ->check(CLI::Range(1, 64));
  app->add_option("--ngram-min", ngram_min, "n-gram drafts: shortest suffix looked up (1)")
      ->check(CLI::Range(1, 64));
  app->add_option("--draft-token-cost", draft_token_cost,
                  "speculative decoding: what one more token in a step costs, as a fraction of "
                  "a step's fixed cost; a row drafts while the chance its next draft is accepted "
                  "beats what that draft costs the step (none once the batch is compute-bound); "
                  "auto measures it from the steps, 0 makes drafts free (always "
                  "--num-draft-tokens)")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(x >= 0 && x <= 1e6)) {
          return "--draft-token-cost must be auto or a number in [0, 1e6], got '" + v + "'";
        }
        return "";
      });
  app->add_option("--cpu-isa", cpu_isa,
                  "CPU: cap the dot-product kernels at this instruction set (A/B runs; default "
                  "auto, the best the CPU has; LOOM_CPU_ISA when not given)")
      ->check(CLI::IsMember({"auto", "avx512", "avx2", "scalar"}));
  app->add_option("--cuda-tune", cuda_tune,
                  "CUDA: set a kernel variant, KEY=VALUE (repeatable; keys and defaults in "
                  "docs/cli.md; wins over the LOOM_<KEY> environment variable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all()
      ->check(CLI::Validator(CheckCudaTuneArg, ""));
  app->add_flag("--cuda-profile", cuda_profile,
                "CUDA: per-op GPU time table on stderr at exit (eager steps only: add "
                "--no-cuda-graphs) and each cuBLASLt plan's candidates (LOOM_CUDA_PROFILE=1)");
  app->add_option("--ktrace-file", ktrace_file,
                  "CUDA diagnostic builds (-DLOOM_CUDA_KTRACE=ON): write the kernel timeline to "
                  "this file at exit, for tools/cuda/ktrace.py (LOOM_KTRACE_FILE)");
}

std::string DefaultModelPath() {
  std::vector<fs::path> candidates = {
      fs::path(SelfDir()) / "../../../models/default",  // build/src/cli/loom
      fs::path(SelfDir()) / "../share/loom/models/default",
      fs::path(LOOM_SOURCE_DIR) / "models/default",
  };
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::exists(c / "config.json", ec)) return fs::weakly_canonical(c, ec).string();
  }
  return "";
}

StatusOr<std::unique_ptr<Session>> OpenSession(const ModelFlags& given) {
  auto t0 = std::chrono::steady_clock::now();
  ModelFlags flags = given;
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(ResolveModelFlags(ProcessEnvironment(), &flags, &warnings));
  for (const std::string& w : warnings) LOG(WARNING) << w;
  auto s = std::make_unique<Session>();
  s->flags = flags;
  const bool dummy = !flags.dummy_weights.empty();
  if (dummy) {
    s->model_path = flags.dummy_weights;
    s->resolved.source = "dummy";
  } else if (!flags.model.empty()) {
    const ModelLibrary library(ResolveLibraryOptions(ProcessEnvironment(), flags.models_dir));
    ASSIGN_OR_RETURN(s->resolved, library.Resolve(flags.model, flags.revision, flags.quant));
    s->model_path = s->resolved.path;
  } else {
    s->model_path = DefaultModelPath();
    s->is_default_model = true;
    s->resolved.source = "default";
    if (s->model_path.empty()) {
      return NotFoundError(
          "no MODEL given and the embedded default model (models/default) was "
          "not found; pass a Hugging Face model directory or a .gguf file");
    }
  }
  while (s->model_path.size() > 1 && s->model_path.back() == '/') s->model_path.pop_back();
  s->resolved.path = s->model_path;
  s->model_name =
      s->resolved.id.empty() ? fs::path(s->model_path).filename().string() : s->resolved.id;
  if (s->is_default_model) s->model_name = "loom-default";
  if (dummy) s->model_name = "dummy-" + fs::path(s->model_path).stem().string();
  s->resolved.id = s->model_name;

  int threads = flags.threads > 0
                    ? flags.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool use_cuda = false;
#ifdef LOOM_HAVE_CUDA
  use_cuda = flags.device == "cuda";
  if (flags.device == "auto" && CudaBackend::DeviceCount() > 0) {
    // A GPU this build's kernels cannot run on (before Hopper) leaves auto on the CPU.
    const Status usable = CudaBackend::CheckGpu(0);
    use_cuda = usable.ok();
    if (!usable.ok()) {
      LOG(WARNING) << usable.message() << "; running on the CPU (--device auto)";
    }
  }
  if (use_cuda) {
    CudaBackendOptions options;
    options.tuning = flags.cuda_tuning;
    options.profile = flags.cuda_profile;
    options.ktrace_file = flags.ktrace_file;
    ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> cuda, CudaBackend::Create(options));
    if (const std::string tuned = DescribeCudaTuning(flags.cuda_tuning); !tuned.empty()) {
      LOG(INFO) << "cuda tuning: " << tuned;
    }
    s->backend = std::move(cuda);
  }
#else
  if (flags.device == "cuda") {
    return FailedPreconditionError(
        "--device cuda: this loom was built without CUDA (configure "
        "with -DLOOM_CUDA=ON on a machine with nvcc)");
  }
#endif
  auto make_cpu = [&] {
    CpuBackendOptions cpu;
    cpu.num_threads = threads;
    cpu.weights_in_huge_pages = !flags.mmap_weights;
    cpu.bf16_activations = flags.bf16_activations;
    cpu.isa = cpu::ParseCpuIsa(flags.cpu_isa).value_or(cpu::CpuIsa::kAuto);
    return std::make_unique<CpuBackend>(cpu);
  };
  if (!use_cuda) s->backend = make_cpu();
  WeightOptions weight_options;
  if (flags.quantize == "fp8") weight_options.quantize = DType::kFP8;
  auto load = [&]() -> StatusOr<std::unique_ptr<Model>> {
    if (dummy) {
      return MakeDummyModel(s->model_path, s->backend.get(), DType::kBF16, 0,
                            weight_options.quantize);
    }
    // A bar on a terminal; one line in a log.
    ProgressBar bar("weights", stderr, ::isatty(STDERR_FILENO) != 0);
    return LoadModel(s->model_path, s->backend.get(), bar.AsProgressFn(), weight_options);
  };
  StatusOr<std::unique_ptr<Model>> loaded = load();
  // --device auto on a GPU: a model the CUDA backend has no kernels for (Unimplemented, e.g. its
  // head_dim; refused before a weight is read) runs on the CPU instead; --device cuda insists.
  if (!loaded.ok() && use_cuda && flags.device == "auto" &&
      loaded.status().code() == StatusCode::kUnimplemented) {
    LOG(WARNING) << loaded.status().message() << "; running on the CPU (--device auto)";
    use_cuda = false;
    s->backend = make_cpu();
    loaded = load();
  }
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<Model> model = std::move(loaded).value();
  const ModelConfig& cfg = model->config();

  int context = cfg.max_position_embeddings;
  if (flags.max_model_len > 0) context = std::min(context, flags.max_model_len);
  // auto: KV in f32 on the CPU (exact vs the oracle), bf16 on CUDA (the activation dtype; the
  // CUDA kernels read bf16 pools only).
  DType kv_dtype = use_cuda ? DType::kBF16 : DType::kF32;
  if (flags.kv_dtype == "f32") kv_dtype = DType::kF32;
  if (flags.kv_dtype == "f16") kv_dtype = DType::kF16;
  if (flags.kv_dtype == "bf16") kv_dtype = DType::kBF16;
  if (use_cuda && kv_dtype != DType::kBF16) {
    return InvalidArgumentError("--kv-dtype " + flags.kv_dtype +
                                ": the CUDA backend keeps the KV cache in bf16; use --kv-dtype "
                                "auto or bf16 with --device cuda");
  }
  KvFormat kv_format(kv_dtype);
  {
    ASSIGN_OR_RETURN(const KvQuantPair both, ParseKvQuantPair(flags.kv_quant));
    kv_format.k = both.k;
    kv_format.v = both.v;
    if (!flags.kv_quant_k.empty()) {
      ASSIGN_OR_RETURN(kv_format.k, ParseKvQuant(flags.kv_quant_k));
    }
    if (!flags.kv_quant_v.empty()) {
      ASSIGN_OR_RETURN(kv_format.v, ParseKvQuant(flags.kv_quant_v));
    }
  }
  for (KvQuant q : {kv_format.k, kv_format.v}) {
    if (!s->backend->SupportsKvQuant(q)) {
      return InvalidArgumentError("--kv-quant " + kv_format.Name() + ": the " +
                                  std::string(use_cuda ? "CUDA" : "selected") +
                                  " backend does not read " + std::string(KvQuantName(q)) +
                                  " KV rows" + (KvQuantRotated(q) ? " (turbo is CPU only)" : ""));
    }
    if (!KvQuantFits(q, cfg.head_dim)) {
      return InvalidArgumentError(
          "--kv-quant " + kv_format.Name() + ": head_dim " + std::to_string(cfg.head_dim) +
          (KvQuantRotated(q) ? " is not a power of two (the turbo rotation's length)"
                             : " is not a multiple of 16, the smallest quantization group"));
    }
  }
  s->kv_bytes_per_token = model->KvBytesPerToken(kv_format);
  int64_t pool_bytes;
  if (flags.kv_cache_gb > 0) {
    pool_bytes = static_cast<int64_t>(flags.kv_cache_gb * 1e9);
#ifdef LOOM_HAVE_CUDA
  } else if (use_cuda) {
    // What is left of --gpu-memory-fraction after the weights (already resident), minus a reserve
    // for activations and cuBLAS workspaces.
    size_t free_b = 0, total_b = 0;
    static_cast<CudaBackend*>(s->backend.get())->MemoryInfo(&free_b, &total_b);
    int64_t used = static_cast<int64_t>(total_b - free_b);
    int64_t budget = static_cast<int64_t>(flags.gpu_memory_fraction * static_cast<double>(total_b));
    int64_t reserve = int64_t{2} << 30;
    pool_bytes = std::max<int64_t>(budget - used - reserve, int64_t{64} << 20);
#endif
  } else {
    int64_t want =
        static_cast<int64_t>(context) * flags.batch * static_cast<int64_t>(s->kv_bytes_per_token);
    pool_bytes = std::min<int64_t>(want, int64_t{2} << 30);
  }
  int64_t block_bytes = static_cast<int64_t>(s->kv_bytes_per_token) * flags.block_size;
  s->num_kv_blocks = static_cast<int>(std::max<int64_t>(1, pool_bytes / block_bytes));

  EngineConfig ec;
  ec.num_blocks = s->num_kv_blocks;
  ec.block_size = flags.block_size;
  ec.bytes_per_token_kv = static_cast<int64_t>(s->kv_bytes_per_token);
  ec.max_batched_tokens = flags.max_batched_tokens;
  ec.max_num_seqs = flags.batch;
  // Host sampling runs after the forward, so on the CPU backend it reuses the cores the model's
  // OpenMP threads just left. Past 16 threads a step's rows (<= --batch) gain little.
  ec.num_sampling_threads = std::min(threads, kMaxSamplingThreads);
  ec.kv_budget_bytes = static_cast<int64_t>(flags.kv_budget_gb * 1e9);
  ec.memory_budget_bytes = static_cast<int64_t>(flags.memory_budget_gb * 1e9);
  ec.model_bytes = static_cast<int64_t>(model->weights().total_bytes);
  ec.max_model_len = context;
  ec.enable_prefix_cache = flags.prompt_cache_gb != 0;
  if (use_cuda) {
    double host_gb = flags.host_cache_gb;
    if (host_gb < 0) host_gb = flags.ssd_cache.empty() ? 0 : flags.ssd_cache_queue_gb;
    ec.host_cache_bytes = static_cast<int64_t>(host_gb * 1e9);
  } else if (flags.host_cache_gb > 0) {
    LOG(WARNING) << "--host-cache: the CPU backend's KV pool is host memory already (grow it with "
                    "--kv-cache-gb); no host tier";
  }
  ec.ssd_cache_dir = flags.ssd_cache;
  ec.ssd_cache_max_bytes = static_cast<int64_t>(flags.ssd_cache_max_gb * 1e9);
  ec.ssd_spill_queue_bytes = static_cast<int64_t>(flags.ssd_cache_queue_gb * 1e9);
  ec.ssd_demote_idle_ms = static_cast<int64_t>(flags.ssd_demote_idle_s * 1000);
  ec.model_fingerprint = model->info().fingerprint;
  ec.kv_dtype = kv_format.Name();
  ec.eos_token_ids.assign(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end());
  ec.check_integrity_every_step = flags.debug_integrity;
  ec.device_sampling = flags.device_sampling;
  // On a device the host is idle during the step, so the grammar masks of the next rows are
  // computed then (the CPU backend's step holds every core).
  ec.num_grammar_threads = flags.grammar_threads >= 0 ? flags.grammar_threads
                           : use_cuda                 ? std::clamp(threads / 2, 1, 8)
                                                      : 0;
  ec.jump_forward = flags.jump_forward;
  if (flags.draft_kind == "ngram") {
    ec.num_draft_tokens = flags.num_draft_tokens > 0 ? flags.num_draft_tokens : 10;
    ec.ngram.ngram_min = flags.ngram_min;
    ec.ngram.ngram_max = flags.ngram_max;
    ec.draft_token_cost = flags.draft_token_cost == "auto"
                              ? -1.0
                              : std::strtod(flags.draft_token_cost.c_str(), nullptr);
  }
  ec.step_trace = flags.step_trace;
  s->model = model.get();
  auto runner = std::make_unique<DecoderRunner>(std::move(model), s->num_kv_blocks,
                                                flags.block_size, kv_format);
#ifdef LOOM_HAVE_CUDA
  if (use_cuda && flags.cuda_graphs) {
    CudaGraphOptions go;
    go.max_batch = flags.batch;
    go.max_pages_per_seq = (context + flags.block_size - 1) / flags.block_size;
    go.lookahead_max_rows = flags.cuda_tuning.graph_lookahead;
    go.graph_tail = flags.cuda_tuning.graph_tail;
    go.tail_fused = flags.cuda_tuning.graph_tail_fused;
    runner->set_step_accelerator(
        std::make_unique<CudaGraphRunner>(runner->model(), runner->kv(), flags.block_size,
                                          static_cast<CudaBackend*>(s->backend.get()), go));
  }
#endif
#ifdef LOOM_HAVE_TOKENIZER
  if (!dummy || !flags.tokenizer.empty()) {
    const std::string text_dir = flags.tokenizer.empty() ? s->model_path : flags.tokenizer;
    auto tok = LoadTokenizerFor(text_dir);
    if (tok.ok()) {
      s->tokenizer = std::shared_ptr<const Tokenizer>(std::move(tok).value());
    } else if (tok.status().code() != StatusCode::kNotFound) {
      return tok.status();
    } else {
      LOG(WARNING) << "no tokenizer: " << tok.status().message();
    }
    ASSIGN_OR_RETURN(ModelChatTemplates t,
                     LoadChatTemplatesFor(text_dir, flags.chat_template, s->tokenizer.get()));
    if (s->tokenizer && s->tokenizer->vocab_size() > s->model->config().vocab_size) {
      return InvalidArgumentError(
          "the tokenizer of " + text_dir + " has " + std::to_string(s->tokenizer->vocab_size()) +
          " ids but the model's vocabulary only " + std::to_string(s->model->config().vocab_size) +
          (flags.tokenizer.empty() ? "" : "; pass a --tokenizer that matches the model"));
    }
    s->chat_template = t.plain;
    s->chat_template_tools = t.tools;
    s->bos_token = t.bos_token;
    s->eos_token = t.eos_token;
  }
#endif
  // generation_config.json sampling defaults.
  if (fs::path gen = fs::path(s->model_path) / "generation_config.json";
      !dummy && fs::is_regular_file(gen)) {
    if (auto g = LoadJsonFile(gen.string()); g.ok() && g->is_object()) {
      auto num = [&](const char* key, auto* out) {
        if (auto it = g->find(key); it != g->end() && it->is_number()) {
          *out = it->get<std::remove_pointer_t<decltype(out)>>();
        }
      };
      num("temperature", &s->defaults.temperature);
      num("top_p", &s->defaults.top_p);
      num("top_k", &s->defaults.top_k);
      num("min_p", &s->defaults.min_p);
      num("repetition_penalty", &s->defaults.repetition_penalty);
      if (auto it = g->find("do_sample"); it != g->end() && it->is_boolean() && !it->get<bool>()) {
        s->defaults.temperature = 0.f;  // transformers: do_sample=false means greedy
      }
    }
  }
  s->runner = runner.get();
  ASSIGN_OR_RETURN(s->engine, Engine::Create(ec, std::move(runner)));
  s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace loom
