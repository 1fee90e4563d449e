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
between content chunks after the first (ITL), and the aggregate tokens per second.

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


def stream(url, path, body, out, idx):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    times = []
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        times.append(time.perf_counter())
    conn.close()
    gaps = [b - a for a, b in zip(times[1:], times[2:])]
    out[idx] = (statistics.mean(gaps) if gaps else float("nan"), len(times), times)


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
    threads = [threading.Thread(target=stream, args=(args.url, path, dict(body, seed=i), out, i))
               for i in range(args.concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    itl = statistics.median(o[0] for o in out)
    chunks = sum(o[1] for o in out)
    return itl, chunks / wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
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
        for kind in ("A", "B", "C"):
            itl, tps = run_round(args, kind, prompt, padded)
            res[kind].append(itl)
            print(f"round {r} {kind}: ITL median {itl * 1e3:.3f} ms, {tps:.0f} chunks/s", flush=True)
    a, b, c = (statistics.mean(res[k]) for k in "ABC")
    print(f"A (chat + tools) / B (completions, same tokens): ITL {a * 1e3:.3f} / {b * 1e3:.3f} ms "
          f"= {100 * (a / b - 1):+.2f}%")
    print(f"A (chat + tools) / C (chat, no tools, as many tokens): {a * 1e3:.3f} / {c * 1e3:.3f} "
          f"ms = {100 * (a / c - 1):+.2f}%; C / B = {100 * (c / b - 1):+.2f}%")


if __name__ == "__main__":
    main()
