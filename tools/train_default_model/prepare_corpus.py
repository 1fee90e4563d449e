#!/usr/bin/env python3
"""Builds the training corpus for loom's embedded default model (stdlib only, runs on the dev box).

Sources (Debian packages, see install_sources.sh; licences: models/default/PROVENANCE.md):
  - bible-kjv-text  : King James Version, read with the `bible` program (package bible-kjv).
  - sword-text-web  : World English Bible (public domain), read with `diatheke` (package diatheke).

Output (git-ignored, carried to the GPU machine):
  .data/chapters.jsonl : one chapter per line: {"src","book","book_idx","chapter","split","verses"}
  .data/chat.jsonl     : chat examples built from TRAIN chapters only: {"messages":[...]}
  .data/sources.json   : package name, version and licence line of each source

Split (by chapter, the same for both translations so no held-out content leaks through the
other translation): chapter_ordinal % 50 == 7 -> "test", == 32 -> "val", else "train".

Usage: python3 prepare_corpus.py [--out DIR] [--seed N]
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM_PROMPTS = [
    "You are loom's default model. You answer in the words of the King James Bible.",
    "You are a helpful assistant.",
    "Answer in the style of the King James Bible.",
]
# Topic words: each chat "topic" example asks about one word and is answered with a verse
# containing it.
TOPICS = [
    "love", "peace", "faith", "wisdom", "light", "water", "bread", "king", "sea", "mountain",
    "fear", "joy", "heart", "truth", "life", "death", "hope", "sin", "mercy", "law", "war",
    "land", "children", "gold", "fire", "night", "day", "heaven", "earth", "wine", "sword",
    "prayer", "righteousness", "judgment", "spirit", "soul", "money", "riches", "poor", "friend",
    "house", "city", "river", "tree", "bird", "sheep", "shepherd", "father", "mother", "son",
    "daughter", "brother", "wife", "servant", "work", "rest", "sleep", "bread", "fruit", "seed",
    "rain", "wind", "star", "sun", "moon", "stone", "gate", "door", "way", "path", "word",
    "song", "voice", "blood", "salt", "oil", "honey", "lion", "eagle", "garden", "field",
    "harvest", "temple", "glory", "grace", "kingdom", "strength", "anger", "pride", "humble",
    "fool", "wise", "young", "old", "heal", "forgive", "praise", "sorrow", "comfort", "trust",
]
TOPIC_QUESTIONS = [
    "What does the Bible say about {w}?",
    "Tell me about {w}.",
    "Speak to me of {w}.",
    "What is {w}?",
    "Give me a verse about {w}.",
    "What saith the scripture concerning {w}?",
    "{W}?",
    "I want to know about {w}.",
]
CONTINUE_QUESTIONS = [
    "{t}",
    "Continue: {t}",
    "Finish this verse: {t}",
    "Complete the sentence: {t}",
]
NEXT_QUESTIONS = [
    "{t}",
    "What comes after this verse? {t}",
    "{t} What follows?",
]
GREETINGS = [
    "Hello", "Hello!", "Hi", "Hi there", "Good morning", "Who are you?", "What are you?",
    "How are you?", "Hello, how are you today?", "Can you help me?", "Say something.",
    "Tell me a story.", "What is your name?", "Thank you", "Thanks!", "Goodbye",
]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def dpkg_version(pkg):
    return run(["dpkg-query", "-W", "-f=${Version}", pkg]).strip()


def read_kjv():
    """Returns [(book, chapter, [verse text...])] in canonical order, from `bible`."""
    text = run(["bible", "-l0", "gen1:1-rev22:21"])
    chapters = []
    head = re.compile(r"^(\S.*) (\d+)$")
    verse = re.compile(r"^\s+(\d+) (.*)$")
    for line in text.splitlines():
        if not line.strip():
            continue
        m = head.match(line)
        if m:
            chapters.append((m.group(1), int(m.group(2)), []))
            continue
        m = verse.match(line)
        if not m or not chapters:
            sys.exit(f"unexpected line in bible output: {line!r}")
        chapters[-1][2].append(" ".join(m.group(2).split()))
    return chapters


def read_web(books):
    """Returns [(book, chapter, [verse text...])] from diatheke's plain rendering of the WEB.

    books: the KJV book names, queried one at a time (a single Gen-Rev range walks the module's
    own versification, which interleaves the deuterocanon). diatheke's plain output quirks handled
    here: poetry continues on following lines; a psalm title is printed (once per verse) on the
    line before an indented verse reference; stray OSIS tags; the glossary after Revelation.
    """
    ref = re.compile(r"^(\s*)(\S.*?) (\d+):(\d+): ?(.*)$")
    tag = re.compile(r"<[^>]*>")
    chapters = []
    for book in books:
        text = run(["diatheke", "-b", "engWEB2015eb", "-f", "plain", "-k", book])
        verses = []  # [(chapter, [lines])]
        for line in text.splitlines():
            line = tag.sub("", line)
            if line.startswith("(engWEB2015eb)") or line.startswith("   The following words"):
                break
            m = ref.match(line)
            if m:
                if m.group(1) and verses:
                    # Indented reference: the last non-blank line before it is the psalm's title
                    # (or a Psalm 119 letter heading), never part of the previous verse.
                    lines = verses[-1][1]
                    while lines and not lines[-1].strip():
                        lines.pop()
                    if len(lines) > 1:
                        lines.pop()
                verses.append((int(m.group(3)), [m.group(5)]))
            elif verses:
                verses[-1][1].append(line)
        if not verses:
            sys.exit(f"diatheke returned no verses for {book!r}")
        for ch, lines in verses:
            t = " ".join(" ".join(lines).split())
            if not chapters or chapters[-1][0] != book or chapters[-1][1] != ch:
                chapters.append((book, ch, []))
            if t:
                chapters[-1][2].append(t)
    return chapters


def split_of(ordinal):
    r = ordinal % 50
    return "test" if r == 7 else "val" if r == 32 else "train"


def split_verse(v, rng):
    """Splits a verse into (prompt, continuation) at punctuation or a word near the middle."""
    words = v.split(" ")
    if len(words) < 6:
        return None
    cuts = [i for i in range(2, len(words) - 2) if words[i - 1][-1] in ",;:"]
    mid = len(words) / 2
    if cuts and rng.random() < 0.7:
        i = min(cuts, key=lambda c: abs(c - mid))
    else:
        i = rng.randint(2, len(words) - 3)
    return " ".join(words[:i]), " ".join(words[i:])


def build_chat(chapters, rng, n):
    """chapters: train KJV chapters [(book, ch, verses)]. Returns n chat examples."""
    all_verses = [(b, c, i, v) for b, c, vs in chapters for i, v in enumerate(vs)]
    by_topic = {}
    for t in TOPICS:
        pat = re.compile(r"\b" + re.escape(t) + r"\b", re.IGNORECASE)
        by_topic[t] = [v for _, _, _, v in all_verses if pat.search(v)]
    topics = [t for t in TOPICS if len(by_topic[t]) >= 3]
    greet_pool = [v for _, _, _, v in all_verses
                  if re.search(r"\b(peace|grace|blessed|bless)\b", v, re.I) and len(v) < 160]
    ch_index = {(b, c): vs for b, c, vs in chapters}
    out = []
    while len(out) < n:
        kind = rng.random()
        b, c, i, v = rng.choice(all_verses)
        if kind < 0.35:
            sp = split_verse(v, rng)
            if not sp:
                continue
            q, a = rng.choice(CONTINUE_QUESTIONS).format(t=sp[0]), sp[1]
        elif kind < 0.55:
            vs = ch_index[(b, c)]
            if i + 1 >= len(vs):
                continue
            q = rng.choice(NEXT_QUESTIONS).format(t=v)
            a = " ".join(vs[i + 1:i + 1 + rng.choice([1, 1, 2])])
        elif kind < 0.9:
            t = rng.choice(topics)
            q = rng.choice(TOPIC_QUESTIONS).format(w=t, W=t.capitalize())
            a = rng.choice(by_topic[t])
        else:
            q, a = rng.choice(GREETINGS), rng.choice(greet_pool)
        msgs = []
        if rng.random() < 0.3:
            msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        msgs.append({"role": "user", "content": q})
        msgs.append({"role": "assistant", "content": a})
        # Some two-turn conversations so that multi-turn prompts look familiar.
        if rng.random() < 0.15:
            t = rng.choice(topics)
            msgs.append({"role": "user", "content":
                         rng.choice(TOPIC_QUESTIONS).format(w=t, W=t.capitalize())})
            msgs.append({"role": "assistant", "content": rng.choice(by_topic[t])})
        out.append({"messages": msgs})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, ".data"))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--chat", type=int, default=20000, help="number of chat examples")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)

    kjv = read_kjv()
    books = []
    for b, _, _ in kjv:
        if not books or books[-1] != b:
            books.append(b)
    web = read_web(books)
    if len(kjv) != 1189 or len(web) != 1189:
        sys.exit(f"expected 1189 chapters in each translation, got kjv={len(kjv)} web={len(web)}")
    n = {"train": 0, "val": 0, "test": 0}
    with open(os.path.join(args.out, "chapters.jsonl"), "w") as f:
        for src, chs in (("kjv", kjv), ("web", web)):
            for ordinal, (b, c, vs) in enumerate(chs):
                kb, kc, _ = kjv[ordinal]
                if (b, c) != (kb, kc):
                    sys.exit(f"chapter order differs: kjv {kb} {kc} vs {src} {b} {c}")
                s = split_of(ordinal)
                n[s] += 1
                f.write(json.dumps({"src": src, "book": b, "book_idx": books.index(b),
                                    "chapter": c, "split": s, "verses": vs}) + "\n")
    train_kjv = [(b, c, vs) for o, (b, c, vs) in enumerate(kjv) if split_of(o) == "train"]
    chat = build_chat(train_kjv, rng, args.chat)
    with open(os.path.join(args.out, "chat.jsonl"), "w") as f:
        for ex in chat:
            f.write(json.dumps(ex, ensure_ascii=False) + "\n")

    def licence_line(pkg):
        return open(f"/usr/share/doc/{pkg}/copyright", encoding="utf-8").read()

    sources = {
        "bible-kjv-text": {"version": dpkg_version("bible-kjv-text"),
                           "extracted_with": "bible (bible-kjv " + dpkg_version("bible-kjv") + ")",
                           "copyright_file": licence_line("bible-kjv-text")},
        "sword-text-web": {"version": dpkg_version("sword-text-web"),
                           "extracted_with": "diatheke " + dpkg_version("diatheke"),
                           "copyright_file": licence_line("sword-text-web")},
    }
    with open(os.path.join(args.out, "sources.json"), "w") as f:
        json.dump(sources, f, indent=1)
    nv = sum(len(vs) for _, _, vs in kjv) + sum(len(vs) for _, _, vs in web)
    print(f"chapters per split (both translations): {n}; verses: {nv}; chat examples: {len(chat)}")


if __name__ == "__main__":
    main()
