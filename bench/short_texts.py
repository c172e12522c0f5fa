"""One short text at a time: microseconds per ``encode`` call, side by side with the anchors.

    .venv/bin/python bench/short_texts.py [--sizes 64,256,1024,4096] [--texts 300] [--rounds 7] [--no-publish]

What a chat template, an SFT preprocessor or a retrieval chunker does: encode one text of tens to
thousands of bytes, many times over, where the throughput tables (``tokenizer_speed.py --phases
frontier``: 2 MB per call) time none of the fixed cost of a call. Per size, ``--texts`` pieces of about
that many bytes (cut at character boundaries from the en, zh and code corpora, a third each,
deterministic), and per tokenizer (GPT-2's ranks, cl100k) every tool encodes every piece, one call a
piece: ``--rounds`` passes, round robin over the tools, each tool warmed first on the same pieces
(caches and lazy tables filled: what a long-running preprocessor sees); reported: the median pass
in microseconds per call and tokenmill's ratio to each anchor (> 1: tokenmill is faster). The ids of
every tool are checked equal to tiktoken's before timing.

Tools: tokenmill ``encode(text)`` (a list) and ``encode_batch([text], as_arrays=True)`` (one text per
call, as a loader that encodes as it goes); tiktoken ``encode_ordinary``; gigatoken ``encode`` (a uint32
array); HF tokenizers ``encode(text).ids`` on the tokenizer.json tokenmill exports (tested equal to
tiktoken's ids).
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
CORPORA = ROOT.parent / "shared" / "corpora"


@functools.cache
def _documents(corpus: str) -> list[bytes]:
    from tokenizer_speed import load_docs

    return [d.encode() for d in load_docs(str(CORPORA / corpus), 4)]


def pieces(size: int, count: int) -> list[str]:
    """``count`` texts of about ``size`` UTF-8 bytes, a third each from en, zh and code, deterministic."""
    out = []
    rng = random.Random(size)
    for corpus in ("en", "zh", "code"):
        docs = [b for b in _documents(corpus) if len(b) > 4 * size]
        for _ in range(count // 3):
            b = rng.choice(docs)
            start = rng.randrange(0, len(b) - 2 * size)
            text = b[start : start + size].decode("utf-8", "ignore")  # a cut character dropped at each end
            out.append(text)
    return out


def tools(name: str, tmp: str):
    import gigatoken
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tokenizer_speed import GPT2_RANKS
    from tokenizers import Tokenizer as HF

    from tokenmill import Tokenizer

    path = GPT2_RANKS if name == "gpt2" else ROOT / ".cache" / "openai" / "cl100k_base.tiktoken"
    tm = Tokenizer.from_tiktoken(path, pattern="gpt2" if name == "gpt2" else "cl100k", special_tokens={})
    ref = tiktoken.Encoding(name, pat_str=tm.pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens={})
    gg = (gigatoken.Tokenizer.from_tiktoken(str(path), "gpt2", {}) if name == "gpt2"
          else gigatoken.Tokenizer.from_tiktoken(str(path)))
    hf_path = os.path.join(tmp, f"{name}.json")
    tm.save_huggingface(hf_path)
    hf = HF.from_file(hf_path)
    return ref, {
        "tokenmill encode": (lambda t: tm.encode(t, disallowed_special=()), list),
        "tokenmill encode_batch([t])": (lambda t: tm.encode_batch([t], num_threads=1, as_arrays=True,
                                                                  disallowed_special=())[0], lambda a: a.tolist()),
        "tiktoken": (ref.encode_ordinary, list),
        "gigatoken": (gg.encode, lambda a: [int(x) for x in a]),
        "HF tokenizers": (lambda t: hf.encode(t, add_special_tokens=False).ids, list),
    }


def bench(name: str, sizes: list[int], count: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        ref, T = tools(name, tmp)
        res: dict = {}
        for size in sizes:
            texts = pieces(size, count)
            want = [ref.encode_ordinary(t) for t in texts]
            row: dict = {"bytes": sum(len(t.encode()) for t in texts) / len(texts), "texts": len(texts), "us": {}}
            live = {}
            for tool, (run, as_list) in T.items():
                got = [as_list(run(t)) for t in texts]  # warm-up and the ids check
                if got != want:
                    i = next(i for i, (x, y) in enumerate(zip(got, want)) if x != y)
                    print(f"  {name} {size}: {tool} ids differ from tiktoken's (text {i}); not timed", flush=True)
                    continue
                live[tool] = run
            times: dict = {tool: [] for tool in live}
            for _ in range(rounds):
                for tool, run in live.items():
                    t0 = time.perf_counter()
                    for t in texts:
                        run(t)
                    times[tool].append((time.perf_counter() - t0) / len(texts) * 1e6)
            row["us"] = {tool: statistics.median(v) for tool, v in times.items()}
            res[str(size)] = row
            print(f"  {name} {size} B: " + ", ".join(f"{k} {v:.1f}" for k, v in row["us"].items()) + " us", flush=True)
    return res


def report(R: dict, rounds: int) -> str:
    tools = ["tokenmill encode", "tokenmill encode_batch([t])", "tiktoken", "gigatoken", "HF tokenizers"]
    lines = [f"Microseconds per call, one text per call (median of {rounds} passes over the same texts, each "
             "tool warmed on them first; one thread); in bold tokenmill `encode` / the anchor's time (> 1: "
             "tokenmill faster):", "",
             "| ranks | bytes a text | " + " | ".join(tools) + " | **vs tiktoken** | **vs gigatoken** | **vs HF** |",
             "|---|---:|" + "---:|" * (len(tools) + 3)]
    for name, rows in R.items():
        for row in rows.values():
            us = row["us"]
            cells = [f"{us[t]:.1f}" if t in us else "ids differ" for t in tools]
            tm = us.get("tokenmill encode")
            ratio = [f"**{us[a] / tm:.2f}x**" if tm and a in us else "" for a in ("tiktoken", "gigatoken", "HF tokenizers")]
            lines.append(f"| {'GPT-2' if name == 'gpt2' else name} | {row['bytes']:.0f} | " + " | ".join(cells + ratio) + " |")
    lines += ["", "Texts: pieces of the en, zh and code corpora (a third each) cut at character boundaries; "
              "ids of every tool checked equal to tiktoken's before timing."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/short_texts.py --sizes 64,1024 --rounds 3")
    ap.add_argument("--sizes", default="64,256,1024,4096", help="comma-separated bytes per text")
    ap.add_argument("--texts", type=int, default=300, help="texts per size (a third per corpus)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tokenizers", default="gpt2,cl100k")
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write results and docs")
    a = ap.parse_args()
    if not CORPORA.is_dir():
        sys.exit(f"{CORPORA} not found (the shared corpora)")
    sizes = [int(s) for s in a.sizes.split(",")]
    R = {name: bench(name, sizes, a.texts, a.rounds) for name in a.tokenizers.split(",")}
    text = report(R, a.rounds)
    print(text)
    if not a.no_publish:
        from _results import publish

        publish("short-texts", {"results": R, "rounds": a.rounds, "texts": a.texts}, text)


if __name__ == "__main__":
    main()
