"""The torch side of batches: tensors, attention masks, loss normalization and a reference model.

Importing this package needs torch (``pip install 'tokenmill[torch]'``); nothing else in tokenmill
does. Names load lazily, so ``import tokenmill.torch`` itself is cheap.
"""

from __future__ import annotations

import importlib

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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'tokenmill.torch' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
