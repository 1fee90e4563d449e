#!/usr/bin/env python3
"""Load generator for `loom serve` (or any OpenAI-compatible server): streams completions and
reports what users wait for — time to first token, inter-token latency, end-to-end latency (p50 /
p90 / p99) — and the served output tok/s. Standard library only (it runs on the GPU machine,
which has Python but no node), one asyncio loop over raw HTTP/1.1 sockets, so one client process
keeps up with tens of thousands of streamed tokens a second.

Arrivals:
  --concurrency C   closed loop: C requests in flight, a new one as each finishes
  --rate R          open loop: Poisson arrivals at R requests/s (whatever is in flight)
  --burst           every request submitted at once (issue 23's "512 requests all at once")
Lengths: --prompt-tokens / --output-tokens take N (fixed) or A:B (uniform in [A, B]). Prompts are
token ids (POST /v1/completions takes them), drawn at random from --vocab-range, so lengths are
exact without a tokenizer and no two prompts share a prefix unless --shared-prefix K makes the
first K tokens common. Every request asks ignore_eos and include_usage, so the output length is
exact and counted by the server.

  python3 tools/loadgen/loadgen.py --url http://127.0.0.1:8080 --burst --num-requests 512 \\
      --prompt-tokens 1000 --output-tokens 1000 [--json out.json]

--no-stream asks for plain JSON replies (only E2E latency and tok/s: a peer's best case when its
streaming costs it). --time-limit S stops waiting after S seconds: the requests still running count as failed
("unfinished"), so a slow peer still gives its figures for what it completed.

Prints one summary (and --json writes it with the per-request records; with --json - the JSON
goes to stdout and the summary to stderr). Exit status 1 when a
request failed or got fewer tokens than asked (the numbers would not mean what they say).
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import urllib.parse


def parse_range(text):
    """'N' -> (N, N); 'A:B' -> (A, B)."""
    lo, _, hi = text.partition(":")
    lo = int(lo)
    hi = int(hi) if hi else lo
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError(f"{text}: want N or A:B with 1 <= A <= B")
    return lo, hi


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


class Record:
    __slots__ = ("idx", "prompt_tokens", "max_tokens", "start", "first", "last", "end",
                 "chunks", "completion_tokens", "error")

    def __init__(self, idx, prompt_tokens, max_tokens):
        self.idx, self.prompt_tokens, self.max_tokens = idx, prompt_tokens, max_tokens
        self.start = self.first = self.last = self.end = None
        self.chunks = 0
        self.completion_tokens = None
        self.error = None

    def ttft(self):
        return None if self.first is None else self.first - self.start

    def itl(self):
        """Time per output token after the first: what a reader waits per token, whatever the
        chunking (a server may send several tokens in one chunk)."""
        n = self.completion_tokens or 0
        if self.first is None or n < 2 or self.last <= self.first:
            return None
        return (self.last - self.first) / (n - 1)

    def as_dict(self):
        return {"idx": self.idx, "prompt_tokens": self.prompt_tokens, "max_tokens": self.max_tokens,
                "ttft_s": None if self.first is None else self.ttft(),
                "itl_s": None if self.first is None else self.itl(),
                "e2e_s": None if self.end is None else self.end - self.start,
                "chunks": self.chunks, "completion_tokens": self.completion_tokens,
                "error": self.error}


async def read_body_lines(reader, headers):
    """Yields the body's lines (bytes, without the newline), chunked or not."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        pending = b""
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise ConnectionError("connection closed inside a chunked body")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()  # the blank line after the last chunk (no trailers)
                break
            data = await reader.readexactly(size)
            await reader.readexactly(2)  # CRLF
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r")
        if pending:
            yield pending
    elif "content-length" in headers:
        data = await reader.readexactly(int(headers["content-length"]))
        for line in data.split(b"\n"):
            yield line.rstrip(b"\r")
    else:  # delimited by the close
        while True:
            line = await reader.readline()
            if not line:
                break
            yield line.rstrip(b"\r\n")


async def one_request(args, rec, body):
    u = urllib.parse.urlparse(args.url)
    payload = json.dumps(body).encode()
    head = (f"POST {u.path.rstrip('/')}/v1/completions HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
            f"Connection: close\r\n")
    if args.api_key:
        head += f"Authorization: Bearer {args.api_key}\r\n"
    rec.start = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.open_connection(u.hostname, u.port, limit=1 << 22)
        writer.write(head.encode() + b"\r\n" + payload)
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.split()
        status = int(parts[1]) if len(parts) > 1 else 0
        headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        if status != 200:
            text = b"\n".join([line async for line in read_body_lines(reader, headers)])
            rec.error = f"HTTP {status}: {text[:300].decode('utf-8', 'replace')}"
            return
        if not args.stream:  # one JSON body: no TTFT or ITL, only the end
            body_bytes = b"\n".join([line async for line in read_body_lines(reader, headers)])
            rec.end = time.perf_counter()
            reply = json.loads(body_bytes)
            rec.completion_tokens = (reply.get("usage") or {}).get("completion_tokens", 0)
            if rec.completion_tokens != rec.max_tokens:
                rec.error = f"{rec.completion_tokens} completion tokens of {rec.max_tokens}"
            return
        async for line in read_body_lines(reader, headers):
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            now = time.perf_counter()
            # Parsing every event as JSON would cost the client more than the server: a chunk
            # with text has `"text":"` followed by something other than the closing quote.
            if b'"usage":{' in line and b'"completion_tokens"' in line:
                event = json.loads(line[6:])
                if event.get("usage"):
                    rec.completion_tokens = event["usage"]["completion_tokens"]
            if b'"text":"' in line and b'"text":""' not in line:
                if rec.first is None:
                    rec.first = now
                rec.last = now
                rec.chunks += 1
            if b'"error"' in line and rec.error is None:
                event = json.loads(line[6:])
                if "error" in event:
                    rec.error = json.dumps(event["error"])[:300]
        rec.end = time.perf_counter()
        if rec.error is None and rec.completion_tokens != rec.max_tokens:
            rec.error = f"{rec.completion_tokens} completion tokens of {rec.max_tokens}"
        if rec.error is None and rec.first is None:
            rec.error = "no text chunk"
    except (OSError, asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
        rec.error = f"{type(e).__name__}: {e}"
    finally:
        if writer is not None:
            writer.close()


def make_requests(args):
    rng = random.Random(args.seed)
    lo, hi = args.vocab_range
    shared = [rng.randint(lo, hi) for _ in range(args.shared_prefix)]
    out = []
    for i in range(args.num_requests):
        n_prompt = rng.randint(*args.prompt_tokens)
        n_out = rng.randint(*args.output_tokens)
        prompt = shared[:n_prompt] + [rng.randint(lo, hi) for _ in range(n_prompt - len(shared))]
        body = {"model": args.model, "prompt": prompt, "max_tokens": n_out, "ignore_eos": True,
                "temperature": args.temperature, "seed": args.seed * 100003 + i}
        if args.stream:
            body.update(stream=True, stream_options={"include_usage": True})
        out.append((Record(i, n_prompt, n_out), body))
    return out


async def run(args):
    work = make_requests(args)
    t0 = time.perf_counter()
    try:
        await asyncio.wait_for(submit(args, work, t0), args.time_limit or None)
    except asyncio.TimeoutError:
        for r, _ in work:
            if r.error is None and r.end is None:
                r.error = f"unfinished at --time-limit {args.time_limit:g} s"
    wall = time.perf_counter() - t0
    return [r for r, _ in work], wall


async def submit(args, work, t0):
    rng = random.Random(args.seed + 1)
    if args.burst:
        await asyncio.gather(*(one_request(args, r, b) for r, b in work))
    elif args.rate:
        tasks = []
        at = 0.0
        for r, b in work:
            delay = t0 + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one_request(args, r, b)))
            at += rng.expovariate(args.rate)
        await asyncio.gather(*tasks)
    else:
        queue = list(reversed(work))

        async def worker():
            while queue:
                r, b = queue.pop()
                await one_request(args, r, b)
        await asyncio.gather(*(worker() for _ in range(min(args.concurrency, len(work)))))


def summarize(records, wall, args):
    ok = [r for r in records if r.error is None]
    def ms(xs, p):
        v = percentile(xs, p)
        return None if v is None else 1e3 * v
    ttft = [x for x in (r.ttft() for r in ok) if x is not None]
    itl = [x for x in (r.itl() for r in ok) if x is not None]
    e2e = [r.end - r.start for r in ok]
    out_tokens = sum(r.completion_tokens for r in ok)
    s = {
        "url": args.url, "mode": "burst" if args.burst else
        (f"rate {args.rate}/s" if args.rate else f"concurrency {args.concurrency}"),
        "requests": len(records), "failed": len(records) - len(ok), "wall_s": wall,
        "output_tokens": out_tokens, "output_tok_per_s": out_tokens / wall if wall > 0 else 0.0,
        "requests_per_s": len(ok) / wall if wall > 0 else 0.0,
        "prompt_tokens": sum(r.prompt_tokens for r in ok),
    }
    for name, xs in (("ttft", ttft), ("itl", itl), ("e2e", e2e)):
        for p in (50, 90, 99):
            s[f"{name}_p{p}_ms"] = ms(xs, p)
        s[f"{name}_mean_ms"] = 1e3 * statistics.fmean(xs) if xs else None
    s["errors"] = sorted({r.error for r in records if r.error})[:5]
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default="m")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--num-requests", type=int, default=64)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--concurrency", type=int, default=8)
    mode.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals, requests/s")
    mode.add_argument("--burst", action="store_true", help="every request at once")
    ap.add_argument("--prompt-tokens", type=parse_range, default=(128, 128))
    ap.add_argument("--output-tokens", type=parse_range, default=(128, 128))
    ap.add_argument("--shared-prefix", type=int, default=0, help="tokens every prompt shares")
    ap.add_argument("--vocab-range", type=parse_range, default=(100, 5000),
                    help="token ids prompts are drawn from")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-stream", dest="stream", action="store_false",
                    help="plain JSON replies (E2E latency and tok/s only)")
    ap.add_argument("--time-limit", type=float, default=0.0,
                    help="stop after this many seconds; unfinished requests count as failed")
    ap.add_argument("--json", default="", help="write the summary and the records here (- = stdout)")
    args = ap.parse_args()
    if args.concurrency < 1 or args.num_requests < 1 or args.rate < 0 or args.time_limit < 0:
        ap.error("--concurrency and --num-requests must be >= 1, --rate and --time-limit >= 0")
    records, wall = asyncio.run(run(args))
    s = summarize(records, wall, args)
    # With --json - the JSON alone goes to stdout, the summary to stderr.
    log = sys.stderr if args.json == "-" else sys.stdout
    print(f"{s['mode']}: {s['requests']} requests ({s['failed']} failed) in {wall:.2f} s: "
          f"{s['output_tok_per_s']:.1f} output tok/s, {s['requests_per_s']:.2f} req/s", file=log)
    for name in ("ttft", "itl", "e2e"):
        f = lambda key: "      n/a" if s[key] is None else f"{s[key]:9.2f}"
        print(f"  {name:4s} ms  p50 {f(name + '_p50_ms')}  p90 {f(name + '_p90_ms')}  "
              f"p99 {f(name + '_p99_ms')}  mean {f(name + '_mean_ms')}", file=log)
    for e in s["errors"]:
        print(f"  error: {e}", file=log)
    if args.json:
        doc = json.dumps({"summary": s, "records": [r.as_dict() for r in records]}, indent=1)
        if args.json == "-":
            print(doc)
        else:
            with open(args.json, "w") as f:
                f.write(doc)
    sys.exit(1 if s["failed"] else 0)


if __name__ == "__main__":
    main()
