"""Memory safety: every kernel entry validates its arrays.

Each test hands a kernel family exactly the kind of input that used to reach compiled code unchecked
(and read or write memory it does not own) and asserts a TokenmillError naming the input. These
tests also run under ``NUMBA_BOUNDSCHECK=1`` (``make test-boundscheck``), where any access that
still slips through becomes an IndexError instead of silent corruption.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tokenmill import ConfigError, InputError, SlidingWindows, TokenmillError, pack
from tokenmill.batching.layout import assemble
from tokenmill.data.source import ArraySource
from tokenmill.tokenizer.bpe.merges import learn_merges_arrays
from tokenmill.tokenizer.bpe.train import ChunkCounter, train_bpe
from tokenmill.tokenizer.model import Tokenizer
from tokenmill.tokenizer.pretokenize.patterns import split_with_gaps
from tokenmill.tokenizer.pretokenize.presets import split_offsets


# ---- the splitter's output covers the text in order ------------------------------------------------
def test_reverse_pattern_is_refused_before_encoding():
    # (?r) yields matches right to left: the chunks used to overlap and encode wrote past its buffer
    with pytest.raises(ConfigError, match=r"\(\?r\)"):
        split_with_gaps(r"(?r)\w+", "ab cd ef")
    with pytest.raises(ConfigError, match="left to right"):
        train_bpe(["ab cd ef " * 20], 260, pattern=r"(?r)\w+")
    tok = Tokenizer.from_merges([(97, 98)], pattern=r"(?r)\w+")
    with pytest.raises(ConfigError, match="left to right"):
        tok.encode("ab cd ef")


def test_forward_custom_pattern_still_round_trips():
    tok = Tokenizer.from_merges([(97, 98)], pattern=r"\w+")
    text = "ab, cd ab!"
    assert tok.decode(tok.encode(text)) == text


def test_split_offsets_refuses_bad_doc_offsets():
    data = b"hello world"
    for bad in ([0, 12], [0, 5, 3, 11], [1, 11], [0.0, 11.0], np.array([0, 2**63 + 5, 11], np.uint64)):
        with pytest.raises(ConfigError, match="doc_offsets"):
            split_offsets(data, "gpt2", doc_offsets=bad)


def test_chunk_counter_checks_offsets():
    c = ChunkCounter()
    data = np.frombuffer(b"abcdef", np.uint8)
    with pytest.raises(ConfigError, match="offsets"):
        c.add(data, np.array([0, 4, 2, 6]))
    with pytest.raises(ConfigError, match="offsets"):
        c.add(data, np.array([0, 9]))
    c.add(data, np.array([0, 3, 6]))
    assert c.result().to_dict() == {b"abc": 1, b"def": 1}


def test_learn_merges_checks_its_arrays():
    data = np.frombuffer(b"abab", np.uint8)
    with pytest.raises(ConfigError, match="add up to"):
        learn_merges_arrays(data, np.array([2, 4]), np.array([1, 1]), 3)
    with pytest.raises(ConfigError, match="lengths"):
        learn_merges_arrays(data, np.array([5, -1]), np.array([1, 1]), 3)
    with pytest.raises(ConfigError, match="counts"):
        learn_merges_arrays(data, np.array([2, 2]), np.array([1]), 3)
    assert learn_merges_arrays(data, np.array([2, 2]), np.array([1, 1]), 3).pairs.tolist() == [[97, 98]]
    # counts whose pairs add up past 2**62: the kernel's int64 pair counts had wrapped negative (no merges,
    # "min_frequency", the pair (c, d) of count 5 lost too), the Python twin a bare OverflowError
    cd = np.frombuffer(b"ababcd", np.uint8)
    for backend in ("numba", "python"):
        with pytest.raises(ConfigError, match="counts x chunk lengths add up to 1.38e"):
            learn_merges_arrays(cd, np.array([4, 2]), np.array([2**62, 5]), 2, backend=backend)
    assert learn_merges_arrays(cd, np.array([4, 2]), np.array([2**40, 5]), 2).counts.tolist() == [2**41, 2**40]


# ---- token sources whose flat arrays disagree with their lengths -----------------------------------
class FlatSource:
    """A token source with the flat fast path, whose arrays can be made to lie."""

    def __init__(self, lengths, token_array, doc_offsets):
        self.lengths = np.asarray(lengths, np.int64)
        self.token_array = token_array
        self.doc_offsets = doc_offsets

    def __len__(self):
        return self.lengths.size

    def get(self, i):
        o = int(self.doc_offsets[i])
        return self.token_array[o : o + int(self.lengths[i])]


@pytest.mark.parametrize("tokens, offsets", [
    (np.arange(5), np.array([0, 4, 8])),  # token_array too short
    (np.arange(8), np.array([0, 5, 8])),  # a document reaching past the array
    (np.arange(8), np.array([-3, 4, 8])),  # negative offset
    (np.arange(8), np.array([0])),  # too few offsets
    (np.arange(8, dtype=np.float64), np.array([0, 4, 8])),  # float ids
    (np.arange(8, dtype=np.uint64), np.array([0, 4, 8])),  # ids that may not fit int64
])
def test_pack_batches_refuse_inconsistent_flat_sources(tokens, offsets):
    src = FlatSource([4, 4], tokens, offsets)
    plan = pack(src.lengths, 8)
    with pytest.raises(InputError, match="token_array|doc_offsets"):
        next(plan.batches(src, batch_size=2, pad_id=0))


def test_pack_batches_check_pad_id_and_sizes():
    plan = pack([3, 2], 5)
    docs = [[1, 2, 3], [4, 5]]
    for bad in (None, 1.5, True, "0", 2**63):
        with pytest.raises(ConfigError, match="pad_id"):
            next(plan.batches(docs, batch_size=1, pad_id=bad))
    with pytest.raises(ConfigError, match="batch_size"):
        next(plan.batches(docs, batch_size=1.5, pad_id=0))
    batch = next(plan.batches(docs, batch_size=1, pad_id=0))
    assert batch.input_ids.tolist() == [[1, 2, 3, 4, 5]]


def test_assemble_checks_segments_against_tokens():
    tokens = np.arange(6)
    row, doc, start, length = (np.array([0]), np.array([0]), np.array([0]), np.array([4]))
    with pytest.raises(InputError, match="segments"):
        assemble((tokens, np.array([4])), row, doc, start, length, num_rows=1, row_length=4, pad_id=0)
    with pytest.raises(ConfigError, match="row 0 holds"):
        assemble((tokens, np.array([0])), row, doc, start, np.array([5]), num_rows=1, row_length=4, pad_id=0)
    b = assemble((tokens, np.array([2])), row, doc, start, length, num_rows=1, row_length=4, pad_id=0)
    assert b.input_ids.tolist() == [[2, 3, 4, 5]]


# ---- window gathering ------------------------------------------------------------------------------
@pytest.mark.parametrize("twin", [False, True])
def test_a_segment_table_changed_before_its_provenance_is_read_is_refused(monkeypatch, twin):
    """A batch of plan.batches keeps its segment table to derive doc_ids and token_offsets when they are
    first read; a table changed since (rows no longer fitting) is refused, by the kernel and its twin."""
    from tokenmill import _jit
    from tokenmill.batching import batch as batch_module

    monkeypatch.setattr(_jit, "python_first", lambda family, kernels, size, limit: twin and family == "provenance")

    plan = pack([5, 6, 7], 8)
    docs = [np.arange(5), np.arange(6), np.arange(7)]
    for change in (lambda r, d, s, n: (r, d, s, n * 3), lambda r, d, s, n: (r + 5, d, s, n),
                   lambda r, d, s, n: (r - 1, d, s, n), lambda r, d, s, n: (r, d[:1], s, n)):
        b = next(plan.batches(docs, batch_size=3, pad_id=0))
        prov = b.__dict__["_doc_ids"]
        assert type(prov) is batch_module.Provenance
        prov.table = change(*prov.table)
        with pytest.raises(InputError, match="changed after the batch was built"):
            _ = b.doc_ids


def test_gather_refuses_small_out_and_leaves_the_parent_untouched():
    plan = SlidingWindows(4, 2).plan([10])  # 4 windows of 4
    tokens = np.arange(10, dtype=np.int64)
    offs = np.array([0, 10])
    parent = np.full((6, 4), -7, np.int64)
    with pytest.raises(ConfigError, match="too small"):
        plan.gather(tokens, offs, out=parent[:2])
    assert (parent == -7).all()  # nothing written into the rows after the view
    with pytest.raises(ConfigError, match="too small"):
        plan.gather(tokens, offs, out=np.zeros((4, 3), np.int64))
    with pytest.raises(ConfigError, match="cannot hold"):
        plan.gather(tokens, offs, out=np.zeros((4, 4), np.int8))
    with pytest.raises(ConfigError, match="pad_id"):
        plan.gather(tokens.astype(np.uint16), offs, out=np.zeros((4, 4), np.uint16), pad_id=-1)
    with pytest.raises(ConfigError, match="read-only"):
        ro = np.zeros((4, 4), np.int64)
        ro.flags.writeable = False
        plan.gather(tokens, offs, out=ro)
    ids, n = plan.gather(tokens, offs, out=parent)
    assert ids[:4].tolist() == [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]]


@pytest.mark.parametrize("tokens, offsets", [
    (np.arange(8), np.array([0, 10])),
    (np.arange(10), np.array([3, 13])),
    (np.arange(10), np.array([-1, 9])),
    (np.arange(10), np.array([], np.int64)),
])
def test_gather_refuses_offsets_outside_tokens(tokens, offsets):
    plan = SlidingWindows(4, 2).plan([10])
    with pytest.raises(InputError):
        plan.gather(tokens, offsets)


# ---- exact integers at the boundary ----------------------------------------------------------------
@pytest.mark.parametrize("lengths", [
    np.array([2**63 + 1, 5], np.uint64),
    [1.5, 2.0],
    [True, False],
    ["3", "4"],
    [2**64 - 1],
    np.array([[1, 2]]),  # (a 2-D array; a list of lists is the documents themselves: their lengths)
    [[1, 2], [[3]]],
])
def test_lengths_are_exact_or_refused(lengths):
    with pytest.raises(TokenmillError):
        pack(lengths, 8)
    with pytest.raises(TokenmillError):
        SlidingWindows(4, 2).plan(lengths)


def test_length_2_64_minus_1_is_reported_as_itself():
    with pytest.raises(InputError, match="18,446,744,073,709,551,615"):
        pack(np.array([2**64 - 1], np.uint64), 8)


def test_lengths_whose_sum_overflows_are_refused():
    with pytest.raises(InputError, match="2\\*\\*62"):
        pack(np.array([2**62, 2**62], np.int64), 8)


def test_fractional_ids_are_refused():
    with pytest.raises(InputError, match="token_ids"):
        list(SlidingWindows(2, 1).windows([1.5, 2.7]))
    with pytest.raises(InputError, match="document 0"):
        ArraySource([[1.5, 2.0]])
    with pytest.raises(InputError, match="document 0"):
        ArraySource([np.array([2**63], np.uint64)])
    from tokenmill import pad_batch
    with pytest.raises(ConfigError, match="pad_id"):
        pad_batch([[1, 2]], pad_id=1.5)
    with pytest.raises(InputError, match="sequence 0"):
        pad_batch([[1.5]], pad_id=0)


# ---- numba's bounds checking really catches what slips through -------------------------------------
def test_boundscheck_turns_an_unchecked_access_into_an_index_error(tmp_path):
    """The CI run with NUMBA_BOUNDSCHECK=1 is only worth having if it catches an out-of-bounds access:
    call a kernel directly, past every boundary, with a span beyond its input."""
    code = textwrap.dedent("""
        import numpy as np
        from tokenmill._jit import njit

        @njit(nogil=True)
        def copy(tokens, src, length, out):  # a kernel with no checks of its own, like the library's
            for j in range(length):
                out[j] = tokens[src + j]

        tokens = np.arange(10, dtype=np.int64)
        out = np.zeros(4, np.int64)
        try:
            copy(tokens, 8, 4, out)  # reads tokens[10] and tokens[11]
        except IndexError:
            print("IndexError")
        else:
            print("no error", out.tolist())
    """)
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "IndexError"


def test_encode_utf8_checks_its_bytes_and_offsets():
    """``CompiledEncoder.encode_utf8`` (the token store's worker hands it a job's UTF-8 as it was read) is its
    kernels' boundary: read-only 1-D uint8 bytes, offsets from 0 to their end, each text non-empty; what it
    encodes equals ``encode_many`` of the same texts. ``Utf8Docs`` (the job) checks its offsets when made,
    also when unpickled in a worker process."""
    import pickle

    from tokenmill.data.readers import Utf8Docs

    tok = Tokenizer.from_merges([(116, 104), (256, 101)], pattern="gpt4")
    enc = tok._compiled()
    texts = ["the theme", "é 滑", "x"]
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    docs = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
    ids, bounds = enc.encode_utf8(data, docs)
    want_ids, want_bounds = enc.encode_many(texts)
    assert ids.tolist() == want_ids.tolist() and bounds.tolist() == want_bounds.tolist()
    for bad_data, bad_docs in ((data.copy(), docs), (data.astype(np.int64), docs), (data, docs[:-1]),
                               (data, docs + 1), (data, np.array([0, 3, 3, data.size])), (data, docs[::-1].copy())):
        with pytest.raises(ValueError, match="encode_utf8 takes"):
            enc.encode_utf8(bad_data, bad_docs)
    job = Utf8Docs(data, docs)
    assert pickle.loads(pickle.dumps(job)).texts() == texts and not job.data.flags.writeable
    for bad in (np.array([1, data.size]), np.array([0, data.size + 1]), np.array([0, 5, 2, data.size])):
        with pytest.raises(ValueError, match="offsets must run from 0"):
            Utf8Docs(data, bad)
    with pytest.raises(ValueError, match="contiguous 1-D uint8"):
        Utf8Docs(np.zeros(4, np.int32), np.array([0, 4]))
