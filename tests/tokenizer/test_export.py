"""Exports: Hugging Face tokenizers and tiktoken load our files and give the same ids."""

import pytest

from tests.conftest import corpus_sample
from tests.tokenizer.test_tokenizer import TEXTS
from tokenmill import Tokenizer, train_bpe


@pytest.fixture(scope="module")
def trained():
    from tokenmill.corpus import default_corpus

    return train_bpe(default_corpus(docstrings=False), 1200, special_tokens=["<|endoftext|>"])


def test_huggingface_export_same_ids(trained, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    trained.save_huggingface(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert hf.get_vocab_size() == trained.vocab_size
    for text in TEXTS + ["a<|endoftext|>b"]:
        ours = trained.encode(text, allowed_special="all")
        assert hf.encode(text, add_special_tokens=False).ids == ours
        assert hf.decode(ours, skip_special_tokens=False) == text


def test_tiktoken_export_same_ids(trained, tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    path = tmp_path / "tok.tiktoken"
    trained.save_tiktoken(path)
    enc = tiktoken.Encoding("t", pat_str=trained.pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens=trained.special_tokens)
    again = Tokenizer.from_tiktoken(path, pattern=trained.pattern, special_tokens=trained.special_tokens)
    for text in TEXTS:
        assert enc.encode(text) == trained.encode(text) == again.encode(text)


@pytest.mark.corpus
def test_exports_agree_on_real_text(trained, corpora, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    trained.save_huggingface(tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    for script in ("en", "zh", "multi", "code"):
        for text in corpus_sample(corpora, script, 300_000, stride=11):
            assert hf.encode(text, add_special_tokens=False).ids == trained.encode_ordinary(text)
