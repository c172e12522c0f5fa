"""train_bpe: worked examples, exactness against the reference, determinism, bad input."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_sample
from tokenmill import ConfigError, InputError, train_bpe
from tokenmill.tokenizer.bpe import reference
from tokenmill.tokenizer.pretokenize.patterns import compiled, resolve_pattern
from tokenmill.tokenizer.pretokenize.unicode import as_unicode16


def chunks_of(texts, pattern):
    rx = resolve_pattern(pattern)
    if rx is None:
        return [t.encode() for t in texts if t]
    # (the regex engine over the text as Unicode 16 reads it, as tokenmill splits: pretokenize.unicode)
    return [t[m.start():m.end()].encode() for t in texts for m in compiled(rx).finditer(as_unicode16(t))]


def naive_merges(texts, vocab_size, pattern="gpt4"):
    return [list(p) for p, _ in reference.train_bpe_naive(chunks_of(texts, pattern), vocab_size)]


# -- worked examples -------------------------------------------------------------------------------
def test_reference_functions_low_times_30():
    assert reference.merge_ids([1, 2, 3, 1, 2], (1, 2), 99) == [99, 3, 99]
    ids = reference.text_to_ids("低" * 30)
    assert len(ids) == 90  # not 60: "低" is 3 UTF-8 bytes, 30 x 3 = 90
    assert sum(reference.count_pairs(ids).values()) == len(ids) - 1
    merges = reference.train_bpe_naive([bytes(ids)], 258)
    seq = ids
    seq = reference.merge_ids(seq, *merges[0])
    assert len(seq) == 60
    seq = reference.merge_ids(seq, *merges[1])
    assert len(seq) == 30


def test_low_times_30_through_train_bpe():
    tok = train_bpe(["低" * 30], 258)
    assert tok.token_bytes(257) == "低".encode()
    assert tok.decode([257]) == "低"
    assert tok.encode("低" * 30) == [257] * 30
    assert [row[3] for row in tok.trace.rows()] == [30, 30]  # counts in the trace
    # the trace reads as the README says, rows by rank (it was neither iterable nor subscriptable)
    assert list(tok.trace) == list(tok.trace.rows()) and tok.trace[1] == tok.trace[-1] == (1, (228, 256), 257, 30,
                                                                                           "低".encode())
    assert repr(tok.trace) == "MergeTrace(2 merges)"
    with pytest.raises(IndexError, match="merge rank 2 is outside 0 .. 1"):
        tok.trace[2]


# -- exactness ------------------------------------------------------------------------------------
@settings(max_examples=120, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=30), max_size=8), st.integers(256, 300),
       st.sampled_from(["gpt2", "gpt4", "o200k", None]))
def test_equals_reference_on_random_text(texts, vocab_size, pattern):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = train_bpe(texts, vocab_size, pattern=pattern) if any(texts) else None
    if tok is None:
        return
    assert tok.merges.tolist() == naive_merges(texts, vocab_size, pattern)


@pytest.mark.corpus
@pytest.mark.parametrize("script", ["en", "zh", "multi", "code"])
def test_equals_reference_on_real_text(corpora, script):
    texts = [t[:3000] for t in corpus_sample(corpora, script, 30_000)]
    tok = train_bpe(texts, 256 + 60)
    assert tok.merges.tolist() == naive_merges(texts, 256 + 60)


def test_no_merge_crosses_documents_or_chunks():
    # "ab" ends doc 1 and "ab" starts doc 2: without boundaries (b, a) would be counted.
    tok = train_bpe(["xab", "abx"], 259, pattern=None)
    assert [98, 97] not in tok.merges.tolist()
    tok = train_bpe(["a b a b"], 258, pattern="gpt4")  # chunks "a", " b", " a", " b"
    assert all(tok.token_bytes(i).count(b" ") <= 1 for i in range(256, tok.vocab_size))


def test_encoding_training_text_reproduces_training_segmentation():
    texts = ["the cat sat on the mat. the hat!", "mat cat bat; sat hat that"]
    tok = train_bpe(texts, 270)
    chunks = chunks_of(texts, "gpt4")
    seqs = [list(c) for c in chunks]
    for (a, b), new_id in zip(tok.merges.tolist(), range(256, 10_000)):
        seqs = [reference.merge_ids(s, (a, b), new_id) for s in seqs]
    assert [tok.encode_ordinary(c.decode()) for c in chunks] == seqs


def test_deterministic_across_hash_seeds(tmp_path):
    code = ("import tokenmill,sys; t=tokenmill.train_bpe(['the quick brown fox jumps over the lazy dog ' * 5, "
            "'bad dog, good fox'], 300); print(t.to_dict()['hash'])")
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(s)}).stdout
        for s in (0, 1, 12345)
    }
    assert len(outs) == 1


# -- options ----------------------------------------------------------------------------------------
def test_special_tokens_take_ids_after_merges_and_are_boundaries():
    # Only (a, b) can merge: "<|eos|>" is a boundary, so training stops after one merge and the
    # special token takes the id right after the last merge.
    with pytest.warns(UserWarning, match="learned 1 of 3 merges"):
        tok = train_bpe(["ab<|eos|>ab<|eos|>ab"], 260, special_tokens=["<|eos|>"])
    assert tok.special_tokens == {"<|eos|>": 257}
    assert tok.vocab_size == 258
    assert tok.token_bytes(256) == b"ab"
    assert tok.train_report.special_tokens_in_text == 2


def test_min_frequency_stops_early_with_warning():
    with pytest.warns(UserWarning, match=r"learned 1 of 44 merges"):
        tok = train_bpe(["abab xy"], 300, pattern=None, min_frequency=2)
    assert tok.vocab_size == 257
    assert tok.train_report.stop_reason == "min_frequency"


def test_max_token_bytes():
    # the stop is said as the option's (it had read "no pairs left to merge", with pairs such as (aaa, aaa) left)
    with pytest.warns(UserWarning, match=r"learned 3 of 34 merges \(every pair left would make a token longer than "
                                         r"max_token_bytes=3\)"):  # aa, aaa, then only 4+ byte pairs
        tok = train_bpe(["aaaaaaaa bbbbbbbb"] * 3, 290, max_token_bytes=3, pattern=None)
    assert max(len(tok.token_bytes(i)) for i in range(tok.vocab_size)) <= 3
    assert tok.train_report.stop_reason == "max_token_bytes"
    with pytest.warns(UserWarning, match=r"\(no pairs left to merge\)"):  # chunks within the limit: the corpus's
        assert train_bpe(["ab ab"], 300, max_token_bytes=5).train_report.stop_reason == "no_pairs"


def test_sampling_fraction_is_deterministic_and_reported():
    docs = [f"document number {i} " * 3 for i in range(400)]
    a = train_bpe(docs, 300, sample=0.25, seed=1)
    b = train_bpe(iter(docs), 300, sample=0.25, seed=1)
    c = train_bpe(docs, 300, sample=0.25, seed=2)
    assert a == b
    ra, rc = a.train_report, c.train_report
    assert ra.documents_seen == 400 and 60 < ra.documents_used < 140
    assert 0.15 < ra.sampled_share < 0.35
    assert (ra.documents_used, a.merges.tolist()) != (rc.documents_used, c.merges.tolist())


def test_sampling_byte_budget():
    docs = [f"doc {i} " + "x" * 90 for i in range(100)]  # ~97 bytes each
    tok = train_bpe(docs, 270, sample="1kB", seed=0)
    r = tok.train_report
    assert r.bytes_used <= 1000 and r.documents_used == 10
    assert r.bytes_seen == sum(len(d) for d in docs)
    # a document larger than the whole budget cannot fit and no longer stops the others (first by priority,
    # it kept none of them: "the training corpus is empty"), wherever it stands
    small = [f"{i:03d} " + "y" * 996 for i in range(20)]
    for docs in (small + ["z" * 50_000], ["z" * 50_000] + small):
        for seed in range(3):
            r = train_bpe(docs, 270, sample=20_000, seed=seed).train_report
            assert (r.documents_used, r.bytes_used) == (20, 20_000), (seed, r)


def test_sampling_byte_budget_is_the_priority_prefix_whatever_the_arrival():
    """The documented rule: documents in priority order up to the first that would overflow (ones larger than the
    whole budget left out). A document later by priority that arrived after the overflowing one and fitted had
    been kept (159 of 2,000 random cases), so the sample followed the arrival order."""
    import random

    from tokenmill.tokenizer.bpe.train import _priority, _sampled

    rng = random.Random(0)
    for case in range(2000):
        sizes = [rng.randint(1, 30) for _ in range(rng.randint(1, 9))]
        budget, seed = rng.randint(1, 80), rng.randint(0, 3)
        docs = [chr(97 + i) * n for i, n in enumerate(sizes)]
        want, total = [], 0
        for i in sorted(range(len(docs)), key=lambda i: _priority(seed, i)):
            if sizes[i] > budget:
                continue
            if total + sizes[i] > budget:
                break
            want.append(i)
            total += sizes[i]
        got = list(_sampled(docs, budget, seed))
        assert got == [docs[i] for i in sorted(want)], (case, sizes, budget, seed)


def test_sampling_spellings_and_bad_documents_named_by_their_index():
    """A fraction given as a str or a numpy float was read as a byte budget of 0 ("must be positive");
    with sampling, a lone surrogate raised a bare UnicodeEncodeError and a non-str document was named by
    its index among the sampled ones (document 6 of an input whose bad item is document 10)."""
    from tokenmill.errors import LoneSurrogateError

    docs = [f"document number {i} " * 3 for i in range(400)]
    a = train_bpe(docs, 300, sample=0.25, seed=1)
    for spelled in ("0.25", " .25 ", "2.5e-1", np.float32(0.25), np.float64(0.25)):
        assert train_bpe(docs, 300, sample=spelled, seed=1) == a, spelled
    assert train_bpe(docs, 300, sample="1e3", seed=0) == train_bpe(docs, 300, sample=1000, seed=0)
    for bad, says in (("1.5", r"sample='1.5'; a fraction must be in \(0, 1\]"), (True, "sample=True"),
                      ("0", "byte budget must be positive"), ("half", "sample='half'")):
        with pytest.raises(ConfigError, match=says):
            train_bpe(docs, 300, sample=bad)
    for sample in (None, 0.5, "1MB"):
        kw = {} if sample is None else {"sample": sample}
        with pytest.raises(InputError, match="document 10 is a int"):
            train_bpe(["ab cd"] * 10 + [3], 300, **kw)
        with pytest.raises(LoneSurrogateError, match="document 11 holds a lone surrogate"):
            train_bpe(["ab cd"] * 11 + ["x\ud800y"], 300, **kw)


# -- bad input --------------------------------------------------------------------------------------
def test_vocab_too_small():
    with pytest.raises(ConfigError, match=r"vocab_size=257 .* pass vocab_size >= 258"):
        train_bpe(["x"], 257, special_tokens=["<a>", "<b>"])


def test_empty_corpus():
    with pytest.raises(InputError, match="empty"):
        train_bpe([], 300)
    with pytest.raises(InputError, match="empty"):
        train_bpe(["", ""], 300)


def test_duplicate_special_tokens():
    with pytest.raises(ConfigError, match="listed twice"):
        train_bpe(["x"], 300, special_tokens=["<s>", "<s>"])


def test_non_str_document_named():
    with pytest.raises(InputError, match="document 1 is a bytes"):
        train_bpe(["ok", b"bytes"], 300)


def test_one_str_is_not_a_corpus():
    """A str is an iterable of characters: it trained one document per character (no merge can cross
    them), in silence."""
    for bad, says in (("the cat", "not one str"), (b"the cat", "not one bytes"), (None, r"\(strs\), not NoneType"),
                      (5, r"\(strs\), not int")):
        with pytest.raises(ConfigError, match=rf"^train_bpe takes an iterable of documents,? {says}"):
            train_bpe(bad, 260, progress=False)
    assert train_bpe(iter(["the cat the cat"]), 258, progress=False).vocab_size == 258


def test_import_is_light():
    code = "import sys, tokenmill; tokenmill.train_bpe; print(sorted(m for m in ('torch','numba','tiktoken','pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- compiled counting ------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=60), max_size=12),
       st.sampled_from(["gpt2", "gpt4", "o200k", "llama3", "qwen2", "qwen3.5", r"\w+| ?[^\w\s]+"]),
       st.sampled_from([1, 2, 3]))
def test_compiled_counting_equals_python_twin_any_thread_count(texts, pattern, threads):
    from tokenmill.tokenizer.bpe.train import _count_python, count_chunks

    rx = resolve_pattern(pattern)
    fast, stats = count_chunks(texts, rx, num_threads=threads)
    slow = _count_python(((t, t.encode()) for t in texts), rx)
    assert fast.to_dict() == slow.to_dict()
    assert stats["documents_used"] == len(texts)


def test_compiled_counting_splits_each_document_of_a_batch_on_its_own():
    # a batch of documents is split in one call: a document's trailing spaces stay its own ("a  " is "a", "  "
    # alone, where "a  " + "b" would give "a", " ", " b"), an empty document is no chunk
    from tokenmill.tokenizer.bpe.train import _count_compiled, _count_python

    docs = ["a  ", "b", "", "x\n\n", "\ny 12345", " ", "  z", "低 "] * 3
    for pattern in ("gpt2", "gpt4", "o200k", "llama3", "qwen2", "qwen3.5"):
        rx = resolve_pattern(pattern)
        pieces = [(d, d.encode()) for d in docs]
        got = _count_compiled(iter(pieces), rx, 1).to_dict()
        assert got == _count_python(iter(pieces), rx).to_dict()
        assert got[b"a"] == 3 and got[b"  "] == 3 and b" b" not in got and b" " in got
    # a regex of the general compiled splitter, one that leaves gaps (the spaces are chunks of their own)
    rx = resolve_pattern(r"\w+|[^\w\s]")
    pieces = [(d, d.encode()) for d in docs]
    assert _count_compiled(iter(pieces), rx, 1).to_dict() == _count_python(iter(pieces), rx).to_dict()


@pytest.mark.parametrize("pattern", ["llama3", "qwen2", "qwen3.5", r"\w+|[^\w\s]+|\s+"])
def test_every_compiled_pattern_counts_compiled(monkeypatch, pattern):
    """The model family's patterns and the general splitter's regexes are counted by the compiled kernels on
    the worker threads, as the presets are: they had gone through ``regex`` and a Counter on the calling
    thread (20 MB of English under llama3: 23.9 s against gpt4's 3.3 s, whatever ``num_threads``)."""
    from tokenmill.tokenizer.bpe import train as T

    docs = [f"line {i}: Hello, world's 12345 低常用 words\n" * 40 for i in range(1500)]  # > 2 MB: never the twin
    assert sum(len(d.encode()) for d in docs) > T.FIRST_RUN_PYTHON_BYTES
    rx = resolve_pattern(pattern)
    want = T._count_python(((d, d.encode()) for d in docs), rx).to_dict()

    def refuse(*a, **k):
        raise AssertionError("counted by the Python twin")

    monkeypatch.setattr(T, "_count_python", refuse)
    got, _ = T.count_chunks(docs, rx, num_threads=2)
    assert got.to_dict() == want


def test_training_identical_whatever_the_thread_count():
    from tokenmill.tokenizer.bpe.merges import learn_merges_arrays
    from tokenmill.tokenizer.bpe.train import count_chunks

    docs = [f"doc {i}: " + "lorem ipsum dolor sit amet, 低低 常用字 " * (i % 7 + 1) for i in range(300)]
    results = []
    for threads in (1, 2, 4):
        c, _ = count_chunks(docs, resolve_pattern("gpt4"), num_threads=threads)
        results.append(learn_merges_arrays(c.data, c.lengths, c.counts, 200).pairs.tolist())
    assert results[0] == results[1] == results[2]
    files = {train_bpe(docs, 456, num_threads=t).to_dict()["hash"] for t in (1, 2, 3)}
    assert len(files) == 1  # same tokenizer file, byte for byte, whatever the thread count


def test_sample_sizes_and_numbers_read_one_way():
    """Binary units are binary ('1MiB' had been 10**6 bytes), '2.0' is the float 2.0 (refused as it is; it had been
    a 2-byte budget), and a budget that keeps nothing says that an integer is a byte count."""
    from tokenmill.tokenizer.bpe.train import _parse_sample

    assert _parse_sample("1MiB") == (None, 2**20) and _parse_sample("1GiB") == (None, 2**30)
    assert _parse_sample("1MB") == (None, 10**6) and _parse_sample("1e6") == (None, 10**6)
    assert _parse_sample("1.0") == (1.0, None) and _parse_sample(1) == (None, 1)
    for value in ("2.0", 2.0):
        with pytest.raises(ConfigError, match="a fraction must be in"):
            _parse_sample(value)
    with pytest.raises(InputError, match=r"a byte budget of 1 byte \(an integer is a byte count; 1.0 is every"):
        train_bpe(["hello world"], 260, sample=1)
    tok = train_bpe(["aaaa bbbb"], 260)
    assert tok.trace[:2] == [tok.trace[0], tok.trace[1]] and tok.trace[-1:] == [tok.trace[len(tok.trace) - 1]]
