#!/usr/bin/env python3
"""HF transformers as a decode-speed peer for `loom bench --dummy-weights` (issue 7).

Builds a model from one of bench/configs/*.json with random bf16 weights on the GPU (no hub
access), then times greedy decoding the way `loom bench` reports it: `batch` sequences with a
512-token random prompt each generate `gen` tokens (EOS never stops them: min_new_tokens); decode
tok/s = batch * (gen - 1) / (time of the full generate - time of a 1-token generate, i.e. the
prefill). Static KV cache (cache_implementation="static"); with --compile the forward runs under
torch.compile(mode="reduce-overhead") (CUDA graphs), else eager.

--compile does not run with transformers 5.17 / torch 2.11 on the H200 (2026-11-30, 1B and 8B):
generate's StaticCache updates mutate tensors inside the captured graph ("accessing tensor output
of CUDAGraphs that has been overwritten"); calling torch.compiler.cudagraph_mark_step_begin()
before each forward instead makes inductor skip CUDA graphs (the cache's in-place
cumulative_length.add_) and the process then crashed (SIGSEGV). The peer figures are eager.

  python3 bench/hf_decode_peer.py bench/configs/llama-3.2-1b.json --batch 1 [--compile]
"""
import argparse
import json
import time

import torch
import transformers


def build(config_path):
    with open(config_path) as f:
        fields = json.load(f)
    model_type = fields.pop("model_type")
    for key in ("architectures", "torch_dtype", "transformers_version"):
        fields.pop(key, None)
    config = transformers.AutoConfig.for_model(model_type, **fields)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    return model.eval()


def timed_generate(model, ids, new_tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                   cache_implementation="static", pad_token_id=0)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = build(args.config)
    if args.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    vocab = model.config.vocab_size
    ids = torch.randint(1, vocab, (args.batch, args.prompt), device="cuda")
    timed_generate(model, ids, 4)  # warm-up (and compilation)
    prefill = min(timed_generate(model, ids, 1) for _ in range(2))
    total = min(timed_generate(model, ids, args.gen) for _ in range(2))
    tok_s = args.batch * (args.gen - 1) / max(total - prefill, 1e-9)
    mode = "compiled" if args.compile else "eager"
    print(f"hf-transformers {transformers.__version__} {mode} static-cache {args.config} "
          f"batch {args.batch}: decode {tok_s:.1f} tok/s (prefill {prefill * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
