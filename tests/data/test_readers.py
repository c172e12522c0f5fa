"""Sources: text files as `tokenmill train` reads them, JSONL, Parquet, datasets, iterables; errors."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.data import files, hf_dataset, texts
from tokenmill.data import readers as R
from tokenmill.data.readers import as_sources
from tokenmill.data.text import iter_documents
from tokenmill.errors import ConfigError, InputError


def docs(src):
    """The source's documents, checked to be what its batches hold, in the same order (where it can be read
    twice: not a generator)."""
    got = list(src.documents())
    if getattr(src, "items", None) is not None and iter(src.items) is src.items:
        return got
    batched = [(t, f, r) for texts, f, rows in src.batches() for t, r in zip(texts, rows, strict=True)]
    assert batched == got
    return got


@pytest.mark.parametrize("batch", [2, 4096])
@pytest.mark.parametrize("mode", ["file", "lines", "sep"])
def test_text_files_read_as_train_reads_them(tmp_path, mode, batch, monkeypatch):
    import tokenmill.data.readers as R

    monkeypatch.setattr(R, "_BLOCK", 7)  # tiny blocks: every line and separator crosses a block edge
    monkeypatch.setattr(R, "_BATCH_DOCS", batch)  # and batches of two lines (the lines' batches, as documents)
    a = tmp_path / "a.txt"
    a.write_bytes("one\r\ntwo  \n\n  \nthree\u2028four||five||||six||\n\n\nseven eight\nnine\x0cten\n".encode())
    b = tmp_path / "b.txt"
    b.write_bytes(b"")
    opts = {"file": {}, "lines": {"split_lines": True}, "sep": {"separator": "||"}}[mode]
    got = docs(files([a, b], **opts))
    want = list(iter_documents([a, b], **opts))
    assert [t for t, _, _ in got] == want
    assert all(f in (0, 1) for _, f, _ in got)
    if mode == "lines":  # rows: the line index (lines end at \n, \r\n, \r), blank lines counted but skipped
        assert [(t, r) for t, _, r in got] == [("one", 0), ("two  ", 1), ("three\u2028four||five||||six||", 4),
                                               ("seven eight", 7), ("nine\x0cten", 8)]


def test_jsonl_field_rows_and_compression(tmp_path):
    recs = [{"text": "alpha", "id": 1}, {"text": "βeta"}, {"text": ""}]
    body = "\n".join(json.dumps(r, ensure_ascii=False) for r in recs[:2]) + "\n\n" + json.dumps(recs[2]) + "\n"
    (tmp_path / "a.jsonl").write_text(body, encoding="utf-8")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"text": "gz doc"}) + "\n")
    zstd = pytest.importorskip("zstandard")
    (tmp_path / "c.jsonl.zst").write_bytes(zstd.ZstdCompressor().compress(b'{"text": "zst doc"}\n'))
    got = docs(files(tmp_path))  # a folder: its known files, sorted
    assert [(t, f, r) for t, f, r in got] == [("alpha", 0, 0), ("βeta", 0, 1), ("", 0, 3), ("gz doc", 1, 0),
                                              ("zst doc", 2, 0)]


def test_jsonl_errors_name_file_line_and_fields(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "ok"}\n{"text": oops}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: not valid JSON"):
        docs(files(p))
    p.write_text('{"text": "ok"}\n{"body": "x", "id": 3}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: no field 'text'; the record's fields are: 'body', 'id'"):
        docs(files(p))
    p.write_text('{"text": null}\n')
    with pytest.raises(InputError, match="field 'text' is null"):
        docs(files(p))


_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text()
                            | st.sampled_from(["\ud800", "a\udc80b", "\U0001f600\x00\"\\/", "\u2028", " padded \n", "é"]),
                            lambda v: st.lists(v, max_size=3) | st.dictionaries(st.text(max_size=4), v, max_size=3),
                            max_leaves=6)


_texts = st.text() | st.sampled_from(["\ud800", "a\udc80b", "\U0001f600\x00\"\\/", "\u2028", " padded \n", "é"])
_good = st.fixed_dictionaries({"text": _texts}, optional={"id": _json_values, "meta": _json_values, "Text": _json_values})
_bad = (_json_values.filter(lambda v: not isinstance(v, dict)) | st.dictionaries(st.sampled_from(["id", "body"]), _json_values)
        | st.fixed_dictionaries({"text": _json_values.filter(lambda v: not isinstance(v, str))}))


@settings(deadline=None, max_examples=150)
@given(recs=st.lists(_good, min_size=1, max_size=8), bad=st.none() | _bad, at=st.integers(0, 8),
       ascii_only=st.booleans(), blank=st.none() | st.integers(0, 8), sep=st.sampled_from([b"\n", b"\r\n"]),
       batch=st.sampled_from([1, 2, 3, 4096]), space=st.sampled_from([b"  ", b"\t \r", b"\x0c", b" \x0b "]))
def test_jsonl_records_read_as_json_loads_reads_them(tmp_path_factory, recs, bad, at, ascii_only, blank, sep, batch,
                                                     space):
    """Every JSONL line gives the text (or the error) ``json.loads`` gives: the fast decoder's lines (valid
    UTF-8 objects whose field is a string) and the others (NaN, lone surrogates, a field missing or not a
    string, not an object), rows counted over blank lines; a batch of lines at once (``batch`` lines at most)
    where every line is the first kind, else one by one. A line is blank by JSON's rules (spaces, tabs,
    CR): a line of a form feed or vertical tab is refused as json refuses it (it had been skipped as
    blank, by ``bytes.strip``)."""
    from tokenmill.data import readers as R

    if bad is not None:
        recs.insert(min(at, len(recs)), bad)
    lines = [json.dumps(r, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass") for r in recs]
    if blank is not None:
        lines.insert(min(blank, len(lines)), space)
    p = tmp_path_factory.mktemp("j") / "r.jsonl"
    p.write_bytes(sep.join(lines) + sep)
    want, error = [], None
    for row, raw in enumerate(lines):
        if not raw.strip(b" \t\r\n"):
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:  # a lone surrogate json.dumps wrote raw (ensure_ascii=False)
            error = "invalid UTF-8"
            break
        except json.JSONDecodeError:
            error = f":{row + 1}: not valid JSON"
            break
        if not isinstance(rec, dict):
            error = "not an object"
            break
        if "text" not in rec:
            error = "no field 'text'"
            break
        if not isinstance(rec["text"], str):
            error = "not a string"
            break
        try:  # a lone surrogate escaped ("\\ud800"): named by its line when read (errors="strict")
            rec["text"].encode("utf-8")
        except UnicodeEncodeError:
            error = "holds a lone surrogate escape"
            break
        want.append((rec["text"], row))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "_BATCH_DOCS", batch)
        if error is None:
            assert [(t, r) for t, _, r in docs(files(p))] == want
        else:
            with pytest.raises(InputError, match=error):
                docs(files(p))


def test_invalid_utf8_names_file_and_byte_offset(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"good line\nbad \xff here\n")
    with pytest.raises(InputError, match=r"x.txt: invalid UTF-8 at line 2, byte offset 14"):
        docs(files(p, split_lines=True))
    with pytest.raises(InputError, match=r"x.txt: invalid UTF-8 at byte offset 14"):
        docs(files(p))
    assert [t for t, _, _ in docs(files(p, split_lines=True, errors="replace"))] == ["good line", "bad \ufffd here"]
    # its line as the lines are cut (\n, \r\n, \r; blank lines counted), in a later block of a long file too
    q = tmp_path / "lines.txt"
    q.write_bytes(b"a\r\nb\rc\n\n" + b"filler line\n" * 200_000 + b"x \xe2\x82 y\n")
    with pytest.raises(InputError, match=f"lines.txt: invalid UTF-8 at line {4 + 200_000 + 1:,d}, byte offset"):
        docs(files(q, split_lines=True))
    j = tmp_path / "x.jsonl"
    j.write_bytes(b'{"text": "a"}\n{"text": "\xc3"}\n')
    with pytest.raises(InputError, match=r"x.jsonl:2: invalid UTF-8 at byte offset 24"):
        docs(files(j))


def test_a_jsonl_files_byte_order_mark_is_skipped(tmp_path):
    """A UTF-8 BOM before a JSONL file's first record (Windows editors write one) made its first line "not
    valid JSON"; it is skipped, and byte offsets in errors still count it. Anywhere else it is text."""
    j = tmp_path / "bom.jsonl"
    j.write_bytes(b'\xef\xbb\xbf{"text": "a"}\r\n{"text": "\xef\xbb\xbfb"}\n')
    assert [t for t, _, _ in docs(files(j))] == ["a", "\ufeffb"]
    j.write_bytes(b'\xef\xbb\xbf{"text": "\xff"}\n')
    with pytest.raises(InputError, match=r"bom.jsonl:1: invalid UTF-8 at byte offset 13"):
        docs(files(j))


def test_replaced_utf8_is_counted_by_every_reader(tmp_path):
    """``errors="replace"`` replaces invalid UTF-8 and counts it (``FileSource.replaced``: sequences, and the
    first one's file and byte offset) in every kind of file: whole text files, lines, separated pieces, JSONL
    lines and Parquet bytes; a U+FFFD spelled in valid UTF-8 is not counted; a second read counts anew."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    bad = b"ok \xef\xbf\xbd fine\nbad \xff\xfe here\n\nand \xc3 cut\n"  # 3 invalid pieces; U+FFFD spelled once
    (tmp_path / "t.txt").write_bytes(bad)
    (tmp_path / "j.jsonl").write_bytes(b'{"text": "a\xef\xbf\xbd"}\n{"text": "b\xff"}\n{"text": "c"}\n')
    pq.write_table(pa.table({"text": [b"ok", b"\xff\xff", b"z\xc3"]}), tmp_path / "b.parquet", row_group_size=2)
    cases = [(files(tmp_path / "t.txt", errors="replace"), 3, "t.txt", 16),
             (files(tmp_path / "t.txt", split_lines=True, errors="replace"), 3, "t.txt", 16),
             (files(tmp_path / "t.txt", separator="\n\n", errors="replace"), 3, "t.txt", 16),
             (files(tmp_path / "j.jsonl", errors="replace"), 1, "j.jsonl:2", 28),
             (files(tmp_path / "b.parquet", errors="replace"), 3, "b.parquet: row 1 (field 'text')", 0)]
    for src, count, where, offset in cases:
        for _ in range(2):  # read twice: the count is the last read's
            got = [t for t, _, _ in src.documents()]
            assert src.replaced.count == count, (where, src.replaced)
            assert src.replaced.where.endswith(where) and src.replaced.offset == offset
            assert sum(t.count("\ufffd") for t in got) == count + (where.startswith(("t.", "j.")))
        # the store's path (whole text files as their bytes) counts the same
        list(src.utf8_batches())
        assert src.replaced.count == count
    good = files(tmp_path / "j.jsonl")
    with pytest.raises(InputError, match=r"j.jsonl:2: invalid UTF-8 at byte offset 28"):
        docs(good)
    assert good.replaced.count == 0
    assert "replaced 3 invalid UTF-8 sequences with U+FFFD" in cases[0][0].replaced.note()


@pytest.mark.parametrize("batch", [1, 3, 4096])
@pytest.mark.parametrize("first_block", [8, 1 << 18])
def test_jsonl_errors_name_line_and_byte_offset_in_any_batch(tmp_path, monkeypatch, batch, first_block):
    """Lines read in batches and blocks of any size: an error names the line and the byte offset where the
    file holds it, and the records before it are read as they are."""
    from tokenmill.data import readers as R

    monkeypatch.setattr(R, "_BATCH_DOCS", batch)
    monkeypatch.setattr(R, "_FIRST_BLOCK", first_block)
    lines = [json.dumps({"text": f"record {i} é"}, ensure_ascii=False).encode() for i in range(10)]
    good = b"\n".join(lines) + b"\n"
    j = tmp_path / "x.jsonl"
    j.write_bytes(good + b'{"text": "a\xff"}\n' + good)
    with pytest.raises(InputError, match=rf"x.jsonl:11: invalid UTF-8 at byte offset {len(good) + 11}"):
        docs(files(j))
    j.write_bytes(good + b'{"text": 7}\n')
    with pytest.raises(InputError, match=r"x.jsonl:11: field 'text' is int"):
        docs(files(j))
    j.write_bytes(good + b"\n \n" + good)
    got = docs(files(j))
    assert [r for _, _, r in got] == list(range(10)) + list(range(12, 22))
    assert [t for t, _, _ in got] == [f"record {i % 10} é" for i in range(20)]


def test_parquet_column_streamed_by_row_group(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"content": [f"row {i}" for i in range(25)], "n": list(range(25))})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=4)
    assert pq.ParquetFile(tmp_path / "t.parquet").num_row_groups == 7
    got = docs(files(tmp_path / "*.parquet", field="content"))
    assert [(t, r) for t, _, r in got] == [(f"row {i}", i) for i in range(25)]
    with pytest.raises(InputError, match=r"no column 'text'; the columns are: content, n"):
        docs(files(tmp_path / "t.parquet"))
    # a row group at a time: a null names its row; bytes are decoded (errors="replace" as asked)
    pq.write_table(pa.table({"text": ["a", "b", "c", None, "e"]}), tmp_path / "n.parquet", row_group_size=2)
    with pytest.raises(InputError, match=r"n.parquet: row 3: field 'text' is null"):
        docs(files(tmp_path / "n.parquet"))
    pq.write_table(pa.table({"text": [b"ok", b"bad \xff", b"z"]}), tmp_path / "b.parquet", row_group_size=2)
    assert [(t, r) for t, _, r in docs(files(tmp_path / "b.parquet", errors="replace"))] == [
        ("ok", 0), ("bad \ufffd", 1), ("z", 2)]
    assert [len(b) for b, _, _ in files(tmp_path / "t.parquet", field="content").batches()] == [4] * 6 + [1]


def test_hf_dataset_and_iterables(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"body": ["a", "b", "c"], "k": [1, 2, 3]})
    assert [(t, r) for t, _, r in docs(hf_dataset(ds, field="body"))] == [("a", 0), ("b", 1), ("c", 2)]
    it = ds.to_iterable_dataset()
    assert [t for t, _, _ in docs(as_sources(it, field="body")[0])] == ["a", "b", "c"]
    dd = datasets.DatasetDict({"train": ds, "test": ds})  # splits: pick one (it listed the accepted types)
    with pytest.raises(ConfigError, match=r"DatasetDict holds splits \('train', 'test'\), not rows.*ds\['train'\]"):
        as_sources(dd)
    with pytest.raises(InputError, match=r"no column 'text'; the columns are: body, k"):
        docs(hf_dataset(ds))
    # the dataset's own batches: rows counted across them; a batch holding a non-str goes row by row
    ds = datasets.Dataset.from_dict({"text": [f"doc {i}" for i in range(7)]})
    got = docs(hf_dataset(ds, batch_size=3))
    assert [(t, r) for t, _, r in got] == [(f"doc {i}", i) for i in range(7)]
    assert [len(b) for b, _, _ in hf_dataset(ds, batch_size=3).batches()] == [3, 3, 1]
    ds = datasets.Dataset.from_dict({"text": ["a", "b", None, "d"]})
    with pytest.raises(InputError, match=r"row 2: field 'text' is null"):
        docs(hf_dataset(ds, batch_size=2))
    with pytest.raises(InputError, match=r"row 2: field 'text' is null"):
        list(hf_dataset(ds, batch_size=2).batches())
    ds = datasets.Dataset.from_dict({"text": [b"bytes \xc3\xa9", b"x"]})
    assert [t for t, _, _ in docs(hf_dataset(ds, batch_size=1))] == ["bytes é", "x"]
    gen = (s for s in ["x", "y"])
    assert [t for t, _, _ in docs(as_sources(gen)[0])] == ["x", "y"]
    with pytest.raises(InputError, match="item 1 is a int"):
        docs(texts(["x", 3]))
    with pytest.MonkeyPatch.context() as mp:  # a list in slices: rows across them, a bad item named by its place
        mp.setattr(R, "_BATCH_DOCS", 2)
        class Sub(str):
            pass
        items = ["a", Sub("b"), "c", "d", "e"]
        assert [(t, r) for t, _, r in docs(texts(items))] == [(t, i) for i, t in enumerate(items)]
        assert [list(b) for b, _, _ in texts(items).batches()] == [["a", "b"], ["c", "d"], ["e"]]
        with pytest.raises(InputError, match="item 3 is a bytes"):
            list(texts(["a", "b", "c", b"d"]).batches())


def test_paths_globs_folders_and_bad_inputs(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "b.txt").write_text("b")
    (tmp_path / "d" / "sub" / "a.txt").write_text("a")
    (tmp_path / "d" / "skip.bin").write_bytes(b"\0")
    src = files(tmp_path / "d")
    assert [os.path.basename(f) for f in src.files()] == ["b.txt", "a.txt"]  # sorted by path: d/b.txt < d/sub/
    with pytest.raises(InputError, match="matches no file"):
        files(str(tmp_path / "nothing*.txt"))
    with pytest.raises(InputError, match="does not exist"):
        files(tmp_path / "missing.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no .txt"):
        files(tmp_path / "empty")
    with pytest.raises(InputError, match=r"does not exist \(if it is a text given in Python"):
        as_sources(["hello world"])  # a list of str is a list of paths
    # texts that cannot be paths: a long one had raised the file system's bare OSError ("File name too long"), one
    # with brackets echoed itself whole as a glob that "matches no file"
    for text, says in (("first document " * 300, r"^input 'first document .*'\.\.\. \(4,500 characters\) is no path"),
                       ("line one\nline two", r"^input 'line one\\nline two' is no path \(it holds a line break\)"),
                       ("x" * 200 + " [y]", r"^the pattern 'x+'\.\.\. \(204 characters\) matches no file")):
        with pytest.raises(InputError, match=says + r".*tokenmill\.data\.texts"):
            as_sources([text])
    named = tmp_path / "notes\nday 1.txt"  # (a real file whose name holds a line break is read)
    named.write_text("a note")
    assert [d for d, _, _ in files([str(named)]).documents()] == ["a note"]
    # a list of paths in the list: one source of their files (their names were stored as two documents)
    a, b = tmp_path / "d" / "b.txt", tmp_path / "d" / "sub" / "a.txt"
    c = tmp_path / "c.txt"
    c.write_text("c")
    two = as_sources([[str(a), b], str(c)])
    assert len(two) == 2 and two[0].files() == [str(a), str(b)]
    assert [t for t, _, _ in docs(two[0])] == [a.read_text(), b.read_text()]
    # one file named twice (a path twice, a folder and a file in it, a link) would be read and stored twice
    (tmp_path / "d" / "link.txt").symlink_to(a)
    for twice in ([[str(a), b], str(a)], [str(a), str(tmp_path / "d" / "." / "b.txt")], [str(tmp_path / "d")],
                  [str(tmp_path / "d" / "sub"), str(tmp_path / "d" / "sub" / "a.txt")]):
        with pytest.raises(InputError, match="read, stored and counted twice"):
            as_sources(twice)
    with pytest.raises(InputError, match="read, stored and counted twice"):
        files([a, a])  # (one Path object twice)
    (tmp_path / "d" / "link.txt").unlink()
    # a glob's folders are read as folders named as inputs are (the shell's expansion of the pattern)
    (tmp_path / "g" / "en").mkdir(parents=True)
    (tmp_path / "g" / "fr").mkdir()
    (tmp_path / "g" / "en" / "a.txt").write_text("en")
    (tmp_path / "g" / "fr" / "a.txt").write_text("fr")
    (tmp_path / "g" / "top.txt").write_text("top")
    assert [t for t, _, _ in docs(files(str(tmp_path / "g" / "*")))] == ["en", "fr", "top"]
    (tmp_path / "g" / "top.txt").unlink()
    assert [t for t, _, _ in docs(files(str(tmp_path / "g" / "*")))] == ["en", "fr"]
    (tmp_path / "h" / "x").mkdir(parents=True)
    with pytest.raises(InputError, match="matches only folders"):
        files(str(tmp_path / "h" / "*"))
    with pytest.raises(InputError, match="no input given"):
        files([])
    # an option none of the inputs reads had been ignored without a word
    (tmp_path / "r.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(ConfigError, match=r"split_lines=True \(CLI: --split-lines\) cuts text files into documents, but the input holds jsonl"):
        as_sources([str(tmp_path / "r.jsonl")], split_lines=True)
    with pytest.raises(ConfigError, match="separator='|' cuts text files"):
        as_sources([str(tmp_path / "r.jsonl")], separator="|")
    with pytest.raises(ConfigError, match=r"field='body' \(CLI: --field\) names a JSONL field or Parquet column, but the input holds text"):
        as_sources([str(c)], field="body")
    assert len(as_sources([str(c), str(tmp_path / "r.jsonl")], split_lines=True)) == 2  # (the text file is split)
    with pytest.raises(InputError, match="does not exist"):
        as_sources([["hello", "world"]])
    with pytest.raises(ConfigError, match="split_lines=True or separator"):
        files(tmp_path / "d", split_lines=True, separator="|")
    odd = os.path.join(os.fsencode(tmp_path / "d"), b"x\xffy.txt")
    with open(odd, "w") as f:
        f.write("text")
    with pytest.raises(InputError, match=r"x\\xffy.txt' is not valid UTF-8.*rename"):
        files(tmp_path / "d")


def test_a_pipe_of_records_is_refused_where_it_would_be_read_as_text(tmp_path):
    """train and windows read a FIFO (``<(cmd)``, standard input) as text as it streams; one that a .jsonl name or
    format='jsonl' says holds records had been read as one text (JSON syntax trained on, --field unchecked)."""
    from tokenmill.data.text import iter_documents

    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)  # (no writer: the refusal comes before the pipe is opened)
    with pytest.raises(InputError, match=r"records.jsonl is a pipe \(a FIFO, or standard input\), which is read as "
                                         r"text only, and its name says it holds jsonl records; write them to a file"):
        list(iter_documents([fifo]))
    plain = tmp_path / "plain"
    os.mkfifo(plain)
    with pytest.raises(InputError, match=r"format='jsonl' says it holds jsonl records"):
        list(iter_documents([plain], format="jsonl", field="body"))


def test_fifo_is_refused(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"pipe.txt' is a FIFO; only regular files"):
        docs(files(fifo))
    with pytest.raises(InputError, match="is a character device"):
        docs(files("/dev/null"))


def test_texts_refuses_one_str():
    """One str is an iterable of characters: it was read as one document per character."""
    for bad, says in (("hello", "not one str"), (b"hi", "not one bytes"), (None, r"\(strs\), not NoneType"),
                      (5, r"\(strs\), not int")):
        with pytest.raises(ConfigError, match=rf"^texts takes an iterable of documents,? {says}"):
            texts(bad)
    assert texts(["hello"]).items == ["hello"]


def test_damaged_compressed_and_parquet_files_are_named_and_hidden_files_left_out(tmp_path):
    """A ``.zst`` cut inside a frame (an interrupted copy) built a store of the documents before the cut,
    silently; corrupt ``.gz`` / ``.zst`` data raised bare zlib / zstandard errors, a damaged Parquet page a
    bare OSError, a deeply nested JSONL line a RecursionError; a folder's hidden copies
    (``.ipynb_checkpoints``) were read a second time."""
    import gzip
    import json
    import re

    zstd = pytest.importorskip("zstandard")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from tokenmill.data.readers import as_sources
    from tokenmill.errors import InputError

    def docs(path, **kw):
        return [t for src in as_sources([str(path)], **kw) for t, _, _ in src.documents()]

    lines = [json.dumps({"text": f"document number {i}"}) + "\n" for i in range(3000)]
    co = zstd.ZstdCompressor().compressobj()
    data, cuts = b"", []
    for k in range(0, 3000, 1000):
        data += co.compress("".join(lines[k:k + 1000]).encode()) + co.flush(zstd.COMPRESSOBJ_FLUSH_BLOCK)
        cuts.append(len(data))
    data += co.flush()
    (tmp_path / "full.jsonl.zst").write_bytes(data)
    assert len(docs(tmp_path / "full.jsonl.zst")) == 3000
    two = zstd.ZstdCompressor().compress(b"one\n") + zstd.ZstdCompressor().compress(b"two\n")
    (tmp_path / "two.txt.zst").write_bytes(two)
    assert docs(tmp_path / "two.txt.zst", split_lines=True) == ["one", "two"]  # frames back to back: one file
    for name, raw, says in [("cut.jsonl.zst", data[:cuts[1]], "truncated zstd data: the file ends inside the frame that starts"),
                            ("bad.jsonl.zst", b"not zstd\n", "cannot read (corrupt or truncated compressed data?)")]:
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(InputError, match=re.escape(f"{name}: ") + ".*" + re.escape(says)):
            docs(tmp_path / name)
    g = gzip.compress("".join(lines).encode())
    (tmp_path / "c.jsonl.gz").write_bytes(g[:100] + b"\0" * 50 + g[150:])
    with pytest.raises(InputError, match=r"c.jsonl.gz: cannot read \(corrupt or truncated compressed data\?\)"):
        docs(tmp_path / "c.jsonl.gz")
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(2500)]}), tmp_path / "p.parquet", row_group_size=300)
    b = bytearray((tmp_path / "p.parquet").read_bytes())
    b[200:2000] = b"\x55" * 1800
    (tmp_path / "p.parquet").write_bytes(bytes(b))
    with pytest.raises(InputError, match=r"p.parquet: row group 0 \(from row 0\) is not readable"):
        docs(tmp_path / "p.parquet")
    (tmp_path / "n.jsonl").write_bytes(b'{"a":' + b"[" * 5000 + b"]" * 5000 + b',"text":"t"}\n')
    with pytest.raises(InputError, match=r"n.jsonl:1: its JSON nests too deeply"):
        docs(tmp_path / "n.jsonl")
    folder = tmp_path / "c"
    (folder / ".ipynb_checkpoints").mkdir(parents=True)
    (folder / ".git").mkdir()
    for name, text in {"x.jsonl": '{"text":"x"}\n', ".ipynb_checkpoints/x-checkpoint.jsonl": '{"text":"x"}\n',
                       ".git/notes.txt": "git", ".hidden.txt": "h", "notes.md": "md"}.items():
        (folder / name).write_text(text)
    assert docs(folder) == ["md", "x"]


def test_a_folders_files_of_another_type_are_counted_not_dropped_silently(tmp_path):
    """A folder's ``data.json`` or ``.bz2`` files were skipped without a word (nothing read, nothing said)."""
    from tokenmill.data.readers import as_sources
    from tokenmill.data.text import expand_inputs

    folder = tmp_path / "c"
    (folder / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.md", "data.json", "sub/x.bz2", "sub/y.csv", "z.log", ".hidden.csv"):
        (folder / name).write_text(name)
    with pytest.warns(UserWarning, match=r"4 files of another type left out \(data.json, sub/x.bz2, sub/y.csv, \.\.\.\); "
                                         "name a file as an input to read it"):
        srcs = as_sources([str(folder)])
    assert [t for s in srcs for t, _, _ in s.documents()] == ["a.txt", "b.md"]
    assert [t for s in as_sources([str(folder / "z.log")]) for t, _, _ in s.documents()] == ["z.log"]
    # (a .json file named as an input: which of its forms it holds is the caller's to say)
    with pytest.raises(ConfigError, match="data.json: a .json file, which format='auto' would read as one text"):
        as_sources([str(folder / "data.json")])
    assert [t for s in as_sources([str(folder / "data.json")], format="text") for t, _, _ in s.documents()] == \
        ["data.json"]
    # `tokenmill train --input DIR` reads what a store build reads of it (it had read the .txt files alone)
    with pytest.warns(UserWarning, match=r"4 files of another type left out \(data.json, sub/x.bz2, sub/y.csv, \.\.\.\)"):
        assert [p.name for p in expand_inputs([folder])] == ["a.txt", "b.md"]
    with pytest.raises(InputError, match="read, stored and counted twice"), pytest.warns(UserWarning):
        expand_inputs([folder, folder / "a.txt"])  # training would have counted its chunks twice


def test_training_reads_a_compressed_file_as_a_store_does(tmp_path):
    """`tokenmill train --input c.txt.gz` read the compressed bytes as text: an invalid UTF-8 error, or with
    --errors replace a tokenizer trained on gzip's bytes."""
    from tokenmill.data.text import Replaced, iter_documents

    with gzip.open(tmp_path / "c.txt.gz", "wt", encoding="utf-8") as f:
        f.write("hello world\nsecond line\n")
    (tmp_path / "c.txt.bz2").write_bytes(b"BZh9")
    for errors in ("strict", "replace"):
        replaced = Replaced()
        assert list(iter_documents([tmp_path / "c.txt.gz"], split_lines=True, errors=errors, replaced=replaced)) == \
            ["hello world", "second line"] and replaced.count == 0
    assert list(iter_documents([tmp_path / "c.txt.gz"])) == ["hello world\nsecond line\n"]
    with pytest.raises(InputError, match="c.txt.bz2: an archive or a compression tokenmill does not read"):
        list(iter_documents([tmp_path / "c.txt.bz2"]))


def test_a_compressed_parquet_file_is_named_as_such(tmp_path):
    """``x.parquet.gz`` was picked up as Parquet and refused as "magic bytes not found in footer"."""
    import gzip

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from tokenmill.data.readers import as_sources
    from tokenmill.errors import InputError

    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "q.parquet")
    (tmp_path / "q.parquet.gz").write_bytes(gzip.compress((tmp_path / "q.parquet").read_bytes()))
    with pytest.raises(InputError, match="q.parquet.gz: a compressed Parquet file; .* decompress it first"):
        [t for src in as_sources([str(tmp_path / "q.parquet.gz")]) for t, _, _ in src.documents()]


def test_reader_edges_named_or_read_as_documented(tmp_path):
    """A JSON integer past Python's digit limit raised a bare ValueError; hf_dataset(batch_size=0) spun forever
    (-1 a SystemError); a bytes or int separator a bare AttributeError; a Parquet string column holding invalid
    UTF-8 was "damaged: write it again" and errors="replace" did nothing; a lone surrogate escape in JSONL was
    named as "row 1 (shard 0)" without the remedy; .bz2/.xz/.tar.gz were read as text (a tar.gz became one
    document of raw tar bytes."""
    import bz2
    import io
    import tarfile

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    datasets = pytest.importorskip("datasets")
    from tokenmill.data.readers import as_sources, hf_dataset
    from tokenmill.errors import ConfigError, InputError

    def docs(path, **kw):
        return [t for src in as_sources([str(path)], **kw) for t, _, _ in src.documents()]

    big = "1" + "0" * 5000
    (tmp_path / "a.jsonl").write_text('{"text": ' + big + '}\n')
    with pytest.raises(InputError, match=r"a.jsonl:1: field 'text' is Decimal, not a string"):
        docs(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text('{"x": NaN, "n": ' + big + ', "text": "ok"}\n')
    assert docs(tmp_path / "b.jsonl") == ["ok"]  # a huge number in a field nobody reads: as msgspec's path
    ds = datasets.Dataset.from_dict({"text": ["a", "b", "c"]})
    for bad in (0, -1, 2.5, None):
        with pytest.raises(ConfigError, match="batch_size"):
            hf_dataset(ds, batch_size=bad)
    assert [t for t, _, _ in hf_dataset(ds, batch_size=2).documents()] == ["a", "b", "c"]
    (tmp_path / "s.txt").write_text("a|b")
    for sep, says in ((b"|", "is a bytes"), (5, "is a int"), ("\ud800", "lone surrogate")):
        with pytest.raises(ConfigError, match=says):
            docs(tmp_path / "s.txt", separator=sep)
    arr = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(bytes([0, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0])),
                                                 pa.py_buffer(b"okx\xffy")])
    pq.write_table(pa.table({"text": arr}), tmp_path / "u.parquet")
    with pytest.raises(InputError, match=r"u.parquet: row 1 \(field 'text'\): invalid UTF-8 at byte offset 1.*"
                                         r"errors='replace'"):
        docs(tmp_path / "u.parquet")
    assert docs(tmp_path / "u.parquet", errors="replace") == ["ok", "x\ufffdy"]
    (tmp_path / "l.jsonl").write_text('{"text": "a"}\n{"text": "x\\ud800"}\n')
    with pytest.raises(InputError, match=r"l.jsonl:2: field 'text' holds a lone surrogate escape .*"
                                         r"errors='replace' \(CLI: --errors replace\)"):
        docs(tmp_path / "l.jsonl")
    raw = b'{"text": "a"}\n'
    (tmp_path / "c.jsonl.bz2").write_bytes(bz2.compress(raw))
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w:gz") as tf:
        info = tarfile.TarInfo("x.jsonl")
        info.size = len(raw)
        tf.addfile(info, io.BytesIO(raw))
    (tmp_path / "corpus.tar.gz").write_bytes(bio.getvalue())
    for name in ("c.jsonl.bz2", "corpus.tar.gz"):
        with pytest.raises(InputError, match=f"{name}: an archive or a compression tokenmill does not read"):
            docs(tmp_path / name)


def test_a_folders_pipes_sockets_and_links_to_them_are_named(tmp_path):
    """A FIFO or socket inside a folder was left out without a word (neither a file nor a folder), and a link to
    an existing FIFO was called a link to something that "does not exist"."""
    import socket

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a")
    os.mkfifo(data / "b.txt")
    with pytest.raises(InputError, match=r"b.txt' is a FIFO \(a named pipe\), not a regular file: a folder's inputs"):
        files(data)
    os.unlink(data / "b.txt")
    os.mkfifo(tmp_path / "pipe.txt")
    (data / "c.txt").symlink_to(tmp_path / "pipe.txt")
    with pytest.raises(InputError, match=r"c.txt' is a symbolic link to .*pipe.txt', which is a FIFO"):
        files(data)
    os.unlink(data / "c.txt")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(data / "s.txt"))
        with pytest.raises(InputError, match=r"s.txt' is a socket, not a regular file"):
            files(data)
    finally:
        sock.close()
    os.unlink(data / "s.txt")
    assert files(data).paths == [data / "a.txt"]


def test_a_dotted_field_says_fields_are_read_by_their_top_level_name(tmp_path):
    """--field meta.text on {"meta": {"text": ...}} said only "no field 'meta.text'; the fields are: 'meta'"."""
    (tmp_path / "n.jsonl").write_text('{"meta": {"text": "x"}}\n')
    with pytest.raises(InputError, match=r"no field 'meta.text'; .* \(a field is read by its top-level name: "
                                         r"'meta.text' is not looked up inside 'meta'; flatten the records first"):
        list(files(tmp_path / "n.jsonl", field="meta.text").documents())
    with pytest.raises(InputError, match=r"no field 'body'; the record's fields are: 'meta'; pass field=\.\.\. "
                                         r"\(CLI: --field\)$"):
        list(files(tmp_path / "n.jsonl", field="body").documents())


def test_binary_files_under_a_text_name_say_what_they_start_as(tmp_path):
    """gzip data named .jsonl, UTF-16 text, Parquet named .txt: "invalid UTF-8 at byte offset 0" said nothing of
    why; the message names what the file's first bytes are."""
    (tmp_path / "z.jsonl").write_bytes(gzip.compress(b'{"text": "x"}\n'))
    (tmp_path / "u.txt").write_bytes("hi".encode("utf-16"))
    (tmp_path / "p.txt").write_bytes(b"PAR1\x15\x04\x00\xff")
    for name, what in (("z.jsonl", "gzip-compressed data: name it .gz"), ("u.txt", "UTF-16 \\(little-endian\\) text"),
                       ("p.txt", "a Parquet file: name it .parquet")):
        with pytest.raises(InputError, match=f"invalid UTF-8 at byte offset \\d \\(.*; the file starts as {what}"):
            list(files(tmp_path / name).documents())
    (tmp_path / "late.txt").write_bytes(b"fine text, then \x1f\x8b\xff")  # (bytes past the start: no guess)
    with pytest.raises(InputError, match=r"byte offset 17 \(invalid start byte\); fix the input"):
        list(files(tmp_path / "late.txt").documents())


def test_jsonl_cut_by_lone_carriage_returns_says_so(tmp_path):
    """Records cut by CR alone read as one line, "Extra data at column 15", which said nothing of why."""
    (tmp_path / "cr.jsonl").write_bytes(b'{"text": "a"}\r{"text": "b"}\r')
    with pytest.raises(InputError, match=r"cr.jsonl:1: not valid JSON \(Extra data at column 15\); .* the file's "
                                         r"lines end with CR alone"):
        list(files(tmp_path / "cr.jsonl").documents())
    (tmp_path / "crlf.jsonl").write_bytes(b'{"text": "a"}\r\n{"text": "b"}\r\n')  # (CRLF: read as before)
    assert [t for t, _, _ in files(tmp_path / "crlf.jsonl").documents()] == ["a", "b"]


def test_jsonl_records_name_the_files_byte_offset(tmp_path):
    """The chat reader said an invalid byte's offset within its line (40), where every other reader says the
    file's."""
    from tokenmill.data.readers import jsonl_records

    first = '\ufeff{"messages": []}\n\n'.encode()
    (tmp_path / "c.jsonl").write_bytes(first + b'{"messages": [{"role": "user", "content": "b\xff"}]}\n')
    at = len(first) + len(b'{"messages": [{"role": "user", "content": "b')
    with pytest.raises(InputError, match=rf"c.jsonl:3: invalid UTF-8 at byte offset {at} "):
        list(jsonl_records(tmp_path / "c.jsonl"))


def test_a_folders_symbolic_links_are_followed_as_a_glob_follows_them(tmp_path):
    """A folder holding a link to another folder had been read without that folder's files and without a word
    (``rglob`` did not follow it: 600 files of a probe's folder became none), and a broken link was left out
    too, where the glob ``folder/*`` read the linked folder and named the broken link. Now a folder's links
    are followed as the glob follows them; a broken link, a loop and a folder reached twice are errors."""
    from tokenmill.data.text import expand_inputs

    def docs(src):
        return [t for s in as_sources([str(src)]) for t, _, _ in s.documents()]

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "b.txt").write_text("b")
    (tmp_path / "other" / "c.txt").write_text("c")
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a")
    (data / "sub").symlink_to("../other")
    (data / "d.txt").symlink_to(tmp_path / "other" / "c.txt")  # (a link to a file read twice: refused below)
    with pytest.raises(InputError, match="d.txt' and .*c.txt', the same file"):
        docs(data)
    (data / "d.txt").unlink()
    (tmp_path / "e.txt").write_text("e")
    (data / "e.txt").symlink_to(tmp_path / "e.txt")
    assert docs(data) == ["a", "e", "b", "c"] == docs(str(data / "*"))
    assert [p.name for p in expand_inputs([data])] == ["a.txt", "e.txt", "b.txt", "c.txt"]
    (data / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    for src in (data, str(data / "*")):
        with pytest.raises(InputError, match="gone.txt"):
            docs(src)
    (data / "gone.txt").unlink()
    (tmp_path / "other" / "loop").symlink_to("..")  # other/loop -> tmp_path, which holds data/sub -> other
    with pytest.raises(InputError, match=r"loop/data' is the folder .*data' again, which holds it \(a loop"):
        docs(data)
    (tmp_path / "other" / "loop").unlink()
    (data / "again").symlink_to("../other")
    with pytest.raises(InputError, match="the same file"):
        docs(data)
