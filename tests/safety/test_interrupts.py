"""Ctrl-C is a KeyboardInterrupt at the library's entry points, also where numba wrapped it in a SystemError
("returned a result with an exception set": an interrupt landing while a compiled kernel's result is made, ~1 in
6 interrupts of a two-thread encode_batch), which a script catching the interrupt to save its work had missed."""

from __future__ import annotations

import pytest

from tokenmill import train_bpe
from tokenmill.errors import interrupt_in, interruptible


def _numba_like():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as ki:
        raise SystemError("CPUDispatcher(<function split_gpt4>) returned a result with an exception set") from ki


def test_a_wrapped_interrupt_is_raised_as_itself_and_other_system_errors_are_not():
    with pytest.raises(KeyboardInterrupt):
        interruptible(_numba_like)()

    def other():
        raise SystemError("something else")

    with pytest.raises(SystemError, match="something else"):
        interruptible(other)()
    assert interrupt_in(ValueError()) is None and isinstance(interrupt_in(KeyboardInterrupt()), KeyboardInterrupt)


def test_the_entry_points_raise_the_interrupt(monkeypatch):
    import tokenmill.tokenizer.encoding as enc

    tok = train_bpe(["the cat sat on the mat " * 20], vocab_size=270)
    monkeypatch.setattr(enc.Encoding, "_encode_batch", lambda *a, **k: _numba_like())
    monkeypatch.setattr(enc.Encoding, "_encode_flat", lambda *a, **k: _numba_like())
    for call in (lambda: tok.encode_batch(["a b", "c d"] * 3, num_threads=2),
                 lambda: tok.encode_flat(["a b", "c d"] * 3, num_threads=2)):
        with pytest.raises(KeyboardInterrupt):
            call()
    monkeypatch.undo()
    assert tok.encode_batch(["the cat"]) == [tok.encode("the cat")]  # (usable after)


def test_a_generators_iteration_and_pack_raise_the_interrupt(monkeypatch):
    import tokenmill.batching.packing as packing

    def batches():
        yield 1
        _numba_like()

    it = interruptible(batches)()
    assert next(it) == 1
    with pytest.raises(KeyboardInterrupt):
        next(it)
    assert packing.pack([3, 5], 8).num_blocks >= 1
    monkeypatch.setattr(packing, "check_array", lambda *a, **k: _numba_like())
    with pytest.raises(KeyboardInterrupt):
        packing.pack([3, 5], 8)
