"""``tokenmill.report``: one self-contained HTML page showing a tokenizer, a store and its plans.

:mod:`.collect` gathers bounded samples and statistics (data only); :mod:`.render` draws them as one
page with inline CSS, JavaScript and data (no server, no network, no file beside it).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Sequence

from .._io import resolve_output, write_bytes_atomic
from ..data.store import TokenStore, outside_store, store_files
from ..errors import ConfigError
from .collect import ReportData, ReportOptions, collect
from .render import render_html

__all__ = ["Report", "ReportData", "ReportOptions", "collect", "render_html", "report"]


@dataclass(frozen=True)
class Report:
    """What :func:`report` wrote: the page's path, its size in bytes, the seconds taken, its data."""

    path: Path
    bytes: int
    seconds: float
    data: ReportData


def report(tokenizer, *, out, store=None, files: Sequence = (), texts: Sequence[str] = (),
           progress: bool = False, **options) -> Report:
    """Write one self-contained HTML report to ``out`` and return what was written.

    ``tokenizer``: a :class:`~tokenmill.Tokenizer`, a tokenizer file or anything
    :func:`tokenmill.as_tokenizer` takes; ``store``: a store folder, a :class:`~tokenmill.TokenStore`
    or any token source built with that tokenizer; ``files``: text files (one document each, their
    first ``text_bytes``); ``texts``: strings. At least one of them. ``options``: the fields of
    :class:`ReportOptions` (``samples``, ``sample_tokens``, ``window``, ``stride``, ``block_size``,
    ``seed``, ...). Deterministic: the same inputs and options give the same page. ``out`` is written
    like every tokenmill output (atomically, never through a link, never onto an input: the store's
    files and ``files`` are its inputs).

    >>> import tempfile, os, tokenmill
    >>> tok = tokenmill.train_bpe(["hello world"] * 4, 260)
    >>> r = tokenmill.report(tok, texts=["hello world <script>"], out=os.path.join(tempfile.mkdtemp(), "r.html"))
    >>> r.data.tokens["totals"]["tokens"], r.path.read_text().count("<script>")
    (16, 1)
    """
    t0 = time.perf_counter()
    unknown = sorted(set(options) - {f.name for f in fields(ReportOptions)})
    if unknown:
        raise ConfigError(f"unknown report option(s) {', '.join(unknown)}; the options are "
                          f"{', '.join(f.name for f in fields(ReportOptions))}")
    opts = ReportOptions(**options)
    if isinstance(files, (str, bytes, os.PathLike)):
        raise ConfigError(f"files={files!r} is a single path; pass a list (files=[...])")
    files = list(files)
    if isinstance(store, (str, os.PathLike)):
        store = TokenStore.open(store)
    inputs = files + (store_files(store) if store is not None else [])
    if isinstance(tokenizer, (str, os.PathLike)):
        inputs.append(tokenizer)
    if store is None and not files and not texts:
        raise ConfigError("nothing to report on: pass a store (--store) or texts (--text FILE)")
    resolve_output(out, what="report", inputs=inputs, suffix=".html")  # fail before the work, not after
    outside_store(out, store, f"the report {os.fspath(out)!r}")
    bar = _progress(progress)
    try:
        data = collect(tokenizer, store=store, files=files, texts=texts, options=opts,
                       progress=lambda stage: bar.set_postfix_str(stage, refresh=False) or bar.update(1))
        bar.update(1)
        page = render_html(data).encode("utf-8")
    finally:
        bar.close()
    write_bytes_atomic(out, page, inputs=inputs)
    return Report(Path(os.fspath(out)), len(page), round(time.perf_counter() - t0, 3), data)


def _progress(enabled: bool):
    from tqdm import tqdm

    return tqdm(total=6, desc="report", unit="stage", disable=not enabled, file=sys.stderr, leave=False)
