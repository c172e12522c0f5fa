"""``save_pretrained`` / ``to_transformers``: a tokenmill tokenizer as the folder ``transformers``' ``AutoTokenizer``
loads, checked against transformers itself: the same ids on text and the same text from ids, and the special
tokens' roles (``eos_token`` ...) found by name or as given."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import pytest

from tests.conftest import corpus_sample
from tests.tokenizer.test_model_tokenizers import _dir
from tokenmill import Tokenizer, as_tokenizer, train_bpe
from tokenmill.errors import ConfigError, FormatError

transformers = pytest.importorskip("transformers")

TEXTS = ["Hello world, it's 2026!", "  def f(x):\n\treturn x ** 2\n\n\n", "数字 12345 and ünïcödé — “quotes”",
         "a" * 300, " \n \r\n\t ", "naïve café: 3.14159, 1,000,000 items; e-mail: a@b.co", "😀👍🏽 emoji"]


def _auto(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (transformers' own notices on a folder without config.json)
        return transformers.AutoTokenizer.from_pretrained(str(folder))


def _assert_same_ids(tok, hf, texts) -> None:
    """HF's encode (special tokens added as its config says: none here) and decode equal tokenmill's."""
    want = [list(map(int, tok.encode(t))) for t in texts]
    assert hf(texts)["input_ids"] == want
    assert [hf.decode(ids) for ids in want] == [tok.decode(ids) for ids in want]


def _roles(hf) -> tuple:
    return hf.bos_token, hf.eos_token, hf.unk_token, hf.pad_token


def test_gpt2_folder_loads_in_autotokenizer_with_its_ids_and_eos(gpt2_ranks_path, tmp_path):
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path)
    folder = tok.save_pretrained(tmp_path / "new" / "gpt2", model_max_length=1024)  # (missing folders made)
    assert sorted(p.name for p in folder.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    conf = json.loads((folder / "tokenizer_config.json").read_text())
    assert conf == {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                    "eos_token": "<|endoftext|>", "model_max_length": 1024}
    hf = _auto(folder)
    assert _roles(hf) == (None, "<|endoftext|>", None, None) and hf.eos_token_id == 50256 == tok.eot_token
    assert hf.model_max_length == 1024 and len(hf) == len(tok) == 50257
    _assert_same_ids(tok, hf, TEXTS)
    ids = tok.encode("one<|endoftext|>two", allowed_special="all")
    assert hf("one<|endoftext|>two")["input_ids"] == ids  # the special token's text is the token, as allowed
    assert hf.decode(ids, skip_special_tokens=True) == tok.decode(ids, skip_special_tokens=True) == "onetwo"


def test_roles_given_replace_the_names_found_and_none_leaves_one_unset(gpt2_ranks_path, tmp_path):
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path)
    hf = _auto(tok.save_pretrained(tmp_path, pad_token="<|endoftext|>", eos_token=None))
    assert _roles(hf) == (None, None, None, "<|endoftext|>") and hf.pad_token_id == 50256
    padded = hf(["a b c", "a"], padding=True)
    assert padded["input_ids"][1] == tok.encode("a") + [50256] * 2 and padded["attention_mask"][1] == [1, 0, 0]
    obj = tok.to_transformers(bos_token="<|endoftext|>")
    assert isinstance(obj, transformers.PreTrainedTokenizerFast)
    assert _roles(obj) == ("<|endoftext|>", "<|endoftext|>", None, None)
    _assert_same_ids(tok, obj, TEXTS)


def test_a_trained_tokenizer_without_specials_gets_no_roles(tmp_path):
    tok = train_bpe(["hello world, hello there; the cat sat on the mat"] * 10, vocab_size=270, pattern="gpt4",
                    progress=False)
    hf = _auto(tok.save_pretrained(tmp_path))
    assert _roles(hf) == (None, None, None, None)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text()) == {
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    _assert_same_ids(tok, hf, TEXTS)


def _model_tokenizers():
    """(name, loader of the tokenizer, its roles (bos, eos, unk, pad) as found by name)."""
    return [
        ("llama3", lambda: as_tokenizer(_dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json")),
         ("<|begin_of_text|>", "<|end_of_text|>", None, None)),
        ("deepseek", lambda: as_tokenizer(_dir("TOKENMILL_DEEPSEEK_DIR", "deepseek", "tokenizer.json")),
         ("<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>", None, None)),
        ("tekken", lambda: as_tokenizer(_dir("TOKENMILL_MISTRAL_DIR", "mistral", "tekken_240911.json")
                                        / "tekken_240911.json"), ("<s>", "</s>", "<unk>", "<pad>")),
        ("mistral v1 .model", lambda: as_tokenizer(_dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1")
                                                   / "tokenizer.model.v1"), ("<s>", "</s>", "<unk>", None)),
    ]


@pytest.mark.parametrize("name,load,roles", _model_tokenizers(), ids=[m[0] for m in _model_tokenizers()])
def test_model_tokenizers_round_trip_through_transformers(name, load, roles, tmp_path):
    tok = load()
    hf = _auto(tok.save_pretrained(tmp_path))
    assert _roles(hf) == roles
    assert [hf.convert_tokens_to_ids(r) for r in roles if r] == [tok.token_to_id(r) for r in roles if r]
    _assert_same_ids(tok, hf, TEXTS)
    if name.endswith(".model"):  # (the object, once: a large vocabulary's export and load take seconds)
        assert _roles(tok.to_transformers()) == roles


def test_a_sentencepiece_tokenizer_json_round_trips(tmp_path):
    """The SentencePiece family's tokenizer.json (``SentencePieceJsonTokenizer``: written back byte for byte)."""
    model = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1") / "tokenizer.model.v1"
    as_tokenizer(model).save_huggingface(tmp_path / "tokenizer.json")
    tok = as_tokenizer(tmp_path / "tokenizer.json")
    assert type(tok).__name__ == "SentencePieceJsonTokenizer"
    hf = _auto(tok.save_pretrained(tmp_path / "out"))
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == (tmp_path / "tokenizer.json").read_bytes()
    assert _roles(hf) == ("<s>", "</s>", "<unk>", None)
    _assert_same_ids(tok, hf, TEXTS)


def test_from_huggingface_str_reads_text_as_the_file_is_read(tmp_path):
    """``Tokenizer.from_huggingface_str`` (what ``as_tokenizer(hf_object)`` converts through: no temporary file):
    the same ids as the file, for both families; no ``read_from``; errors name the source given."""
    model = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1") / "tokenizer.model.v1"
    as_tokenizer(model).save_huggingface(tmp_path / "sp" / "tokenizer.json")
    train_bpe(["hello world, hello tokens"] * 20, 270, special_tokens=["<|x|>"]).save_huggingface(tmp_path / "tokenizer.json")
    for path in (tmp_path / "sp" / "tokenizer.json", tmp_path / "tokenizer.json"):
        body = path.read_text(encoding="utf-8")
        a, b = Tokenizer.from_huggingface(path), Tokenizer.from_huggingface_str(body, source="<mine>")
        assert type(a) is type(b)
        assert getattr(b, "read_from", ()) == ()
        for t in TEXTS:
            assert b.encode(t, allowed_special="all") == a.encode(t, allowed_special="all")
        assert Tokenizer.from_huggingface_str(body.encode()).encode("hello") == a.encode("hello")
    with pytest.raises(FormatError, match="<mine>"):
        Tokenizer.from_huggingface_str('{"model": {"type": "Unigram"}}', source="<mine>")


def test_the_models_roles_survive_tokenmills_own_file(tmp_path):
    """Read from a model folder, saved with ``save`` and loaded back: the roles, chat template and longest input of
    the folder had been lost (EOS found by name again: an Instruct model's stop token and template gone, silently);
    they travel in the file now (version 3), outside the content hash."""
    src = tmp_path / "src"
    tok0 = train_bpe(["hello world, hi there"] * 20, 270, special_tokens=["<|endoftext|>", "<|im_end|>"])
    tok0.save_huggingface(src / "tokenizer.json")
    template = "{% for m in messages %}{{ m['content'] }}{{ eos_token }}{% endfor %}"
    (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "pad_token": None,
                                                           "chat_template": template, "model_max_length": 4096}))
    tok = Tokenizer.from_huggingface(src)
    tok.save(tmp_path / "t.json")
    back = Tokenizer.load(tmp_path / "t.json")
    assert back == tok and back.content_hash == tok.content_hash
    body = json.loads((tmp_path / "t.json").read_text())
    assert body["version"] == 3 and body["pretrained"]["eos_token"] == "<|im_end|>" and body["pretrained"]["pad_token"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the post-processor note)
        folder = back.save_pretrained(tmp_path / "out")
    conf = json.loads((folder / "tokenizer_config.json").read_text())
    assert conf["eos_token"] == "<|im_end|>" and conf["model_max_length"] == 4096 and conf["chat_template"] == template
    assert "pad_token" not in conf or conf["pad_token"] is None
    from tokenmill import encode_sft

    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    assert encode_sft(back, [chat]).get(0).tolist() == encode_sft(tok, [chat]).get(0).tolist()
    assert encode_sft(back, [chat]).get(0).tolist()[-1] == tok.token_to_id("<|im_end|>")
    back.save(tmp_path / "t.json")  # (saved again over its own file: the same bytes)
    assert json.loads((tmp_path / "t.json").read_text()) == body
    tok0.save(tmp_path / "plain.json")  # (nothing to carry: the version and the file as before)
    assert "pretrained" not in json.loads((tmp_path / "plain.json").read_text())
    body["pretrained"]["eos_token"] = "<|endoftext|>"  # (an edit is caught by the file's hash)
    (tmp_path / "t.json").write_text(json.dumps(body))
    with pytest.raises(FormatError, match="content hash mismatch"):
        Tokenizer.load(tmp_path / "t.json")


def test_the_saved_chat_template_is_checked_as_strictly_as_the_rest(tmp_path):
    """tokenmill writes ``pretrained`` itself, so its chat template is read as strictly as its roles: an unknown key
    in a named entry, a blank template, an empty list or one over 1 MiB had loaded (and failed later, in
    encode_sft, or never). A model folder's blank template is none: nothing is saved that would not load."""
    from tokenmill._io import canonical_hash

    src = tmp_path / "src"
    train_bpe(["hello world, hi there"] * 20, 270, special_tokens=["<|endoftext|>"]).save_huggingface(
        src / "tokenizer.json")
    (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>", "chat_template": "  "}))
    Tokenizer.from_huggingface(src).save(tmp_path / "t.json")
    body = json.loads((tmp_path / "t.json").read_text())
    assert body["version"] == 3 and body["pretrained"]["chat_template"] is None
    assert Tokenizer.load(tmp_path / "t.json").encode("hi") == Tokenizer.from_huggingface(src).encode("hi")
    bad = {"an unknown key": [{"name": "default", "template": "x", "bogus": 1}], "a blank template": "   ",
           "an empty list": [], "a blank named template": [{"name": "default", "template": ""}],
           "a nameless entry": [{"name": "", "template": "x"}], "5 MiB": "x" * (5 << 20)}
    for what, value in bad.items():
        edited = dict(body, pretrained=dict(body["pretrained"], chat_template=value))
        edited["hash"] = canonical_hash({k: v for k, v in edited.items() if k != "hash"})
        (tmp_path / "bad.json").write_text(json.dumps(edited))
        with pytest.raises(FormatError, match="chat_template"):
            Tokenizer.load(tmp_path / "bad.json")
        print(what, "refused")
    (src / "tokenizer_config.json").write_text(json.dumps({"chat_template": "x" * ((1 << 20) + 1)}))
    with pytest.raises(ConfigError, match="chat template is 1,048,577 characters, more than the 1,048,576 a "
                                          "tokenizer file keeps"):
        Tokenizer.from_huggingface(src).save(tmp_path / "long.json")
    assert not (tmp_path / "long.json").exists()


@pytest.mark.parametrize("cls", ["PreTrainedTokenizerFast", "LlamaTokenizerFast"])
def test_a_folders_own_tokenizer_json_decides_bos_whatever_the_configs_flags(tmp_path, cls):
    """A folder with its own tokenizer.json whose config says ``add_bos_token``/``add_eos_token``: transformers adds
    what the file's post-processor says (none here), and the folder written had added BOS and EOS to every text."""
    src = tmp_path / "src"
    train_bpe(["hello world, hi there"] * 20, 270, special_tokens=["<|endoftext|>", "<|bos|>"]).save_huggingface(
        src / "tokenizer.json")
    (src / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": cls, "bos_token": "<|bos|>", "eos_token": "<|endoftext|>", "add_bos_token": True,
        "add_eos_token": True}))
    ref = _auto(src)
    got = _auto(Tokenizer.from_huggingface(src).save_pretrained(tmp_path / "out"))
    for t in TEXTS:
        assert got(t)["input_ids"] == ref(t)["input_ids"]


@pytest.mark.parametrize("bos, eos", [(True, False), (False, True)])  # (each ~15 s: transformers converts the .model)
def test_a_models_add_bos_token_is_carried_into_the_folder_written(tmp_path, bos, eos):
    """A ``.model`` folder whose config says ``add_bos_token`` (Llama 2's, Mistral's slow configs): transformers
    adds BOS to every text there, and the folder tokenmill wrote had added none (a ``.model`` has no
    post-processor), silently: a model fine-tuned through it trained without BOS. The same ids now, pairs too."""
    model = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1") / "tokenizer.model.v1"
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(model, src / "tokenizer.model")
    (src / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": bos, "add_eos_token": eos, "bos_token": "<s>",
        "eos_token": "</s>", "unk_token": "<unk>"}))
    ref, tok = _auto(src), as_tokenizer(src)
    got = _auto(tok.save_pretrained(tmp_path / "out"))
    for args in (("Hello world",), ("Hello", "world"), ("",)):
        assert got(*args).input_ids == ref(*args).input_ids, args
    plain = tok.encode("Hello world")
    assert ref("Hello world").input_ids == [1] * bos + plain + [2] * eos
    assert as_tokenizer(tmp_path / "out").encode("Hello world") == plain  # (encode: the text's ids alone)


@pytest.mark.corpus
def test_same_ids_as_transformers_on_the_corpora(corpora, gpt2_ranks_path, tmp_path):
    llama3 = as_tokenizer(_dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json"))
    texts = [t for s in ("en", "zh", "code", "multi") for t in corpus_sample(corpora, s, 60_000, stride=13)]
    for k, tok in enumerate((Tokenizer.from_tiktoken(gpt2_ranks_path), llama3)):
        hf = _auto(tok.save_pretrained(tmp_path / str(k)))
        assert hf(texts)["input_ids"] == tok.encode_batch(texts, disallowed_special=())


def test_refusals_come_before_anything_is_written(gpt2_ranks_path, tmp_path):
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"eos_token='Ġthe' is not a special token of this tokenizer \(it has: "
                                          r"'<\|endoftext\|>'\); transformers would add it"):
        tok.save_pretrained(out, eos_token="Ġthe")  # (a vocabulary token: it would be cut out of every text)
    with pytest.raises(ConfigError, match="pad_token=50256 is a int; pass the text"):
        tok.save_pretrained(out, pad_token=50256)
    with pytest.raises(ConfigError, match="model_max_length=0: pass a positive int"):
        tok.save_pretrained(out, model_max_length=0)
    with pytest.raises(ConfigError, match="unk_token='<unk>' is not a special token"):
        tok.to_transformers(unk_token="<unk>")
    assert not out.exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        tok.save_pretrained(tmp_path / "file")
    (out / "tokenizer_config.json").mkdir(parents=True)
    with pytest.raises(ConfigError, match="tokenizer_config.json' is a directory"):
        tok.save_pretrained(out)
    assert not (out / "tokenizer.json").exists()  # (nothing half written)


def test_the_two_files_change_together(monkeypatch, tmp_path):
    """save_pretrained wrote tokenizer.json, then tokenizer_config.json: stopped between them, a folder saved before
    held the new tokenizer.json beside the old config (another tokenizer's roles). Both are now written first; a
    failure leaves the old pair, and the renames go config first, so a kill between them leaves a config without
    its tokenizer.json (which transformers refuses), never a mixed pair."""
    import tokenmill.tokenizer.formats.pretrained as P
    from tokenmill import train_bpe

    a = train_bpe(["the cat sat " * 20], 262, special_tokens=["<|endoftext|>"])
    b = train_bpe(["a dog ran far " * 20], 266, special_tokens=["</s>"])
    out = a.save_pretrained(tmp_path / "f")
    before = {n: (out / n).read_bytes() for n in ("tokenizer.json", "tokenizer_config.json")}

    def boom(obj):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(P, "json_text", boom)
    with pytest.raises(OSError):
        b.save_pretrained(out, overwrite=True)
    assert {n: (out / n).read_bytes() for n in before} == before and sorted(p.name for p in out.iterdir()) == \
        sorted(before)
    monkeypatch.undo()
    order = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda s, d: (order.append(os.path.basename(d)), real(s, d))[1])
    b.save_pretrained(out, overwrite=True)
    assert [n for n in order if not n.startswith(".") and not n.endswith(".tokenmill-old")] == \
        ["tokenizer_config.json", "tokenizer.json"]
    assert _auto(out)("a dog")["input_ids"] == b.encode("a dog")


def test_another_models_tokenizer_is_not_replaced_unasked_and_a_failure_puts_the_old_back(monkeypatch, tmp_path):
    """save_pretrained (and export --to transformers) into another model's folder had replaced its tokenizer.json
    and config without a word; and a disk error at the last flush left the folder without its old tokenizer.json
    (removed before the new one was in place). Now another tokenizer's files are refused unless overwrite=True,
    this same tokenizer's are written again, a folder of weights alone is written into, and the old files are
    moved aside until both new ones are in place: a failure puts them back."""
    import tokenmill._io as io
    from tokenmill import train_bpe
    from tokenmill.cli import main

    a = train_bpe(["the cat sat " * 20], 262, special_tokens=["<|endoftext|>"])
    b = train_bpe(["a dog ran far " * 20], 266, special_tokens=["</s>"])
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "model.safetensors").write_bytes(b"weights")
    a.save_pretrained(model)  # (weights alone: written into)
    a.save_pretrained(model)  # (the same tokenizer again: the same bytes)
    mine = {p.name: p.read_bytes() for p in model.iterdir()}
    with pytest.raises(ConfigError, match="holds tokenizer.json and tokenizer_config.json of another tokenizer .*"
                                          "pass overwrite=True"):
        b.save_pretrained(model)
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    assert main(["export", "--tokenizer", str(tmp_path / "b.json"), "--to", "transformers", "--out", str(model)]) == 1
    assert {p.name: p.read_bytes() for p in model.iterdir()} == mine
    real = io._flush_to_disk

    def failing(path, **kw):  # (the config's temporary, flushed first of the two renames: its disk fails)
        if "tokenizer_config" in os.path.basename(path):
            raise OSError(5, "Input/output error")
        return real(path, **kw)

    monkeypatch.setattr(io, "_flush_to_disk", failing)
    with pytest.raises(OSError, match="Input/output error"):
        b.save_pretrained(model, overwrite=True)
    assert {p.name: p.read_bytes() for p in model.iterdir()} == mine  # (the old pair back, nothing left aside)
    monkeypatch.undo()
    assert main(["export", "--tokenizer", str(tmp_path / "b.json"), "--to", "transformers", "--out", str(model),
                 "--overwrite", "-q"]) == 0
    assert _auto(model)("a dog")["input_ids"] == b.encode("a dog")
    assert (model / "model.safetensors").read_bytes() == b"weights"
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json",
                                                       "tokenizer_config.json"]


def test_a_file_left_aside_is_never_written_over_and_a_failure_leaves_no_half_pair(monkeypatch, tmp_path):
    """A ``tokenizer.json.tokenmill-old`` a stopped run left (the user's old tokenizer) had been written over and
    removed by the next run; and where the folder held tokenizer.json alone, a failure at the last rename put it
    back beside the new config. Now the first is refused before anything is written, the second undone whole."""
    import tokenmill._io as io
    from tokenmill import train_bpe

    a = train_bpe(["the cat sat " * 20], 262, special_tokens=["<|endoftext|>"])
    b = train_bpe(["a dog ran far " * 20], 266, special_tokens=["</s>"])
    out = a.save_pretrained(tmp_path / "f")
    (out / "tokenizer.json.tokenmill-old").write_text("the user's old tokenizer")
    with pytest.raises(ConfigError, match="tokenizer.json.tokenmill-old' is there: the old file of a replacement stopped part-way.* put it back in place"):
        b.save_pretrained(out, overwrite=True)
    assert (out / "tokenizer.json.tokenmill-old").read_text() == "the user's old tokenizer"
    (out / "tokenizer.json.tokenmill-old").unlink()
    (out / "tokenizer_config.json").unlink()  # (tokenizer.json alone: a new config is written where none was)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = os.replace

    def last_fails(src, dst):
        if os.path.basename(dst) == "tokenizer.json" and ".tokenmill-old" not in os.path.basename(src):
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", last_fails)
    with pytest.raises(OSError, match="Input/output error"):
        b.save_pretrained(out, overwrite=True)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # (no new config beside the old tokenizer)


def test_never_over_the_tokenizer_json_it_was_read_from(tmp_path):
    src = _dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json")
    shutil.copy(src / "tokenizer.json", tmp_path / "tokenizer.json")
    before = (tmp_path / "tokenizer.json").read_bytes()
    tok = as_tokenizer(tmp_path)
    with pytest.raises(ConfigError, match="is the folder the tokenizer was read from .tokenizer.json."):
        tok.save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="also an input"):
        tok.save_huggingface(tmp_path / "tokenizer.json")
    assert (tmp_path / "tokenizer.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json"]


def test_an_existing_config_is_replaced_when_asked(gpt2_ranks_path, tmp_path):
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "</s>", "tokenizer_class": "LlamaTokenizer"}')
    with pytest.raises(ConfigError, match="holds tokenizer_config.json of another tokenizer"):
        Tokenizer.from_tiktoken(gpt2_ranks_path).save_pretrained(tmp_path)
    Tokenizer.from_tiktoken(gpt2_ranks_path).save_pretrained(tmp_path, overwrite=True)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["eos_token"] == "<|endoftext|>"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # (no temporary left)


def test_a_tokenizer_tokenmill_only_wraps_is_refused_with_where_its_own_file_is(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer(tokenizers.models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    hf.normalizer = tokenizers.normalizers.NFKC()  # (tokenmill runs no NFKC: it wraps HF's own)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = as_tokenizer(hf)
    assert type(tok).__name__ == "ForeignTokenizer" and tok.encode("ab") == [2]
    for method in ("save_pretrained", "to_transformers", "save_huggingface", "save"):
        with pytest.raises(ConfigError, match=r"run through tokenizers .* tok\.wrapped\.save\('tokenizer\.json'\)"):
            getattr(tok, method)(tmp_path) if method != "to_transformers" else tok.to_transformers()
    assert list(tmp_path.iterdir()) == []


def test_the_models_own_config_gives_the_roles_and_chat_template(tmp_path):
    """A tokenizer read from a model's folder (or Hub repo) whose tokenizer_config.json names its roles (Llama 3
    Instruct's EOS is <|eot_id|>, which no name tells) and a chat template: both go to the folder written,
    roles given still win, the longest input transformers writes where there is none (1e30) is left out, an
    AddedToken's form is read as its content, and a role naming no special token of the tokenizer is said."""
    src = _dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json")
    model = tmp_path / "Llama-3-Instruct"
    model.mkdir()
    shutil.copy(src / "tokenizer.json", model / "tokenizer.json")
    template = ("{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}"
                "<|eot_id|>{% endfor %}")
    (model / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|begin_of_text|>", "eos_token": {"__type": "AddedToken", "content": "<|eot_id|>"},
        "model_max_length": 1000000000000000019884624838656, "chat_template": template,
        "clean_up_tokenization_spaces": True, "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": {"128000": {"content": "<|begin_of_text|>"}}}))
    tok = as_tokenizer(model)
    hf = _auto(tok.save_pretrained(tmp_path / "out"))
    assert _roles(hf) == ("<|begin_of_text|>", "<|eot_id|>", None, None)
    conf = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert conf["chat_template"] == template and "model_max_length" not in conf
    assert conf["clean_up_tokenization_spaces"] is False  # (tokenmill's decode)
    chat = hf.apply_chat_template([{"role": "user", "content": "Hi there"}], tokenize=True)
    chat = chat["input_ids"] if isinstance(chat, dict) or hasattr(chat, "keys") else chat
    assert chat == tok.encode("<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>", allowed_special="all")
    assert _roles(_auto(tok.save_pretrained(tmp_path / "given", eos_token="<|end_of_text|>", pad_token=None))) == (
        "<|begin_of_text|>", "<|end_of_text|>", None, None)
    # the model's config naming a token this tokenizer lacks: said, that role unset
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "model_max_length": 8192}))
    with pytest.warns(UserWarning, match="names eos_token '</s>', which is not a special token of this tokenizer"):
        folder = as_tokenizer(model).save_pretrained(tmp_path / "warned")
    assert json.loads((folder / "tokenizer_config.json").read_text()) == {  # (bos: the config names none: by name)
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
        "bos_token": "<|begin_of_text|>", "model_max_length": 8192}
    # a damaged config: refused, naming the file and the field, before anything is written
    (model / "tokenizer_config.json").write_text('{"eos_token": 5}')
    with pytest.raises(FormatError, match=r"tokenizer_config.json'?: field eos_token = 5"):
        as_tokenizer(model).save_pretrained(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_a_tokenizer_read_from_tokenmills_own_file_takes_no_config_beside_it(gpt2_ranks_path, tmp_path):
    Tokenizer.from_tiktoken(gpt2_ranks_path).save(tmp_path / "tok.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": None, "pad_token": "<|endoftext|>"}))
    hf = _auto(Tokenizer.load(tmp_path / "tok.json").save_pretrained(tmp_path / "out"))
    assert _roles(hf) == (None, "<|endoftext|>", None, None)  # (found by name, the config beside it not read)


def test_a_chat_template_given_is_the_folders(gpt2_ranks_path, tmp_path):
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path)
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|endoftext|>{% endfor %}"
    hf = _auto(tok.save_pretrained(tmp_path / "a", chat_template=template))
    got = hf.apply_chat_template([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                                 tokenize=True)
    got = got["input_ids"] if hasattr(got, "keys") else got
    assert got == tok.encode("user: hi<|endoftext|>assistant: yo<|endoftext|>", allowed_special="all")
    for bad in ("", "  ", b"{{x}}"):
        with pytest.raises(ConfigError, match="chat_template=.*: pass the template's Jinja text"):
            tok.save_pretrained(tmp_path / "b", chat_template=bad)
    assert not (tmp_path / "b").exists()


def test_older_and_newer_model_folders_give_their_roles_and_template(tmp_path):
    """special_tokens_map.json (older folders) names the roles tokenizer_config.json leaves out, chat_template.jinja
    (transformers 5) holds the template; a config naming no role leaves them to be found by name; the model's own
    files are never written over."""
    model = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1") / "tokenizer.model.v1"
    src = tmp_path / "Mistral-7B"
    src.mkdir()
    shutil.copy(model, src / "tokenizer.model")
    (src / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32768, "add_bos_token": True}))
    tok = as_tokenizer(src)
    assert _roles(_auto(tok.save_pretrained(tmp_path / "a"))) == ("<s>", "</s>", "<unk>", None)  # (by name)
    assert json.loads((tmp_path / "a" / "tokenizer_config.json").read_text())["model_max_length"] == 32768
    (src / "special_tokens_map.json").write_text(json.dumps({"eos_token": {"content": "</s>"}, "pad_token": "<unk>",
                                                             "bos_token": None}))
    (src / "chat_template.jinja").write_text("{% for m in messages %}[INST]{{ m['content'] }}[/INST]{% endfor %}")
    hf = _auto(as_tokenizer(src).save_pretrained(tmp_path / "b"))
    assert _roles(hf) == (None, "</s>", "<unk>", "<unk>")
    assert hf.chat_template == (src / "chat_template.jinja").read_text()
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    with pytest.raises(ConfigError, match="is the folder the tokenizer was read from .tokenizer.model.: its files are "
                                          "the model's own"):
        as_tokenizer(src).save_pretrained(src)
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    # transformers' order: the map's roles replace the config's, unless the config lists added_tokens_decoder
    (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "pad_token": "</s>"}))
    (src / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<unk>"}))
    hf = _auto(as_tokenizer(src).save_pretrained(tmp_path / "c"))
    assert _roles(hf) == ("<s>", "<unk>", "<unk>", "</s>") == _roles(_auto(src))
    (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "added_tokens_decoder": {
        "0": {"content": "<unk>", "special": True}}}))
    (src / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<unk>", "pad_token": "<unk>"}))
    hf = _auto(as_tokenizer(src).save_pretrained(tmp_path / "d"))
    assert _roles(hf) == ("<s>", "</s>", "<unk>", None)  # (bos, unk: named by neither file, found by name)
    assert _roles(_auto(src))[1:2] + _roles(_auto(src))[3:] == ("</s>", None)  # (transformers: the map unread)
    (src / "special_tokens_map.json").write_text(json.dumps({"pad_token": "[PAD]"}))
    (src / "tokenizer_config.json").unlink()
    with pytest.warns(UserWarning, match="the model's special_tokens_map.json names pad_token '.PAD.', which is not"):
        as_tokenizer(src).save_pretrained(tmp_path / "e")


def test_a_folder_holding_files_that_would_change_the_tokenizer_is_refused(gpt2_ranks_path, tmp_path):
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path)
    for name in ("special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json"):
        out = tmp_path / name.replace(".", "_")
        out.mkdir()
        (out / name).write_text('{"eos_token": "</s>"}')
        with pytest.raises(ConfigError, match=f"holds {name}, which transformers reads beside tokenizer_config.json"):
            tok.save_pretrained(out)
        assert [p.name for p in out.iterdir()] == [name]  # (nothing written)
