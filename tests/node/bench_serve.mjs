// Load generator for `loom serve` (not a test): C concurrent streaming completions, each
// --gen tokens (ignore_eos) after a --prompt-tokens-long prompt given as token ids; reports TTFT
// and inter-token latency p50/p99 and output tok/s.
//   node bench_serve.mjs --url http://127.0.0.1:8080 --concurrency 8 --requests 32 --gen 128
const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) =>
  (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const url = args.url || 'http://127.0.0.1:8080';
const C = Number(args.concurrency || 8), R = Number(args.requests || 4 * C);
const GEN = Number(args.gen || 128), PROMPT = Number(args['prompt-tokens'] || 16);
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

async function one(i) {
  const prompt = Array.from({ length: PROMPT }, (_, k) => 3 + ((i * 31 + k * 7) % 400));
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: GEN, ignore_eos: true, temperature: 0.8, seed: i, stream: true,
      stream_options: { include_usage: true } }) });
  const reader = r.body.getReader(); const dec = new TextDecoder();
  let buf = '', first = 0, last = 0, tokens = 0; const gaps = [];
  for (;;) {
    const { value, done } = await reader.read(); if (done) break;
    buf += dec.decode(value, { stream: true }); let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k); buf = buf.slice(k + 2);
      if (!ev.startsWith('data: {')) continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) { tokens = j.usage.completion_tokens; continue; }
      if (!j.choices.length || !j.choices[0].text) continue;
      const now = performance.now();
      if (!first) first = now; else gaps.push(now - last);
      last = now;
    }
  }
  return { ttft: first - t0, gaps, tokens, end: performance.now() };
}

// Node loads its fetch implementation on the first call (tens of ms): do that before the clock
// starts, so TTFT and output tok/s measure the server, not the client's module loading.
await (await fetch(`${url}/health`)).text();
const t0 = performance.now(); let next = 0; const results = [];
await Promise.all(Array.from({ length: C }, async () => { while (next < R) results.push(await one(next++)); }));
const wall = (performance.now() - t0) / 1000;
const tokens = results.reduce((a, r) => a + r.tokens, 0);
const gaps = results.flatMap((r) => r.gaps), ttft = results.map((r) => r.ttft);
console.log(JSON.stringify({ concurrency: C, requests: R, gen: GEN, prompt_tokens: PROMPT,
  output_tok_s: +(tokens / wall).toFixed(1), ttft_ms_p50: +pct(ttft, 0.5).toFixed(1), ttft_ms_p99: +pct(ttft, 0.99).toFixed(1),
  itl_ms_p50: +pct(gaps, 0.5).toFixed(2), itl_ms_p99: +pct(gaps, 0.99).toFixed(2) }));
