"""The textbook sliding-window sampler (with the tail placement done right), as small readable Python:
the oracle for the plans.

One document at a time, one window at a time, exactly as a person would write it. The plans of
:func:`tokenmill.windows.sliding.place` (compiled and numpy paths) must give the same windows for
every input (tests check).

>>> reference_windows(11, 4, 3)
[(0, 4), (3, 4), (6, 4), (7, 4)]
>>> len(reference_windows(10000, 512, 256))   # 38 full windows + an aligned tail at 9488
39
"""

from __future__ import annotations


def reference_windows(n: int, size: int, stride: int, *, offset: int = 0, tail: str = "align",
                      short: str = "keep", max_windows: int | None = None) -> list[tuple[int, int]]:
    """``(start, length)`` of each window of a document of ``n`` tokens, content size ``size``."""
    if n == 0:
        return []
    if n < size:
        return [(0, n)] if short == "keep" else []
    out = []
    start = min(offset, n - size)
    while start + size <= n:
        out.append((start, size))
        start += stride
    last_end = out[-1][0] + size
    if last_end < n:  # tokens remain after the last full window
        if tail == "align":
            out.append((n - size, size))
        elif tail == "pad" and start < n:
            out.append((start, n - start))
    if max_windows is not None and len(out) > max_windows:
        m, k = len(out), max_windows
        keep = [0] if k == 1 else [round(i * (m - 1) / (k - 1)) for i in range(k)]
        out = [out[j] for j in keep]
    return out


def reference_target_starts(windows: list[tuple[int, int]], *, score: str = "all", bos: bool = False) -> list[int]:
    """First scored target (document position) of each window, as in strided perplexity evaluation.

    A window's first token is not a target (nothing precedes it) unless a bos does; ``score="new"``
    also skips every token that an earlier window already scored.

    >>> reference_target_starts([(0, 4), (2, 4)], score="new")
    [1, 4]
    """
    out, scored_until = [], 0
    for start, length in windows:
        first = start if bos else start + 1
        if score == "new":
            first = max(first, scored_until)
        first = min(first, start + length)
        out.append(first)
        scored_until = max(scored_until, start + length)
    return out


def reference_window_arrays(ids: list[int], start: int, length: int, target_start: int, n_doc: int, *,
                            bos: int | None = None, eos: int | None = None, absolute: bool = False) -> dict:
    """input_ids, labels and position_ids of one window, built element by element."""
    content = list(ids[start:start + length])
    input_ids = ([bos] if bos is not None else []) + content + ([eos] if eos is not None else [])
    labels = []
    for i, tok in enumerate(input_ids):
        if bos is not None and i == 0:
            labels.append(-100)
        elif eos is not None and i == len(input_ids) - 1:
            labels.append(tok if start + length == n_doc else -100)
        else:
            p = start + i - (bos is not None)  # document position of this token
            labels.append(tok if p >= target_start else -100)
    base = start if absolute else 0
    return {"input_ids": input_ids, "labels": labels, "position_ids": [base + i for i in range(len(input_ids))]}
