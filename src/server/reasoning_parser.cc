#include "server/reasoning_parser.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace loom {
namespace {

// The length of the longest proper prefix of `marker` that `s` ends with.
size_t PartialMarkerAtEnd(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(ReasoningMarkers markers, bool starts_in_reasoning)
    : markers_(std::move(markers)),
      state_(starts_in_reasoning ? State::kReasoning : State::kStart) {
  CHECK(!markers_.open.empty() && !markers_.close.empty()) << "ReasoningSplitter: empty marker";
}

ReasoningSplitter::Pieces ReasoningSplitter::Feed(std::string_view chunk) {
  Pieces out;
  held_.append(chunk);
  while (true) {
    switch (state_) {
      case State::kStart: {
        const size_t first = held_.find_first_not_of(" \n\r\t");
        if (first == std::string::npos) return out;  // only whitespace so far
        const std::string_view rest = std::string_view(held_).substr(first);
        if (rest.starts_with(markers_.open)) {
          held_.erase(0, first + markers_.open.size());
          state_ = State::kReasoning;
        } else if (std::string_view(markers_.open).starts_with(rest)) {
          return out;  // maybe the open marker, cut short
        } else {
          state_ = State::kText;  // the leading whitespace is text too
        }
        break;
      }
      case State::kReasoning: {
        const size_t close = held_.find(markers_.close);
        if (close != std::string::npos) {
          out.reasoning.append(held_, 0, close);
          held_.erase(0, close + markers_.close.size());
          state_ = State::kText;
          break;
        }
        const size_t keep = PartialMarkerAtEnd(held_, markers_.close);
        out.reasoning.append(held_, 0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      case State::kText:
        out.text += held_;
        held_.clear();
        return out;
    }
  }
}

ReasoningSplitter::Pieces ReasoningSplitter::Flush() {
  Pieces out;
  (state_ == State::kReasoning ? out.reasoning : out.text) = std::move(held_);
  held_.clear();
  return out;
}

ReasoningSource::ReasoningSource(std::unique_ptr<ChoiceEventSource> inner, ReasoningMarkers markers,
                                 bool starts_in_reasoning)
    : ChoiceEventFilter(std::move(inner)),
      markers_(std::move(markers)),
      starts_in_reasoning_(starts_in_reasoning) {}

ReasoningSplitter& ReasoningSource::SplitterFor(int choice_idx) {
  CHECK_GE(choice_idx, 0);
  const auto i = static_cast<size_t>(choice_idx);
  if (splitters_.size() <= i) splitters_.resize(i + 1);
  if (splitters_[i] == nullptr) {
    splitters_[i] = std::make_unique<ReasoningSplitter>(markers_, starts_in_reasoning_);
  }
  return *splitters_[i];
}

void ReasoningSource::Emit(int choice_idx, ReasoningSplitter::Pieces pieces,
                           std::vector<LogprobEntry> logprobs, std::vector<ChoiceEvent>* out) {
  if (!pieces.reasoning.empty()) {
    out->push_back(ChoiceEvent::Reasoning(choice_idx, std::move(pieces.reasoning)));
  }
  if (!pieces.text.empty() || !logprobs.empty()) {
    ChoiceEvent e = ChoiceEvent::Text(choice_idx, std::move(pieces.text));
    e.logprobs = std::move(logprobs);
    out->push_back(std::move(e));
  }
}

void ReasoningSource::OnText(ChoiceEvent e, std::vector<ChoiceEvent>* out) {
  Emit(e.choice_idx, SplitterFor(e.choice_idx).Feed(e.text), std::move(e.logprobs), out);
}

void ReasoningSource::OnFinish(ChoiceEvent e, std::vector<ChoiceEvent>* out) {
  Emit(e.choice_idx, SplitterFor(e.choice_idx).Flush(), {}, out);
  out->push_back(std::move(e));
}

}  // namespace loom
