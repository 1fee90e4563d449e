#!/usr/bin/python3
"""Writes src/tensor/testdata/quant_golden.json: reference (de)quantization data for quant_test.

Oracles: llama.cpp's gguf-py numpy (de)quantizers (gguf/quants.py) and, for the K-quant
quantizers, llama.cpp's C reference quantize_row_{q4_K,q5_K,q6_K}_ref (ggml/src/ggml-quants.c,
what llama-quantize uses without an importance matrix), both from the llama.cpp release bundled
in the npm package node-llama-cpp@3.21.1 (llama.cpp commit recorded in the output).

  cd tools/goldens/quant && npm i -E node-llama-cpp@3.21.1 --ignore-scripts
  git clone node_modules/node-llama-cpp/llama/gitRelease.bundle /tmp/llama.cpp
  apt-get install python3-numpy gcc
  /usr/bin/python3 tools/goldens/quant/make_quant_golden.py /tmp/llama.cpp > src/tensor/testdata/quant_golden.json

Dequantize cases: blocks made of fixed random bytes (seeded) whose f16 scale fields are replaced
by sane values; the golden is gguf-py's f32 output. Quantize cases for q8_0 and q4_0: fixed random
floats (normal, per-block magnitudes spread over decades, plus an all-zero block and a block of
exact .5 ties); the golden is gguf-py's bytes (and the C reference must agree: asserted). Quantize
cases for q4_K, q5_K and q6_K: fixed random floats (see k_quant_input) quantized by a small C
harness compiled with gcc together with the bundle's ggml-quants.c (ORACLE_CFLAGS: -O2,
-ffp-contract=off and no -march, as loom compiles src/tensor/quant.cc, so no FMA changes a
rounding; asserts left on so that nearest_int's range check is live). The dequantize q5_K and K-quant quantize cases are appended after the original
cases so that the original cases' random draws, and bytes, are unchanged.
"""
import json
import os
import subprocess
import sys
import tempfile

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
    size = {T.Q8_0: 34, T.Q4_0: 18, T.Q4_K: 144, T.Q5_K: 176, T.Q6_K: 210}[qtype]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if qtype in (T.Q8_0, T.Q4_0):
        b[:, 0:2] = f16_bytes(sane_scales(n_blocks))
    elif qtype in (T.Q4_K, T.Q5_K):  # d, dmin at the same offsets
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
                  "output": hexs(q), "oracle": "gguf-py"})

# Appended after the original cases (see the docstring).
b = blocks(T.Q5_K, 6)
out = quants.dequantize(b.reshape(-1), T.Q5_K).astype(np.float32)
assert out.size == 6 * 256
cases.append({"op": "dequantize", "dtype": "q5_K", "n": int(out.size), "input": hexs(b),
              "output_f32": hexs(out)})

ORACLE_CFLAGS = ["-std=gnu11", "-O2", "-ffp-contract=off"]

# Reads n f32 from stdin, writes quantize_row_<type>_ref's bytes to stdout.
HARNESS = r"""
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-quants.h"

// ggml-quants.c links against these ggml.c functions; the reference quantizers called here
// never reach them.
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, args);
    va_end(args);
    abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; abort(); }

int main(int argc, char ** argv) {
    if (argc != 3) return 2;
    const char * type = argv[1];
    const int64_t n = atoll(argv[2]);
    float * x = malloc(n * sizeof(float));
    uint8_t * y = malloc(n * 2);  // >= any block format's bytes per element
    if (fread(x, sizeof(float), n, stdin) != (size_t) n) return 3;
    size_t bytes;
    if (!strcmp(type, "q8_0")) {
        quantize_row_q8_0_ref(x, (block_q8_0 *) y, n); bytes = n / QK8_0 * sizeof(block_q8_0);
    } else if (!strcmp(type, "q4_0")) {
        quantize_row_q4_0_ref(x, (block_q4_0 *) y, n); bytes = n / QK4_0 * sizeof(block_q4_0);
    } else if (!strcmp(type, "q4_K")) {
        quantize_row_q4_K_ref(x, (block_q4_K *) y, n); bytes = n / QK_K * sizeof(block_q4_K);
    } else if (!strcmp(type, "q5_K")) {
        quantize_row_q5_K_ref(x, (block_q5_K *) y, n); bytes = n / QK_K * sizeof(block_q5_K);
    } else if (!strcmp(type, "q6_K")) {
        quantize_row_q6_K_ref(x, (block_q6_K *) y, n); bytes = n / QK_K * sizeof(block_q6_K);
    } else {
        return 4;
    }
    fwrite(y, 1, bytes, stdout);
    return 0;
}
"""


def build_oracle(llama, tmp):
    src = os.path.join(tmp, "harness.c")
    exe = os.path.join(tmp, "quantize_ref")
    with open(src, "w") as f:
        f.write(HARNESS)
    g = os.path.join(llama, "ggml")
    subprocess.run(["gcc", *ORACLE_CFLAGS, "-w", "-I", g + "/include", "-I", g + "/src",
                    "-I", g + "/src/ggml-cpu", src, g + "/src/ggml-quants.c", "-lm", "-o", exe],
                   check=True)
    return exe


def run_oracle(exe, name, x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    return subprocess.run([exe, name, str(x.size)], input=x.tobytes(), capture_output=True,
                          check=True).stdout


def k_quant_input():
    """40 super-blocks of 256 floats covering the reference quantizers' branches."""
    x = rng.standard_normal((40, 256)).astype(np.float32)
    # 0-23: normal, per-super-block magnitudes over 1e-4 .. 1e3; 16-23 also shifted (nonzero mean).
    x[:24] *= np.exp(rng.uniform(np.log(1e-4), np.log(1e3), size=(24, 1))).astype(np.float32)
    x[16:24] += rng.uniform(-3, 3, size=(8, 1)).astype(np.float32) * np.abs(x[16:24]).max(
        axis=1, keepdims=True)
    # 24-29: per-16-element magnitudes over 1e-5 .. 1e1, so some sub-block scales quantize to 0
    # (those sub-blocks keep the fit's levels); a few 16-element groups are exactly zero.
    x[24:30] *= np.exp(rng.uniform(np.log(1e-5), np.log(1e1), size=(6, 16, 1))).astype(
        np.float32).repeat(16, axis=2).reshape(6, 256)
    x[29, 48:64] = 0
    x[29, 160:192] = 0
    x[30] = 0  # all zero
    x[31] = rng.integers(-8, 8, size=256).astype(np.float32)  # small integers: many exact ties
    x[32] = (rng.integers(-31, 32, size=256) + 0.5).astype(np.float32)  # half-integers
    x[33] = rng.integers(0, 16, size=256).astype(np.float32) * np.float32(0.25)  # 0..3.75 grid
    x[34, 77] = np.float32(-60)  # one large outlier in a unit-normal block
    x[35, 200] = np.float32(25)  # a smaller one
    x[36] = -(np.abs(x[36]) + np.float32(0.25))  # all negative
    x[37] = np.abs(x[37]) * np.float32(0.01) + np.float32(0.02)  # all positive
    x[38] = np.float32(-0.375)  # constant (negative: max == min in every sub-block)
    x[39] = np.float32(1.625)  # constant (positive: min is clamped to 0)
    return x.reshape(-1)


with tempfile.TemporaryDirectory() as tmp:
    oracle = build_oracle(sys.argv[1], tmp)
    # The C reference agrees with gguf-py on the q8_0 / q4_0 cases above.
    for c in cases:
        if c["op"] == "quantize":
            x = np.frombuffer(bytes.fromhex(c["input_f32"]), dtype=np.float32)
            assert run_oracle(oracle, c["dtype"], x).hex() == c["output"], c["dtype"]
    for name in ["q4_K", "q5_K", "q6_K"]:
        x = k_quant_input()
        cases.append({"op": "quantize", "dtype": name, "n": int(x.size), "input_f32": hexs(x),
                      "output": run_oracle(oracle, name, x).hex(),
                      "oracle": f"ggml-quants.c quantize_row_{name}_ref"})

print(json.dumps({
    "generator": "tools/goldens/quant/make_quant_golden.py (gguf-py and ggml-quants.c from "
                 "node-llama-cpp@3.21.1)",
    "oracle_cflags": " ".join(["gcc"] + ORACLE_CFLAGS),
    "oracle_cc": subprocess.run(["gcc", "--version"], capture_output=True,
                                text=True).stdout.splitlines()[0],
    "llama_cpp_commit": subprocess.run(["git", "-C", sys.argv[1], "rev-parse", "HEAD"],
                                       capture_output=True, text=True).stdout.strip(),
    "cases": cases}, indent=1))
