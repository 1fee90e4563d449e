#!/usr/bin/env python3
"""Trains loom's embedded default model on the GPU machine (torch + tokenizers + transformers).

Input : the corpus written by prepare_corpus.py (--data, default .data/ beside this file).
Output: a Hugging Face Llama directory (--out): config.json, generation_config.json,
        model.safetensors (bf16, tied embeddings), tokenizer.json, tokenizer_config.json,
        special_tokens_map.json, metrics.json (held-out perplexity), samples.md, golden.json.

Steps: (1) byte-level BPE tokenizer trained on the train split; (2) a small Llama
(GQA, RoPE, RMSNorm, SwiGLU) trained with bf16 autocast on random 512-token windows of the packed
train stream, keeping the weights with the best validation loss; (3) export, reload with
LlamaForCausalLM.from_pretrained (float32, eager attention) and measure held-out (test split)
perplexity with the shipped weights; (4) samples and the golden file for loom's C++ tests.

Seeded (--seed) for reproducibility; GPU kernels (attention backward) are not bit-deterministic.
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

SPECIALS = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
BOS, SYS, USER, ASSIST, END = range(5)
# HF chat template (jinja). Same rendering as render_chat() below; checked at export.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")


def render_chat(messages, add_generation_prompt=False):
    s = SPECIALS[BOS]
    for m in messages:
        s += "<|" + m["role"] + "|>\n" + m["content"] + "<|end|>\n"
    if add_generation_prompt:
        s += "<|assistant|>\n"
    return s


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def load_corpus(data):
    chapters = [json.loads(l) for l in open(os.path.join(data, "chapters.jsonl"))]
    chat = [json.loads(l) for l in open(os.path.join(data, "chat.jsonl"))]
    return chapters, chat


def chapter_doc(ch):
    return SPECIALS[BOS] + "\n".join(ch["verses"]) + "\n"


def train_tokenizer(chapters, chat, vocab_size, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)

    def texts():
        for ch in chapters:
            if ch["split"] == "train":
                yield "\n".join(ch["verses"]) + "\n"
        for ex in chat:
            for m in ex["messages"]:
                yield m["content"] + "\n"

    tok.train_from_iterator(texts(), trainer=trainer)
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    tok.save(os.path.join(out, "tokenizer.json"))
    tcfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS[BOS],
        "eos_token": SPECIALS[END],
        "pad_token": SPECIALS[BOS],
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 512,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": SPECIALS[BOS], "eos_token": SPECIALS[END],
                   "pad_token": SPECIALS[BOS],
                   "additional_special_tokens": SPECIALS[1:4]}, f, indent=2)
    return tok


def model_config(args, vocab_size):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": args.dim,
        "intermediate_size": args.ffn,
        "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads,
        "num_key_value_heads": args.kv_heads,
        "head_dim": args.dim // args.heads,
        "hidden_act": "silu",
        "max_position_embeddings": args.seq,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "bos_token_id": BOS,
        "eos_token_id": END,
        "pad_token_id": BOS,
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


@torch.no_grad()
def eval_stream(model, ids, seq, batch, dev, autocast):
    """Mean NLL (nats/token) over non-overlapping windows of `seq` targets of a token stream."""
    ids = torch.tensor(ids, dtype=torch.long)
    n = (len(ids) - 1) // seq
    xs = ids[:n * seq].view(n, seq)
    ys = ids[1:n * seq + 1].view(n, seq)
    tot, cnt = 0.0, 0
    model.eval()
    for i in range(0, n, batch):
        x, y = xs[i:i + batch].to(dev), ys[i:i + batch].to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=x).logits
        tot += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1),
                               reduction="sum").item()
        cnt += y.numel()
    model.train()
    return tot / cnt, cnt


@torch.no_grad()
def generate(model, ids, n, dev, greedy=True, temperature=0.8, top_p=0.9, gen=None,
             stop=(END, BOS), max_ctx=512):
    ids = list(ids)
    out = []
    for _ in range(n):
        x = torch.tensor([ids[-max_ctx:]], device=dev)
        logits = model(input_ids=x).logits[0, -1].float()
        if greedy:
            nxt = int(logits.argmax())
        else:
            probs = torch.softmax(logits / temperature, -1)
            sp, si = probs.sort(descending=True)
            keep = sp.cumsum(-1) - sp < top_p
            sp = sp * keep
            nxt = int(si[torch.multinomial(sp / sp.sum(), 1, generator=gen)])
        ids.append(nxt)
        out.append(nxt)
        if stop and nxt in stop:
            break
    return out


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, ".data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--dropout", type=float, default=0.15,
                    help="residual dropout on attention and MLP outputs (training only)")
    ap.add_argument("--max-train-seconds", type=float, default=300)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    log(f"torch {torch.__version__} transformers {transformers.__version__} "
        f"gpu {torch.cuda.get_device_name(0)}")

    # ---- data + tokenizer -----------------------------------------------------------------
    chapters, chat = load_corpus(args.data)
    t0 = time.time()
    tok = train_tokenizer(chapters, chat, args.vocab, args.out)
    V = tok.get_vocab_size()
    log(f"tokenizer: vocab {V} in {time.time() - t0:.1f}s")
    docs = {"train": [], "val": [], "test_kjv": [], "test_web": []}
    for ch in chapters:
        key = ch["split"] if ch["split"] != "test" else "test_" + ch["src"]
        docs[key].append(chapter_doc(ch))
    docs["train"] += [render_chat(ex["messages"]) for ex in chat]
    random.Random(args.seed).shuffle(docs["train"])
    streams, nbytes = {}, {}
    for k, ds in docs.items():
        encs = tok.encode_batch(ds)
        streams[k] = [i for e in encs for i in e.ids]
        nbytes[k] = sum(len(d.encode("utf-8")) - len(SPECIALS[BOS]) for d in ds)
        log(f"{k}: {len(ds)} docs, {len(streams[k])} tokens, {nbytes[k]} bytes "
            f"({nbytes[k] / len(streams[k]):.2f} bytes/token)")

    # ---- model -----------------------------------------------------------------------------
    cfg_dict = model_config(args, V)
    write_json(os.path.join(args.out, "config.json"), cfg_dict)
    write_json(os.path.join(args.out, "generation_config.json"), {
        "bos_token_id": BOS, "eos_token_id": [END, BOS], "pad_token_id": BOS,
        "do_sample": True, "temperature": 0.8, "top_p": 0.9, "max_new_tokens": 128})
    config = LlamaConfig.from_pretrained(args.out)
    model = LlamaForCausalLM(config).to(device=dev, dtype=torch.float32)
    rot = getattr(model.model, "rotary_emb", None)
    if rot is not None and hasattr(rot, "inv_freq"):
        hd = args.dim // args.heads
        want = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32, device=dev) / hd))
        assert torch.allclose(rot.inv_freq.float(), want, rtol=1e-4), "unexpected RoPE freqs"
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), \
        "embeddings are not tied"
    nparams = sum(p.numel() for p in model.parameters())
    log(f"model: {nparams} params, attn={getattr(config, '_attn_implementation', '?')}, "
        f"config rope={getattr(config, 'rope_parameters', None)}")

    # Residual dropout (GPT-2 style) via forward hooks: HF Llama has no hidden dropout, and the
    # corpus is small (a 4.6M model overfits it after ~5 epochs). Hooks are not saved.
    def drop_hook(_module, _inputs, output):
        if isinstance(output, tuple):
            return (F.dropout(output[0], args.dropout, model.training),) + tuple(output[1:])
        return F.dropout(output, args.dropout, model.training)

    hooks = []
    if args.dropout > 0:
        for layer in model.model.layers:
            hooks.append(layer.self_attn.register_forward_hook(drop_hook))
            hooks.append(layer.mlp.register_forward_hook(drop_hook))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    data = torch.tensor(streams["train"], dtype=torch.long, device=dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    ar = torch.arange(args.seq + 1, device=dev)
    best = (float("inf"), -1, None)
    history = []
    t0 = time.time()
    model.train()
    step = 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        ix = torch.randint(0, data.numel() - args.seq - 1, (args.batch,), device=dev,
                           generator=gen)
        chunk = data[ix[:, None] + ar[None, :]]
        x, y = chunk[:, :-1], chunk[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        last = step == args.steps - 1 or time.time() - t0 > args.max_train_seconds
        if (step + 1) % args.eval_every == 0 or last:
            vl, _ = eval_stream(model, streams["val"], args.seq, 64, dev, True)
            history.append({"step": step + 1, "train_loss": loss.item(), "val_loss": vl,
                            "seconds": round(time.time() - t0, 1)})
            log(f"step {step + 1} lr {lr_at(step):.2e} train {loss.item():.3f} val {vl:.3f} "
                f"ppl {math.exp(vl):.2f} ({time.time() - t0:.0f}s)")
            if vl < best[0]:
                best = (vl, step + 1,
                        {k: v.detach().clone() for k, v in model.state_dict().items()})
        if last:
            break
    train_seconds = time.time() - t0
    log(f"trained {step + 1} steps in {train_seconds:.0f}s; best val {best[0]:.3f} "
        f"at step {best[1]}")
    model.load_state_dict(best[2])
    for h in hooks:
        h.remove()
    # Everything below is exact float32 (no TF32), as loom's reference outputs must be.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    # ---- export (bf16, tied: no lm_head) ---------------------------------------------------
    from safetensors.torch import save_file
    sd = {k: v.detach().to(torch.bfloat16).contiguous().cpu()
          for k, v in model.state_dict().items()
          if k.endswith(".weight") and k != "lm_head.weight"}
    st_path = os.path.join(args.out, "model.safetensors")
    save_file(sd, st_path, metadata={"format": "pt"})
    log(f"wrote {st_path}: {os.path.getsize(st_path)} bytes, {len(sd)} tensors")

    # ---- reload exactly as a user would and measure held-out perplexity ------------------
    try:
        m2, info = LlamaForCausalLM.from_pretrained(args.out, dtype=torch.float32,
                                                   attn_implementation="eager",
                                                   output_loading_info=True)
    except TypeError:
        m2, info = LlamaForCausalLM.from_pretrained(args.out, torch_dtype=torch.float32,
                                                   attn_implementation="eager",
                                                   output_loading_info=True)
    log(f"reload info: { {k: list(v)[:5] for k, v in info.items() if v} }")
    m2 = m2.to(dev).eval()
    assert m2.lm_head.weight.data_ptr() == m2.model.embed_tokens.weight.data_ptr()
    probe = torch.tensor([streams["test_kjv"][:64]], device=dev)
    with torch.no_grad():
        # Round the parameters only: casting the whole module would also round the RoPE
        # inv_freq buffer to bf16 (the first committed run did that and logged a ~9e-3 false
        # alarm here; the shipped files are unaffected).
        for prm in model.parameters():
            prm.copy_(prm.to(torch.bfloat16).float())
        model.eval()
        ref = model(input_ids=probe).logits
        got = m2(input_ids=probe).logits
    maxdiff = (ref - got).abs().max().item()
    log(f"reloaded vs trained (bf16-rounded) logits max |diff| = {maxdiff:.2e}")
    if maxdiff > 2e-3:
        log("WARNING: reloaded model differs from the trained one by more than 2e-3")
    del model
    metrics = {"params": nparams, "steps": step + 1, "best_step": best[1],
               "train_seconds": round(train_seconds, 1), "tokens_seen":
               (step + 1) * args.batch * args.seq, "train_tokens": len(streams["train"]),
               "history": history, "args": vars(args), "reload_max_logit_diff": maxdiff,
               "torch": torch.__version__, "transformers": transformers.__version__}
    for k in ("val", "test_kjv", "test_web"):
        nll, cnt = eval_stream(m2, streams[k], args.seq, 16, dev, False)
        metrics[k] = {"tokens": cnt, "nll_per_token": nll, "perplexity": math.exp(nll),
                      "bits_per_byte": nll * len(streams[k]) / math.log(2) / nbytes[k]}
        log(f"{k}: ppl {math.exp(nll):.2f} over {cnt} tokens, "
            f"{metrics[k]['bits_per_byte']:.3f} bits/byte (float32 reload of shipped bf16)")
    write_json(os.path.join(args.out, "metrics.json"), metrics)

    # ---- samples ---------------------------------------------------------------------------
    def enc(text):
        return tok.encode(text).ids

    def dec(ids):
        return tok.decode([i for i in ids if i >= len(SPECIALS)], skip_special_tokens=True)

    samples = [
        ("text", "And the LORD said unto Moses,", True),
        ("text", "Blessed are the", False),
        ("chat", "What is love?", True),
        ("chat", "Tell me about the sea.", False),
        ("chat", "Hello, who are you?", False),
        ("chat", "Give me a verse about wisdom.", True),
        ("text", "In the beginning", False),
    ]
    sgen = torch.Generator(device=dev)
    lines = ["# Sample completions of models/default",
             "", "Generated by tools/train_default_model/train.py after training, from the shipped",
             "weights reloaded in float32. Sampled ones: temperature 0.8, top-p 0.9, seed "
             f"{args.seed} + index. Chat prompts use the model's chat template.", ""]
    for i, (kind, prompt, greedy) in enumerate(samples):
        sgen.manual_seed(args.seed + i)
        ids = ([BOS] + enc(prompt) if kind == "text" else
               enc(render_chat([{"role": "user", "content": prompt}], True)))
        out = generate(m2, ids, 100, dev, greedy=greedy, gen=sgen)
        text = dec(out)
        mode = "greedy" if greedy else "sampled"
        log(f"SAMPLE {i} [{kind}, {mode}] {prompt!r} -> {text!r}")
        lines += [f"## {i + 1}. {kind}, {mode}", "", f"Prompt: `{prompt}`", "",
                  "> " + text.replace("\n", "\n> "), ""]
    with open(os.path.join(args.out, "samples.md"), "w") as f:
        f.write("\n".join(lines))

    # ---- golden for loom's C++ tests -------------------------------------------------------
    try:
        from transformers import AutoTokenizer
        hft = AutoTokenizer.from_pretrained(args.out)
        conv = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is love?"}]
        rendered = hft.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
        template_ok = rendered == render_chat(conv, True)
        log(f"HF chat template matches render_chat: {template_ok}; {rendered!r}")
        hf_ids = hft(rendered, add_special_tokens=False)["input_ids"]
        tok_ok = hf_ids == enc(rendered)
        log(f"AutoTokenizer ids match tokenizers ids: {tok_ok}")
    except Exception as e:  # report, keep going: the golden below does not depend on it
        log(f"AutoTokenizer check failed: {e!r}")
        template_ok = tok_ok = False
        conv = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is love?"}]
        rendered = render_chat(conv, True)

    def f7(x):
        return float(f"{x:.7g}")

    # The golden is computed on the CPU in float32 (what loom's CPU backend is checked against).
    with torch.no_grad():
        gpu_probe = m2(input_ids=probe).logits.float().cpu()
        m2 = m2.cpu()
        dev = "cpu"
        cpu_diff = (m2(input_ids=probe.cpu()).logits.float() - gpu_probe).abs().max().item()
    log(f"golden on CPU; CPU vs GPU float32 logits max |diff| = {cpu_diff:.2e}")
    seqs = []
    for text in ["<|endoftext|>In the beginning God created the heaven and the earth.",
                 rendered]:
        ids = enc(text)
        with torch.no_grad():
            lg = m2(input_ids=torch.tensor([ids], device=dev)).logits[0].float().cpu()
        seqs.append({"text": text, "ids": ids, "argmax": lg.argmax(-1).tolist(),
                     "last_logits": [f7(v) for v in lg[-1].tolist()]})
    gprompt = "<|endoftext|>And God said,"
    gids = enc(gprompt)
    greedy_ids = generate(m2, gids, 32, dev, greedy=True, stop=())
    with open(st_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    golden = {
        "generated_by": "tools/train_default_model/train.py: LlamaForCausalLM.from_pretrained("
                        "models/default, dtype=float32, attn_implementation='eager'), "
                        f"torch {torch.__version__}, transformers {transformers.__version__}",
        "model_safetensors_sha256": sha,
        "notes": "ids include special tokens verbatim (tokenizer adds none). last_logits: "
                 "float32 logits at the last position; argmax: per-position argmax. greedy: "
                 "32 argmax steps with full recompute, not stopping at eos.",
        "chat_template_check": {"messages": conv, "add_generation_prompt": True,
                                "rendered": rendered, "hf_matches_reference": template_ok,
                                "hf_ids_match": tok_ok},
        "tokenization": [{"text": t, "ids": enc(t)} for t in [
            "In the beginning God created the heaven and the earth.",
            "Hello, world! “Quotes” and ’apostrophes’ — dashes."
            "\n\nNew lines  and  spaces.",
            "<|user|>\nHi<|end|>\n<|assistant|>\n"]],
        "sequences": seqs,
        "greedy": {"prompt": gprompt, "prompt_ids": gids, "generated_ids": greedy_ids,
                   "generated_text": tok.decode(greedy_ids, skip_special_tokens=False)},
    }
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f)
    log("golden written; greedy: " + repr(golden["greedy"]["generated_text"]))
    for fn in sorted(os.listdir(args.out)):
        log(f"  {fn}: {os.path.getsize(os.path.join(args.out, fn))} bytes")
    log("done")


if __name__ == "__main__":
    sys.exit(main())
