"""Every tokenizer file a user gives passes one strict schema layer (``tokenmill._schema``,
``tokenizer/schemas.py``) before any of its values is used: exact types, ids bounded by the file's own
size, no stack exhaustion, and only tokenmill's own errors out of any file, however damaged."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import time
from pathlib import Path

import pytest

from tokenmill import Tokenizer, TokenmillError, as_tokenizer
from tokenmill._io import canonical_hash
from tokenmill.errors import FormatError
from tokenmill.tokenizer.formats import conversion_cache
from tokenmill.tokenizer.formats import huggingface as hf_mod

BYTES = [bytes([i]) for i in range(256)]
DEEP = 100_000


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Conversions of the damaged files are cached in this test's folder, not the user's cache."""
    d = tmp_path / "cache"
    monkeypatch.setattr(conversion_cache, "cache_file", lambda key: d / f"{key}.npz")


def _small() -> Tokenizer:
    return Tokenizer.from_merges([(104, 105)], special_tokens=["<|endoftext|>"])


def _write(path: Path, body) -> Path:
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def _rehashed(body: dict) -> dict:
    body = dict(body)
    body.pop("hash", None)
    body["hash"] = canonical_hash(body)
    return body


@pytest.fixture
def hf_body(tmp_path) -> dict:
    _small().save_huggingface(tmp_path / "hf.json")
    return json.loads((tmp_path / "hf.json").read_text())


@pytest.fixture
def v2_body(tmp_path, hf_body) -> dict:
    """A version-2 tokenmill file (model "bpe", HF added tokens): a tokenizer.json import saved."""
    Tokenizer.from_huggingface(_write(tmp_path / "src.json", hf_body)).save(tmp_path / "v2.json")
    body = json.loads((tmp_path / "v2.json").read_text())
    assert body["version"] == 2 and body["model"]["type"] == "bpe"
    return body


def _tekken_body(tokens=BYTES + [b"hi"], n_special=3, specials=None) -> dict:
    body = {"config": {"pattern": r"\w+|\s+|[^\w\s]+", "num_vocab_tokens": len(tokens),
                       "default_vocab_size": len(tokens) + n_special, "default_num_special_tokens": n_special,
                       "version": "v3"},
            "vocab": [{"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None}
                      for i, t in enumerate(tokens)]}
    if specials is not None:
        body["special_tokens"] = specials
    return body


def _rank_lines(tokens=BYTES + [b"hi"]) -> list[str]:
    return [f"{base64.b64encode(t).decode()} {i}" for i, t in enumerate(tokens)]


# ----------------------------------------------------------------------------- 1. no coercion to bool
def test_bool_fields_written_as_strings_are_refused(tmp_path, hf_body, v2_body):
    body = json.loads(json.dumps(hf_body))
    body["added_tokens"][0]["special"] = "false"
    with pytest.raises(FormatError, match=r"added_tokens\[0\]\.special = 'false': expected bool, got str"):
        Tokenizer.from_huggingface(_write(tmp_path / "a.json", body))
    body = json.loads(json.dumps(hf_body))
    body["model"]["ignore_merges"] = "false"
    with pytest.raises(FormatError, match=r"model\.ignore_merges = 'false': expected bool \| null, got str") as e:
        Tokenizer.from_huggingface(_write(tmp_path / "b.json", body))
    assert "b.json" in str(e.value)
    # tokenmill's own version-2 file: the same fields, hash recomputed so that only the edit is wrong
    for edit, path in [(lambda b: b["model"].update(ignore_merges="false"), r"model\.ignore_merges"),
                       (lambda b: b["added_tokens"][0].update(special="false"), r"added_tokens\[0\]\.special"),
                       (lambda b: b.update(add_prefix_space="false"), "add_prefix_space"),
                       (lambda b: b["added_tokens"][0].update(id="257"), r"added_tokens\[0\]\.id")]:
        body = json.loads(json.dumps(v2_body))
        edit(body)
        with pytest.raises(FormatError, match=path + " = '"):
            Tokenizer.load(_write(tmp_path / "v2.json", _rehashed(body)))


def test_a_vocabulary_entry_at_fault_is_named(tmp_path, hf_body):
    body = json.loads(json.dumps(hf_body))
    body["model"]["vocab"]["hi"] = True
    with pytest.raises(FormatError, match=r"model\.vocab\['hi'\] = true: expected"):
        Tokenizer.from_huggingface(_write(tmp_path / "t.json", body))


# ----------------------------------------------------------------------------- 2. deep nesting
@pytest.mark.parametrize("component", ["pre_tokenizer", "normalizer"])
def test_deeply_nested_sequences_are_a_format_error(tmp_path, hf_body, component):
    key, leaf = (("pretokenizers", '{"type": "ByteLevel"}') if component == "pre_tokenizer"
                 else ("normalizers", '{"type": "NFC"}'))
    nested = f'{{"type": "Sequence", "{key}": [' * DEEP + leaf + "]}" * DEEP
    text = json.dumps(dict(hf_body, **{component: "@@"})).replace('"@@"', nested)
    path = _write(tmp_path / "tokenizer.json", text)
    with pytest.raises(FormatError, match="nests JSON too deeply"):
        Tokenizer.from_huggingface(path)
    with pytest.raises(FormatError, match="nests JSON too deeply"):
        as_tokenizer(path)


def test_nested_sequences_within_reach_still_load_or_are_refused_by_name(tmp_path, hf_body):
    body = json.loads(json.dumps(hf_body))
    inner = {"type": "NFC"}
    for _ in range(50):
        inner = {"type": "Sequence", "normalizers": [inner]}
    body["normalizer"] = inner
    assert Tokenizer.from_huggingface(_write(tmp_path / "n.json", body)).encode("hi") == [256]
    body["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [body["pre_tokenizer"]]}
    with pytest.raises(FormatError, match="a pre-tokenizer Sequence inside the pre-tokenizer Sequence"):
        Tokenizer.from_huggingface(_write(tmp_path / "p.json", body))


# ----------------------------------------------------------------------------- 3. ids bounded by the file
@pytest.mark.parametrize("big", [2**27, 2**62])
def test_a_huge_vocabulary_id_is_refused_before_allocating(tmp_path, hf_body, big):
    body = json.loads(json.dumps(hf_body))
    body["model"]["vocab"]["zz"] = big
    path = _write(tmp_path / "tokenizer.json", body)
    assert path.stat().st_size < 6000
    t = time.perf_counter()
    with pytest.raises(FormatError, match=r"model\.vocab\['zz'\]") as e:
        Tokenizer.from_huggingface(path)
    assert time.perf_counter() - t < 2
    assert ("file's size" in str(e.value)) if big < 2**31 else ("2147483647" in str(e.value) or "2**31" in str(e.value))


def test_huge_ids_in_tokenmill_files_are_refused(tmp_path, v2_body):
    v1 = _small().to_dict()
    v1["special_tokens"]["<|endoftext|>"] = 2**27
    with pytest.raises(FormatError, match=r"special_tokens\['<\|endoftext\|>'\] = 134,217,728.*file's size"):
        Tokenizer.load(_write(tmp_path / "v1.json", _rehashed(v1)))
    body = json.loads(json.dumps(v2_body))
    body["added_tokens"][0]["id"] = 2**27
    with pytest.raises(FormatError, match=r"added_tokens\[0\]\.id = 134,217,728.*file's size"):
        Tokenizer.load(_write(tmp_path / "v2.json", _rehashed(body)))
    # a dict that is no file's (a worker's copy of a tokenizer in memory) is bounded as every tokenizer is:
    # special ids within 2**20 of the vocabulary (tables are sized by the largest id; 2**31 - 1 took the
    # process's memory at the first encode)
    with pytest.raises(TokenmillError, match=r"id=134,217,728 is out of range"):
        Tokenizer.from_dict(_rehashed(v1))
    v1["special_tokens"]["<|endoftext|>"] = 2**20
    assert Tokenizer.from_dict(_rehashed(v1)).special_tokens == {"<|endoftext|>": 2**20}


def test_huge_ids_in_rank_and_tekken_files_are_refused(tmp_path):
    lines = _rank_lines()
    lines[-1] = f"{base64.b64encode(b'hi').decode()} 60000"
    path = _write(tmp_path / "r.tiktoken", "\n".join(lines))
    with pytest.raises(FormatError, match=r"r\.tiktoken:257: rank 60,000: it is not below the file's size"):
        Tokenizer.from_tiktoken(path)
    lines[-1] = f"{base64.b64encode(b'hi').decode()} {2**31}"
    with pytest.raises(FormatError, match=r":257: rank 2,147,483,648: ranks must be below 2\*\*31 - 1"):
        Tokenizer.from_tiktoken(_write(tmp_path / "r.tiktoken", "\n".join(lines)))
    body = _tekken_body(n_special=2**20)
    with pytest.raises(FormatError, match=r"config\.default_num_special_tokens = 1,048,576.*file's size"):
        Tokenizer.from_tekken(_write(tmp_path / "t.json", body))


def test_repeated_ids_are_refused_where_the_format_forbids_them(tmp_path, hf_body):
    lines = _rank_lines() + [f"{base64.b64encode(b'ab').decode()} 5"]
    with pytest.raises(FormatError, match=r":258: rank 5 repeats line 6"):
        Tokenizer.from_tiktoken(_write(tmp_path / "r.tiktoken", "\n".join(lines)))
    body = json.loads(json.dumps(hf_body))
    body["model"]["vocab"]["zz"] = body["model"]["vocab"]["hi"]
    with pytest.raises(FormatError, match="gives id 256 to both 'hi' and 'zz'"):
        Tokenizer.from_huggingface(_write(tmp_path / "t.json", body))
    ranks = Tokenizer.from_ranks({**{b: i for i, b in enumerate(BYTES)}, b"hi": 256}).to_dict()
    ranks["model"]["tokens"][256] = ranks["model"]["tokens"][5]
    with pytest.raises(FormatError, match=r"model\.tokens\[256\] repeats the token"):
        Tokenizer.load(_write(tmp_path / "own.json", _rehashed(ranks)))


def test_rank_file_lines_are_strict(tmp_path):
    for bad in ["aGk=  256", "aGk=\t256", "aGk= 256 ", "aGk= +256", "aGk= 2_56", "aGk 256", "aGk= -1"]:
        lines = _rank_lines()[:256] + [bad]
        with pytest.raises(FormatError, match=":257: expected '<base64 token> <rank>'"):
            Tokenizer.from_tiktoken(_write(tmp_path / "r.tiktoken", "\n".join(lines)))
    ok = _write(tmp_path / "ok.tiktoken", "\r\n".join(_rank_lines()) + "\r\n\n")
    assert Tokenizer.from_tiktoken(ok, pattern="gpt2").encode("hi") == [256]
    # the checks of the ranks as a whole name the file too
    for name, body, says in (("blank.tiktoken", "\n", "holds no tokens"),
                             ("gap.tiktoken", "\n".join(_rank_lines()[1:]), "lacks single-byte tokens")):
        path = _write(tmp_path / name, body)
        with pytest.raises(FormatError, match=f"^{re.escape(str(path))}: .*{says}"):
            Tokenizer.from_tiktoken(path, pattern="gpt2")


# ----------------------------------------------------------------------------- 4. nothing else escapes
DEEP_LIST: list = []
for _ in range(100):
    DEEP_LIST = [DEEP_LIST]
MUTATIONS = ["x", True, 1.5, -1, 2**62, None, [], {}, DEEP_LIST]
DELETE = object()


def _paths(obj, prefix=()):
    """Every field path of a JSON value; in a container of more than 8 entries, 6 of them (the first
    three, the middle one, the last two): deterministic, and bounded for real vocabularies."""
    if isinstance(obj, dict):
        keys = list(obj)
    elif isinstance(obj, list):
        keys = list(range(len(obj)))
    else:
        return
    if len(keys) > 8:
        n = len(keys)
        keys = [keys[i] for i in sorted({0, 1, 2, n // 2, n - 2, n - 1})]
    for k in keys:
        yield prefix + (k,)
        yield from _paths(obj[k], prefix + (k,))


def _mutated(body, path, value):
    body = json.loads(json.dumps(body))
    parent = body
    for k in path[:-1]:
        parent = parent[k]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return body


def _must_load_or_refuse(load, path: Path, what: str) -> None:
    try:
        tok = load(path)
    except TokenmillError:
        return
    except BaseException as e:  # noqa: BLE001 (any escape is the failure this test reports)
        raise AssertionError(f"{what}: {type(e).__name__} escaped: {e}") from e
    try:  # what loaded must also work
        ids = tok.encode_python("hi there", allowed_special="all")
        tok.decode(ids)
        tok.to_dict()
    except TokenmillError:
        pass
    except BaseException as e:  # noqa: BLE001 (any escape is the failure this test reports)
        raise AssertionError(f"{what}: loaded, then {type(e).__name__}: {e}") from e


def _small_real_hf(path: Path, keep: int = 400) -> dict:
    """A real tokenizer.json cut to its first ``keep`` ids plus every byte token, renumbered, with its
    merges among them and 4 of its added tokens (normalizer, pre-tokenizer, decoder as they are)."""
    from tokenmill.tokenizer.formats.export import bytes_to_unicode

    body = json.loads(path.read_text(encoding="utf-8"))
    singles = set(bytes_to_unicode().values())
    vocab = body["model"]["vocab"]
    kept = sorted((i, s) for s, i in vocab.items() if i < keep or s in singles)
    new = {s: j for j, (_, s) in enumerate(kept)}
    merges = [m for m in body["model"]["merges"]
              if all(x in new for x in ((*m.split(" "), m.replace(" ", "")) if isinstance(m, str)
                                        else (*m, "".join(m))))]
    body["model"]["vocab"], body["model"]["merges"] = new, merges[:300]
    body["added_tokens"] = [dict(t, id=len(new) + k) for k, t in enumerate(body["added_tokens"][:4])]
    return body


def _small_real_tekken(path: Path, keep: int = 300) -> dict:
    body = json.loads(path.read_text(encoding="utf-8"))
    body["vocab"] = body["vocab"][:keep]
    body["config"]["default_vocab_size"] = body["config"]["default_num_special_tokens"] + keep
    return body


def _env_file(var: str, name: str) -> Path | None:
    d = os.environ.get(var)
    p = Path(d) / name if d else None
    return p if p is not None and p.is_file() else None


def _json_cases(tmp_path, hf_body, v2_body):
    """(name, body, loader, rehash) for every JSON kind of tokenizer file, small and, where present, real."""
    cases = [
        ("tokenmill v1 merges", _small().to_dict(), Tokenizer.load, True),
        ("tokenmill v1 ranks", Tokenizer.from_ranks({**{b: i for i, b in enumerate(BYTES)}, b"hi": 256},
                                                    special_tokens={"<|endoftext|>": 257}).to_dict(),
         Tokenizer.load, True),
        ("tokenmill v2 bpe", v2_body, Tokenizer.load, True),
        ("tokenizer.json", hf_body, Tokenizer.from_huggingface, False),
        ("tekken.json", _tekken_body(specials=[{"rank": 1, "token_str": "<s>", "is_control": True}]),
         Tokenizer.from_tekken, False),
    ]
    for var, name in [("TOKENMILL_LLAMA3_DIR", "tokenizer.json"), ("TOKENMILL_DEEPSEEK_DIR", "tokenizer.json")]:
        p = _env_file(var, name)
        if p is not None:
            cases.append((f"{var} {name}", _small_real_hf(p), Tokenizer.from_huggingface, False))
    p = _env_file("TOKENMILL_MISTRAL_DIR", "tekken_240911.json")
    if p is not None:
        cases.append(("tekken_240911.json", _small_real_tekken(p), Tokenizer.from_tekken, False))
    return cases


def test_every_field_mutated_loads_or_raises_a_tokenmill_error(tmp_path, hf_body, v2_body):
    loads = 0
    for name, body, load, rehash in _json_cases(tmp_path, hf_body, v2_body):
        _must_load_or_refuse(load, _write(tmp_path / "base.json", body), f"{name} as written")
        for path in list(_paths(body)):
            for value in MUTATIONS + [DELETE]:
                changed = _mutated(body, path, value)
                if rehash and path != ("hash",):
                    changed = _rehashed(changed)
                f = _write(tmp_path / "m.json", changed)
                shown = "deleted" if value is DELETE else ("a 100-deep list" if value is DEEP_LIST else repr(value))
                _must_load_or_refuse(load, f, f"{name}: {'.'.join(map(str, path))} = {shown}")
                loads += 1
    assert loads > 1000
    # (~8 s on a laptop core; a damaged file that made tokenmill loop would hit the suite's per-test timeout: a
    # wall-clock bound here failed a CI run on a loaded machine, 45.7 s for 45)


def _rank_cases():
    cases = [("rank file", _rank_lines())]
    for var, name in [("TOKENMILL_GPT2_RANKS", None), ("TOKENMILL_QWEN_DIR", "qwen.tiktoken"),
                      ("TOKENMILL_LLAMA3_DIR", "tokenizer.model")]:
        raw = os.environ.get(var)
        p = Path(raw) if raw and name is None else _env_file(var, name) if name else None
        if p is not None and p.is_file():
            cases.append((str(p), p.read_text(encoding="ascii").splitlines()[:300]))
    return cases


RANK_VALUES = ["x", "true", "1.5", "-1", str(2**62), "null", "[]", "{}", "[" * 100 + "]" * 100, ""]


def test_every_rank_file_line_mutated_loads_or_raises_a_tokenmill_error(tmp_path):
    for name, lines in _rank_cases():
        n = len(lines)
        for i in sorted({0, 1, 2, n // 2, n - 2, n - 1}):
            token, rank = lines[i].split(" ")
            variants = [f"{v} {rank}" for v in RANK_VALUES] + [f"{token} {v}" for v in RANK_VALUES]
            variants += [None, f"{token}\t{rank}", f"{token}  {rank}", token, lines[0], "\0\xff"]
            for v in variants:
                changed = lines[:i] + ([] if v is None else [v]) + lines[i + 1:]
                path = tmp_path / "m.tiktoken"
                path.write_text("\n".join(changed), encoding="utf-8")
                for load in (lambda p: Tokenizer.from_tiktoken(p, pattern="gpt2"),
                             lambda p: as_tokenizer(p, pattern="gpt2")):
                    _must_load_or_refuse(load, path, f"{name} line {i + 1} = {v!r}")


GARBAGE = {
    "not JSON": b"{ this is not json",
    "random bytes": random.Random(7).randbytes(3000),
    "empty": b"",
    "parquet": b"PAR1\x15\x04\x15\x10\x15\x14L\x15\x02\x15\x00\x12\x00\x00" + bytes(range(256)) + b"PAR1",
    "text": b"hello world\nthis is a text file\n",
    "JSON list": b"[1, 2, 3]",
}


@pytest.mark.parametrize("kind", list(GARBAGE))
def test_garbage_is_a_format_error_from_every_loader(tmp_path, kind):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(GARBAGE[kind])
    for load in (Tokenizer.load, Tokenizer.from_huggingface, Tokenizer.from_tekken,
                 lambda p: Tokenizer.from_tiktoken(p, pattern="gpt2"), as_tokenizer,
                 lambda p: as_tokenizer(p, pattern="gpt2")):
        with pytest.raises(TokenmillError):
            load(path)


@pytest.mark.parametrize("kind, says", [
    ("not JSON", "is not valid JSON"),
    ("random bytes", "is a binary file"),
    ("parquet", "is a Parquet file"),
    ("empty", "is empty"),
    ("text", "is neither JSON nor a rank file"),
    ("JSON list", "not a Hugging Face tokenizer.json"),
])
def test_as_tokenizer_says_what_a_corrupt_file_is(tmp_path, kind, says):
    path = tmp_path / "tok.bin"
    path.write_bytes(GARBAGE[kind])
    with pytest.raises(FormatError) as e:
        as_tokenizer(path)
    assert says in str(e.value) and "give its split pattern" not in str(e.value)
    assert str(path) in str(e.value)
    if kind != "not JSON" and kind != "JSON list":
        assert "expected a tokenmill tokenizer file" in str(e.value)
    with pytest.raises(FormatError, match=says):
        as_tokenizer(path, pattern="gpt2")  # a pattern does not make it a rank file


def test_cli_tokenizer_option_says_what_a_corrupt_file_is(tmp_path, capsys):
    from tokenmill.cli import main

    path = tmp_path / "tok.bin"
    path.write_bytes(GARBAGE["random bytes"])
    assert main(["encode", "--tokenizer", str(path), "hello"]) == 1
    err = capsys.readouterr().err
    assert "is a binary file" in err and "give its split pattern" not in err


def test_real_files_pass_the_schemas():
    """The real Llama 3, DeepSeek and tekken files pass the schemas (where present; the tokenizer tests
    load them in full and compare ids with their reference libraries)."""
    from tokenmill.tokenizer.formats.tekken import read_tekken

    found = 0
    for var in ("TOKENMILL_LLAMA3_DIR", "TOKENMILL_DEEPSEEK_DIR"):
        p = _env_file(var, "tokenizer.json")
        if p is not None:
            spec = hf_mod.read_tokenizer_json(p.read_bytes(), str(p))
            assert len(spec.model.vocab) > 100_000 and spec.added_tokens
            found += 1
    p = _env_file("TOKENMILL_MISTRAL_DIR", "tekken_240911.json")
    if p is not None:
        ranks, pattern, specials = read_tekken(p, p.read_bytes())
        assert len(ranks) > 100_000 and len(specials) == 1000
        found += 1
    if not found:
        pytest.skip("no real tokenizer files (TOKENMILL_LLAMA3_DIR, TOKENMILL_DEEPSEEK_DIR, TOKENMILL_MISTRAL_DIR)")


def test_a_small_tokenizer_with_a_high_special_id_round_trips(tmp_path):
    """Below 2**20 ids, the file-size bound never refuses what tokenmill itself saved."""
    from tokenmill import Tokenizer

    tok = Tokenizer.from_merges([(104, 105)], special_tokens={"<|eot|>": 100_000})
    tok.save(tmp_path / "t.json")
    assert (tmp_path / "t.json").stat().st_size < 100_000
    back = Tokenizer.load(tmp_path / "t.json")
    assert back.special_tokens == {"<|eot|>": 100_000} and back.encode("hi<|eot|>", allowed_special="all") == [256, 100_000]


def test_a_reader_handed_another_formats_file_names_the_reader_it_wants(tmp_path):
    """``Tokenizer.load`` of a tokenizer.json read "not a tokenmill tokenizer file", of a rank file "not
    valid JSON ...: write it again" (wrong advice: nothing is corrupted). Each reader now names the file's
    format and the call that reads it; a damaged file of its own format keeps its own error."""
    from tokenmill.tokenizer.formats.sentencepiece import NORMAL, UNKNOWN, write_model_proto

    tok = _small()
    files = {"tokenmill": tmp_path / "tok.json", "huggingface": tmp_path / "tokenizer.json",
             "tiktoken": tmp_path / "ranks.tiktoken", "tekken": _write(tmp_path / "tekken.json", _tekken_body()),
             "sentencepiece": tmp_path / "sp.model"}
    tok.save(files["tokenmill"])
    tok.save_huggingface(files["huggingface"])
    tok.save_tiktoken(files["tiktoken"])
    files["sentencepiece"].write_bytes(write_model_proto([("<unk>", 0, UNKNOWN), ("a", -1, NORMAL), ("b", -2, NORMAL)]))
    readers = {"tokenmill": (Tokenizer.load, "Tokenizer.load(path)"),
               "huggingface": (Tokenizer.from_huggingface, "Tokenizer.from_huggingface(path)"),
               "tiktoken": (lambda p: Tokenizer.from_tiktoken(p, pattern="gpt2"), "Tokenizer.from_tiktoken(path"),
               "tekken": (Tokenizer.from_tekken, "Tokenizer.from_tekken(path)"),
               "sentencepiece": (Tokenizer.from_sentencepiece, "Tokenizer.from_sentencepiece(path)")}
    for want, (read, _) in readers.items():
        read(files[want])  # each file reads with its own reader
        for kind, path in files.items():
            if kind == want:
                continue
            with pytest.raises(FormatError) as e:
                read(path)
            msg = str(e.value)
            assert msg.startswith(f"{path}: ") and readers[kind][1] in msg and "as_tokenizer(path)" in msg, (want, msg)
            assert "write it again" not in msg and "corrupted" not in msg
    # a damaged file of the reader's own format: its own error, no redirection
    files["tokenmill"].write_text(files["tokenmill"].read_text()[:-20])
    with pytest.raises(FormatError, match="not valid JSON") as e:
        Tokenizer.load(files["tokenmill"])
    assert "as_tokenizer" not in str(e.value)
    with pytest.raises(FormatError, match="not valid JSON"):
        Tokenizer.load(_write(tmp_path / "notes.txt", "a text file\n"))  # no format's: as before
    # its format field damaged: still tokenmill's (it was taken for a tokenizer.json, whose reader then failed)
    tok.save(files["tokenmill"])
    files["tokenmill"].write_text(files["tokenmill"].read_text().replace('"tokenmill.tokenizer"', '"tokenmill.tokenizeR"'))
    with pytest.raises(FormatError, match=r"format='tokenmill.tokenizeR' where a tokenmill file has .*damaged"):
        Tokenizer.load(files["tokenmill"])
    with pytest.raises(FormatError, match=r"a tokenmill tokenizer file, not a Hugging Face"):
        Tokenizer.from_huggingface(files["tokenmill"])
