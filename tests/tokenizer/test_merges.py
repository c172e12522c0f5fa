"""The incremental merge loop equals the naive full-recount algorithm (reference.train_bpe_naive) exactly."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.tokenizer.bpe import reference
from tokenmill.tokenizer.bpe.merges import learn_merges


def naive(chunks, num_merges):
    return [list(p) for p, _ in reference.train_bpe_naive(chunks, 256 + num_merges)]


def incremental(chunks, num_merges, **kw):
    distinct = Counter(chunks)
    keys = sorted(distinct)
    return learn_merges(keys, [distinct[k] for k in keys], num_merges, **kw)


def test_example_low_times_30():
    # "低" is e4 bd 8e; thirty of them: (e4,bd) and (bd,8e) both occur 30 times, (8e,e4) 29 times.
    # Tie -> smaller pair (bd,8e) = 256, then (e4,256) = 257, which decodes to "低".
    r = incremental([("低" * 30).encode()], 2)
    assert r.pairs.tolist() == [[0xBD, 0x8E], [0xE4, 256]]
    assert r.counts.tolist() == [30, 30]


def test_overlapping_runs_merge_left_to_right():
    # "aaaaa": (a,a) x4 -> merged non-overlapping: [z, z, a]; then (z,z) x1, (z,a) x1 -> (z,a)? no:
    # tie at count 1 between (256,256) and (256,97): smaller pair is (256, 97).
    assert incremental([b"aaaaa"], 3).pairs.tolist() == naive([b"aaaaa"], 3)


def test_merges_never_cross_chunks():
    # "ab" + "ab" as separate chunks: (b, a) never counted.
    r = incremental([b"ab", b"ab"], 5)
    assert r.pairs.tolist() == [[97, 98]]
    assert r.stop_reason == "no_pairs"


def test_min_frequency_stops():
    r = incremental([b"abab", b"cd"], 10, min_frequency=2)
    assert r.pairs.tolist() == [[97, 98]]
    assert r.stop_reason == "min_frequency"


def test_max_token_bytes_skips_long_pairs():
    r = incremental([b"aaaa"] * 3, 5, max_token_bytes=2)
    assert r.pairs.tolist() == [[97, 97]]


small_bytes = st.binary(min_size=0, max_size=12).map(lambda b: bytes(x % 4 + 97 for x in b))


@settings(max_examples=300, deadline=None)
@given(st.lists(small_bytes, max_size=12), st.integers(0, 30))
def test_equals_naive_on_small_alphabets(chunks, num_merges):
    assert incremental(chunks, num_merges).pairs.tolist() == naive(chunks, num_merges)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=8), st.integers(0, 40))
def test_equals_naive_on_unicode(texts, num_merges):
    chunks = [t.encode() for t in texts]
    assert incremental(chunks, num_merges).pairs.tolist() == naive(chunks, num_merges)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=25), max_size=10), st.integers(0, 60),
       st.sampled_from([None, 2, 3, 5]), st.integers(1, 3))
def test_compiled_kernel_equals_python_twin(texts, num_merges, max_token_bytes, min_frequency):
    distinct = Counter(t.encode() for t in texts)
    keys = sorted(distinct)
    weights = [distinct[k] for k in keys]
    kw = dict(max_token_bytes=max_token_bytes, min_frequency=min_frequency)
    fast = learn_merges(keys, weights, num_merges, backend="numba", **kw)
    slow = learn_merges(keys, weights, num_merges, backend="python", **kw)
    assert fast.pairs.tolist() == slow.pairs.tolist()
    assert fast.counts.tolist() == slow.counts.tolist()
    assert fast.stop_reason == slow.stop_reason


def test_the_merge_loop_stops_when_asked():
    """The compiled loop reads ``progress[1]``: asked before it starts (or at any merge), it stops there with
    code 3, the caller's sign that Ctrl-C came."""
    import numpy as np

    from tokenmill.tokenizer.bpe import _train_kernels
    from tokenmill.tokenizer.bpe.merges import _rows

    data = np.frombuffer(b"abababcdcdcd" * 50, np.uint8)
    lengths, counts = np.array([300, 300], np.int64), np.array([3, 2], np.int64)
    pairs, _, stop = _train_kernels.learn_merges_kernel(_rows(data, lengths, counts), 20, 1, 0,
                                                        np.array([0, 1], np.int64))
    assert (pairs.shape[0], stop) == (0, 3)
    pairs, _, stop = _train_kernels.learn_merges_kernel(_rows(data, lengths, counts), 10, 1, 0,
                                                        np.array([0, 0], np.int64))
    assert (pairs.shape[0], stop) == (10, 0)


def test_ctrl_c_during_the_merge_loop_is_raised_once_the_loop_has_stopped(monkeypatch):
    """Ctrl-C (a real SIGINT, while the calling thread waits) reaches the calling thread while the loop runs on
    its own: the loop is asked to stop (``progress[1]``), waited for, and the KeyboardInterrupt raised then
    (no thread left merging behind the user's back). The merge loop had run on the calling thread, holding
    Ctrl-C until its last merge (13 s of a 20 s run on Chinese); a first version waited with
    ``Thread.join(timeout)``, which a SIGINT inside it leaves marking the thread stopped while it runs."""
    import os
    import signal
    import threading
    import time

    import numpy as np
    import pytest

    from tokenmill.tokenizer.bpe import _train_kernels
    from tokenmill.tokenizer.bpe.merges import learn_merges_arrays

    seen = {}

    def slow_kernel(rec, num_merges, min_frequency, max_token_bytes, progress):  # stops 0.5 s after it is asked
        t0 = time.monotonic()
        while progress[1] == 0 and time.monotonic() - t0 < 30:
            progress[0] += 1
            time.sleep(0.01)
        seen["asked"] = bool(progress[1])
        time.sleep(0.5)
        seen["returned"] = time.monotonic()
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64), 3

    monkeypatch.setattr(_train_kernels, "learn_merges_kernel", slow_kernel)
    # Python's own Ctrl-C handler, whatever this process inherited: a shell starts a background job (`make ... &`,
    # as CI runs the bounds-checked tests) with SIGINT ignored, and Python then installs none
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        data = np.frombuffer(b"abcabc", np.uint8)
        with pytest.raises(KeyboardInterrupt):
            learn_merges_arrays(data, np.array([6], np.int64), np.array([1], np.int64), 10, backend="numba")
        raised = time.monotonic()
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert seen["asked"] and seen["returned"] <= raised
