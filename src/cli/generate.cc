// `loom generate MODEL (-p TEXT | --ids 1,2,3) [-n N] [--temp T] [--top-p P] [--top-k K]
// [--seed S]`: one completion through the engine, printed as it is produced, then prefill and
// decode speed. `--dump-activations DIR` writes every named activation of every step as raw f32.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/session.h"
#include "runtime/decoder_runner.h"
#ifdef LOOM_HAVE_TOKENIZER
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"
#endif

namespace loom {
namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string prompt;
  std::string ids;
  int max_tokens = 64;
  float temperature = 0.7f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  int64_t seed = -1;
  bool ignore_eos = false;
  std::string dump_dir;
};

StatusOr<std::vector<TokenId>> ParseIds(const std::string& text) {
  std::vector<TokenId> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<TokenId>(v));
    } catch (const std::exception&) {
      return InvalidArgumentError("--ids: '" + item + "' is not a token id");
    }
  }
  if (ids.empty()) return InvalidArgumentError("--ids: no token ids given");
  return ids;
}

void RunGenerate(const GenerateFlags& f) {
  auto session_or = OpenSession(f.model);
  if (!session_or.ok()) Fail(session_or.status().message());
  Session& s = **session_or;

  std::vector<TokenId> prompt;
  if (!f.ids.empty()) {
    auto ids = ParseIds(f.ids);
    if (!ids.ok()) Fail(ids.status().message());
    prompt = *ids;
  } else {
#ifdef LOOM_HAVE_TOKENIZER
    if (!s.tokenizer) Fail(s.model_path + " has no tokenizer; pass token ids with --ids");
    prompt = s.tokenizer->Encode(f.prompt, /*add_special_tokens=*/true);
#else
    Fail("this build has no tokenizer; pass token ids with --ids");
#endif
  }

  std::unique_ptr<ActivationSink> sink;
  int step = 0;
  if (!f.dump_dir.empty()) {
    std::filesystem::create_directories(f.dump_dir);
    sink = std::make_unique<ActivationSink>([&](const std::string& name, const Tensor& t) {
      std::vector<float> host(static_cast<size_t>(t.numel()));
      if (t.dtype() == DType::kF32) {
        s.backend->CopyToHost(t, host.data());
      } else {  // bf16 / f16 activations (CUDA): widen on the host
        std::vector<uint16_t> raw(host.size());
        s.backend->CopyToHost(t, raw.data());
        for (size_t i = 0; i < raw.size(); ++i) {
          host[i] = t.dtype() == DType::kBF16 ? Bf16ToF32(raw[i]) : F16ToF32(raw[i]);
        }
      }
      std::ofstream out(f.dump_dir + "/step" + std::to_string(step) + "." + name + ".f32",
                        std::ios::binary);
      out.write(reinterpret_cast<const char*>(host.data()),
                static_cast<std::streamsize>(host.size() * sizeof(float)));
    });
    s.runner->set_activation_sink(sink.get());
  }

  Request req;
  req.prompt = prompt;
  req.params.max_tokens = f.max_tokens;
  req.params.temperature = f.temperature;
  req.params.top_p = f.top_p;
  req.params.top_k = f.top_k;
  req.params.min_p = f.min_p;
  req.params.ignore_eos = f.ignore_eos;
  if (f.seed >= 0) req.params.seed = static_cast<uint64_t>(f.seed);

  auto t0 = std::chrono::steady_clock::now();
  auto handle = s.engine->Submit(std::move(req));
  if (!handle.ok()) Fail(handle.status().message());
#ifdef LOOM_HAVE_TOKENIZER
  std::unique_ptr<IncrementalDecoder> detok;
  if (s.tokenizer && f.ids.empty()) {
    detok = std::make_unique<IncrementalDecoder>(*s.tokenizer, /*skip_special_tokens=*/true);
    std::fputs(f.prompt.c_str(), stdout);
  }
#endif
  std::chrono::steady_clock::time_point t_first;
  int generated = 0;
  std::optional<FinishReason> reason;
  Status error;
  while (!reason) {
    if (!s.engine->Step()) continue;
    ++step;
    while (auto chunk = handle->stream->TryPop()) {
      for (const TokenOutput& t : chunk->tokens) {
        if (generated++ == 0) t_first = std::chrono::steady_clock::now();
#ifdef LOOM_HAVE_TOKENIZER
        if (detok) {
          std::fputs(detok->Add(t.token).c_str(), stdout);
          continue;
        }
#endif
        std::printf("%s%d", generated > 1 ? "," : "", t.token);
      }
      std::fflush(stdout);
      if (chunk->finish_reason) {
        reason = chunk->finish_reason;
        error = chunk->error;
      }
    }
  }
#ifdef LOOM_HAVE_TOKENIZER
  if (detok) std::fputs(detok->Flush().c_str(), stdout);
#endif
  std::printf("\n");
  auto t_end = std::chrono::steady_clock::now();
  if (*reason == FinishReason::kError) Fail(error.message());
  double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  double decode_s = std::chrono::duration<double>(t_end - t_first).count();
  std::fprintf(stderr,
               "[%s] prompt %zu tokens, prefill %.1f tok/s (%.3f s) | generated %d tokens, decode "
               "%.1f tok/s | finish: %s\n",
               s.model_name.c_str(), prompt.size(), prompt.size() / std::max(prefill_s, 1e-9),
               prefill_s, generated,
               generated > 1 ? (generated - 1) / std::max(decode_s, 1e-9) : 0.0,
               FinishReasonName(*reason));
}

}  // namespace

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  throw CLI::RuntimeError(1);
}

void AddGenerateCommand(CLI::App& root) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = root.add_subcommand("generate", "generate one completion from a prompt");
  f->model.Add(cmd);
  auto* p = cmd->add_option("-p,--prompt", f->prompt, "prompt text");
  auto* ids = cmd->add_option("--ids", f->ids, "prompt as comma-separated token ids");
  p->excludes(ids);
  cmd->add_option("-n,--max-tokens", f->max_tokens, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temp,--temperature", f->temperature, "sampling temperature (0 = greedy)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", f->top_p, "nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-p", f->min_p, "min-p truncation")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", f->seed, "sampling seed (default: random)");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_option("--dump-activations", f->dump_dir,
                  "write named per-layer activations of every step (raw f32) into DIR");
  cmd->callback([f, p, ids] {
    if (p->count() == 0 && ids->count() == 0)
      Fail("generate: give a prompt with -p TEXT or --ids 1,2,3");
    RunGenerate(*f);
  });
}

}  // namespace loom
