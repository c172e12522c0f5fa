"""Megatron .bin/.idx export: megatron-core's IndexedDataset reads identical documents; we read it back."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import TokenStore, pack
from tokenmill.data import texts
from tokenmill.errors import FormatError

from .conftest import make_corpus


@pytest.fixture
def store(tmp_path, tok):
    make_corpus(tmp_path / "in", n_files=4)
    return TokenStore.build(tmp_path / "s", tmp_path / "in", tok, split_lines=True, shard_bytes=300, workers=1,
                            progress=False)


def test_megatron_core_reads_identical_documents(store, tmp_path):
    pytest.importorskip("torch")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    bin_path, idx_path = store.export_megatron(tmp_path / "mt" / "corpus_text_document")
    assert bin_path.name == "corpus_text_document.bin" and idx_path.exists()
    ds = indexed.IndexedDataset(str(tmp_path / "mt" / "corpus_text_document"))
    assert len(ds) == len(store)
    for i in range(len(store)):
        got = ds[i]
        assert got.dtype == np.uint16 and got.tolist() == store.get(i).tolist()
    assert np.array_equal(ds.sequence_lengths, store.lengths)
    assert np.array_equal(ds.document_indices, np.arange(len(store) + 1))


def test_a_document_of_no_sequence_reads_as_megatron_core_reads_it(tmp_path):
    """Megatron-LM's preprocess_data.py adds an empty record as a document of no sequence (its index repeated):
    megatron-core reads the pair, and so does tokenmill, as an empty document (it had refused the header)."""
    torch = pytest.importorskip("torch")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    prefix = str(tmp_path / "c_text_document")
    b = indexed.IndexedDatasetBuilder(prefix + ".bin", dtype=np.int32)
    for ids, lens in (([1, 2, 3], [3]), ([], []), ([4, 5], [2]), ([], [])):
        b.add_document(torch.tensor(ids, dtype=torch.int64), lens)
    b.finalize(prefix + ".idx")
    assert indexed.IndexedDataset(prefix).document_indices.tolist() == [0, 1, 1, 2, 2]
    back = TokenStore.from_megatron(prefix)
    assert [back.get(i).tolist() for i in range(len(back))] == [[1, 2, 3], [], [4, 5], []]


def test_from_megatron_round_trip_and_views(store, tmp_path, wide_tok):
    store.export_megatron(tmp_path / "m")
    back = TokenStore.from_megatron(tmp_path / "m")
    assert len(back) == len(store) and np.array_equal(back.lengths, store.lengths)
    assert all(back.get(i).tolist() == store.get(i).tolist() for i in range(len(store)))
    plan = pack(back.lengths, 64)
    a, b = list(plan.batches(back, batch_size=4, pad_id=0)), list(plan.batches(store, batch_size=4, pad_id=0))
    assert all(np.array_equal(x.input_ids, y.input_ids) for x, y in zip(a, b, strict=True))
    _, val = store.split(0.3, seed=1)
    val.export_megatron(tmp_path / "v")
    v = TokenStore.from_megatron(tmp_path / "v")
    assert [v.get(i).tolist() for i in range(len(v))] == [val.get(i).tolist() for i in range(len(val))]
    w = TokenStore.build(tmp_path / "w", texts(["ab"]), wide_tok, workers=1, progress=False)
    w.export_megatron(tmp_path / "w32")  # uint32 ids travel as int32 (Megatron has no uint32 code)
    assert TokenStore.from_megatron(tmp_path / "w32").get(0).tolist() == [70_097, 70_098, 70_299]
    assert back.fingerprint == TokenStore.from_megatron(tmp_path / "m").fingerprint != v.fingerprint
    from tokenmill.errors import FormatError

    with pytest.raises(FormatError, match=r"m.bin.idx does not exist; pass the pair's prefix without the suffix"):
        TokenStore.from_megatron(tmp_path / "m.bin")  # (the file the user sees, for the pair's prefix)


def test_megatron_prefix_file_changed_under_the_map_and_int32_limit(store, tmp_path):
    """A prefix naming no file is a ConfigError (it was a bare ValueError); a .bin truncated after it was
    opened is a FormatError on the next read (it was a SIGBUS that killed the interpreter); ids up to
    2**31 - 1 (a vocabulary of 2**31) fit Megatron's int32 (refused one short)."""
    from tokenmill.errors import ConfigError

    for bad in ("", ".", "/", "out/"):
        with pytest.raises(ConfigError, match="Megatron prefix"):
            store.export_megatron(bad)
        with pytest.raises(ConfigError, match="Megatron prefix"):
            TokenStore.from_megatron(bad)
    store.export_megatron(tmp_path / "m")
    m = TokenStore.from_megatron(tmp_path / "m")
    first = m.get(0).tolist()
    assert first == store.get(0).tolist()
    with open(tmp_path / "m.bin", "r+b") as f:
        f.truncate(2)
    with pytest.raises(FormatError, match=r"m.bin: 2 bytes now, .* when it was opened"):
        m.get(len(m) - 1)
    with pytest.raises(FormatError, match="when it was opened"):
        pack(m.lengths, 64).batches(m, batch_size=2, pad_id=0).__next__()
    from tokenmill.errors import InputError

    empty = TokenStore.from_token_arrays(tmp_path / "empty", [([0, 0], [])], vocab_size=10)
    with pytest.raises(InputError, match="2 documents and no tokens.*nothing was written"):
        empty.export_megatron(tmp_path / "e")  # (megatron-core cannot map the empty .bin it would be)
    assert not list(tmp_path.glob("e.*"))
    top = TokenStore.from_token_arrays(tmp_path / "top", [([1], [2**31 - 1])], vocab_size=2**31)
    top.export_megatron(tmp_path / "top32")
    assert TokenStore.from_megatron(tmp_path / "top32").get(0).tolist() == [2**31 - 1]


def test_from_megatron_refuses_damaged_files(store, tmp_path):
    store.export_megatron(tmp_path / "m")
    idx = tmp_path / "m.idx"
    data = idx.read_bytes()
    idx.write_bytes(b"NOTANIDX!" + data[9:])
    with pytest.raises(FormatError, match="bad header"):
        TokenStore.from_megatron(tmp_path / "m")
    idx.write_bytes(data[:40])
    with pytest.raises(FormatError, match="truncated"):
        TokenStore.from_megatron(tmp_path / "m")
    # a multimodal index (a mode byte a sequence) and a negative length: named as such ("trailing data" before)
    idx.write_bytes(data + bytes(len(store)))
    with pytest.raises(FormatError, match="a multimodal index") as e:
        TokenStore.from_megatron(tmp_path / "m")
    assert "trailing" not in str(e.value)
    idx.write_bytes(data[:38] + (-1).to_bytes(4, "little", signed=True) + data[42:])
    with pytest.raises(FormatError, match="sequence 1 has length -1"):
        TokenStore.from_megatron(tmp_path / "m")
    # ids of another dtype Megatron's builder writes: named, with the way on (was "invalid enum value 5")
    for code, name in ((5, "int64"), (1, "uint8")):
        idx.write_bytes(data[:17] + bytes([code]) + data[18:])
        with pytest.raises(FormatError, match=f"holds {name} ids \\(dtype code {code}\\); tokenmill reads uint16 or "
                                              "int32 ids: write the pair again"):
            TokenStore.from_megatron(tmp_path / "m")
    idx.write_bytes(data)
    b = tmp_path / "m.bin"
    b.write_bytes(b.read_bytes()[:-4])
    with pytest.raises(FormatError, match=r"m.bin: .* bytes, the index describes .* \(truncated\)"):
        TokenStore.from_megatron(tmp_path / "m")


def test_document_indices_group_sequences_and_mismatched_files_are_refused(store, tmp_path):
    """The reader took one document per sequence whatever ``document_indices`` said (a sentence-split corpus
    read with other document boundaries; decreasing indices accepted) and ignored a ``.bin`` longer than the
    index describes (two files of different exports). Documents are now the runs of sequences the index
    marks, nonsense indices and trailing data are refused, a folder named .idx is not "missing"."""
    import shutil
    import struct

    from tokenmill.errors import ConfigError

    b, i = store.export_megatron(tmp_path / "x")
    raw = i.read_bytes()
    n = struct.unpack("<Q", raw[18:26])[0]
    body = raw[34:34 + 12 * n]

    def index(name, docs):
        (tmp_path / f"{name}.idx").write_bytes(raw[:26] + struct.pack("<Q", len(docs)) + body
                                               + np.asarray(docs, "<i8").tobytes())
        shutil.copy(b, tmp_path / f"{name}.bin")
        return tmp_path / name

    grouped = TokenStore.from_megatron(index("g", [0, 2, 2, n]))  # documents [0, 2), empty, [2, n)
    assert len(grouped) == 3 and grouped.lengths.tolist() == [int(store.lengths[:2].sum()), 0,
                                                               int(store.lengths[2:].sum())]
    assert grouped.get(0).tolist() == store.get(0).tolist() + store.get(1).tolist()
    for docs in ([1, n], [0, n - 1], [0, 3, 2, n]):
        with pytest.raises(FormatError, match="document_indices must run from 0 to"):
            TokenStore.from_megatron(index("bad", docs))
    shutil.copy(i, tmp_path / "t.idx")
    (tmp_path / "t.bin").write_bytes(b.read_bytes() + b"\x01\x00" * 10)
    with pytest.raises(FormatError, match=r"the index describes .* \(trailing data\): t.bin and t.idx are not one"):
        TokenStore.from_megatron(tmp_path / "t")
    (tmp_path / "u.idx").mkdir()
    shutil.copy(b, tmp_path / "u.bin")
    with pytest.raises(FormatError, match="u.idx is not a regular file"):
        TokenStore.from_megatron(tmp_path / "u")
    with pytest.raises(ConfigError, match="a Megatron prefix is a path"):
        TokenStore.from_megatron(5)


def test_a_re_export_stopped_between_its_two_renames_leaves_no_pair_that_opens(store, tmp_path, monkeypatch):
    """The .bin and .idx were replaced one after the other: killed between the two, a new .bin sat beside the
    old .idx, and where the token totals agreed it opened without error, every document boundary wrong. Then the
    old .idx was removed before the renames: an error between them lost it. Now the old pair is moved aside until
    both new files are in place, and an error (here an interrupt right after the .bin took its name) puts it back."""
    import os

    import tokenmill._io as io

    store.export_megatron(tmp_path / "m")
    reordered = store.view(np.arange(len(store))[::-1], {"reversed": True})  # the same tokens, in another order
    replace, calls = os.replace, []

    def stopped_after_the_first(src, dst):  # interrupted right after the .bin took its name
        calls.append(dst)
        if len(calls) == 4:
            raise KeyboardInterrupt
        replace(src, dst)

    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    monkeypatch.setattr(io.os, "replace", stopped_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        reordered.export_megatron(tmp_path / "m")
    monkeypatch.setattr(io.os, "replace", replace)
    assert [os.path.basename(c) for c in calls[:4]] == ["m.bin.tokenmill-old", "m.idx.tokenmill-old", "m.bin", "m.idx"]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before  # (the old pair only)
    old = TokenStore.from_megatron(tmp_path / "m")
    assert [old.get(i).tolist() for i in range(len(old))] == [store.get(i).tolist() for i in range(len(old))]
    reordered.export_megatron(tmp_path / "m")  # run again: the new pair
    back = TokenStore.from_megatron(tmp_path / "m")
    assert [back.get(i).tolist() for i in range(len(back))] == [reordered.get(i).tolist() for i in range(len(back))]
