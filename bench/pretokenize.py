"""Pre-tokenization speed: ``regex.findall`` vs tokenmill's compiled kernels, per preset and corpus.

    .venv/bin/python bench/pretokenize.py [--corpora ../shared/corpora] [--mb 4] [--runs 3]
    .venv/bin/python bench/pretokenize.py --full-parity   # every file of every corpus, no timing

For each corpus folder (en, zh, multi, code) a deterministic sample of whole files (about ``--mb``
MB of UTF-8) is split file by file with each preset by:
  - ``regex.findall(pattern, text)`` (the reference; the ``regex`` module),
  - ``split_offsets(data, preset)``: the kernel on UTF-8 bytes, with the UTF-8 check,
  - ``split_text(text, preset)``: str in, list of str out (encode + kernel + slicing).
MB/s counts UTF-8 bytes (MB = 10**6 bytes) per second of the process's CPU time (one thread, so
equal to wall time on an idle core; robust on a shared machine); each figure is the median of
``--runs`` runs. The chunks are also checked for equality with regex.findall. Finally the first-call cost
is measured in fresh processes: cold (numba compiles, the class table is built) and warm (both
loaded from their on-disk caches).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
import regex

from tokenmill.tokenizer.pretokenize.patterns import PRESETS
from tokenmill.tokenizer.pretokenize.presets import split_offsets, split_text

CORPORA = ["en", "zh", "multi", "code"]
PRESET_NAMES = ["gpt2", "gpt4", "o200k"]


def sample_files(folder: Path, mb: float) -> list[str]:
    """Whole files spread evenly over the sorted folder, until about ``mb`` MB."""
    files = sorted(folder.glob("*.txt"))
    budget = mb * 1e6
    stride = max(1, len(files) // 64)
    texts, size = [], 0
    for start in range(stride):
        for f in files[start::stride]:
            if size >= budget:
                return texts
            text = f.read_text(encoding="utf-8")
            texts.append(text)
            size += len(text.encode())
    return texts


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def bench_corpus(name: str, texts: list[str], runs: int) -> list[tuple]:
    datas = [t.encode() for t in texts]
    nbytes = sum(map(len, datas))
    rows = []
    for preset in PRESET_NAMES:
        pat = regex.compile(PRESETS[preset])
        ref = [pat.findall(t) for t in texts]
        got = [split_text(t, preset) for t in texts]
        if ref != got:
            raise SystemExit(f"parity failure: {name} {preset}")
        t_re = median_seconds(lambda: [pat.findall(t) for t in texts], runs)
        t_off = median_seconds(lambda: [split_offsets(d, preset) for d in datas], runs)
        t_txt = median_seconds(lambda: [split_text(t, preset) for t in texts], runs)
        chunks = sum(map(len, ref))
        mbps = [nbytes / 1e6 / t for t in (t_re, t_off, t_txt)]
        rows.append((name, preset, nbytes, chunks, *mbps, mbps[1] / mbps[0]))
    return rows


FIRST_CALL = (
    "import time; t0 = time.perf_counter(); "
    "from tokenmill.tokenizer.pretokenize.presets import split_offsets; "
    "split_offsets(b'hello world', 'gpt2'); t1 = time.perf_counter(); "
    "split_offsets(b'hello world', 'o200k'); t2 = time.perf_counter(); "
    "print(t1 - t0, t2 - t0)"
)


def first_call_cost() -> tuple[tuple[float, float], tuple[float, float]]:
    """(cold, warm) seconds from ``import`` to the end of the first split, in fresh processes."""
    with tempfile.TemporaryDirectory() as tmp:
        # NUMBA_CACHE_DIR takes precedence over __pycache__, so an empty one forces a compile.
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp, TOKENMILL_CACHE_DIR=tmp)
        cold = _run(env)
        warm = _run(env)
    return cold, warm


def _run(env: dict) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True, check=True)
    a, b = out.stdout.split()
    return float(a), float(b)


def full_parity(corpora: Path) -> None:
    """Compare every file of every corpus folder with regex.findall, for all presets."""
    total = 0
    for name in CORPORA:
        files = sorted((corpora / name).glob("*.txt"))
        size = 0
        datas, per_file = [], {p: [] for p in PRESET_NAMES}
        for f in files:
            text = f.read_text(encoding="utf-8")
            data = text.encode()
            datas.append(data)
            for preset in PRESET_NAMES:
                expected = regex.findall(PRESETS[preset], text)
                offs = split_offsets(data, preset)
                if split_text(text, preset) != expected or len(offs) != len(expected) + 1:
                    raise SystemExit(f"parity failure: {f} {preset}")
                per_file[preset].append(offs[1:] + size)
            size += len(data)
        bounds = np.cumsum([0] + [len(d) for d in datas])
        for preset in PRESET_NAMES:  # all files in one call: the same boundaries
            batch = split_offsets(b"".join(datas), preset, doc_offsets=bounds)
            if not np.array_equal(batch, np.concatenate([[0], *per_file[preset]])):
                raise SystemExit(f"doc_offsets parity failure: {name} {preset}")
        total += size
        print(f"{name}: {len(files):,d} files, {size:,d} bytes: identical for {', '.join(PRESET_NAMES)} "
              "(file by file, and all files in one doc_offsets call)", flush=True)
    print(f"all: {total:,d} bytes identical")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, numba {numba.__version__}, "
        f"regex {regex.__version__}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "corpora")
    ap.add_argument("--mb", type=float, default=4.0, help="sample size per corpus, MB of UTF-8")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--full-parity", action="store_true", help="check every corpus file, skip timing")
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write bench/results and docs")
    args = ap.parse_args()
    if args.full_parity:
        return full_parity(args.corpora)
    print(machine())
    cold, warm = first_call_cost()
    md = [f"First call (import + first split; gpt2 / all three presets): cold {cold[0]:.2f} / {cold[1]:.2f} s, "
          f"warm {warm[0]:.2f} / {warm[1]:.2f} s.", "",
          f"MB/s of UTF-8 input, median of {args.runs}, {args.mb:g} MB sampled per corpus; `regex` is "
          "`regex.findall` with the preset's pattern, `offsets` the compiled splitter's chunk offsets, "
          "`split_text` the same returned as a list of str.", "",
          "| corpus | preset | MB | chunks | regex MB/s | offsets MB/s | split_text MB/s | offsets/regex |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(md), flush=True)
    for name in CORPORA:
        folder = args.corpora / name
        if not folder.is_dir():
            md.append(f"| {name} | (folder {folder} not found: skipped) | | | | | | |")
            continue
        for row in bench_corpus(name, sample_files(folder, args.mb), args.runs):
            c, p, nb, ch, re_, off, txt, ratio = row
            md.append(f"| {c} | {p} | {nb / 1e6:.2f} | {ch:,d} | {re_:.1f} | {off:.1f} | {txt:.1f} | {ratio:.1f}x |")
            print(md[-1], flush=True)
    if not args.no_publish:
        from _results import publish, tables

        text = "\n".join(md)
        publish("pretokenize", {"first_call_cold_s": cold, "first_call_warm_s": warm, "tables": tables(text)}, text)


if __name__ == "__main__":
    main()
