"""Characters merged ahead (``_encode_kernels._premerge``) must never change an id.

The encoder puts each 3-byte character's own BPE result in place before the merge loop when that is
exact. These tokenizers are built to break it if the safety conditions were wrong: trained on text
where a few characters share lead bytes, so the vocabulary holds "tail" tokens (bytes + the first
byte or two of a character, like Llama 3's b" \\xe5") and "head" tokens (a character's last bytes +
what follows); then the merge list is reordered so that merges taking a character's token as a part
rank before the merges making it (non-monotone, like Llama 3's tokenizer.json). Oracles: the
pure-Python encoder (``encode_ordinary_python``) and HF ``tokenizers`` on the same tokenizer.json.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import Tokenizer, train_bpe
from tokenmill.tokenizer.bpe import encoder as encoder_mod
from tokenmill.tokenizer.formats.export import to_huggingface_dict

tokenizers = pytest.importorskip("tokenizers")

# characters sharing lead bytes (e7: 的 生 用 看; e6: 是 时 我; e4: 中 不 一 人), a 3-byte
# punctuation mark, and a few ASCII pieces
ALPHABET = list("的生用看是时我中不一人。") + [" ", "a", "1", "的的", " 的", "不是"]
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1 / (k + 1) for k in range(len(ALPHABET))]
    return ["".join(rng.choices(ALPHABET, weights, k=rng.randint(5, 40))) for _ in range(n)]


# merges making tokens that cross a character's edge part-way: tails (bytes + a character's first byte
# or two) and heads (a character's last byte or two + bytes), some chained (" \xe7" then " \xe7\x9a")
EDGE = [(b" ", b"\xe7"), (b" ", b"\xe4"), (b"\xe7\x9a\x84", b"\xe7"), (b"a", b"\xe6"), (b"\xe7\x9a\x84", b"\xe7\x94"),
        (b" \xe7", b"\x9a"), (b"\x84", b"\xe7"), (b"\x9f", b" "), (b"\xb8\x8d", b"\xe6\x98\xaf"), (b"\xba", b"a"),
        (b"\x84\xe7", b"\x94"), (b"\xe6\x98", b"\xaf\xe7")]


def _with_edges(body: dict, seed: int, whole_first: bool) -> dict:
    """``body`` with the EDGE merges inserted at random places (their tokens added to the vocabulary),
    and, if ``whole_first``, the merges taking the token of one of six characters as a part (with anything but
    another character's token) moved to the front."""
    from tokenmill.tokenizer.formats.export import bytes_to_unicode

    b2u = bytes_to_unicode()
    enc = lambda b: "".join(b2u[x] for x in b)
    rng = random.Random(seed)
    vocab = dict(body["model"]["vocab"])
    merges = [m if isinstance(m, list) else m.split(" ") for m in body["model"]["merges"]]
    extra = [b for b in (b"\xaf\xe7", b"\x84\xe7") if enc(b) not in vocab]  # parts EDGE needs that are not tokens yet
    for b in extra:
        merges.insert(rng.randrange(len(merges) + 1), [enc(b[:1]), enc(b[1:])])
    for l, r in EDGE:
        for part in (l, r, l + r):
            vocab.setdefault(enc(part), len(vocab))
        merges.insert(rng.randrange(len(merges) // 3 + 1), [enc(l), enc(r)])
    if whole_first:
        chars = "的生用看是时我中不一人。"
        every = {enc(c.encode()) for c in chars}
        chosen = {enc(c.encode()) for c in rng.sample(chars, 6)}
        early = lambda m: (m[0] in chosen and m[1] not in every) or (m[1] in chosen and m[0] not in every)
        first = [m for m in merges if early(m)]
        rng.shuffle(first)
        merges = first + [m for m in merges if not early(m)]
    return dict(body, model=dict(body["model"], vocab=vocab, merges=merges))


@pytest.fixture(scope="module")
def built(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setattr(encoder_mod, "_PREMERGE_MIN", 0)  # merge ahead whatever the vocabulary
    tok = train_bpe(_texts(0, 400), 256 + 120, pattern=LLAMA3)
    body = to_huggingface_dict(tok)
    out = {"trained": (tok, None)}
    for seed, whole_first in [(1, False), (2, False), (3, True), (4, True)]:
        path = tmp_path_factory.mktemp(f"edges{seed}") / "tokenizer.json"
        path.write_text(json.dumps(_with_edges(body, seed, whole_first), ensure_ascii=False))
        out[f"edges{seed}"] = (Tokenizer.from_huggingface(path), tokenizers.Tokenizer.from_file(str(path)))
    # ignore_merges (Llama 3's): a chunk that is a vocabulary token is that token, even where BPE would
    # not reach it. Han runs skip the chunk cache where the pinned vocabulary lives: these tokens, which
    # no merge makes, must still be found whole (``CompiledEncoder._unreached``).
    body = _with_edges(body, 5, True)
    for s in WHOLE:
        body["model"]["vocab"].setdefault("".join(_b2u()[x] for x in s.encode()), len(body["model"]["vocab"]))
    body["model"]["ignore_merges"] = True
    path = tmp_path_factory.mktemp("whole") / "tokenizer.json"
    path.write_text(json.dumps(body, ensure_ascii=False))
    out["whole"] = (Tokenizer.from_huggingface(path), tokenizers.Tokenizer.from_file(str(path)))
    return out


WHOLE = ["的生用", " 的生用", "。的的", "不是的的", "的的的"]  # over 7 bytes, a Han character in the first 4


def _b2u():
    from tokenmill.tokenizer.formats.export import bytes_to_unicode

    return bytes_to_unicode()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_vocabularies_are_adversarial(built):
    for name, (tok, _) in built.items():
        tok.encode("x")
        cp3, flat, starts, lens, tail_ptr, tail_tok, tail_mask, head_ptr, head_tok, head_mask, _ = tok._encoder.chars
        assert cp3.size, f"{name}: characters are merged ahead"
        assert sum(int(cp3[ord(c)]) >> 60 == 1 for c in "的生用看是时我中不一人") >= 3, name
        if name != "trained":
            assert tail_tok.size >= 6 and head_tok.size >= 5, f"{name}: tokens cross a character's edge"
    # a merge list where a character's token is a part of merges ranked before it is made: those
    # characters are left as bytes (else "的的" could merge before 的 is whole in the byte-level run)
    tok = built["edges3"][0]
    assert any(int(tok._encoder.chars[0][ord(c)]) == 0 for c in "的生用看是时我中不一人")


@given(st.lists(st.sampled_from(ALPHABET), max_size=60))
@settings(max_examples=150, deadline=None)
def test_merging_ahead_changes_no_id(built, parts):
    text = "".join(parts)
    for name, (tok, hf) in built.items():
        got = tok.encode_ordinary(text)
        assert got == tok.encode_ordinary_python(text), name
        if hf is not None:
            assert got == hf.encode(text, add_special_tokens=False).ids, name


def test_whole_han_tokens_found_without_the_cache(built):
    tok, hf = built["whole"]
    text = "的生用 的生用。的的\n不是的的1的的的"
    ids = tok.encode_ordinary(text)
    assert ids == hf.encode(text, add_special_tokens=False).ids == tok.encode_ordinary_python(text)
    assert sum(tok.token_bytes(i).decode("utf-8", "replace") in WHOLE for i in ids) == 5  # found whole
    assert tok._encoder.chars[-1].size >= 4  # unreachable by BPE: checked by the kernel


def test_merging_ahead_on_generated_corpus(built):
    for name, (tok, hf) in built.items():
        texts = _texts(7, 300)
        got = tok.encode_batch(texts)
        assert got == [tok.encode_ordinary_python(t) for t in texts], name
        if hf is not None:
            assert got == [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)], name
