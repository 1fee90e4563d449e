#include "cli/session.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "base/logging.h"
#include "runtime/decoder_runner.h"
#ifdef LOOM_HAVE_TOKENIZER
#include "cli/model_tokenizer.h"
#endif

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

}  // namespace

void ModelFlags::Add(CLI::App* app, bool with_model_positional) {
  if (with_model_positional) {
    app->add_option("model", model,
                    "Hugging Face model directory or .gguf file (default: the embedded model)");
  }
  app->add_option("--threads,-t", threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  app->add_option("--block-size", block_size, "tokens per KV block")->check(CLI::Range(1, 1024));
  app->add_option("--kv-cache-gb", kv_cache_gb,
                  "KV pool size in GB (0 = auto: min(2 GiB, batch x context))")
      ->check(CLI::NonNegativeNumber);
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
  app->add_option("--max-model-len", max_model_len, "context length cap (0 = the model's)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--chat-template", chat_template, "Jinja chat template file overriding the model's")
      ->check(CLI::ExistingFile);
  app->add_flag("--debug-integrity", debug_integrity, "check KV/scheduler invariants every step");
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

StatusOr<std::unique_ptr<Session>> OpenSession(const ModelFlags& flags) {
  auto t0 = std::chrono::steady_clock::now();
  auto s = std::make_unique<Session>();
  s->flags = flags;
  s->model_path = flags.model;
  if (s->model_path.empty()) {
    s->model_path = DefaultModelPath();
    s->is_default_model = true;
    if (s->model_path.empty()) {
      return NotFoundError("no MODEL given and the embedded default model (models/default) was "
                           "not found; pass a Hugging Face model directory or a .gguf file");
    }
  }
  while (s->model_path.size() > 1 && s->model_path.back() == '/') s->model_path.pop_back();
  s->model_name = fs::path(s->model_path).filename().string();
  if (s->is_default_model) s->model_name = "loom-default";

  int threads = flags.threads > 0 ? flags.threads
                                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s->backend = std::make_unique<CpuBackend>(threads);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(s->model_path, s->backend.get()));
  const ModelConfig& cfg = model->config();

  int context = cfg.max_position_embeddings;
  if (flags.max_model_len > 0) context = std::min(context, flags.max_model_len);
  const DType kv_dtype = DType::kF32;
  s->kv_bytes_per_token = model->KvBytesPerToken(kv_dtype);
  int64_t pool_bytes;
  if (flags.kv_cache_gb > 0) {
    pool_bytes = static_cast<int64_t>(flags.kv_cache_gb * 1e9);
  } else {
    int64_t want = static_cast<int64_t>(context) * flags.batch * static_cast<int64_t>(s->kv_bytes_per_token);
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
  ec.kv_budget_bytes = static_cast<int64_t>(flags.kv_budget_gb * 1e9);
  ec.memory_budget_bytes = static_cast<int64_t>(flags.memory_budget_gb * 1e9);
  ec.model_bytes = static_cast<int64_t>(model->weights().total_bytes);
  ec.max_model_len = context;
  ec.enable_prefix_cache = flags.prompt_cache_gb != 0;
  ec.model_fingerprint = model->info().fingerprint;
  ec.kv_dtype = std::string(DTypeName(kv_dtype));
  ec.eos_token_ids.assign(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end());
  ec.check_integrity_every_step = flags.debug_integrity;
  s->model = model.get();
  auto runner = std::make_unique<DecoderRunner>(std::move(model), s->num_kv_blocks, flags.block_size,
                                                kv_dtype);
#ifdef LOOM_HAVE_TOKENIZER
  {
    auto tok = LoadTokenizerFor(s->model_path);
    if (tok.ok()) {
      s->tokenizer = std::shared_ptr<const Tokenizer>(std::move(tok).value());
    } else if (tok.status().code() != StatusCode::kNotFound) {
      return tok.status();
    } else {
      LOG(WARNING) << "no tokenizer: " << tok.status().message();
    }
  }
#endif
  s->runner = runner.get();
  ASSIGN_OR_RETURN(s->engine, Engine::Create(ec, std::move(runner)));
  s->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace loom
