// Backend: every op the models need, over Tensors that live on the backend's device. Model code
// calls only this interface (ARCHITECTURE.md §4). The CPU backend (backend/cpu) is the reference;
// the CUDA backend implements the same contract with bf16 activations.
//
// Conventions for every op:
//   - activations are 2-D [rows, cols] in act_dtype() (f32 on CPU, bf16 on CUDA);
//   - weights may be any DType (f32/f16/bf16/q8_0/q4_0/q4_K/q6_K) and are decoded inside kernels;
//   - `out` is preallocated by the caller with the documented shape; ops never allocate outputs;
//   - in-place is allowed only where the contract says so;
//   - index tensors (ids, positions, page tables) are i32 on the backend's device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/draw_params.h"
#include "backend/logit_edit.h"
#include "base/status.h"
#include "tensor/kv_quant.h"
#include "tensor/tensor.h"

namespace loom {

// Per-layer paged KV pools. Each is [num_blocks, block_size, num_kv_heads, head_dim] of the
// cache's dtype, or, for a quantized pool (`--kv-quant`), [num_blocks, block_size, num_kv_heads,
// KvQuantRowBytes(quant, head_dim)] u8: each (token, kv head) row quantized on its own
// (tensor/kv_quant.h). Either way a row's bytes are RowBytes(pool dtype, pool.dim(3)).
//
//   k: block 0 [tok 0: h0 d0..d(D-1) | h1 ... ] [tok 1: ...] ... [tok block_size-1]
//      block 1 ...
// A token at slot s lives in block s / block_size, row s % block_size.
struct KvLayer {
  Tensor k;
  Tensor v;
  KvQuant k_quant = KvQuant::kNone;  // kNone: k holds head_dim values of its dtype a row
  KvQuant v_quant = KvQuant::kNone;
  bool quantized() const { return k_quant != KvQuant::kNone || v_quant != KvQuant::kNone; }
};

// Per-step attention metadata, built once by the runner and shared by every layer.
// Sequences are laid out back to back in the flat token batch (no padding):
//
//   tokens:      [ s0 q0 q1 q2 | s1 q0 | s2 q0 q1 ]      query_start = [0, 3, 4, 6]
//   s0's pages:  page_indices[page_indptr[0] .. page_indptr[1])  (block ids, in order)
//   kv_len[s]:   tokens of s in the cache after this step's StoreKv (prefix + new tokens)
//
// The j-th query row of sequence s sits at position kv_len[s] - q_len(s) + j and attends to cache
// positions p <= that position (causal), and p > position - window when sliding_window > 0.
struct AttentionPlan;

struct AttentionMeta {
  int num_seqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_kv_len = 0;
  int block_size = 0;
  Tensor query_start;   // [num_seqs + 1] i32
  Tensor kv_len;        // [num_seqs] i32
  Tensor page_indptr;   // [num_seqs + 1] i32
  Tensor page_indices;  // [total_pages] i32 block ids
  Tensor slot_mapping;  // [num_tokens] i32: block_id * block_size + offset of each new token
  // What Backend::PlanAttention decided for this step, read by every layer's Attention; null
  // when the backend needs none or the caller did not plan (Attention then plans the call).
  std::shared_ptr<const AttentionPlan> plan;
};

// The heads of one attention call: with the page tables, all a plan depends on (a layer's
// window, scale and soft-cap are arguments of the run, not of the plan).
struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  KvQuant k_quant = KvQuant::kNone;  // the pools' formats (KvLayer)
  KvQuant v_quant = KvQuant::kNone;
  bool operator==(const AttentionShape&) const = default;
};

// A backend's plan for one step's attention (FlashInfer's plan / run split): which kernel, how
// the keys are split, the per-step tile tables and scratch, made once before the first layer.
// Its contents are the backend's own; `shape` is what it was planned for.
struct AttentionPlan {
  virtual ~AttentionPlan() = default;
  AttentionShape shape;
};

struct AttentionParams {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;         // softmax scale (usually head_dim^-0.5)
  int sliding_window = 0;     // 0 = global attention
  float logit_softcap = 0.f;  // 0 = off; else scores = cap * tanh(scores / cap)
  // Undefined, or [num_heads] f32: head h's softmax has one more logit, sinks[h] (in the scaled
  // scores' units), that takes weight but has no value (gpt-oss). Backend::has_attention_sinks.
  Tensor sinks;
};

// RoPE frequencies for one rope configuration (computed on the host by the model from its
// scaling type, uploaded once).
struct RopeTable {
  Tensor inv_freq;             // [rotary_dim / 2] f32 on the backend's device
  int rotary_dim = 0;          // <= head_dim; dims past it are left untouched
  float attention_factor = 1;  // yarn: cos/sin are multiplied by this
  bool interleaved = false;  // false: rotate halves (HF/NeoX); true: pairs (2i, 2i+1) (GGUF llama)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu (avx2, 2 threads)"
  // Activation dtype of this backend (f32 on CPU).
  virtual DType act_dtype() const = 0;
  // OK when this backend's attention runs heads of `head_dim` values, else Unimplemented
  // naming the ones it runs. Model loading asks first, so a model the backend cannot run is
  // refused at load instead of failing in its first step.
  virtual Status CheckHeadDim(int head_dim) const {
    (void)head_dim;
    return OkStatus();
  }
  // Whether Attention takes AttentionParams::sinks.
  virtual bool has_attention_sinks() const { return false; }
  // Whether StoreKv and Attention take pools quantized with q (KvLayer::k_quant / v_quant).
  virtual bool SupportsKvQuant(KvQuant q) const { return q == KvQuant::kNone; }

  // ---- memory ----
  // A new zero-filled tensor on this device.
  virtual Tensor Alloc(DType dtype, Shape shape) = 0;
  // A new tensor whose contents are unspecified until written: for activations that every op
  // overwrites in full (on CUDA it saves a memset launch per tensor per step).
  virtual Tensor AllocScratch(DType dtype, Shape shape) { return Alloc(dtype, shape); }
  // Makes a host tensor usable by this backend. The CPU backend returns it as is (zero-copy);
  // device backends copy.
  virtual Tensor Upload(const Tensor& host) = 0;
  // Upload for a model weight, which lives as long as the model and is read every step. The
  // default is Upload; the CPU backend copies it into huge-page memory (cpu_backend.cc).
  virtual Tensor UploadWeight(const Tensor& host) { return Upload(host); }
  // Copies src (on this device) into host memory `dst` of src.nbytes() bytes. Synchronous.
  virtual void CopyToHost(const Tensor& src, void* dst) = 0;
  // Copies `src` (dst.nbytes() bytes of host memory) into dst (on this device).
  virtual void CopyFromHost(const void* src, const Tensor& dst) = 0;
  // Waits for queued work (no-op on CPU).
  virtual void Synchronize() {}
  // Host memory that CopyToHost into is fastest (page-locked on CUDA: copied by DMA without a
  // staging pass), not zero-filled. The default is plain host memory.
  virtual std::shared_ptr<Buffer> AllocHostStaging(size_t bytes) { return MakeHostBuffer(bytes); }
  // Copies whole KV blocks between the paged pools `kv` and host memory: block blocks[i] at
  // hosts[i], laid out layer by layer, K rows then V rows (ModelRunner's KvBlockLayout); to_host
  // picks the direction (from host, the bytes are only read). Synchronous. The default copies each
  // part with CopyToHost / CopyFromHost.
  virtual void CopyKvBlocks(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                            std::span<uint8_t* const> hosts, bool to_host);
  // CopyKvBlocks to the host without waiting for it: the blocks are read in order with the
  // queued work (a later step's writes to them are not seen) and the host bytes are complete once
  // WaitKvCopy(ticket) returns. The default copies synchronously (ticket 0).
  virtual uint64_t StartKvCopyToHost(const std::vector<KvLayer>& kv,
                                     std::span<const int32_t> blocks,
                                     std::span<uint8_t* const> hosts) {
    CopyKvBlocks(kv, blocks, hosts, /*to_host=*/true);
    return 0;
  }
  virtual void WaitKvCopy(uint64_t ticket) { (void)ticket; }
  // Whether WaitKvCopy(ticket) would return at once (does not wait).
  virtual bool KvCopyDone(uint64_t ticket) {
    (void)ticket;
    return true;
  }

  // Fills `t` (f32, bf16 or f16, on this device) with HashUniform(seed, i, lo, scale) at element i
  // (base/hash_uniform.h), rounded to its dtype: random-weight models whose values every backend
  // can rebuild. A quantized `t` (2-D) holds QuantizeRow of each row of those values. The default
  // fills on the host (and copies to the device; quantized only on the CPU).
  virtual void FillUniform(const Tensor& t, uint64_t seed, float lo, float scale);

  // ---- ops ----
  // out[i, :] = table[ids[i], :] * scale.   table [vocab, d] any dtype; ids [n] i32; out [n, d].
  virtual void Embed(const Tensor& table, const Tensor& ids, float scale, const Tensor& out) = 0;
  // out = x @ w^T (+ bias).   x [n, k]; w [m, k] any dtype (HF Linear layout); bias [m] or
  // undefined; out [n, m] in act_dtype() or f32 (logits are always produced in f32 so every
  // backend hands the sampler the same type; SoftCap, Scale, Add and GatherRows accept f32 too).
  virtual void MatMul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) = 0;
  // out[i] = x[i] / rms(x[i]) * (w + weight_offset).   x, out [n, d] (may alias); w [d].
  // weight_offset is 1 for Gemma's (1 + w) norms, else 0.
  virtual void RmsNorm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                       const Tensor& out) = 0;
  // out = a + b, elementwise, same shapes (out may alias a or b).
  virtual void Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // x *= s in place.
  virtual void Scale(const Tensor& x, float s) = 0;
  // Rotates x in place.   x [n, num_heads * head_dim]; positions [n] i32.
  virtual void Rope(const Tensor& x, const Tensor& positions, const RopeTable& rope, int num_heads,
                    int head_dim) = 0;
  // out = act(gate) * up.   gate, up, out [n, f] (out may alias gate or up).
  // act = silu, or gelu with the tanh approximation.
  virtual void SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  virtual void GeluTanhMul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // x = cap * tanh(x / cap) in place.
  virtual void SoftCap(const Tensor& x, float cap) = 0;
  // Writes this step's K and V rows into their slots.   k, v [n, num_kv_heads * head_dim];
  // meta.slot_mapping [n].
  virtual void StoreKv(const Tensor& k, const Tensor& v, const AttentionMeta& meta,
                       const KvLayer& layer) = 0;
  // Paged attention for every query row of the step (prefill chunks and decodes mixed).
  // q [n, num_heads * head_dim]; out [n, num_heads * head_dim]. GQA: query head h reads kv head
  // h / (num_heads / num_kv_heads).
  // meta.plan, when set, must come from this backend's PlanAttention for params' heads.
  virtual void Attention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                         const AttentionParams& params, const Tensor& out) = 0;
  // Plans the attention of a step once, before its layers run (the model stores the result in
  // meta.plan): host-side choices and any device work the page tables allow up front (CUDA: the
  // kernel and split count, the query-tile table, split scratch). Default: no plan (the CPU
  // backend decides per call at no cost). Enqueued work is stream-ordered before the layers.
  virtual std::shared_ptr<const AttentionPlan> PlanAttention(const AttentionMeta& meta,
                                                             const AttentionShape& shape) {
    (void)meta;
    (void)shape;
    return nullptr;
  }
  // out[i, :] = x[rows[i], :].   rows [r] i32; out [r, d].
  virtual void GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) = 0;
  // dst[:, dst_col : dst_col + num_cols] = src[:, src_col : src_col + num_cols], e.g. to split a
  // fused qkv projection.   src [n, a], dst [n, b], same dtype (activations).
  virtual void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                           int64_t num_cols) = 0;

  // ---- fused ops (a device backend overrides them with one kernel each; the defaults compose the
  // ops above, so the CPU backend's numerics stay those of the unfused sequence) ----

  // Whether the model should use the fused ops below: fuse q/k/v and gate/up projection weights
  // at load (one GEMV instead of three / two at small batch; ConcatRows, FuseGateUp) and fold
  // norms and residual adds into the projections (RmsNormMatMul*, MatMulAdd). The defaults
  // compose the unfused ops, so a backend that says no (the CPU) keeps the unfused numerics.
  virtual bool prefers_fused_ops() const { return false; }
  // A new tensor holding the rows of `parts` one after another (same dtype and columns; 1-D
  // parts are concatenated as vectors). Used once at load to fuse projection weights.
  virtual Tensor ConcatRows(const std::vector<Tensor>& parts);
  // The shape ConcatRows returns (CHECK-fails on mismatched parts).
  static Shape ConcatRowsShape(const std::vector<Tensor>& parts);
  // Returns cached but unused device memory to the driver (after load-time reshuffles such as
  // ConcatRows, so KV sizing sees it as free). No-op on CPU.
  virtual void TrimMemory() {}

  // acc += x @ w^T (+ bias): a projection that feeds the residual stream.
  //   x [n, k]; w [m, k]; bias [m] or undefined; acc [n, m] (act dtype).
  virtual void MatMulAdd(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& acc);

  // out = RmsNorm(x) @ w^T (+ bias): a sub-block's input norm and its projection, the normed rows
  // not necessarily materialized. x [n, hidden] (not modified); norm.w [hidden]; w [m, hidden].
  struct NormSpec {
    Tensor w;
    float eps = 0.f, weight_offset = 0.f;
  };
  virtual void RmsNormMatMul(const Tensor& x, const NormSpec& norm, const Tensor& w,
                             const Tensor& bias, const Tensor& out);

  // The attention block's input half after one fused projection qkv = [q | k | v]:
  //   q_out = rope(q_norm(q)); the k rows rope(k_norm(k)) and the v rows go to their slots of
  //   `layer` (meta.slot_mapping; slots < 0 are skipped).
  //   qkv [n, (H + 2 KVH) * D]; q_out [n, H * D]; q_norm / k_norm [D] per-head RMSNorm weights or
  //   undefined (no norm). qkv's contents are unspecified afterwards.
  struct QkvLayout {
    int num_heads = 0, num_kv_heads = 0, head_dim = 0;
    Tensor q_norm, k_norm;
    float eps = 0.f, norm_offset = 0.f;
  };
  virtual void QkvRopeStore(const Tensor& qkv, const Tensor& positions, const RopeTable& rope,
                            const QkvLayout& layout, const AttentionMeta& meta,
                            const KvLayer& layer, const Tensor& q_out);
  // RmsNormMatMul(x, norm, w_qkv, bias, qkv) then QkvRopeStore(qkv, ...): one launch on CUDA at
  // batch 1 (the GEMV's epilogue does the rope and the stores). qkv is scratch for the default.
  virtual void RmsNormQkvRopeStore(const Tensor& x, const NormSpec& norm, const Tensor& w_qkv,
                                   const Tensor& bias, const Tensor& positions,
                                   const RopeTable& rope, const QkvLayout& layout,
                                   const AttentionMeta& meta, const KvLayer& layer,
                                   const Tensor& qkv, const Tensor& q_out);

  // The gated MLP's input projections fused into one weight, in this backend's layout (the
  // default: gate rows, then up rows, as ConcatRows and as Phi-3 checkpoints store them).
  //   w_gate, w_up [f, hidden] -> [2f, hidden].
  virtual Tensor FuseGateUp(const Tensor& w_gate, const Tensor& w_up);
  // out = act(x @ w_gate^T) * (x @ w_up^T) for a weight made by FuseGateUp.
  //   x [n, hidden]; w_gate_up [2f, hidden]; out [n, f].
  enum class GatedAct { kSilu, kGeluTanh };
  virtual void MatMulGated(const Tensor& x, const Tensor& w_gate_up, GatedAct act,
                           const Tensor& out);
  // MatMulGated of RmsNorm(x) (as RmsNormMatMul).
  virtual void RmsNormMatMulGated(const Tensor& x, const NormSpec& norm, const Tensor& w_gate_up,
                                  GatedAct act, const Tensor& out);

  // ---- mixture of experts (optional: has_moe()) ----
  // One sparse MLP layer. Expert e's weights are slice e of the 3-D tensors (any weight dtype):
  // gate / up [E, f, hidden], down [E, hidden, f]; router [E, hidden]. The shared expert
  // (Qwen2-MoE; undefined elsewhere): shared_gate / shared_up [fs, hidden], shared_down
  // [hidden, fs], shared_router [1, hidden].
  // gpt-oss's experts add biases (undefined elsewhere), all f32: router_bias [E], gate_bias /
  // up_bias [E, f], down_bias [E, hidden].
  struct MoeWeights {
    Tensor router, gate, up, down;
    Tensor shared_gate, shared_up, shared_down, shared_router;
    Tensor router_bias, gate_bias, up_bias, down_bias;
  };
  struct MoeParams {
    int top_k = 0;
    bool norm_topk_prob = false;  // renormalize the chosen experts' probabilities to sum to 1
    GatedAct act = GatedAct::kSilu;
    // > 0: the experts' activation is gpt-oss's clamped SwiGLU instead of `act`:
    // g = min(g, limit), u = clamp(u, -limit, limit), g * sigmoid(1.702 g) * (u + 1).
    float swiglu_limit = 0.f;
  };
  // Whether MoeMlp is implemented.
  virtual bool has_moe() const { return false; }
  // Whether MoeMlp takes the biases and the clamped SwiGLU above (gpt-oss).
  virtual bool has_moe_biases() const { return false; }
  // OK when MoeMlp runs layers of E experts (top_k a row) of `expert_width` over `hidden`, else
  // Unimplemented naming the limit. Model loading asks first, as with CheckHeadDim.
  virtual Status CheckMoe(int64_t hidden, int64_t expert_width, int num_experts, int top_k) const {
    (void)hidden;
    (void)expert_width;
    (void)num_experts;
    (void)top_k;
    return OkStatus();
  }
  // out = sum over row i's experts e of p_e * down_e(act(x_i gate_e^T) * (x_i up_e^T)), where
  // p = softmax(x_i router^T) and the experts are its top_k entries (RouteExperts); plus
  // sigmoid(x_i shared_router^T) * shared MLP(x_i) with a shared expert. Every row is computed
  // whatever else the step holds (no capacity, no token dropped).
  //   x [n, hidden]; out [n, hidden] (act dtype); router_logits [n, E] (f32, or act dtype) receives
  //   x router^T; expert_ids [n, top_k] i32 receives each row's experts, most probable first.
  virtual void MoeMlp(const Tensor& x, const MoeWeights& w, const MoeParams& params,
                      const Tensor& router_logits, const Tensor& expert_ids, const Tensor& out) {
    (void)x;
    (void)w;
    (void)params;
    (void)router_logits;
    (void)expert_ids;
    (void)out;
    CHECK(false) << name() << " has no MoeMlp";
  }
  // The shapes MoeMlp's arguments must have (dtypes are each backend's to check); returns the
  // experts' width f.
  static int64_t CheckMoeShapes(const Tensor& x, const MoeWeights& w, const Tensor& router_logits,
                                const Tensor& out);
  // The routing every backend implements: the top_k entries of softmax(logits[0 .. E)) (f32, as
  // transformers computes it), the larger first and equal ones by lower index, into ids[0 ..
  // top_k) and their probabilities (renormalized to sum 1 when norm_topk_prob) into weights.
  static void RouteExperts(const float* logits, int num_experts, int top_k, bool norm_topk_prob,
                           int32_t* ids, float* weights);

  // ---- sampling (optional: lets a device backend return token ids instead of logits) ----
  // Whether EditLogits is implemented.
  virtual bool has_edit_logits() const { return false; }
  // x[e.row, e.token] = ApplyLogitEdit(e, x[e.row, e.token]) for every edit (logit_bias,
  // penalties, min_tokens masking: backend/logit_edit.h), so ArgmaxRows / SampleRows then pick
  // what the host sampler picks from the unedited row. x [n, vocab] f32 on this device; no two
  // edits name the same (row, token). Precondition: has_edit_logits().
  virtual void EditLogits(const Tensor& x, std::span<const LogitEdit> edits) {
    (void)x;
    (void)edits;
    CHECK(false) << name() << " has no EditLogits";
  }
  // Whether MaskLogits is implemented.
  virtual bool has_mask_logits() const { return false; }
  // Grammar masks (sample/sampler.h, SampleContext::allowed): x[rows[i], j] = -inf for every
  // token j whose bit (masks[i][j / 32] >> (j % 32)) & 1 is clear, and for every
  // j >= 32 * masks[i].size(). x [n, vocab] f32 on this device; rows distinct; masks host memory
  // (read during the call; rows whose masks are one span, same address and size, may share its
  // upload: grammar rows in one state do). Masking commutes with EditLogits (an edit keeps -inf
  // at -inf).
  // Precondition: has_mask_logits().
  virtual void MaskLogits(const Tensor& x, std::span<const int32_t> rows,
                          std::span<const std::span<const uint32_t>> masks) {
    (void)x;
    (void)rows;
    (void)masks;
    CHECK(false) << name() << " has no MaskLogits";
  }
  // Whether ArgmaxRows is implemented. The CPU backend leaves it to the host sampler.
  virtual bool has_argmax_rows() const { return false; }
  // out[i] = the lowest j with x[i, j] == max_j x[i, j] > -inf (the host sampler's greedy choice);
  // kArgmaxNone when every entry of row i is -inf, kArgmaxNaN when it holds a NaN.
  // x [n, vocab] f32 or bf16 on this device; out [n] i32. Precondition: has_argmax_rows().
  static constexpr int32_t kArgmaxNone = -1;
  static constexpr int32_t kArgmaxNaN = -2;
  virtual void ArgmaxRows(const Tensor& x, const Tensor& out) {
    (void)x;
    (void)out;
    CHECK(false) << name() << " has no ArgmaxRows";
  }
  // Whether SampleRows takes rows of `vocab` entries. The CPU backend leaves draws to the host.
  virtual bool has_sample_rows(int64_t vocab) const {
    (void)vocab;
    return false;
  }
  // out[i] = the token Sampler::SampleRow draws from row rows[i] of x under params[i] for a row
  // that IsPlainDraw accepts (same kept set, same CounterUniform(seed, step, 0); a different
  // token only where float summation order moves a boundary), or kArgmaxNaN / kArgmaxNone (a NaN
  // logit / every logit -inf). x [m, vocab] f32 on this device; rows, params [n] on the host
  // (rows[i] in [0, m)), read before it returns; out [n] i32 on this device. Precondition:
  // has_sample_rows(vocab).
  virtual void SampleRows(const Tensor& x, std::span<const int32_t> rows,
                          std::span<const DrawParams> params, const Tensor& out) {
    (void)x;
    (void)rows;
    (void)params;
    (void)out;
    CHECK(false) << name() << " has no SampleRows";
  }

  // Whether LogprobRows is implemented. The CPU backend leaves logprobs to the host sampler.
  virtual bool has_logprob_rows() const { return false; }
  // One row of LogprobRows: row `row` of the logits, whose chosen token is ids[id_index].
  struct LogprobRow {
    int32_t row = 0;
    int32_t id_index = 0;
  };
  static constexpr int kMaxTopLogprobs = 20;
  static constexpr int kLogprobStride = 1 + 2 * kMaxTopLogprobs;
  // The Sampler's logprobs of rows already edited (logit_bias, penalties; no masking): out
  // [rows.size(), kLogprobStride] f32 on this device, per row log_softmax(x[row])[ids[id_index]],
  // then the `top_k` (<= kMaxTopLogprobs) largest logits as (id, log_softmax) pairs, largest
  // first, equal logits by lower id, ids as exact floats. log_softmax as SampleRow takes it: the
  // max in f32, the sum of exp(l - max) in f64, log_z = max + f32(log(sum)). An id that is not a
  // token (an ArgmaxRows code) gives logprob 0. x [m, vocab] f32 on this device; rows on the host
  // (read before it returns); ids i32 on this device. Precondition: has_logprob_rows().
  virtual void LogprobRows(const Tensor& x, std::span<const LogprobRow> rows, const Tensor& ids,
                           int top_k, const Tensor& out) {
    (void)x;
    (void)rows;
    (void)ids;
    (void)top_k;
    (void)out;
    CHECK(false) << name() << " has no LogprobRows";
  }
};

}  // namespace loom
