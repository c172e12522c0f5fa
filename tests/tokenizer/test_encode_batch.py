"""encode_batch encodes groups of texts in one kernel call each: the result must be exactly
``[encode(t) for t in texts]`` whatever the grouping, thread count and output kind, for texts that
take the grouped path (plain text) and those that do not (special tokens allowed and present, HF added
tokens, a prefix space, empty texts), and it must raise as ``encode`` does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import train_bpe
from tokenmill.errors import SpecialTokenError
from tokenmill.tokenizer import groups as groups_mod

PIECES = ["hello", " world", "滑动窗口", "，", "<|end|>", "<|x|>", "", " ", "\n\n", "123", "é", "🙂", "don't", "  a"]


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.formats.export import to_huggingface_dict

    texts = ["hello world, 滑动窗口 123 don't", "the cat sat on the mat"] * 20
    out = {
        "gpt4": train_bpe(texts, 300, pattern="gpt4", special_tokens=["<|end|>", "<|x|>"]),
        "none": train_bpe(texts, 280, pattern=None, special_tokens=["<|end|>"]),
        "regex": train_bpe(texts, 280, pattern=r"\w+|\s+|[^\w\s]+"),
    }
    body = to_huggingface_dict(out["gpt4"])  # an HF import: added tokens, ByteLevel with a prefix space
    body["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    import json

    path.write_text(json.dumps(body, ensure_ascii=False))
    out["hf"] = Tokenizer.from_huggingface(path)
    return out


@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=8).map("".join), max_size=12),
       st.sampled_from([1, 2]), st.booleans(), st.sampled_from([(), "all"]))
@settings(max_examples=80, deadline=None)
def test_encode_batch_equals_encode(toks, texts, threads, as_arrays, allowed):
    for name, tok in toks.items():
        kw = {"allowed_special": allowed, "disallowed_special": ()}
        want = [tok.encode(t, **kw) for t in texts]
        for group_bytes, group_texts in [(1 << 20, 1024), (8, 3)]:  # one group; many small ones
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(groups_mod, "GROUP_BYTES", group_bytes)
                mp.setattr(groups_mod, "GROUP_TEXTS", group_texts)
                got = tok.encode_batch(texts, num_threads=threads, as_arrays=as_arrays, **kw)
            if as_arrays:
                assert all(isinstance(g, np.ndarray) and g.dtype == np.int64 for g in got), name
                got = [g.tolist() for g in got]
            assert got == want, (name, group_bytes)


@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=8).map("".join), max_size=12),
       st.sampled_from([1, 2]), st.sampled_from([(), "all"]))
@settings(max_examples=40, deadline=None)
def test_encode_flat_is_encode_batch_in_one_array(toks, texts, threads, allowed):
    """``encode_flat``: every text's ids back to back and the bounds cutting them, exactly ``encode_batch``'s,
    whatever the grouping (texts with special and added tokens and empty ones included)."""
    for name, tok in toks.items():
        kw = {"allowed_special": allowed, "disallowed_special": ()}
        want = [tok.encode(t, **kw) for t in texts]
        for group_bytes in (1 << 20, 8):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(groups_mod, "GROUP_BYTES", group_bytes)
                ids, bounds = tok.encode_flat(texts, num_threads=threads, **kw)
            assert ids.dtype == np.int64 and bounds.dtype == np.int64 and bounds.shape == (len(texts) + 1,), name
            assert [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])] == want, (name, group_bytes)
    with pytest.raises(SpecialTokenError):
        toks["gpt4"].encode_flat(["fine", "not <|end|> fine"])


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 80), st.integers(1, 9))
def test_groups_hold_what_fits_and_cover_every_text_in_order(sizes, per, most):
    """``group_bounds``: consecutive groups from 0 to the end, each of at most ``most`` texts, each as many as fit
    in ``per`` characters (one text alone where it is longer): the next text would not have fit."""
    b = groups_mod.group_bounds(np.array(sizes, np.int64), per, most)
    assert b[0] == 0 and b[-1] == len(sizes) and all(x < y for x, y in zip(b, b[1:]))
    for lo, hi in zip(b, b[1:]):
        assert hi - lo <= most
        assert sum(sizes[lo:hi]) <= per or hi - lo == 1
        assert hi == len(sizes) or hi - lo == most or sum(sizes[lo:hi + 1]) > per


@pytest.mark.parametrize("threads", [2, 3])
def test_a_large_text_is_cut_across_threads_with_the_same_ids(toks, threads):
    """A text too large for the other groups to balance (here: the only one, or most of the batch) has its
    kernel work cut into ranges of chunks, one per thread; ids and document bounds stay exactly
    ``encode``'s."""
    from tokenmill.tokenizer.bpe import encoder as encoder_mod

    rng = np.random.default_rng(0)
    big = "".join(rng.choice(PIECES[:4] + PIECES[8:], 3000))
    batches = [[big], [big[:400], big, "x", big[:1000]], ["a", big, ""]]
    calls = []
    for name in ("gpt4", "hf", "regex"):
        tok = toks[name]
        enc = tok._compiled()
        real = enc._run_parts

        def spy(*a, real=real, **k):
            calls.append(a[-1])
            return real(*a, **k)

        for texts in batches:
            want = [tok.encode(t, disallowed_special=()) for t in texts]
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(encoder_mod, "_PART_CHUNKS", 4)
                mp.setattr(enc, "_run_parts", spy)
                got = tok.encode_batch(texts, num_threads=threads, disallowed_special=())
                arrays = tok.encode_batch(texts, num_threads=threads, as_arrays=True, disallowed_special=())
            assert got == want and [a.tolist() for a in arrays] == want, name
    assert calls and set(calls) == {threads}  # the cut path did run, with the thread count asked for


def test_a_str_subclass_is_read_as_its_text_by_every_path(toks):
    """encode() called the subclass's own encode() (the batch paths, as tiktoken, read the str's UTF-8):
    a subclass overriding it got other ids from encode than from encode_batch."""
    class Odd(str):
        def encode(self, *args, **kwargs):
            return b"something else"

    for tok in toks.values():
        s = Odd("hello world")
        assert tok.encode(s) == tok.encode_batch([s])[0] == tok.encode("hello world")


def test_encode_batch_raises_as_encode_does(toks):
    tok = toks["gpt4"]
    with pytest.raises(SpecialTokenError, match="<\\|end\\|>"):
        tok.encode_batch(["fine", "a <|end|> b"] * 3)
    with pytest.raises(Exception, match="text 1 of the batch holds a lone surrogate"):
        tok.encode_batch(["fine", "bad \ud800 text", "fine"])


def test_a_batch_that_is_not_texts_is_refused_naming_what(toks):
    """One str would be encoded character by character; an item that is not a str is named by its place;
    special-token arguments that name no token by its text are refused (they raised a bare TypeError, or
    went on as characters)."""
    from tokenmill.errors import ConfigError

    tok = toks["gpt4"]
    for call in (tok.encode_batch, tok.encode_flat):
        name = call.__name__
        with pytest.raises(ConfigError, match=rf"^{name} takes an iterable of texts, not one str"):
            call("abc")
        with pytest.raises(ConfigError, match=rf"^{name} takes an iterable of texts \(strs\), not NoneType"):
            call(None)
        for bad, kind in ((None, "NoneType"), (b"x", "bytes"), (3, "int")):
            with pytest.raises(ConfigError, match=rf"^text 2 of the batch is not a str but {kind}; {name} takes strs"):
                call(["fine", "", bad, "fine"])
    assert tok.encode_batch([]) == [] and tok.encode_batch(iter(["ab", "c"])) == [tok.encode("ab"), tok.encode("c")]
    with pytest.raises(ConfigError, match="allowed_special must be 'all', a special token or a collection"):
        tok.encode("a", allowed_special=5)
    with pytest.raises(ConfigError, match=r"disallowed_special holds 1 \(int\)"):
        tok.encode("a", disallowed_special=[1])


def test_grouped_path_is_taken(toks, monkeypatch):
    """The plain texts of a batch go through one kernel call (encode_many), not one call per text."""
    tok = toks["gpt4"]
    tok.encode("warm")
    calls = []
    enc = tok._compiled()
    real = enc.encode_many
    monkeypatch.setattr(enc, "encode_many", lambda texts, threads=1, forbid=None, view=False:
                        calls.append(len(texts)) or real(texts, threads, forbid, view))
    texts = ["hello world"] * 50 + ["滑动窗口"] * 50
    assert tok.encode_batch(texts, num_threads=1) == [tok.encode(t) for t in texts]
    assert calls == [100]


@given(st.text(alphabet="<|ab>é", max_size=30), st.lists(st.text(alphabet="<|ab>é", min_size=1, max_size=3), min_size=1,
                                                          max_size=4))
@settings(deadline=None)
def test_holds_any_equals_a_search_for_each_prefix(text, prefixes):
    """The first-character shortcut before the prefix search changes no answer."""
    from tokenmill.tokenizer.special import holds_any

    assert holds_any(text, tuple(prefixes)) == any(p in text for p in prefixes)


def test_threads_are_kept_between_calls(toks):
    """Two-thread calls run on the calling thread and one process-wide pool kept between calls, so each
    thread's chunk cache (per encoder, per thread) outlives the call; results stay in text order."""
    import threading

    seen = []

    def group(lo, hi):
        seen.append(threading.get_ident())
        return list(range(lo, hi))

    texts = ["x" * 20_000] * 12  # 12 groups of at least 16K characters
    assert groups_mod.in_groups(texts, 2, group) == list(range(12))
    pool = groups_mod._pool[1]
    assert groups_mod.in_groups(texts, 2, group) == list(range(12))
    assert groups_mod._pool[1] is pool  # the same helpers, not a new pool per call
    helpers = {t.ident for t in pool._threads}
    assert set(seen) <= helpers | {threading.get_ident()}
    tok = toks["gpt4"]
    big = ["hello world, 滑动窗口 123 don't " * 800] * 6
    assert tok.encode_batch(big, num_threads=2) == [tok.encode(t) for t in big]


def test_a_failing_group_raises_the_first_error_in_text_order():
    def group(lo, hi):
        if lo in (6, 10):
            raise ValueError(f"group {lo}")
        return [lo]

    # 16 texts of 20K characters: groups of two (at most 1/8 of the characters each), starting 0, 2, .., 14
    assert groups_mod.in_groups(["y" * 20_000] * 16, 2, lambda lo, hi: [lo]) == list(range(0, 16, 2))
    with pytest.raises(ValueError, match="group 6"):
        groups_mod.in_groups(["y" * 20_000] * 16, 2, group)
    assert groups_mod.in_groups(["y" * 20_000] * 4, 2, lambda lo, hi: [lo]) == [0, 1, 2, 3]  # the pool still works
    # the groups are taken largest first: a large failing text late in the list runs before a small
    # failing one early in it, and the early one's error is still the one raised, every time
    def two_fail(lo, hi):
        for t in (2, 12):
            if lo <= t < hi:
                raise ValueError(f"text {t}")
        return [lo]

    texts = ["s" * 20_000] * 12 + ["L" * 200_000] + ["s" * 20_000] * 3
    for _ in range(20):
        with pytest.raises(ValueError, match="text 2"):
            groups_mod.in_groups(texts, 2, two_fail)


def test_groups_are_taken_largest_first_and_results_stay_in_text_order():
    import threading

    lock, started = threading.Lock(), []

    def group(lo, hi):
        with lock:
            started.append(lo)
        return list(range(lo, hi))

    texts = ["a" * 5_000] * 40 + ["B" * 150_000, "C" * 90_000] + ["a" * 5_000] * 40
    assert groups_mod.in_groups(texts, 2, group) == list(range(len(texts)))
    assert set(started[:2]) == {40, 41}  # the two largest groups (one text each) are the first taken
    assert sorted(started) == sorted(set(started))  # every group ran once


def test_a_call_from_inside_a_group_does_not_wait_forever():
    """A group that itself spreads work over threads (nested calls): the caller always takes groups itself."""
    import threading

    def inner(lo, hi):
        return [lo]

    def outer(lo, hi):
        return groups_mod.in_groups(["z" * 20_000] * 4, 2, inner)

    out = []
    t = threading.Thread(target=lambda: out.append(groups_mod.in_groups(["w" * 20_000] * 6, 2, outer)))
    t.start()
    t.join(60)
    assert not t.is_alive() and out == [[0, 1, 2, 3] * 6]


def _child_encode(tok, texts, q):
    q.put(tok.encode_batch(texts, num_threads=2))


def test_calls_that_grow_the_pool_while_others_use_it_all_succeed(toks):
    """A call asking for more threads replaces the process-wide pool (and shuts the old one down); a call on
    another thread that had fetched the old pool then submitted to it: "cannot schedule new futures after
    shutdown". Fetching and submitting are one step under the pool's lock now: every call gives its ids."""
    import threading

    tok = toks["gpt4"]
    texts = ["hello world, 滑动窗口 123 don't " * 300] * 40
    want = [a.tolist() for a in tok.encode_batch(texts, num_threads=1, as_arrays=True)]
    errors, stop = [], threading.Event()

    def steady():
        while not stop.is_set():
            try:
                assert [a.tolist() for a in tok.encode_batch(texts, num_threads=2, as_arrays=True)] == want
            except Exception as e:  # noqa: BLE001 (collected: the assertion below names them)
                errors.append(repr(e))

    def growing():
        for n in range(3, 24):
            try:
                assert [a.tolist() for a in tok.encode_batch(texts, num_threads=n, as_arrays=True)] == want
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        stop.set()

    threads = [threading.Thread(target=steady), threading.Thread(target=steady), threading.Thread(target=growing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_forked_child_gets_its_own_threads(toks):
    """A forked process (a DataLoader worker) has none of its parent's pool threads: it makes its own."""
    import multiprocessing

    tok = toks["gpt4"]
    texts = ["the cat sat on the mat, 滑动窗口 " * 1000] * 6
    want = tok.encode_batch(texts, num_threads=2)  # the parent's pool exists now
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_encode, args=(tok, texts, q))
    p.start()
    got = q.get(timeout=120)
    p.join(60)
    assert p.exitcode == 0 and got == want



def test_batch_refuses_a_disallowed_special_token_as_encode_does(toks):
    """The batch looks for disallowed special tokens in one compiled pass over its UTF-8; a text that
    spells one raises the error ``encode`` raises for it, one spelled across two texts is plain text in
    each, and allowing it (or disallowing nothing) encodes as before."""
    from tokenmill.errors import SpecialTokenError

    tok = toks["gpt4"]
    special = next(iter(tok.special_tokens))
    texts = ["plain text " * 20, "more: " + special + " here", "tail"]
    with pytest.raises(SpecialTokenError) as batch:
        tok.encode_batch(texts, num_threads=1)
    with pytest.raises(SpecialTokenError) as one:
        tok.encode(texts[1])
    assert str(batch.value) == "text 1 of the batch: " + str(one.value)  # and which text it is
    cut = len(special) // 2
    split = ["a" * 70 + special[:cut], special[cut:] + " b", "", "c"]
    for threads in (1, 2):
        assert tok.encode_batch(split, num_threads=threads) == [tok.encode(t) for t in split]
        assert tok.encode_batch(texts, num_threads=threads, allowed_special="all") == [
            tok.encode(t, allowed_special="all") for t in texts]
        assert tok.encode_batch(texts, num_threads=threads, disallowed_special=()) == [
            tok.encode(t, disallowed_special=()) for t in texts]


def test_arrays_hold_their_ids_only_and_stay_apart(toks):
    """Arrays out are views of one buffer of exactly the group's ids (the kernel's buffer, a slot per input
    byte, is shrunk in place, not kept): writing into one text's array changes no other, and ``encode``'s
    array is its ids' size."""
    tok = toks["gpt4"]
    texts = ["hello world, 滑动窗口 123 don't " * 30, "the cat sat on the mat", "123 don't\n\n"]
    got = tok.encode_batch(texts, num_threads=1, as_arrays=True)
    want = [tok.encode(t, disallowed_special=()) for t in texts]
    assert [g.tolist() for g in got] == want
    base = got[0].base
    assert base is not None and all(g.base is base for g in got)
    assert base.size == sum(len(w) for w in want) < sum(len(t.encode()) for t in texts)
    got[1][:] = -1
    assert got[0].tolist() == want[0] and got[2].tolist() == want[2]
    one = tok._encode(texts[0])
    assert one.size == len(want[0]) and (one.base is None or one.base.size == one.size)


def test_one_split_and_id_buffer_a_thread_whatever_the_texts(toks, monkeypatch):
    """Each thread splits and encodes into buffers it keeps, shared by its encoders (no new blocks of 8 bytes
    per byte of text, and their page faults, on every call): longer, shorter and other texts after it,
    and another tokenizer's batches between, give the ids a fresh tokenizer gives, earlier results (arrays,
    lists, ``encode_flat``, ``encode``) stay what they were, the buffers grow only for a longer text, and
    one past the cap is made for its call alone (not kept)."""
    from tokenmill.tokenizer import _scratch

    tok, other = toks["gpt4"], toks["hf"]
    fresh = train_bpe(["hello world, 滑动窗口 123 don't", "the cat sat on the mat"] * 20, 300, pattern="gpt4",
                      special_tokens=["<|end|>", "<|x|>"])  # the same tokenizer, an encoder of its own
    texts = ["hello world, 滑动窗口 123 don't " * 200, "the cat sat", "x" * 3000 + " 123 don't\n\n" * 100]
    want = {t: fresh.encode(t, disallowed_special=()) for t in texts}
    kept, seen = [], []
    for batch in (texts, texts[1:], texts[:1], texts[::-1]):
        arrays = tok.encode_batch(batch, num_threads=1, as_arrays=True)
        lists = tok.encode_batch(batch, num_threads=1)
        flat, bounds = tok.encode_flat(batch, num_threads=1)
        one = tok.encode_batch(batch[:1], num_threads=1, as_arrays=True)[0]
        other.encode_batch(batch[::-1], num_threads=1)  # another encoder, the same thread's buffers
        kept.append((batch, arrays, lists, flat, bounds, one))
        seen.append((_scratch._LOCAL.split, _scratch._LOCAL.bpe_ids))
    for batch, arrays, lists, flat, bounds, one in kept:
        assert [a.tolist() for a in arrays] == lists == [want[t] for t in batch]
        assert flat.tolist() == [i for t in batch for i in want[t]] and bounds[-1] == flat.size
        assert one.tolist() == want[batch[0]]
    assert all(s == seen[0] for s in seen)
    assert seen[0][0].size >= sum(len(t.encode()) for t in texts) + 2 and seen[0][1].size >= sum(len(t.encode()) for t in texts)
    for t in texts:
        assert tok.encode(t, disallowed_special=()) == want[t]
    monkeypatch.setattr(_scratch, "KEEP_BYTES", 64)
    assert tok.encode_batch(texts, num_threads=1) == [want[t] for t in texts]
    assert (_scratch._LOCAL.split, _scratch._LOCAL.bpe_ids) == seen[0]


def test_lists_read_the_thread_buffer_only_where_nothing_encodes_in_between(toks):
    """Lists out read a group's ids from the thread's buffer without a copy; a group holding special tokens
    (each encoded apart, reusing that buffer) and a batch cut across threads still give ``encode``'s
    lists."""
    tok = toks["gpt4"]
    texts = ["a <|end|> b " * 50, "plain text " * 40, "<|x|>", "tail"]
    want = [tok.encode(t, allowed_special="all") for t in texts]
    for threads in (1, 2):
        assert tok.encode_batch(texts, num_threads=threads, allowed_special="all") == want
        assert tok.encode_batch(texts[1:2] * 3000, num_threads=threads) == want[1:2] * 3000


def _thp_eligible(address: int) -> bool | None:
    """Whether the mapping holding ``address`` may get transparent huge pages (/proc/self/smaps), or None
    where the kernel does not say."""
    lo = None
    for line in open("/proc/self/smaps"):
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            a, b = (int(x, 16) for x in head.split("-"))
            lo = a <= address < b
        elif lo and line.startswith("THPeligible:"):
            return line.split()[1] == "1"
    return None


def test_the_kernels_big_tables_start_on_huge_pages(gpt2_ranks_path, monkeypatch):
    """The tables the kernel reads at random rows (the vocabulary seeds, the pair table, a thread's merged
    tables: 2 MB or more each for GPT-2) start on a 2 MB boundary in memory advised for huge pages; where
    that advice does not exist they are ordinary arrays, and the ids are the same either way."""
    import mmap
    import sys
    from pathlib import Path

    from tokenmill import Tokenizer
    from tokenmill.tokenizer.bpe import encoder as E

    text = "The kernels' tables, on huge pages: 123 don't stop\n\n" * 50
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2")
    ids = tok.encode(text)
    enc = tok._compiled()
    big = [enc.vtab, enc.vtab2, enc.pairs, *enc._local.state[12:14]]  # the seeds, the pairs, the merged tables
    assert all(t.nbytes >= E._HUGE_PAGE for t in big)
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if sys.platform == "linux" and hasattr(mmap, "MADV_HUGEPAGE"):
        assert all(t.ctypes.data % E._HUGE_PAGE == 0 for t in big)
        if thp.is_file() and "[never]" not in thp.read_text():
            assert all(_thp_eligible(t.ctypes.data) in (True, None) for t in big)
    small = E._line_aligned_zeros((100, 3), np.uint64)
    assert small.ctypes.data % 64 == 0 and small.shape == (100, 3) and not small.any()
    monkeypatch.delattr(mmap, "MADV_HUGEPAGE", raising=False)  # a platform without the advice
    assert E._huge_zeros(E._HUGE_PAGE) is None
    plain = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2")
    assert plain.encode(text) == ids
    pe = plain._compiled()
    assert pe.vtab.ctypes.data % 64 == 0 and np.array_equal(pe.vtab, enc.vtab) and np.array_equal(pe.pairs, enc.pairs)
