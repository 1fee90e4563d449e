// ServerMetrics: request / token counters and latency histograms for GET /metrics (Prometheus
// text exposition format) and /stats. Thread-safe (one mutex; updates are a few adds).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace loom {

// A cumulative Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends `name`_bucket / _sum / _count lines.
  void Render(const std::string& name, const std::string& help, std::string* out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative), last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  // One finished HTTP request on `route` with `status`.
  void CountRequest(const std::string& route, int status);
  void AddTokens(int64_t prompt_tokens, int64_t generation_tokens);
  void ObserveTtft(double seconds);
  void ObserveInterToken(double seconds);
  void ObserveEndToEnd(double seconds);
  void StreamStarted();
  void StreamFinished();
  void CountClientDisconnect();

  int64_t in_flight() const;
  // Prometheus text for everything above plus the engine snapshot.
  std::string RenderPrometheus(const EngineStats& engine) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (route, status) → count
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t in_flight_ = 0;
  uint64_t disconnects_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
};

}  // namespace loom
