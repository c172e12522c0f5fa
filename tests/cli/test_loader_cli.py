"""`tokenmill loader`: the epoch plan of a TrainingLoader over stores, as text and JSON, without torch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokenmill import Tokenizer, TokenStore
from tokenmill.batching.schedule import BatchSchedule
from tokenmill.cli import main
from tokenmill.data.readers import texts


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tok = Tokenizer.from_merges([(116, 104)], pattern="gpt4", special_tokens=["<|endoftext|>"])
    rng = np.random.default_rng(0)
    out = []
    for k, n in enumerate((80, 20)):
        docs = [" ".join(["plan", "the", "loader", str(k)] * int(m)) for m in rng.integers(1, 30, n)]
        path = tmp_path_factory.mktemp("stores") / f"s{k}"
        TokenStore.build(path, texts(docs), tok, workers=1, progress=False)
        out.append(path)
    return out


def test_loader_json_matches_the_schedule(stores, capsys):
    assert main(["loader", str(stores[0]), "--batch-size", "3", "--block-size", "64", "--world-size", "2",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    s = BatchSchedule(TokenStore.open(stores[0]), batch_size=3, block_size=64, world_size=2)
    assert got["samples_per_epoch"] == s.num_samples(0) and got["batches_per_epoch_per_rank"] == s.num_batches(0)
    assert got["dropped_samples"] == s.num_samples(0) % 6 and got["data_fingerprint"] == s.data_fingerprint
    assert 0 < got["fill"] <= 1


def test_loader_mixture_report_and_errors(stores, capsys):
    assert main(["loader", f"{stores[0]}:0.5", f"{stores[1]}:0.5", "--batch-size", "2", "--block-size", "64",
                 "--tokens", "100000"]) == 0
    text = capsys.readouterr().out
    assert "100,000 training tokens" in text and "upsampled" in text
    # the samples the whole global batches leave carry into the next epoch: said so, as the numbers add up
    import re

    n = int(re.search(r"samples per epoch ([\d,]+)", text).group(1).replace(",", ""))
    nb = int(re.search(r"([\d,]+) batches per epoch", text).group(1).replace(",", ""))
    assert (f"{n - 2 * nb:,d} samples carry into the next epoch" in text) if n > 2 * nb else \
        "drop_last leaves out 0 samples" in text
    assert main(["loader", str(stores[0]), "--batch-size", "100000", "--block-size", "64"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "larger than epoch 0" in err and "--keep-last" in err
    assert main(["loader", f"{stores[0]}:x", "--batch-size", "2", "--block-size", "64"]) == 1
    assert "STORE:WEIGHT" in capsys.readouterr().err
    assert main(["loader", f"{stores[0]}:0", f"{stores[1]}:1", "--batch-size", "2", "--block-size", "64"]) == 1
    assert "weight" in capsys.readouterr().err


def test_mixture_epochs_of_overlapping_windows_count_window_tokens(stores, capsys):
    """Each part's epochs under overlapping windows are the windows drawn over the windows of one part epoch:
    against the documents' tokens (which the windows hold about twice at stride half the window) a part read
    0.8 times had read 1.6, "upsampled"."""
    from tokenmill import Mixture, SlidingWindows

    assert main(["loader", f"{stores[0]}:0.5", f"{stores[1]}:0.5", "--batch-size", "2", "--window", "16",
                 "--stride", "8", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["mixture"]["parts"]
    mix = Mixture([(TokenStore.open(stores[0]), 0.5), (TokenStore.open(stores[1]), 0.5)])
    s = BatchSchedule(mix, batch_size=2, windows=SlidingWindows(16, 8))
    drawn = s.epoch_counts(0)["part_samples"]
    for part, n, g in zip(range(2), drawn, got):
        per_epoch = s.stream(part, 0)
        assert g["tokens"] == per_epoch.tokens
        # over one epoch, "drawn" is what the epoch's batches hold of the part (it had been the weights' split)
        assert g["drawn_tokens"] == s.epoch_counts(0)["part_tokens"][part]
        assert abs(g["epochs"] - n / per_epoch.num_samples) < 0.05, (g, n, per_epoch.num_samples)
        assert g["tokens"] > 1.5 * int(np.sum(TokenStore.open(stores[part]).lengths))  # (the overlap, held twice)


def test_loader_help_has_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["loader", "--help"])
    assert "example:" in capsys.readouterr().out


def test_stride_zero_and_tokens_without_a_mixture_are_refused(stores, capsys):
    """``--stride 0`` was replaced by the window size (``args.stride or args.window``), and ``--tokens`` was
    ignored, unchecked, for one store."""
    assert main(["loader", str(stores[0]), "--batch-size", "2", "--window", "64", "--stride", "0"]) == 1
    assert "stride=0 is out of range" in capsys.readouterr().err
    for extra, says in ((["--tokens", "1000"], "sizes a mixture's epochs per part"),
                        (["--tokens", "-5"], "sizes a mixture's epochs per part")):
        assert main(["loader", str(stores[0]), "--batch-size", "2", "--block-size", "64", *extra]) == 1
        assert says in capsys.readouterr().err
    assert main(["loader", f"{stores[0]}:0.5", f"{stores[1]}:0.5", "--batch-size", "2", "--block-size", "64",
                 "--tokens", "0"]) == 1
    assert "pass a positive number of training tokens" in capsys.readouterr().err


def test_loader_messages_name_the_cli_options(stores, capsys):
    """Without --block-size or --window the error named Python's block_size= / windows=; a store given twice
    was refused as "names=[...]: pass one distinct name per part"."""
    assert main(["loader", str(stores[0]), "--batch-size", "2"]) == 1
    assert "pass --block-size T" in capsys.readouterr().err
    assert main(["loader", f"{stores[0]}:0.5", f"{stores[0]}:0.3", "--batch-size", "2", "--block-size", "64"]) == 1
    assert "a store is given twice" in capsys.readouterr().err
    for other in (f"{stores[0]}/", f"{stores[0]}/../{stores[0].name}"):  # one store, spelled two ways: was a
        assert main(["loader", str(stores[0]), other, "--batch-size", "2", "--block-size", "64"]) == 1  # mixture
        assert "a store is given twice" in capsys.readouterr().err  # of it with itself, every document twice
    assert main(["loader", str(stores[0]), "--batch-size", "2", "--block-size", "64"]) == 0
    assert "= 1 rank x 2" in capsys.readouterr().out


def test_split_says_it_plans_the_training_side_and_method_needs_a_block_size(stores, capsys):
    """`--split 0.1` printed the training side's documents as the store's; `--method` without --block-size did
    nothing, silently."""
    assert main(["loader", str(stores[0]), "--batch-size", "2", "--block-size", "64", "--split", "0.25"]) == 0
    train = TokenStore.open(stores[0]).split(0.25, seed=0)[0]
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(f"(the training side of --split 0.25: {len(train)} of 80 documents)") and len(train) < 80
    assert main(["loader", str(stores[0]), "--batch-size", "2", "--block-size", "64", "--split", "0.25",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["documents"] == len(train) and got["split"] == {"val_fraction": 0.25, "documents_before_split": 80}
    assert main(["loader", str(stores[0]), "--batch-size", "2", "--window", "16", "--method", "greedy"]) == 1
    assert "--method greedy packs into --block-size rows" in capsys.readouterr().err
    assert main(["loader", str(stores[0]), "--batch-size", "2", "--window", "16", "--block-size", "64",
                 "--method", "greedy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan_options"]["method"] == "greedy"


def test_a_mixtures_fingerprint_does_not_depend_on_how_a_path_is_typed(stores, capsys):
    """The parts' names are the paths: ``st/`` and ``st`` had given two fingerprints (two mixtures) of one."""
    prints = []
    for a, b in ((stores[0], stores[1]), (f"{stores[0]}/", f"{stores[1]}/./")):
        assert main(["loader", f"{a}:0.5", f"{b}:0.5", "--batch-size", "2", "--block-size", "64", "--json"]) == 0
        prints.append(json.loads(capsys.readouterr().out)["data_fingerprint"])
    assert prints[0] == prints[1]
