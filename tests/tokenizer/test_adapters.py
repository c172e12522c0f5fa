"""as_tokenizer: one tokenizer protocol from paths, HF / transformers / tiktoken objects; the CLI's --tokenizer."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import ForeignTokenizer, Tokenizer, TokenizerLike, as_tokenizer, train_bpe
from tokenmill.errors import ConfigError
from tokenmill.tokenizer.adapters import PROBE

TEXTS = [PROBE, "a<|endoftext|>b", "", "  x\n\n", "12345 低 🙂"]


@pytest.fixture(scope="module")
def trained():
    from tokenmill.corpus import default_corpus

    return train_bpe(default_corpus(docstrings=False), 600, special_tokens=["<|endoftext|>"])


def test_paths(trained, tmp_path):
    trained.save(tmp_path / "tok.json")
    trained.save_huggingface(tmp_path / "tokenizer.json")
    trained.save_tiktoken(tmp_path / "tok.tiktoken")
    a = as_tokenizer(tmp_path / "tok.json")
    b = as_tokenizer(str(tmp_path))  # the folder of a tokenizer.json
    c = as_tokenizer(tmp_path / "tok.tiktoken", pattern="gpt4", special_tokens=trained.special_tokens)
    for tok in (a, b, c):
        assert isinstance(tok, Tokenizer) and isinstance(tok, TokenizerLike)
        for t in TEXTS:
            assert tok.encode(t, allowed_special="all") == trained.encode(t, allowed_special="all")
    assert as_tokenizer(trained) is trained
    with pytest.raises(ConfigError, match="is a rank file, which holds no split pattern, and not one whose model tokenmill knows; give its split pattern, e.g. pattern="):
        as_tokenizer(tmp_path / "tok.tiktoken")
    with pytest.raises(ConfigError, match="does not exist"):
        as_tokenizer(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="cannot use a builtins.int .*SentencePiece .model.*SentencePieceProcessor"):
        as_tokenizer(3)

    class SlowSentencePiece:  # a transformers tokenizer without a fast backend: its processor is what can be taken
        sp_model = type("SentencePieceProcessor", (), {})()

    with pytest.raises(ConfigError, match=r"as a tokenizer; it runs sentencepiece: pass its \.sp_model"):
        as_tokenizer(SlowSentencePiece())


def test_hf_object_converted_when_exact(trained, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    trained.save_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok = as_tokenizer(hf)
    assert isinstance(tok, Tokenizer)
    for t in TEXTS:
        assert tok.encode(t, allowed_special="all") == hf.encode(t, add_special_tokens=False).ids

    class FastLike:  # what as_tokenizer uses of transformers' PreTrainedTokenizerFast: its backend
        backend_tokenizer = hf

    assert isinstance(as_tokenizer(FastLike()), Tokenizer)


def test_wrapped_hf_tokenizers_give_their_tokens_raw_bytes():
    """A byte-level tokenizer.json tokenmill runs through HF (an NFKC normalizer): token_bytes and
    decode_bytes gave each token's *decoded* text, U+FFFD for a token holding part of a character (a
    report showed 'hello ������' and counted 37 bytes for 17). Its raw bytes now; a WordPiece one's
    decode_bytes is its decoded text (its tokens' text depends on their neighbours: "##")."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.normalizer = normalizers.NFKC()
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(["hello world"] * 10, trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok = as_tokenizer(hf)
    assert isinstance(tok, ForeignTokenizer)
    text = "hello 世界 🙂"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and tok.decode_bytes(ids) == text.encode()
    assert [len(tok.token_bytes(i)) for i in ids] == [len(hf.id_to_token(i)) for i in ids]  # one byte a char
    wp = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "hello": 1, "world": 2, "##s": 3}, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.Whitespace()
    wp.decoder = decoders.WordPiece()
    w = as_tokenizer(wp)
    assert w.decode_bytes(w.encode("hello worlds")) == b"hello worlds"
    # an id past the vocabulary is an UnknownTokenError (a KeyError), as tokenmill's own tokenizers say: HF's
    # decode had left it out without a word
    from tokenmill.errors import UnknownTokenError

    for t in (tok, w):
        for call in (t.decode, t.decode_bytes):
            with pytest.raises(UnknownTokenError, match=f"token id {t.vocab_size} is out of range"):
                call([1, t.vocab_size])


def test_hf_objects_that_truncate_or_pad_give_every_id_unpadded(trained, tmp_path):
    """A transformers tokenizer just called with truncation=True keeps it on its backend; an HF tokenizer can
    have padding enabled. Both reached tokenmill's encode: a converted one failed its probe and fell back to a
    wrapper that cut every document to max_length (a store of 17-token documents) or padded every text to the
    longest of its batch, pad ids stored as tokens, under a warning saying the opposite. Now a copy that does
    neither is used (converted or wrapped), with the warning; the user's object is left as it is."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    trained.save_huggingface(tmp_path / "tokenizer.json")
    text = " ".join(t for t in TEXTS if "<|" not in t) * 20
    for wrapped in (False, True):
        if wrapped:  # an NFKC normalizer: run through HF, not converted
            hf = tokenizers.Tokenizer(models.BPE())
            hf.normalizer = normalizers.NFKC()
            hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            hf.train_from_iterator([text] * 3, trainers.BpeTrainer(
                vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
        else:
            hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
        want = hf.encode(text, add_special_tokens=False).ids
        hf.enable_truncation(max_length=16)
        hf.enable_padding(pad_id=0, pad_token="<pad>")
        with pytest.warns(UserWarning, match=r"the HF tokenizer object enables truncation \(max_length=16.*and "
                                             r"padding .*tokenmill's does not: its ids are every id"):
            tok = as_tokenizer(hf)
        assert isinstance(tok, ForeignTokenizer) is wrapped
        assert tok.encode(text) == want and len(want) > 16
        assert tok.encode_batch(["a", text]) == [tok.encode("a"), want]  # (not padded to the longest)
        assert hf.truncation is not None and hf.padding is not None  # (the user's object as it was)


def test_hf_wordpiece_wrapped(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    vocab = {"[UNK]": 0, "[SEP]": 1, "hello": 2, "world": 3, "##s": 4, "!": 5}
    hf = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.add_special_tokens(["[SEP]"])
    tok = as_tokenizer(hf)
    assert isinstance(tok, ForeignTokenizer) and isinstance(tok, TokenizerLike)
    assert tok.encode_batch(["hello worlds!", "hello"]) == [[2, 3, 4, 5], [2]]
    assert tok.encode("hello [SEP] world", allowed_special="all") == [2, 1, 3]
    from tokenmill.errors import SpecialTokenError

    with pytest.raises(SpecialTokenError):
        tok.encode("hello [SEP]")
    assert tok.vocab_size == 6 and tok.special_tokens == {"[SEP]": 1}
    assert len(tok.content_hash) == 64
    assert tok.encode_batch(["hello"], as_arrays=True)[0].tolist() == [2]
    from tokenmill.errors import ConfigError

    with pytest.raises(ConfigError, match="^encode_batch takes an iterable of texts, not one str"):
        tok.encode_batch("hello")
    with pytest.raises(ConfigError, match="^text 1 of the batch is not a str but bytes"):
        tok.encode_batch(["hello", b"world"])
    assert tok.decode(np.array([2, 3])) == tok.decode([2, 3]) and tok.decode_bytes((2,)) == b"hello"
    assert tok.decode([2, 1, 3], skip_special_tokens=True) == hf.decode([2, 1, 3], skip_special_tokens=True)
    assert tok.decode([2, 1, 3]) == hf.decode([2, 1, 3], skip_special_tokens=False) != tok.decode([2, 3])
    with pytest.raises(ConfigError, match="^as_arrays='no' must be True or False"):
        tok.encode_batch(["hello"], as_arrays="no")
    for bad, message in ((np.array([[2, 3]]), r"^ids is a 2-D array of shape \(1, 2\); decode one sequence"),
                         (None, "^ids must be an iterable of token ids"), ([2.5], r"^token id=2.5 must be an integer"),
                         ({2: 0, 3: 1}, r"^ids is a dict \(its keys would be decoded\)"),  # (decoded its keys)
                         ({2, 3}, r"^ids is a set \(it keeps no order of its own\)")):  # (decoded in hash order)
        for fn in (tok.decode, tok.decode_bytes):
            with pytest.raises(ConfigError, match=message):
                fn(bad)
    with pytest.raises(ConfigError, match="^text is a bytes; encode takes a str"):
        tok.encode(b"hello")


def test_wrapped_decode_applies_errors_or_refuses_it(trained, tmp_path):
    """A ForeignTokenizer's decode had checked ``errors`` and ignored it (U+FFFD for 'strict'). Byte-level ones decode
    their tokens' bytes with it; one whose library makes the text (WordPiece, Metaspace) refuses another handler."""
    tiktoken = pytest.importorskip("tiktoken")
    enc = trained.to_tiktoken("t")
    odd = ForeignTokenizer.from_tiktoken(tiktoken.Encoding("odd", pat_str=r"\w+|\s+|[^\w\s]+",
                                                           mergeable_ranks=enc._mergeable_ranks, special_tokens={}))
    ids = [i for i in range(odd.vocab_size) if odd.token_bytes(i) == b"\xc3"] + odd.encode("hello")[:1]
    assert odd.decode(ids) == "\ufffd" + odd.decode([ids[-1]])
    assert odd.decode(ids, errors="ignore") == odd.decode([ids[-1]])
    assert odd.decode(ids, errors="backslashreplace") == "\\xc3" + odd.decode([ids[-1]])
    with pytest.raises(UnicodeDecodeError):
        odd.decode(ids, errors="strict")
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    hf = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    wp = as_tokenizer(hf)
    assert wp.decode([1]) == "hello"
    with pytest.raises(ConfigError, match="errors='strict'.*pass errors='replace'"):
        wp.decode([1], errors="strict")
    from tokenmill.errors import LoneSurrogateError

    with pytest.raises(LoneSurrogateError, match="text 1 of the batch"):
        wp.encode_batch(["hello", "a\ud800"])


def test_tiktoken_encoding(trained, tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    enc = trained.to_tiktoken("t")
    tok = as_tokenizer(enc)
    assert isinstance(tok, Tokenizer)
    for t in TEXTS:
        assert tok.encode(t, allowed_special="all") == enc.encode(t, allowed_special="all")
    # a pattern tokenmill cannot split the same way is still served, through tiktoken itself
    odd = tiktoken.Encoding("odd", pat_str=r"\w+|\s+|[^\w\s]+", mergeable_ranks=enc._mergeable_ranks,
                            special_tokens={})
    wrapped = as_tokenizer(odd)
    for t in TEXTS[:2]:
        assert wrapped.encode_ordinary(t) == odd.encode_ordinary(t)


def test_cli_tokenizer_kinds(trained, tmp_path, capsys):
    from tokenmill.cli import main

    trained.save(tmp_path / "tok.json")
    trained.save_huggingface(tmp_path / "tokenizer.json")
    trained.save_tiktoken(tmp_path / "tok.tiktoken")
    want = " ".join(map(str, trained.encode("Hi there<|endoftext|>", allowed_special="all")))
    for argv in (["--tokenizer", str(tmp_path / "tok.json")], ["--tokenizer", str(tmp_path)],
                 ["--tokenizer", str(tmp_path / "tok.tiktoken"), "--pattern", "gpt4",
                  "--special", "<|endoftext|>=%d" % trained.special_tokens["<|endoftext|>"]]):
        assert main(["encode", *argv, "--allow-special", "Hi there<|endoftext|>"]) == 0
        assert capsys.readouterr().out.strip() == want
    assert main(["encode", "--tokenizer", str(tmp_path / "tok.tiktoken"), "--special", "oops", "x"]) != 0
    assert "NAME=ID" in capsys.readouterr().err


def test_decode_skip_special_tokens(trained, tmp_path):
    """A trained tokenizer's ``decode(skip_special_tokens=True)`` leaves out its special ids (as HF's decode of
    its export does); a store's ``decode`` takes the option to its tokenizer; bad values are refused."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenmill import TokenStore

    eos = trained.special_tokens["<|endoftext|>"]
    ids = trained.encode("a<|endoftext|>b c<|endoftext|>", allowed_special="all")
    assert ids.count(eos) == 2
    assert trained.decode(ids) == "a<|endoftext|>b c<|endoftext|>"
    assert trained.decode(ids, skip_special_tokens=True) == "ab c" == trained.decode([i for i in ids if i != eos])
    trained.save_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert trained.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)
    for bad in ("yes", 1, None):
        with pytest.raises(ConfigError, match="skip_special_tokens"):
            trained.decode(ids, skip_special_tokens=bad)
    for k in range(20):
        (tmp_path / f"d{k:02d}.txt").write_text(f"hello world {k}")
    store = TokenStore.build(tmp_path / "store", sorted(tmp_path.glob("d*.txt")), trained, progress=False)
    assert store.decode(3, trained) == "hello world 3<|endoftext|>"
    assert store.decode(3, trained, skip_special_tokens=True) == "hello world 3"
    train, val = store.split(0.5, by="doc", seed=0)
    assert val.decode(0, trained, skip_special_tokens=True) + "<|endoftext|>" == val.decode(0, trained)
