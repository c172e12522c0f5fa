"""The conventions every module follows, stated once (and the few helpers that state them in code).

* Labels sit at the input positions (the model or loss shifts by one, as Hugging Face models do);
  an ignored target is ``IGNORE_INDEX``.
* The first position of every document in a packed block has an ignored label; padding is found by
  length, never by comparing ids with the pad id.
* Boolean attention masks mean True = may attend; ``cu_seqlens`` are int32, start at 0, end at the
  total length, strictly increasing.
* A step's loss is the sum of token losses divided by the step's global count of effective targets.
"""

IGNORE_INDEX = -100
"""The label of a position that is not a target (PyTorch's ``cross_entropy`` default ``ignore_index``)."""


def target_mask(labels):
    """Which labels are effective targets: positions ``1 .. T-1`` (the first is never scored after
    the shift by one) whose label is not ``IGNORE_INDEX``. ``labels``: ``(..., T)``, numpy or torch;
    the mask has the labels' shape (position 0 False) and kind.

    >>> import numpy as np
    >>> target_mask(np.array([[-100, 10, -100, 2]])).tolist()
    [[False, True, False, True]]
    """
    mask = _labels(labels) != IGNORE_INDEX
    mask[..., 0] = False
    return mask


def count_targets(labels, *, ignore_index: int = IGNORE_INDEX):
    """The number of effective targets in ``labels`` (``(..., T)``, numpy or torch): labels at
    positions ``1 .. T-1`` that are not ``ignore_index``. The one count every stage uses (batch
    statistics, the loader's ``num_targets``, the loss normalization). numpy gives an int, torch a
    0-d int64 tensor on the labels' device.

    >>> import numpy as np
    >>> int(count_targets(np.array([[-100, 10, 11, 2], [-100, 12, 2, -100]])))
    5
    """
    return (_labels(labels)[..., 1:] != ignore_index).sum()


def _labels(labels):
    """``labels`` if it is an array or tensor of one dimension or more (a list or tuple of ints is read as a
    numpy array, as ``token_weighted_loss`` reads it); else a ConfigError naming it (None or a scalar gave a
    bare TypeError or IndexError, a list compared with an int one False)."""
    if isinstance(labels, (list, tuple)):
        from ._validate import check_array
        from .errors import ConfigError

        labels = check_array(labels, "labels", ndim=None, error=ConfigError)
    if getattr(labels, "ndim", 0) < 1:
        from .errors import ConfigError

        raise ConfigError(f"labels must be a numpy array or torch tensor of shape (..., T), not "
                          f"{type(labels).__name__}" + (" of 0 dimensions" if hasattr(labels, "ndim") else ""))
    dtype = labels.dtype
    integer = (not (dtype.is_floating_point or dtype.is_complex) and str(dtype) != "torch.bool"
               if hasattr(dtype, "is_floating_point") else dtype.kind in "iu")
    if not integer:  # (strings compared unequal to -100 everywhere, NaN too: every position counted a target)
        from .errors import ConfigError

        raise ConfigError(f"labels has dtype {dtype}; pass integer token ids, with IGNORE_INDEX "
                          f"({IGNORE_INDEX}) where a position is not a target")
    return labels
