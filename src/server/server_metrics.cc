#include "server/server_metrics.h"

#include <cstdio>

#include "base/check.h"

namespace loom {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void Line(std::string* out, const std::string& name, const std::string& help,
          const std::string& type, double value) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  *out += name + " " + Num(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& help, std::string* out) const {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  *out += name + "_sum " + Num(sum_) + "\n";
  *out += name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
             20, 40, 80}),
      itl_({0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
            0.4, 0.5, 0.75, 1, 2.5}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1,  1.5, 2,   2.5, 5,
            10,   15,   20,  30,  40,  50,  60, 120, 240, 480, 960}) {}

void ServerMetrics::CountRequest(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void ServerMetrics::AddTokens(int64_t prompt_tokens, int64_t generation_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
}

void ServerMetrics::ObserveTtft(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.Observe(s);
}
void ServerMetrics::ObserveInterToken(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.Observe(s);
}
void ServerMetrics::ObserveEndToEnd(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.Observe(s);
}
void ServerMetrics::StreamStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++in_flight_;
}
void ServerMetrics::StreamFinished() {
  std::lock_guard<std::mutex> lock(mu_);
  --in_flight_;
  CHECK_GE(in_flight_, 0);
}
void ServerMetrics::CountClientDisconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
}
int64_t ServerMetrics::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

std::string ServerMetrics::RenderPrometheus(const EngineStats& e) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out +=
      "# HELP loom_requests_total HTTP requests by route and status.\n"
      "# TYPE loom_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += "loom_requests_total{route=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  Line(&out, "loom_prompt_tokens_total", "Prompt tokens of accepted requests.", "counter",
       static_cast<double>(prompt_tokens_));
  Line(&out, "loom_generation_tokens_total", "Tokens generated and returned.", "counter",
       static_cast<double>(generation_tokens_));
  Line(&out, "loom_client_disconnects_total", "Requests aborted because the client went away.",
       "counter", static_cast<double>(disconnects_));
  Line(&out, "loom_http_requests_in_flight", "Generation requests being served.", "gauge",
       static_cast<double>(in_flight_));
  ttft_.Render("loom_time_to_first_token_seconds", "Time to first token.", &out);
  itl_.Render("loom_inter_token_latency_seconds", "Time between output tokens.", &out);
  e2e_.Render("loom_e2e_request_latency_seconds", "End-to-end request latency.", &out);
  Line(&out, "loom_num_requests_running", "Requests in the running batch.", "gauge", e.active_rows);
  Line(&out, "loom_num_requests_waiting", "Requests queued for admission.", "gauge",
       e.pending_rows);
  Line(&out, "loom_kv_cache_usage_ratio", "Fraction of KV blocks in use (0-1).", "gauge",
       e.kv_blocks_total > 0 ? static_cast<double>(e.kv_blocks_used) / e.kv_blocks_total : 0.0);
  Line(&out, "loom_kv_blocks_used", "KV blocks referenced by running requests.", "gauge",
       e.kv_blocks_used);
  Line(&out, "loom_kv_blocks_total", "KV blocks in the pool.", "gauge", e.kv_blocks_total);
  Line(&out, "loom_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
       "counter", static_cast<double>(e.prefix_cache_query_tokens));
  Line(&out, "loom_prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
       "counter", static_cast<double>(e.prefix_cache_hit_tokens));
  Line(&out, "loom_prefix_cache_hit_rate", "Prefix-cache token hit rate since start (0-1).",
       "gauge",
       e.prefix_cache_query_tokens > 0
           ? static_cast<double>(e.prefix_cache_hit_tokens) / e.prefix_cache_query_tokens
           : 0.0);
  if (e.host_cache) {
    Line(&out, "loom_host_cache_blocks", "KV blocks kept in the --host-cache tier.", "gauge",
         static_cast<double>(e.host.entries));
    Line(&out, "loom_host_cache_bytes", "Bytes of KV kept in the --host-cache tier.", "gauge",
         static_cast<double>(e.host.bytes));
    Line(&out, "loom_host_cache_restored_tokens_total",
         "Prompt tokens whose KV was copied back up from the host tier.", "counter",
         static_cast<double>(e.host_restore_tokens));
    Line(&out, "loom_host_cache_evictions_total",
         "KV blocks evicted from the host tier for newer ones.", "counter",
         static_cast<double>(e.host.evictions));
  }
  if (e.ssd_cache) {
    Line(&out, "loom_ssd_cache_blocks", "KV blocks stored in the --ssd-cache directory.", "gauge",
         static_cast<double>(e.ssd.store.entries));
    Line(&out, "loom_ssd_cache_bytes", "Bytes of the --ssd-cache files.", "gauge",
         static_cast<double>(e.ssd.store.bytes));
    Line(&out, "loom_ssd_cache_restored_tokens_total",
         "Prompt tokens whose KV was read back from the SSD tier.", "counter",
         static_cast<double>(e.ssd_restore_tokens));
    Line(&out, "loom_ssd_cache_writes_total", "KV blocks written to the SSD tier.", "counter",
         static_cast<double>(e.ssd.store.writes));
    Line(&out, "loom_ssd_cache_demoted_blocks_total",
         "KV blocks queued for the SSD tier by idle demotion (their first spill was dropped).",
         "counter", static_cast<double>(e.ssd_demoted_blocks));
    Line(&out, "loom_ssd_cache_dropped_spills_total",
         "KV blocks not written to the SSD tier (full queue or full disk).", "counter",
         static_cast<double>(e.ssd.dropped_spills));
    Line(&out, "loom_ssd_cache_quarantined_total",
         "SSD tier files moved to quarantine (foreign, truncated or corrupt).", "counter",
         static_cast<double>(e.ssd.store.quarantined));
    Line(&out, "loom_ssd_cache_pending_spills", "KV blocks queued for the SSD tier's writer.",
         "gauge", static_cast<double>(e.ssd.pending_spills));
  }
  Line(&out, "loom_preemptions_total", "Requests preempted (recomputed later).", "counter",
       static_cast<double>(e.preemptions));
  Line(&out, "loom_engine_steps_total", "Engine steps run.", "counter",
       static_cast<double>(e.steps));
  Line(&out, "loom_spec_draft_tokens_total", "Speculative draft tokens verified.", "counter",
       static_cast<double>(e.draft_tokens));
  Line(&out, "loom_spec_accepted_tokens_total", "Speculative draft tokens accepted.", "counter",
       static_cast<double>(e.accepted_draft_tokens));
  return out;
}

}  // namespace loom
