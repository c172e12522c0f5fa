"""tokenmill: raw text to training-ready language-model data.

The public API is re-exported here and loaded lazily, so ``import tokenmill`` stays cheap: it loads
neither numba's compiler nor torch nor any other optional dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__ as __version__

# public name -> module that defines it (relative to this package)
_EXPORTS = {
    # errors
    "TokenmillError": ".errors",
    "ConfigError": ".errors",
    "InputError": ".errors",
    "LoneSurrogateError": ".errors",
    "FormatError": ".errors",
    "SpecialTokenError": ".errors",
    "UnsupportedTokenizerError": ".errors",
    "UnknownTokenError": ".errors",
    "MissingExtraError": ".errors",
    # the conventions every stage follows
    "IGNORE_INDEX": ".conventions",
    "count_targets": ".conventions",
    # data
    "TokenSource": ".data.source",
    "ArraySource": ".data.source",
    "as_source": ".data.source",
    "TokenStore": ".data.store",
    "Mixture": ".data.mixture",
    "MaskedSource": ".data.masked",
    "encode_sft": ".data.masked",
    "save_sft": ".data.masked",
    # tokenizer
    "Tokenizer": ".tokenizer.model",
    "train_bpe": ".tokenizer.bpe.train",
    "replace_surrogates": ".tokenizer.surrogates",
    "as_tokenizer": ".tokenizer.adapters",
    "TokenizerLike": ".tokenizer.adapters",
    "ForeignTokenizer": ".tokenizer.adapters",
    # BEGIN windows exports (owned by tokenmill.windows)
    "SlidingWindows": ".windows.sliding",
    "WindowPlan": ".windows.sliding",
    "Window": ".windows.sliding",
    "PlanStats": ".windows.sliding",
    "MultiScaleWindows": ".windows.multiscale",
    "CoverageReport": ".windows.coverage",
    "coverage_report": ".windows.coverage",
    "SemanticWindows": ".windows.semantic",
    "SemanticPlan": ".windows.semantic",
    "preview": ".windows.preview",
    "WindowPreview": ".windows.preview",
    "chunk_text": ".windows.chunking",
    "Chunk": ".windows.chunking",
    "assemble_context": ".windows.chunking",
    "ContextPiece": ".windows.chunking",
    "bm25_scores": ".windows.chunking",
    # END windows exports
    # BEGIN batching exports (owned by tokenmill.batching)
    "pack": ".batching.packing",
    "PackPlan": ".batching.packing",
    "chunk_stream": ".batching.packing",
    "pad_batch": ".batching.padding",
    "LengthGroupedBatches": ".batching.padding",
    "Batch": ".batching.layout",
    "Block": ".batching.layout",
    "BatchStats": ".batching.stats",
    "split_documents": ".batching.split",
    "SliceSource": ".batching.sources",
    "packing_equivalence": ".verify",
    # END batching exports
    # the one-page HTML report (the package is `reporting`: a subpackage named `report` would replace
    # this function with itself on `tokenmill` as soon as it is imported)
    "report": ".reporting",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), _EXPORTS, ("__version__",))


if TYPE_CHECKING:  # pragma: no cover  (static type checkers see the lazy exports)
    from .batching.batch import Batch, Block
    from .batching.packing import PackPlan, chunk_stream, pack
    from .batching.padding import LengthGroupedBatches, pad_batch
    from .batching.sources import SliceSource
    from .batching.split import split_documents
    from .batching.stats import BatchStats
    from .data.masked import MaskedSource, encode_sft, save_sft
    from .data.mixture import Mixture
    from .data.source import ArraySource, TokenSource, as_source
    from .data.store import TokenStore
    from .errors import (
        ConfigError,
        FormatError,
        InputError,
        LoneSurrogateError,
        MissingExtraError,
        SpecialTokenError,
        TokenmillError,
        UnknownTokenError,
    )
    from .reporting import report
    from .tokenizer.adapters import ForeignTokenizer, TokenizerLike, as_tokenizer
    from .tokenizer.bpe.train import train_bpe
    from .tokenizer.model import Tokenizer
    from .tokenizer.surrogates import replace_surrogates
    from .verify import packing_equivalence
    from .windows.chunking import Chunk, ContextPiece, assemble_context, bm25_scores, chunk_text
    from .windows.coverage import CoverageReport, coverage_report
    from .windows.multiscale import MultiScaleWindows
    from .windows.preview import WindowPreview, preview
    from .windows.semantic import SemanticPlan, SemanticWindows
    from .windows.sliding import PlanStats, SlidingWindows, Window, WindowPlan
