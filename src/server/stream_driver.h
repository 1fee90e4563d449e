// StreamDriver: the one streaming loop of the server. It polls a ChoiceEventSource (a
// Generation), hands the events to a StreamEncoder (one per protocol), writes what the encoder
// returns, keeps an idle stream alive, notices the client going away (a failed write: the
// source is aborted, so the engine frees the request's blocks at its next step) and closes the
// stream once every choice finished or an error ended it.
//
//   Pump #1: encoder.Start                       (headers + the protocol's opening events)
//   Pump #k: source.Poll(poll_interval) → encoder.Encode / encoder.Error per event
//            nothing for keep_alive_interval → encoder.KeepAlive
//   source.done() → encoder.Finish → kDone
//
// The server's event loop pumps it (http_loop.h) when the source wakes it (SetWakeup) and on a
// timer for keep-alives, with a zero poll interval so a Pump never blocks the loop. Not
// thread-safe: one thread pumps, then releases.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/choice_event.h"
#include "server/http_message.h"
#include "server/server_context.h"
#include "server/server_metrics.h"
#include "server/stream_encoder.h"

namespace loom {

struct StreamDriverOptions {
  std::chrono::milliseconds poll_interval{50};         // longest wait for events per Pump
  std::chrono::milliseconds keep_alive_interval{500};  // idle time before a keep-alive
};

class StreamDriver : public HttpBodyStream {
 public:
  // Step (kContinue, kDone, kClientGone) and Writer are HttpBodyStream's.

  // `metrics` (counts disconnects) must outlive the driver; `request_id` is for the log.
  StreamDriver(std::unique_ptr<ChoiceEventSource> source, std::unique_ptr<StreamEncoder> encoder,
               ServerMetrics* metrics, std::string request_id, StreamDriverOptions options = {});
  ~StreamDriver() override;  // Release()

  // Passes `wake` to the source (ChoiceEventSource::SetWakeup).
  void SetWakeup(std::function<void()> wake) override;
  // One step of the stream (see the file comment); writes through `write` at most once.
  Step Pump(const Writer& write) override;
  // The HTTP side is done with the stream. If it did not complete, the client went away: logs
  // it, counts the disconnect and aborts the source. Destroys the source. Idempotent.
  void Release() override;
  // True once the encoder's last text was written.
  bool finished() const { return finished_; }

 private:
  Step Emit(const Writer& write, const std::string& text);

  std::unique_ptr<ChoiceEventSource> source_;
  std::unique_ptr<StreamEncoder> encoder_;
  ServerMetrics* metrics_;
  std::string request_id_;
  StreamDriverOptions options_;
  bool started_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_write_;
};

// Answers `res` with a text/event-stream body: a StreamDriver over `source` and `encoder` (never
// blocking in Poll) that the server's event loop pumps once the handler returned.
void ServeStream(ServerContext* ctx, std::unique_ptr<ChoiceEventSource> source,
                 std::unique_ptr<StreamEncoder> encoder, HttpResponse& res);

}  // namespace loom
