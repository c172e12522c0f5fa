"""A tiny causal transformer for verifying packing: learned absolute positions or RoPE.

Small on purpose (pre-norm blocks, ``(B, T, d)`` shapes in comments, no dropout) so that a packed
batch and documents run alone can be compared exactly. It takes the three things packing changes:
``position_ids``, the attention mask (a bool SDPA mask, True = may attend, or a FlexAttention
``BlockMask``) and the ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError, require

torch = require("torch", "torch")
nn = torch.nn
F = torch.nn.functional


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int = 64
    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 2
    max_positions: int = 256  # learned positions: the largest position id + 1
    positions: Literal["learned", "rope"] = "learned"
    rope_base: float = 10_000.0

    def __post_init__(self):
        from .._validate import check_float, check_int

        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_positions"):  # (0 heads divided by zero)
            object.__setattr__(self, name, check_int(getattr(self, name), name, min=1))  # (frozen)
        object.__setattr__(self, "rope_base", check_float(self.rope_base, "rope_base", min=1.0))
        if self.positions not in ("learned", "rope"):
            raise ConfigError(f"positions={self.positions!r} is not 'learned' or 'rope'")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ConfigError(f"d_model={self.d_model} must split into {self.n_heads} heads of even size")


class _Attention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x, position_ids, mask):
        B, T, d = x.shape
        H = self.cfg.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, d // H).permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, hs)
        if self.cfg.positions == "rope":
            q, k = _rope(q, position_ids, self.cfg.rope_base), _rope(k, position_ids, self.cfg.rope_base)
        if isinstance(mask, tuple):  # (cu_seqlens, max_seqlen): variable-length flash attention (CUDA)
            from torch.nn.attention.varlen import varlen_attn

            cu, max_len = mask
            flat = [t.transpose(1, 2).reshape(B * T, H, d // H) for t in (q, k, v)]  # (B*T, H, hs)
            y = varlen_attn(*flat, cu, cu, max_len, max_len, window_size=(-1, 0))
            return self.out(y.reshape(B, T, d))
        if mask is not None and not torch.is_tensor(mask):  # a FlexAttention BlockMask
            y = _flex_attention(x.is_cuda)(q, k, v, block_mask=mask)
        elif mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if mask.dim() == 4 else mask[:, None])
        return self.out(y.transpose(1, 2).reshape(B, T, d))  # (B, T, d)


_COMPILED_FLEX = []


def _flex_attention(cuda: bool):
    """flex_attention; compiled on CUDA (the fused kernel skips empty tiles), eager on CPU."""
    from torch.nn.attention.flex_attention import flex_attention

    if not cuda:
        return _eager_flex_attention
    if not _COMPILED_FLEX:
        _COMPILED_FLEX.append(torch.compile(flex_attention))
    return _COMPILED_FLEX[0]


def _eager_flex_attention(*args, **kwargs):
    """flex_attention run eagerly (this reference model's CPU path, on purpose: the scores in full, as the
    dense masks have them), without torch's advice to compile it, which a user of ``verify-packing`` can do
    nothing about."""
    import warnings

    from torch.nn.attention.flex_attention import flex_attention

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return flex_attention(*args, **kwargs)


def _rope(x, position_ids, base: float):
    """Rotate the two halves of every head by angles ``position * base^(-2i/hs)``; x: (B, H, T, hs)."""
    hs = x.shape[-1]
    inv = base ** (-torch.arange(0, hs, 2, dtype=torch.float64, device=x.device) / hs)  # (hs/2,)
    ang = (position_ids.to(torch.float64)[:, None, :, None] * inv).to(x.dtype)  # (B, 1, T, hs/2)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : hs // 2], x[..., hs // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class _Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model))

    def forward(self, x, position_ids, mask):
        x = x + self.attn(self.ln1(x), position_ids, mask)
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    """``logits = model(input_ids, position_ids=..., attention_mask=...)``, ``(B, T, vocab_size)``.

    ``position_ids`` default to ``0 .. T-1`` per row; ``attention_mask`` defaults to plain causal.
    It may be a ``(B, 1, T, T)`` bool tensor (True = may attend), a FlexAttention ``BlockMask``, or
    a tuple ``(cu_seqlens, max_seqlen)`` for variable-length flash attention (CUDA, half precision).
    Weights are initialized from ``seed`` (reproducible across processes).

    >>> model = TinyCausalLM(TinyConfig(positions="rope"), seed=0)
    >>> model(torch.tensor([[1, 2, 3]])).shape
    torch.Size([1, 3, 64])
    """

    def __init__(self, config: TinyConfig = TinyConfig(), *, seed: int = 0, dtype=None):
        super().__init__()
        self.config = config
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            self.embed = nn.Embedding(config.vocab_size, config.d_model)
            self.pos = nn.Embedding(config.max_positions, config.d_model) if config.positions == "learned" else None
            self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
            self.ln_f = nn.LayerNorm(config.d_model)
            self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        finally:
            torch.random.set_rng_state(gen_state)
        if dtype is not None:
            self.to(dtype)

    def forward(self, input_ids, *, position_ids=None, attention_mask=None):
        if not torch.is_tensor(input_ids) or input_ids.ndim != 2:
            raise ConfigError(f"input_ids is a {type(input_ids).__name__} of shape {tuple(getattr(input_ids, 'shape', ()))}"
                              "; pass a (B, T) integer tensor (torch.as_tensor(ids)[None] for one sequence)")
        B, T = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(T, device=input_ids.device).expand(B, T)
        x = self.embed(input_ids)  # (B, T, d)
        if self.pos is not None:
            if int(position_ids.max()) >= self.config.max_positions:
                raise ConfigError(f"position id {int(position_ids.max()):,d} is out of range for "
                                  f"max_positions={self.config.max_positions:,d}; restart positions per "
                                  "document or raise max_positions")
            x = x + self.pos(position_ids)
        for block in self.blocks:
            x = block(x, position_ids, attention_mask)
        return self.head(self.ln_f(x))  # (B, T, vocab_size)
