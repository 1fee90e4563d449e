// ServerOptions (the serve flags, validated once) and ServerContext: what every route handler
// reads. The context is built by the CLI, outlives the HttpServer, and holds no mutable state
// besides the thread-safe metrics, the response store and the draining flag.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "grammar/mask_cache.h"
#include "server/access_policy.h"
#include "server/generation_request.h"
#include "server/model_card.h"
#include "server/output_parsing.h"
#include "server/response_store.h"
#include "server/server_metrics.h"
#include "server/text_codec.h"

namespace loom {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;       // 0 = any free port (tests)
  AccessOptions access;  // --allowed-origins, --allowed-hosts, API keys
  // Handler workers: request parsing, chat templates, tokenizing, and each non-streaming
  // generation while it runs (streams and idle connections hold none).
  int http_threads = 512;
  int max_connections = 4096;  // open connections beyond this get 503 and are closed
  int64_t max_body_bytes = 32ll << 20;
  int keep_alive_timeout_s = 5;  // idle keep-alive connections
  double header_timeout_s = 10;  // a request's head must arrive within this of its first byte
  double body_timeout_s = 10;    // the longest pause within a request body (both: 408)
  double shutdown_grace_s = 10;  // in-flight streams get this long after SIGINT/SIGTERM
  bool chat_page = true;
  std::string tool_parser = "auto";       // --tool-parser: auto, none or a format name
  std::string reasoning_parser = "auto";  // --reasoning-parser: auto, none or think
  int responses_store = 256;              // --responses-store: responses kept (0 = none)
  // --max-queued-requests: generation requests beyond this many waiting rows get 429 (0 = no cap
  // but --http-threads: a waiting request holds a worker).
  int max_queued_requests = 0;
  // --log-prompts: the log also carries each request's prompt (as the model sees it) and each
  // choice's text; off, the log holds ids, sizes and timings only.
  bool log_prompts = false;
  RequestDefaults defaults;

  Status Validate() const;  // messages name the flag
};

// What /v1/models, /stats and the ready card say about the served model.
struct ServedModelInfo {
  std::string name;  // /v1/models id
  std::string path;
  std::string arch;
  int max_model_len = 0;
  int block_size = 16;
  int num_kv_blocks = 0;
  int64_t bytes_per_token_kv = 0;
  int64_t weights_bytes = 0;
  std::string kv_dtype = "f32";
  int batch = 1;  // --batch
  // /v1/embeddings: how the model's final hidden states are pooled (--pooling, else the
  // sentence-transformers config in the model directory, else last token) and where that came
  // from ("--pooling", "sentence-transformers config", "default": cli/pooling_config.h).
  Pooling pooling = Pooling::kLast;
  std::string pooling_source = "default";
  // What /v1/models says under "loom": the model's files as `loom list` describes them, with
  // the capabilities of the parsers this server runs (--tool-parser / --reasoning-parser).
  ModelCard card;
};

struct ServerContext {
  Engine* engine = nullptr;          // started; not owned
  const TextCodec* codec = nullptr;  // null: the model has no tokenizer (token-id prompts only)
  ServedModelInfo model;
  ServerOptions options;
  OutputParsers parsers;  // from options.tool_parser / reasoning_parser and the chat template
  // Grammar-constrained output: the model's tokens as bytes (null without a tokenizer), the
  // compiled grammars by spec, and the masks of their states shared by the requests (null: none).
  std::shared_ptr<const TokenVocabulary> grammar_vocab;
  std::unique_ptr<GrammarCache> grammar_cache;
  std::unique_ptr<MaskCache> mask_cache;
  // Responses API responses for previous_response_id (null or capacity 0: none are kept).
  std::unique_ptr<ResponseStore> responses;
  ServerMetrics metrics;
  std::atomic<bool> draining{false};  // set on shutdown: new requests get 503
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
};

}  // namespace loom
