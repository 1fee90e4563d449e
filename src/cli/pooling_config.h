// Which pooling /v1/embeddings uses for a model, decided once at startup: --pooling when given,
// else the model directory's sentence-transformers config (modules.json names the Pooling
// module's folder, usually 1_Pooling/, whose config.json sets one pooling_mode_* flag), else the
// last token (what Qwen3-Embedding and most decoder embedders use).
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "engine/request.h"

namespace loom {

// "last" | "mean" | "cls" (--pooling's values; "lasttoken" and "mean_tokens" / "cls_token", the
// sentence-transformers names, are accepted too); nullopt for anything else.
std::optional<Pooling> ParsePoolingName(const std::string& name);

// The pooling a sentence-transformers checkpoint in `model_dir` declares; nullopt when it has
// none (no modules.json or no Pooling module: a plain HF model, or a .gguf path). Errors
// (InvalidArgument / NotFound, naming the file): unreadable JSON, a missing Pooling config, or a
// mode loom does not implement (max, mean_sqrt_len, weightedmean, several at once).
StatusOr<std::optional<Pooling>> ReadSentenceTransformersPooling(const std::string& model_dir);

struct PoolingChoice {
  Pooling pooling = Pooling::kLast;
  std::string source;  // "--pooling", "<dir>/1_Pooling/config.json" or "default"
};

// --pooling (`flag`: "auto" or a ParsePoolingName value) over the model's config over the
// default. Errors: a bad flag value; a sentence-transformers config that cannot be used (the
// message says to pass --pooling).
StatusOr<PoolingChoice> ResolvePooling(const std::string& flag, const std::string& model_path);

}  // namespace loom
