#!/usr/bin/env python3
"""A copy of a byte-level BPE tokenizer in which every token decodes to valid UTF-8 on its own, for
serving benchmarks on random weights (issue 23's load figure).

A random-weight model samples any token, and byte-level vocabularies hold tokens that are only
part of a UTF-8 character (Llama 3: ~1,500 of 128,256). Streamed one after another such tokens
give text that is not UTF-8, which servers handle differently: loom holds the bytes back until
they complete, and llama-server's output parser fails the whole request at its end ("does not
match the expected Content-only format"). Here each such token is renamed to an ASCII placeholder
(`[t<id>]`, spelled in the byte-level alphabet) and merges that used it are dropped, so both
servers stream well-formed text of the same token count. Ids, vocabulary size and special
tokens are unchanged; prompts are token ids, so the renamed spellings never matter for input.

  python3 bench/utf8_safe_tokenizer.py IN_DIR OUT_DIR   # reads/writes tokenizer.json (+ config)
"""
import json
import os
import shutil
import sys


def byte_decoder():
    """GPT-2's byte-level alphabet, inverted: unicode char -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(os.path.join(src, "tokenizer.json")) as fh:
        t = json.load(fh)
    model = t["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"utf8_safe_tokenizer.py: a BPE tokenizer.json, not {model.get('type')!r}")
    dec = byte_decoder()
    renamed = {}
    vocab = model["vocab"]
    for text, i in vocab.items():
        try:
            bytes(dec[c] for c in text).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            renamed[text] = f"[t{i}]"
    new_vocab = {}
    for text, i in vocab.items():
        new_vocab[renamed.get(text, text)] = i
    if len(new_vocab) != len(vocab):
        raise SystemExit("utf8_safe_tokenizer.py: a placeholder collided with a token")
    model["vocab"] = new_vocab

    def pair(m):
        return m.split(" ", 1) if isinstance(m, str) else m
    kept = []
    for m in model.get("merges", []):
        a, b = pair(m)
        if a in renamed or b in renamed or (a + b) in renamed:
            continue
        kept.append(m)
    dropped = len(model.get("merges", [])) - len(kept)
    model["merges"] = kept
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "tokenizer.json"), "w") as fh:
        json.dump(t, fh, ensure_ascii=False)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
    print(f"{dst}: {len(renamed)} of {len(vocab)} tokens renamed, {dropped} merges dropped")


if __name__ == "__main__":
    main()
