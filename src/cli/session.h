// Session: everything a CLI command needs to run a model — the backend, the model (inside its
// runner), the engine, and (when the model ships one) the tokenizer and chat template — built from
// the shared model/engine flags. Environment variables are read only here (session.cc's
// ProcessEnvironment), for compatibility: each LOOM_* variable the engine used to read deep
// inside is now a flag, and the variable fills that flag when it is not given (a flag wins).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_tuning.h"
#include "engine/engine.h"
#include "io/model_library.h"
#include "model/model.h"

namespace loom {

class Tokenizer;
class ChatTemplate;
class DecoderRunner;

// Flags shared by generate / bench / serve / chat (FEATURES.md F1, F2, F8-F11).
struct ModelFlags {
  // A model directory, a .gguf file or a model id (io/model_library.h); "" = the embedded
  // default model.
  std::string model;
  std::string revision;    // --revision: branch, tag or commit in the HF cache ("" = main)
  std::string quant;       // --quant: which .gguf of a GGUF repo ("" = MODEL's :TAG or the only)
  std::string models_dir;  // --models-dir: searched before the HF cache ("" = LOOM_MODELS_DIR)
  int threads = 0;         // 0 = all cores
  std::string device = "auto";       // auto | cpu | cuda
  double gpu_memory_fraction = 0.9;  // CUDA: share of device memory for weights + KV
  int block_size = 16;
  double kv_cache_gb = 0;         // 0 = auto: min(2 GiB, batch x context)
  std::string kv_dtype = "auto";  // auto | f32 | f16 | bf16 (auto: f32 on the CPU, bf16 on CUDA)
  // --kv-quant off | fp8 | 8 | 4 (tensor/kv_quant.h), and per pool --kv-quant-k / --kv-quant-v
  // ("" = --kv-quant's).
  std::string kv_quant = "off";
  std::string kv_quant_k, kv_quant_v;
  int batch = 8;  // --batch / --decode-concurrency
  int max_batched_tokens = 2048;
  double kv_budget_gb = 0;
  double memory_budget_gb = 0;
  double prompt_cache_gb = -1;  // -1 = on (bounded by the pool); 0 = off
  // --host-cache GB: the host-RAM tier under the prefix cache (GPU only). -1 = auto: with
  // --ssd-cache on a GPU, --ssd-cache-queue's size (the disk writer's page-locked buffer); else
  // off.
  double host_cache_gb = -1;
  std::string ssd_cache;          // --ssd-cache DIR: the SSD tier under the prefix cache ("" = off)
  double ssd_cache_max_gb = 32;   // --ssd-cache-max
  double ssd_cache_queue_gb = 4;  // --ssd-cache-queue
  double ssd_demote_idle_s = 300;  // --ssd-demote-idle (0 = never)
  int max_model_len = 0;           // 0 = the model's
  std::string chat_template;       // file overriding the model's template
  // --tokenizer DIR: the tokenizer (and chat template) from this HF directory instead of the
  // model's; with --dummy-weights it gives the random model a real text side (protocol tests).
  std::string tokenizer;
  bool debug_integrity = false;
  bool step_trace = false;  // --step-trace (or LOOM_STEP_TRACE=1): one stderr line a step
  // --dummy-weights CONFIG_OR_DIR: random weights from a config.json alone (benchmarks; no
  // tokenizer). Overrides MODEL.
  std::string dummy_weights;
  // --quantize fp8: the decoder layers' float matrices re-encoded at load (model/weights.h).
  std::string quantize;
  bool cuda_graphs = true;          // CUDA: replay decode-only steps from CUDA graphs
  bool device_sampling = true;      // CUDA: greedy argmax and plain draws on the device (ids, not
                                    // logits)
  bool jump_forward = false;        // --jump-forward
  std::string draft_kind = "none";  // --draft-kind
  int num_draft_tokens = -1;        // --num-draft-tokens (-1: the kind's default)
  int ngram_min = 1, ngram_max = 3;
  std::string draft_token_cost = "auto";  // --draft-token-cost: auto | a number >= 0
  int grammar_threads = -1;       // --grammar-threads: -1 = auto (CUDA: half of --threads, <= 8)
  bool mmap_weights = false;      // CPU: weights used in place from the file mapping (--mmap)
  bool bf16_activations = false;  // CPU: bf16 weights meet bf16-rounded activations
  std::string cpu_isa;            // CPU: auto | avx512 | avx2 | scalar; "" = LOOM_CPU_ISA or auto
  // CUDA: --cuda-tune KEY=VALUE arguments in order (backend/cuda_tuning.h lists the keys).
  std::vector<std::string> cuda_tune;
  bool cuda_profile = false;  // CUDA: per-op GPU time table at exit (--cuda-profile)
  std::string ktrace_file;    // CUDA diagnostic builds: kernel timeline file (--ktrace-file)

  // Filled by ResolveModelFlags from cuda_tune and the LOOM_* environment.
  CudaTuning cuda_tuning;

  // Registers the flags on `app`. `with_model_positional` adds MODEL as a positional argument.
  void Add(CLI::App* app, bool with_model_positional = true);
};

// The compatibility environment variables (LOOM_<KEY> for each --cuda-tune KEY,
// LOOM_CUDA_PROFILE, LOOM_KTRACE_FILE, LOOM_STEP_TRACE, LOOM_CPU_ISA) fill what the flags left
// unset — a flag always wins — and --cuda-tune is parsed into flags->cuda_tuning (defaults, then
// the environment, then each --cuda-tune in order). Errors (InvalidArgument) name the flag or
// the variable and its value; retired variables that are set add a line to *warnings.
Status ResolveModelFlags(const EnvLookup& env, ModelFlags* flags,
                         std::vector<std::string>* warnings);
// The process environment (std::getenv): the CLI's one reader of it.
EnvLookup ProcessEnvironment();

// The Hugging Face hub cache directory as huggingface_hub finds it: $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub (a leading ~ is $HOME); "" when none of them is set. Empty variables
// count as unset.
std::string HfHubCacheDir(const EnvLookup& env);
// Where model ids are looked up: `models_dir` (--models-dir; "" = $LOOM_MODELS_DIR) and the HF
// hub cache (HfHubCacheDir).
ModelLibraryOptions ResolveLibraryOptions(const EnvLookup& env, const std::string& models_dir);
// Registers --models-dir on a command that lists models or takes MODEL (ModelFlags::Add does).
void AddModelsDirFlag(CLI::App* app, std::string* models_dir);

// Sampling defaults, lowest precedence first: loom's (0.7 / 1.0 / 0), then the model's
// generation_config.json, then server flags (--temp, --top-p, --top-k), then the request.
struct SamplingDefaults {
  float temperature = 0.7f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int max_tokens = 0;  // 0: until EOS or the context is full
};

struct Session {
  ModelFlags flags;
  std::string model_path;  // resolved (default model filled in)
  ResolvedModel resolved;  // how MODEL was found (source "default" / "dummy" for those)
  bool is_default_model = false;
  std::unique_ptr<Backend> backend;
  const Model* model = nullptr;     // owned by the engine's runner
  DecoderRunner* runner = nullptr;  // owned by the engine (debug hooks only)
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const Tokenizer> tokenizer;         // null when the model has none
  std::shared_ptr<const ChatTemplate> chat_template;  // null when the model has none
  // The template transformers picks when `tools` are given (a named "tool_use" template), else
  // the same as chat_template.
  std::shared_ptr<const ChatTemplate> chat_template_tools;
  std::string bos_token, eos_token;  // what templates see as bos_token / eos_token
  int num_kv_blocks = 0;
  size_t kv_bytes_per_token = 0;
  double load_seconds = 0;
  SamplingDefaults defaults;  // after generation_config.json (flags are applied by the command)
  std::string model_name;     // what /v1/models lists: the model id, or the directory or file name
};

// The embedded default model's directory (models/default next to the binary's source tree, or
// under the install prefix); "" if not found.
std::string DefaultModelPath();

// Resolves the flags against the process environment (ResolveModelFlags), then loads the model
// and tokenizer and creates the engine (not started). Errors say what to fix.
StatusOr<std::unique_ptr<Session>> OpenSession(const ModelFlags& flags);

}  // namespace loom
