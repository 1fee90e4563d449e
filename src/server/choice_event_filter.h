// ChoiceEventFilter: the shape of the parsers that sit between a Generation and the encoders
// (ReasoningSource, ToolCallSource): a ChoiceEventSource wrapping another one that rewrites each
// kText event (OnText) and sees each choice's kFinish first (OnFinish, to flush what it held
// back); other events pass unchanged, in order.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "server/choice_event.h"

namespace loom {

class ChoiceEventFilter : public ChoiceEventSource {
 public:
  explicit ChoiceEventFilter(std::unique_ptr<ChoiceEventSource> inner) : inner_(std::move(inner)) {}

  std::vector<ChoiceEvent> Poll(std::chrono::milliseconds timeout) final {
    std::vector<ChoiceEvent> out;
    for (ChoiceEvent& e : inner_->Poll(timeout)) {
      if (e.kind == ChoiceEventKind::kText) {
        OnText(std::move(e), &out);
      } else if (e.kind == ChoiceEventKind::kFinish) {
        OnFinish(std::move(e), &out);  // appends the flushed events, then the kFinish
      } else {
        out.push_back(std::move(e));
      }
    }
    return out;
  }
  bool done() const final { return inner_->done(); }
  void Abort() final { inner_->Abort(); }
  Usage usage() const final { return inner_->usage(); }
  void SetWakeup(std::function<void()> wake) final { inner_->SetWakeup(std::move(wake)); }

 protected:
  // Appends what `text` becomes to `out`.
  virtual void OnText(ChoiceEvent text, std::vector<ChoiceEvent>* out) = 0;
  // Appends the choice's held-back events and then `finish` (maybe with another reason).
  virtual void OnFinish(ChoiceEvent finish, std::vector<ChoiceEvent>* out) = 0;

 private:
  std::unique_ptr<ChoiceEventSource> inner_;
};

}  // namespace loom
