#!/usr/bin/env python3
"""Served inter-token latency with and without tool calling, same prompt tokens (issue 22's
"tool-call parsing adds < 1% to served ITL at concurrency 64").

  A: POST /v1/chat/completions with `tools` (tool_choice auto): the reply runs through the
     tool-call parser and the lazy tool-call grammar's masks.
  B: POST /v1/completions with the same prompt text A's chat template renders (rendered here
     with transformers' apply_chat_template from the tokenizer directory): no parser, no grammar.
  C: POST /v1/chat/completions without tools, a system message padded so the rendered prompt
     has as many tokens as A's: the chat route and its parsers' plain-text path, no grammar.

Both stream `--max-tokens` tokens (ignore_eos) at `--concurrency` concurrent requests; rounds
alternate A, B, A, B. Prints, per round, the median over streams of each stream's mean gap
between chunks after the first, each stream's time per token (first to last chunk over
max_tokens - 1: what a user waits per token, whatever the chunking) and the aggregate tokens per
second; the A/B lines compare the per-token ITL.

  python3 tools/cuda/itl_tools_ab.py --url http://127.0.0.1:8080 --tokenizer DIR
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city."},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}},
            "required": ["city"]},
    },
}, {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "offset": {"type": "integer"}},
            "required": ["path"]},
    },
}]
MESSAGES = [{"role": "user", "content": "What will the weather be in Paris this week? "
             "Tell me in detail, day by day."}]


def stream(url, path, body, out, idx, out_tokens):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    times = []  # arrival of each chunk that carries output text (not the role or the finish)
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        now = time.perf_counter()
        choices = json.loads(line[5:]).get("choices") or [{}]
        c = choices[0]
        d = c.get("delta") or {}
        if c.get("text") or d.get("content") or d.get("reasoning_content") or d.get("tool_calls"):
            times.append(now)
    conn.close()
    gaps = [b - a for a, b in zip(times[1:], times[2:])]
    # Per token: a parser that holds back a possible marker sends fewer, larger chunks, so the
    # chunk gap alone would count held-back tokens as latency.
    per_token = (times[-1] - times[0]) / (out_tokens - 1) if len(times) > 1 else float("nan")
    out[idx] = (statistics.mean(gaps) if gaps else float("nan"), len(times), per_token)


def run_round(args, kind, prompt, padded=None):
    if kind == "C":
        path = "/v1/chat/completions"
        body = {"model": "m", "messages": padded, "max_tokens": args.max_tokens,
                "ignore_eos": True, "stream": True, "temperature": 1.0,
                "chat_template_kwargs": {"enable_thinking": False}}
    elif kind == "A":
        path = "/v1/chat/completions"
        body = {"model": "m", "messages": MESSAGES, "tools": TOOLS, "tool_choice": "auto",
                "max_tokens": args.max_tokens, "ignore_eos": True, "stream": True,
                "temperature": 1.0, "chat_template_kwargs": {"enable_thinking": False}}
    else:
        path = "/v1/completions"
        body = {"model": "m", "prompt": prompt, "max_tokens": args.max_tokens,
                "ignore_eos": True, "stream": True, "temperature": 1.0}
    out = [None] * args.concurrency
    threads = [threading.Thread(target=stream,
                                args=(args.url, path, dict(body, seed=i), out, i, args.max_tokens))
               for i in range(args.concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    itl = statistics.median(o[0] for o in out)
    per_token = statistics.median(o[2] for o in out)
    chunks = sum(o[1] for o in out)
    return itl, chunks / wall, per_token, args.concurrency * args.max_tokens / wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kinds", default="ABC", help="which arms to run (e.g. A: tools only)")
    args = ap.parse_args()
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    prompt = tok.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False,
                                     add_generation_prompt=True, enable_thinking=False)
    n = len(tok(prompt)["input_ids"])
    pad = ""
    while True:
        padded = [{"role": "system", "content": "Notes:" + pad}] + MESSAGES
        m = len(tok(tok.apply_chat_template(padded, tokenize=False, add_generation_prompt=True,
                                            enable_thinking=False))["input_ids"])
        if m >= n:
            break
        pad += " x"
    print(f"prompt: {n} tokens (C: {m})")
    run_round(args, "B", prompt)  # warm-up (graphs, caches)
    res = {"A": [], "B": [], "C": []}
    for r in range(args.rounds):
        for kind in args.kinds:
            itl, cps, per_token, tps = run_round(args, kind, prompt, padded)
            res[kind].append(per_token)
            print(f"round {r} {kind}: chunk gap median {itl * 1e3:.3f} ms ({cps:.0f} chunks/s), "
                  f"per-token ITL median {per_token * 1e3:.3f} ms, {tps:.0f} tok/s", flush=True)
    if args.kinds != "ABC":
        return
    a, b, c = (statistics.mean(res[k]) for k in "ABC")
    print(f"per-token ITL, A (chat + tools) / B (completions, same tokens): {a * 1e3:.3f} / {b * 1e3:.3f} ms "
          f"= {100 * (a / b - 1):+.2f}%")
    print(f"A (chat + tools) / C (chat, no tools, as many tokens): {a * 1e3:.3f} / {c * 1e3:.3f} "
          f"ms = {100 * (a / c - 1):+.2f}%; C / B = {100 * (c / b - 1):+.2f}%")


if __name__ == "__main__":
    main()
