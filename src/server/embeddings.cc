#include "server/embeddings.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "server/json_fields.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Token ids of `arr` (an array of integers in [0, vocab_size)) into out->ids.
Status ParseIds(const json& arr, int vocab_size, EmbeddingInput* out, std::string* param) {
  if (arr.empty()) return FieldError(param, out->field, out->field + " must not be empty");
  for (const json& id : arr) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        (vocab_size > 0 && id.get<int64_t>() >= vocab_size)) {
      return FieldError(param, out->field,
                        out->field + " token ids must be integers in [0, " +
                            std::to_string(vocab_size) + "), got " + id.dump());
    }
    out->ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  out->is_ids = true;
  return OkStatus();
}

Status ParseInput(const json& input, int vocab_size, EmbeddingsRequest* out, std::string* param) {
  const std::string kExpected =
      "input must be a string, an array of strings, an array of token ids or an array of arrays "
      "of token ids";
  if (input.is_string()) {
    EmbeddingInput& in = out->inputs.emplace_back();
    in.field = "input";
    in.text = input.get<std::string>();
    if (in.text.empty()) return FieldError(param, "input", "input must not be an empty string");
    return OkStatus();
  }
  if (!input.is_array()) {
    return FieldError(param, "input", kExpected + ", got " + JsonTypeName(input));
  }
  if (input.empty()) return FieldError(param, "input", "input must not be an empty array");
  if (input[0].is_number()) {  // one input as token ids
    EmbeddingInput& in = out->inputs.emplace_back();
    in.field = "input";
    return ParseIds(input, vocab_size, &in, param);
  }
  if (static_cast<int>(input.size()) > kMaxEmbeddingInputs) {
    return FieldError(param, "input",
                      "input holds " + std::to_string(input.size()) + " inputs, more than the " +
                          std::to_string(kMaxEmbeddingInputs) + " one request may have");
  }
  const bool strings = input[0].is_string();
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    EmbeddingInput& in = out->inputs.emplace_back();
    in.field = "input[" + std::to_string(i) + "]";
    if (strings && item.is_string()) {
      in.text = item.get<std::string>();
      if (in.text.empty()) return FieldError(param, in.field, in.field + " is an empty string");
    } else if (!strings && item.is_array()) {
      RETURN_IF_ERROR(ParseIds(item, vocab_size, &in, param));
    } else {
      return FieldError(param, in.field,
                        in.field + ": " + kExpected + " (one kind throughout), got " +
                            JsonTypeName(item) + " after " + JsonTypeName(input[0]));
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<EmbeddingsRequest> ParseEmbeddingsRequest(const std::string& body, int vocab_size,
                                                   int hidden_size, std::string* param) {
  return CatchJsonErrors([&]() -> StatusOr<EmbeddingsRequest> {
    ASSIGN_OR_RETURN(json j, ParseJsonObject(body, param));
    JsonFields f(j, param);
    EmbeddingsRequest out;
    RETURN_IF_ERROR(f.String("model", &out.model));
    const json* input = f.Find("input");
    if (input == nullptr) return f.Error("input", "input is required (the text to embed)");
    RETURN_IF_ERROR(ParseInput(*input, vocab_size, &out, param));
    std::string format = "float";
    RETURN_IF_ERROR(f.String("encoding_format", &format));
    if (format != "float" && format != "base64") {
      return f.Error("encoding_format",
                     "encoding_format must be \"float\" or \"base64\", got \"" + format + "\"");
    }
    out.base64 = format == "base64";
    bool has_dimensions = false;
    RETURN_IF_ERROR(
        f.Int("dimensions", 1, std::numeric_limits<int>::max(), &out.dimensions, &has_dimensions));
    if (has_dimensions && out.dimensions > hidden_size) {
      return f.Error("dimensions", "dimensions must be in [1, " + std::to_string(hidden_size) +
                                       "] (the model's embedding size), got " +
                                       std::to_string(out.dimensions));
    }
    std::string user;  // accepted and ignored, as vLLM does
    RETURN_IF_ERROR(f.String("user", &user));
    return out;
  });
}

std::vector<float> FinishEmbedding(std::span<const float> pooled, int dimensions) {
  const size_t n =
      dimensions > 0 ? std::min(pooled.size(), static_cast<size_t>(dimensions)) : pooled.size();
  std::vector<float> v(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(n));
  double ss = 0;
  for (float x : v) ss += static_cast<double>(x) * x;
  if (ss > 0) {
    const double norm = std::sqrt(ss);
    for (float& x : v) x = static_cast<float>(x / norm);
  }
  return v;
}

std::string EmbeddingBase64(std::span<const float> v) {
  static_assert(std::endian::native == std::endian::little, "f32 bytes are sent little-endian");
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t w = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += kAlphabet[(w >> 6) & 63];
    out += kAlphabet[w & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t w = uint32_t{bytes[i]} << 16;
    if (rest == 2) w |= uint32_t{bytes[i + 1]} << 8;
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += rest == 2 ? kAlphabet[(w >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

ordered_json EmbeddingsJson(const std::string& model,
                            const std::vector<std::vector<float>>& vectors, bool base64,
                            int64_t prompt_tokens) {
  ordered_json data = ordered_json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    ordered_json item;
    item["object"] = "embedding";
    item["index"] = i;
    if (base64) {
      item["embedding"] = EmbeddingBase64(vectors[i]);
    } else {
      item["embedding"] = vectors[i];
    }
    data.push_back(std::move(item));
  }
  ordered_json out;
  out["object"] = "list";
  out["data"] = std::move(data);
  out["model"] = model;
  out["usage"] = ordered_json{{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
  return out;
}

}  // namespace loom
