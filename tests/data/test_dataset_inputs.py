"""What a Hugging Face datasets / pandas user hands a store build, checked against the plain form.

A probe of the data pipeline with such inputs found stores silently wrong: a pandas DataFrame stored its
column names as the documents, a ``.json`` file from ``Dataset.to_json`` (JSON Lines) was one raw-text
document with ``field=`` ignored, a Dataset in the numpy or torch format lost its texts' trailing NULs,
and ``split_lines`` cut lines at form feeds and U+2028 (``str.splitlines``), an end of text inside a line."""

from __future__ import annotations

import warnings

import pytest

from tokenmill import ConfigError, InputError, Tokenizer, TokenStore, train_bpe


@pytest.fixture(scope="module")
def tok(gpt2_ranks_path):
    return Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})


def _texts(store, tok) -> list[str]:
    return [store.decode(i, tok).removesuffix("<|endoftext|>") for i in range(len(store))]


def test_a_dataframe_is_its_text_column_not_its_column_names(tok, tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": [1, 2, 3], "text": ["alpha", "beta", "gamma"], "source": ["a", "b", "c"]})
    assert _texts(TokenStore.build(tmp_path / "a", df, tok, progress=False), tok) == ["alpha", "beta", "gamma"]
    renamed = df.rename(columns={"text": "body"})
    assert _texts(TokenStore.build(tmp_path / "b", renamed, tok, field="body", progress=False), tok) == \
        ["alpha", "beta", "gamma"]
    with pytest.raises(ConfigError, match=r"a DataFrame with no column 'text' \(its columns: id, body, source\)"):
        TokenStore.build(tmp_path / "c", renamed, tok, progress=False)
    holes = pd.DataFrame({"text": ["alpha", None, "gamma"]})  # (pandas reads the empty cell as NaN)
    with pytest.raises(InputError, match=r"item 1 is missing \(nan, as a table's empty cell reads\): drop or fill"):
        TokenStore.build(tmp_path / "d", holes, tok, progress=False)
    for call in (lambda: train_bpe(df, 260), lambda: tok.encode_batch(df)):
        with pytest.raises(ConfigError, match=r"not a DataFrame \(iterating one gives its column names\)"):
            call()


def test_json_and_csv_files_are_not_read_as_one_text(tok, tmp_path):
    datasets = pytest.importorskip("datasets")
    path = tmp_path / "x.json"
    datasets.Dataset.from_dict({"content": ["alpha", "beta"]}).to_json(str(path))  # (JSON Lines)
    (tmp_path / "y.csv").write_text("text\nalpha\n")
    for p in (path, tmp_path / "y.csv"):
        with pytest.raises(ConfigError, match=rf"{p.name}: a \.{p.suffix[1:]} file, which format='auto' would read"):
            TokenStore.build(tmp_path / "s", p, tok, field="content", progress=False)
    st = TokenStore.build(tmp_path / "s", path, tok, field="content", format="jsonl", progress=False)
    assert _texts(st, tok) == ["alpha", "beta"]


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_a_dataset_in_an_array_format_keeps_its_texts(tok, tmp_path, fmt):
    datasets = pytest.importorskip("datasets")
    if fmt == "torch":
        pytest.importorskip("torch")
    texts = ["a\x00", "b\x00\x00", "plain", ""]
    ds = datasets.Dataset.from_dict({"text": texts}).with_format(fmt)
    assert _texts(TokenStore.build(tmp_path / "s", ds, tok, progress=False), tok) == texts


def test_lines_are_cut_at_line_breaks_only(tok, tmp_path):
    path = tmp_path / "l.txt"
    path.write_text("one\x0cline\ntwo\u2028still two\x85\r\nthree\rfour\n\n  \nfive", encoding="utf-8", newline="")
    st = TokenStore.build(tmp_path / "s", path, tok, split_lines=True, progress=False)
    assert _texts(st, tok) == ["one\x0cline", "two\u2028still two\x85", "three", "four", "five"]
    assert [st.provenance(i)[2] for i in range(len(st))] == [0, 1, 2, 3, 6]  # (rows: lines, blank ones counted)


def test_token_arrays_given_one_pair_or_a_dict_are_refused_by_name(tmp_path):
    for shards, match in ((([2, 1], [5, 6, 7]), r"shards\[0\] is not a \(lengths, ids\) pair"),
                          ({"lengths": [2, 1], "ids": [5, 6, 7]}, "shards is a dict")):
        with pytest.raises(ConfigError, match=match):
            TokenStore.from_token_arrays(tmp_path / "s", shards, vocab_size=10)
        assert not (tmp_path / "s").exists()


def test_special_token_text_in_a_build_names_the_build_option(tok, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("hello <|endoftext|> world")
    with pytest.raises(InputError, match="pass special_text='plain' \\(CLI: --special-text plain\\)"):
        TokenStore.build(tmp_path / "s", path, tok, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = TokenStore.build(tmp_path / "s", path, tok, special_text="plain", progress=False)
    assert _texts(st, tok) == ["hello <|endoftext|> world"]
    # the documents' own separators read as the special token (as encode and store sft can): one id, not its text
    sp = TokenStore.build(tmp_path / "sp", path, tok, special_text="special", progress=False, append_eos=False)
    eos = tok.special_tokens["<|endoftext|>"]
    assert sp.get(0).tolist() == tok.encode("hello <|endoftext|> world", allowed_special="all")
    assert int((sp.get(0) == eos).sum()) == 1 and sp.manifest["build"]["special_text"] == "special"


def test_documents_ending_with_their_own_eos_are_counted_when_another_is_appended(tok, tmp_path):
    """special_text='special' reads a text's trailing '<|endoftext|>' as EOS, and the build appends another: the
    documents ending with two had been stored without a word. A warning counts them; --no-eos stores one."""
    from tokenmill.data import texts

    eos = tok.special_tokens["<|endoftext|>"]
    docs = ["the end<|endoftext|>", "then<|endoftext|>", "no eos here", "<|endoftext|> first", "<|endoftext|>"]
    with pytest.warns(UserWarning, match=": 3 documents end with two EOS .* pass append_eos=False "
                                         r"\(CLI: --no-eos\)"):
        st = TokenStore.build(tmp_path / "two", texts(docs), tok, special_text="special", progress=False)
    assert [st.get(i)[-2:].tolist() == [eos, eos] for i in range(len(docs))] == [True, True, False, False, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no EOS appended, or none in the texts: nothing to say)
        one = TokenStore.build(tmp_path / "one", texts(docs), tok, special_text="special", append_eos=False,
                               progress=False)
        TokenStore.build(tmp_path / "plain", texts(docs[2:3]), tok, special_text="special", progress=False)
    assert one.get(0).tolist()[-1] == eos and len(one) == len(docs)


def test_a_special_token_holding_a_semicolon_is_named_whole(gpt2_ranks_path, tmp_path):
    """The build's message gives what the text holds and where (``SpecialTokenError.found``) and its own advice;
    it had cut the tokenizer's message at its first ';', inside a token that holds one."""
    from tokenmill.errors import SpecialTokenError

    semi = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2", special_tokens={"<;eot;>": 50256})
    with pytest.raises(SpecialTokenError) as e:
        semi.encode("ab <;eot;>")
    assert e.value.found == "the text contains the special token '<;eot;>' at character 3"
    assert str(e.value).startswith(e.value.found + "; pass allowed_special=")
    (tmp_path / "a.txt").write_text("ab <;eot;>")
    with pytest.raises(InputError, match="special token '<;eot;>' at character 3; pass special_text='plain'"):
        TokenStore.build(tmp_path / "s", tmp_path / "a.txt", semi, eos_id=50256, progress=False)


def test_train_reads_jsonl_records_not_their_syntax(tmp_path):
    """``tokenmill train --input corpus.jsonl`` trained on the file as one text: its keys, quotes and escapes."""
    import json

    from tokenmill.cli import main
    from tokenmill.data.text import iter_documents

    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"body": f"hello world {i}", "id": i}) + "\n" for i in range(50)))
    assert list(iter_documents([path], field="body")) == [f"hello world {i}" for i in range(50)]
    assert main(["train", "--input", str(path), "--field", "body", "--vocab-size", "270", "--quiet",
                 "--out", str(tmp_path / "t.json")]) == 0
    tok = Tokenizer.load(tmp_path / "t.json")
    assert not any(b'"' in tok.token_bytes(i) or b"{" in tok.token_bytes(i) for i in range(256, tok.vocab_size))
    (tmp_path / "d.json").write_text("[]")
    with pytest.raises(ConfigError, match="d.json: a .json file"):
        list(iter_documents([tmp_path / "d.json"]))


def test_arrow_tables_and_columns_are_their_texts(tok, tmp_path):
    """A pyarrow Table was refused ("cannot read a source of type Table"), a string column read item by item as
    StringScalars (refused): both are their texts now, read a chunk at a time."""
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"id": [1, 2, 3], "text": ["alpha", "beta", "gamma"]})
    for i, src in enumerate((table, table.to_batches()[0], table.column("text"), pa.chunked_array([["alpha"], ["beta", "gamma"]]))):
        assert _texts(TokenStore.build(tmp_path / f"s{i}", src, tok, progress=False), tok) == ["alpha", "beta", "gamma"]
    with pytest.raises(ConfigError, match=r"a pyarrow Table with no column 'text' \(its columns: body\)"):
        TokenStore.build(tmp_path / "bad", pa.table({"body": ["x"]}), tok, progress=False)
    with pytest.raises(InputError, match=r"pyarrow StringArray: item 1 is missing \(None"):
        TokenStore.build(tmp_path / "bad", pa.array(["x", None]), tok, progress=False)


def test_a_tokenized_dataset_is_a_token_source_and_records_are_refused_by_name():
    """A ``datasets.Dataset`` with an ``input_ids`` column is a token source (a TrainingLoader, a Mixture and
    the planners take it as the column); one without, and a list of records, are refused naming the fix
    (both had failed with "document 0 has shape ()")."""
    datasets = pytest.importorskip("datasets")
    from tokenmill.data.source import as_source

    ids = [[5, 6, 7], [8], [9, 10]]
    ds = datasets.Dataset.from_dict({"input_ids": ids, "text": ["a", "b", "c"]})
    src = as_source(ds)
    assert src.lengths.tolist() == [3, 1, 2] and [src.get(i).tolist() for i in range(3)] == ids
    assert src.token_array.tolist() == as_source(ids).token_array.tolist()
    with pytest.raises(InputError, match="no 'input_ids' column \\(its columns: text\\)"):
        as_source(datasets.Dataset.from_dict({"text": ["a"]}))
    with pytest.raises(InputError, match="document 1 is a record"):
        as_source([[1, 2], {"input_ids": [3]}])
