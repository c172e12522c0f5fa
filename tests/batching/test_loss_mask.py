"""Loss masks (supervised fine-tuning): a MaskedSource's tokens flagged 0 are context, never targets, on every path
that makes labels (packing, the loader, windows, padding), and nothing else about a batch changes."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import (
    IGNORE_INDEX,
    ConfigError,
    InputError,
    MaskedSource,
    Mixture,
    SliceSource,
    SlidingWindows,
    SpecialTokenError,
    TokenStore,
    encode_sft,
    pack,
    pad_batch,
    train_bpe,
)
from tokenmill.data.masked import document_flags


def make(n=60, seed=0, vocab=500, hi=40):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, vocab, int(k)) for k in rng.integers(1, hi, n)]
    masks = []
    for d in docs:  # a prompt (0s) then a completion (1s), sometimes a second turn
        cut = int(rng.integers(0, d.size + 1))
        m = np.r_[np.zeros(cut, np.uint8), np.ones(d.size - cut, np.uint8)]
        if d.size > 4 and rng.random() < 0.3:
            m[d.size // 2 :] ^= 1
        masks.append(m)
    return docs, masks


DOCS, MASKS = make()


class UserSource:
    """A token source of the user's own (no flat arrays): batches copy its documents one by one."""

    def __init__(self, docs):
        self.docs = [np.asarray(d, np.int64) for d in docs]
        self.lengths = np.array([d.size for d in self.docs], np.int64)

    def __len__(self):
        return len(self.docs)

    def get(self, i):
        return self.docs[i]


def expected(labels, doc_ids, offsets, masks):
    """The rule, by hand: a real position's label survives where its token's flag is 1."""
    want = labels.copy()
    for p in zip(*np.nonzero(doc_ids >= 0)):
        if not masks[doc_ids[p]][offsets[p]]:
            want[p] = IGNORE_INDEX
    return want


@pytest.mark.parametrize("kind", ["memory", "user", "store"])
@pytest.mark.parametrize("method,long_docs", [("best_fit", "split"), ("greedy", "truncate"), ("concat", "split")])
def test_packed_labels_are_the_unmasked_ones_where_the_flag_is_1(tmp_path, kind, method, long_docs):
    base = {"memory": DOCS, "user": UserSource(DOCS),
            "store": TokenStore.from_token_arrays(tmp_path / "s", [([d.size for d in DOCS], np.concatenate(DOCS))],
                                                  vocab_size=500)}[kind]
    src = MaskedSource(base, MASKS)
    plan = pack(src.lengths, 32, method=method, long_docs=long_docs)
    plain = list(plan.batches(base, batch_size=4, pad_id=0))
    masked = list(plan.batches(src, batch_size=4, pad_id=0))
    turned_off = 0
    for a, b in zip(plain, masked):
        want = expected(a.labels, a.doc_ids, a.token_offsets, MASKS)
        np.testing.assert_array_equal(b.labels, want)
        for f in ("input_ids", "position_ids", "doc_ids", "token_offsets", "cu_seqlens", "attention_mask"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        assert b.stats().targets == int(np.sum(want != IGNORE_INDEX))
        turned_off += int(np.sum((a.labels != IGNORE_INDEX) & (want == IGNORE_INDEX)))
    assert turned_off > 50  # (the test can fail: the masks turn real targets off)


def test_every_target_of_a_masked_source_is_a_flagged_token_once():
    src = MaskedSource(DOCS, MASKS)
    plan = pack(src.lengths, 48)
    seen = set()
    for b in plan.batches(src, batch_size=8, pad_id=0):
        for p in zip(*np.nonzero(b.labels != IGNORE_INDEX)):
            key = (int(b.doc_ids[p]), int(b.token_offsets[p]))
            assert MASKS[key[0]][key[1]] == 1 and key not in seen
            seen.add(key)
    # every flagged token but a document's first (nothing before it to predict from) is a target
    assert len(seen) == sum(int(m[1:].sum()) for m in MASKS)


def test_windows_of_a_masked_source_and_slices_of_it():
    src = MaskedSource(DOCS, MASKS)
    plan = SlidingWindows(8, stride=5).plan(src.lengths)
    for w, v in zip(plan.materialize(src), plan.materialize(DOCS)):
        flags = MASKS[w.doc][w.offset : w.offset + len(w)].astype(bool)
        np.testing.assert_array_equal(w.labels, np.where(flags, v.labels, IGNORE_INDEX))
    sl = SliceSource(src, doc=plan.doc, start=plan.start, length=plan.length)
    for i in (0, 7, len(sl) - 1):
        d, s = int(plan.doc[i]), int(plan.start[i])
        np.testing.assert_array_equal(document_flags(sl, i), MASKS[d][s : s + int(plan.length[i])].astype(bool))
    batches = list(pack(sl.lengths, 16).batches(sl, batch_size=4, pad_id=0))
    for b in batches:  # (doc_ids and offsets of a slice's batch name the original documents)
        np.testing.assert_array_equal(b.labels, expected(b.labels, b.doc_ids, b.token_offsets, MASKS))
    assert sum(b.stats().targets for b in batches) > 0


def test_pad_batch_loss_mask():
    b = pad_batch([[1, 10, 11, 2], [1, 12, 2]], pad_id=0, loss_mask=[[0, 0, 1, 1], [True, True, False]])
    assert b.labels.tolist() == [[-100, -100, 11, 2], [-100, 12, -100, -100]]
    assert b.stats().targets == 3
    with pytest.raises(InputError, match="loss_mask of sequence 1 holds 2 flags but the sequence 3 tokens"):
        pad_batch([[1, 2], [1, 2, 3]], pad_id=0, loss_mask=[[1, 1], [1, 1]])
    with pytest.raises(InputError, match="holds 2 at position 0"):
        pad_batch([[1, 2]], pad_id=0, loss_mask=[[2, 1]])


def test_mixture_with_a_masked_part():
    other = [np.full(5, 7), np.full(9, 8)]
    m = Mixture([(MaskedSource(DOCS, MASKS), 0.6), (other, 0.4)])
    all_masks = MASKS + [np.ones(5, np.uint8), np.ones(9, np.uint8)]
    for b in pack(m.lengths, 32).batches(m, batch_size=8, pad_id=0):
        np.testing.assert_array_equal(b.labels, expected(b.labels, b.doc_ids, b.token_offsets, all_masks))


def test_masked_source_checks_its_flags():
    with pytest.raises(InputError, match="loss_mask holds 1 documents, the source 2"):
        MaskedSource([[1, 2], [3]], [[1, 1]])
    with pytest.raises(InputError, match="loss_mask of document 1 holds 2 flags but the document 1 tokens"):
        MaskedSource([[1, 2], [3]], [[1, 1], [0, 1]])
    with pytest.raises(InputError, match="holds -1 at position 0"):
        MaskedSource([[1]], [[-1]])
    with pytest.raises(InputError, match="float"):
        MaskedSource([[1, 2]], [[0.5, 1.0]])
    with pytest.raises(InputError, match="names a column, but the source is a list"):
        MaskedSource([[1]], "x")
    src = MaskedSource([[1, 2]], [[0, 1]])
    with pytest.raises(ValueError):  # the flags are the source's: read-only
        src.mask[0] = 1
    assert MaskedSource([[1, 2]], [[1, 1]]).fingerprint != src.fingerprint  # (a state over one is refused over the other)


def test_a_token_store_of_flags_and_save_open(tmp_path):
    src = MaskedSource(DOCS, MASKS)
    saved = src.save(tmp_path / "sft")
    again = MaskedSource.open(tmp_path / "sft")
    assert again.fingerprint == saved.fingerprint
    assert [again.get(i).tolist() for i in range(len(DOCS))] == [d.tolist() for d in DOCS]
    assert all(np.array_equal(again.loss_mask(i), MASKS[i].astype(bool)) for i in range(len(DOCS)))
    with pytest.raises(Exception, match="holds no tokens/ and loss_mask/"):
        MaskedSource.open(tmp_path / "sft" / "tokens")
    # a store of flags is read in one pass, and checked as a list of flags is
    bad = TokenStore.from_token_arrays(tmp_path / "bad", [([2, 1], [0, 1, 2])], vocab_size=3)
    with pytest.raises(InputError, match="loss_mask of document 1 holds 2 at position 0"):
        MaskedSource([[5, 6], [7]], bad)
    # a store of several shards (a saved source is cut every ~4M ids) is read a shard at a time, not by document
    two = TokenStore.from_token_arrays(tmp_path / "two", [([2], [0, 1]), ([1, 2], [1, 1, 0])], vocab_size=2)
    assert MaskedSource([[5, 6], [7], [8, 9]], two).mask.tolist() == [0, 1, 1, 1, 0]
    bad2 = TokenStore.from_token_arrays(tmp_path / "bad2", [([2], [0, 1]), ([1, 2], [0, 2, 1])], vocab_size=3)
    with pytest.raises(InputError, match="loss_mask of document 2 holds 2 at position 0"):
        MaskedSource([[5, 6], [7], [8, 9]], bad2)


def test_encode_sft_joins_the_texts_encoded_alone():
    tok = train_bpe(["the cat sat on the mat. " * 20], vocab_size=269, special_tokens=["<|endoftext|>"])
    eos = tok.special_tokens["<|endoftext|>"]
    examples = [{"prompt": "the cat ", "completion": "sat on the mat."}, ("on the", " mat"),
                [("the ", False), ("cat", True), (" sat ", False), ("on", True)]]
    src = encode_sft(tok, examples)
    assert len(src) == 3
    parts = [[("the cat ", 0), ("sat on the mat.", 1)], [("on the", 0), (" mat", 1)],
             [("the ", 0), ("cat", 1), (" sat ", 0), ("on", 1)]]
    for i, ex in enumerate(parts):
        ids = [t for text, _ in ex for t in tok.encode(text)] + [eos]
        flags = [f for text, f in ex for _ in tok.encode(text)] + [1]
        assert src.get(i).tolist() == ids and src.loss_mask(i).astype(int).tolist() == flags
    assert src.facts["eos_id"] == eos and src.facts["vocab_size"] == tok.vocab_size
    no_eos = encode_sft(tok, examples[:1], append_eos=False)
    assert no_eos.get(0).tolist() == src.get(0).tolist()[:-1]
    with pytest.raises(InputError, match="example 1 has no field 'completion'"):
        encode_sft(tok, [examples[0], {"prompt": "x", "answer": "y"}])
    with pytest.raises(InputError, match="example 0 is a chat .its 'messages' field. but no chat_template is given"):
        encode_sft(tok, [{"messages": []}])
    with pytest.raises(SpecialTokenError, match="example 1, part 1: the text contains the special token"):
        encode_sft(tok, [("a", "b"), ("c", "d<|endoftext|>")])
    templated = encode_sft(tok, [("a", "d<|endoftext|>")], allowed_special="all", append_eos=False)
    assert templated.get(0).tolist()[-1] == eos and templated.loss_mask(0)[-1]


def test_a_tokenized_dataset_with_a_mask_column():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3], [4, 5]], "completion_mask": [[0, 1, 1], [0, 1]]})
    src = MaskedSource(ds, "completion_mask")
    assert src.num_targets == 3 and src.loss_mask(1).tolist() == [False, True]
    with pytest.raises(InputError, match="has no column 'assistant_masks'"):
        MaskedSource(ds, "assistant_masks")


@pytest.mark.parametrize("how", [dict(block_size=32), dict(block_size=32, method="concat"),
                                 dict(windows=SlidingWindows(10, stride=6)),
                                 dict(windows=SlidingWindows(10, stride=6), block_size=24)])
def test_the_planned_targets_of_an_epoch_are_the_batches_targets(how):
    from tokenmill.batching.schedule import BatchSchedule

    got = []
    for source in (MaskedSource(DOCS, MASKS), Mixture([(MaskedSource(DOCS, MASKS), 0.7), (DOCS[:9], 0.3)])):
        sched = BatchSchedule(source, batch_size=3, seed=2, drop_last=False, **how)
        got.append(sum(sched.batch(0, g).stats().targets for g in range(sched.num_batches(0))))
        assert sched.epoch_counts(0)["targets"] == got[-1]
    plain = BatchSchedule(DOCS, batch_size=3, seed=2, drop_last=False, **how).epoch_counts(0)["targets"]
    assert got[0] < plain  # (the prompts are no targets: the count can fail)


def test_split_keeps_each_examples_flags_and_follows_the_one_rule(tmp_path):
    """Train and validation examples of a masked source: the documents TokenStore.split and split_documents
    choose (over a saved source, its store's views), each with its own flags."""
    from tokenmill import split_documents

    want = split_documents(list(range(len(DOCS))), 0.25, seed=4)
    for src in (MaskedSource(DOCS, MASKS), MaskedSource(DOCS, MASKS).save(tmp_path / "s")):
        parts = src.split(0.25, seed=4)
        for part, idx in zip(parts, (want.train, want.val)):
            assert len(part) == idx.size
            for i, j in enumerate(idx.tolist()):
                assert part.get(i).tolist() == DOCS[j].tolist()
                assert part.loss_mask(i).tolist() == MASKS[j].astype(bool).tolist()
        assert parts[0].num_targets + parts[1].num_targets == src.num_targets
        assert parts[0].fingerprint != parts[1].fingerprint


def test_a_slice_of_a_masked_source_in_a_mixture_takes_its_own_flags_and_fingerprint():
    """A slice part of a mixture had taken its base's flags in the mixture's numbering (another document's flags,
    or an IndexError past them); a slice's fingerprint had not covered the flags (a state over one mask loaded
    over another)."""
    from tokenmill.data.mixture import source_fingerprint

    src = MaskedSource([[10, 11, 12, 13], [20, 21, 22, 23]], [[0, 0, 1, 1], [0, 0, 0, 1]])
    sl = SliceSource(src, doc=[1, 1, 1], start=[0, 1, 2], length=[4, 3, 2])
    mix = Mixture([(sl, 1), ([[5, 5]], 1)], seed=0)
    flags = [[0, 0, 0, 1], [0, 0, 1], [0, 1], [1, 1]]
    for b in pack(mix.lengths, 4).batches(mix, batch_size=4, pad_id=0):
        np.testing.assert_array_equal(b.labels, expected(b.labels, b.doc_ids, b.token_offsets, flags))
    wins = list(SlidingWindows(4, stride=4).plan(mix.lengths).materialize(mix))
    assert [w.labels.tolist() for w in wins] == [[-100, -100, -100, 23], [-100, -100, 23], [-100, 23], [-100, 5]]
    other = SliceSource(MaskedSource([[10, 11, 12, 13], [20, 21, 22, 23]], [[0, 0, 1, 1], [1, 1, 1, 1]]),
                        doc=[1, 1, 1], start=[0, 1, 2], length=[4, 3, 2])
    assert source_fingerprint(sl) != source_fingerprint(other)
    plain = SliceSource([[10, 11, 12, 13], [20, 21, 22, 23]], doc=[1, 1, 1], start=[0, 1, 2], length=[4, 3, 2])
    assert source_fingerprint(sl) != source_fingerprint(plain)


def test_chat_variables_are_the_folders_roles_and_an_absent_one_renders_as_nothing(tmp_path):
    """Llama 3 Instruct declares <|eot_id|> its EOS: the template's eos_token and the appended EOS had been the
    token found by name (<|end_of_text|>); a tokenizer without BOS had rendered {{ bos_token }} as 'None'."""
    import json
    import shutil
    from pathlib import Path

    from tests.tokenizer.test_model_tokenizers import _dir
    from tokenmill import as_tokenizer

    d = tmp_path / "l3i"
    d.mkdir()
    shutil.copy(_dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json") / "tokenizer.json", d / "tokenizer.json")
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}))
    tok = as_tokenizer(d)
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    template = "{% for m in messages %}{{ m['content'] }}{{ eos_token }}{% endfor %}"
    src = encode_sft(tok, [chat, ("a", "b")], chat_template=template)
    eot = tok.special_tokens["<|eot_id|>"]
    assert src.get(0).tolist().count(eot) == 2 and src.get(1).tolist()[-1] == eot
    bare = train_bpe(["ab ab"] * 3, vocab_size=257)
    got = encode_sft(bare, [chat], chat_template="{{ bos_token }}" + template.replace("{{ eos_token }}", "|"))
    assert bare.decode(got.get(0).tolist()) == "hi|yo|"
    with pytest.raises(Exception, match="train_on=5"):
        encode_sft(bare, [chat], chat_template=template, train_on=5)
    assert Path(d).is_dir()


def test_saved_flags_are_paired_with_their_ids_and_never_read_as_ids(tmp_path):
    """A loss_mask/ of another save with the same lengths had opened silently, and a store of flags had been taken
    for token ids by the loader and packing (0/1 ids trained on)."""
    import shutil

    from tokenmill import ConfigError, FormatError
    from tokenmill.torch import TrainingLoader

    MaskedSource([[1, 2, 3], [4, 5]], [[0, 1, 1], [0, 1]]).save(tmp_path / "a")
    MaskedSource([[1, 2, 3], [7, 7]], [[0, 1, 1], [0, 1]]).save(tmp_path / "b")
    shutil.rmtree(tmp_path / "a" / "loss_mask")
    shutil.copytree(tmp_path / "b" / "loss_mask", tmp_path / "a" / "loss_mask")
    with pytest.raises(FormatError, match="saved with other ids than its tokens/"):
        MaskedSource.open(tmp_path / "a")
    flags = TokenStore.open(tmp_path / "b" / "loss_mask")
    with pytest.raises(ConfigError, match="is a store of loss-mask flags"):
        TrainingLoader(flags, batch_size=1, block_size=4)
    with pytest.raises(ConfigError, match="is a store of loss-mask flags"):
        next(pack(flags.lengths, 4).batches(flags, batch_size=1, pad_id=0))
    with pytest.raises(ConfigError, match="is a store of loss-mask flags"):
        MaskedSource(flags, [[0, 1, 1], [0, 1]])


@pytest.mark.parametrize("how", [dict(block_size=16), dict(windows=SlidingWindows(6, stride=4)),
                                 dict(windows=SlidingWindows(6, stride=4), block_size=16)])
def test_a_loaders_mixture_numbers_a_slice_parts_items_as_the_mixture_does(how):
    """The loader's rows from a slice part of a mixture had named the slice's base documents, shifted by the part's
    place in the mixture: ``mix.part_of(doc_ids)`` gave the wrong part and one id named two documents. Every real
    position now holds ``mix.get(doc_id)[token_offset]``, its label follows that item's flags, and the epoch's
    planned targets are the batches'. Windows over a slice of a masked source (no mixture) take the slice's flags
    (the base's had been read in the slice's numbering)."""
    from tokenmill.batching.schedule import BatchSchedule

    src = MaskedSource(DOCS, MASKS)
    idx = np.arange(30, 60)
    sl = SliceSource(src, doc=idx, start=np.zeros(idx.size, np.int64), length=np.asarray(src.lengths)[idx])
    other = [np.full(7, 3), np.full(12, 4), np.full(5, 6)]
    mix = Mixture([(sl, 0.5), (other, 0.5)], seed=1)
    flags = [MASKS[i] for i in idx] + [np.ones(len(d), np.uint8) for d in other]
    single = SliceSource(src, doc=idx, start=np.zeros(idx.size, np.int64), length=np.asarray(src.lengths)[idx])
    for source, items, item_flags in ((mix, [mix.get(i) for i in range(len(mix))], flags),
                                      (single, [DOCS[i] for i in range(len(DOCS))], MASKS)):
        sched = BatchSchedule(source, batch_size=4, seed=3, drop_last=False, **how)
        targets, parts = 0, set()
        for g in range(sched.num_batches(0)):
            b = sched.batch(0, g)
            real = b.doc_ids >= 0
            got = [items[d][o] for d, o in zip(b.doc_ids[real].tolist(), b.token_offsets[real].tolist())]
            assert b.input_ids[real].tolist() == [int(x) for x in got]
            np.testing.assert_array_equal(b.labels, expected(b.labels, b.doc_ids, b.token_offsets, item_flags))
            targets += b.stats().targets
            if source is mix:
                parts |= set(mix.part_of(b.doc_ids[real]).tolist())
        assert sched.epoch_counts(0)["targets"] == targets
        assert source is single or parts == {0, 1}


def test_a_mixture_sees_the_vocabulary_of_sft_examples_in_memory_and_of_slices(tmp_path):
    """encode_sft's source in memory (and its split) and a slice of a store had said no vocabulary: mixed with a
    store of another tokenizer, batches held ids of two vocabularies, silently. Two handles of one saved SFT folder
    are one source."""
    a = train_bpe(["hello world"] * 20, vocab_size=262)
    b = train_bpe(["other text here"] * 20, vocab_size=266)
    sft = encode_sft(a, [("hi", "yo"), ("a", "b"), ("c", "d")], eos_id=5)
    assert sft.vocab_size == a.vocab_size and sft.tokenizer_hash == sft.facts["tokenizer_hash"]
    other = encode_sft(b, [("x", "y")], eos_id=5)
    for part in (sft, sft.split(0.5, seed=0)[0]):
        with pytest.raises(ConfigError, match="different tokenizers"):
            Mixture([(part, 1), (other, 1)])
    Mixture([(sft, 1), (encode_sft(a, [("x", "y")], eos_id=5), 1)])  # one tokenizer: fine
    store = TokenStore.from_token_arrays(tmp_path / "a", [([2, 1], [5, 6, 7])], vocab_size=300, tokenizer_hash="t1")
    sl = SliceSource(store, doc=[0], start=[0], length=[2])
    assert sl.vocab_size == 300 and sl.tokenizer_hash == "t1"
    with pytest.raises(ConfigError, match="different vocabulary sizes"):
        Mixture([(sl, 1), (TokenStore.from_token_arrays(tmp_path / "b", [([1], [5])], vocab_size=301), 1)])


def test_two_handles_of_one_saved_sft_folder_are_one_source(tmp_path):
    MaskedSource(DOCS, MASKS).save(tmp_path / "s")
    with pytest.raises(ConfigError, match="are one source"):
        Mixture([(MaskedSource.open(tmp_path / "s"), 1), (MaskedSource.open(tmp_path / "s"), 1)])


def test_saved_ids_from_memory_record_the_vocabulary_size_given(tmp_path):
    """Ids in memory saved without a size record their largest id + 1: beside a store of the same tokenizer a
    Mixture refused them, naming different tokenizers. ``save(vocab_size=...)`` records the tokenizer's; the refusal
    says so."""
    store = TokenStore.from_token_arrays(tmp_path / "st", [([2], [5, 9])], vocab_size=50, tokenizer_hash="t")
    src = MaskedSource([[1, 2, 3]], [[0, 1, 1]])
    with pytest.raises(ConfigError, match="save that part again with vocab_size=tokenizer.vocab_size"):
        Mixture([(src.save(tmp_path / "a"), 1), (store, 1)])
    saved = src.save(tmp_path / "b", vocab_size=50)
    assert saved.vocab_size == 50
    Mixture([(saved, 1), (store, 1)])
    with pytest.raises(ConfigError, match="leave vocab_size out"):
        MaskedSource(store, [[0, 1]]).save(tmp_path / "c", vocab_size=60)
