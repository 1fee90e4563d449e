// llama.cpp peer for `loom bench`: the prebuilt CPU build of llama.cpp that node-llama-cpp 3.21.1
// ships (never a GPU, never a build from source), driven through its lowest-overhead API, a
// context sequence's evaluate() over token ids.
//
//   node bench.mjs FILE --threads N --prompt-tokens P --gen-tokens G [--repeat R] [--json]
//
// Measures what `loom bench` measures (src/cli/bench.cc), best of --repeat:
//   prefill tok/s = P / (time from submitting a random P-token prompt to its first sampled token)
//   decode tok/s  = (G - 1) / (time between the first and the G-th greedily sampled token) for an
//                   8-token random prompt; EOS does not stop generation (yieldEogToken).
// Each run starts from an empty sequence with distinct random prompt ids (no prefix reuse).
import fs from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
  if (msg) console.error(`bench.mjs: ${msg}`);
  console.error(
    "usage: node bench.mjs FILE --threads N --prompt-tokens P --gen-tokens G [--repeat R] [--json]");
  process.exit(2);
}

function parseArgs(argv) {
  const o = { file: null, threads: 2, promptTokens: 128, genTokens: 64, repeat: 1, json: false };
  const ints = { "--threads": "threads", "--prompt-tokens": "promptTokens",
                 "--gen-tokens": "genTokens", "--repeat": "repeat" };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === "--json") o.json = true;
    else if (a in ints) {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 1) usage(`${a} needs a positive integer`);
      o[ints[a]] = v;
    } else if (a.startsWith("-")) usage(`unknown flag ${a}`);
    else if (o.file == null) o.file = a;
    else usage(`unexpected argument ${a}`);
  }
  if (o.file == null) usage("no GGUF file given");
  if (!fs.existsSync(o.file)) usage(`${o.file}: no such file`);
  if (o.genTokens < 2) usage("--gen-tokens must be >= 2");
  return o;
}

// mulberry32: a small seeded PRNG, so prompts are reproducible run to run.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomPrompt(n, vocab, seed) {
  const r = rng(seed);
  return Array.from({ length: n }, () => 3 + Math.floor(r() * (vocab - 3)));
}

// Peak resident set of this process (VmHWM), MB.
function peakRssMb() {
  const m = fs.readFileSync("/proc/self/status", "utf8").match(/VmHWM:\s+(\d+) kB/);
  return m ? Number(m[1]) / 1024 : NaN;
}

// Evaluates `prompt` then generates until `count` tokens were sampled; returns the times (ms,
// relative to the start) at which the first and the last token arrived.
async function generate(sequence, prompt, count) {
  await sequence.clearHistory();
  const t0 = performance.now();
  let first = 0, n = 0;
  for await (const _token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
    if (++n === 1) first = performance.now() - t0;
    if (n === count) break;
  }
  if (n !== count) throw new Error(`generation stopped after ${n} of ${count} tokens`);
  return { first, last: performance.now() - t0 };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const llama = await getLlama({
    gpu: false,              // CPU only
    build: "never",          // prebuilt binaries only; never compile from source
    usePrebuiltBinaries: true,
    maxThreads: o.threads,
    logLevel: LlamaLogLevel.error,
    progressLogs: false,
  });
  if (llama.gpu !== false) throw new Error(`expected the CPU build, got gpu=${llama.gpu}`);
  const model = await llama.loadModel({ modelPath: o.file, gpuLayers: 0, useMmap: true });
  const embd = (model.fileInfo.tensorInfo ?? []).find((t) => t.name === "token_embd.weight");
  if (embd == null) throw new Error(`${o.file}: no token_embd.weight tensor`);
  const vocab = Number(embd.dimensions[1]);  // ggml ne = [hidden, vocab]
  const ctxSize = Math.ceil((Math.max(o.promptTokens, 8 + o.genTokens) + 1) / 256) * 256;
  const context = await model.createContext({
    contextSize: ctxSize,
    batchSize: Math.max(o.promptTokens, 8),  // the whole prompt in one batch, as loom does
    sequences: 1,
    threads: { ideal: o.threads, min: o.threads },
  });
  const sequence = context.getSequence();

  let bestPrefill = 0, bestDecode = 0;
  for (let rep = 0; rep < o.repeat; ++rep) {
    const pre = await generate(sequence, randomPrompt(o.promptTokens, vocab, 1000 + rep), 1);
    bestPrefill = Math.max(bestPrefill, o.promptTokens / (pre.first / 1000));
    const dec = await generate(sequence, randomPrompt(8, vocab, 7000 + rep * 1000), o.genTokens);
    bestDecode = Math.max(bestDecode, (o.genTokens - 1) / ((dec.last - dec.first) / 1000));
  }

  const result = {
    model: o.file,
    engine: `llama.cpp ${llama.llamaCppRelease.release} (node-llama-cpp prebuilt, ${llama.buildType})`,
    gpu: llama.gpu,
    threads: context.currentThreads,
    flash_attention: context.flashAttention,
    context_size: context.contextSize,
    batch_size: context.batchSize,
    prompt_tokens: o.promptTokens,
    gen_tokens: o.genTokens,
    prefill_tok_s: Number(bestPrefill.toFixed(2)),
    decode_tok_s: Number(bestDecode.toFixed(2)),
    peak_rss_mb: Number(peakRssMb().toFixed(1)),
    file_mb: Number((fs.statSync(o.file).size / 1e6).toFixed(1)),
  };
  if (o.json) {
    console.log(JSON.stringify(result));
  } else {
    for (const [k, v] of Object.entries(result)) console.log(`${k.padEnd(16)} ${v}`);
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`bench.mjs: ${e?.stack ?? e}`);
  process.exit(1);
});
