#!/usr/bin/env python3
"""The peer for tokenizer_bench: HF `tokenizers` (Rust) encoding the same corpus single-threaded.

    tokenizer_bench --tokenizers-dir DIR --write-corpus /tmp/corpus.txt
    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 bench/tokenizer_peer.py DIR /tmp/corpus.txt

Prints, per tokenizer, the cold and best-of-3 encode MB/s and the token count (which must equal
tokenizer_bench's, since both must produce the same ids).
"""
import os
import sys
import time

from tokenizers import Tokenizer

DIRS = [("llama3.1", "tokenizer-llama3_1-lenml"), ("gemma3", "tokenizer-gemma3-lenml")]


def main():
    root, corpus_path = sys.argv[1], sys.argv[2]
    text_bytes = open(corpus_path, "rb").read()
    text = text_bytes.decode("utf-8")
    mb = len(text.encode("utf-8")) / 1e6
    for name, d in DIRS:
        path = os.path.join(root, d, "tokenizer.json")
        if not os.path.exists(path):
            print(f"{name:10s} skipped")
            continue
        tok = Tokenizer.from_file(path)
        t0 = time.perf_counter()
        enc = tok.encode(text, add_special_tokens=False)
        cold = time.perf_counter() - t0
        best = 1e9
        for _ in range(3):
            t0 = time.perf_counter()
            enc = tok.encode(text, add_special_tokens=False)
            best = min(best, time.perf_counter() - t0)
        pieces, start = [], 0
        while start < len(text_bytes):
            cut = text_bytes.find(b"\n", min(len(text_bytes), start + 4096))
            end = len(text_bytes) if cut < 0 else cut + 1
            pieces.append(text_bytes[start:end].decode("utf-8"))
            start = end
        best_pieces, n_piece_tokens = 1e9, 0
        for _ in range(3):
            t0 = time.perf_counter()
            n_piece_tokens = sum(len(tok.encode(p, add_special_tokens=False).ids) for p in pieces)
            best_pieces = min(best_pieces, time.perf_counter() - t0)
        print(f"{name:10s} hf-tokenizers encode {len(pieces)} pieces of ~4 KB: "
              f"{mb / best_pieces:6.2f} MB/s warm, {n_piece_tokens} tokens")
        print(f"{name:10s} hf-tokenizers encode cold {mb / cold:6.2f} MB/s, warm {mb / best:6.2f} MB/s, "
              f"{len(enc.ids)} tokens")


if __name__ == "__main__":
    main()
