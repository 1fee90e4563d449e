#!/usr/bin/python3
"""Writes src/tensor/testdata/quant_golden.json: reference (de)quantization data for quant_test.

Oracle: llama.cpp's gguf-py numpy (de)quantizers (gguf/quants.py), from the llama.cpp release
bundled in the npm package node-llama-cpp@3.21.1 (llama.cpp tag recorded in the output).

  cd tools/goldens/quant && npm i -E node-llama-cpp@3.21.1 --ignore-scripts
  git clone node_modules/node-llama-cpp/llama/gitRelease.bundle /tmp/llama.cpp
  apt-get install python3-numpy
  /usr/bin/python3 tools/goldens/quant/make_quant_golden.py /tmp/llama.cpp > src/tensor/testdata/quant_golden.json

Dequantize cases: blocks made of fixed random bytes (seeded) whose f16 scale fields are replaced
by sane values; the golden is gguf-py's f32 output. Quantize cases (q8_0, q4_0, the formats with
a reference quantizer in gguf-py): fixed random floats (normal, per-block magnitudes spread over
decades, plus an all-zero block and a block of exact .5 ties); the golden is gguf-py's bytes.
"""
import json
import subprocess
import sys

import numpy as np

sys.path.insert(0, sys.argv[1] + "/gguf-py")
from gguf import quants  # noqa: E402
from gguf.constants import GGMLQuantizationType as T  # noqa: E402

rng = np.random.default_rng(20240611)


def f16_bytes(values):
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def sane_scales(n, lo=1e-3, hi=1.0, signed=True):
    mag = np.exp(rng.uniform(np.log(lo), np.log(hi), size=n))
    if signed:
        mag *= rng.choice([-1.0, 1.0], size=n)
    return mag


def blocks(qtype, n_blocks):
    size = {T.Q8_0: 34, T.Q4_0: 18, T.Q4_K: 144, T.Q6_K: 210}[qtype]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if qtype in (T.Q8_0, T.Q4_0):
        b[:, 0:2] = f16_bytes(sane_scales(n_blocks))
    elif qtype == T.Q4_K:
        b[:, 0:2] = f16_bytes(sane_scales(n_blocks, signed=False) / 63)
        b[:, 2:4] = f16_bytes(sane_scales(n_blocks, signed=False) / 63)
    elif qtype == T.Q6_K:
        b[:, 208:210] = f16_bytes(sane_scales(n_blocks) / 127)
    return b


def hexs(a):
    return np.ascontiguousarray(a).tobytes().hex()


cases = []
for name, qtype, n_blocks, block_elems in [("q8_0", T.Q8_0, 16, 32), ("q4_0", T.Q4_0, 16, 32),
                                           ("q4_K", T.Q4_K, 6, 256), ("q6_K", T.Q6_K, 6, 256)]:
    b = blocks(qtype, n_blocks)
    out = quants.dequantize(b.reshape(-1), qtype).astype(np.float32)
    assert out.size == n_blocks * block_elems
    cases.append({"op": "dequantize", "dtype": name, "n": int(out.size), "input": hexs(b),
                  "output_f32": hexs(out)})

# f16 / bf16: every bit pattern class (normals, subnormals, zeros, infinities), no NaNs.
bits = rng.integers(0, 1 << 16, size=1024, dtype=np.uint16)
bits[:6] = [0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00]
f16 = bits[((bits & 0x7c00) != 0x7c00) | ((bits & 0x03ff) == 0)]
cases.append({"op": "dequantize", "dtype": "f16", "n": int(f16.size), "input": hexs(f16),
              "output_f32": hexs(quants.dequantize(f16.view(np.uint8), T.F16).astype(np.float32))})
bf = bits[((bits & 0x7f80) != 0x7f80) | ((bits & 0x007f) == 0)]
cases.append({"op": "dequantize", "dtype": "bf16", "n": int(bf.size), "input": hexs(bf),
              "output_f32": hexs(quants.dequantize(bf.view(np.uint8), T.BF16).astype(np.float32))})

for name, qtype in [("q8_0", T.Q8_0), ("q4_0", T.Q4_0)]:
    n_blocks = 64
    x = rng.standard_normal((n_blocks, 32)).astype(np.float32)
    x *= np.exp(rng.uniform(np.log(1e-4), np.log(1e3), size=(n_blocks, 1))).astype(np.float32)
    x[0] = 0
    x[1] = (np.arange(32) - 16 + 0.5).astype(np.float32)  # q8_0 here: amax 15.5, many ties
    x[2, :] = np.float32(127) * np.sign(rng.standard_normal(32))  # id = 1 exactly
    x[2, 5:20] = (np.arange(15) - 7 + 0.5).astype(np.float32)  # exact .5 ties at id = 1
    x = x.reshape(-1)
    q = quants.quantize(x.reshape(1, -1), qtype)
    cases.append({"op": "quantize", "dtype": name, "n": int(x.size), "input_f32": hexs(x),
                  "output": hexs(q)})

print(json.dumps({
    "generator": "tools/goldens/quant/make_quant_golden.py (gguf-py from node-llama-cpp@3.21.1)",
    "llama_cpp_commit": subprocess.run(["git", "-C", sys.argv[1], "rev-parse", "HEAD"],
                                       capture_output=True, text=True).stdout.strip(),
    "cases": cases}, indent=1))
