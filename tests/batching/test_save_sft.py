"""save_sft: SFT examples encoded a batch at a time into the two stores ``encode_sft(...).save`` writes, the same
bytes whatever the batch size, with errors naming the example by its number in the whole set."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from tokenmill import MaskedSource, encode_sft, save_sft, train_bpe
from tokenmill.data import masked
from tokenmill.errors import ConfigError, InputError, SpecialTokenError

CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.fixture(scope="module")
def tok():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (training stops early on this small text)
        return train_bpe(["the cat sat on the mat. Où est le chat? " * 20], vocab_size=290,
                         special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _examples(n: int) -> list:
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append({"prompt": f"the cat {i} ", "completion": "sat on the mat." * (i % 3)})  # (some empty)
        elif kind == 1:
            out.append(("Où est ", f"le chat {i}?"))
        elif kind == 2:
            out.append([("the ", False), (f"cat {i}", True), (" sat", False)])
        else:
            out.append({"messages": [{"role": "user", "content": f"où {i}"},
                                     {"role": "assistant", "content": "the mat"}]})
    return out


def test_the_same_stores_as_encode_sft_save_whatever_the_batches(tok, tmp_path, monkeypatch):
    monkeypatch.setattr(masked, "SAVE_SHARD_IDS", 40)  # (several shards of a few documents each)
    examples = _examples(23)
    want = encode_sft(tok, examples, chat_template=CHATML).save(tmp_path / "want")
    assert len(want) == 23 and want.num_targets > 0
    shards = len(list((tmp_path / "want" / "tokens").glob("*.tokens")))
    assert shards > 3
    for batch in (1, 4, 1000):
        got = save_sft(tok, iter(examples), tmp_path / f"b{batch}", batch_examples=batch, chat_template=CHATML)
        assert _files(tmp_path / f"b{batch}") == _files(tmp_path / "want")  # (byte for byte, manifests included)
        assert got.fingerprint == want.fingerprint
    back = MaskedSource.open(tmp_path / "b4")
    for i in (0, 7, 22):
        assert back.get(i).tolist() == want.get(i).tolist()
        assert back.loss_mask(i).tolist() == want.loss_mask(i).tolist()


def test_eos_is_recorded_as_encode_sft_records_it(tok, tmp_path):
    chats = [ex for ex in _examples(12) if isinstance(ex, dict) and "messages" in ex]
    for name, examples in (("chats", chats), ("mixed", chats + [("a", "b")])):  # (a chat ends with no EOS)
        want = encode_sft(tok, examples, chat_template=CHATML)
        got = save_sft(tok, examples, tmp_path / name, batch_examples=1, chat_template=CHATML)
        assert got.eos_id == want.facts["eos_id"] and got.fingerprint == want.save(tmp_path / f"{name}-w").fingerprint
    assert MaskedSource.open(tmp_path / "mixed").eos_id == tok.special_tokens["<|endoftext|>"]


def test_errors_name_the_example_in_the_whole_set_and_nothing_is_left(tok, tmp_path):
    examples = _examples(9) + [("c", "d<|endoftext|>")]
    with pytest.raises(SpecialTokenError, match="example 9, part 1: the text contains the special token"):
        save_sft(tok, iter(examples), tmp_path / "s", batch_examples=4, chat_template=CHATML)
    assert not (tmp_path / "s").exists()  # (the folder made for the stores, removed: no half-written store)
    with pytest.raises(InputError, match="example 5 has no field 'completion'"):
        save_sft(tok, [("a", "b")] * 5 + [{"prompt": "x"}], tmp_path / "s", batch_examples=2)
    with pytest.raises(InputError, match=r"example 6, part 0 holds a lone surrogate"):
        save_sft(tok, [("a", "b")] * 6 + [("x\ud800", "y")], tmp_path / "s", batch_examples=4)
    assert not (tmp_path / "s").exists()


def test_a_folder_holding_stores_is_refused_before_anything_is_read(tok, tmp_path):
    save_sft(tok, [("a", "b")], tmp_path / "s")
    read = []

    def examples():
        read.append(1)
        yield ("a", "c")

    with pytest.raises(ConfigError, match="already holds tokens/ and loss_mask/; pass overwrite=True"):
        save_sft(tok, examples(), tmp_path / "s")
    assert not read
    again = save_sft(tok, examples(), tmp_path / "s", overwrite=True)
    assert again.get(0).tolist() == encode_sft(tok, [("a", "c")]).get(0).tolist()
    with pytest.raises(ConfigError, match="batch_examples"):
        save_sft(tok, [("a", "b")], tmp_path / "t", batch_examples=0)


def test_shards_are_cut_at_the_first_document_end_past_the_size(monkeypatch):
    monkeypatch.setattr(masked, "SAVE_SHARD_IDS", 5)
    runs = [(np.array([3, 0, 4]), np.arange(7), np.ones(7, np.uint8)), (np.array([2, 6]), np.arange(8), np.zeros(8, np.uint8))]
    got = list(masked._recut(runs))
    assert [g[0].tolist() for g in got] == [[3, 0, 4], [2, 6]]
    assert [g[1].tolist() for g in got] == [list(range(7)), list(range(8))]
    one = list(masked._recut([(np.concatenate([r[0] for r in runs]), np.concatenate([r[1] for r in runs]),
                               np.concatenate([r[2] for r in runs]))]))
    assert [g[0].tolist() for g in one] == [g[0].tolist() for g in got]
    assert [g[0].tolist() for g in masked._recut([])] == [[]]


def test_from_token_arrays_takes_roles_known_once_the_shards_are_written(tmp_path):
    from tokenmill import TokenStore

    asked = []

    def shards():
        yield [1], [3]
        asked.append("shards done")

    def roles():
        asked.append("roles")
        return 4, None

    st = TokenStore.from_token_arrays(tmp_path / "a", shards(), vocab_size=5, roles=roles)
    assert st.eos_id == 4 and st.bos_id is None and asked == ["shards done", "roles"]
    with pytest.raises(ConfigError, match="roles= is a function"):
        TokenStore.from_token_arrays(tmp_path / "b", [([1], [3])], vocab_size=5, eos_id=4, roles=roles)
    with pytest.raises(ConfigError, match="eos_id"):
        TokenStore.from_token_arrays(tmp_path / "c", [([1], [3])], vocab_size=5, roles=lambda: (9, None))
    assert not (tmp_path / "c").exists()


def test_a_folder_that_cannot_be_written_is_refused_before_the_work(tok, tmp_path, monkeypatch):
    import tokenmill._io as io

    monkeypatch.setattr(io.os, "access", lambda path, mode: False)  # (a read-only file system; root ignores modes)
    read = []
    with pytest.raises(ConfigError, match="cannot write the SFT stores' folder .* is not writable .*read-only file"):
        save_sft(tok, (read.append(1) or ex for ex in [("a", "b")]), tmp_path / "s")
    assert not read and not (tmp_path / "s").exists()


def test_an_overwrite_that_fails_part_way_leaves_the_old_pair_whole(tok, tmp_path, monkeypatch):
    """Over stores already there the new pair is written aside and swapped in once whole: replacing tokens/ first
    had left, on an error before loss_mask/ was written, the new ids beside the old flags and the old ids gone."""
    from tokenmill.data import store as store_module

    old = save_sft(tok, [("a", "b"), ("c", "d")], tmp_path / "s")
    before = _files(tmp_path / "s")
    real = store_module.TokenStore.from_token_arrays.__func__

    def failing(cls, out_dir, shards, **kw):
        if Path(out_dir).name == "loss_mask":
            raise OSError(28, "No space left on device")
        return real(cls, out_dir, shards, **kw)

    monkeypatch.setattr(store_module.TokenStore, "from_token_arrays", classmethod(failing))
    with pytest.raises(OSError, match="No space left"):
        save_sft(tok, [("x", "y")] * 3, tmp_path / "s", overwrite=True)
    monkeypatch.undo()
    assert _files(tmp_path / "s") == before and MaskedSource.open(tmp_path / "s").fingerprint == old.fingerprint
    new = save_sft(tok, [("x", "y")] * 3, tmp_path / "s", overwrite=True)
    assert len(MaskedSource.open(tmp_path / "s")) == 3 and new.fingerprint != old.fingerprint
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["loss_mask", "tokens"]  # (nothing staged left)
    (tmp_path / "s" / "tokens").rename(tmp_path / "s" / "tokens.tokenmill-old")  # (a swap killed part-way)
    read = []
    with pytest.raises(ConfigError, match="tokens.tokenmill-old' is there: the old file of a replacement stopped"):
        save_sft(tok, (read.append(1) or ex for ex in [("a", "b")]), tmp_path / "s", overwrite=True)
    assert not read  # (said before the encode)
    (tmp_path / "s" / "tokens.tokenmill-old").rename(tmp_path / "s" / "tokens")
    with pytest.raises(InputError):  # (bad input: the folders made for it are not left behind, parents included)
        save_sft(tok, [("a", "b"), {"prompt": "x"}], tmp_path / "new" / "deeper" / "s")
    assert not (tmp_path / "new").exists()


def test_documents_without_targets_are_counted_in_pieces(tok, monkeypatch):
    src = MaskedSource([[1, 2], [], [3], [4, 5, 6], [7]], [[0, 0], [], [1], [0, 1, 0], [0]])
    assert src.documents_without_targets() == 3  # (the empty one, and the two of flags 0 alone)
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 5, 3000)
    flags = [(rng.random(int(n)) < 0.2).astype(np.uint8) for n in lengths]
    big = MaskedSource([np.ones(int(n), np.int64) for n in lengths], flags)
    monkeypatch.setattr(masked, "COUNT_TOKENS", 7)  # (pieces of ~3 documents)
    assert big.documents_without_targets() == sum(1 for f in flags if not f.any())
