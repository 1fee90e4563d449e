#include "server/tokenizer_codec.h"

#include "base/check.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace loom {

TokenizerCodec::TokenizerCodec(std::shared_ptr<const Tokenizer> tokenizer,
                               std::shared_ptr<const ChatTemplate> chat_template,
                               std::shared_ptr<const ChatTemplate> tools_template)
    : tokenizer_(std::move(tokenizer)),
      chat_template_(std::move(chat_template)),
      tools_template_(tools_template != nullptr ? std::move(tools_template) : chat_template_) {
  CHECK(tokenizer_ != nullptr);
}

StatusOr<std::vector<TokenId>> TokenizerCodec::Encode(std::string_view text,
                                                      bool add_special_tokens) const {
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->EncodeChecked(text, add_special_tokens));
  return std::vector<TokenId>(ids.begin(), ids.end());
}

std::string TokenizerCodec::Decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::vector<int32_t> v(ids.begin(), ids.end());
  return tokenizer_->Decode(v, skip_special_tokens);
}

std::string TokenizerCodec::TokenText(TokenId id) const {
  const StreamPlan& plan = tokenizer_->stream_plan();
  if (plan.supported && id >= 0 && static_cast<size_t>(id) < plan.pieces.size()) {
    if (plan.byte_value.size() > static_cast<size_t>(id) && plan.byte_value[id] >= 0) {
      return std::string(1, static_cast<char>(plan.byte_value[id]));
    }
    return plan.pieces[id];
  }
  return TextCodec::TokenText(id);
}

size_t TokenizerCodec::MinTokenCount(std::string_view text, bool add_special_tokens) const {
  return tokenizer_->MinTokenCount(text, add_special_tokens);
}

size_t TokenizerCodec::max_bytes_per_token() const {
  return tokenizer_->max_bytes_per_token().value_or(0);
}

int TokenizerCodec::vocab_size() const { return tokenizer_->vocab_size(); }

StatusOr<std::string> TokenizerCodec::RenderChat(const nlohmann::ordered_json& context) const {
  if (chat_template_ == nullptr) return FailedPreconditionError("the model has no chat template");
  nlohmann::ordered_json ctx = context;
  if (!ctx.contains("bos_token")) ctx["bos_token"] = tokenizer_->bos_token();
  if (!ctx.contains("eos_token")) ctx["eos_token"] = tokenizer_->eos_token();
  const bool has_tools = ctx.contains("tools") && ctx["tools"].is_array() && !ctx["tools"].empty();
  return (has_tools ? tools_template_ : chat_template_)->Render(ctx);
}

std::string TokenizerCodec::chat_template_source(bool tools) const {
  const ChatTemplate* t = tools ? tools_template_.get() : chat_template_.get();
  return t != nullptr ? t->source() : std::string();
}

}  // namespace loom
