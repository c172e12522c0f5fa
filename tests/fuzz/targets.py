"""Fuzz targets, run inside the worker subprocess (``_worker.py``).

Each target calls the public API with the (hostile) arguments it is given and checks the result
with an oracle (an ``assert``). The worker reports a TokenmillError as "refused", which the tests
accept when it has a message; any other exception, a failed oracle, a crash or a hang fails the test.
"""

from __future__ import annotations

import numpy as np


def pack_plan(lengths, block_size, method, long_docs):
    from tokenmill import pack

    plan = pack(lengths, block_size, method=method, long_docs=long_docs)
    plan.validate()  # blocks within block_size, segments inside documents, every token once
    L = np.asarray(lengths)
    assert plan.num_docs == L.size
    assert plan.tokens + plan.truncated_tokens == int(sum(int(x) for x in L.ravel().tolist()))
    return plan.num_blocks


def window_plan(lengths, window, stride, options):
    from tokenmill import SlidingWindows, coverage_report

    sw = SlidingWindows(window, stride, **options)
    plan = sw.plan(lengths)
    L = np.asarray(lengths, np.int64)
    if len(plan):
        assert (plan.length >= 1).all() and (plan.end <= L[plan.doc]).all()
    st = plan.stats
    assert st.covered_tokens + st.uncovered_tokens == st.num_tokens == int(L.sum())
    assert st.unscored_tokens >= 0
    if int(L.sum()) <= 20_000:
        mult = plan.multiplicity(L)
        assert st.covered_tokens == int((mult > 0).sum())
        coverage_report(plan, L)
    return len(plan)


def gather(lengths, window, stride, tokens, offsets, out, pad_id):
    from tokenmill import SlidingWindows

    plan = SlidingWindows(window, stride).plan(lengths)
    before = None if out is None else np.array(out, copy=True)
    ids, n = plan.gather(tokens, offsets, pad_id=pad_id, out=out)
    toks = np.asarray(tokens)
    offs = np.asarray(offsets, np.int64)
    for r in range(len(plan)):  # oracle: numpy slicing, which checks bounds
        s = int(offs[plan.doc[r]] + plan.start[r])
        assert ids[r, : n[r]].tolist() == toks[s : s + int(n[r])].tolist()
        assert (ids[r, n[r]:] == pad_id).all()
    if out is not None:
        assert (out[len(plan):] == before[len(plan):]).all()  # rows past the plan untouched
    return ids.shape


class Flat:
    """A token source with the flat fast path whose arrays may disagree with its lengths."""

    def __init__(self, lengths, token_array, doc_offsets):
        self.lengths = lengths
        self.token_array = token_array
        self.doc_offsets = doc_offsets

    def __len__(self):
        return len(self.lengths)

    def get(self, i):
        o = int(self.doc_offsets[i])
        return np.asarray(self.token_array)[o : o + int(self.lengths[i])]


def pack_batches(lengths, block_size, tokens, offsets, batch_size, pad_id):
    from tokenmill import pack

    plan = pack(lengths, block_size)
    src = Flat(np.asarray(lengths), tokens, offsets)
    total = 0
    for batch in plan.batches(src, batch_size=batch_size, pad_id=pad_id):
        real = batch.doc_ids >= 0
        # oracle: every real position holds the id the (checked) source has there
        for d, o, v in zip(batch.doc_ids[real].tolist(), batch.token_offsets[real].tolist(),
                           batch.input_ids[real].tolist()):
            assert v == int(np.asarray(tokens)[int(np.asarray(offsets)[d]) + o])
        assert (batch.input_ids[~real] == pad_id).all()
        total += int(real.sum())
    assert total == plan.tokens
    return total


def pad(seqs, pad_id, max_length, truncation):
    from tokenmill import pad_batch

    b = pad_batch(seqs, pad_id=pad_id, max_length=max_length, truncation=truncation)
    for i, s in enumerate(seqs):
        a = [int(x) for x in np.asarray(s).tolist()]
        k = min(len(a), b.shape[1])
        assert b.input_ids[i, :k].tolist() == a[:k]
    return b.shape


def tokenizer_pattern(pattern, text):
    from tokenmill.tokenizer.model import Tokenizer

    tok = Tokenizer.from_merges([(97, 98), (256, 99)], pattern=pattern)
    ids = tok.encode_ordinary(text)
    assert tok.decode(ids) == text  # lossless, whatever the pattern
    assert ids == tok.encode_ordinary_python(text)
    return len(ids)


_ENCODE_TOK = []


def encode_args(texts, allowed_special, disallowed_special, num_threads, as_arrays):
    """``encode_batch`` with hostile arguments: equal to ``encode`` of each text (arrays or lists, any thread
    count), or refused; and ``encode_flat`` the same ids, or refused the same way."""
    from tokenmill import train_bpe

    if not _ENCODE_TOK:
        _ENCODE_TOK.append(train_bpe(["the cat sat on the mat <eos> 低低 🙂"] * 8, 270, pattern="gpt4",
                                     special_tokens=["<eos>", "<pad>"], progress=False))
    tok = _ENCODE_TOK[0]
    kw = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
    try:
        got = tok.encode_batch(texts, num_threads=num_threads, as_arrays=as_arrays, **kw)
    except Exception as e:
        # encode_flat refuses the same batch with the same kind of error
        try:
            tok.encode_flat(texts, num_threads=num_threads, **kw)
        except Exception as f:  # noqa: BLE001  (compared with encode_batch's error)
            assert type(f) is type(e), (e, f)
        else:
            raise AssertionError(f"encode_batch refused {texts!r:.200} ({e}) where encode_flat did not")
        raise
    assert len(got) == len(texts)
    want = [tok.encode(t, **kw) for t in texts]
    assert [list(map(int, g)) for g in got] == want
    ids, bounds = tok.encode_flat(texts, num_threads=num_threads, **kw)
    assert [ids[bounds[i]:bounds[i + 1]].tolist() for i in range(len(texts))] == want
    return len(got)


def train(texts, vocab_size, pattern, special_tokens):
    import warnings

    from tokenmill import train_bpe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = train_bpe(texts, vocab_size, pattern=pattern, special_tokens=special_tokens, progress=False,
                        num_threads=1)
    for t in texts:
        assert tok.decode(tok.encode_ordinary(t)) == t
    assert tok.vocab_size <= max(vocab_size, 256 + len(tok.special_tokens))
    return tok.vocab_size


def load_tokenizer_bytes(path, data):
    from tokenmill.tokenizer.model import Tokenizer

    with open(path, "wb") as f:
        f.write(data)
    tok = Tokenizer.load(path)
    assert tok.decode(tok.encode_ordinary("héllo wörld 123")) == "héllo wörld 123"
    return tok.vocab_size


def load_rank_bytes(path, data):
    from tokenmill.tokenizer.model import Tokenizer

    with open(path, "wb") as f:
        f.write(data)
    tok = Tokenizer.from_tiktoken(path, pattern="gpt2")
    assert tok.decode(tok.encode_ordinary("hello")) == "hello"
    return tok.vocab_size


def split(data, preset, doc_offsets):
    from tokenmill.tokenizer.pretokenize.presets import split_offsets

    offs = split_offsets(data, preset, doc_offsets=doc_offsets)
    assert offs[0] == 0 and offs[-1] == len(data) and (np.diff(offs) > 0).all()
    return offs.size


def retrieval(query, docs, k1, b, budget):
    from tokenmill import assemble_context, bm25_scores, chunk_text

    scores = bm25_scores(query, docs, k1=k1, b=b)
    assert np.isfinite(scores).all() and (scores >= 0).all()

    class Bytes:
        def encode_ordinary(self, t):
            return list(t.encode())

        def token_bytes(self, i):
            return bytes([i])

    text = "ab中cd。 ef! gh"
    chunks = chunk_text(text, Bytes(), 4, 3)
    pieces = assemble_context(chunks, list(range(len(chunks))), budget)
    for p in pieces:
        assert text[p.span] == p.text
    return len(pieces)


def stream(length, block_size, last):
    from tokenmill import chunk_stream

    c = chunk_stream(length, block_size, last=last)
    n = int(length)
    kept, reach = 0, 0  # size of the union of the samples (sorted, each starting at or before the reach)
    for s, ln in zip(c.start.tolist(), c.length.tolist()):
        assert s <= reach or kept == 0
        kept += max(s + ln - max(s, reach), 0)
        reach = max(reach, s + ln)
    assert kept + c.dropped_tokens == n or n < 2
    assert c.targets == sum(ln - 1 for ln in c.length.tolist())
    return len(c)


# ---- schema-driven file mutations (test_file_fuzz.py) ---------------------------------------------
def _mutate_json(obj, path, mutation):
    """``obj`` with the value at ``path`` (a list of keys / indexes) replaced by ``mutation`` (or
    deleted when mutation is the string "<delete>")."""
    import copy

    obj = copy.deepcopy(obj)
    if not path:
        return mutation
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if mutation == "<delete>":
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = mutation
    return obj


def open_mutated_store(pristine, work, name, path, mutation, rehash):
    """A store whose ``name`` file (manifest.json) has one field mutated (rehashed, so that the
    schema and not the content hash must catch it): opened, verified and read, or refused."""
    import json
    import shutil

    from tokenmill import TokenStore
    from tokenmill._io import canonical_hash

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    m = json.loads(open(f"{work}/{name}", encoding="utf-8").read())
    m = _mutate_json(m, path, mutation)
    if rehash and isinstance(m, dict):
        m.pop("hash", None)
        m["hash"] = canonical_hash(m)
    with open(f"{work}/{name}", "w", encoding="utf-8") as f:
        json.dump(m, f)
    st = TokenStore.open(work)
    st.verify()
    for i in range(len(st)):  # every document readable, every id in the vocabulary
        ids = st.get(i)
        assert ids.size == 0 or (int(ids.min()) >= 0 and int(ids.max()) < st.vocab_size)
    return len(st)


def resume_with_mutated_record(pristine_partial, reference, work, name, path, mutation):
    """A killed build whose shard record ``name`` has one field mutated is resumed: the result must be
    byte-identical to an uninterrupted build (a bad record is rebuilt, never trusted), or refused."""
    import json
    import os
    import shutil

    from tokenmill import Tokenizer, TokenStore
    from tokenmill.data import texts

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine_partial, work)
    rec = json.loads(open(f"{work}/{name}", encoding="utf-8").read())
    with open(f"{work}/{name}", "w", encoding="utf-8") as f:
        json.dump(_mutate_json(rec, path, mutation), f)
    tok = Tokenizer.load(f"{pristine_partial}.tok.json")
    docs = [f"document {i} the theme " * 3 for i in range(60)]
    TokenStore.build(work, texts(docs), tok, workers=1, shard_bytes=600, progress=False)
    got = {p: open(os.path.join(work, p), "rb").read() for p in sorted(os.listdir(work))}
    want = {p: open(os.path.join(reference, p), "rb").read() for p in sorted(os.listdir(reference))}
    assert got == want
    return "identical"


def load_mutated_state(state, path, mutation):
    """A TrainingLoader state with one field mutated: loaded (and iterable) or refused; a refused
    state leaves the loader where it was."""
    from tokenmill.torch import TrainingLoader

    docs = [[i % 50 + 1] * (i % 9 + 1) for i in range(40)]
    loader = TrainingLoader(docs, batch_size=2, block_size=8, seed=1)
    try:
        loader.load_state_dict(_mutate_json(state, path, mutation))
    except Exception:
        assert (loader.epoch, loader.batches_consumed) == (0, 0)
        raise
    next(iter(loader))
    return loader.epoch


def open_mutated_megatron(prefix, work, offset, value_bytes):
    """A Megatron .idx with bytes at ``offset`` replaced: read fully, or refused."""
    import shutil

    from tokenmill import TokenStore

    shutil.copy(f"{prefix}.bin", f"{work}.bin")
    raw = bytearray(open(f"{prefix}.idx", "rb").read())
    raw[offset:offset + len(value_bytes)] = value_bytes
    open(f"{work}.idx", "wb").write(bytes(raw))
    src = TokenStore.from_megatron(work)
    for i in range(len(src)):
        ids = src.get(i)
        assert ids.size == 0 or int(ids.min()) >= 0
    return len(src)
