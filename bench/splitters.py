"""Split patterns of today's tokenizers: tokenmill's compiled splitters vs the ``regex`` module.

For each pattern and corpus: MB/s of UTF-8 input through tokenmill's splitter (the hand-written family
kernel for Llama 3 / Qwen, the general DFA + Pike VM for any other pattern, forced with
``allow_general``) and through ``patterns.split_with_gaps`` (the ``regex`` module, what tokenmill
used before); median of ``--repeat`` round-robin passes, chunks checked identical in the same run.

    .venv/bin/python bench/splitters.py --max-mb 2 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from model_tokenizers import load_docs

ROOT = Path(__file__).resolve().parent.parent

DEEPSEEK = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
            r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def load(folder: Path, max_mb: float) -> str:
    return "".join(load_docs(folder, max_mb))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(ROOT.parent / "shared" / "corpora"))
    ap.add_argument("--scripts", nargs="+", default=["en", "zh", "code"])
    ap.add_argument("--max-mb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-publish", action="store_true")
    a = ap.parse_args()

    from tokenmill.tokenizer.formats.export import onig_pattern
    from tokenmill.tokenizer.pretokenize.patterns import GPT4, O200K, split_with_gaps
    from tokenmill.tokenizer.pretokenize.splitter import LLAMA3, QWEN3_5, general, split_text_compiled

    patterns = {
        "Llama 3 (family kernel)": (LLAMA3, False),
        "Qwen 3.5 (family kernel)": (QWEN3_5, False),
        "DeepSeek-V3 main split (general DFA)": (DEEPSEEK, True),
        "o200k (general DFA)": (O200K, True),
        "cl100k as in tokenizer.json (general DFA)": (onig_pattern(GPT4), True),
    }
    t0 = time.perf_counter()
    for rx, gen in patterns.values():
        if gen:
            general(rx)
    compile_s = time.perf_counter() - t0
    R: dict = {"compile_general_s": compile_s}
    for script in a.scripts:
        text = load(Path(a.corpora) / script, a.max_mb)
        nbytes = len(text.encode())
        for name, (rx, gen) in patterns.items():
            ours, ref = [], []
            split_text_compiled(text[:1000], rx, allow_general=gen)
            got = want = None
            for _ in range(a.repeat):
                t = time.perf_counter()
                got = split_text_compiled(text, rx, allow_general=gen)
                ours.append(time.perf_counter() - t)
                t = time.perf_counter()
                want = split_with_gaps(rx, text)
                ref.append(time.perf_counter() - t)
            if got != want:
                raise SystemExit(f"{name} {script}: chunks differ from the regex module")
            r = {"bytes": nbytes, "tokenmill_s": ours, "regex_s": ref,
                 "tokenmill_mb_s": nbytes / 1e6 / statistics.median(ours),
                 "regex_mb_s": nbytes / 1e6 / statistics.median(ref), "chunks": len(got)}
            R.setdefault(name, {})[script] = r
            print(f"  {name} {script}: {r['tokenmill_mb_s']:.1f} vs {r['regex_mb_s']:.1f} MB/s", file=sys.stderr)
    lines = [f"Splitting, MB/s of UTF-8 input ({a.max_mb:g} MB of each corpus, median of {a.repeat} passes; "
             "chunks identical to the `regex` module's in every cell). The str -> chunks path of both "
             "(`split_text_compiled` vs `split_with_gaps`), so Python string slicing is included:", "",
             "| pattern | " + " | ".join(f"{s}: tokenmill / regex" for s in a.scripts) + " |",
             "|---|" + "---|" * len(a.scripts)]
    for name in patterns:
        cells = [f"{R[name][s]['tokenmill_mb_s']:.1f} / {R[name][s]['regex_mb_s']:.1f} "
                 f"(**{R[name][s]['tokenmill_mb_s'] / R[name][s]['regex_mb_s']:.1f}x**)" for s in a.scripts]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", f"Compiling the three general patterns (classes from the `regex` module over all code points, "
              f"program, DFA): {compile_s:.1f} s in all, once per process."]
    text = "\n".join(lines)
    print(text)
    if not a.no_publish:
        from _results import publish

        publish("splitters", R, text)


if __name__ == "__main__":
    main()
