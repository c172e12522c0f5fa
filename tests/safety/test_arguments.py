"""No silent coercion, no wrap-around, no negative ids: every argument that cannot
work is a ConfigError (an InputError for data) naming the argument and what it accepts."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tokenmill import Tokenizer, TokenStore, train_bpe
from tokenmill._validate import check_bool
from tokenmill.batching.schedule import BatchSchedule
from tokenmill.cli import main
from tokenmill.data.mixture import Mixture
from tokenmill.errors import ConfigError, FormatError, InputError

DOCS = [[i + 1] * n for i, n in enumerate([3, 5, 2, 4, 6, 1, 2, 3])]


@pytest.fixture(scope="module")
def torch_loader():
    pytest.importorskip("torch")
    from tokenmill.torch import TrainingLoader

    return TrainingLoader


# ---- 1. booleans are bools ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["no", "False", "", 0, 1, None, 1.0, [False]])
def test_check_bool_refuses_everything_but_bools(value):
    with pytest.raises(ConfigError, match=r"^flag=.* must be True or False \(got a "):
        check_bool(value, "flag")
    assert check_bool(np.bool_(False), "flag") is False and check_bool(True, "flag") is True


@pytest.mark.parametrize("option", ["shuffle", "drop_last"])
@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_schedule_bool_options_are_not_coerced(option, value):
    with pytest.raises(ConfigError, match=rf"^{option}=.* must be True or False"):
        BatchSchedule(DOCS, batch_size=1, block_size=4, **{option: value})


@pytest.mark.parametrize("option", ["shuffle", "drop_last", "pin_memory"])
def test_loader_bool_options_are_not_coerced(torch_loader, option):
    with pytest.raises(ConfigError, match=rf"^{option}='no' must be True or False \(got a str\)"):
        torch_loader(DOCS, batch_size=1, block_size=4, **{option: "no"})
    with pytest.raises(ConfigError, match=rf"^{option}='False' must be True or False"):
        torch_loader(DOCS, batch_size=1, block_size=4, **{option: "False"})
    torch_loader(DOCS, batch_size=1, block_size=4, **{option: np.bool_(False)})  # numpy bools are bools


def test_loader_numeric_options_are_not_coerced(torch_loader):
    with pytest.raises(ConfigError, match="^timeout="):
        torch_loader(DOCS, batch_size=1, block_size=4, timeout=float("nan"))
    with pytest.raises(ConfigError, match="^prefetch_factor="):
        torch_loader(DOCS, batch_size=1, block_size=4, num_workers=1, prefetch_factor=2.5)
    with pytest.raises(ConfigError, match="^num_workers="):
        torch_loader(DOCS, batch_size=1, block_size=4, num_workers=True)


# ---- 2. epochs: bounded so that the int64 sample arithmetic cannot wrap ---------------------------
@pytest.mark.parametrize("epoch", [2**64, 2**62, -1])
def test_loader_set_epoch_out_of_range(torch_loader, epoch):
    loader = torch_loader(DOCS, batch_size=1, block_size=4)
    with pytest.raises(ConfigError, match=r"^epoch=.* is out of range"):
        loader.set_epoch(epoch)
    assert loader.epoch == 0


@pytest.mark.parametrize("epoch", [1.0, True, "1", None])
def test_loader_set_epoch_is_an_int(torch_loader, epoch):
    loader = torch_loader(DOCS, batch_size=1, block_size=4)
    with pytest.raises(ConfigError, match=r"^epoch=.* must be an integer"):
        loader.set_epoch(epoch)
    with pytest.raises(ConfigError, match=r"^epoch="):
        loader.as_dataset().set_epoch(epoch)


def test_loader_last_epoch_iterates(torch_loader):
    loader = torch_loader(DOCS, batch_size=1, block_size=4)
    last = loader.schedule.max_epoch
    per_epoch = loader.num_samples(0)
    assert last * per_epoch < 2**62 <= (last + 2) * per_epoch
    loader.set_epoch(last)
    assert len(list(loader)) == loader.schedule.num_batches(last)
    with pytest.raises(ConfigError, match=r"epoch=.* is out of range; pass an integer in 0 \.\. "):
        loader.set_epoch(last + 1)
    with pytest.raises(ConfigError, match="^epoch="):
        loader.as_dataset().set_epoch(2**64)


def test_loaded_state_with_a_huge_epoch_is_refused(torch_loader):
    from tokenmill.batching.schedule import _checksum

    loader = torch_loader(DOCS, batch_size=1, block_size=4)
    state = loader.state_dict()
    state["epoch"] = 2**64
    state["checksum"] = _checksum(state)  # a consistent state: the state's schema must catch it
    with pytest.raises(FormatError, match=r"field epoch = 18446744073709551616"):
        loader.load_state_dict(state)
    state["epoch"] = 2**61  # within the schema's range, beyond what this loader's epochs can reach
    state["checksum"] = _checksum(state)
    with pytest.raises(ConfigError, match=r"^epoch=.* is out of range"):
        loader.load_state_dict(state)
    assert loader.epoch == 0


def test_mixture_epoch_does_not_wrap():
    m = Mixture([(DOCS, 3), (DOCS[:4], 1)], seed=0)
    s = BatchSchedule(m, batch_size=2, block_size=4)
    per_epoch = s.num_batches(0) * s.global_batch_size
    assert s.max_epoch * per_epoch < 2**62
    with pytest.raises(ConfigError, match=r"^epoch=1,152,921,504,606,846,976 is out of range"):
        s.batch(2**60, 0)  # wrapped epoch * per_epoch in int64 before: another sequence, silently
    for g in range(s.num_batches(0)):  # the last epoch still builds, with the sample positions it names
        part, p_ep, _ = s.global_samples(s.max_epoch, g)
        assert (p_ep >= 0).all()
        s.batch(s.max_epoch, g)


# ---- 3. mixture weights are real, finite, positive numbers ---------------------------------------
@pytest.mark.parametrize("weight", ["0.7", True, np.bool_(True), None, b"1", float("nan"), float("inf"),
                                    -1, 0, 0.0, 10**400])
def test_mixture_weights(weight):
    with pytest.raises(ConfigError, match=r"^mixture part 0 has weight .*weights must be positive"):
        Mixture([(DOCS, weight), (DOCS, 1)])


def test_mixture_weights_near_the_float_limit():
    m = Mixture([(DOCS, 1e308), (DOCS[:3], 1e308)])
    assert m.weights.tolist() == [0.5, 0.5]
    assert Mixture([(DOCS, np.float32(0.5)), (DOCS[:3], np.int64(1))]).weights.tolist() == pytest.approx([1 / 3, 2 / 3])


def test_a_mixture_of_one_source_twice_is_refused(tmp_path):
    """Its documents were drawn twice over, each copy weighted apart (the CLI's loader refused it; Python did not)."""
    with pytest.raises(ConfigError, match="mixture parts 0 and 1 are one source .the same object."):
        Mixture([(DOCS, 1), (DOCS, 1)])
    store = TokenStore.from_token_arrays(tmp_path / "s", [([2, 1], [5, 6, 7])], vocab_size=10)
    with pytest.raises(ConfigError, match="mixture parts 0 and 2 are one source .the store"):
        Mixture([(store, 1), (DOCS, 1), (TokenStore.open(str(tmp_path / "s") + "/"), 1)])
    train, val = store.split(0.5, seed=0)
    assert len(Mixture([(train, 1), (val, 1)]).parts) == 2  # (two views of one store: other documents)


# ---- 4. no negative ids from in-memory documents ----------------------------------------------------
def test_negative_ids_do_not_reach_batches(torch_loader):
    with pytest.raises(InputError, match=r"^document 0 holds token id -3 at position 0; token ids must be >= 0"):
        torch_loader([[-3, 4, 5]], batch_size=1, block_size=4)
    with pytest.raises(InputError, match=r"^document 2 holds token id -1 at position 1"):
        BatchSchedule([[3, 4, 5], np.array([1, 2]), np.array([7, -1], np.int8)], batch_size=1, block_size=4)


def test_negative_ids_in_a_mixture_part():
    with pytest.raises(InputError, match=r"^mixture part 1 \('b'\): document 1 holds token id -2"):
        Mixture([(DOCS, 1), ([[1], [-2]], 1)], names=["a", "b"])


def test_ids_beyond_int64_are_refused():
    with pytest.raises(InputError, match="document 0"):
        BatchSchedule([[2**63]], batch_size=1, block_size=4)
    with pytest.raises(InputError, match="document 1"):
        BatchSchedule([[1], np.array([2**64 - 1], np.uint64)], batch_size=1, block_size=4)


def test_many_documents_name_the_right_one():
    docs = [np.arange(5000) for _ in range(2000)]  # several chunks of the id check
    docs[1733] = docs[1733].copy()
    docs[1733][4321] = -7
    with pytest.raises(InputError, match=r"^document 1,733 holds token id -7 at position 4,321"):
        BatchSchedule(docs, batch_size=1, block_size=4)


# ---- 5. a row longer than the data: a ConfigError, not a MemoryError --------------------------------
def test_huge_block_on_small_data(torch_loader):
    with pytest.raises(ConfigError, match=r"^block_size=134,217,728 is longer than all 26 tokens .*"
                                          r"batch_size=1 .*GiB.*lower block_size to at most 26"):
        torch_loader(DOCS, batch_size=1, block_size=2**27)
    with pytest.raises(ConfigError, match="block_size=4,194,304 .*batch_size=2"):
        BatchSchedule(DOCS, batch_size=2, block_size=2**22)
    BatchSchedule(DOCS, batch_size=1, block_size=64)  # a toy run with some padding stays fine


def test_a_batch_past_int32_positions_is_refused_when_the_loader_is_made(torch_loader):
    """B x T over 2**31 - 1 positions overflows the int32 cu_seqlens: refused when the schedule is made, naming
    the windows' size for windows (it was said at the first batch, as "use a smaller block_size")."""
    from tokenmill import SlidingWindows

    docs = [np.arange(1, 100)] * 3
    with pytest.raises(ConfigError, match=r"^a batch of 2 rows of 1,073,741,824 positions \(2,147,483,648\) overflows "
                                          r"int32 cu_seqlens .*use a smaller batch_size or block_size"):
        torch_loader(docs, batch_size=2, block_size=2**30)
    with pytest.raises(ConfigError, match=r"^a batch of 1 row of 2,147,483,648 positions .* or the windows' capacity"):
        BatchSchedule(docs, batch_size=1, windows=SlidingWindows(2**31, 2**31))
    # rows of one position: every batch without a target (a row's first position never is one)
    with pytest.raises(ConfigError, match=r"^block_size is 1: a row of one position holds no target"):
        torch_loader(docs, batch_size=4, block_size=1)
    with pytest.raises(ConfigError, match=r"^the windows' capacity is 1: a row of one position holds no target"):
        BatchSchedule(docs, batch_size=4, windows=SlidingWindows(1, 1))


def test_huge_block_on_small_store(tmp_path, torch_loader):
    tok = Tokenizer.from_merges([], pattern="gpt2", special_tokens=["<|endoftext|>"])
    store = TokenStore.build(tmp_path / "s", [_text(tmp_path / "c.txt", "the cat sat\non the mat\n")], tok,
                             split_lines=True, workers=1, progress=False)
    with pytest.raises(ConfigError, match=r"^block_size=134,217,728 is longer than all \d+ tokens"):
        torch_loader(store, batch_size=1, block_size=2**27)


def test_out_of_memory_is_a_config_error(monkeypatch):
    from tokenmill.batching import schedule as S

    s = BatchSchedule(DOCS, batch_size=2, block_size=4)

    def boom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(S, "assemble_segments", boom)
    with pytest.raises(ConfigError, match=r"^out of memory for a batch of batch_size=2 rows x block_size=4 "
                                          r"positions: it needs about 392 bytes"):
        s.batch(0, 0)


# ---- 6. the command line ------------------------------------------------------------------------
def _text(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tok_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    Tokenizer.from_merges([(116, 104)], pattern="gpt2", special_tokens=["<|endoftext|>"]).save(path)
    return str(path)


def fails(capsys, argv, *needles, code=1):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == code, err
    lines = err.strip().splitlines()
    command = " ".join(argv[:2]) if argv[0] == "store" else argv[0]  # (a subcommand is named: "store build")
    assert len(lines) == 1 and lines[0].startswith(f"tokenmill {command}: error: "), err
    assert "bug in tokenmill" not in lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _build_args(tmp_path, tok_file, *extra):
    corpus = _text(tmp_path / "c.txt", "one。two。three")
    return ["store", "build", "--tokenizer", tok_file, "--input", str(corpus), "--out", str(tmp_path / "s"),
            "--workers", "1", "-q", *extra]


@pytest.mark.parametrize("mb", ["-5", "0", "1e-30", "nan", "inf", "-inf", "1e300"])
def test_store_build_shard_mb(tmp_path, tok_file, capsys, mb):
    fails(capsys, _build_args(tmp_path, tok_file, f"--shard-mb={mb}"), "--shard-mb")
    assert not (tmp_path / "s").exists()


def test_store_build_separator_is_unescaped_like_train(tmp_path, tok_file, capsys):
    assert main(_build_args(tmp_path, tok_file, "--separator", "。", "--shard-mb", "0.5")) == 0
    assert len(TokenStore.open(tmp_path / "s")) == 3  # was 1: the separator was decoded as latin-1 bytes
    capsys.readouterr()
    (tmp_path / "d.txt").write_text("a\nb\nc", encoding="utf-8")
    assert main(["store", "build", "--tokenizer", tok_file, "--input", str(tmp_path / "d.txt"), "--out",
                 str(tmp_path / "s2"), "--workers", "1", "-q", "--separator", "\\n"]) == 0
    assert len(TokenStore.open(tmp_path / "s2")) == 3


@pytest.mark.parametrize("sep", ["\\x", "\\", "\\u12", "\\N{nope}"])
def test_store_build_bad_separator_escape(tmp_path, tok_file, capsys, sep):
    fails(capsys, _build_args(tmp_path, tok_file, "--separator", sep), "--separator", "escape")


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, tok_file):
    d = tmp_path_factory.mktemp("store")
    corpus = _text(d / "c.txt", "".join(f"document number {i} of the plan\n" for i in range(40)))
    return str(TokenStore.build(d / "s", [corpus], Tokenizer.load(tok_file), split_lines=True, workers=1,
                                progress=False).path)


@pytest.mark.parametrize("weight", ["nan", "inf", "-inf", "-1", "0", "0.0"])
def test_loader_cli_weight(small_store, capsys, weight):
    spec = f"{small_store}:{weight}"
    line = fails(capsys, ["loader", spec, "--batch-size", "1", "--block-size", "16"], "weight", repr(spec))
    assert "positive finite number" in line
    fails(capsys, ["loader", spec, small_store, "--batch-size", "1", "--block-size", "16"], repr(spec))


def test_loader_cli_good_weight(small_store, capsys):
    assert main(["loader", f"{small_store}:0.5", "--batch-size", "1", "--block-size", "16", "--json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("command", ["train", "demo", "windows", "pack", "loader", "report"])
@pytest.mark.parametrize("value", ["-1", "x", "1.5", str(2**63)])
def test_every_seed_option_refuses_a_bad_seed_when_parsed(capsys, command, value):
    # refused by argparse before any work (the demo trained a tokenizer and built a store first)
    with pytest.raises(SystemExit) as e:
        main([command, "--seed", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"tokenmill {command}: error: argument --seed: {value!r} is not a seed; pass an integer >= 0" in err


def test_train_bpe_refuses_a_negative_seed():
    with pytest.raises(ConfigError, match="seed=-1"):
        train_bpe(["ab ab"], vocab_size=258, seed=-1)


def test_an_interrupt_inside_a_kernel_is_an_interrupt():
    """Ctrl-C while train's merge kernel ran came back as numba's SystemError ("returned a result with an
    exception set") and was reported as a bug in tokenmill, exit 1, not "interrupted", 130."""
    from tokenmill.cli import _interrupted

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set")  # noqa: B904
    except SystemError as e:
        wrapped = e
    assert _interrupted(wrapped) and not _interrupted(SystemError("other")) and not _interrupted(ValueError())


def test_unknown_options_and_library_names_are_said_as_the_command_line_says_them(capsys, tmp_path):
    """An unknown option was reported by the top-level parser ("tokenmill: error: unrecognized arguments");
    library messages named Python parameters (window_size=0, workers=0, out_dir) where the user typed
    --window, --workers, --out."""
    with pytest.raises(SystemExit) as e:
        main(["decode", "--tokenizer", "t.json", "--bogus", "1"])
    assert e.value.code == 2
    assert "tokenmill decode: error: unrecognized arguments: --bogus" in capsys.readouterr().err
    (tmp_path / "c.txt").write_text("one two three")
    tok = tmp_path / "t.json"
    train_bpe(["one two three"] * 3, 260).save(tok)
    fails(capsys, ["windows", "--tokenizer", str(tok), "--input", str(tmp_path / "c.txt"), "--window", "0"],
          "--window=0 is out of range")
    (tmp_path / "f").write_text("a file")
    fails(capsys, ["store", "build", "--tokenizer", str(tok), "--input", str(tmp_path / "c.txt"), "--no-eos",
                   "--out", str(tmp_path / "f")], "--out '", "exists and is not a folder")


def test_store_without_a_subcommand_is_a_usage_error(capsys):
    """`tokenmill store` alone printed the whole help to stdout and exited 2 with no error line."""
    with pytest.raises(SystemExit) as e:
        main(["store"])
    out = capsys.readouterr()
    assert e.value.code == 2 and not out.out
    assert "tokenmill store: error: the following arguments are required: SUBCOMMAND" in out.err


def test_a_failed_write_to_a_full_stdout_says_so(tmp_path):
    """`tokenmill encode ... > /dev/full` said "cannot access: No space left on device", naming nothing."""
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    tok = tmp_path / "t.json"
    train_bpe(["hello world"] * 3, 260).save(tok)
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "tokenmill", "encode", "--tokenizer", str(tok), "hello"],
                           stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1
    assert "tokenmill encode: error: cannot read or write the standard streams (or a file): No space left" in r.stderr


def test_options_that_would_be_ignored_or_misread_are_refused(tmp_path, tok_file, capsys, monkeypatch):
    """From a probe of the CLI: each of these had exited 0, the option ignored or read otherwise than meant."""
    import io
    import json

    enc = ["encode", "--tokenizer", tok_file, "--json"]
    fails(capsys, [*enc, "--special", "<|endoftext|>=1", "--special", "<|endoftext|>=2", "x"], "names '<|endoftext|>' twice")
    fails(capsys, _build_args(tmp_path, tok_file, "--bos-id", "5"), "--bos-id 5 without --bos")
    fails(capsys, _build_args(tmp_path, tok_file, "--no-eos", "--eos-id", "5"), "--eos-id 5 and --no-eos")
    corpus = _text(tmp_path / "w.txt", "the then there " * 50)
    win = ["windows", "--tokenizer", tok_file, "--input", str(corpus), "--window", "16", "-q"]
    fails(capsys, [*win, "--seed", "5"], "--seed without --jitter")
    fails(capsys, [*win, "--epoch", "2", "--seed", "1"], "--seed and --epoch without --jitter")
    assert main([*win, "--jitter", "global", "--epoch", "2", "--json"]) == 0
    capsys.readouterr()
    fails(capsys, ["train", "--input", str(corpus), "--vocab-size", "260", "--out", str(tmp_path / "t.json"), "--seed",
                   "3", "-q"], "--seed 3 without --sample")
    bad = _text(tmp_path / "bad.jinja", "{% for m in messages %}")
    fails(capsys, ["export", "--tokenizer", tok_file, "--to", "transformers", "--out", str(tmp_path / "hf"),
                   "--chat-template", str(bad)], "does not parse")
    assert not (tmp_path / "hf" / "tokenizer_config.json").exists()
    empty = _text(tmp_path / "e.jsonl", "")
    fails(capsys, ["store", "sft", "--tokenizer", tok_file, "--input", str(empty), "--out", str(tmp_path / "sft"), "-q"],
          "hold no examples")
    for digits in ("３００", "1_000", "٧٢"):  # (Python's int reads them all)
        with pytest.raises(SystemExit):
            main(["train", "--input", str(corpus), "--vocab-size", digits, "--out", str(tmp_path / "t.json")])
        assert f"{digits!r} is not an integer" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"the then")))
    assert main([*enc, "-"]) == 0  # ("-" reads standard input, as decode's; the text "-" had been encoded)
    assert json.loads(capsys.readouterr().out) == Tokenizer.load(tok_file).encode("the then")
