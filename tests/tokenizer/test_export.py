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


def test_huggingface_export_keeps_special_ids_after_a_gap(tmp_path):
    """cl100k's and o200k's specials sit past a gap after the ranks (100,257 with 100,256 unused): refused
    ("HF would give it id 100,256"). They go in the model's vocabulary, where HF keeps every id."""
    tiktoken = pytest.importorskip("tiktoken")
    from tokenizers import Tokenizer as HFTokenizer

    import tokenmill
    from tokenmill import Tokenizer

    ranks = {bytes([b]): b for b in range(256)} | {b"th": 256, b"the": 257}
    enc = tiktoken.Encoding("gap", pat_str=r" ?\p{L}+| ?[^\s\p{L}]+|\s+", mergeable_ranks=ranks,
                            special_tokens={"<|a|>": 259, "<|b|>": 262})
    tok = tokenmill.as_tokenizer(enc)
    tok.save_huggingface(tmp_path / "tokenizer.json")
    hf = HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    back = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")
    text = "the <|a|> thethe <|b|> x"
    want = enc.encode(text, allowed_special="all")
    assert 259 in want and 262 in want
    assert hf.encode(text, add_special_tokens=False).ids == want == back.encode(text, allowed_special="all")
    assert back.special_tokens == {"<|a|>": 259, "<|b|>": 262} and hf.decode(want, skip_special_tokens=False) == text


def test_to_tiktoken_keeps_the_text_between_matches(tmp_path):
    """A pattern that leaves gaps (``\\w+``) exported as it is: tiktoken dropped the text between words
    (tokenmill encodes it), silently; one matching the empty string panicked inside tiktoken."""
    import random

    from tokenmill import ConfigError, Tokenizer, train_bpe

    rng = random.Random(0)
    pieces = ["hello", ", ", "world", "! ", "123", " ", "\n", "é", "中文", "🙂", "--", "a_b"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(300)]
    trained = train_bpe(texts * 3, 300, pattern=r"\w+|[^\w\s]+")
    for pat in (r"\w+", r"[a-z]+|\d", r"\p{L}+(?=\s)"):
        tok = Tokenizer.from_merges(trained.merges, pattern=pat)
        enc = tok.to_tiktoken()
        for t in texts:
            assert enc.encode(t) == tok.encode(t), (pat, t)
            assert enc.decode(enc.encode(t)) == t
    preset = Tokenizer.from_merges(trained.merges, pattern="gpt4")
    assert preset.to_tiktoken()._pat_str == preset.pattern  # a preset covers all text: as it is
    for pat, match in (("a*", "matches the empty string"), (r"(a)\1|\w+", "refers back to its own groups"),
                       (r"\w+|x*", "matches the empty string")):  # (empty only past the text's start)
        with pytest.raises(ConfigError, match=match):
            Tokenizer.from_merges(trained.merges, pattern=pat).to_tiktoken()
    with pytest.raises(ConfigError, match="matches the empty string"):  # HF steps on after an empty match
        Tokenizer.from_merges(trained.merges, pattern=r"\w+|x*").save_huggingface(tmp_path / "t.json")


@pytest.mark.parametrize("pat", [r"[a-z]+$|.", r"^[a-z]+|.", r"[a-z]+\Z|.", r"\A[a-z]+|.", r"(?s:t.)|."])
def test_exports_refuse_anchors_and_flags_the_engines_read_otherwise(pat, tmp_path):
    """A custom pattern's '$' (end, or before a final newline, in tokenmill's engine; every line end in
    HF's Oniguruma; the very end in tiktoken's), '^', '\\Z', '\\A' and inline flags were exported as they
    were: HF and tiktoken then gave other ids than tokenmill, silently."""
    from tokenmill import ConfigError, Tokenizer

    tok = Tokenizer.from_merges([(116, 104), (256, 101)], pattern=pat)
    with pytest.raises(ConfigError, match="reads otherwise than tokenmill"):
        tok.save_huggingface(tmp_path / "tokenizer.json")
    with pytest.raises(ConfigError, match="tiktoken's engine .* reads otherwise than tokenmill"):
        tok.to_tiktoken()
    assert not (tmp_path / "tokenizer.json").exists()


@pytest.mark.parametrize("pat", [r"\pL+|\PL+", r"\d{2}?|\D+|\d"])
def test_save_huggingface_refuses_what_oniguruma_reads_otherwise(pat, tmp_path):
    """``\\pL`` (a letter here, the letters "pL" to Oniguruma) and ``x{2}?`` (two x here, ``(?:x{2})?`` there)
    were exported as they were: HF gave other ids than tokenmill, silently."""
    from tokenmill import ConfigError, Tokenizer

    tok = Tokenizer.from_merges([(116, 104), (256, 101)], pattern=pat)
    with pytest.raises(ConfigError, match="HF tokenizers' engine .* reads otherwise than tokenmill"):
        tok.save_huggingface(tmp_path / "tokenizer.json")
    assert not (tmp_path / "tokenizer.json").exists()


@pytest.mark.parametrize("pat", [r"[[:alpha:]]+|[^[:alpha:]]", r"\N{LATIN SMALL LETTER A}+|."])
def test_to_tiktoken_refuses_posix_classes_and_named_characters(pat, tmp_path):
    """tiktoken's engine reads ``[[:alpha:]]`` as ASCII (tokenmill's and HF's as Unicode: "naïve" one chunk
    or three); to_tiktoken exported it as it was. A tiktoken Encoding using one is run as it is."""
    tiktoken = pytest.importorskip("tiktoken")

    import tokenmill
    from tokenmill import ConfigError, Tokenizer

    tok = Tokenizer.from_merges([(116, 104), (256, 101)], pattern=pat)
    with pytest.raises(ConfigError, match="tiktoken's engine .* reads otherwise than tokenmill"):
        tok.to_tiktoken()
    ranks = {bytes([b]): b for b in range(256)}
    enc = tiktoken.Encoding("posix", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    wrapped = tokenmill.as_tokenizer(enc)
    assert not isinstance(wrapped, Tokenizer) and wrapped.encode("naïve aa") == enc.encode("naïve aa")


def test_a_tiktoken_encoding_with_anchors_is_run_as_it_is():
    """as_tokenizer(tiktoken.Encoding) of a pattern with '$' took it as tokenmill's (other ids on text
    ending in a newline before a word's end, where the engines disagree)."""
    import tiktoken

    import tokenmill
    from tokenmill import Tokenizer

    ranks = {bytes([b]): b for b in range(256)} | {b"th": 256, b"the": 257}
    enc = tiktoken.Encoding("anchored", pat_str=r"[a-z]+$|.|\n", mergeable_ranks=ranks, special_tokens={})
    tok = tokenmill.as_tokenizer(enc)
    assert not isinstance(tok, Tokenizer)
    for text in ("the\nthe\n", "the\n", "the"):
        assert tok.encode(text) == enc.encode(text)


def test_to_tiktoken_refuses_imported_merge_lists_whose_ids_tiktoken_would_not_give(tmp_path):
    """Only the merge order was checked: a vocabulary token no merge builds, or a token two merges'
    splits make where only one is a merge, went to tiktoken, which then merged where HF does not."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models
    from tokenizers import pre_tokenizers as pt

    from tokenmill import ConfigError, Tokenizer

    alpha = {c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}
    cases = [  # (extra vocabulary, merges, text, what the refusal says)
        ({"ab": 256}, [], "ab", "built by no merge"),
        ({"ab": 256, "bc": 257, "abc": 258}, [("a", "b"), ("b", "c"), ("a", "bc")], "abc", "which no merge joins"),
        ({"ab": 257, "bc": 256}, [("a", "b"), ("b", "c")], "abc", "order differs from its id order"),
    ]
    for extra, merges, text, says in cases:
        hf = HFTokenizer(models.BPE(vocab=alpha | extra, merges=merges))
        hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
        hf.save(str(tmp_path / "tokenizer.json"))
        tok = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids
        with pytest.raises(ConfigError, match=says):
            tok.to_tiktoken()
        with pytest.raises(ConfigError, match=says):  # the rank file alone too (read back: other ids)
            tok.save_tiktoken(tmp_path / "x.tiktoken")
        assert not (tmp_path / "x.tiktoken").exists()
    # complete merges (every split of every token, in id order) go, and give HF's ids
    hf = HFTokenizer(models.BPE(vocab=alpha | {"ab": 256, "bc": 257, "abc": 258},
                                merges=[("a", "b"), ("b", "c"), ("a", "bc"), ("ab", "c")], ignore_merges=True))
    hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
    hf.save(str(tmp_path / "tokenizer.json"))
    enc = Tokenizer.from_huggingface(tmp_path / "tokenizer.json").to_tiktoken()
    for text in ("abc", "abcabc", "bcab", "cab"):
        assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_to_tiktoken_names_the_component_tiktoken_lacks(tmp_path):
    """A refusal named every component tiktoken lacks at once ("no normalizer, prefix space or second split
    pattern; this tokenizer uses one"): DeepSeek V3's users could not tell which. Each is named now."""
    from tokenizers import AddedToken, decoders, models, normalizers
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers as pt

    from tokenmill import ConfigError, Tokenizer

    alpha = {c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}
    split = pt.Split(r"\p{N}{1,3}", behavior="isolated")
    cases = {  # what the refusal says: how the tokenizer.json is made
        "a NFC normalizer": lambda hf: setattr(hf, "normalizer", normalizers.NFC()),
        "a prefix space": lambda hf: setattr(hf, "pre_tokenizer", pt.ByteLevel(add_prefix_space=True)),
        "2 more split patterns after the first \\(a pre-tokenizer Sequence of 3 Splits\\)":
            lambda hf: setattr(hf, "pre_tokenizer", pt.Sequence([split, split, pt.Split(r"\s+", "isolated"),
                                                                 pt.ByteLevel(add_prefix_space=False,
                                                                              use_regex=False)])),
        "1 \\(such as 'hello'\\), which tiktoken would encode as text":
            lambda hf: hf.add_tokens([AddedToken("hello", special=False, normalized=False)]),
    }
    for says, make in cases.items():
        hf = HFTokenizer(models.BPE(vocab=dict(alpha), merges=[]))
        hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        make(hf)
        hf.save(str(tmp_path / "tokenizer.json"))
        tok = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")
        with pytest.raises(ConfigError, match=says):
            tok.to_tiktoken()


def test_to_tiktoken_refuses_a_special_token_that_starts_another():
    """tokenmill takes the longest special token at a place; tiktoken tries its specials in no fixed order,
    so "<a><b>" came back as <a> and text where tokenmill gives <a><b>'s id: refused, naming both. Specials
    that only overlap elsewhere are exported (the leftmost match is the same for both)."""
    pytest.importorskip("tiktoken")
    from tokenmill.errors import ConfigError

    tok = Tokenizer.from_merges([], pattern="gpt4", special_tokens=["<a>", "<a><b>"])
    assert tok.encode("<a><b>", allowed_special="all") == [257]
    with pytest.raises(ConfigError, match="the special token '<a>' is the start of '<a><b>'"):
        tok.to_tiktoken()
    ok = Tokenizer.from_merges([], pattern="gpt4", special_tokens=["ab", "bc"])
    for text in ("abc", "xbcab"):
        assert ok.to_tiktoken().encode(text, allowed_special="all") == ok.encode(text, allowed_special="all")


def test_damaged_files_are_named_with_their_field(trained, tmp_path):
    """A tokenizer.json whose Split regex does not compile named neither file nor field; a tokenmill file
    whose first merge has 3 ids blamed merges[1] and asked for 3 (and rows of 3 everywhere were re-paired
    by a reshape); a tekken.json listing two special tokens on one id printed every id, and no file."""
    import json

    from tokenmill._io import canonical_hash
    from tokenmill.errors import FormatError

    trained.save_huggingface(tmp_path / "tokenizer.json")
    body = json.loads((tmp_path / "tokenizer.json").read_text())
    pre = body["pre_tokenizer"]
    split = pre["pretokenizers"][0] if pre["type"] == "Sequence" else pre
    split["pattern"]["Regex"] = "(unclosed"
    (tmp_path / "bad.json").write_text(json.dumps(body))
    field = r"pre_tokenizer\.pretokenizers\[0\]" if pre["type"] == "Sequence" else "pre_tokenizer"
    with pytest.raises(FormatError, match=rf"bad.json: {field}.pattern.Regex = '\(unclosed' cannot be reproduced "
                       "exactly by tokenmill: the regex module cannot compile it"):
        Tokenizer.from_huggingface(tmp_path / "bad.json")

    trained.save(tmp_path / "tok.json")
    own = json.loads((tmp_path / "tok.json").read_text())
    for rows, where in (([[97, 98, 99]] + own["model"]["merges"][1:], "merges\\[0\\] .* 3 entries"),
                        ([m + [0] for m in own["model"]["merges"]], "merges\\[0\\] .* 3 entries")):
        edited = dict(own, model=dict(own["model"], merges=rows))
        edited.pop("hash")
        edited["hash"] = canonical_hash(edited)
        (tmp_path / "edited.json").write_text(json.dumps(edited))
        with pytest.raises(FormatError, match=f"{where}; every entry must be a list of 2 integers"):
            Tokenizer.load(tmp_path / "edited.json")

    tekken = {"config": {"pattern": r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+",
                         "num_vocab_tokens": 256, "default_vocab_size": 258, "default_num_special_tokens": 2},
              "vocab": [{"rank": i, "token_bytes": __import__("base64").b64encode(bytes([i])).decode()}
                        for i in range(256)],
              "special_tokens": [{"rank": 0, "token_str": "<unk>", "is_control": True},
                                 {"rank": 0, "token_str": "<s>", "is_control": True}]}
    (tmp_path / "tekken.json").write_text(json.dumps(tekken))
    with pytest.raises(FormatError) as e:
        Tokenizer.from_tekken(tmp_path / "tekken.json")
    assert "tekken.json" in str(e.value) and len(str(e.value)) < 400


def test_a_tokenizer_json_that_truncates_or_pads_says_so_on_every_load(trained, tmp_path):
    """HF's encode truncates and pads where the file enables it (a tokenizer saved after enable_truncation);
    tokenmill's encode gives every id: a warning naming the file and the settings, on each load (the first
    conversion is cached), where the file had loaded in silence with other ids than HF's."""
    import json
    import warnings

    trained.save_huggingface(tmp_path / "tokenizer.json")
    body = json.loads((tmp_path / "tokenizer.json").read_text())
    body["truncation"] = {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0}
    (tmp_path / "cut.json").write_text(json.dumps(body))
    for _ in range(2):
        with pytest.warns(UserWarning, match=r"cut.json enables truncation \(max_length=3, .*tokenmill's does not"):
            tok = Tokenizer.from_huggingface(tmp_path / "cut.json")
    assert len(tok.encode("hello world and more words")) > 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tokenizer.from_huggingface(tmp_path / "tokenizer.json")  # (none asked: no warning)


def test_a_special_token_spelling_a_vocabulary_token_is_refused_for_that_reason(tmp_path):
    """A special token "x" (byte 120's token too): HF keeps one id per string, so the export is refused,
    saying so (the message had blamed the order of ids after the vocabulary)."""
    from tokenmill.errors import ConfigError

    tok = train_bpe(["hello x world"], 262, special_tokens=["x"])
    with pytest.raises(ConfigError, match="the vocabulary holds 'x' as a token of its own at id 120"):
        tok.save_huggingface(tmp_path / "t.json")


def test_saves_and_exports_never_write_over_the_file_a_tokenizer_was_read_from(tmp_path, gpt2_ranks_path):
    """save_huggingface onto a model's own rank file, tokenizer.json or .model had replaced it (the model's file
    lost, or loadable only by Tokenizer.load); save() over a tokenmill file writes what it holds, so it stays."""
    import shutil

    from tokenmill import ConfigError, Tokenizer

    ranks = tmp_path / "gpt2.tiktoken"
    shutil.copy(gpt2_ranks_path, ranks)
    before = ranks.read_bytes()
    tok = Tokenizer.from_tiktoken(ranks, pattern="gpt2")
    for write in (tok.save, tok.save_huggingface, tok.save_tiktoken):
        with pytest.raises(ConfigError, match="is also an input"):
            write(ranks)
    assert ranks.read_bytes() == before
    tok.save_huggingface(tmp_path / "tokenizer.json")
    tj = Tokenizer.from_huggingface(tmp_path)  # (its folder: the file in it is protected)
    with pytest.raises(ConfigError, match="is also an input"):
        tj.save_huggingface(tmp_path / "tokenizer.json")
    tj.save(tmp_path / "tok.json")
    own = Tokenizer.load(tmp_path / "tok.json")
    own.save(tmp_path / "tok.json")  # (the same bytes)
    assert Tokenizer.load(tmp_path / "tok.json") == own
    with pytest.raises(ConfigError, match="is also an input"):
        own.save_huggingface(tmp_path / "tok.json")
    from tokenmill.tokenizer.formats import sentencepiece as S  # a .model, and a SentencePiece-family tokenizer.json

    model = tmp_path / "sp.model"
    model.write_bytes(S.write_model_proto([("<unk>", 0, S.UNKNOWN), ("▁", -1, S.NORMAL), ("a", -2, S.NORMAL)],
                                          trainer={"model_type": 2},
                                          normalizer={"name": "identity", "remove_extra_whitespaces": False}))
    sp = Tokenizer.from_sentencepiece(model)
    with pytest.raises(ConfigError, match="is also an input"):
        sp.save_huggingface(model)
    for write in (sp.to_tiktoken, lambda: sp.save_tiktoken(tmp_path / "sp.tiktoken")):  # (a bare AttributeError)
        with pytest.raises(ConfigError, match="a SentencePiece model has no tiktoken form"):
            write()
    sp.save_huggingface(tmp_path / "sp.json")
    spj = Tokenizer.from_huggingface(tmp_path / "sp.json")
    with pytest.raises(ConfigError, match="is also an input"):
        spj.save_huggingface(tmp_path / "sp.json")


def test_an_imported_post_processor_is_exported_back(tmp_path, gpt2_ranks_path):
    """save_huggingface wrote post_processor null: a tokenizer.json whose TemplateProcessing adds a BOS (Llama
    3.1's) exported to one whose HF encode added none, silently. It is written back; a tokenmill file does not
    keep it, and exporting from one says so."""
    import json
    import warnings

    tokenizers = pytest.importorskip("tokenizers")
    from tokenmill import Tokenizer

    src = tmp_path / "src.json"
    Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2",
                            special_tokens={"<|endoftext|>": 50256}).save_huggingface(src)
    body = json.loads(src.read_text(encoding="utf-8"))
    body["post_processor"] = {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [50256],
                                                                   "tokens": ["<|endoftext|>"]}}}
    src.write_text(json.dumps(body), encoding="utf-8")
    assert tokenizers.Tokenizer.from_file(str(src)).encode("Hello").ids == [50256, 15496]
    tok = Tokenizer.from_huggingface(src)
    assert tok.encode("Hello") == [15496]  # (tokenmill's ids never hold what the post-processor adds)
    tok.save_huggingface(tmp_path / "out.json")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "out.json")).encode("Hello").ids == [50256, 15496]
    tok.save(tmp_path / "tok.json")
    with pytest.warns(UserWarning, match="not its tokenizer.json's post_processor"):
        Tokenizer.load(tmp_path / "tok.json").save_huggingface(tmp_path / "again.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a tokenizer that never had one: nothing said)
        Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2").save_huggingface(tmp_path / "plain.json")


def test_warnings_point_at_the_users_line_whatever_the_path(trained, tmp_path):
    """A fixed stacklevel pointed into tokenmill when the same warning was reached another way (a
    tokenizer.json through from_huggingface, as_tokenizer of the path, of the HF object, a training that
    stops early): every one now names this file, the caller's."""
    import json
    import warnings

    tokenizers = pytest.importorskip("tokenizers")
    from tokenmill import as_tokenizer

    trained.save_huggingface(tmp_path / "tokenizer.json")
    body = json.loads((tmp_path / "tokenizer.json").read_text())
    body["truncation"] = {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0}
    (tmp_path / "cut.json").write_text(json.dumps(body))
    cut = tokenizers.Tokenizer.from_file(str(tmp_path / "cut.json"))
    calls = [lambda: Tokenizer.from_huggingface(tmp_path / "cut.json"), lambda: as_tokenizer(tmp_path / "cut.json"),
             lambda: as_tokenizer(cut), lambda: train_bpe(["ab ab"], 300)]
    for call in calls:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        assert seen and {w.filename for w in seen} == {__file__}, [(w.filename, str(w.message)[:60]) for w in seen]


def test_warnings_point_at_the_users_line_whatever_the_path_in_a_thread(tmp_path):
    """A warning raised in a thread or pool worker tokenmill starts has no user's line on its stack: it
    had named ``threading.py`` (or ``concurrent/futures/thread.py``); it names tokenmill's line now, the
    function the thread runs. A call on the user's own thread still names the user's line."""
    import threading
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from tokenmill.data import readers

    (tmp_path / "a.txt").write_text("text")
    (tmp_path / "b.bin").write_bytes(b"\0")

    def thread():
        t = threading.Thread(target=readers.folder_files, args=(tmp_path, lambda f: f.suffix == ".txt"))
        t.start()
        t.join()

    def pool():
        with ThreadPoolExecutor(1) as ex:
            ex.submit(readers.folder_files, tmp_path, lambda f: f.suffix == ".txt").result()

    for run, where in ((thread, readers.__file__), (pool, readers.__file__),
                       (lambda: readers.folder_files(tmp_path, lambda f: f.suffix == ".txt"), __file__)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            run()
        assert [w.filename for w in seen] == [where], [(w.filename, str(w.message)[:60]) for w in seen]
        assert "b.bin" in str(seen[0].message)
