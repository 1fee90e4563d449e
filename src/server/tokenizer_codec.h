// TokenizerCodec: the TextCodec of a real model — loom's Tokenizer plus (optionally) its
// ChatTemplate. Built only when the tokenizer room is (LOOM_HAVE_TOKENIZER).
#pragma once

#include <memory>

#include "server/text_codec.h"

namespace loom {

class Tokenizer;
class ChatTemplate;

class TokenizerCodec : public TextCodec {
 public:
  // `tokenizer` must be non-null; `chat_template` may be null (chat routes then answer 400).
  // `tools_template` renders requests with tools (null: `chat_template` does).
  TokenizerCodec(std::shared_ptr<const Tokenizer> tokenizer,
                 std::shared_ptr<const ChatTemplate> chat_template,
                 std::shared_ptr<const ChatTemplate> tools_template = nullptr);

  StatusOr<std::vector<TokenId>> Encode(std::string_view text,
                                        bool add_special_tokens) const override;
  std::string Decode(std::span<const TokenId> ids, bool skip_special_tokens) const override;
  std::string TokenText(TokenId id) const override;
  size_t MinTokenCount(std::string_view text, bool add_special_tokens) const override;
  size_t max_bytes_per_token() const override;
  int vocab_size() const override;
  bool has_chat_template() const override { return chat_template_ != nullptr; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json& context) const override;
  std::string chat_template_source(bool tools) const override;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> chat_template_;
  std::shared_ptr<const ChatTemplate> tools_template_;  // never null when chat_template_ is set
};

}  // namespace loom
