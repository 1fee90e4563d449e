// `loom serve [MODEL]`: the OpenAI- and Anthropic-compatible HTTP server (server/). Flags follow
// FEATURES.md F1/F2 and mlx_lm.server's names. SIGINT / SIGTERM stop it gracefully: new requests
// get 503, in-flight ones get --shutdown-grace seconds, then end with an error event; exit 0.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "cli/commands.h"
#include "cli/pooling_config.h"
#include "cli/session.h"
#ifdef LOOM_HAVE_TOKENIZER
#include "cli/model_description.h"
#endif
#include "server/http_server.h"
#include "server/server_context.h"
#ifdef LOOM_HAVE_TOKENIZER
#include "grammar/grammar_cache.h"
#include "grammar/mask_cache.h"
#include "grammar/token_mask.h"
#include "server/tokenizer_codec.h"
#include "server/tool_grammar.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"
#endif

namespace loom {
namespace {

// host:port as a URL authority (an IPv6 literal in brackets).
std::string Authority(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// Opens `url` in the desktop's browser with xdg-open, detached (its output dropped, reaped by a
// thread of its own). The caller decides whether to (a terminal, no --no-open).
void OpenBrowser(const std::string& url) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::string program = "xdg-open", arg = url;
  char* argv[] = {program.data(), arg.data(), nullptr};
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, "xdg-open", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    LOG(INFO) << "could not open a browser (xdg-open: " << std::strerror(err) << ")";
    return;
  }
  std::thread([pid] { ::waitpid(pid, nullptr, 0); }).detach();
}

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signal_count{0};

// Async-signal-safe: the first signal wakes the watcher; a second one exits at once.
void OnSignal(int sig) {
  if (g_signal_count.fetch_add(1) > 0) ::_exit(130);
  char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
}

struct ServeFlags {
  ModelFlags model;
  ServerOptions server;
  double max_body_mb = 32;
  std::string thinking;  // "", "true", "false"
  bool no_open = false;
  bool no_chat_page = false;
  int64_t grammar_compile_timeout_ms = 2000;  // --grammar-compile-timeout (0: none)
  std::string api_key_file;                   // --api-key-file: one key a line
  std::string pooling = "auto";               // --pooling: auto | last | mean | cls
};

// Adds the keys of --api-key-file (one a line; blank lines and # comments skipped) and of
// LOOM_API_KEY (comma-separated) to those of --api-key. Keys are never printed.
Status CollectApiKeys(const std::string& key_file, std::vector<std::string>* keys) {
  if (!key_file.empty()) {
    StatusOr<std::string> text = ReadFileToString(key_file);
    if (!text.ok()) {
      return InvalidArgumentError("--api-key-file: " + std::string(text.status().message()));
    }
    size_t found = 0;
    size_t pos = 0;
    while (pos <= text->size()) {
      size_t end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      std::string line = text->substr(pos, end - pos);
      pos = end + 1;
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      size_t start = 0;
      while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
      line.erase(0, start);
      if (line.empty() || line[0] == '#') continue;
      keys->push_back(std::move(line));
      ++found;
    }
    if (found == 0) return InvalidArgumentError("--api-key-file " + key_file + " holds no key");
  }
  // The one environment variable of serve: lets a key stay out of the process list.
  if (const char* env = std::getenv("LOOM_API_KEY"); env != nullptr && *env != '\0') {
    std::string list = env;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      keys->push_back(list.substr(pos, end - pos));
      pos = end + 1;
    }
  }
  return OkStatus();
}

#ifdef LOOM_HAVE_TOKENIZER
// The chat template: the session's, else --chat-template FILE, else the model directory's
// (chat_template.jinja / tokenizer_config.json), else none (chat routes answer 400).
StatusOr<std::shared_ptr<const ChatTemplate>> ResolveChatTemplate(const Session& s) {
  if (s.chat_template) return s.chat_template;
  namespace fs = std::filesystem;
  std::string source;
  if (!s.flags.chat_template.empty()) {
    ASSIGN_OR_RETURN(source, ReadFileToString(s.flags.chat_template));
  } else if (fs::is_directory(s.model_path)) {
    std::string config_path = s.model_path + "/tokenizer_config.json";
    std::string jinja = s.model_path + "/chat_template.jinja";
    std::string config;
    if (fs::exists(config_path)) {
      ASSIGN_OR_RETURN(config, ReadFileToString(config_path));
    }
    StatusOr<LoadedChatTemplate> loaded =
        LoadChatTemplate(config, fs::exists(jinja) ? jinja : std::string());
    if (!loaded.ok()) {
      if (loaded.status().code() == StatusCode::kNotFound)
        return std::shared_ptr<const ChatTemplate>();
      return loaded.status();
    }
    source = loaded->source;
  } else {
    return std::shared_ptr<const ChatTemplate>();
  }
  StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    return InvalidArgumentError("chat template: " + std::string(parsed.status().message()));
  }
  return std::make_shared<const ChatTemplate>(*std::move(parsed));
}
#endif

void RunServe(ServeFlags& f) {
  f.server.max_body_bytes = static_cast<int64_t>(f.max_body_mb * (1 << 20));
  if (!f.thinking.empty()) f.server.defaults.enable_thinking = f.thinking == "true";
  f.server.chat_page = !f.no_chat_page;
  if (Status s = CollectApiKeys(f.api_key_file, &f.server.access.api_keys); !s.ok()) {
    Fail(std::string(s.message()));
  }
  if (Status s = f.server.Validate(); !s.ok()) Fail(std::string(s.message()));

  // Signals go to the watcher thread only: block them before any thread starts.
  // Signals: a handler writes to a pipe the watcher thread reads. (sigwait would need the signals
  // blocked in every thread, and OpenBLAS starts its threads before main.) Installing handlers
  // also undoes the SIG_IGN a shell gives background jobs for SIGINT.
  if (::pipe(g_signal_pipe) != 0) Fail("cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto session_or = OpenSession(f.model);
  if (!session_or.ok()) Fail(std::string(session_or.status().message()));
  Session& s = **session_or;
  StatusOr<PoolingChoice> pooling = ResolvePooling(f.pooling, s.model_path);
  if (!pooling.ok()) Fail(std::string(pooling.status().message()));

  auto ctx = std::make_unique<ServerContext>();
  ctx->options = f.server;
  ctx->responses = std::make_unique<ResponseStore>(f.server.responses_store);
  std::unique_ptr<TextCodec> codec;
#ifdef LOOM_HAVE_TOKENIZER
  if (s.tokenizer) {
    auto tpl = ResolveChatTemplate(s);
    if (!tpl.ok()) Fail(std::string(tpl.status().message()));
    // The tools variant applies only to the model's own templates, not to --chat-template.
    codec = std::make_unique<TokenizerCodec>(
        s.tokenizer, *tpl, *tpl == s.chat_template ? s.chat_template_tools : nullptr);
  }
#endif
  {
    auto parsers =
        ResolveOutputParsers(f.server.tool_parser, f.server.reasoning_parser, codec.get());
    if (!parsers.ok()) Fail(std::string(parsers.status().message()));
    ctx->parsers = *std::move(parsers);
  }
#ifdef LOOM_HAVE_TOKENIZER
  if (s.tokenizer) {
    // Grammar-constrained output: the tokens as bytes, EOS = the model's end ids; the tool-call
    // format's special-token markers stand for their text (its grammars write them).
    const std::vector<TokenId> eos(s.engine->config().eos_token_ids.begin(),
                                   s.engine->config().eos_token_ids.end());
    const std::vector<std::string> markers = ctx->parsers.tool_format
                                                 ? ToolCallGrammarMarkers(*ctx->parsers.tool_format)
                                                 : std::vector<std::string>{};
    auto vocab = TokenVocabulary::FromTokenizer(*s.tokenizer, eos, markers);
    if (vocab.ok()) {
      ctx->grammar_vocab = std::make_shared<const TokenVocabulary>(*std::move(vocab));
      // vocab_size / 8 bytes a mask: 19 KB for Qwen3, so ~5 MB.
      ctx->mask_cache = std::make_unique<MaskCache>(/*capacity=*/256);
    } else {
      LOG(WARNING) << "no grammar-constrained output: " << vocab.status().message();
    }
  }
  ctx->grammar_cache = std::make_unique<GrammarCache>(/*capacity=*/64, JsonSchemaOptions{},
                                                      f.grammar_compile_timeout_ms);
#endif
  ctx->codec = codec.get();
  ctx->engine = s.engine.get();
  const ModelConfig& cfg = s.model->config();
  ctx->model.name = s.model_name;
  ctx->model.path = s.model_path;
  ctx->model.arch = cfg.arch;
  ctx->model.max_model_len = s.engine->max_model_len();
  ctx->model.block_size = s.flags.block_size;
  ctx->model.num_kv_blocks = s.num_kv_blocks;
  ctx->model.bytes_per_token_kv = static_cast<int64_t>(s.kv_bytes_per_token);
  ctx->model.weights_bytes = s.engine->config().model_bytes;
  ctx->model.kv_dtype = s.engine->config().kv_dtype;
  ctx->model.batch = s.flags.batch;
  ctx->model.pooling = pooling->pooling;
  ctx->model.pooling_source = pooling->source;
#ifdef LOOM_HAVE_TOKENIZER
  ctx->model.card = DescribeModel(s.model_path);
#endif
  ctx->model.card.id = s.model_name;
  ctx->model.card.source = s.resolved.source;
  ctx->model.card.revision = s.resolved.revision;
  ctx->model.card.commit = s.resolved.commit;
  if (ctx->model.card.architecture.empty()) ctx->model.card.architecture = cfg.arch;
  // What this server does, which --tool-parser / --reasoning-parser may have changed.
  ctx->model.card.has_chat_template = codec != nullptr && codec->has_chat_template();
  ctx->model.card.capabilities.tool_format = ctx->parsers.tool_format;
  ctx->model.card.capabilities.reasoning = ctx->parsers.reasoning.has_value();

  HttpServer server(ctx.get());
  if (Status st = server.Bind(); !st.ok()) Fail(std::string(st.message()));
  s.engine->Start();

  std::string url = "http://" + Authority(f.server.host, server.port());
  std::string reasoning = "off";
  if (const auto& r = ctx->parsers.reasoning) {  // "<think> sections", Gemma 4's channel
    reasoning = r->open.substr(0, r->open.find_last_not_of(" \n") + 1) + " sections";
  }
  std::fprintf(stderr,
               "loom serve ready\n"
               "  model     %s (%s, %s)\n"
               "  device    %s\n"
               "  context   %d tokens; KV %d blocks x %d = %lld tokens (%s, %zu B/token)\n"
               "  batch     %d rows, %d tokens/step; http threads %d\n"
               "  tokenizer %s; chat template %s\n"
               "  tools     %s; reasoning %s\n"
               "  embed     %s pooling (%s), %d dims\n"
               "  load      %.2f s\n"
               "  url       %s  (chat page %s/#/chat)\n",
               s.model_name.c_str(), cfg.arch.c_str(), s.model_path.c_str(),
               s.backend->name().c_str(), ctx->model.max_model_len, s.num_kv_blocks,
               s.flags.block_size, static_cast<long long>(s.num_kv_blocks) * s.flags.block_size,
               ctx->model.kv_dtype.c_str(), s.kv_bytes_per_token, s.flags.batch,
               s.flags.max_batched_tokens, f.server.http_threads,
               codec ? "yes" : "none (token-id prompts only)",
               codec && codec->has_chat_template() ? "yes" : "none (chat routes answer 400)",
               ctx->parsers.tool_format_why.c_str(), reasoning.c_str(),
               PoolingName(ctx->model.pooling), ctx->model.pooling_source.c_str(),
               s.engine->hidden_size(), s.load_seconds, url.c_str(), url.c_str());
  if (s.is_default_model) {
    std::fprintf(
        stderr,
        "  note      this is loom's embedded 4.6M-parameter demo model (Bible text, no\n"
        "            instruction tuning); serve your own with `loom serve /path/to/hf-dir`\n"
        "            or `loom serve model.gguf` (make run MODEL=...)\n");
  }
  for (const std::string& w : AccessWarnings(f.server.host, f.server.access)) {
    std::fprintf(stderr, "  warning   %s\n", w.c_str());
  }
  std::fflush(stderr);
  // Only for a person at a terminal: never from a pipe, a service or a test.
  if (!f.no_open && ::isatty(STDOUT_FILENO) && f.server.chat_page) {
    // Bound to every address, the browser goes through loopback.
    const bool wildcard = f.server.host == "0.0.0.0" || f.server.host == "::";
    const std::string host = wildcard ? "127.0.0.1" : f.server.host;
    OpenBrowser("http://" + Authority(host, server.port()) + "/#/chat");
  }

  const auto grace =
      std::chrono::milliseconds(static_cast<int64_t>(f.server.shutdown_grace_s * 1000));
  std::thread watcher([&server, grace] {
    char sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    LOG(INFO) << "signal " << static_cast<int>(sig) << ": shutting down (grace " << grace.count()
              << " ms; a second signal exits at once)";
    server.Shutdown(grace);
  });
  std::atomic<bool> served{false};
  std::thread serving([&server, &served] {
    server.Serve();
    served.store(true);
  });
  watcher.join();  // returns once Shutdown() has drained the in-flight requests
  s.engine->Shutdown();
  // Serve() returns once the event loop closed its connections; a handler thread still finishing
  // a non-streaming request could delay it. Nothing is in flight any more, so do not wait long.
  for (int i = 0; i < 100 && !served.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  LOG(INFO) << "loom serve stopped";
  if (!served.load()) {
    std::fflush(nullptr);
    std::_Exit(0);
  }
  serving.join();
}

}  // namespace

void AddServeCommand(CLI::App& root) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd =
      root.add_subcommand("serve", "serve a model over OpenAI- and Anthropic-compatible HTTP APIs");
  f->model.Add(cmd);
  ServerOptions& o = f->server;
  cmd->add_option("--host", o.host, "interface to bind (0.0.0.0 exposes it on your network)")
      ->capture_default_str();
  cmd->add_option("--port", o.port, "listen port (refuses to start when taken)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", o.access.api_keys,
                  "require a key on every route but /health and the chat page: 'Authorization: "
                  "Bearer KEY' or 'x-api-key: KEY' (repeat or comma-separate for several; "
                  "LOOM_API_KEY adds more)")
      ->delimiter(',');
  cmd->add_option("--api-key-file", f->api_key_file,
                  "read API keys from FILE, one a line (# comments): keeps them out of the "
                  "process list")
      ->check(CLI::ExistingFile);
  cmd->add_option("--allowed-origins", o.access.allowed_origins,
                  "web page origins allowed to call the API besides the chat page and "
                  "http(s)://localhost|127.0.0.1|[::1] (scheme://host[:port], port * = any; null; "
                  "* = any page, with a warning); other Origins get 403")
      ->delimiter(',');
  cmd->add_option("--allowed-hosts", o.access.allowed_hosts,
                  "Host header names accepted besides loopback names (and, bound to another "
                  "address, that address and this machine's name); * turns the DNS-rebinding "
                  "check off, with a warning; other Hosts get 403")
      ->delimiter(',');
  cmd->add_option("--http-threads", o.http_threads,
                  "HTTP handler threads: parse, template and tokenize requests (generations, "
                  "streamed or not, and idle connections hold none; one event loop owns the "
                  "sockets)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--max-connections", o.max_connections,
                  "open connections beyond this get 503 and are closed (the open-file limit is "
                  "raised to its hard limit at start)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--header-timeout", o.header_timeout_s,
                  "seconds a request's headers may take from its first byte (a new connection's "
                  "from the connect); then 408 and close")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--body-timeout", o.body_timeout_s,
                  "longest pause in seconds within a request body; then 408 and close")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-body-mb", f->max_body_mb, "request body cap in MiB (413 above)")
      ->check(CLI::Range(0.01, 4096.0))
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", o.shutdown_grace_s,
                  "seconds in-flight requests get after SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-tokens", o.defaults.max_tokens,
                  "max_tokens when a request omits it (0 = until the context is full)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-output-tokens", o.defaults.max_output_tokens,
                  "no request generates more than this many tokens; a larger max_tokens is cut "
                  "to it (0 = no cap)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--temp,--temperature", o.defaults.temperature, "default sampling temperature")
      ->check(CLI::Range(0.0, 2.0))
      ->capture_default_str();
  cmd->add_option("--top-p", o.defaults.top_p, "default nucleus sampling mass")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--top-k", o.defaults.top_k, "default top-k (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--thinking", f->thinking,
                  "default enable_thinking for chat templates (a request's "
                  "chat_template_kwargs / reasoning_effort wins)")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--tool-parser", o.tool_parser,
                  "how tool calls are read from the output: auto (from the chat template), none, "
                  "or a format: " +
                      ToolCallFormatNames())
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", o.reasoning_parser,
                  "split <think> sections into reasoning_content / thinking blocks: auto (when "
                  "the chat template writes <think>), none or think")
      ->check(CLI::IsMember({"auto", "none", "think"}))
      ->capture_default_str();
  cmd->add_option("--reasoning-budget", o.defaults.reasoning_budget,
                  "reasoning tokens a reply may write before loom closes its <think> section "
                  "(when the reasoning parser is on), for requests that set no "
                  "thinking.budget_tokens / thinking_token_budget: -1 = unlimited, 0 = close it "
                  "at once (thinking off)")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--responses-store", o.responses_store,
                  "Responses API responses kept in memory for previous_response_id and GET "
                  "/v1/responses/{id}, least recently used dropped first (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-queued-requests", o.max_queued_requests,
                  "generation requests arriving while this many wait for the engine get 429 "
                  "with Retry-After (0 = no cap; --http-threads bounds the queue anyway)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--pooling", f->pooling,
                  "how /v1/embeddings pools the final hidden states: auto (the model's "
                  "sentence-transformers 1_Pooling config, else last), last (the last token's, "
                  "as Qwen3-Embedding), mean or cls (the first token's)")
      ->check(CLI::IsMember({"auto", "last", "mean", "cls"}))
      ->capture_default_str();
  cmd->add_flag("--log-prompts", o.log_prompts,
                "also log each request's prompt (as the model sees it) and each reply's text; "
                "without it the log holds request ids, sizes and timings only");
  cmd->add_option("--grammar-compile-timeout", f->grammar_compile_timeout_ms,
                  "ms a request's JSON schema / grammar may take to compile before it is refused "
                  "with a 400 (0 = no limit; grammars are also capped at " +
                      std::to_string(GrammarBudget::kDefaultMaxRules) + " rules)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--no-open", f->no_open, "do not open the chat page in a browser");
  cmd->add_flag("--no-chat-page", f->no_chat_page, "do not serve the chat page at /");
  o.defaults.max_tokens = 512;
  cmd->callback([f] { RunServe(*f); });
}

}  // namespace loom
