// POST /v1/embeddings (OpenAI's shape, vLLM's extensions where they differ): the request parser
// and the response. The route (embeddings_routes.cc) tokenizes each input, submits one engine
// embedding request per input (Request::pooling) and turns the pooled vectors into the response.
//
//   request:  {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...], "model",
//              "encoding_format": "float" | "base64", "dimensions": n, "user"}
//   response: {"object": "list", "data": [{"object": "embedding", "index": i,
//              "embedding": [f32...] | "<base64 of little-endian f32>"}], "model",
//              "usage": {"prompt_tokens", "total_tokens"}}
//
// Every vector is the pooled hidden state truncated to `dimensions` (Matryoshka models) and then
// L2-normalized, as vLLM does.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace loom {

// OpenAI's cap on the inputs of one request.
inline constexpr int kMaxEmbeddingInputs = 2048;

struct EmbeddingInput {
  std::string field;         // what errors name: "input", or "input[i]" inside an array
  bool is_ids = false;       // token ids as sent (no tokenizer, no special tokens added)
  std::string text;          // !is_ids: non-empty
  std::vector<TokenId> ids;  // is_ids: non-empty, each in [0, vocab_size)
};

struct EmbeddingsRequest {
  std::vector<EmbeddingInput> inputs;  // 1 .. kMaxEmbeddingInputs, in response order
  std::string model;                   // as sent (not checked, as the other routes)
  bool base64 = false;                 // encoding_format "base64"
  int dimensions = 0;                  // 0: the model's hidden size; else 1 .. hidden_size
};

// Parses and validates a request body. `vocab_size` bounds token ids (0: unchecked);
// `hidden_size` bounds `dimensions`. Errors are InvalidArgument with *param naming the field
// ("input", "input[2]", "encoding_format", "dimensions", ...).
StatusOr<EmbeddingsRequest> ParseEmbeddingsRequest(const std::string& body, int vocab_size,
                                                   int hidden_size, std::string* param);

// The response vector of a pooled hidden state: its first `dimensions` values (all when 0),
// divided by their L2 norm (a zero vector stays zero). Norms are summed in double.
std::vector<float> FinishEmbedding(std::span<const float> pooled, int dimensions);

// Standard base64 (RFC 4648, padded) of the vector's little-endian f32 bytes: what the OpenAI
// SDKs decode for encoding_format "base64".
std::string EmbeddingBase64(std::span<const float> v);

// The response body: one "embedding" object per vector, in order.
nlohmann::ordered_json EmbeddingsJson(const std::string& model,
                                      const std::vector<std::vector<float>>& vectors, bool base64,
                                      int64_t prompt_tokens);

}  // namespace loom
