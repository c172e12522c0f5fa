"""SentencePiece BPE models: tokenmill vs sentencepiece (the reference) vs gigatoken, side by side in one run.

Two models: Mistral v3's ``tokenizer.model`` (32,768 pieces, byte fallback, identity normalizer, 750
control pieces; from the mistral-common wheel, `make test` extracts it into .cache/mistral) and a
small model trained here with ``sentencepiece`` (BPE, 8,000 pieces, byte fallback, its default
``nmt_nfkc`` normalizer) on every 20th document of the en and zh corpora. Measured on held-out
documents (the others, a deterministic sample of ``--max-mb`` MB per corpus):

* encoding MB/s of UTF-8 input on one thread, median of ``--repeat`` passes over the whole sample,
  round robin (every tool once per pass, so a change in the machine's load hits all alike), each pass
  on a fresh encoder (tokenmill: its segment cache and tables rebuilt; gigatoken: a new object;
  sentencepiece keeps no state), set-up untimed: tokenmill ``encode_batch(docs, num_threads=1,
  as_arrays=True, disallowed_special=())`` (sentencepiece's semantics: control-piece text is text),
  ``SentencePieceProcessor.encode(docs, num_threads=1)``, gigatoken ``encode_batch(docs, parallel=False)``;
* ids: tokenmill's must equal sentencepiece's for every document (the run fails otherwise);
  gigatoken's are compared and the documents that differ counted;
* the profile of tokenmill's pass: seconds in the normalizer kernel, in the encoder kernel and in the
  Python around them (special-token scan, UTF-8, batching), from one extra instrumented pass.

Run (needs ``sentencepiece``; gigatoken is optional: ``pip install gigatoken==0.10.0``):
    .venv/bin/python bench/sentencepiece_speed.py --max-mb 4 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MISTRAL_V3 = "mistral_instruct_tokenizer_240323.model.v3"


def split_corpus(folder: Path, max_mb: float) -> tuple[list[str], list[str]]:
    """(training documents: every 20th file, measured documents: a deterministic sample of the others)."""
    files = sorted(folder.glob("*.txt"))
    train = [f.read_bytes().decode("utf-8") for f in files[::20]]
    rest = [f for i, f in enumerate(files) if i % 20]
    random.Random(0).shuffle(rest)
    out, total = [], 0
    for f in rest:
        if total >= max_mb * 1e6:
            break
        out.append(f.read_bytes().decode("utf-8"))
        total += len(out[-1].encode())
    return train, out


def train_small(lines: list[str], prefix: Path) -> Path:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(prefix), model_type="bpe",
                                   vocab_size=8000, byte_fallback=True, shuffle_input_sentence=False,
                                   input_sentence_size=400_000, num_threads=1, minloglevel=2)
    return prefix.with_suffix(".model")


def profile(tok, docs: list[str]) -> dict:
    """Seconds of one tokenmill pass by stage: normalizer kernel, encoder kernel, the Python around them."""
    enc = tok._compiled()
    spent = {"normalize": 0.0, "encode kernel": 0.0}
    module = enc._K

    def timed(name, fn):
        def run(*args):
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[name] += time.perf_counter() - t0
        return run

    timed_kernels = {"encode": timed("encode kernel", module.encode), "normalize": timed("normalize", module.normalize)}

    class K:  # the kernel module with the normalizer and the encoder timed
        def __getattr__(self, name):
            return timed_kernels.get(name) or getattr(module, name)

    enc._K = K()
    try:
        t0 = time.perf_counter()
        tok.encode_batch(docs, num_threads=1, as_arrays=True, disallowed_special=())
        total = time.perf_counter() - t0
    finally:
        enc._K = module
    spent["python"] = total - spent["normalize"] - spent["encode kernel"]
    spent["total"] = total
    return spent


def bench(models: dict, samples: dict, repeat: int) -> dict:
    import numpy as np
    import sentencepiece as spm

    from tokenmill.tokenizer.sentencepiece import SentencePieceTokenizer

    try:
        import gigatoken
    except ImportError:
        gigatoken = None
    R: dict = {}
    for model, path in models.items():
        tok = SentencePieceTokenizer.load(path)
        sp = spm.SentencePieceProcessor(model_file=str(path))

        def fresh_tm():
            tok._encoder = None  # a new compiled encoder: empty segment cache, tables rebuilt (untimed)
            tok._compiled()
            return tok

        tools = {
            "tokenmill": (fresh_tm, lambda t, d: t.encode_batch(d, num_threads=1, as_arrays=True,
                                                                disallowed_special=())),
            "sentencepiece": (lambda: sp, lambda s, d: s.encode(d, num_threads=1)),
        }
        if gigatoken is not None:
            tools["gigatoken"] = (lambda: gigatoken.Tokenizer.from_sentencepiece(str(path)),
                                  lambda g, d: g.encode_batch(d, parallel=False))
        for script, docs in samples.items():
            nbytes = sum(len(d.encode()) for d in docs)
            warm = [docs[0][:3000]]
            for fresh, fn in tools.values():
                fn(fresh(), warm)
            secs: dict = {name: [] for name in tools}
            cpu: dict = {name: [] for name in tools}
            outs: dict = {}
            for rep in range(repeat):
                for name, (fresh, fn) in tools.items():
                    obj = fresh()
                    c0, t0 = time.process_time(), time.perf_counter()
                    out = fn(obj, docs)
                    secs[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.process_time() - c0)
                    if rep == 0:
                        outs[name] = [np.asarray(x, np.int64) for x in out]
                    del out
            ref = outs["sentencepiece"]
            bad = sum(not np.array_equal(a, b) for a, b in zip(outs["tokenmill"], ref))
            if bad or len(outs["tokenmill"]) != len(ref):
                raise SystemExit(f"{model} {script}: tokenmill's ids differ from sentencepiece's on {bad} documents")
            row: dict = {"bytes": nbytes, "documents": len(docs), "tokens": int(sum(map(len, ref)))}
            for name in tools:
                med = statistics.median(secs[name])
                row[name] = {"seconds": secs[name], "cpu_seconds": cpu[name], "median": med,
                             "mb_s": nbytes / 1e6 / med}
                print(f"  {model} {script} {name}: {nbytes / 1e6 / med:.1f} MB/s", file=sys.stderr)
            if "gigatoken" in outs:
                row["gigatoken"]["documents_differing"] = int(sum(
                    not np.array_equal(a, b) for a, b in zip(outs["gigatoken"], ref)))
            row["profile"] = profile(fresh_tm(), docs)
            R.setdefault(model, {})[script] = row
    return R


def report(R: dict, a, versions: dict) -> str:
    giga = any("gigatoken" in r for rows in R.values() for r in rows.values())
    lines = [
        f"Encoding on one thread, MB/s of UTF-8 input ({a.max_mb:g} MB of held-out documents per corpus, median "
        f"of {a.repeat} passes round robin, each on a fresh encoder); tokenmill's ids equal sentencepiece's on "
        "every document:",
        "",
        "| model | text | tokenmill | sentencepiece | " + ("gigatoken | " if giga else "") +
        "tokenmill / sentencepiece | " + ("tokenmill / gigatoken | gigatoken documents differing |" if giga else ""),
        "|---|---|---|---|" + ("---|" if giga else "") + "---|" + ("---|---|" if giga else ""),
    ]
    for model, rows in R.items():
        for script, r in rows.items():
            t, s = r["tokenmill"]["mb_s"], r["sentencepiece"]["mb_s"]
            cells = [model, script, f"{t:.1f}", f"{s:.1f}"]
            if giga:
                g = r["gigatoken"]["mb_s"]
                cells.append(f"{g:.1f}")
            cells.append(f"**{t / s:.1f}x**")
            if giga:
                cells += [f"**{t / g:.2f}x**", f"{r['gigatoken']['documents_differing']} of {r['documents']}"]
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Where tokenmill's time goes (one extra pass, seconds; `python`: the special-token scan, UTF-8 and "
        "batching around the kernels):",
        "",
        "| model | text | normalizer kernel | encoder kernel | python | total |",
        "|---|---|---|---|---|---|",
    ]
    for model, rows in R.items():
        for script, r in rows.items():
            p = r["profile"]
            lines.append(f"| {model} | {script} | {p['normalize']:.3f} | {p['encode kernel']:.3f} | "
                         f"{p['python']:.3f} | {p['total']:.3f} |")
    lines += [
        "",
        f"sentencepiece {versions.get('sentencepiece', '?')}, gigatoken {versions.get('gigatoken', 'not installed')}. "
        "sentencepiece merges over a whole document at once (its heap grows with it), so its MB/s drops on long "
        "documents (the en sample: whole books); tokenmill cuts the text where no piece can span and caches the "
        "pieces between cuts. Ratios from one run on a shared 2-core machine are robust to its load; absolute "
        "MB/s are not.",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default=str(ROOT.parent / "shared" / "corpora"))
    ap.add_argument("--mistral", default=os.environ.get("TOKENMILL_MISTRAL_DIR", str(ROOT / ".cache" / "mistral")))
    ap.add_argument("--scripts", nargs="+", default=["en", "zh"])
    ap.add_argument("--max-mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-publish", action="store_true")
    a = ap.parse_args()
    import importlib.metadata

    os.environ.setdefault("TOKENMILL_PYTHON_FIRST", "0")  # measure the kernels, never the first-run twin
    corpora = Path(a.corpora)
    mistral = Path(a.mistral) / MISTRAL_V3
    if not mistral.is_file():
        sys.exit(f"{mistral} not found: run `make .cache/mistral/tokenizer.model.v1` (or `make test`)")
    samples, lines = {}, []
    for script in a.scripts:
        train, held_out = split_corpus(corpora / script, a.max_mb)
        samples[script] = held_out
        lines += [ln for doc in train for ln in doc.splitlines() if ln.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        small = train_small(lines, Path(tmp) / "small8k")
        models = {"Mistral v3": mistral, "trained 8k (nmt_nfkc)": small}
        R = bench(models, samples, a.repeat)
    versions = {}
    for name in ("sentencepiece", "gigatoken"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    text = report(R, a, versions)
    print(text)
    if not a.no_publish:
        from _results import publish

        publish("sentencepiece", {"encoding": R, "max_mb": a.max_mb, "repeat": a.repeat, "versions": versions},
                text)


if __name__ == "__main__":
    main()
