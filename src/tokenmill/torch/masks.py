"""Attention masks for packed batches: a dense SDPA mask and a FlexAttention ``BlockMask``.

Both encode the same rule, True = may attend: query ``q`` sees key ``kv`` when ``kv <= q`` and
both lie in the same attention segment (document, or padding run) of the same row::

    segment_ids   0 0 0 0 1 1 1 2        (A, B, padding)
    mask_mod(b, h, q, kv) = (segment_ids[b, q] == segment_ids[b, kv]) & (q >= kv)

The dense mask costs ``B*T*T`` bytes; the BlockMask stores only which 128x128 tiles are full, partial
or empty, so long packed blocks skip the empty tiles entirely.
"""

from __future__ import annotations

from .._validate import check_array, check_int
from .._words import counted
from ..batching.batch import as_batch
from ..errors import ConfigError, require

torch = require("torch", "torch")


def sdpa_mask(batch, *, device=None):
    """``(B, 1, T, T)`` bool tensor for ``torch.nn.functional.scaled_dot_product_attention``
    (``attn_mask``; True = may attend). Every row has at least its diagonal, so no NaNs.
    ``batch``: a :class:`~tokenmill.batching.Batch`, a ``Block``, or a dict of tensors from
    :func:`to_tensors` / :class:`~tokenmill.torch.TrainingLoader` (its ``cu_seqlens`` are used; the mask
    is made on their device unless ``device`` says otherwise).

    >>> from tokenmill.batching import pack
    >>> block = next(pack([2, 1], 3).blocks([[1, 2], [3]], pad_id=0))
    >>> sdpa_mask(block)[0, 0].int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    >>> from tokenmill.torch import to_tensors
    >>> torch.equal(sdpa_mask(to_tensors(block)), sdpa_mask(block))
    True
    """
    if isinstance(batch, dict):
        B, T, cu = dict_segments(batch, "sdpa_mask")
        _dense_fits(B, T)
        if device is None:  # where the batch is (a batch moved to the GPU gets its mask there)
            device = cu.device
        seg = segment_ids(cu.to(device), B, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
        return ((seg[:, :, None] == seg[:, None, :]) & causal).unsqueeze(1)
    batch = as_batch(batch, "sdpa_mask", " (or a dict of tensors from to_tensors)")
    shape = batch.input_ids.shape  # (a Batch's (B, T), a Block's (T,))
    _dense_fits(shape[0] if len(shape) == 2 else 1, shape[-1])
    return torch.from_numpy(batch.dense_mask()).unsqueeze(1).to(device)


DENSE_MASK_BYTES = 1 << 33


def _dense_fits(B: int, T: int) -> None:
    """Refuse a dense mask of more than 8 GiB (``B * T * T`` bools) before allocating it: a batch of long rows
    wants FlexAttention's block mask, which stores only the tiles that attend."""
    if B * T * T > DENSE_MASK_BYTES:
        raise ConfigError(f"a dense mask of {counted(B, 'row')} of {T:,d} positions is {B * T * T / 2**30:,.0f} GiB (B x T x T "
                          "bools), more than 8 GiB; use flex_block_mask(batch) (or varlen attention with the "
                          "batch's cu_seqlens), or fewer or shorter rows")


def dict_segments(batch: dict, what: str):
    """``(rows, positions, cu_seqlens)`` of a batch dict (``to_tensors``' / a TrainingLoader's; numpy arrays
    too), ``cu_seqlens`` checked against ``input_ids``' shape (:func:`check_cu_seqlens`): a dict whose rows
    were sliced for micro-batches, or whose ``cu_seqlens`` came from another batch, had given a mask that
    let documents attend to each other, or an IndexError."""
    missing = [k for k in ("input_ids", "cu_seqlens") if k not in batch]
    if missing:
        raise ConfigError(f"{what}: the batch has no {' or '.join(missing)}; pass a tokenmill Batch or a "
                          "TrainingLoader / to_tensors() batch dict")
    ids = batch["input_ids"]
    if not hasattr(ids, "shape"):  # (a list had been "must be 2-D (got shape ())")
        raise ConfigError(f"{what}: batch['input_ids'] is a {type(ids).__name__}; pass a 2-D tensor or numpy array "
                          "(rows, positions), as to_tensors and the TrainingLoader give")
    shape = tuple(ids.shape)
    if len(shape) != 2:
        raise ConfigError(f"{what}: batch['input_ids'] must be 2-D (rows, positions) (got shape {shape})")
    B, T = shape
    cu = batch["cu_seqlens"]
    if not torch.is_tensor(cu):  # (checked as integers first: big-endian, object or str values had failed in torch)
        cu = torch.as_tensor(check_array(cu, "batch['cu_seqlens']", error=ConfigError))
    check_cu_seqlens(cu, B, T)
    return B, T, cu


def check_cu_seqlens(cu, rows: int, positions: int) -> None:
    """``cu_seqlens`` (a tensor) is 1-D, integer, and on the CPU rises strictly from 0 to rows x positions (on
    an accelerator a check would wait for it: the batch is trusted there); else a ConfigError naming it."""
    if cu.ndim != 1 or cu.numel() < 2 or cu.dtype.is_floating_point or cu.dtype == torch.bool:
        raise ConfigError(f"batch['cu_seqlens'] must be a 1-D integer tensor of at least 2 entries (got shape "
                          f"{tuple(cu.shape)}, {cu.dtype})")
    if cu.device.type == "cpu":
        c = cu.to(torch.int64)
        if int(c[0]) != 0 or int(c[-1]) != rows * positions or bool((c[1:] <= c[:-1]).any()):
            raise ConfigError(f"batch['cu_seqlens'] must rise strictly from 0 to rows x positions = "
                              f"{rows * positions:,d} (got {c[:4].tolist()} .. {int(c[-1]):,d}); it is the batch's, "
                              "over the flattened rows (a dict whose rows were sliced needs cu_seqlens cut to "
                              "them: slice the Batch, or make one batch per micro-batch)")


def document_mask_mod(segment_ids):
    """The FlexAttention ``mask_mod`` of block-diagonal causal attention over ``segment_ids``
    (``(B, T)`` int tensor: the attention segment of every position, padding its own segment)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (segment_ids[b, q_idx] == segment_ids[b, kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


def segment_ids(cu_seqlens, rows: int, positions: int):
    """``(rows, positions)`` int64: the attention segment of every position (a document or a padding
    run), numbered over the flattened batch, from ``cu_seqlens`` (on its device)."""
    seg = torch.zeros(rows * positions, dtype=torch.int64, device=cu_seqlens.device)
    seg[cu_seqlens[1:-1].to(torch.int64)] = 1
    return seg.cumsum(0).view(rows, positions)


def flex_block_mask(batch, *, device="cpu", BLOCK_SIZE: int = 128):
    """A FlexAttention ``BlockMask`` for ``batch`` (a Batch, a Block, or a dict of tensors from
    :func:`to_tensors` / :class:`~tokenmill.torch.TrainingLoader`, as :func:`sdpa_mask`), built from
    :func:`document_mask_mod`."""
    from torch.nn.attention.flex_attention import create_block_mask

    if isinstance(batch, dict):
        B, T, cu = dict_segments(batch, "flex_block_mask")
        seg = segment_ids(cu.to(device), B, T)
    else:
        b = as_batch(batch, "flex_block_mask", " (or a dict of tensors from to_tensors)")
        B, T = b.shape
        seg = torch.from_numpy(b.segment_ids).to(device)
    BLOCK_SIZE = check_int(BLOCK_SIZE, "BLOCK_SIZE", min=1, max=1 << 20)  # (0: ZeroDivisionError, -4 a shape error)
    return create_block_mask(document_mask_mod(seg), B, None, T, T, device=device, BLOCK_SIZE=BLOCK_SIZE)
