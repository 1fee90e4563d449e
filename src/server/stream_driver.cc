#include "server/stream_driver.h"

#include <utility>

#include "base/logging.h"
#include "server/route_util.h"

namespace loom {

using Clock = std::chrono::steady_clock;

StreamDriver::StreamDriver(std::unique_ptr<ChoiceEventSource> source,
                           std::unique_ptr<StreamEncoder> encoder, ServerMetrics* metrics,
                           std::string request_id, StreamDriverOptions options)
    : source_(std::move(source)),
      encoder_(std::move(encoder)),
      metrics_(metrics),
      request_id_(std::move(request_id)),
      options_(options),
      last_write_(Clock::now()) {}

StreamDriver::~StreamDriver() { Release(); }

void StreamDriver::SetWakeup(std::function<void()> wake) {
  if (source_ != nullptr) source_->SetWakeup(std::move(wake));
}

void StreamDriver::Release() {
  if (source_ == nullptr) return;
  if (!finished_) {
    LOG(INFO) << request_id_ << " client went away; aborting";
    metrics_->CountClientDisconnect();
  }
  source_->SetWakeup(nullptr);
  source_->Abort();
  source_.reset();
}

StreamDriver::Step StreamDriver::Emit(const Writer& write, const std::string& text) {
  const bool ended = encoder_->ended();
  if (!text.empty()) {
    last_write_ = Clock::now();
    if (!write(text)) return Step::kClientGone;
  }
  if (!ended) return Step::kContinue;
  finished_ = true;
  return Step::kDone;
}

StreamDriver::Step StreamDriver::Pump(const Writer& write) {
  if (finished_ || source_ == nullptr) return Step::kDone;
  if (!started_) {
    started_ = true;
    return Emit(write, encoder_->Start(source_->usage()));
  }
  if (source_->done()) return Emit(write, encoder_->Finish(source_->usage()));
  std::vector<ChoiceEvent> events = source_->Poll(options_.poll_interval);
  if (events.empty()) {
    if (Clock::now() - last_write_ < options_.keep_alive_interval) return Step::kContinue;
    return Emit(write, encoder_->KeepAlive());
  }
  std::string out;
  for (const ChoiceEvent& e : events) {
    if (e.kind == ChoiceEventKind::kFinish && IsErrorFinish(e.finish_reason)) {
      const ApiError error = ApiError::FromStatus(e.error);
      LOG(WARNING) << request_id_ << " stream ended with error: " << error.message;
      out += encoder_->Error(error);
      if (encoder_->ended()) break;
      continue;
    }
    out += encoder_->Encode(e);
  }
  return Emit(write, out);
}

void ServeStream(ServerContext* ctx, std::unique_ptr<ChoiceEventSource> source,
                 std::unique_ptr<StreamEncoder> encoder, HttpResponse& res) {
  StreamDriverOptions options;
  options.poll_interval = std::chrono::milliseconds(0);
  res.stream = std::make_unique<StreamDriver>(std::move(source), std::move(encoder), &ctx->metrics,
                                              RequestIdHeader(res), options);
  res.set_header("Content-Type", "text/event-stream");
  res.set_header("Cache-Control", "no-cache");
}

}  // namespace loom
