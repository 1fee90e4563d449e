#!/usr/bin/env python3
"""Builds tiny random-weight models of every architecture loom supports with HF transformers (the
oracle) and dumps what loom's C++ tests compare against.

Run on the GPU machine (torch + transformers, no hub access needed: configs are written here):
    python3 tools/goldens/make_model_goldens.py OUT_DIR
It writes OUT_DIR/<name>/{config.json, model.safetensors, golden.json, logits_<k>.f32,
hidden_<k>.f32}. The result is committed under tests/goldens/models/.

golden.json: {"script", "transformers", "torch", "sequences": [[ids...]...],
  "logits": [{"file", "shape"}], "greedy": {"prompt", "ids"}, "hidden": {"seq", "file", "shape",
  "names"}, "inv_freq": [...] (global layers' rope), "bf16_reference": {"row_error", "row_kl"}
  (only the archs in BF16_REFERENCE)}.
Everything is computed in float32 on the CPU with eager attention, so the numbers are exact up to
f32 reduction order (bf16_reference: the same model rerun in bf16).
"""
import json
import os
import re
import sys

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

VOCAB = 256
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=False)


def rope(theta, **scaling):
    """Rope settings in both transformers-5 (`rope_parameters`) and -4 (`rope_scaling`) spelling."""
    params = dict(rope_theta=theta, rope_type=scaling.pop("rope_type", "default"), **scaling)
    return params


# name -> (model_type, overrides, rope params (global), rope params (sliding) or None)
ARCHS = {
    "llama": ("llama", dict(), rope(10000.0, rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                    high_freq_factor=4.0, original_max_position_embeddings=32),
              None),
    "mistral": ("mistral", dict(sliding_window=8), rope(10000.0), None),
    "qwen2": ("qwen2", dict(tie_word_embeddings=True, use_sliding_window=False), rope(1000000.0),
              None),
    "qwen3": ("qwen3", dict(use_sliding_window=False),
              rope(1000000.0, rope_type="yarn", factor=4.0, original_max_position_embeddings=64),
              None),
    "gemma2": ("gemma2", dict(tie_word_embeddings=True, sliding_window=8, query_pre_attn_scalar=24,
                              attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
                              hidden_activation="gelu_pytorch_tanh",
                              layer_types=["sliding_attention", "full_attention",
                                           "sliding_attention"]),
               rope(10000.0), None),
    # Gemma 2 as a GGUF can carry it: llama.cpp has no query_pre_attn_scalar key and derives the
    # softmax scale from head_dim (from hidden/heads for the 46-layer 27B), so this variant keeps
    # query_pre_attn_scalar == head_dim (src/runtime/golden_test.cc, GGUF cases).
    "gemma2_gguf": ("gemma2", dict(tie_word_embeddings=True, sliding_window=8,
                                   query_pre_attn_scalar=16, attn_logit_softcapping=5.0,
                                   final_logit_softcapping=3.0,
                                   hidden_activation="gelu_pytorch_tanh",
                                   layer_types=["sliding_attention", "full_attention",
                                                "sliding_attention"]),
                    rope(10000.0), None),
    "gemma3": ("gemma3_text", dict(tie_word_embeddings=True, sliding_window=8,
                                   query_pre_attn_scalar=16, sliding_window_pattern=3,
                                   hidden_activation="gelu_pytorch_tanh",
                                   layer_types=["sliding_attention", "sliding_attention",
                                                "full_attention"]),
               rope(1000000.0, rope_type="linear", factor=8.0), rope(10000.0)),
    # transformers 5 keeps partial_rotary_factor inside rope_parameters.
    "phi3": ("phi3", dict(sliding_window=8, pad_token_id=0),
             rope(10000.0, partial_rotary_factor=0.5), None),
    # Mixtures of experts: 8 experts, 2 a token. Qwen3-MoE with one dense layer (mlp_only_layers)
    # between sparse ones; Qwen2-MoE adds the sigmoid-gated shared expert and keeps the top-k
    # weights unnormalized; Mixtral's experts are intermediate_size wide.
    "qwen3_moe": ("qwen3_moe", dict(use_sliding_window=False, num_experts=8, num_experts_per_tok=2,
                                    moe_intermediate_size=32, norm_topk_prob=True,
                                    decoder_sparse_step=1, mlp_only_layers=[1]),
                  rope(1000000.0), None),
    "qwen2_moe": ("qwen2_moe", dict(use_sliding_window=False, num_experts=8,
                                    num_experts_per_tok=2, moe_intermediate_size=32,
                                    shared_expert_intermediate_size=48, norm_topk_prob=False,
                                    decoder_sparse_step=1, mlp_only_layers=[]),
                  rope(1000000.0), None),
    "mixtral": ("mixtral", dict(num_local_experts=8, num_experts_per_tok=2, sliding_window=None,
                                intermediate_size=48),
                rope(1000000.0), None),
    # gpt-oss: q/k/v/o biases, a learned attention sink per head, sliding and full layers in
    # turn, a router with a bias (softmax over the top-k logits), experts with biases and the
    # clamped SwiGLU (transformers 5.17 clamps at 7 whatever swiglu_limit says, so the experts'
    # biases are drawn wide enough to cross it: randomize), yarn rope (truncate off). 2f != hidden,
    # so the [E, hidden, 2f] / [E, f, hidden] layouts cannot be mistaken for their transposes.
    "gpt_oss": ("gpt_oss", dict(num_local_experts=8, num_experts_per_tok=2, intermediate_size=48,
                                sliding_window=8, attention_bias=True, swiglu_limit=7.0,
                                layer_types=["sliding_attention", "full_attention",
                                             "sliding_attention"]),
                rope(150000.0, rope_type="yarn", factor=4.0, original_max_position_embeddings=64,
                     beta_fast=32.0, beta_slow=1.0, truncate=False), None),
}

SEQ_LENS = [1, 7, 70]


def make_config(model_type, overrides, rope_global, rope_local):
    kwargs = dict(BASE)
    kwargs.update(overrides)
    cfg = AutoConfig.for_model(model_type, **kwargs)
    if hasattr(cfg, "rope_parameters"):  # transformers >= 5
        if rope_local is not None:
            cfg.rope_parameters = {"full_attention": dict(rope_global),
                                   "sliding_attention": dict(rope_local)}
        else:
            cfg.rope_parameters = dict(rope_global)
    else:
        cfg.rope_theta = rope_global["rope_theta"]
        scaling = {k: v for k, v in rope_global.items() if k != "rope_theta"}
        cfg.rope_scaling = None if scaling.get("rope_type") == "default" else scaling
        if rope_local is not None:
            cfg.rope_local_base_freq = rope_local["rope_theta"]
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, gen, plus_one_norms):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if re.search(r"\.(gate|router)\.weight$", name):
                # MoE routers: wide enough logits that each token's top-k is decisive (the
                # golden records the margin between the k-th and the next expert).
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".sinks"):  # attention sinks: logits of the size of the scores
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("experts.gate_up_proj_bias"):  # gpt-oss: past the clamp at 7
                p.copy_(3.0 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1 and "norm" in name:
                center = 0.0 if plus_one_norms else 1.0
                p.copy_(center + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:  # biases
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))


def dump_f32(path, t):
    t.detach().to(torch.float32).contiguous().numpy().tofile(path)


def record_routers(model):
    """Forward hooks on every MoE router (`mlp.gate` / `block_sparse_moe.gate`): their inputs'
    router logits, by layer. Returns None for dense models."""
    found = {"hooks": [], "logits": {}}
    for name, mod in model.named_modules():
        m = re.search(r"layers\.(\d+)\.(mlp|block_sparse_moe)\.(gate|router)$", name)
        if not m:
            continue
        layer = int(m.group(1))
        weight = mod.weight
        bias = getattr(mod, "bias", None)  # gpt-oss's router has one

        def hook(mod, args, output, layer=layer, weight=weight, bias=bias):
            x = args[0].reshape(-1, args[0].shape[-1])
            found["logits"][layer] = torch.nn.functional.linear(x, weight, bias).detach().clone()
        found["hooks"].append(mod.register_forward_hook(hook))
    return found if found["hooks"] else None


def dump_routing(out, routers, cfg):
    """router_<layer>.f32 [n, E] and each token's top-k experts (descending weight), with the
    smallest gap between the k-th and the (k+1)-th router logit over all tokens."""
    k = cfg.num_experts_per_tok
    layers = []
    for layer in sorted(routers["logits"]):
        logits = routers["logits"][layer]
        dump_f32(os.path.join(out, f"router_{layer}.f32"), logits)
        top = torch.topk(logits, k + 1, dim=-1)
        gap = float((top.values[:, k - 1] - top.values[:, k]).min())
        layers.append({"layer": layer, "file": f"router_{layer}.f32", "shape": list(logits.shape),
                       "top_k": top.indices[:, :k].tolist(), "min_gap": gap})
    return {"seq": 2, "k": k, "layers": layers}


# MoE goldens: router weights are redrawn (seed 1234, 1235, ...) until every token the golden
# runs picks its experts by at least this much (the k-th minus the (k+1)-th router logit), so
# that a backend computing in bf16 (CUDA; relative error 2^-9 a value) makes the same routing
# decisions: a flipped expert changes a token's logits far beyond the bf16 bounds.
MIN_ROUTER_GAP = 0.03
GREEDY_PROMPT = [1, 17, 42, 99, 200]


def golden_sequences():
    seq_gen = torch.Generator().manual_seed(99)
    seqs = []
    for n in SEQ_LENS:
        ids = torch.randint(3, VOCAB, (n,), generator=seq_gen)
        ids[0] = 1  # BOS
        seqs.append(ids)
    return seqs


def routing_gap(model, k):
    """The smallest gap between the k-th and (k+1)-th router logit over every token of the
    golden's sequences and greedy trajectory; None for dense models."""
    routers = record_routers(model)
    if routers is None:
        return None
    gaps = []

    def collect():
        for logits in routers["logits"].values():
            top = torch.topk(logits, k + 1, dim=-1)
            gaps.append(float((top.values[:, k - 1] - top.values[:, k]).min()))
        routers["logits"].clear()
    with torch.no_grad():
        for ids in golden_sequences():
            model(ids[None, :])
            collect()
        ids = list(GREEDY_PROMPT)
        for _ in range(32):
            logits = model(torch.tensor([ids])).logits[0, -1]
            collect()
            ids.append(int(torch.argmax(logits)))
    for hook in routers["hooks"]:
        hook.remove()
    return min(gaps)


# Archs whose golden also records how far transformers itself lands from its f32 logits when
# run in bf16, row by row: a backend that rounds (bf16_golden.h) is held to the larger of the
# fixed bf16 bound and twice that. gpt-oss needs it: its experts' outputs (biases past the clamp
# at 7) make a few rows ill-conditioned, so that transformers in bf16 itself misses the fixed
# bound there (its median row error is that of the other archs).
BF16_REFERENCE = {"gpt_oss"}


def bf16_reference(out, golden):
    """transformers in bf16 (the checkpoint reloaded in that dtype) against the f32 logits just
    written: per sequence, each row's normalized error ||bf16 - f32|| / ||f32|| and
    KL(softmax f32 || softmax bf16) in nats, computed in f64."""
    model = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.bfloat16,
                                                 attn_implementation="eager")
    model.eval()
    errors, kls = [], []
    with torch.no_grad():
        for k, ids in enumerate(golden["sequences"]):
            ref = torch.from_numpy(np.fromfile(os.path.join(out, f"logits_{k}.f32"),
                                               dtype=np.float32)).double().reshape(len(ids), -1)
            got = model(torch.tensor([ids])).logits[0].double()
            errors.append(((got - ref).norm(dim=-1) / ref.norm(dim=-1)).tolist())
            lp, lq = torch.log_softmax(ref, -1), torch.log_softmax(got, -1)
            kls.append((lp.exp() * (lp - lq)).sum(-1).tolist())
    return {"dtype": "bfloat16", "row_error": errors, "row_kl": kls}


def main():
    out_root = sys.argv[1]
    only = sys.argv[2:] or list(ARCHS)
    for name in only:
        model_type, overrides, rope_g, rope_l = ARCHS[name]
        cfg = make_config(model_type, overrides, rope_g, rope_l)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
        model.eval()
        plus_one = name.startswith("gemma")
        seed = 1234
        randomize(model, torch.Generator().manual_seed(seed), plus_one)
        gap = routing_gap(model, getattr(model.config, "num_experts_per_tok", 0))
        if gap is not None:
            best = (gap, seed)
            for attempt in range(1, 300):
                if best[0] >= MIN_ROUTER_GAP:
                    break
                randomize(model, torch.Generator().manual_seed(1234 + attempt), plus_one)
                best = max(best, (routing_gap(model, model.config.num_experts_per_tok),
                                  1234 + attempt))
            gap, seed = best
            randomize(model, torch.Generator().manual_seed(seed), plus_one)
            print(name, "weights seed", seed, "smallest router gap", gap)
        out = os.path.join(out_root, name)
        os.makedirs(out, exist_ok=True)
        model.save_pretrained(out, safe_serialization=True)
        # Reload from disk so the golden is what a reader of these files gets.
        model = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32,
                                                     attn_implementation="eager")
        model.eval()
        golden = {"script": "tools/goldens/make_model_goldens.py",
                  "transformers": transformers.__version__, "torch": torch.__version__,
                  "arch": name, "sequences": [], "logits": []}
        if gap is not None:
            golden["weights_seed"] = seed
            golden["min_router_gap"] = gap
        with torch.no_grad():
            for k, ids in enumerate(golden_sequences()):
                golden["sequences"].append(ids.tolist())
                routers = record_routers(model) if k == 2 else None
                res = model(ids[None, :], output_hidden_states=(k == 1))
                if routers:
                    golden["experts"] = dump_routing(out, routers, model.config)
                    for hook in routers["hooks"]:
                        hook.remove()
                logits = res.logits[0]
                dump_f32(os.path.join(out, f"logits_{k}.f32"), logits)
                golden["logits"].append({"file": f"logits_{k}.f32", "shape": list(logits.shape)})
                if k == 1:
                    hs = torch.stack([h[0] for h in res.hidden_states])
                    dump_f32(os.path.join(out, "hidden_1.f32"), hs)
                    golden["hidden"] = {"seq": 1, "file": "hidden_1.f32", "shape": list(hs.shape),
                                        "note": "hidden_states[0] = embeddings, [i] = output of "
                                                "layer i-1 (the last may be final-normed)"}
            # Greedy trajectory: full forward each step, no cache, no EOS stop.
            prompt = list(GREEDY_PROMPT)
            ids = list(prompt)
            for _ in range(32):
                logits = model(torch.tensor([ids])).logits[0, -1]
                ids.append(int(torch.argmax(logits)))
            golden["greedy"] = {"prompt": prompt, "ids": ids[len(prompt):]}
            rotary = getattr(model.model, "rotary_emb", None)
            if rotary is not None and hasattr(rotary, "inv_freq"):
                golden["inv_freq"] = rotary.inv_freq.tolist()
                golden["attention_scaling"] = float(getattr(rotary, "attention_scaling", 1.0))
        if name in BF16_REFERENCE:
            golden["bf16_reference"] = bf16_reference(out, golden)
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(golden, f)
        from safetensors import safe_open
        with safe_open(os.path.join(out, "model.safetensors"), "pt") as st:
            print(name, "tensors:", sorted((k, list(st.get_slice(k).get_shape()))
                                          for k in st.keys() if "layers.0." in k or "layers" not in k))
        print(name, "ok", json.dumps(json.load(open(os.path.join(out, "config.json"))))[:600])


if __name__ == "__main__":
    main()
