// Operational routes: GET /v1/models, /health, /stats, /metrics; POST /tokenize, /detokenize
// (llama.cpp / vLLM shapes: {"content"|"prompt": text, "add_special"} → {"tokens": [...]};
// {"tokens": [...]} → {"content": text}).
#include "base/logging.h"
#include "server/json_fields.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

void HandleTokenize(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  std::string param;
  auto fail = [&](const Status& s) {
    SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(s, param));
  };
  StatusOr<json> body = ParseJsonObject(req.body, &param);
  if (!body.ok()) return fail(body.status());
  if (ctx->codec == nullptr) {
    param = "content";
    return fail(InvalidArgumentError("the model '" + ctx->model.name + "' has no tokenizer"));
  }
  JsonFields f(*body, &param);
  std::string text;
  const char* key = f.Find("content") != nullptr ? "content" : "prompt";
  if (f.Find(key) == nullptr) {
    param = "content";
    return fail(InvalidArgumentError("content is required (the text to tokenize)"));
  }
  if (Status s = f.String(key, &text); !s.ok()) return fail(s);
  bool add_special = true;
  if (Status s = f.Bool(f.Find("add_special") != nullptr ? "add_special" : "add_special_tokens",
                        &add_special);
      !s.ok()) {
    return fail(s);
  }
  StatusOr<std::vector<TokenId>> ids = ctx->codec->Encode(text, add_special);
  if (!ids.ok()) {
    param = key;
    return fail(ids.status());
  }
  SendJson(res, 200,
           ordered_json{{"tokens", *ids},
                        {"count", ids->size()},
                        {"max_model_len", ctx->engine->max_model_len()}});
}

void HandleDetokenize(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  std::string param;
  auto fail = [&](const Status& s) {
    SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(s, param));
  };
  StatusOr<json> body = ParseJsonObject(req.body, &param);
  if (!body.ok()) return fail(body.status());
  if (ctx->codec == nullptr) {
    param = "tokens";
    return fail(InvalidArgumentError("the model '" + ctx->model.name + "' has no tokenizer"));
  }
  auto it = body->find("tokens");
  if (it == body->end() || !it->is_array()) {
    param = "tokens";
    return fail(InvalidArgumentError("tokens is required and must be an array of token ids"));
  }
  std::vector<TokenId> ids;
  for (const json& id : *it) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= ctx->codec->vocab_size()) {
      param = "tokens";
      return fail(InvalidArgumentError("tokens entries must be token ids in [0, " +
                                       std::to_string(ctx->codec->vocab_size()) + "), got " +
                                       id.dump()));
    }
    ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  SendJson(res, 200, ordered_json{{"content", ctx->codec->Decode(ids, false)}});
}

// /stats "ssd_cache": the SSD tier's counters ({"enabled": false} without --ssd-cache).
ordered_json SsdCacheJson(const EngineStats& e, const EngineConfig& config) {
  if (!e.ssd_cache) return ordered_json{{"enabled", false}};
  const KvDiskStats& d = e.ssd.store;
  return ordered_json{{"enabled", true},
                      {"dir", config.ssd_cache_dir},
                      {"entries", d.entries},
                      {"bytes", d.bytes},
                      {"max_bytes", config.ssd_cache_max_bytes},
                      {"hits", d.hits},
                      {"misses", d.misses},
                      {"restores", e.ssd.restores},
                      {"restored_blocks", e.ssd.restored_blocks},
                      {"restore_tokens", e.ssd_restore_tokens},
                      {"writes", d.writes},
                      {"write_errors", d.write_errors},
                      {"evictions", d.evictions},
                      {"quarantined", d.quarantined},
                      {"discovered", d.discovered},
                      {"pending_spills", e.ssd.pending_spills},
                      {"demoted_blocks", e.ssd_demoted_blocks},
                      {"dropped_spills", e.ssd.dropped_spills},
                      {"spill_disabled", e.ssd.spill_disabled}};
}

// /stats "host_cache": the host-RAM tier's counters ({"enabled": false} without one).
ordered_json HostCacheJson(const EngineStats& e) {
  if (!e.host_cache) return ordered_json{{"enabled", false}};
  const KvHostTierStats& h = e.host;
  return ordered_json{{"enabled", true},
                      {"entries", h.entries},
                      {"bytes", h.bytes},
                      {"max_bytes", h.capacity_bytes},
                      {"hits", h.hits},
                      {"restores", h.restores},
                      {"restored_blocks", h.restored_blocks},
                      {"restore_tokens", e.host_restore_tokens},
                      {"inserts", h.inserts},
                      {"evictions", h.evictions},
                      {"held", h.held},
                      {"refused", h.refused}};
}

}  // namespace

ordered_json StatsJson(const ServerContext& ctx) {
  EngineStats e = ctx.engine->stats();
  const ServedModelInfo& m = ctx.model;
  const int64_t block_bytes = m.bytes_per_token_kv * m.block_size;
  const std::string mode = m.batch > 1 ? "batch" : "off";
  return ordered_json{
      {"server", ordered_json{{"owner", "serve"},
                              {"model", m.name},
                              {"started_at", std::chrono::duration_cast<std::chrono::seconds>(
                                                 ctx.started_at.time_since_epoch())
                                                 .count()},
                              {"draining", ctx.draining.load()},
                              {"requests_in_flight", ctx.metrics.in_flight()}}},
      {"model", ordered_json{{"name", m.name},
                             {"path", m.path},
                             {"arch", m.arch},
                             {"max_model_len", m.max_model_len},
                             {"weights_bytes", m.weights_bytes}}},
      {"prompt_cache",
       ordered_json{{"enabled", ctx.engine->config().enable_prefix_cache},
                    {"entries", e.kv_blocks_cached},
                    {"bytes", static_cast<int64_t>(e.kv_blocks_cached) * block_bytes},
                    {"max_bytes", static_cast<int64_t>(e.kv_blocks_total) * block_bytes},
                    {"hits", e.prefix_cache_hits},
                    {"misses", e.prefix_cache_misses},
                    {"hit_tokens", e.prefix_cache_hit_tokens},
                    {"query_tokens", e.prefix_cache_query_tokens},
                    {"evictions", e.prefix_cache_evictions}}},
      {"host_cache", HostCacheJson(e)},
      {"ssd_cache", SsdCacheJson(e, ctx.engine->config())},
      {"kv",
       ordered_json{{"dtype", m.kv_dtype},
                    {"bytes_per_token", ctx.engine->config().bytes_per_token_kv},
                    {"block_size", m.block_size},
                    {"blocks_total", e.kv_blocks_total},
                    {"blocks_used", e.kv_blocks_used},
                    {"blocks_free", e.kv_blocks_free},
                    {"capacity_tokens", static_cast<int64_t>(e.kv_blocks_total) * m.block_size}}},
      {"admission", ordered_json{{"max_safe_context", m.max_model_len},
                                 {"memory_budget_bytes",
                                  ctx.engine->config().memory_budget_bytes > 0
                                      ? ordered_json(ctx.engine->config().memory_budget_bytes)
                                      : ordered_json()},
                                 {"kv_budget_bytes", e.kv_budget_bytes},
                                 {"weights_bytes", m.weights_bytes}}},
      {"batch",
       ordered_json{
           {"configured", m.batch},
           {"mode", mode},
           {"batched", mode == "batch"},
           {"active_rows", e.active_rows},
           {"pending_rows", e.pending_rows},
           {"submitted_rows", e.submitted_rows},
           {"finished_rows", e.finished_rows},
           {"kv_bytes", e.kv_bytes},
           {"kv_projected_bytes", e.kv_projected_bytes},
           {"kv_budget_bytes", e.kv_budget_bytes},
           {"preemptions", e.preemptions},
           {"steps", e.steps},
           {"generated_tokens", e.generated_tokens},
           {"jump_forward_tokens", e.jump_forward_tokens},
           {"speculation", ordered_json{{"drafted", e.draft_tokens},
                                        {"accepted", e.accepted_draft_tokens},
                                        // null until measured (--draft-token-cost auto)
                                        {"token_cost", e.draft_token_cost < 0
                                                           ? ordered_json(nullptr)
                                                           : ordered_json(e.draft_token_cost)}}}}}};
}

void RegisterOpsRoutes(HttpRouter& server, ServerContext* ctx) {
  server.Get("/v1/models", [ctx](const HttpRequest&, HttpResponse& res) {
    ordered_json model{{"id", ctx->model.name},
                       {"object", "model"},
                       {"created", std::chrono::duration_cast<std::chrono::seconds>(
                                       ctx->started_at.time_since_epoch())
                                       .count()},
                       {"owned_by", "loom"},
                       {"max_model_len", ctx->model.max_model_len},
                       {"loom", ModelCardJson(ctx->model.card)}};
    SendJson(res, 200, ordered_json{{"object", "list"}, {"data", ordered_json::array({model})}});
  });
  server.Get("/health", [ctx](const HttpRequest&, HttpResponse& res) {
    if (ctx->draining.load()) {
      SendJson(res, 503, ordered_json{{"status", "draining"}});
    } else {
      SendJson(res, 200, ordered_json{{"status", "ok"}});
    }
  });
  server.Get("/stats",
             [ctx](const HttpRequest&, HttpResponse& res) { SendJson(res, 200, StatsJson(*ctx)); });
  server.Get("/metrics", [ctx](const HttpRequest&, HttpResponse& res) {
    res.set_content(ctx->metrics.RenderPrometheus(ctx->engine->stats()),
                    "text/plain; version=0.0.4");
  });
  server.Post("/tokenize",
              [ctx](const HttpRequest& req, HttpResponse& res) { HandleTokenize(ctx, req, res); });
  server.Post("/detokenize", [ctx](const HttpRequest& req, HttpResponse& res) {
    HandleDetokenize(ctx, req, res);
  });
}

}  // namespace loom
