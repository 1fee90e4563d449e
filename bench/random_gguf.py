#!/usr/bin/env python3
"""A random-weight GGUF in the shapes of a bench/configs/*.json Llama config, for llama.cpp as a
speed peer of `loom bench --dummy-weights` (issue 7).

llama.cpp reads it like any Llama GGUF: F16 projection and embedding weights (the same bytes per
token as loom's bf16), F32 norms, an untied output matrix (a tied one reads the same bytes each
step), and no tokenizer (tokenizer.ggml.model = "none" with llama.vocab_size: llama-bench feeds
random ids). Values are N(0, 0.02) from one shared random pool, so writing an 8B file takes
seconds; speed does not depend on them.

With --tokenizer DIR (a Hugging Face byte-level BPE tokenizer.json, e.g. Llama 3's), the file
carries that vocabulary instead (tokenizer.ggml.model = "gpt2", pre "llama-bpe"), so
`llama-server` detokenizes what it generates, as `loom serve --tokenizer DIR` does on the same
shapes: the served-throughput peer of issue 23.

With --quant q8_0, q4_k_m or q5_k_m the projection, embedding and output matrices are quantized instead:
random codes in valid GGUF blocks whose f16 scales are set so values are of HF's initializer size
(nothing is quantized from floats; speed does not depend on values). q4_k_m follows llama.cpp's
Q4_K_M recipe (llama_tensor_get_type): output.weight and the attn_v / ffn_down of the first and
last eighth of the layers and of every third layer between in Q6_K, the rest Q4_K; q5_k_m the
same with Q5_K for Q4_K; q8_0 is all Q8_0. The quantized-weights peer of issue 25.

Needs numpy and llama.cpp's gguf-py (on PYTHONPATH: the llama.cpp checkout's gguf-py folder).

  python3 bench/random_gguf.py bench/configs/llama-3.1-8b.json /tmp/llama-3.1-8b-f16.gguf
"""
import argparse
import json

import numpy as np
import gguf


def tensors(c):
    """(name, shape as numpy rows x cols, dtype) of a Llama checkpoint in llama.cpp's names."""
    d, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    h, kvh = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or d // h
    out = [("token_embd.weight", (v, d), np.float16)]
    for i in range(c["num_hidden_layers"]):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", (d,), np.float32),
            (p + "attn_q.weight", (h * hd, d), np.float16),
            (p + "attn_k.weight", (kvh * hd, d), np.float16),
            (p + "attn_v.weight", (kvh * hd, d), np.float16),
            (p + "attn_output.weight", (d, h * hd), np.float16),
            (p + "ffn_norm.weight", (d,), np.float32),
            (p + "ffn_gate.weight", (f, d), np.float16),
            (p + "ffn_up.weight", (f, d), np.float16),
            (p + "ffn_down.weight", (d, f), np.float16),
        ]
    out += [("output_norm.weight", (d,), np.float32), ("output.weight", (v, d), np.float16)]
    return out


# GGUF block layouts (ggml-common.h): bytes a block, elements a block, where the f16 scales sit
# and the values they get (scale fields are overwritten; every other byte is a random code).
BLOCKS = {
    "Q8_0": (34, 32, [(0, 2.7e-4)]),
    "Q4_K": (144, 256, [(0, 1.0e-4), (2, 1.0e-4)]),
    "Q6_K": (210, 256, [(208, 6.2e-5)]),
    "Q5_K": (176, 256, [(0, 1.0e-4), (2, 1.0e-4)]),
}


def quant_type(name, layer, n_layers, quant):
    """The GGML type of a matrix under --quant (None: keep F16)."""
    if quant == "q8_0":
        return "Q8_0"
    if name == "output.weight":
        return "Q6_K"
    if name.endswith(("attn_v.weight", "ffn_down.weight")):
        more = layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2
        base = "Q5_K" if quant == "q5_k_m" else "Q4_K"
        return "Q6_K" if more else base
    return "Q5_K" if quant == "q5_k_m" else "Q4_K"


def random_blocks(pool, qtype, rows, cols):
    """rows x (cols / block elems) random blocks of qtype as a uint8 [rows, row bytes] array."""
    size, elems, scales = BLOCKS[qtype]
    nb = rows * cols // elems
    blocks = pool[: nb * size].reshape(nb, size).copy()
    for off, value in scales:
        blocks[:, off : off + 2] = np.frombuffer(np.float16(value).tobytes(), dtype=np.uint8)
    return blocks.reshape(rows, cols // elems * size)


def add_bpe_vocab(w, tokenizer_dir, vocab_size, config):
    """Writes the byte-level BPE vocabulary of DIR/tokenizer.json (ids 0..vocab_size-1; ids no
    token names get a placeholder) with its merges and the config's BOS / EOS ids."""
    with open(f"{tokenizer_dir}/tokenizer.json") as fh:
        t = json.load(fh)
    model = t["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"random_gguf.py: --tokenizer needs a BPE tokenizer.json, not {model.get('type')!r}")
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [gguf.TokenType.UNUSED] * vocab_size
    for text, i in model["vocab"].items():
        if i < vocab_size:
            tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for added in t.get("added_tokens", []):
        i = added["id"]
        if i < vocab_size:
            tokens[i] = added["content"]
            types[i] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eos = config.get("eos_token_id")
    if config.get("bos_token_id") is not None:
        w.add_bos_token_id(config["bos_token_id"])
    if eos is not None:
        w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    w.add_add_bos_token(False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--tokenizer", help="directory of a BPE tokenizer.json to carry as the vocabulary")
    ap.add_argument("--quant", choices=["q8_0", "q4_k_m", "q5_k_m"], help="quantized matrices (random codes)")
    args = ap.parse_args()
    with open(args.config) as fh:
        c = json.load(fh)
    if c.get("model_type") != "llama":
        raise SystemExit(f"random_gguf.py: only Llama configs, not {c.get('model_type')!r}")
    d, h = c["hidden_size"], c["num_attention_heads"]
    hd = c.get("head_dim") or d // h

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name(c.get("_name_or_path", args.config))
    w.add_context_length(c.get("max_position_embeddings", 8192))
    w.add_embedding_length(d)
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(h)
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(c.get("rope_theta", 10000.0))
    w.add_layer_norm_rms_eps(c.get("rms_norm_eps", 1e-5))
    w.add_vocab_size(c["vocab_size"])
    w.add_file_type({None: gguf.LlamaFileType.MOSTLY_F16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                     "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M,
                     "q5_k_m": gguf.LlamaFileType.MOSTLY_Q5_K_M}[args.quant])
    if args.tokenizer:
        add_bpe_vocab(w, args.tokenizer, c["vocab_size"], c)
    else:
        w.add_tokenizer_model("none")

    specs = tensors(c)
    n_layers = c["num_hidden_layers"]
    largest = max(int(np.prod(s)) for _, s, t in specs if t == np.float16)
    pool = (np.random.default_rng(0).standard_normal(largest, dtype=np.float32) * 0.02).astype(
        np.float16)
    codes = np.random.default_rng(1).integers(0, 256, size=largest * 9 // 8, dtype=np.uint8)
    ones = np.ones(d, dtype=np.float32)
    plan = []  # (name, GGML type or None, shape)
    for name, shape, dtype in specs:
        layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
        q = quant_type(name, layer, n_layers, args.quant) if args.quant and dtype == np.float16 else None
        if q is not None:
            size, elems, _ = BLOCKS[q]
            byte_shape = (shape[0], shape[1] // elems * size)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), byte_shape[0] * byte_shape[1],
                              raw_dtype=gguf.GGMLQuantizationType[q])
        else:
            w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
        plan.append((name, q, shape, dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    total = 0
    for name, q, shape, dtype in plan:
        if q is not None:
            data = random_blocks(codes, q, *shape)
        else:
            data = ones if dtype == np.float32 else pool[: int(np.prod(shape))].reshape(shape)
        w.write_tensor_data(data)
        total += data.nbytes
    w.close()
    print(f"{args.out}: {len(specs)} tensors, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
