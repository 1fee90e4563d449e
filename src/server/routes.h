// Route families of the HTTP server. Each Register* adds its routes to `server`; `ctx` must
// outlive the server.
#pragma once

#include "server/http_router.h"
#include "server/server_context.h"

namespace loom {

// POST /v1/chat/completions, POST /v1/completions (openai_routes.cc).
void RegisterOpenAiRoutes(HttpRouter& server, ServerContext* ctx);
// POST /v1/messages, POST /v1/messages/count_tokens (anthropic_routes.cc).
void RegisterAnthropicRoutes(HttpRouter& server, ServerContext* ctx);
// POST /v1/responses, GET / DELETE /v1/responses/{id} (responses_routes.cc).
void RegisterResponsesRoutes(HttpRouter& server, ServerContext* ctx);
// POST /v1/embeddings (embeddings_routes.cc).
void RegisterEmbeddingsRoutes(HttpRouter& server, ServerContext* ctx);
// GET /v1/models, /health, /stats, /metrics; POST /tokenize, /detokenize (ops_routes.cc).
void RegisterOpsRoutes(HttpRouter& server, ServerContext* ctx);
// GET / : the embedded chat page (chat_page.cc).
void RegisterChatPage(HttpRouter& server);

// /stats body (ops_routes.cc); exposed for tests.
nlohmann::ordered_json StatsJson(const ServerContext& ctx);

}  // namespace loom
