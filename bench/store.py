"""Token store build throughput, memory and open time, side by side with the anchors.

    .venv/bin/python bench/store.py [--corpus en zh] [--mb 16] [--repeat 3] [--hf-mb 4] [--rss-gb 1]
                                    [--open-docs 10000000] [--no-publish]

Every measurement runs in a fresh child process (cold caches, no state carried between runs). MB/s
of UTF-8 input; medians of ``--repeat``. Rows, per corpus (the first ``--mb`` MB of
``../shared/corpora/<corpus>``, one document per file) and tokenizer (GPT-2's ranks, and a 32k
tokenmill tokenizer trained on 4 MB of that corpus):

* store build, 1 worker (1 MiB shards, and the default 16 MiB); 2 workers (threads, the default local
  engine); 2 worker processes;
* bare ``encode_batch(texts, as_arrays=True, num_threads=1 or 2)`` on the same texts already in
  memory (no reading, no writing): the floor the store is measured against (1 worker against 1
  thread: the worker encodes while the main thread reads, hashes and writes the other shards);
* HF ``datasets.map(batched=True, num_proc=2)`` with the same tokenizer exported to HF ``tokenizers``
  (``save_huggingface``), writing one uint16/uint32 array (``--hf-mb`` MB; HF is much slower);
* peak RSS (main process and workers summed) of a ``--rss-gb`` GB build (the en corpus repeated);
* opening a store of ``--open-docs`` documents (written directly: 10 shards of random short docs);
* windows and packed batches gathered from a 16-shard store vs the same ids in one flat array.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / ".." / "shared" / "corpora"
CACHE = ROOT / ".cache" / "bench_store"
PY = sys.executable


# ---- children ------------------------------------------------------------------------------------
def _load_tok(spec: str):
    from tokenmill import Tokenizer

    if spec == "gpt2":
        return Tokenizer.from_tiktoken(ROOT / ".cache" / "gpt2.tiktoken", pattern="gpt2",
                                       special_tokens={"<|endoftext|>": 50256})
    return Tokenizer.load(spec)


def cpu_seconds() -> float:
    """CPU time of this process, its threads and its finished children (worker pools end in the build)."""
    import resource

    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def child(args) -> dict:
    return _child(args)


def _child(args) -> dict:
    files = json.loads(Path(args.files).read_text())
    tok = _load_tok(args.tok)
    # the disk-cached kernels loaded (one text and a batch take different ones: ~20 ms the first time),
    # so neither the store nor the bare encode times loading them
    tok.encode_batch(["warm up the kernels"], as_arrays=True, num_threads=1)
    tok.encode_batch(["warm up", "the batch kernels"], as_arrays=True, num_threads=1)
    nbytes = sum(os.path.getsize(f) for f in files)
    if args.op == "store":
        import numpy as np

        from tokenmill import TokenStore
        from tokenmill.data.engines import EncodeOptions, assemble_ids

        # and the store's own kernel (short documents' ids are assembled by a compiled pass)
        assemble_ids([np.zeros(1, np.int64)] * 2, EncodeOptions("uint16", 2, None, None))

        out = Path(tempfile.mkdtemp(dir=args.tmp)) / "s"
        c, t = cpu_seconds(), time.perf_counter()
        s = TokenStore.build(out, files, tok, workers=args.workers, engine=args.engine, shard_bytes=args.shard_bytes,
                             progress=False)
        dt, cpu = time.perf_counter() - t, cpu_seconds() - c
        r = {"seconds": dt, "cpu_s": cpu, "bytes": nbytes, "tokens": s.num_tokens, "shards": s.num_shards}
        shutil.rmtree(out.parent)
        return r
    texts = read_texts(files)
    if args.op == "bare":
        c, t = cpu_seconds(), time.perf_counter()
        ids = tok.encode_batch(texts, as_arrays=True, num_threads=args.workers)
        dt, cpu = time.perf_counter() - t, cpu_seconds() - c
        return {"seconds": dt, "cpu_s": cpu, "bytes": nbytes, "tokens": sum(a.size for a in ids) + len(ids)}
    if args.op == "hf":
        import numpy as np
        from datasets import Dataset, disable_caching, disable_progress_bars
        from tokenizers import Tokenizer as HFTokenizer

        disable_progress_bars()
        disable_caching()
        hf_path = Path(tempfile.mkdtemp(dir=args.tmp)) / "tokenizer.json"
        tok.save_huggingface(hf_path)
        eos = tok.special_tokens["<|endoftext|>"]
        dtype = np.uint16 if tok.vocab_size <= 1 << 16 else np.uint32
        hf = HFTokenizer.from_file(str(hf_path))

        def encode(batch):
            return {"ids": [e.ids + [eos] for e in hf.encode_batch(batch["text"], add_special_tokens=False)]}

        t = time.perf_counter()
        ds = Dataset.from_dict({"text": texts}).map(encode, batched=True, num_proc=2, remove_columns=["text"])
        flat = np.fromiter((i for row in ds["ids"] for i in row), dtype=dtype)
        flat.tofile(hf_path.parent / "ids.bin")
        dt = time.perf_counter() - t
        shutil.rmtree(hf_path.parent)
        return {"seconds": dt, "bytes": nbytes, "tokens": int(flat.size)}
    raise SystemExit(f"unknown op {args.op}")


def read_texts(files: list[str]) -> list[str]:
    """The documents of ``files`` as the store reads them: a ``.jsonl`` file's ``text`` field per line, any other
    file whole."""
    out = []
    for f in files:
        if f.endswith(".jsonl"):
            out += [json.loads(line)["text"] for line in Path(f).read_text(encoding="utf-8").splitlines() if line.strip()]
        else:
            out.append(Path(f).read_bytes().decode("utf-8"))
    return out


def run_child(op: str, files: list[str], tok: str, *, workers=1, engine="local", shard_bytes=1 << 20,
              tmp: str) -> dict:
    fl = Path(tmp) / f"files-{abs(hash(tuple(files)))}.json"
    fl.write_text(json.dumps(files))
    cmd = [PY, __file__, "--child", op, "--files", str(fl), "--tok", tok, "--workers", str(workers),
           "--engine", engine, "--shard-bytes", str(shard_bytes), "--tmp", tmp]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child {op} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- parent --------------------------------------------------------------------------------------
def subset(corpus: str, mb: float) -> list[str]:
    files, total = [], 0
    for p in sorted((CORPORA / corpus).glob("*.txt")):
        files.append(str(p))
        total += p.stat().st_size
        if total >= mb * 1e6:
            break
    return files


def tok32k(corpus: str) -> str:
    from tokenmill import train_bpe

    path = CACHE / f"tok32k-{corpus}.json"
    if not path.exists():
        docs = [Path(f).read_bytes().decode("utf-8") for f in subset(corpus, 4)]
        tok = train_bpe(docs, 32768, pattern="gpt4", special_tokens=["<|endoftext|>"], progress=False)
        CACHE.mkdir(parents=True, exist_ok=True)
        tok.save(path)
    return str(path)


def median_rate(rs: list[dict]) -> float:
    return statistics.median(r["bytes"] / r["seconds"] / 1e6 for r in rs)


def best_rate(rs: list[dict]) -> float:
    return max(r["bytes"] / r["seconds"] / 1e6 for r in rs)


def build_rows(args, tmp) -> tuple[list[dict], list[str]]:
    rows, md = [], []
    md += ["| corpus | tokenizer | MB | store 1 worker | store 1 worker, 16 MiB shards | store 2 workers (threads) | "
           "store 2 processes | bare `encode_batch` 1 thread | bare 2 threads | HF `datasets.map` num_proc=2 | "
           "2 workers / 1 | store 1 worker / bare 1 thread | same, 16 MiB shards | store 2 workers / bare 2 threads | "
           "store / HF |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    fastest: list[str] = []
    cpu_md = ["| corpus | tokenizer | store 1 worker | store 2 threads | store 2 processes | bare 1 thread | bare 2 threads |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for corpus in args.corpus:
        files = subset(corpus, args.mb)
        hf_files = subset(corpus, args.hf_mb)
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        for tname, tok in (("GPT-2 ranks", "gpt2"), ("32k tokenmill", tok32k(corpus))):
            res = {k: [] for k in ("w1", "w1d", "w2", "p2", "bare1", "bare2", "hf")}
            runs = {
                "w1": lambda: run_child("store", files, tok, workers=1, tmp=tmp),
                "w1d": lambda: run_child("store", files, tok, workers=1, shard_bytes=16 << 20, tmp=tmp),
                "w2": lambda: run_child("store", files, tok, workers=2, tmp=tmp),
                "p2": lambda: run_child("store", files, tok, workers=2, engine="process", tmp=tmp),
                "bare1": lambda: run_child("bare", files, tok, workers=1, tmp=tmp),
                "bare2": lambda: run_child("bare", files, tok, workers=2, tmp=tmp),
            }
            if args.hf_mb > 0:
                runs["hf"] = lambda: run_child("hf", hf_files, tok, tmp=tmp)
            order = list(runs)
            for r in range(args.repeat):
                # interleaved, so load changes hit every variant alike, and in an order that turns each round:
                # a process's first touch of fresh memory costs more here just after another freed a lot (this
                # VM hands freed pages back to its host: the bare encode's output, 48 MB of new pages, ran
                # 12-124 ms of system time for the same ~8,700 page faults), so no variant always follows the same one
                for key in order[r % len(order):] + order[:r % len(order)]:
                    res[key].append(runs[key]())
            rate = {k: median_rate(v) if v else float("nan") for k, v in res.items()}
            cpu = {k: statistics.median(r["cpu_s"] / (r["bytes"] / 1e6) for r in v) if v and "cpu_s" in v[0] else None
                   for k, v in res.items()}
            row = {"corpus": corpus, "tokenizer": tname, "mb": round(mb, 1), "hf_mb": args.hf_mb,
                   "mb_per_s": {k: round(v, 2) for k, v in rate.items()},
                   "cpu_s_per_mb": {k: round(v, 4) for k, v in cpu.items() if v is not None},
                   "scaling_2_workers": round(rate["w2"] / rate["w1"], 3),
                   "scaling_2_processes": round(rate["p2"] / rate["w1"], 3),
                   "store_over_bare": round(rate["w2"] / rate["bare2"], 3),
                   "store1_over_bare1": round(rate["w1"] / rate["bare1"], 3),
                   "store1_default_shards_over_bare1": round(rate["w1d"] / rate["bare1"], 3),
                   "store_over_hf": round(rate["w2"] / rate["hf"], 2) if res["hf"] else None,
                   # the fastest run of each side: the estimate that a slow run (this VM's page faults, above)
                   # does not move
                   "store1_over_bare1_fastest": round(best_rate(res["w1"]) / best_rate(res["bare1"]), 3),
                   "store1_default_shards_over_bare1_fastest": round(best_rate(res["w1d"]) / best_rate(res["bare1"]), 3),
                   "runs": res}
            rows.append(row)
            fastest.append(f"{corpus} {tname} {row['store1_over_bare1_fastest']:.2f}x "
                           f"({row['store1_default_shards_over_bare1_fastest']:.2f}x)")
            md.append(f"| {corpus} | {tname} | {mb:.1f} | {rate['w1']:.1f} | {rate['w1d']:.1f} | {rate['w2']:.1f} | "
                      f"{rate['p2']:.1f} | {rate['bare1']:.1f} | {rate['bare2']:.1f} | {rate['hf']:.2f} | "
                      f"**{row['scaling_2_workers']:.2f}x** (processes {row['scaling_2_processes']:.2f}x) | "
                      f"**{row['store1_over_bare1']:.2f}x** | **{row['store1_default_shards_over_bare1']:.2f}x** | "
                      f"**{row['store_over_bare']:.2f}x** | "
                      f"**{row['store_over_hf']:.1f}x** |")
            cpu_md.append(f"| {corpus} | {tname} | " + " | ".join(f"{cpu[k] * 1e3:.1f}" for k in ("w1", "w2", "p2", "bare1", "bare2")) + " |")
            print(md[-1], flush=True)
    md += ["", f"Store 1 worker / bare 1 thread, the fastest of the {args.repeat} runs of each (16 MiB shards in "
               "brackets): " + ", ".join(fastest) + ". The bare encode's output is fresh memory (48 MB of new pages "
               "for 24 MB of English), whose page faults cost this VM 12-124 ms of system time for the same ~8,700 "
               "faults depending on what ran before, so its median moves more than the store's, which reuses its "
               "buffers.",
           "", "CPU milliseconds per MB of input (all threads and worker processes; median), the cost side of the "
               "same runs, independent of how busy the machine was:", ""] + cpu_md
    return rows, md


def rss_build(args, tmp) -> dict:
    """A --rss-gb GB corpus (the en files repeated under new names), built with 2 workers in a child;
    the parent samples the RSS of the child and its workers every 50 ms."""
    import psutil

    src = subset("en", 1000)
    d = Path(tmp) / "rss-corpus"
    d.mkdir()
    total, k = 0, 0
    while total < args.rss_gb * 1e9:
        for f in src:
            p = d / f"{k:05d}.txt"
            shutil.copyfile(f, p)
            total += p.stat().st_size
            k += 1
            if total >= args.rss_gb * 1e9:
                break
    files = sorted(str(p) for p in d.iterdir())
    fl = Path(tmp) / "rss-files.json"
    fl.write_text(json.dumps(files))
    cmd = [PY, __file__, "--child", "store", "--files", str(fl), "--tok", "gpt2", "--workers", "2",
           "--engine", "local", "--shard-bytes", str(16 << 20), "--tmp", tmp]  # 2 threads, the default
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peak_sum = peak_main = peak_pss = 0
    while proc.poll() is None:
        try:
            procs = [ps] + ps.children(recursive=True)
            full = [p.memory_full_info() for p in procs]  # rss counts pages shared after fork in every process
            rss = [m.rss for m in full]
            peak_sum, peak_main = max(peak_sum, sum(rss)), max(peak_main, rss[0])
            peak_pss = max(peak_pss, sum(m.pss for m in full))
        except psutil.Error:
            pass
        time.sleep(0.1)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"RSS build failed:\n{err[-3000:]}")
    r = json.loads(out.strip().splitlines()[-1])
    shutil.rmtree(d)
    return {"gb": round(total / 1e9, 3), "files": len(files), "peak_rss_total_gb": round(peak_sum / 1e9, 3),
            "peak_rss_main_gb": round(peak_main / 1e9, 3),
            "peak_pss_total_gb": round(peak_pss / 1e9, 3), "seconds": round(r["seconds"], 1),
            "mb_per_s": round(total / r["seconds"] / 1e6, 1)}


def synthetic_store(path: Path, n_docs: int, shards: int, seed: int = 0, length_range=(1, 24)):
    """A valid store of n_docs random short documents, written directly (encoding 10M documents
    would measure the encoder, not the store)."""
    import numpy as np

    from tokenmill import TokenStore

    rng = np.random.default_rng(seed)
    per = -(-n_docs // shards)

    def parts():
        for k in range(shards):
            lengths = rng.integers(length_range[0], length_range[1], min(per, n_docs - k * per))
            yield lengths, rng.integers(0, 50257, int(lengths.sum()))

    TokenStore.from_token_arrays(path, parts(), vocab_size=50257, tokenizer_hash="synthetic")


def open_time(args, tmp) -> dict:
    path = Path(tmp) / "open-store"
    synthetic_store(path, args.open_docs, 10)
    code = ("import time, json, sys; t0 = time.perf_counter(); from tokenmill import TokenStore; t1 = time.perf_counter(); "
            "s = TokenStore.open(sys.argv[1]); t2 = time.perf_counter(); n = s.lengths; t3 = time.perf_counter(); "
            "print(json.dumps({'import': t1 - t0, 'open': t2 - t1, 'lengths': t3 - t2, 'docs': len(s)}))")
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run([PY, "-c", code, str(path)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout))
    return {"documents": args.open_docs, "shards": 10,
            "open_s": round(statistics.median(r["open"] for r in runs), 4),
            "open_plus_lengths_s": round(statistics.median(r["open"] + r["lengths"] for r in runs), 4),
            "runs": runs}


def gather_speed(args, tmp) -> dict:
    """Windows and packed batches from a 16-shard store vs the same ids as one flat array."""
    import numpy as np

    from tokenmill import SlidingWindows, TokenStore, pack

    path = Path(tmp) / "gather-store"
    synthetic_store(path, 40_000, 16, seed=1, length_range=(64, 2048))  # ~42 M tokens
    store = TokenStore.open(path)
    flat = np.concatenate([sh.tokens for sh in store._shards])
    offsets = np.concatenate([[0], np.cumsum(store.lengths)])

    class Flat:  # the single-array fast path the plans already had
        token_array, doc_offsets, lengths = flat, offsets, store.lengths

        def __len__(self):
            return len(store)

        def get(self, i):
            return flat[offsets[i]:offsets[i + 1]]

    plan = SlidingWindows(512, 256).plan(store.lengths)
    rows = np.random.default_rng(0).permutation(len(plan))

    def best(f, k=5):
        ts = []
        for _ in range(k):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return min(ts)

    nbytes = int(plan.length.sum()) * 2
    w_store = best(lambda: store.gather_windows(plan, rows))
    w_flat = best(lambda: plan.gather(flat, offsets, rows))
    pplan = pack(store.lengths, 2048)
    blocks_bytes = pplan.tokens * 8
    b_store = best(lambda: sum(1 for _ in pplan.batches(store, batch_size=64, pad_id=0)), 3)
    b_flat = best(lambda: sum(1 for _ in pplan.batches(Flat(), batch_size=64, pad_id=0)), 3)
    return {"windows": int(len(plan)), "window_tokens": int(plan.length.sum()),
            "windows_store_gb_s": round(nbytes / w_store / 1e9, 3), "windows_flat_gb_s": round(nbytes / w_flat / 1e9, 3),
            "windows_store_over_flat": round(w_flat / w_store, 3),
            "batches_store_s": round(b_store, 3), "batches_flat_s": round(b_flat, 3),
            "batches_store_over_flat": round(b_flat / b_store, 3), "batch_int64_gb": round(blocks_bytes / 1e9, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", nargs="+", default=["en", "zh"])
    ap.add_argument("--mb", type=float, default=16)
    ap.add_argument("--hf-mb", type=float, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rss-gb", type=float, default=1.0)
    ap.add_argument("--open-docs", type=int, default=10_000_000)
    ap.add_argument("--skip", nargs="*", default=[], choices=["build", "rss", "open", "gather"])
    ap.add_argument("--no-publish", action="store_true")
    # child mode
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    ap.add_argument("--tok", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="local", help=argparse.SUPPRESS)
    ap.add_argument("--shard-bytes", type=int, default=1 << 20, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.op = args.child
        print(json.dumps(child(args)))
        return
    t0 = time.time()
    load0 = os.getloadavg()[0]
    results: dict = {"mb": args.mb, "hf_mb": args.hf_mb, "repeat": args.repeat, "shard_bytes": 1 << 20,
                     "load_average_at_start": load0}
    md = [f"Build throughput in MB/s of UTF-8 input (median of {args.repeat}, each run a fresh process, variants "
          f"interleaved); the first {args.mb:g} MB of each corpus, one document per file, `shard_bytes` = 1 MiB "
          "(and the default 16 MiB where a column says so: a shard is encoded in jobs of about 1 MiB either way); HF "
          f"on the first {args.hf_mb:g} MB. Load average at start {load0:.1f} (2 shared cores: absolute numbers "
          "move with the load, the ratios side by side less).", ""]
    with tempfile.TemporaryDirectory(dir=ROOT / ".cache") as tmp:
        if "build" not in args.skip:
            rows, table = build_rows(args, tmp)
            results["build"] = rows
            md += table
        if "rss" not in args.skip:
            r = results["rss"] = rss_build(args, tmp)
            print(r, flush=True)
            md += ["", f"Peak RSS of a {r['gb']:.2f} GB build ({r['files']:,d} files: the en corpus repeated; GPT-2 "
                       f"ranks, 2 worker threads, default 16 MiB shards, sampled every 0.1 s): main + workers "
                       f"**{r['peak_pss_total_gb']:.2f} GB** proportional set size (each shared page counted once), "
                       f"{r['peak_rss_total_gb']:.2f} GB RSS summed (pages shared after fork counted in every "
                       f"process), main alone {r['peak_rss_main_gb']:.2f} GB RSS; {r['seconds']:.0f} s, "
                       f"{r['mb_per_s']:.0f} MB/s."]
        if "open" not in args.skip:
            r = results["open"] = open_time(args, tmp)
            print(r, flush=True)
            md += ["", f"Opening a store of {r['documents']:,d} documents in {r['shards']} shards (new process, "
                       f"page cache warm): `TokenStore.open` **{r['open_s'] * 1e3:.1f} ms**, open + `lengths` "
                       f"(reads and checks every offset) **{r['open_plus_lengths_s']:.3f} s**."]
        if "gather" not in args.skip:
            r = results["gather"] = gather_speed(args, tmp)
            print(r, flush=True)
            md += ["", f"Across shards (16 shards, 40,000 documents of 64-2,047 tokens; best of 5): all "
                       f"{r['windows']:,d} windows of 512 (stride 256) in "
                       f"random order via `store.gather_windows` {r['windows_store_gb_s']:.2f} GB/s vs "
                       f"`WindowPlan.gather` on one flat array {r['windows_flat_gb_s']:.2f} GB/s "
                       f"(**{r['windows_store_over_flat']:.2f}x**); every packed batch of 64 x 2048 via "
                       f"`PackPlan.batches(store)` {r['batches_store_s']:.2f} s vs the flat array "
                       f"{r['batches_flat_s']:.2f} s (**{r['batches_store_over_flat']:.2f}x**)."]
    results["wall_s"] = round(time.time() - t0, 1)
    text = "\n".join(md)
    print(text)
    if not args.no_publish:
        from _results import publish

        publish("store", results, text)


if __name__ == "__main__":
    main()
