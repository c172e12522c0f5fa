"""A job's ids assembled for a shard (``engines.assemble_ids``): the same bytes by either of its two paths
(document by document for long documents, one compiled pass for short ones), every id range-checked, the
first culprit named."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import TokenStore
from tokenmill.data import engines, texts
from tokenmill.data.engines import EncodeOptions, JobError, assemble_flat, assemble_ids
from tokenmill.errors import InputError

PATHS = {"one by one": 0, "one pass": 1 << 40}  # _PER_DOCUMENT_FROM: every job takes that path


def reference(docs, opts):
    bos = [] if opts.bos_id is None else [opts.bos_id]
    eos = [] if opts.eos_id is None else [opts.eos_id]
    rows = [bos + [int(i) for i in d] + eos for d in docs]
    return np.array([i for r in rows for i in r], opts.dtype), np.array([len(r) for r in rows], np.int64)


docs_st = st.lists(st.lists(st.integers(0, 69_999), max_size=40), max_size=30)


@pytest.mark.parametrize("path", PATHS)
@settings(deadline=None, max_examples=60)
@given(docs=docs_st, bos=st.booleans(), eos=st.booleans(), wide=st.booleans(),
       kind=st.sampled_from(["int64", "int32", "uint32", "list"]))
def test_ids_and_lengths_are_the_documents_joined_with_bos_and_eos(path, docs, bos, eos, wide, kind):
    vocab = 70_000 if wide else 1 << 16
    docs = [[i % vocab for i in d] for d in docs]
    opts = EncodeOptions("uint32" if wide else "uint16", vocab, eos_id=vocab - 1 if eos else None,
                         bos_id=vocab - 2 if bos else None)
    arrays = [d if kind == "list" else np.array(d, kind) for d in docs]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engines, "_PER_DOCUMENT_FROM", PATHS[path])
        ids, lengths = assemble_ids(arrays, opts)
    want_ids, want_lengths = reference(docs, opts)
    assert ids.dtype == np.dtype(opts.dtype) and np.array_equal(ids, want_ids)
    assert lengths.dtype == np.int64 and np.array_equal(lengths, want_lengths)


@pytest.mark.parametrize("path", PATHS)
@settings(deadline=None, max_examples=40)
@given(docs=docs_st, bos=st.booleans(), eos=st.booleans(), kind=st.sampled_from(["int64", "uint32"]))
def test_flat_ids_and_bounds_assemble_as_the_documents_do(path, docs, bos, eos, kind):
    """``assemble_flat`` (a job's ids in one array and its documents' bounds, ``Tokenizer.encode_flat``'s
    output) gives the bytes ``assemble_ids`` gives for the documents as arrays."""
    opts = EncodeOptions("uint32", 70_000, eos_id=69_999 if eos else None, bos_id=69_998 if bos else None)
    flat = np.array([i for d in docs for i in d], kind)
    bounds = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engines, "_PER_DOCUMENT_FROM", PATHS[path])
        ids, lengths = assemble_flat(flat, bounds, opts)
    want_ids, want_lengths = reference(docs, opts)
    assert ids.dtype == np.uint32 and np.array_equal(ids, want_ids) and np.array_equal(lengths, want_lengths)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bad, shown", [(-1, "-1"), (50_257, "50,257"), (2**64 - 1, "18,446,744,073,709,551,615")])
def test_an_id_outside_the_vocabulary_names_the_first_document_holding_one(path, bad, shown, monkeypatch):
    monkeypatch.setattr(engines, "_PER_DOCUMENT_FROM", PATHS[path])
    opts = EncodeOptions("uint16", 50_257, eos_id=50_256, bos_id=None)
    dtype = np.uint64 if bad > 2**63 else np.int64
    docs = [np.array([1, 2, 3], dtype), np.array([], dtype), np.array([4, bad, 5], dtype), np.array([bad], dtype)]
    for got in (assemble_ids(docs, opts), assemble_flat(np.concatenate(docs), np.array([0, 3, 3, 6, 7]), opts)):
        assert isinstance(got, JobError) and got.index == 2
        assert f"returned id {shown}, outside 0 .. vocab_size-1 (50,256)" in got.message


@pytest.mark.parametrize("bounds", [[0, 2, 1, 3], [1, 3], [0, 2], [0, 4], [[0, 3]]])
def test_flat_bounds_that_do_not_cut_the_ids_are_refused(bounds):
    got = assemble_flat(np.array([1, 2, 3]), np.array(bounds), EncodeOptions("uint16", 10, eos_id=None, bos_id=None))
    assert isinstance(got, JobError) and "do not cut them into documents" in got.message
    got = assemble_flat(np.array([1.0, 2.0]), np.array([0, 2]), EncodeOptions("uint16", 10, eos_id=None, bos_id=None))
    assert isinstance(got, JobError)


@pytest.mark.parametrize("path", PATHS)
def test_ids_that_are_not_integers_are_refused_and_empty_float_arrays_pass(path, monkeypatch):
    monkeypatch.setattr(engines, "_PER_DOCUMENT_FROM", PATHS[path])
    opts = EncodeOptions("uint16", 100, eos_id=None, bos_id=None)
    ids, lengths = assemble_ids([np.array([1, 2]), np.array([]), np.array([3])], opts)  # [] is float64
    assert ids.tolist() == [1, 2, 3] and lengths.tolist() == [2, 0, 1]
    got = assemble_ids([np.array([1]), np.array([2.0, 3.0])], opts)
    assert isinstance(got, JobError) and got.index == 1 and "float64" in got.message
    got = assemble_ids([np.array([1]), np.array([[2, 3]])], opts)
    assert isinstance(got, JobError) and got.index == 1 and "shape (1, 2)" in got.message
    got = assemble_ids([np.array([1]), 7], opts)
    assert isinstance(got, JobError) and got.index == 1 and "int" in got.message
    assert [a.tolist() for a in assemble_ids([], opts)] == [[], []]


class Returns:
    """A store-protocol tokenizer giving each text's bytes as ids, but ``bad`` for the text ``poison``."""

    vocab_size = 300
    special_tokens = {"<|endoftext|>": 299}
    content_hash = "sha256:returns-test-tokenizer"

    def __init__(self, bad):
        self.bad = bad

    def encode_batch(self, texts, *, as_arrays=False, num_threads=None):
        return [np.array([self.bad], np.int64) if t == "poison" else np.frombuffer(t.encode(), np.uint8).astype(np.int64)
                for t in texts]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_store_build_names_the_document_of_a_bad_id(tmp_path, workers):
    docs = [f"document {i}" for i in range(50)] + ["poison"] + ["after"] * 10
    with pytest.raises(InputError, match=r"document at row 50 \(shard 0\).*returned id 300, outside 0 .."):
        TokenStore.build(tmp_path / "s", texts(docs), Returns(300), workers=workers, progress=False)
    assert not (tmp_path / "s" / "manifest.json").exists()
    ok = TokenStore.build(tmp_path / "ok", texts(docs[:50]), Returns(300), workers=workers, progress=False)
    assert ok.get(7).tolist() == list(b"document 7") + [299]


def test_a_job_of_several_kernel_groups_assembles_as_its_documents_do(monkeypatch):
    """A tokenmill tokenizer's job is encoded a kernel group at a time, each group's ids read from the
    encoding thread's buffer and written into the store's dtype at once: the same bytes as its documents
    encoded one by one, and a bad id names its document's index in the whole job, not in its group."""
    from tokenmill import Tokenizer
    from tokenmill.tokenizer import encoding

    tok = Tokenizer.from_merges([(104, 105)], pattern="gpt4")
    docs = [f"hi {i} there" for i in range(40)] + ["", "hi", "x" * 50]
    opts = EncodeOptions("uint16", tok.vocab_size, eos_id=0, bos_id=1)
    for group in (1 << 20, 16, 1):
        monkeypatch.setattr(encoding, "GROUP_BYTES", group)
        ids, lengths = engines.encode_job(tok, opts, docs)
        want_ids, want_lengths = reference([tok.encode(d) for d in docs], opts)
        assert np.array_equal(ids, want_ids) and np.array_equal(lengths, want_lengths)
        got = engines.encode_job(tok, EncodeOptions("uint16", 100, eos_id=None, bos_id=None), ["AB"] * 30 + ["zz", "AB"])
        assert isinstance(got, JobError) and got.index == 30 and "returned id 122" in got.message


class Raises(Returns):
    """A store-protocol tokenizer (``encode_batch`` only, no ``encode``) that fails on the text ``poison``."""

    def encode_batch(self, texts, *, as_arrays=False, num_threads=None):
        if "poison" in texts:
            raise ValueError("cannot encode poison")
        return super().encode_batch(texts, as_arrays=as_arrays, num_threads=num_threads)


def test_a_store_build_names_the_document_a_tokenizer_fails_on(tmp_path):
    """The job is encoded again document by document to find the one that failed, through the protocol's
    ``encode_batch`` (a tokenizer need not have ``encode``)."""
    docs = [f"document {i}" for i in range(20)] + ["poison"] + ["after"] * 5
    with pytest.raises(InputError, match=r"document at row 20 \(shard 0\): ValueError: cannot encode poison"):
        TokenStore.build(tmp_path / "s", texts(docs), Raises(300), workers=1, progress=False)
