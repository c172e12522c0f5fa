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
    empty_documents: int
    mean_length: float
    percentiles: dict  # {"p50": ...}
    histogram: dict  # {"edges": [...], "counts": [...]} on log-spaced lengths

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        bpt = f"{self.bytes_per_token:.3f}" if self.bytes_per_token is not None else "n/a"
        pct = "  ".join(f"{k} {v:,d}" for k, v in self.percentiles.items())
        return (f"documents {self.documents:,d}, tokens {self.tokens:,d}, bytes per token {bpt}, "
                f"empty documents {self.empty_documents:,d}, mean length {self.mean_length:,.1f}\n"
                f"length percentiles: {pct}")


def store_stats(src) -> StoreStats:
    lengths = np.asarray(src.lengths, np.int64)
    n, tokens = int(lengths.size), int(lengths.sum())
    special = (getattr(src, "eos_id", None) is not None) + (getattr(src, "bos_id", None) is not None)
    content = lengths - special
    root = getattr(src, "store", src)
    ib = root.manifest.get("input_bytes") if hasattr(root, "manifest") and root is src else None
    ctoks = int(content.sum())
    pct = {f"p{p}": int(np.percentile(lengths, p, method="lower")) if n else 0 for p in PERCENTILES}
    hi = max(int(lengths.max()) if n else 1, 1)
    edges = np.unique(np.concatenate([[0], np.geomspace(1, hi + 1, 40).astype(np.int64)]))
    counts, _ = np.histogram(lengths, bins=edges)
    return StoreStats(n, tokens, ib, (ib / ctoks) if ib is not None and ctoks else None,
                      int((content <= 0).sum()), float(lengths.mean()) if n else 0.0, pct,
                      {"edges": edges.tolist(), "counts": counts.tolist()})


def plot_lengths(stats: StoreStats, path, *, inputs=()):
    """Draw the length histogram to exactly ``path`` (.png, .svg or .pdf picks the format) and return
    it; needs matplotlib. Written like every output (atomically, never through a link, never onto
    one of ``inputs``: pass the store's files, :func:`tokenmill.data.store.store_files`)."""
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges, counts = np.asarray(stats.histogram["edges"]), np.asarray(stats.histogram["counts"])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", edgecolor="black", linewidth=0.3)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("documents")
    ax.set_title(f"{stats.documents:,d} documents, {stats.tokens:,d} tokens; median {stats.percentiles['p50']:,d}")
    fig.tight_layout()
    try:
        return save_figure(fig, path, what="plot", inputs=inputs)
    finally:
        plt.close(fig)
