"""HF ``tokenizers``' vocabulary names (``get_vocab``, ``token_to_id``, ``id_to_token``, ``get_vocab_size``,
``len``), transformers' ``convert_*``, tiktoken's KeyError on unknown ids and hashing by content, on every kind
of tokenmill tokenizer, against the anchors themselves: HF ``tokenizers`` on the same tokenizer.json (a
model's own, or tokenmill's export), ``sentencepiece`` on a ``.model``, ``PreTrainedTokenizerFast``, tiktoken
on a rank file. (tiktoken's ``encode_single_token`` and ``decode_with_offsets``: ``test_openai_ranks.py``.)"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tokenizer.test_model_tokenizers import _dir
from tokenmill import Tokenizer, as_tokenizer
from tokenmill.errors import ConfigError, UnknownTokenError

tokenizers = pytest.importorskip("tokenizers")


def assert_names_equal_hf(tok, hf) -> None:
    """Every name on every id and every token string, as HF gives it, with and without added tokens."""
    assert tok.get_vocab() == hf.get_vocab()
    assert tok.get_vocab(with_added_tokens=False) == hf.get_vocab(with_added_tokens=False)
    assert tok.get_vocab_size(with_added_tokens=False) == hf.get_vocab_size(with_added_tokens=False)
    assert [tok.id_to_token(i) for i in range(len(tok) + 3)] == [hf.id_to_token(i) for i in range(len(tok) + 3)]
    strings = list(hf.get_vocab()) + ["", "not a token at all", "<|no such special|>", "Ġ" * 40]
    assert [tok.token_to_id(s) for s in strings] == [hf.token_to_id(s) for s in strings]


@pytest.mark.parametrize("model", ["llama3", "deepseek"])
def test_model_tokenizer_json_names_equal_hf(model):
    """Llama 3's and DeepSeek V3's tokenizer.json (DeepSeek holds its three specials in its model's
    vocabulary at ids 0-2, where tokenmill's vocabulary has no bytes: they count as vocabulary tokens)."""
    d = _dir(f"TOKENMILL_{model.upper()}_DIR", model, "tokenizer.json")
    tok, hf = Tokenizer.from_huggingface(d), tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    assert_names_equal_hf(tok, hf)
    assert len(tok) == tok.vocab_size == tok.get_vocab_size() == hf.get_vocab_size()  # dense ids: as HF counts


def test_exported_rank_files_tekken_and_trained_tokenizers_names_equal_hf(gpt2_ranks_path, tmp_path):
    from tokenmill import train_bpe

    trained = train_bpe(["hello world, hello there; the cat sat on the mat. 数字 12345"] * 20, vocab_size=280,
                        pattern="gpt4", special_tokens=["<|endoftext|>", "<|pad|>"], progress=False)
    tekken = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tekken_240911.json") / "tekken_240911.json"
    for name, tok in (("gpt2", Tokenizer.from_tiktoken(gpt2_ranks_path)), ("trained", trained),
                      ("tekken", Tokenizer.from_tekken(tekken))):  # (tekken: 1,000 special ids first)
        tok.save_huggingface(tmp_path / f"{name}.json")
        hf = tokenizers.Tokenizer.from_file(str(tmp_path / f"{name}.json"))
        assert_names_equal_hf(tok, hf)
        assert len(tok) == hf.get_vocab_size()
    gpt2 = Tokenizer.from_tiktoken(gpt2_ranks_path)
    assert gpt2.token_to_id("Ġthe") == 262 and gpt2.id_to_token(262) == "Ġthe" and gpt2.token_bytes(262) == b" the"
    assert gpt2.token_to_id("<|endoftext|>") == 50256 and gpt2.id_to_token(50257) is None
    with pytest.raises(ConfigError, match="encode_single_token"):
        gpt2.token_to_id(b" the")


def test_ids_with_gaps_count_the_id_range_where_hf_counts_entries(tmp_path):
    """cl100k's specials sit after unassigned ids: HF's count (100,261) is below its largest id (100,276),
    tokenmill's ``len`` and ``get_vocab_size`` are the id range, so an embedding of that size holds every id."""
    path = _dir("TOKENMILL_OPENAI_DIR", "openai", "cl100k_base.tiktoken") / "cl100k_base.tiktoken"
    tok = Tokenizer.from_tiktoken(path)
    tok.save_huggingface(tmp_path / "cl100k.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "cl100k.json"))
    assert tok.get_vocab() == hf.get_vocab()  # the same tokens and ids
    assert hf.get_vocab_size() == 100_261 < max(hf.get_vocab().values()) + 1 == 100_277
    assert len(tok) == tok.get_vocab_size() == tok.n_vocab == 100_277
    assert tok.id_to_token(100_256) is None is hf.id_to_token(100_256)  # the gap
    assert tok.get_vocab_size(with_added_tokens=False) == 100_256


def _mistral_models() -> list:
    d = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1")
    return [d / "tokenizer.model.v1", d / "mistral_instruct_tokenizer_240323.model.v3"]


def test_sentencepiece_names_equal_sentencepiece_and_hf(tmp_path):
    """A ``.model``: every piece as sentencepiece spells it; its tokenizer.json export read by HF and by tokenmill
    (``SentencePieceJsonTokenizer``) gives the same names."""
    spm = pytest.importorskip("sentencepiece")
    for k, path in enumerate(_mistral_models()):
        tok, sp = as_tokenizer(path), spm.SentencePieceProcessor(model_file=str(path))
        assert tok.get_vocab() == {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        assert len(tok) == sp.get_piece_size()
        assert tok.token_to_id("</s>") == sp.piece_to_id("</s>") == 2 and tok.id_to_token(2) == "</s>"
        assert tok.token_to_id("not a piece") is None  # (sentencepiece gives the unknown id; HF None)
        with warnings.catch_warnings():  # (v3's user-defined pieces: the export warns, as tested elsewhere)
            warnings.simplefilter("ignore", UserWarning)
            tok.save_huggingface(tmp_path / f"{k}.json")
        hf = tokenizers.Tokenizer.from_file(str(tmp_path / f"{k}.json"))
        back = Tokenizer.from_huggingface(tmp_path / f"{k}.json")
        assert type(back).__name__ == "SentencePieceJsonTokenizer"
        assert_names_equal_hf(tok, hf)
        assert_names_equal_hf(back, hf)


def test_an_id_that_holds_no_token_is_a_key_error_as_tiktoken_raises(gpt2_ranks_path, tmp_path):
    """tiktoken's ``decode`` raises a KeyError on an id it has no token for; tokenmill's error is one too (and
    still a ConfigError), its message unquoted and naming the id, for every kind of tokenizer."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding("gpt2", pat_str=Tokenizer.from_tiktoken(gpt2_ranks_path).pattern,
                            mergeable_ranks=load_tiktoken_bpe(str(gpt2_ranks_path)), special_tokens={})
    with pytest.raises(KeyError):
        enc.decode([60_000])
    gpt2 = Tokenizer.from_tiktoken(gpt2_ranks_path)
    path = _mistral_models()[0]
    sp = as_tokenizer(path)
    sp.save_huggingface(tmp_path / "sp.json")
    sp_json = Tokenizer.from_huggingface(tmp_path / "sp.json")
    for tok in (gpt2, sp, sp_json):
        bad = len(tok) + 7
        for ids in ([bad], [5] * 40 + [bad]):  # (short lists are joined in Python, long ones compiled)
            for call in (tok.decode, tok.decode_bytes):
                with pytest.raises(KeyError) as e:
                    call(ids)
                assert isinstance(e.value, UnknownTokenError) and isinstance(e.value, ConfigError)
                assert str(e.value).startswith(f"token id {bad:,d} ") or str(e.value).startswith(f"token id {bad} ")
        with pytest.raises(KeyError):
            tok.token_bytes(bad)
        # past int64 too (a ConfigError alone had not been a KeyError), from lists and uint64 arrays
        for ids in ([2**63], [2**64], [-2**63 - 1], np.array([2**63 + 5], np.uint64)):
            with pytest.raises(KeyError, match=r"is out of range \(past int64, where no vocabulary reaches\)"):
                tok.decode(ids)
    cl100k = _dir("TOKENMILL_OPENAI_DIR", "openai", "cl100k_base.tiktoken") / "cl100k_base.tiktoken"
    with pytest.raises(KeyError, match="holds no token"):  # an id in the gap before cl100k's specials
        Tokenizer.from_tiktoken(cl100k).decode([100_256])


def test_tokenizers_are_hashable_by_content(gpt2_ranks_path):
    """``==`` compares content; ``hash`` agrees with it, so a tokenizer keys a dict or ``functools.cache``."""
    a, b = Tokenizer.from_tiktoken(gpt2_ranks_path), Tokenizer.from_tiktoken(gpt2_ranks_path)
    c = Tokenizer.from_tiktoken(gpt2_ranks_path, special_tokens={})
    assert a == b and hash(a) == hash(b) and a != c
    assert len({a: 1, b: 2, c: 3}) == 2

    @functools.cache
    def count(tok, text):
        return len(tok.encode(text))

    assert count(a, "hello world") == count(b, "hello world") == 2 and count.cache_info().hits == 1


def test_transformers_names_equal_a_fast_tokenizer_of_the_same_file(tmp_path):
    """``convert_tokens_to_ids`` / ``convert_ids_to_tokens`` as transformers' ``PreTrainedTokenizerFast`` gives
    them on the same tokenizer.json: Llama 3's (no unknown token: None) and a SentencePiece export (its
    ``<unk>``'s id for a string no token spells)."""
    transformers = pytest.importorskip("transformers")
    d = _dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json")
    sp = as_tokenizer(_mistral_models()[0])
    sp.save_huggingface(tmp_path / "sp.json")
    for tok, path, unk in ((Tokenizer.from_huggingface(d), d / "tokenizer.json", None),
                           (sp, tmp_path / "sp.json", "<unk>"),
                           (Tokenizer.from_huggingface(tmp_path / "sp.json"), tmp_path / "sp.json", "<unk>")):
        fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path), unk_token=unk)
        strings = ["<|begin_of_text|>", "Ġthe", "▁the", "</s>", "not a token at all", ""]
        for s in strings:
            assert tok.convert_tokens_to_ids(s) == fast.convert_tokens_to_ids(s), (path, s)
        assert tok.convert_tokens_to_ids(strings) == fast.convert_tokens_to_ids(strings)
        ids = list(range(0, len(tok), 997)) + [1, 2, len(tok) - 1]
        assert tok.convert_ids_to_tokens(ids) == fast.convert_ids_to_tokens(ids)
        assert tok.convert_ids_to_tokens(ids[3]) == fast.convert_ids_to_tokens(ids[3])
        assert tok.convert_ids_to_tokens(np.array(ids)) == fast.convert_ids_to_tokens(ids)  # (an array's ids too)
        assert tok.convert_ids_to_tokens(np.int64(ids[3])) == fast.convert_ids_to_tokens(ids[3])
        special = sorted(tok.special_tokens.values())[:2]
        assert tok.convert_ids_to_tokens(special + [ids[3]], skip_special_tokens=True) == [tok.id_to_token(ids[3])]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(st.sampled_from(list("abcab c\n中文é🙂1")), min_size=1, max_size=40), min_size=1, max_size=8),
       st.integers(0, 40), st.integers(0, 2))
def test_trained_tokenizers_names_equal_hf_on_their_export(texts, extra, n_special):
    """Any trained tokenizer (merges of multi-byte characters, whitespace and digits; 0-2 special tokens): its
    names equal HF's on its own tokenizer.json export, every id and every string. (A tokenizer two of whose
    merges made the same bytes has no tokenizer.json form; its names are checked against its own ids.)"""
    import tempfile

    from tokenmill import train_bpe

    specials = ["<|endoftext|>", "<|pad|>"][:n_special]
    with warnings.catch_warnings():  # (training may stop early: fewer merges than asked)
        warnings.simplefilter("ignore", UserWarning)
        tok = train_bpe(texts, vocab_size=256 + n_special + extra, pattern="gpt4", special_tokens=specials,
                        progress=False)
    strings = [tok.id_to_token(i) for i in range(len(tok))]
    assert None not in strings and all(tok.token_to_id(s) <= i for i, s in enumerate(strings))
    assert len(tok.get_vocab()) == len(set(strings))
    with tempfile.TemporaryDirectory() as d:
        try:
            tok.save_huggingface(f"{d}/t.json")
        except ConfigError as e:
            assert "have the same bytes" in str(e)
            return
        assert_names_equal_hf(tok, tokenizers.Tokenizer.from_file(f"{d}/t.json"))


def test_sentencepiece_tokenizers_compare_and_hash_by_content_and_load_from_bytes():
    """A ``.model`` tokenizer compared and hashed by identity (two loads of one file were unequal, a pickled copy
    too), where the byte-level Tokenizer goes by content; its file's bytes gave 'stat: embedded null character'."""
    import pickle

    d = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1")
    path = d / "tokenizer.model.v1"
    a, b = Tokenizer.from_sentencepiece(path), Tokenizer.from_sentencepiece(path.read_bytes())
    assert a == b and hash(a) == hash(b) and pickle.loads(pickle.dumps(a)) == a
    assert a.encode("Hello world") == b.encode("Hello world")
    assert a != Tokenizer.from_sentencepiece(d / "mistral_instruct_tokenizer_240323.model.v3")
    with pytest.raises(Exception, match="<bytes>"):
        Tokenizer.from_sentencepiece(b"\0not a model")
