"""``tokenmill store stats``: documents, tokens, bytes per token, length percentiles and histogram."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .._io import save_figure
from ..errors import require

PERCENTILES = (0, 1, 5, 25, 50, 75, 95, 99, 100)


@dataclass(frozen=True)
class StoreStats:
    documents: int
    tokens: int
    input_bytes: int | None
    bytes_per_token: float | None  # input bytes / tokens, BOS/EOS excluded
    empty_documents: int  # no token but BOS/EOS (a plan of the lengths sees them as 1-2 tokens long)
    mean_length: float
    percentiles: dict  # {"p50": ...}
    histogram: dict  # {"edges": [...], "counts": [...], "tokens": [...]} on log-spaced lengths
    # token-weighted: the length L such that p% of all tokens sit in documents of length <= L
    token_percentiles: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        bpt = f"{self.bytes_per_token:.3f}" if self.bytes_per_token is not None else "n/a"
        pct = "  ".join(f"{k} {v:,d}" for k, v in self.percentiles.items())
        tpct = "  ".join(f"{k} {v:,d}" for k, v in (self.token_percentiles or {}).items())
        return (f"documents {self.documents:,d}, tokens {self.tokens:,d}, bytes per token {bpt}, "
                f"empty documents (no token but BOS/EOS) {self.empty_documents:,d}, mean length {self.mean_length:,.1f}\n"
                f"length percentiles: {pct}" + (f"\ntoken-weighted length percentiles: {tpct}" if tpct else ""))


def length_counts(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct lengths, ascending, and how many documents have each: by counting (O(n + longest))
    where no length exceeds 2**24, else by sorting.

    >>> [a.tolist() for a in length_counts(np.array([3, 1, 3]))]
    [[1, 3], [1, 2]]
    """
    if lengths.size and int(lengths.min()) >= 0 and int(lengths.max()) <= 1 << 24:
        counts = np.bincount(lengths)
        values = np.flatnonzero(counts)
        return values, counts[values]
    return np.unique(lengths, return_counts=True)


def weighted_percentiles(lengths: np.ndarray, ps, counted=None) -> list[int]:
    """Token-weighted percentiles: the length of the document holding the ``p``-th percent token.

    >>> weighted_percentiles(np.array([1, 1, 8]), [0, 50, 100])
    [1, 8, 8]
    """
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if not total:
        return [0 for _ in ps]
    values, counts = length_counts(lengths) if counted is None else counted
    cum = np.cumsum(counts * values)
    out = []
    for p in ps:
        k = int(np.searchsorted(cum, max(1, int(np.ceil(total * p / 100))), side="left"))
        out.append(int(values[min(k, values.size - 1)]))
    return out


def token_histogram(lengths: np.ndarray, edges: np.ndarray, counted=None) -> list[int]:
    """Tokens in documents of each length bin (``np.histogram``'s bins, weighted by length).

    >>> token_histogram(np.array([1, 2, 2, 5]), np.array([0, 2, 6]))
    [1, 9]
    """
    if not lengths.size:
        return [0] * (edges.size - 1)
    values, counts = length_counts(lengths) if counted is None else counted  # distinct lengths, then bins
    return [int(x) for x in np.histogram(values, bins=edges, weights=counts * values)[0].tolist()]



def store_stats(src) -> StoreStats:
    lengths = np.asarray(src.lengths, np.int64)
    n, tokens = int(lengths.size), int(lengths.sum())
    special = (getattr(src, "eos_id", None) is not None) + (getattr(src, "bos_id", None) is not None)
    content = lengths - special
    root = getattr(src, "store", src)
    ib = root.manifest.get("input_bytes") if hasattr(root, "manifest") and root is src else None
    ctoks = int(content.sum())
    # percentiles (np.percentile's method="lower") and histogram from the distinct lengths: 0.5 s instead
    # of 5 s for 100 M documents
    values, per_value = length_counts(lengths)
    k = np.floor((n - 1) * (np.asarray(PERCENTILES) / 100)).astype(np.int64)
    at = values[np.searchsorted(np.cumsum(per_value), k, side="right")].tolist() if n else [0] * len(PERCENTILES)
    pct = {f"p{p}": int(v) for p, v in zip(PERCENTILES, at)}
    hi = max(int(lengths.max()) if n else 1, 1)
    edges = np.unique(np.concatenate([[0], np.geomspace(1, hi + 1, 40).astype(np.int64)]))
    counts = np.histogram(values, bins=edges, weights=per_value)[0].astype(np.int64)
    tok_hist = token_histogram(lengths, edges, (values, per_value))
    tpct = {f"p{p}": v for p, v in zip(PERCENTILES, weighted_percentiles(lengths, PERCENTILES, (values, per_value)))}
    return StoreStats(n, tokens, ib, (ib / ctoks) if ib is not None and ctoks else None,
                      int((content <= 0).sum()), float(lengths.mean()) if n else 0.0, pct,
                      {"edges": edges.tolist(), "counts": counts.tolist(), "tokens": tok_hist}, tpct)


def plot_lengths(stats: StoreStats, path, *, inputs=()):
    """Draw the length histogram to exactly ``path`` (.png, .svg or .pdf picks the format) and return
    it; needs matplotlib. Written like every output (atomically, never through a link, never onto
    one of ``inputs``: pass the store's files, :func:`tokenmill.data.store.store_files`)."""
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges, counts = np.asarray(stats.histogram["edges"]), np.asarray(stats.histogram["counts"])
    toks = np.asarray(stats.histogram.get("tokens", counts))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, heights, pct, what in ((axes[0], counts, stats.percentiles, "documents"),
                                   (axes[1], toks, stats.token_percentiles or {}, "tokens")):
        ax.bar(edges[:-1], heights, width=np.diff(edges), align="edge", edgecolor="black", linewidth=0.3,
               color="#4878a8" if what == "documents" else "#d08040")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("document length (tokens)")
        ax.set_ylabel(what + (" (in documents of this length)" if what == "tokens" else ""))
        for key, style in (("p50", "-"), ("p95", "--"), ("p99", ":")):
            if key in pct:
                ax.axvline(pct[key], color="black", linestyle=style, linewidth=1, label=f"{key} {pct[key]:,d}")
        ax.legend(fontsize=8, loc="upper left")
        ax.set_title(("by document" if what == "documents" else "token-weighted") +
                     (f": median {pct['p50']:,d}" if "p50" in pct else ""), fontsize=10)
    fig.suptitle(f"{stats.documents:,d} documents, {stats.tokens:,d} tokens")
    fig.tight_layout()
    try:
        return save_figure(fig, path, what="plot", inputs=inputs)
    finally:
        plt.close(fig)
