"""Where tokenmill's one-thread gap to gigatoken is: new text against text seen before, and what a first
sighting and a long chunk cost.

    .venv/bin/python bench/_gap.py [--tokenizer gpt2] [--corpus en] [--rounds 7]

A developer's tool, not a published benchmark (nothing goes to docs/benchmarks.md; its numbers are
quoted there with the commit they were taken at). One process, the frontier protocol's sample (the
same documents and warm-up text as ``bench/tokenizer_speed.py --phases frontier --max-mb 2``):

* **fresh / again**: a fresh encoder warmed on 1 MB of other text, then the sample (what the
  frontier table times), then the same sample again (text seen before), for tokenmill
  (``encode_batch(as_arrays=True)``, one thread) and gigatoken (``encode`` per document): fresh minus
  again is what first sightings cost each;
* **seen text, split apart**: the compiled split, the kernel, and the rest of ``encode_batch``;
* **first sightings, apart**: the sample's chunks of 1-15 bytes that are neither vocabulary tokens nor
  in the warm-up text, once each: the kernel over them on a fresh cache against the merges alone
  (``_bpe_short`` on each, nothing else);
* **a merge by working set**: ``_bpe_short`` over the first 1, 64, 2,000 and all of those chunks,
  repeated: a merge whose pair-table rows sit in L1 against one whose rows are out of cache (the loop's
  own work against its memory);
* **long chunks**: the kernel on seen text over all the chunks against the same chunks without those
  over 15 bytes (their bytes dropped): what each costs;
* **the seen-text floor**: the kernel on text seen before, ns a chunk, over the sample's chunks in
  their order, the same chunks shuffled, one word (" the") repeated, the 64 most frequent chunks in
  turn, and every distinct chunk of 1-7 bytes in turn (as many chunks each): the loop's own work
  (one word, its rows in L1) against its rows out of cache;
* **by chunk class**: each class's chunks alone (1-7 and 8-15 bytes, a vocabulary token or not; 16-31;
  longer), seen before and fresh, against all mixed: what the branches between classes cost;
* **branches or memory**: the sample's class sequence with one chunk standing for each class (every
  branch between classes kept, no row out of cache) against the sample, and the tokens of 1-7 bytes
  alone against the tokens of 1-15 bytes in their order (real and one chunk each): what the length's
  branch costs by itself.

Medians over ``--rounds``; runs an hour apart on this shared machine move by 10-20%, ratios in one
run much less.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def _median_ms(xs) -> float:
    return statistics.median(xs) * 1e3


def _tools(name: str):
    import gigatoken
    from tokenizer_speed import GPT2_RANKS

    from tokenmill import Tokenizer

    if name == "gpt2":
        return (Tokenizer.from_tiktoken(GPT2_RANKS, pattern="gpt2", special_tokens={}),
                lambda: gigatoken.Tokenizer.from_tiktoken(str(GPT2_RANKS), "gpt2", {}))
    path = ROOT / ".cache" / "openai" / f"{name}_base.tiktoken"
    return (Tokenizer.from_tiktoken(path, pattern=name, special_tokens={}),
            lambda: gigatoken.Tokenizer.from_tiktoken(str(path)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/_gap.py --tokenizer cl100k --corpus code")
    ap.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "cl100k", "o200k"])
    ap.add_argument("--corpus", default="en", help="a folder of ../shared/corpora (en, zh, code)")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    from tokenizer_speed import load_docs, warmup_docs

    from tokenmill.tokenizer._cpython import utf8_joined
    from tokenmill.tokenizer.bpe import _encode_kernels as EK
    from tokenmill.tokenizer.bpe.encoder import _CACHE_LIMIT
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    folder = str(ROOT.parent / "shared" / "corpora" / a.corpus)
    docs, warm = load_docs(folder, 2), warmup_docs(folder, 2, 1.0)
    tok, giga = _tools(a.tokenizer)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    R: dict = {k: [] for k in ("tm fresh", "tm again", "gg fresh", "gg again")}
    for _ in range(a.rounds):
        tok._encoder = None
        tok._compiled()
        tok.encode_batch(warm, num_threads=1, as_arrays=True)
        for key in ("tm fresh", "tm again"):
            t = time.perf_counter()
            tok.encode_batch(docs, num_threads=1, as_arrays=True)
            R[key].append(time.perf_counter() - t)
        g = giga()
        g.encode("warm up")
        for x in warm:
            g.encode(x)
        for key in ("gg fresh", "gg again"):
            t = time.perf_counter()
            for x in docs:
                g.encode(x)
            R[key].append(time.perf_counter() - t)
    print(f"{a.tokenizer} {a.corpus}: {len(docs)} documents, {nbytes / 1e6:.1f} MB, {a.rounds} rounds")
    for who in ("tm", "gg"):
        f, s = _median_ms(R[f"{who} fresh"]), _median_ms(R[f"{who} again"])
        print(f"  {'tokenmill' if who == 'tm' else 'gigatoken'}: fresh {f:.2f} ms, again {s:.2f} ms, "
              f"first sightings (fresh - again) {f - s:.2f} ms")

    # seen text, split apart
    enc = tok._compiled()
    data, dd = utf8_joined(docs)
    offs = compiled_offsets(data, enc.pattern, doc_offsets=dd)
    marks = np.searchsorted(offs, dd[:-1]).astype(np.int64)
    pos = np.empty(len(docs), np.int64)
    split_buf = np.empty(len(data) + 2, np.int64)  # (a fresh 16 MB block and a copy of the offsets each pass
    # read 1.37 against 0.71 ms on GPT-2 code: page faults and a copy the encoder does not make)
    S: dict = {k: [] for k in ("whole", "split", "kernel")}
    for _ in range(3 * a.rounds):
        t = time.perf_counter()
        tok.encode_batch(docs, num_threads=1, as_arrays=True)
        S["whole"].append(time.perf_counter() - t)
        t = time.perf_counter()  # as the encoder calls it: into its thread's buffer, no copy out
        compiled_offsets(data, enc.pattern, doc_offsets=dd, compact=False, out_buf=split_buf)
        S["split"].append(time.perf_counter() - t)
        t = time.perf_counter()
        enc._run(data, offs, marks, pos)
        S["kernel"].append(time.perf_counter() - t)
    w, sp, k = (_median_ms(S[x]) for x in ("whole", "split", "kernel"))
    print(f"  seen text: encode_batch {w:.2f} ms = split {sp:.2f} + kernel {k:.2f} + the rest {w - sp - k:.2f} "
          f"({offs.size - 1:,d} chunks, kernel {k / (offs.size - 1) * 1e6:.1f} ns a chunk)")

    # first sightings, apart
    firsts = _first_sightings(tok, docs, warm, 1, 15)
    fdata, foffs = _laid_out(firsts)
    none = np.zeros(0, np.int64)
    F: dict = {"kernel": [], "merges": []}
    out = np.empty(fdata.size, np.int64)
    merges = 0
    for _ in range(2 * a.rounds):
        state = enc._pinned_state([])
        t = time.perf_counter()
        n, _ = EK.encode_chunks(fdata, foffs, none, none, enc.byte_ids, enc.byte_pairs, enc.pairs, enc.filt, enc.chars,
                                enc.vtab, enc.vtab2, enc.imask, state, _CACHE_LIMIT, out)
        F["kernel"].append(time.perf_counter() - t)
        t = time.perf_counter()
        merges = _merges_only(EK, fdata, foffs, enc.byte_ids, enc.pairs, enc.filt, enc.byte_pairs)
        F["merges"].append(time.perf_counter() - t)
    fk, fm = _median_ms(F["kernel"]), _median_ms(F["merges"])
    print(f"  first sightings apart ({len(firsts):,d} chunks of 1-15 bytes, {merges:,d} merges): kernel on a fresh "
          f"cache {fk:.2f} ms ({fk / max(len(firsts), 1) * 1e6:.0f} ns each), merges alone {fm:.2f} ms "
          f"({fm / max(merges, 1) * 1e6:.1f} ns a merge)")

    # the merges by working set: the same loop over the first 1, 64, 2,000 and all of those chunks, repeated
    # to ~200k chunks: what a merge costs with its pair-table rows in L1 (one chunk) against out of cache
    sizes = []
    for m in (1, 64, 2000, len(firsts)):
        sub = firsts[:m] * max(1, 200_000 // max(m, 1))
        sd, so = _laid_out(sub)
        ts, nm = [], 0
        for _ in range(a.rounds):
            t = time.perf_counter()
            nm = _merges_only(EK, sd, so, enc.byte_ids, enc.pairs, enc.filt, enc.byte_pairs)
            ts.append(time.perf_counter() - t)
        sizes.append(f"{m:,d}: {_median_ms(ts) / max(nm, 1) * 1e6:.1f}")
    print(f"  a merge by distinct chunks merged over and over, ns: {', '.join(sizes)}")

    # long chunks
    lens = np.diff(offs)
    keep = lens <= 15
    parts = [bytes(data[offs[i]:offs[i + 1]]) for i in np.flatnonzero(keep)]
    sdata, soffs = _laid_out(parts, pad=0)
    L: dict = {"all": [], "short": []}
    for _ in range(3 * a.rounds):
        t = time.perf_counter()
        enc._run(data, offs, none, np.empty(0, np.int64))
        L["all"].append(time.perf_counter() - t)
        t = time.perf_counter()
        enc._run(sdata, soffs, none, np.empty(0, np.int64))
        L["short"].append(time.perf_counter() - t)
    la, ls = _median_ms(L["all"]), _median_ms(L["short"])
    nl = int((~keep).sum())
    print(f"  long chunks: the kernel on seen text {la:.2f} ms, without the {nl:,d} chunks over 15 bytes {ls:.2f} ms "
          f"({(la - ls) / max(nl, 1) * 1e6:.0f} ns each, {(la - ls) / la:.0%} of it)")
    _floor(enc, data, offs, a.rounds)
    _classes(tok, data, offs, warm, a.rounds)
    _in_the_mix(enc, data, offs, a.rounds)


def _first_sightings(tok, docs, warm, lo: int, hi: int) -> list[bytes]:
    """The chunks of ``docs`` of ``lo``-``hi`` bytes that are neither tokens nor chunks of ``warm``, once each."""
    from tokenmill.tokenizer._cpython import utf8_joined
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    pattern = tok._compiled().pattern

    def chunks(texts):
        d, o = utf8_joined(texts)
        b = bytes(d)
        c = compiled_offsets(d, pattern, doc_offsets=o)
        return [b[c[i]:c[i + 1]] for i in range(c.size - 1)]

    vocab = {tok.token_bytes(i) for i in range(tok.vocab_size)}
    seen, firsts = set(chunks(warm)), []
    for c in chunks(docs):
        if c not in seen and c not in vocab and lo <= len(c) <= hi:
            firsts.append(c)
        seen.add(c)
    return firsts


def _laid_out(chunks: list[bytes], pad: int = 16):
    """``(data, offsets)`` of ``chunks`` joined (``pad`` spaces after them), as the kernel takes chunks."""
    return (np.frombuffer(b"".join(chunks) + b" " * pad, np.uint8),
            np.cumsum([0] + [len(c) for c in chunks]).astype(np.int64))


def _floor(enc, data, offs, rounds: int) -> None:
    """The kernel on seen text, ns a chunk, over the sample's chunks against the same number of chunks
    arranged so that their table rows are always in cache (one word, 64 words) or never (every
    distinct short chunk in turn), and shuffled (no order to learn)."""
    b = bytes(data)
    chunks = [b[offs[i]:offs[i + 1]] for i in range(offs.size - 1)]
    counts = Counter(chunks)
    order = sorted(counts, key=lambda c: (-counts[c], c))
    short = [c for c in order if len(c) <= 7]
    n = len(chunks)
    perm = np.random.default_rng(0).permutation(n)

    variants = {"in order": (data, offs), "shuffled": _laid_out([chunks[i] for i in perm]),
                "one word": _laid_out([b" the"] * n), "64 words in turn": _laid_out([order[i % 64] for i in range(n)]),
                f"all {len(short):,d} short chunks in turn": _laid_out([short[i % len(short)] for i in range(n)])}
    none = np.zeros(0, np.int64)
    parts = []
    for name, (d, o) in variants.items():
        enc._run(d, o, none, np.empty(0, np.int64))  # every chunk seen (and merged) before timing
        ts = []
        for _ in range(3 * rounds):
            t = time.perf_counter()
            enc._run(d, o, none, np.empty(0, np.int64))
            ts.append(time.perf_counter() - t)
        parts.append(f"{name} {_median_ms(ts) / (o.size - 1) * 1e6:.1f}")
    print(f"  the seen-text floor, kernel ns a chunk ({n:,d} chunks each): {', '.join(parts)}")


def _classes(tok, data, offs, warm, rounds: int) -> None:
    """The kernel by chunk class: each class's chunks of the sample alone (in their order), on text seen
    before and on a fresh encoder warmed on the warm-up text, against all of them mixed. A class alone
    runs the same code over and over; mixed, the branches between classes (length, a seed's one id or
    the merged table's ids) are mispredicted: the sum of the classes alone against the mixed pass is what
    that costs."""
    b = bytes(data)
    chunks = [b[offs[i]:offs[i + 1]] for i in range(offs.size - 1)]
    vocab = {tok.token_bytes(i) for i in range(tok.vocab_size)}
    classes = {"1-7 token": [], "1-7 other": [], "8-15 token": [], "8-15 other": [], "16-31": [], "32+": []}
    for c in chunks:
        n = len(c)
        if n <= 15:
            classes[f"{'1-7' if n <= 7 else '8-15'} {'token' if c in vocab else 'other'}"].append(c)
        else:
            classes["16-31" if n <= 31 else "32+"].append(c)
    none = np.zeros(0, np.int64)

    def timed(parts):
        d, o = _laid_out(parts)
        fresh, again = [], []
        for _ in range(rounds):
            tok._encoder = None
            enc = tok._compiled()
            tok.encode_batch(warm, num_threads=1, as_arrays=True)
            for runs in (fresh, again):
                t = time.perf_counter()
                enc._run(d, o, none, np.empty(0, np.int64))
                runs.append(time.perf_counter() - t)
        return _median_ms(fresh), _median_ms(again)

    rows, sums = [], [0.0, 0.0]
    for name, parts in classes.items():
        if parts:
            f, g = timed(parts)
            sums[0] += f
            sums[1] += g
            rows.append(f"{name} {len(parts):,d}: {g / len(parts) * 1e6:.1f} ns seen, {g:.2f} / {f:.2f} ms")
    f, g = timed(chunks)
    print("  by chunk class (each alone: ns a chunk on text seen before, ms seen / fresh): " + "; ".join(rows))
    print(f"  the classes alone sum to {sums[1]:.2f} ms seen, {sums[0]:.2f} ms fresh; all mixed {g:.2f} ms seen, "
          f"{f:.2f} ms fresh: mixing costs {g - sums[1]:.2f} ms ({(g - sums[1]) / g:.0%}) on text seen before")
    # branches or memory: the sample's classes in their order with one chunk standing for each class (its
    # most frequent) keeps every branch between classes and drops the rows out of cache
    label = {c: name for name, parts in classes.items() for c in parts}
    rep: dict = {}
    for c, _ in Counter(chunks).most_common():
        rep.setdefault(label[c], c)
    seq = [label[c] for c in chunks]
    toks7 = classes["1-7 token"]
    toks15 = [c for c, s in zip(chunks, seq) if s in ("1-7 token", "8-15 token")]
    parts = {"the sample": chunks, "its class sequence, one chunk each": [rep[s] for s in seq],
             "tokens of 1-7 bytes": toks7, "tokens of 1-15 bytes in their order": toks15,
             "the same, one chunk each": [rep[s] for s in seq if s in ("1-7 token", "8-15 token")]}
    out = []
    for name, ps in parts.items():
        _, g = timed(ps)
        out.append(f"{name} {g / len(ps) * 1e6:.1f}")
    print("  branches or memory, ns a chunk seen: " + ", ".join(out))


def _in_the_mix(enc, data, offs, rounds: int) -> None:
    """The kernel on text seen before over the sample less one class of chunks, against the whole sample:
    the time each class's chunks add where they sit among the others, ms and ns a chunk."""
    nch = offs.size - 1
    marks = np.arange(nch, dtype=np.int64)
    pos = np.empty(nch, np.int64)
    nids = enc._run(data, offs, marks, pos).size
    ids = np.diff(np.append(pos, nids))
    lens = np.diff(offs)
    b = bytes(data)
    chunks = [b[offs[i]:offs[i + 1]] for i in range(nch)]
    short, wide = lens <= 7, (lens >= 8) & (lens <= 15)
    classes = {"1-7 bytes, a token": short & (ids == 1), "1-7, 2-3 ids": short & (ids >= 2) & (ids <= 3),
               "1-7, 4+ ids": short & (ids >= 4), "8-15, a token": wide & (ids == 1),
               "8-15, 2-3 ids": wide & (ids >= 2) & (ids <= 3), "8-15, 4+ ids": wide & (ids >= 4) & (ids != lens),
               "8-15, each byte its id": wide & (ids >= 4) & (ids == lens), "16-31": (lens >= 16) & (lens <= 31),
               "32+": lens >= 32}
    none = np.zeros(0, np.int64)
    runs = {"all": (data, offs)}
    runs.update({name: _laid_out([c for c, drop in zip(chunks, m.tolist()) if not drop]) for name, m in classes.items()})
    times: dict = {name: [] for name in runs}
    for d, o in runs.values():
        enc._run(d, o, none, np.empty(0, np.int64))
    for _ in range(2 * rounds):
        for name, (d, o) in runs.items():
            t = time.perf_counter()
            enc._run(d, o, none, np.empty(0, np.int64))
            times[name].append(time.perf_counter() - t)
    whole = min(times["all"])
    parts = []
    for name, m in classes.items():
        k = int(m.sum())
        if k:
            cost = whole - min(times[name])
            parts.append(f"{name} {k:,d} ({k / nch:.1%}): {cost * 1e3:.2f} ms, {cost / k * 1e9:.0f} ns each")
    print(f"  each class in the mix (the kernel on seen text, {whole * 1e3:.2f} ms, less that class's chunks; fastest "
          f"of {2 * rounds}): " + "; ".join(parts))


def _merges_only(EK, data, offs, byte_ids, table, filt, byte_pairs) -> int:
    """``_bpe_short`` over each chunk, nothing else: the number of merges (compiled on first use)."""
    global _MERGES
    if _MERGES is None:
        from tokenmill._jit import njit
        from tokenmill.tokenizer._wide import raw

        @njit(nogil=True)
        def run(data, offs, byte_ids, table, filt, byte_pairs):
            # the kernel's way: one block for the ids and ranks, its pointers and the pair table's made once
            # (arrays handed to ``_bpe_short`` would time numba's reference counts, not the merges)
            scratch = np.empty(128, np.int64)
            work = scratch[:64]
            wp, rp = raw(scratch), raw(scratch[64:])
            tf, tmask, ff, fmask = EK._flat_pairs(table, filt)
            tp, fp, bp, dp = raw(tf), raw(ff), raw(byte_pairs), raw(data)
            merges = 0
            for k in range(offs.size - 1):
                a = offs[k]
                n = offs[k + 1] - a
                for t in range(n):
                    work[t] = byte_ids[data[a + t]]
                merges += n - EK._bpe_short(wp, n, tp, tmask, fp, fmask, rp, bp, dp, a)
            return merges

        _MERGES = run
    return _MERGES(data, offs, byte_ids, table, filt, byte_pairs)


_MERGES = None

if __name__ == "__main__":
    main()
