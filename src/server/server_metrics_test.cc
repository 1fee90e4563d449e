#include "server/server_metrics.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

TEST(HistogramTest, CumulativeBuckets) {
  Histogram h({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.1);  // le is inclusive
  h.Observe(0.5);
  h.Observe(7);
  std::string out;
  h.Render("x", "help", &out);
  EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum 7.65\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE x histogram\n"), std::string::npos);
}

TEST(ServerMetricsTest, RendersCountersAndEngineGauges) {
  ServerMetrics m;
  m.CountRequest("/v1/completions", 200);
  m.CountRequest("/v1/completions", 200);
  m.CountRequest("/v1/completions", 400);
  m.AddTokens(10, 32);
  m.ObserveTtft(0.02);
  m.StreamStarted();
  EXPECT_EQ(m.in_flight(), 1);
  EngineStats e;
  e.active_rows = 3;
  e.pending_rows = 2;
  e.kv_blocks_total = 100;
  e.kv_blocks_used = 25;
  e.prefix_cache_query_tokens = 200;
  e.prefix_cache_hit_tokens = 50;
  e.preemptions = 4;
  std::string out = m.RenderPrometheus(e);
  EXPECT_NE(out.find("loom_requests_total{route=\"/v1/completions\",status=\"200\"} 2\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("loom_requests_total{route=\"/v1/completions\",status=\"400\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("loom_prompt_tokens_total 10\n"), std::string::npos);
  EXPECT_NE(out.find("loom_generation_tokens_total 32\n"), std::string::npos);
  EXPECT_NE(out.find("loom_num_requests_running 3\n"), std::string::npos);
  EXPECT_NE(out.find("loom_num_requests_waiting 2\n"), std::string::npos);
  EXPECT_NE(out.find("loom_kv_cache_usage_ratio 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("loom_prefix_cache_hit_rate 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("loom_preemptions_total 4\n"), std::string::npos);
  EXPECT_NE(out.find("loom_time_to_first_token_seconds_count 1\n"), std::string::npos);
  m.StreamFinished();
  EXPECT_EQ(m.in_flight(), 0);
}

}  // namespace
}  // namespace loom
