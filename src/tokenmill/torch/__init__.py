"""The torch side of batches: tensors, attention masks, loss normalization and a reference model.

Importing this package needs torch (``pip install 'tokenmill[torch]'``); nothing else in tokenmill
does. Names load lazily, so ``import tokenmill.torch`` itself is cheap.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "to_tensors": ".collate",
    "collate_blocks": ".collate",
    "PackedBatches": ".collate",
    "sdpa_mask": ".masks",
    "document_mask_mod": ".masks",
    "flex_block_mask": ".masks",
    "count_targets": ".loss",
    "token_weighted_loss": ".loss",
    "StepNormalizer": ".loss",
    "TinyConfig": ".model",
    "TinyCausalLM": ".model",
    "TrainingLoader": ".loader",
    "LoaderDataset": ".loader",
    "batch_tensors": ".loader",
    "hf_inputs": ".hf",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), _EXPORTS, ())
