"""Exact numbers and honest messages: nothing coerced, wrapped or ignored."""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest

from tokenmill import ConfigError, FormatError, TokenmillError
from tokenmill._io import canonical_hash
from tokenmill.tokenizer.bpe.train import train_bpe
from tokenmill.tokenizer.model import Tokenizer


def _tampered(tmp_path, change) -> str:
    """A tokenizer file edited by ``change(body)``, with its hash recomputed (so only the edit is wrong)."""
    body = Tokenizer.from_merges([(104, 105), (256, 33)], pattern="gpt2", special_tokens=["<eos>"],
                                 merge_counts=[5, 3]).to_dict()
    change(body)
    body.pop("hash")
    body["hash"] = canonical_hash(body)
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(body))
    return str(path)


@pytest.mark.parametrize("change, needle", [
    (lambda b: b["model"].__setitem__("merges", [[1.5, 10], [256, 33]]), "1.5"),
    (lambda b: b["model"].__setitem__("merges", [[True, 105], [256, 33]]), "True"),
    (lambda b: b["model"].__setitem__("merges", [["104", 105], [256, 33]]), "'104'"),
    (lambda b: b["model"].__setitem__("merges", [[2**64, 105], [256, 33]]), "18,446,744,073,709,551,616"),
    (lambda b: b["model"].__setitem__("merges", [[-1, 10], [256, 33]]), "refers to id -1"),
    (lambda b: b["model"].__setitem__("merges", [[104, 105, 3], [256, 33, 1]]), "merges[0] is a JSON array of 3 entries"),
    (lambda b: b["model"].__setitem__("merge_counts", [5]), "merge_counts has 1 entries for 2 merges"),
    (lambda b: b["model"].__setitem__("merge_counts", [5, 2.5]), "2.5"),
    (lambda b: b["special_tokens"].__setitem__("<eos>", "258"), "'258'"),
    (lambda b: b["special_tokens"].__setitem__("<eos>", 2**70), "special token"),
    (lambda b: b.__setitem__("version", True), "version True"),
    (lambda b: b.__setitem__("version", 1.0), "version 1.0"),
])
def test_tokenizer_file_values_are_exact(tmp_path, change, needle):
    path = _tampered(tmp_path, change)
    with pytest.raises(FormatError) as e:
        Tokenizer.load(path)
    assert needle in str(e.value) and "tok.json" in str(e.value)


def test_untampered_file_loads(tmp_path):
    tok = Tokenizer.load(_tampered(tmp_path, lambda b: None))
    assert tok.encode("hi") == [256] and tok.special_tokens == {"<eos>": 258}


def test_merge_messages_name_the_bad_id():
    with pytest.raises(FormatError, match=r"merge 0 = \(-1, 10\) refers to id -1"):
        Tokenizer.from_merges([(-1, 10)])
    with pytest.raises(FormatError, match=r"refers to id 300"):
        Tokenizer.from_merges([(104, 300)])
    with pytest.raises(FormatError, match="merges"):
        Tokenizer.from_merges([(1.5, 10)])


def test_special_tokens_as_one_string_and_lone_surrogates():
    tok = train_bpe(["aaa bbb <eos> aaa"] * 5, 260, special_tokens="<eos>", progress=False)
    assert tok.special_tokens == {"<eos>": 259}
    assert Tokenizer.from_merges([], special_tokens="<eos>").special_tokens == {"<eos>": 256}
    with pytest.raises(ConfigError, match="lone surrogate"):
        Tokenizer.from_merges([], special_tokens=["<\ud800>"])
    with pytest.raises(ConfigError, match="special token"):
        Tokenizer.from_merges([], special_tokens={"<eos>": True})


def test_rank_file_with_a_repeated_token_says_so(tmp_path):
    lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
    lines.append(f"{base64.b64encode(b'a').decode()} 256")
    p = tmp_path / "r.tiktoken"
    p.write_text("\n".join(lines))
    with pytest.raises(FormatError, match="repeats line 98"):
        Tokenizer.from_tiktoken(p)
    lines[-1] = f"{base64.b64encode(b'ab').decode()} 1_0"
    p.write_text("\n".join(lines))
    with pytest.raises(FormatError, match="expected"):
        Tokenizer.from_tiktoken(p)
    with pytest.raises(FormatError, match="not a regular file"):
        Tokenizer.from_tiktoken("/dev/zero")


def test_train_options_are_exact():
    for kw in (dict(vocab_size=300.0), dict(vocab_size=True), dict(vocab_size="300"), dict(min_frequency=1.5),
               dict(vocab_size=2**70)):
        args = {"vocab_size": 300, **kw}
        with pytest.raises(ConfigError):
            train_bpe(["abc abc"], args.pop("vocab_size"), progress=False, **args)


def test_nan_tolerance_never_passes():
    torch = pytest.importorskip("torch")  # noqa: F841 (skips where torch is absent)
    from tokenmill import packing_equivalence
    from tokenmill.torch import TinyCausalLM, TinyConfig

    model = TinyCausalLM(TinyConfig(positions="learned"), seed=0)
    docs = [[1, 5, 6, 2], [1, 7, 2]]
    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(ConfigError, match="atol"):
            packing_equivalence(model, docs, 8, atol=bad)
    with pytest.raises(ConfigError, match="rtol"):
        packing_equivalence(model, docs, 8, rtol=math.nan)


def test_nan_logits_fail_the_comparison():
    torch = pytest.importorskip("torch")
    from tokenmill.verify import _compare

    ref = [torch.zeros(3, 4, dtype=torch.float64)]
    got = [torch.full((3, 4), float("nan"), dtype=torch.float64)]
    worst, bad = _compare(ref, got, 1e-3, 0.0)
    assert bad == 3 and math.isnan(worst)


def test_chunk_and_bm25_arguments():
    from tokenmill import bm25_scores, chunk_stream

    assert bm25_scores([7], [[7], []], k1=0).tolist()[1] == 0.0
    assert not np.isnan(bm25_scores([7], [[], [7, 7]], b=1)).any()
    for bad in (dict(k1=math.nan), dict(b=1.5), dict(k1=-1)):
        with pytest.raises(ConfigError):
            bm25_scores([7], [[7]], **bad)
    with pytest.raises(TokenmillError):
        chunk_stream(10.5, 4)


def test_api_scalars_are_exact():
    from tokenmill import MultiScaleWindows, pack

    tok = Tokenizer.from_merges([(104, 105)], special_tokens=["<eos>"])
    for bad in ([104.7], [True], ["104"]):
        with pytest.raises(ConfigError, match="token id"):
            tok.decode(bad)
    with pytest.raises(ConfigError, match="str"):
        tok.encode(b"hi")
    assert tok.encode("<eos>", allowed_special="<eos>") == [257]  # one token, not its characters
    with pytest.raises(ConfigError, match="window size"):
        MultiScaleWindows([4.5, 8])
    with pytest.raises(ConfigError, match="seed"):
        pack([3], 4, seed=1.5)
    with pytest.raises(ConfigError, match="rank"):
        pack([3, 3], 4).shard(0.5, 2)
