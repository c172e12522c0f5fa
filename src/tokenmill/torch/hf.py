"""Packed batches into Hugging Face ``transformers`` models, exactly: :func:`hf_inputs`.

A packed row holds several documents. Handed to a transformers model as ``input_ids``, its 2-D
``attention_mask`` (non-pad) and ``position_ids``, the row is one causal sequence to the model's
mask code: every document attends to the ones before it (measured on a tiny random Llama, eager and
sdpa: logits 0.26 away from the documents run alone). What makes each document see only itself
depends on the model's attention implementation (``model.config._attn_implementation``):

============================  =============================================================================
``eager``                     a 4-D additive mask ``(B, 1, T, T)`` of the model's dtype: 0 where the key is
                              in the query's document at or before it, the dtype's minimum elsewhere
``sdpa``                      the same pattern as a 4-D bool mask (True = may attend), what transformers
                              (>= 4.53) builds for SDPA itself; with older versions the additive one
``flash_attention_2/3/4``     no mask: ``cu_seq_lens_q/k`` and ``max_length_q/k`` over the flattened
                              ``B*T`` positions (the batch's ``cu_seqlens``), so the varlen kernel runs each
                              document (and each padding run) on its own; needs transformers >= 4.48
``flex_attention``            a FlexAttention ``BlockMask`` of the same pattern
============================  =============================================================================

Padding is its own attention segment, so no query row is empty (no NaN); its logits are junk and its
labels are ``-100``. Every mask is given 4-D, which transformers uses as it is (``position_ids``
restart at 0 in every document, so rotary embeddings are those of the document alone). Layers with
a sliding window (``config.layer_types`` / ``config.sliding_window``) get the window inside each
document (a dict of masks per layer type where the types differ); other layer types (chunked,
linear or recurrent attention, whose state would run across documents) and any other attention
implementation are refused: a ConfigError rather than a model that silently attends across
documents.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import numpy as np

from ..batching.batch import Batch, Block
from ..errors import ConfigError, require
from .masks import check_cu_seqlens, segment_ids

torch = require("torch", "torch")

DENSE = ("eager", "sdpa")
VARLEN = ("flash_attention_2", "flash_attention_3", "flash_attention_4")
FLEX = ("flex_attention",)
LAYER_TYPES = ("full_attention", "sliding_attention")


def hf_inputs(batch, model, *, labels: bool = True, device=None) -> dict:
    """The keyword arguments that make ``model(**hf_inputs(batch, model))`` score every document of
    a packed batch as if it were alone, for the model's attention implementation (see the module
    docstring): ``input_ids``, ``position_ids``, ``labels`` (unless ``labels=False``; transformers
    shifts them, and ``-100`` at every document's first position keeps a document from predicting
    the next one), ``use_cache=False`` and the attention inputs (a 4-D mask, a ``BlockMask``, or
    the varlen ``cu_seq_lens_*`` / ``max_length_*``).

    ``batch``: a :class:`~tokenmill.batching.Batch` or ``Block`` (numpy), or a dict of tensors from
    :class:`~tokenmill.torch.TrainingLoader` / :func:`~tokenmill.torch.to_tensors` (needs
    ``input_ids``, ``labels``, ``position_ids``, ``cu_seqlens``, ``max_seqlen``). ``model``: a
    transformers model (also wrapped in DDP, FSDP, PEFT or ``torch.compile``). ``device``: where the tensors go
    (default: the model's). The dense masks cost ``B*T*T`` elements: for long rows prefer
    ``flash_attention_2`` or ``flex_attention``.

    Fine-tuning (with ``num_items_in_batch``, transformers' loss is the summed token loss divided by it;
    clamped to 1, a batch without targets has loss 0 instead of transformers' ``0 / 0``; with the count of
    all ranks under DDP, which averages gradients, multiply ``out.loss`` by the world size first, as
    transformers' ``Trainer`` does)::

        for batch in loader:                                   # a TrainingLoader
            out = model(**hf_inputs(batch, model), num_items_in_batch=batch["num_targets"].clamp(min=1))
            out.loss.backward(); optimizer.step(); optimizer.zero_grad()
    """
    if not isinstance(labels, (bool, np.bool_)):
        raise ConfigError(f"labels={labels!r} must be True or False (got a {type(labels).__name__})")
    config, impl = _attention_of(model)
    fields = _fields(batch)
    if device is None:
        device = _device_of(model)
    B, T = fields["input_ids"].shape
    out = {"input_ids": fields["input_ids"].to(device), "position_ids": fields["position_ids"].to(device)}
    if labels:
        out["labels"] = fields["labels"].to(device)
    out["use_cache"] = False
    types, window = _layer_types(config, fields["max_seqlen"])
    if impl in VARLEN:
        _check_varlen_kwargs(impl)
        cu = fields["cu_seqlens"].to(device=device, dtype=torch.int32)
        out.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=fields["max_seqlen"],
                   max_length_k=fields["max_seqlen"])  # the kernel applies each layer's window itself
        return out
    seg = segment_ids(fields["cu_seqlens"].to(device), B, T)
    if impl in FLEX:
        make = lambda w: _block_mask(seg, w)
    elif impl == "eager" or not _bool_masks_for_sdpa():
        make = lambda w: _additive(_allowed(seg, w), _dtype_of(model))
    else:
        make = lambda w: _allowed(seg, w)
    if window is None:  # no layer's window is shorter than this batch's longest segment
        out["attention_mask"] = make(None)
    elif set(types) == {"sliding_attention"}:
        out["attention_mask"] = make(window)
    else:  # per layer type, as transformers' own mask mapping
        out["attention_mask"] = {"full_attention": make(None), "sliding_attention": make(window)}
    return out


# ---- the batch ---------------------------------------------------------------------------------------
_NEEDED = ("input_ids", "labels", "position_ids", "cu_seqlens", "max_seqlen")


def _fields(batch) -> dict:
    """The batch's model inputs as CPU or device tensors (not copied where they already are)."""
    if isinstance(batch, Block):
        batch = Batch.from_blocks([batch])
    if isinstance(batch, Batch):
        d = {k: torch.from_numpy(np.ascontiguousarray(getattr(batch, k))) for k in _NEEDED[:4]}
        d["max_seqlen"] = int(batch.max_seqlen)
    elif isinstance(batch, Mapping):
        missing = [k for k in _NEEDED if k not in batch]
        if missing:
            raise ConfigError(f"batch has no {', '.join(missing)}; pass a tokenmill Batch or a TrainingLoader / "
                              "to_tensors() batch dict")
        d = {}
        for k in _NEEDED[:4]:
            v = batch[k]
            if isinstance(v, np.ndarray):
                v = torch.from_numpy(v)
            if not torch.is_tensor(v) or v.dtype.is_floating_point or v.dtype.is_complex or v.dtype == torch.bool:
                raise ConfigError(f"batch[{k!r}] must be an integer tensor or array (got "
                                  f"{getattr(v, 'dtype', type(v).__name__)})")
            d[k] = v
        m = batch["max_seqlen"]
        if torch.is_tensor(m) and m.ndim == 0 and not m.dtype.is_floating_point:
            m = int(m)
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)):
            raise ConfigError(f"batch['max_seqlen'] must be an int (got {type(m).__name__})")
        d["max_seqlen"] = int(m)
    else:
        raise ConfigError(f"batch must be a tokenmill Batch or Block or a dict of tensors (got {type(batch).__name__})")
    ids = d["input_ids"]
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise ConfigError(f"batch['input_ids'] must be 2-D (rows, positions) and not empty "
                          f"(got shape {tuple(ids.shape)})")
    for k in ("labels", "position_ids"):
        if tuple(d[k].shape) != tuple(ids.shape):
            raise ConfigError(f"batch[{k!r}] has shape {tuple(d[k].shape)}, input_ids {tuple(ids.shape)}: "
                              "they must be equal")
    B, T = ids.shape
    cu = d["cu_seqlens"]
    check_cu_seqlens(cu, B, T)
    if cu.device.type == "cpu":  # on an accelerator, a check would wait for it: the batch is trusted there
        c = cu.to(torch.int64)
        longest = int((c[1:] - c[:-1]).max())
        if d["max_seqlen"] != longest:
            raise ConfigError(f"batch['max_seqlen'] is {d['max_seqlen']:,d} but the longest segment of cu_seqlens "
                              f"has {longest:,d} positions; pass the batch's own max_seqlen")
    return d


def _allowed(seg, window: int | None):
    """``(B, 1, T, T)`` bool, True = may attend: same segment, key at or before the query (and less
    than ``window`` positions back)."""
    T = seg.shape[1]
    q = torch.arange(T, device=seg.device)
    causal = q[None, :] <= q[:, None]
    if window is not None:
        causal = causal & (q[:, None] - q[None, :] < window)
    return ((seg[:, :, None] == seg[:, None, :]) & causal).unsqueeze(1)


def _additive(allowed, dtype):
    """The bool pattern as the additive mask eager attention adds to its scores."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)


def _block_mask(seg, window: int | None):
    try:
        from torch.nn.attention.flex_attention import create_block_mask
    except ImportError:
        raise ConfigError(f"model.config._attn_implementation='flex_attention' needs FlexAttention, which torch "
                          f"{torch.__version__} lacks; install torch >= 2.5 or use 'sdpa'") from None

    def mask_mod(b, h, q_idx, kv_idx):
        ok = (seg[b, q_idx] == seg[b, kv_idx]) & (q_idx >= kv_idx)
        return ok if window is None else ok & (q_idx - kv_idx < window)

    B, T = seg.shape

    return create_block_mask(mask_mod, B, None, T, T, device=seg.device)


# ---- the model ---------------------------------------------------------------------------------------
def _model_of(model):
    """The model inside its wrappers: torch.compile's (``_orig_mod``), PEFT's (``get_base_model()``), DDP's
    and FSDP's (``module``). torch.compile's and PEFT's forward attribute lookups to the model they wrap
    (``config`` included), so each is unwrapped by what it is, not by whether it answers ``config``: the
    checks of the model (its forward takes ``position_ids``) must read the model's own forward."""
    m = model
    for _ in range(8):
        children = getattr(m, "_modules", None) or {}
        if "_orig_mod" in children:  # torch.compile
            m = children["_orig_mod"]
            continue
        base = getattr(type(m), "get_base_model", None)  # PEFT (PeftModel; its LoRA layers stay in the model)
        if callable(base):
            inner = m.get_base_model()
            if inner is not m and inner is not None:
                m = inner
                continue
        if not hasattr(m, "config") and children.get("module") is not None:  # DDP, FSDP
            m = children["module"]
            continue
        break
    return m


def _attention_of(model):
    m = _model_of(model)
    config = getattr(m, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if config is None or not isinstance(impl, str):
        raise ConfigError(f"model must be a transformers model: hf_inputs reads model.config._attn_implementation "
                          f"(got a {type(model).__name__} without it)")
    if impl not in DENSE + VARLEN + FLEX:
        raise ConfigError(f"model.config._attn_implementation={impl!r} cannot be given per-document attention "
                          f"exactly by tokenmill (it would attend across the documents of a packed row); load the "
                          f"model with attn_implementation= one of {', '.join(DENSE + VARLEN + FLEX)}")
    _positions_restart(m, config)
    return config, impl


def _positions_restart(model, config) -> None:
    """Refuse a model for which restarting ``position_ids`` and masking attention do not make each document
    of a row its own: a forward without ``position_ids`` (a recurrent state, RWKV, Mamba, xLSTM, runs
    through the row; BLOOM's and MPT's ALiBi bias counts positions from the row's start) or ALiBi by
    configuration (Falcon's ``alibi=True``). Its attention implementation says "eager" all the same."""
    forward = getattr(type(model), "forward", None)
    try:
        takes = forward is None or "position_ids" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        takes = True  # (a forward inspect cannot read: let the model run)
    attn = getattr(config, "attn_config", None)  # (MPT's: an object or a dict)
    alibi = True in (getattr(config, "alibi", None), getattr(attn, "alibi", None),
                     attn.get("alibi") if isinstance(attn, dict) else None)
    if not takes or alibi:
        why = ("its forward takes no position_ids (a recurrent state or an ALiBi bias would run through the whole "
               "row)" if not takes else "it uses ALiBi (its position bias would count from the row's start)")
        raise ConfigError(f"{type(model).__name__} cannot score the documents of a packed row each on its own: {why}; "
                          "feed such a model one document per row (windows=SlidingWindows(...) without "
                          "block_size), or pad instead of packing")


def _layer_types(config, max_seqlen: int) -> tuple[list[str], int | None]:
    """The model's layer types and the sliding window that matters for this batch (None: no layer's
    window is shorter than the batch's longest segment, so every layer has the plain pattern). A
    multimodal model's are those of its text model (``config.get_text_config()``)."""
    get_text = getattr(config, "get_text_config", None)
    if callable(get_text) and get_text() is not None:
        config = get_text()
    window = getattr(config, "sliding_window", None)
    if getattr(config, "use_sliding_window", True) is False:
        window = None
    types = getattr(config, "layer_types", None)
    if types is None:  # one kind for all layers (Llama; Mistral and Mixtral slide in every layer)
        types = ["sliding_attention" if window is not None else "full_attention"]
    types = list(types)
    other = sorted(set(types) - set(LAYER_TYPES))
    if other:
        raise ConfigError(f"model.config.layer_types has {', '.join(map(repr, other))}: tokenmill gives exact "
                          f"per-document attention to {' and '.join(LAYER_TYPES)} layers only (other layers would "
                          "carry state or attention across the documents of a packed row); feed such a model one "
                          "document per row (windows=SlidingWindows(...) without block_size)")
    if "sliding_attention" not in types or window is None:
        return types, None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"model.config.sliding_window={window!r} must be an integer >= 1 (or None)")
    return types, (window if window < max_seqlen else None)


def _device_of(model):
    dev = getattr(model, "device", None)
    if isinstance(dev, torch.device):
        return dev
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _dtype_of(model):
    dt = getattr(model, "dtype", None)
    if not isinstance(dt, torch.dtype):
        dt = next((p.dtype for p in model.parameters()), torch.float32)
    if not dt.is_floating_point:
        raise ConfigError(f"the model's dtype is {dt}: eager attention adds a mask of the model's float dtype")
    return dt


def _bool_masks_for_sdpa() -> bool:
    """transformers >= 4.53 (``masking_utils``) builds bool masks for SDPA and passes a 4-D one through."""
    try:
        import transformers.masking_utils  # noqa: F401 (only whether it imports)
    except ImportError:
        return False
    return True


def _check_varlen_kwargs(impl: str) -> None:
    try:
        from transformers.modeling_flash_attention_utils import _flash_attention_forward
    except ImportError:
        _flash_attention_forward = None
    params = inspect.signature(_flash_attention_forward).parameters if _flash_attention_forward else {}
    if not all(k in params for k in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")):
        import sys

        version = getattr(sys.modules.get("transformers"), "__version__", "(not importable)")
        raise ConfigError(f"model.config._attn_implementation={impl!r}: transformers {version} "
                          "does not take cu_seq_lens_q/k and max_length_q/k, without which its flash path runs "
                          "the documents of a row together; install transformers >= 4.48 or use 'sdpa'")
