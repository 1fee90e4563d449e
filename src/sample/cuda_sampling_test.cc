// Device draws (CudaBackend::SampleRows, backend/cuda/sample_rows.cu) against the host sampler
// (Sampler::SampleRow) on the same logits, seed and step:
//   (a) top_k = 1, a tiny top_p and min_p = 1 give the argmax;
//   (b) every device token lies in the host's kept set (widened by 1e-5 relative at its edges,
//       where the float rounding of p and of the sums may move a boundary), random logits and
//       random (T, top_k, top_p, min_p), vocabularies 32000 and 151936;
//   (c) device token == host token in >= 99% of those rows (the rate is printed);
//   (d) a chi-square test of 20000 draws (steps 0..19999) from one 64-token row against the
//       host's kept distribution;
//   (e) a row draws the same token alone, inside a batch of 200 others, and with the tasks
//       reversed (every vocabulary size the kernel plans differently: 1000, 32000, 128256,
//       151936, 262144);
//   (f) NaN rows and all -inf rows give kArgmaxNaN / kArgmaxNone, without disturbing the batch;
//   (g) logit edits (bias, penalties, min_tokens masking) on the device equal the host's bit for
//       bit, and edited rows then give SampleRow's tokens;
//   (h) LogprobRows on edited rows gives SampleRow's logprobs and top logprobs;
//   (i) grammar masks (MaskLogits) give the host's masked rows bit for bit, and masked rows then
//       give SampleRow's tokens under the same mask.
// DISABLED_Bench times the kernel (run with --gtest_also_run_disabled_tests). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_test_util.h"
#include "backend/cuda/sample_rows.cuh"
#include "sample/sampler.h"

namespace loom {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits of one row. kind 0: normal, sd 2; 1: LLM-like (normal sd 1.5 with 20 tokens lifted by
// 5..15); 2: nearly flat (sd 0.05); 3: kind 0 rounded to 0.25 (ties of p) with 10% masked (-inf).
std::vector<float> RandomRow(std::mt19937_64& rng, int vocab, int kind) {
  std::normal_distribution<float> normal(0.0f, kind == 2 ? 0.05f : kind == 1 ? 1.5f : 2.0f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& l : row) l = normal(rng);
  if (kind == 1) {
    std::uniform_real_distribution<float> lift(5.0f, 15.0f);
    for (int i = 0; i < 20; ++i) row[rng() % vocab] += lift(rng);
  }
  if (kind == 3) {
    for (float& l : row) l = std::round(l * 4.0f) / 4.0f;
    for (float& l : row) {
      if (rng() % 10 == 0) l = -kInf;
    }
  }
  return row;
}

DrawParams RandomDraw(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  DrawParams d;
  d.temperature = 0.2f + 1.3f * u(rng);
  const uint64_t k = rng() % 10;
  d.top_k = k < 5   ? 0
            : k < 9 ? 2 + static_cast<int>(rng() % 199)
                    : 1000 + static_cast<int>(rng() % 4000);
  d.top_p = rng() % 5 < 2 ? 1.0f : 0.3f + 0.69f * u(rng);
  d.min_p = rng() % 5 < 3 ? 0.0f : 0.001f + 0.3f * u(rng);
  d.seed = rng();
  d.step = rng() % 1000;
  return d;
}

// SampleRow's token for `row` under `d` (kArgmaxNaN / kArgmaxNone for its errors).
int32_t HostDraw(Sampler& sampler, std::vector<float> row, const DrawParams& d) {
  SamplingParams params;
  params.temperature = d.temperature;
  params.top_k = d.top_k;
  params.top_p = d.top_p;
  params.min_p = d.min_p;
  const std::vector<TokenId> output(d.step, 0);  // SampleRow's step is output.size()
  SampleContext ctx;
  ctx.params = &params;
  ctx.output = output;
  ctx.seed = d.seed;
  StatusOr<SampleResult> r = sampler.SampleRow(row, ctx);
  if (r.ok()) return r->token;
  return r.status().message().find("NaN") != std::string::npos ? cuda::kArgmaxNaN
                                                               : cuda::kArgmaxNone;
}

// The host sampler's kept set for `row` under `d` (SampleRow's steps: float p, double sums),
// widened at each edge by `slack` (relative): tokens whose p is within slack of the last kept p,
// the top-p prefix reaching top_p * (1 + slack) of the mass, min-p's cut lowered by slack.
std::vector<char> KeptSet(const std::vector<float>& row, const DrawParams& d, double slack) {
  const float mx = *std::max_element(row.begin(), row.end());
  const float inv_t = 1.0f / d.temperature;
  struct C {
    float p;
    int id;
  };
  std::vector<C> c;
  for (int i = 0; i < static_cast<int>(row.size()); ++i) {
    if (row[i] != -kInf) c.push_back({std::exp((row[i] - mx) * inv_t), i});
  }
  std::sort(c.begin(), c.end(),
            [](const C& a, const C& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
  size_t n = c.size();
  if (d.top_k > 0 && static_cast<size_t>(d.top_k) < n) n = d.top_k;
  if (d.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < n; ++i) mass += c[i].p;
    const double target = std::min(mass, d.top_p * mass * (1.0 + slack));
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += c[i].p;
      if (cum >= target) {
        n = i + 1;
        break;
      }
    }
  }
  const double edge = c[n - 1].p * (1.0 - slack);
  while (n < c.size() && c[n].p >= edge) ++n;
  const double cut = d.min_p * c[0].p * (1.0 - slack);
  std::vector<char> kept(row.size(), 0);
  for (size_t i = 0; i < n; ++i) kept[c[i].id] = c[i].p >= cut ? 1 : 0;
  return kept;
}

class CudaSamplingTest : public cuda_test::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(gpu_->has_sample_rows(262144));
  }

  // Device draws for tasks (rows[i], params[i]) over logits x [m, vocab] (host, row-major).
  std::vector<int32_t> Draw(const std::vector<float>& x, int vocab,
                            const std::vector<int32_t>& rows,
                            const std::vector<DrawParams>& params) {
    const int64_t m = static_cast<int64_t>(x.size()) / vocab;
    Tensor dev = gpu_->Alloc(DType::kF32, Shape{m, vocab});
    gpu_->CopyFromHost(x.data(), dev);
    return DrawOn(dev, rows, params);
  }
  std::vector<int32_t> DrawOn(const Tensor& dev, const std::vector<int32_t>& rows,
                              const std::vector<DrawParams>& params) {
    const int64_t n = static_cast<int64_t>(rows.size());
    Tensor out = gpu_->Alloc(DType::kI32, Shape{n});
    std::vector<int32_t> poison(rows.size(), 0x7f7f7f7f);
    gpu_->CopyFromHost(poison.data(), out);
    gpu_->SampleRows(dev, rows, params, out);
    std::vector<int32_t> got(rows.size());
    gpu_->CopyToHost(out, got.data());
    return got;
  }
};

// Runs f(i) for i in [0, n) on the machine's cores (host sampling of big rows is slow).
template <typename F>
void ParallelFor(int n, F f) {
  const int threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = t; i < n; i += threads) f(i, t);
    });
  }
  for (std::thread& th : pool) th.join();
}

// (a)
TEST_F(CudaSamplingTest, TopOneTinyTopPAndFullMinPTakeTheArgmax) {
  std::mt19937_64 rng(1);
  for (int vocab : {1000, 32000, 151936}) {
    std::vector<float> x;
    std::vector<int32_t> rows, want;
    std::vector<DrawParams> params;
    for (int r = 0; r < 30; ++r) {
      const std::vector<float> row = RandomRow(rng, vocab, r % 3);
      want.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      x.insert(x.end(), row.begin(), row.end());
      DrawParams d = RandomDraw(rng);
      if (r % 3 == 0) d.top_k = 1;
      if (r % 3 == 1) d.top_p = 1e-7f;
      if (r % 3 == 2) d.min_p = 1.0f;
      rows.push_back(r);
      params.push_back(d);
    }
    const std::vector<int32_t> got = Draw(x, vocab, rows, params);
    for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(got[r], want[r]) << vocab << " row " << r;
  }
}

// (b) and (c)
TEST_F(CudaSamplingTest, DrawsLieInTheHostKeptSetAndMatchTheHostToken) {
  std::mt19937_64 rng(2);
  int64_t total = 0, same = 0;
  for (auto [vocab, num_rows] : {std::pair{32000, 2048}, std::pair{151936, 1024}}) {
    constexpr int kBatch = 256;
    int64_t vocab_same = 0;
    for (int b0 = 0; b0 < num_rows; b0 += kBatch) {
      std::vector<float> x;
      std::vector<std::vector<float>> rows_host;
      std::vector<int32_t> rows;
      std::vector<DrawParams> params;
      for (int r = 0; r < kBatch; ++r) {
        rows_host.push_back(RandomRow(rng, vocab, r % 4));
        x.insert(x.end(), rows_host.back().begin(), rows_host.back().end());
        rows.push_back(r);
        params.push_back(RandomDraw(rng));
      }
      const std::vector<int32_t> got = Draw(x, vocab, rows, params);
      std::vector<int32_t> want(kBatch);
      std::vector<char> in_kept(kBatch);
      std::vector<Sampler> samplers;
      for (int t = 0; t < 16; ++t) samplers.emplace_back(vocab);
      ParallelFor(kBatch, [&](int r, int t) {
        want[r] = HostDraw(samplers[t], rows_host[r], params[r]);
        const std::vector<char> kept = KeptSet(rows_host[r], params[r], 1e-5);
        in_kept[r] = got[r] >= 0 && got[r] < vocab && kept[got[r]] != 0;
      });
      for (int r = 0; r < kBatch; ++r) {
        const DrawParams& d = params[r];
        EXPECT_TRUE(in_kept[r]) << "vocab " << vocab << " row " << b0 + r << " kind " << r % 4
                                << ": device " << got[r] << ", host " << want[r] << "; T "
                                << d.temperature << " top_k " << d.top_k << " top_p " << d.top_p
                                << " min_p " << d.min_p;
        vocab_same += got[r] == want[r] ? 1 : 0;
      }
    }
    std::printf("  vocab %d: device == host token in %lld of %d rows (%.2f%%)\n", vocab,
                static_cast<long long>(vocab_same), num_rows, 100.0 * vocab_same / num_rows);
    total += num_rows;
    same += vocab_same;
  }
  const double rate = static_cast<double>(same) / static_cast<double>(total);
  std::printf("  agreement: %lld of %lld rows (%.3f%%)\n", static_cast<long long>(same),
              static_cast<long long>(total), 100.0 * rate);
  EXPECT_GE(rate, 0.99);
}

// (d)
TEST_F(CudaSamplingTest, DrawFrequenciesFollowTheKeptDistribution) {
  constexpr int kVocab = 64;
  constexpr int kDraws = 20000;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> row(kVocab);
  for (float& l : row) l = normal(rng);
  row[5] = -kInf;
  struct Setting {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
  };
  for (const Setting& s : {Setting{1.0f, 0, 1.0f, 0.0f}, Setting{0.9f, 40, 0.95f, 0.01f},
                           Setting{0.6f, 0, 0.8f, 0.0f}, Setting{1.3f, 20, 1.0f, 0.05f}}) {
    SCOPED_TRACE(testing::Message() << "T " << s.temperature << " top_k " << s.top_k << " top_p "
                                    << s.top_p << " min_p " << s.min_p);
    std::vector<int32_t> rows(kDraws, 0);
    std::vector<DrawParams> params(kDraws);
    for (int i = 0; i < kDraws; ++i) {
      params[i] = DrawParams{s.temperature, s.top_k, s.top_p, s.min_p, 12345, uint64_t(i)};
    }
    const std::vector<int32_t> got = Draw(row, kVocab, rows, params);
    // The host's kept distribution, exactly.
    const std::vector<char> kept = KeptSet(row, params[0], 0.0);
    const float mx = *std::max_element(row.begin(), row.end());
    std::vector<double> q(kVocab, 0.0);
    double mass = 0;
    for (int i = 0; i < kVocab; ++i) {
      if (kept[i]) mass += q[i] = std::exp((row[i] - mx) * (1.0f / s.temperature));
    }
    std::vector<int> count(kVocab, 0);
    Sampler sampler(kVocab);
    int same = 0;
    for (int i = 0; i < kDraws; ++i) {
      ASSERT_TRUE(got[i] >= 0 && got[i] < kVocab && kept[got[i]]) << "draw " << i << ": " << got[i];
      ++count[got[i]];
      same += got[i] == HostDraw(sampler, row, params[i]) ? 1 : 0;
    }
    // Chi-square over the kept tokens, those expecting < 5 draws pooled.
    double chi2 = 0, pooled_e = 0, pooled_o = 0;
    int cells = 0;
    for (int i = 0; i < kVocab; ++i) {
      if (!kept[i]) continue;
      const double e = kDraws * q[i] / mass;
      if (e < 5) {
        pooled_e += e;
        pooled_o += count[i];
        continue;
      }
      chi2 += (count[i] - e) * (count[i] - e) / e;
      ++cells;
    }
    if (pooled_e >= 5) {  // else too few draws expected there for the approximation
      chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
      ++cells;
    }
    // Wilson-Hilferty: the chi-square quantile at p = 1e-3 (z = 3.09) for cells - 1 degrees.
    const double df = std::max(1, cells - 1);
    const double h = 2.0 / (9.0 * df);
    const double critical = df * std::pow(1.0 - h + 3.09 * std::sqrt(h), 3.0);
    std::printf(
        "  T %.1f top_k %d top_p %.2f min_p %.2f: chi2 %.1f, %d cells, critical %.1f; "
        "device == host in %d of %d draws\n",
        s.temperature, s.top_k, s.top_p, s.min_p, chi2, cells, critical, same, kDraws);
    EXPECT_GT(cells, 1);
    EXPECT_LT(chi2, critical);
    EXPECT_GE(same, kDraws * 999 / 1000);
  }
}

// (e) and (f)
TEST_F(CudaSamplingTest, ARowDrawsTheSameAloneAndInABatch) {
  std::mt19937_64 rng(4);
  for (int vocab : {1000, 1001, 32000, 128256, 151936, 262144}) {
    SCOPED_TRACE(testing::Message() << "vocab " << vocab);
    constexpr int kRows = 201;
    std::vector<float> x;
    std::vector<int32_t> rows;
    std::vector<DrawParams> params;
    for (int r = 0; r < kRows; ++r) {
      std::vector<float> row = RandomRow(rng, vocab, r % 4);
      if (r == 7) row[vocab / 2] = std::numeric_limits<float>::quiet_NaN();
      if (r == 8) std::fill(row.begin(), row.end(), -kInf);
      if (r == 9) {
        std::fill(row.begin(), row.end(), -kInf);
        row[vocab - 1] = -1e30f;  // the one unmasked token
      }
      x.insert(x.end(), row.begin(), row.end());
      rows.push_back(r);
      params.push_back(RandomDraw(rng));
    }
    Tensor dev = gpu_->Alloc(DType::kF32, Shape{kRows, vocab});
    gpu_->CopyFromHost(x.data(), dev);
    const std::vector<int32_t> batch = DrawOn(dev, rows, params);
    EXPECT_EQ(batch[7], cuda::kArgmaxNaN);
    EXPECT_EQ(batch[8], cuda::kArgmaxNone);
    EXPECT_EQ(batch[9], vocab - 1);
    for (int r = 0; r < kRows; ++r) {
      if (r >= 7 && r <= 9) continue;
      EXPECT_TRUE(batch[r] >= 0 && batch[r] < vocab && x[int64_t{r} * vocab + batch[r]] != -kInf)
          << "row " << r << ": " << batch[r];
    }
    for (int r : {0, 3, 7, 8, 9, 100, 200}) {
      EXPECT_EQ(DrawOn(dev, {r}, {params[r]}), std::vector<int32_t>{batch[r]}) << "row " << r;
    }
    std::vector<int32_t> rev_rows(rows.rbegin(), rows.rend());
    std::vector<DrawParams> rev_params(params.rbegin(), params.rend());
    std::vector<int32_t> rev = DrawOn(dev, rev_rows, rev_params);
    std::reverse(rev.begin(), rev.end());
    EXPECT_EQ(rev, batch);
    EXPECT_EQ(DrawOn(dev, rows, params), batch);  // deterministic
  }
}

struct TimelineRow {
  char name[48] = {};
  std::vector<double> us;  // [kNumStamps]: us[k] = point k - point k-1 (us[0] unused)
  double total = 0;
};

// One timed launch (SampleRowsTuning::stamps): the gaps between task 0's recorded points.
TimelineRow Timeline(const Tensor& x, int vocab, int n, const Tensor& tasks, const Tensor& out,
                     cudaStream_t stream) {
  void* raw = nullptr;
  CUDA_CHECK(cudaMalloc(&raw, cuda::kNumStamps * sizeof(unsigned long long)));
  auto* stamps = static_cast<unsigned long long*>(raw);
  CUDA_CHECK(cudaMemsetAsync(stamps, 0, cuda::kNumStamps * sizeof(unsigned long long), stream));
  cuda::SampleRowsTuning tuning;
  tuning.stamps = stamps;
  cuda::LaunchSampleRows(x.data_as<const float>(), vocab,
                         static_cast<const cuda::DrawTask*>(tasks.data()), n,
                         out.data_as<int32_t>(), stream, tuning);
  std::vector<unsigned long long> t(cuda::kNumStamps);
  CUDA_CHECK(
      cudaMemcpyAsync(t.data(), stamps, t.size() * sizeof(t[0]), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaFree(stamps));
  TimelineRow row;
  row.us.assign(t.size(), 0.0);
  unsigned long long last = t[0];
  for (size_t k = 1; k < t.size(); ++k) {
    if (t[k] == 0) continue;  // a point this launch did not pass (no select)
    row.us[k] = (t[k] - last) / 1000.0;
    last = t[k];
  }
  row.total = (last - t[0]) / 1000.0;
  return row;
}

// (g) Logit edits (bias, penalties, min_tokens masking) applied on the device give the host's
// edited rows bit for bit; the device argmax of an edited greedy row is SampleRow's token for the
// raw row, and an edited draw matches it as plain draws do (>= 99%, (c)).
TEST_F(CudaSamplingTest, EditedRowsGiveTheHostSamplersTokens) {
  std::mt19937_64 rng(9);
  const int vocab = 128256;
  const std::vector<TokenId> eos = {128001, 128009};
  Sampler sampler(vocab);
  std::vector<float> x;
  std::vector<std::vector<float>> raw;
  std::vector<SamplingParams> params;
  std::vector<std::vector<TokenId>> prompts, outputs;
  std::vector<LogitEdit> edits;
  const int rows = 48;
  for (int r = 0; r < rows; ++r) {
    raw.push_back(RandomRow(rng, vocab, r % 4));
    x.insert(x.end(), raw.back().begin(), raw.back().end());
    SamplingParams p;
    p.temperature = r % 2 == 0 ? 0.0f : 0.8f;
    p.seed = 50 + r;
    std::vector<TokenId> prompt, output;
    // Tokens near the row's top, so the edits change the choice.
    std::vector<int> order(static_cast<size_t>(vocab));
    for (int v = 0; v < vocab; ++v) order[v] = v;
    std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                      [&](int a, int b) { return raw.back()[a] > raw.back()[b]; });
    for (int i = 0; i < 200; ++i) prompt.push_back(static_cast<TokenId>(rng() % vocab));
    for (int i = 0; i < 12; ++i) output.push_back(order[rng() % 20]);
    if (r % 4 == 0) p.logit_bias = {{order[0], -100.0f}, {order[5], 3.0f}, {7, 100.0f}};
    if (r % 4 == 1) p.repetition_penalty = 1.8f;
    if (r % 4 == 2) {
      p.frequency_penalty = 1.5f;
      p.presence_penalty = 0.5f;
    }
    if (r % 4 == 3) {
      p.min_tokens = 20;
      p.stop_token_ids = {order[0], order[1]};
    }
    prompts.push_back(prompt);
    outputs.push_back(output);
    params.push_back(p);
  }
  for (int r = 0; r < rows; ++r) {
    const SampleContext ctx{&params[r], prompts[r], outputs[r], static_cast<uint64_t>(50 + r), eos};
    std::vector<LogitEdit> row_edits;
    ASSERT_TRUE(BuildLogitEdits(ctx, vocab, &row_edits)) << r;
    ASSERT_FALSE(row_edits.empty()) << r;
    for (LogitEdit e : row_edits) {
      e.row = r;
      edits.push_back(e);
    }
  }
  Tensor dev = gpu_->Alloc(DType::kF32, Shape{rows, vocab});
  gpu_->CopyFromHost(x.data(), dev);
  gpu_->EditLogits(dev, edits);
  std::vector<float> edited(x.size());
  gpu_->CopyToHost(dev, edited.data());
  std::vector<float> want = x;
  for (const LogitEdit& e : edits) {
    float& l = want[static_cast<size_t>(e.row) * vocab + e.token];
    l = ApplyLogitEdit(e, l);
  }
  ASSERT_EQ(std::memcmp(edited.data(), want.data(), want.size() * sizeof(float)), 0);

  Tensor ids = gpu_->Alloc(DType::kI32, Shape{rows});
  gpu_->ArgmaxRows(dev, ids);
  std::vector<int32_t> argmax(rows);
  gpu_->CopyToHost(ids, argmax.data());
  std::vector<int32_t> draw_rows;
  std::vector<DrawParams> draws;
  for (int r = 1; r < rows; r += 2) {
    draw_rows.push_back(r);
    draws.push_back(DrawParams{params[r].temperature, 0, 1.0f, 0.0f, static_cast<uint64_t>(50 + r),
                               static_cast<uint64_t>(outputs[r].size())});
  }
  const std::vector<int32_t> drawn = DrawOn(dev, draw_rows, draws);
  int same = 0, changed = 0;
  for (int r = 0; r < rows; ++r) {
    const SampleContext ctx{&params[r], prompts[r], outputs[r], static_cast<uint64_t>(50 + r), eos};
    std::vector<float> row = raw[r];
    StatusOr<SampleResult> host = sampler.SampleRow(row, ctx);
    ASSERT_TRUE(host.ok()) << r;
    const int32_t unedited =
        static_cast<int32_t>(std::max_element(raw[r].begin(), raw[r].end()) - raw[r].begin());
    if (r % 2 == 0) {
      EXPECT_EQ(argmax[r], host->token) << "greedy row " << r;
      changed += argmax[r] != unedited;
    } else {
      same += drawn[static_cast<size_t>(r / 2)] == host->token;
    }
  }
  EXPECT_GE(same, rows / 2 - 1);  // 24 draws: >= 99% means at most one differs
  EXPECT_GE(changed, 6);          // the edits moved most greedy choices
}

// (i') Rows passing one mask span (grammar rows in one state: GrammarState hands them the shared
// cache's storage) share its upload; each row still gets exactly its own mask, interleaved with
// rows of other masks and with unmasked rows.
TEST_F(CudaSamplingTest, RowsSharingAMaskSpanGetThatMask) {
  std::mt19937_64 rng(22);
  const int vocab = 4099;  // not a multiple of 32
  const int64_t words = (vocab + 31) / 32;
  const int rows = 9;
  std::vector<float> x;
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> row = RandomRow(rng, vocab, r % 4);
    x.insert(x.end(), row.begin(), row.end());
  }
  std::vector<std::vector<uint32_t>> distinct(3, std::vector<uint32_t>(words, 0));
  for (int k = 0; k < 3; ++k) {
    for (int v = 0; v < vocab; ++v) {
      if (rng() % (2 + 3 * k) == 0) distinct[k][v / 32] |= 1u << (v % 32);
    }
  }
  // Row 4 is free; rows 0, 2, 5, 8 share mask 0's span, 1 and 7 mask 1's, 3 and 6 mask 2's.
  const std::vector<int32_t> masked = {0, 1, 2, 3, 5, 6, 7, 8};
  const std::vector<int> which = {0, 1, 0, 2, 0, 2, 1, 0};
  std::vector<std::span<const uint32_t>> spans;
  for (int k : which) spans.push_back(distinct[k]);
  Tensor dev = gpu_->Alloc(DType::kF32, Shape{rows, vocab});
  gpu_->CopyFromHost(x.data(), dev);
  gpu_->MaskLogits(dev, masked, spans);
  std::vector<float> got(x.size());
  gpu_->CopyToHost(dev, got.data());
  std::vector<float> want = x;
  for (size_t i = 0; i < masked.size(); ++i) {
    const std::vector<uint32_t>& m = distinct[which[i]];
    for (int v = 0; v < vocab; ++v) {
      if (((m[v / 32] >> (v % 32)) & 1) == 0) {
        want[static_cast<size_t>(masked[i]) * vocab + v] = -kInf;
      }
    }
  }
  ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

// (i) Grammar masks on the device: every row listed (not the others) has exactly the logits its
// mask clears at -inf, ids past the mask words included; the argmax of a masked greedy row and a
// masked draw match SampleRow with SampleContext::allowed on the raw row.
TEST_F(CudaSamplingTest, MaskedRowsGiveTheHostSamplersTokens) {
  std::mt19937_64 rng(21);
  const int vocab = 151936;
  const int64_t words = (151669 + 31) / 32;  // a tokenizer's mask: shorter than the model's rows
  const int rows = 24;
  std::vector<float> x;
  std::vector<std::vector<float>> raw;
  for (int r = 0; r < rows; ++r) {
    raw.push_back(RandomRow(rng, vocab, r % 4));
    x.insert(x.end(), raw.back().begin(), raw.back().end());
  }
  // Rows 0, 2, 3, 5, ... masked (every third free); masks from dense to a handful of ids.
  std::vector<int32_t> masked;
  std::vector<std::vector<uint32_t>> masks(rows);
  std::vector<std::span<const uint32_t>> spans;
  for (int r = 0; r < rows; ++r) {
    if (r % 3 == 1) continue;
    masked.push_back(r);
    std::vector<uint32_t>& m = masks[r];
    m.assign(static_cast<size_t>(words), 0);
    const int keep_one_in = 1 << (r % 8);  // 1, 2, 4, ... 128
    for (int v = 0; v < 32 * words; ++v) {
      if (rng() % keep_one_in == 0) m[v / 32] |= 1u << (v % 32);
    }
    spans.push_back(m);
  }
  Tensor dev = gpu_->Alloc(DType::kF32, Shape{rows, vocab});
  gpu_->CopyFromHost(x.data(), dev);
  gpu_->MaskLogits(dev, masked, spans);
  std::vector<float> got(x.size());
  gpu_->CopyToHost(dev, got.data());
  std::vector<float> want = x;
  for (int32_t r : masked) {
    for (int v = 0; v < vocab; ++v) {
      const bool allowed = v < 32 * words && ((masks[r][v / 32] >> (v % 32)) & 1) != 0;
      if (!allowed) want[static_cast<size_t>(r) * vocab + v] = -kInf;
    }
  }
  ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

  Tensor ids = gpu_->Alloc(DType::kI32, Shape{rows});
  gpu_->ArgmaxRows(dev, ids);
  std::vector<int32_t> argmax(rows);
  gpu_->CopyToHost(ids, argmax.data());
  std::vector<int32_t> draw_rows;
  std::vector<DrawParams> draws;
  for (int r = 0; r < rows; ++r) {
    draw_rows.push_back(r);
    draws.push_back(DrawParams{0.9f, 0, 0.95f, 0.0f, static_cast<uint64_t>(300 + r), 3});
  }
  const std::vector<int32_t> drawn = DrawOn(dev, draw_rows, draws);
  Sampler sampler(vocab);
  int same = 0;
  for (int r = 0; r < rows; ++r) {
    SamplingParams greedy;
    greedy.temperature = 0;
    SamplingParams draw;
    draw.temperature = 0.9f;
    draw.top_p = 0.95f;
    const std::vector<TokenId> output(3, 0);
    SampleContext ctx{&greedy, {}, output, static_cast<uint64_t>(300 + r), {}};
    ctx.allowed = masks[r];
    std::vector<float> row = raw[r];
    StatusOr<SampleResult> host = sampler.SampleRow(row, ctx);
    ASSERT_TRUE(host.ok()) << r;
    EXPECT_EQ(argmax[r], host->token) << "greedy row " << r;
    ctx.params = &draw;
    row = raw[r];
    host = sampler.SampleRow(row, ctx);
    ASSERT_TRUE(host.ok()) << r;
    same += drawn[static_cast<size_t>(r)] == host->token;
  }
  EXPECT_GE(same, rows - 1);  // >= 99% as plain draws ((c))
}

// (h) LogprobRows on edited rows gives SampleRow's logprobs: the chosen token's (a greedy row's
// argmax and a drawn row's token, both taken on the device) and the top 0 / 1 / 5 / 20 with
// their ids in the Sampler's order (ties of kind-3 rows by lower id), within 1e-5 absolute
// (log_z's f64 sum runs in another order; a logit near 20 has a 2e-6 ulp); vocabularies 1000,
// 32000, 128256 and 151936, rows in one launch with their tasks in reverse order, and ids that are
// not tokens give logprob 0.
TEST_F(CudaSamplingTest, LogprobRowsGiveTheHostSamplersLogprobs) {
  ASSERT_TRUE(gpu_->has_logprob_rows());
  std::mt19937_64 rng(13);
  for (const int vocab : {1000, 32000, 128256, 151936}) {
    Sampler sampler(vocab);
    const int rows = 16;
    std::vector<float> x;
    std::vector<std::vector<float>> edited;
    std::vector<SamplingParams> params;
    std::vector<LogitEdit> edits;
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row = RandomRow(rng, vocab, r % 4);
      x.insert(x.end(), row.begin(), row.end());
      SamplingParams p;
      p.temperature = r % 2 == 0 ? 0.0f : 0.9f;
      p.num_logprobs = (r / 2) % 4 == 0 ? 0 : (r / 2) % 4 == 1 ? 1 : (r / 2) % 4 == 2 ? 5 : 20;
      if (r % 3 == 0) p.logit_bias = {{3, 4.0f}, {static_cast<TokenId>(vocab - 1), 9.0f}};
      if (r % 3 == 1) p.frequency_penalty = 0.7f;
      const std::vector<TokenId> output = {3, 5, 5, static_cast<TokenId>(vocab / 2)};
      const SampleContext ctx{&p, {}, output, static_cast<uint64_t>(r), {}};
      ASSERT_TRUE(LogprobsOnEditedRow(p, static_cast<int>(output.size()))) << r;
      std::vector<LogitEdit> row_edits;
      ASSERT_TRUE(BuildLogitEdits(ctx, vocab, &row_edits)) << r;
      for (LogitEdit e : row_edits) {
        e.row = r;
        edits.push_back(e);
        row[e.token] = ApplyLogitEdit(e, row[e.token]);
      }
      edited.push_back(row);
      params.push_back(p);
    }
    Tensor dev = gpu_->Alloc(DType::kF32, Shape{rows, vocab});
    gpu_->CopyFromHost(x.data(), dev);
    gpu_->EditLogits(dev, edits);
    // ids = [argmax of every row | draws of the odd rows | a kArgmaxNone code]
    const int num_draws = rows / 2;
    Tensor ids = gpu_->Alloc(DType::kI32, Shape{rows + num_draws + 1});
    gpu_->ArgmaxRows(dev, ids.Slice(0, rows));
    std::vector<int32_t> draw_rows;
    std::vector<DrawParams> draws;
    for (int r = 1; r < rows; r += 2) {
      draw_rows.push_back(r);
      draws.push_back(DrawParams{0.9f, 0, 1.0f, 0.0f, static_cast<uint64_t>(r), 4});
    }
    gpu_->SampleRows(dev, draw_rows, draws, ids.Slice(rows, num_draws));
    const int32_t none = Backend::kArgmaxNone;
    gpu_->CopyFromHost(&none, ids.Slice(rows + num_draws, 1));
    std::vector<int32_t> host_ids(static_cast<size_t>(rows + num_draws + 1));
    gpu_->CopyToHost(ids, host_ids.data());
    // Tasks in reverse order; the last one points at the kArgmaxNone code.
    std::vector<Backend::LogprobRow> tasks;
    for (int r = rows - 1; r >= 0; --r) {
      tasks.push_back({r, r % 2 == 0 ? r : rows + r / 2});
    }
    tasks.push_back({0, rows + num_draws});
    const int top_k = Backend::kMaxTopLogprobs;
    Tensor out = gpu_->Alloc(DType::kF32,
                             Shape{static_cast<int64_t>(tasks.size()), Backend::kLogprobStride});
    gpu_->LogprobRows(dev, tasks, ids, top_k, out);
    std::vector<float> got(tasks.size() * Backend::kLogprobStride);
    gpu_->CopyToHost(out, got.data());
    for (size_t j = 0; j + 1 < tasks.size(); ++j) {
      const int r = tasks[j].row;
      const float* v = got.data() + j * Backend::kLogprobStride;
      const int32_t token = host_ids[static_cast<size_t>(tasks[j].id_index)];
      ASSERT_GE(token, 0) << "vocab " << vocab << " row " << r;
      // The host's logprobs from the edited row (no edits left to apply), its top 20.
      SamplingParams hp;
      hp.temperature = 0.0f;
      hp.num_logprobs = top_k;
      const SampleContext ctx{&hp, {}, {}, 0, {}};
      std::vector<float> row = edited[static_cast<size_t>(r)];
      StatusOr<SampleResult> host = sampler.SampleRow(row, ctx);
      ASSERT_TRUE(host.ok()) << r;
      // The chosen token's logprob against the host's log_z (its greedy token's logit less its
      // logprob).
      const float log_z = edited[r][host->token] - host->logprob;
      EXPECT_NEAR(v[0], edited[r][token] - log_z, 1e-5f)
          << "vocab " << vocab << " row " << r << " token " << token;
      for (int i = 0; i < top_k; ++i) {
        EXPECT_EQ(static_cast<int32_t>(v[1 + 2 * i]), host->top_logprobs[i].token)
            << "vocab " << vocab << " row " << r << " rank " << i;
        EXPECT_NEAR(v[2 + 2 * i], host->top_logprobs[i].logprob, 1e-5f)
            << "vocab " << vocab << " row " << r << " rank " << i;
      }
    }
    EXPECT_EQ(got[(tasks.size() - 1) * Backend::kLogprobStride], 0.0f) << "a code, not a token";
  }
}

// Kernel time vs the copy it replaces. Not a test: prints a table (docs/benchmarks.md).
TEST_F(CudaSamplingTest, DISABLED_Bench) {
  std::mt19937_64 rng(5);
  cudaStream_t stream = gpu_->stream();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  auto time_us = [&](auto&& launch) {
    launch();  // warm-up
    CUDA_CHECK(cudaStreamSynchronize(stream));
    constexpr int kIters = 20;
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < kIters; ++i) launch();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return 1000.0 * ms / kIters;
  };
  struct Setting {
    const char* name;
    DrawParams params;
  };
  const Setting settings[] = {
      {"T.8", DrawParams{0.8f, 0, 1.0f, 0.0f, 0, 3}},
      {"T.8 p.9", DrawParams{0.8f, 0, 0.9f, 0.0f, 0, 3}},
      {"T.8 k50", DrawParams{0.8f, 50, 1.0f, 0.0f, 0, 3}},
      {"T.8 k50 p.9 m.05", DrawParams{0.8f, 50, 0.9f, 0.05f, 0, 3}},
  };
  std::vector<TimelineRow> timelines;
  std::printf(
      "  %-7s %4s %-8s %-17s %8s %8s %8s %8s %8s   (us; chunk 8k/16k/32k: logits a block "
      "holds; copy: the rows to pinned host memory)\n",
      "vocab", "rows", "logits", "params", "8k", "16k", "32k", "argmax", "copy");
  for (int vocab : {32000, 128256, 151936, 262144}) {
    for (int n : {1, 64, 256}) {
      for (int kind : {1, 2}) {  // LLM-like, nearly flat (the histograms' worst case)
        std::vector<float> x;
        for (int r = 0; r < n; ++r) {
          const std::vector<float> row = RandomRow(rng, vocab, kind);
          x.insert(x.end(), row.begin(), row.end());
        }
        Tensor dev = gpu_->Alloc(DType::kF32, Shape{n, vocab});
        gpu_->CopyFromHost(x.data(), dev);
        Tensor out = gpu_->Alloc(DType::kI32, Shape{n});
        const double argmax = time_us([&] { gpu_->ArgmaxRows(dev, out); });
        std::shared_ptr<Buffer> pinned = gpu_->AllocHostStaging(dev.nbytes());
        const double copy = time_us([&] {
          CUDA_CHECK(cudaMemcpyAsync(pinned->data(), dev.data(), dev.nbytes(),
                                     cudaMemcpyDeviceToHost, stream));
        });
        for (const Setting& setting : settings) {
          if (vocab != 128256 && setting.params.top_p == 1.0f) continue;  // top-p only there
          if (vocab != 128256 && setting.params.top_k != 0) continue;
          std::vector<cuda::DrawTask> tasks(n);
          for (int r = 0; r < n; ++r) {
            tasks[r].params = setting.params;
            tasks[r].params.seed = static_cast<uint64_t>(r);
            tasks[r].row = r;
          }
          Tensor host_tasks =
              HostTensor(DType::kI32, Shape{int64_t(n * sizeof(cuda::DrawTask) / 4)});
          std::memcpy(host_tasks.data(), tasks.data(), n * sizeof(cuda::DrawTask));
          const Tensor dev_tasks = gpu_->Upload(host_tasks);
          double us[3];
          std::vector<int32_t> first, got(n);
          int differ = 0, col = 0;
          for (int chunk : {8192, 16384, 32768}) {
            cuda::SampleRowsTuning tuning;
            tuning.chunk_target = chunk;
            us[col++] = time_us([&] {
              cuda::LaunchSampleRows(dev.data_as<const float>(), vocab,
                                     static_cast<const cuda::DrawTask*>(dev_tasks.data()), n,
                                     out.data_as<int32_t>(), stream, tuning);
            });
            gpu_->CopyToHost(out, got.data());
            if (first.empty()) first = got;
            differ += first != got ? 1 : 0;
          }
          std::printf("  %-7d %4d %-8s %-17s %8.1f %8.1f %8.1f %8.1f %8.1f%s\n", vocab, n,
                      kind == 1 ? "llm-like" : "flat", setting.name, us[0], us[1], us[2], argmax,
                      copy, differ ? "  CHUNKS DIFFER" : "");
          EXPECT_EQ(differ, 0);
          const std::string name = setting.name;
          if (vocab == 128256 && (n == 1 || n == 256) && (name == "T.8 p.9" || name == "T.8 k50")) {
            timelines.push_back(Timeline(dev, vocab, n, dev_tasks, out, stream));
            std::snprintf(timelines.back().name, sizeof(timelines.back().name), "%d %s %s", n,
                          kind == 1 ? "llm" : "flat", setting.name);
          }
        }
      }
    }
  }
  // Where task 0's first block spends its time (us between consecutive points, 128256 logits,
  // default chunk; with 256 rows the block shares its SM and HBM with the others).
  std::printf(
      "\n  timeline of task 0, block 0 (us): load, max, p+hist0, then per radix level "
      "[hist, sync, slice, sync, gather, scan], then ranges, scan+exchange, walk, pick, "
      "exit\n");
  for (const TimelineRow& t : timelines) {
    std::printf("  %-24s", t.name);
    for (size_t k = 1; k < t.us.size(); ++k) std::printf(" %5.1f", t.us[k]);
    std::printf("  | total %.1f\n", t.us.empty() ? 0.0 : t.total);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
}

}  // namespace
}  // namespace loom
