"""hf_inputs: packed rows into tiny random transformers models score every document as if it were alone.

Each document of a packed batch (padding included) is compared with the same model run on that
document alone (positions 0..n-1), float32, within 1e-4: eager and sdpa for Llama and Qwen2, sliding
windows (Qwen2's mixed layers, Mistral's), the flash path with a reference varlen kernel standing in
for flash-attn, FlexAttention's BlockMask against the dense pattern, and the refusals.
"""

from __future__ import annotations

import copy
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tokenmill
from tokenmill import ConfigError
from tokenmill.torch import TrainingLoader, hf_inputs, to_tensors
from tokenmill.torch.hf import _allowed, segment_ids

TOL = 1e-4
rng = np.random.default_rng(0)
DOCS = [rng.integers(1, 300, int(n)) for n in (9, 14, 5, 17, 11, 6, 12)]
PLAN = tokenmill.pack([len(d) for d in DOCS], 24)
BATCH = next(PLAN.batches(DOCS, batch_size=PLAN.num_blocks, pad_id=0))  # 4 rows, padding in every row
SMALL = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64)


def model(kind: str, impl: str, **kw):
    configs = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
               "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
               "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM)}
    Config, Model = configs[kind]
    torch.manual_seed(0)
    return Model._from_config(Config(**SMALL, **kw), attn_implementation=impl, dtype=torch.float32).eval()


def max_diff_to_alone(m, batch, **extra) -> float:
    """Largest |logit| difference between each document in the packed batch and the document alone."""
    ids, pos, docs = (torch.as_tensor(np.asarray(batch[k] if isinstance(batch, dict) else getattr(batch, k)))
                      for k in ("input_ids", "position_ids", "doc_ids"))
    with torch.no_grad():
        packed = m(**hf_inputs(batch, m), **extra).logits
        worst, seen = 0.0, 0
        for r in range(ids.shape[0]):
            for d in docs[r].unique().tolist():
                if d < 0:
                    continue
                where = (docs[r] == d).nonzero().view(-1)
                assert torch.equal(pos[r, where], torch.arange(where.numel()))  # positions 0..n-1
                alone = m(input_ids=ids[r, where][None], use_cache=False).logits[0]
                worst = max(worst, float((packed[r, where] - alone).abs().max()))
                seen += 1
    assert seen == len(DOCS) or isinstance(batch, dict)
    return worst


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_packed_documents_score_as_if_alone(kind, impl):
    assert (BATCH.doc_ids < 0).any(axis=1).all()  # every row has padding, one row is mostly padding
    m = model(kind, impl)
    assert max_diff_to_alone(m, BATCH) < TOL
    assert max_diff_to_alone(m, to_tensors(BATCH)) < TOL  # the dict of tensors, as loaders give it


def test_training_loader_batches_and_the_mask_types():
    loader = TrainingLoader(DOCS, batch_size=2, block_size=24, seed=0, drop_last=False)
    for impl, dtype in (("eager", torch.float32), ("sdpa", torch.bool)):
        m = model("llama", impl)
        for b in loader:
            kw = hf_inputs(b, m)
            B, T = b["input_ids"].shape
            assert kw["attention_mask"].shape == (B, 1, T, T) and kw["attention_mask"].dtype == dtype
            assert kw["use_cache"] is False and torch.equal(kw["labels"], b["labels"])
            assert max_diff_to_alone(m, b) < TOL


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_sliding_windows_stay_inside_each_document(impl):
    # Qwen2: layer 0 full, layer 1 sliding (window 4 < the 17-token document): a mask per layer type
    qwen = model("qwen2", impl, use_sliding_window=True, sliding_window=4, max_window_layers=1)
    kw = hf_inputs(BATCH, qwen)
    assert set(kw["attention_mask"]) == {"full_attention", "sliding_attention"}
    assert max_diff_to_alone(qwen, BATCH) < TOL
    # Mistral slides in every layer: one windowed mask
    mistral = model("mistral", impl, sliding_window=5)
    assert torch.is_tensor(hf_inputs(BATCH, mistral)["attention_mask"])
    assert max_diff_to_alone(mistral, BATCH) < TOL
    # a window no shorter than the longest segment (documents and padding runs) changes nothing
    wide = model("mistral", impl, sliding_window=BATCH.max_seqlen)
    plain = hf_inputs(BATCH, model("llama", impl))["attention_mask"]
    assert torch.equal(hf_inputs(BATCH, wide)["attention_mask"], plain)


def test_fine_tuning_loop_with_the_step_target_count():
    m = model("llama", "sdpa")
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    loader = TrainingLoader(DOCS, batch_size=2, block_size=24, seed=0)
    losses = []
    for _ in range(3):
        for batch in loader:
            out = m(**hf_inputs(batch, m), num_items_in_batch=batch["num_targets"])
            # transformers' loss with num_items_in_batch: summed token loss / the batch's targets
            logits, labels = out.logits[:, :-1], batch["labels"][:, 1:]
            ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 300), labels.reshape(-1), reduction="sum")
            assert torch.allclose(out.loss, ref / batch["num_targets"], atol=1e-5)
            out.loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(out.loss.detach()))
    assert losses[-1] < losses[0]


def test_a_batch_without_targets_has_loss_zero_with_the_documented_clamp():
    """The documented recipe passed ``num_targets`` as it is: a rank's all-padding last batch (``drop_last=False``)
    gave transformers' 0 / 0 = NaN as its loss. Clamped to 1 (the docs now say so) it is 0, gradients 0."""
    m = model("llama", "sdpa")
    empty = [b for r in range(2) for b in TrainingLoader(DOCS[:3], batch_size=4, block_size=24, drop_last=False,
                                                           world_size=2, rank=r) if int(b["num_targets"]) == 0]
    assert empty, "the setup must give an all-padding batch"
    batch = empty[0]
    assert torch.isnan(m(**hf_inputs(batch, m), num_items_in_batch=batch["num_targets"]).loss)  # transformers' 0 / 0
    out = m(**hf_inputs(batch, m), num_items_in_batch=batch["num_targets"].clamp(min=1))
    assert float(out.loss) == 0.0
    out.loss.backward()
    assert all(p.grad is None or not p.grad.any() for p in m.parameters())


# ---- flash attention: no flash-attn on CPU, so a reference varlen kernel stands in for it --------------------
def _reference_varlen(calls):
    def varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, causal=True,
               softmax_scale=None, window_size=None, **_):
        calls.append((cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))
        out = torch.empty_like(q)
        rep = q.shape[1] // k.shape[1]
        cu = cu_seqlens_q.tolist()
        for s, e in zip(cu[:-1], cu[1:]):
            L = e - s
            i = torch.arange(L)
            ok = i[None, :] <= i[:, None] if causal else torch.ones(L, L, dtype=torch.bool)
            if window_size is not None:
                ok = ok & (i[:, None] - i[None, :] <= window_size[0])
            qs, ks, vs = (x[s:e].transpose(0, 1) for x in (q, k, v))
            ks, vs = ks.repeat_interleave(rep, 0), vs.repeat_interleave(rep, 0)
            out[s:e] = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=ok,
                                                                         scale=softmax_scale).transpose(0, 1)
        return out

    def kwargs(query_length, key_length, is_causal, dropout=0.0, softmax_scale=None, sliding_window=None,
               max_seqlen_q=None, max_seqlen_k=None, **_):
        kw = {"causal": is_causal, "softmax_scale": softmax_scale, "max_seqlen_q": max_seqlen_q,
              "max_seqlen_k": max_seqlen_k}
        if sliding_window is not None and key_length > sliding_window:
            kw["window_size"] = (sliding_window - 1, sliding_window - 1)
        return kw

    def not_varlen(*a, **k):
        raise AssertionError("the flash path ran without cu_seqlens: it would attend across documents")

    return varlen, kwargs, not_varlen


@pytest.mark.parametrize("kind,kw", [("llama", {}), ("qwen2", dict(use_sliding_window=True, sliding_window=4,
                                                                   max_window_layers=1))])
def test_flash_varlen_kwargs_score_as_if_alone(monkeypatch, kind, kw):
    fa = pytest.importorskip("transformers.modeling_flash_attention_utils")
    if not hasattr(fa, "lazy_import_flash_attention"):
        pytest.skip("this transformers has another flash-attention plumbing")
    calls = []
    varlen, kwargs, not_varlen = _reference_varlen(calls)

    def lazy(implementation, *a, **k):
        return (not_varlen, varlen, None, None, None), (kwargs, dict)

    monkeypatch.setattr(fa, "lazy_import_flash_attention", lazy)
    eager = model(kind, "eager", **kw)
    flash = copy.deepcopy(eager)
    flash.config._attn_implementation = "flash_attention_2"  # flash-attn itself is not installable here
    args = hf_inputs(BATCH, flash)
    assert "attention_mask" not in args  # a 2-D mask would send transformers down its unpadding path
    assert args["cu_seq_lens_q"].dtype == torch.int32 and args["cu_seq_lens_q"] is args["cu_seq_lens_k"]
    assert args["cu_seq_lens_q"].tolist() == BATCH.cu_seqlens.tolist()
    assert args["max_length_q"] == args["max_length_k"] == BATCH.max_seqlen and isinstance(args["max_length_q"], int)
    with torch.no_grad():
        packed = flash(**args).logits
        reference = eager(**hf_inputs(BATCH, eager)).logits
    assert calls and all(c[0].tolist() == BATCH.cu_seqlens.tolist() for c in calls)
    real = torch.from_numpy(BATCH.doc_ids >= 0)
    assert float((packed - reference).abs().amax(-1)[real].max()) < TOL  # eager is exact (tested above)


# ---- FlexAttention ----------------------------------------------------------------------------------------------
def _fake(impl: str, **config):
    return SimpleNamespace(config=SimpleNamespace(_attn_implementation=impl, **config), parameters=lambda: iter([]),
                           device=torch.device("cpu"), dtype=torch.float32)


@pytest.mark.parametrize("window", [None, 5])
def test_flex_block_mask_is_the_per_document_pattern(window):
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    cfg = {} if window is None else {"sliding_window": window}
    mask = hf_inputs(BATCH, _fake("flex_attention", **cfg))["attention_mask"]
    assert isinstance(mask, flex.BlockMask)
    B, T = BATCH.shape
    seg = segment_ids(torch.from_numpy(BATCH.cu_seqlens), B, T)
    i = torch.arange(T)
    grid = mask.mask_mod(torch.arange(B)[:, None, None], 0, i[None, :, None], i[None, None, :])
    assert torch.equal(grid.unsqueeze(1), _allowed(seg, window))
    q, k, v = (torch.randn(B, 2, T, 8, generator=torch.Generator().manual_seed(j)) for j in range(3))
    with warnings.catch_warnings():  # uncompiled: slow for long rows, exact for these
        warnings.simplefilter("ignore", UserWarning)
        got = flex.flex_attention(q, k, v, block_mask=mask)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=_allowed(seg, window))
    assert float((got - want).abs().max()) < 1e-5


def test_wrapped_models_are_read_through_their_wrappers():
    """torch.compile's OptimizedModule and PEFT's PeftModel forward ``config`` to the model they wrap, so
    the unwrapping stopped at them and read the wrapper's forward(**kwargs), refusing the model as one
    whose forward takes no position_ids. Each is now unwrapped by what it is: the same inputs as the bare
    model, also under DDP-like ``.module`` wrappers; a wrapped RWKV is still refused."""

    class PeftLike(torch.nn.Module):  # PeftModel's shape: get_base_model(), attributes forwarded
        def __init__(self, model):
            super().__init__()
            self.base_model = model

        def get_base_model(self):
            return self.base_model

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.base_model, name)

        def forward(self, *args, **kwargs):
            return self.base_model(*args, **kwargs)

    class DdpLike(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.module = model

    bare = model("llama", "sdpa")
    want = hf_inputs(BATCH, bare)
    for wrapped in (torch.compile(bare), PeftLike(bare), DdpLike(PeftLike(torch.compile(bare)))):
        got = hf_inputs(BATCH, wrapped)
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) for k in want if isinstance(want[k], torch.Tensor))
    rwkv = transformers.RwkvForCausalLM(transformers.RwkvConfig(
        vocab_size=300, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64,
        context_length=64))
    with pytest.raises(ConfigError, match="RwkvForCausalLM cannot score the documents of a packed row"):
        hf_inputs(BATCH, torch.compile(rwkv))


# ---- refusals ---------------------------------------------------------------------------------------------------
def test_what_cannot_be_exact_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"model.config._attn_implementation='paged\|sdpa' cannot .* across"):
        hf_inputs(BATCH, _fake("paged|sdpa"))
    with pytest.raises(ConfigError, match="must be a transformers model"):
        hf_inputs(BATCH, torch.nn.Linear(2, 2))
    with pytest.raises(ConfigError, match=r"model.config.layer_types has 'linear_attention'"):
        hf_inputs(BATCH, _fake("sdpa", layer_types=["full_attention", "linear_attention"]))
    with pytest.raises(ConfigError, match=r"model.config.layer_types has 'chunked_attention'"):
        hf_inputs(BATCH, _fake("flash_attention_2", layer_types=["chunked_attention"]))
    with pytest.raises(ConfigError, match="sliding_window=0 must be an integer >= 1"):
        hf_inputs(BATCH, _fake("eager", sliding_window=0))


@pytest.mark.parametrize("name,config", [
    ("Rwkv", dict(hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64,
                  context_length=64)),
    ("Bloom", dict(hidden_size=32, n_layer=2, n_head=4)),
    ("Falcon", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, alibi=True)),
])
def test_models_whose_state_or_bias_runs_through_the_row_are_refused(name, config):
    """Their attention implementation reads "eager", yet a packed row is one sequence to them: RWKV's
    recurrent state and BLOOM's / Falcon's ALiBi bias ran across documents (RWKV's logits 2.2 away from a
    document alone; BLOOM and Falcon crashed on the 4-D mask with a bare ValueError)."""
    Config, Model = getattr(transformers, f"{name}Config"), getattr(transformers, f"{name}ForCausalLM")
    torch.manual_seed(0)
    m = Model(Config(vocab_size=300, **config)).eval()
    with pytest.raises(ConfigError, match=rf"{name}ForCausalLM cannot score the documents of a packed row"):
        hf_inputs(BATCH, m)


def test_bad_batches_are_refused_by_name():
    m = _fake("sdpa")
    t = to_tensors(BATCH)
    with pytest.raises(ConfigError, match="batch has no cu_seqlens"):
        hf_inputs({k: v for k, v in t.items() if k != "cu_seqlens"}, m)
    with pytest.raises(ConfigError, match=r"batch\['max_seqlen'\] is 3 but the longest segment"):
        hf_inputs({**t, "max_seqlen": 3}, m)
    with pytest.raises(ConfigError, match=r"cu_seqlens'\] must rise strictly from 0"):
        hf_inputs({**t, "cu_seqlens": t["cu_seqlens"][:-1]}, m)
    with pytest.raises(ConfigError, match=r"batch\['labels'\] has shape"):
        hf_inputs({**t, "labels": t["labels"][:, 1:]}, m)
    with pytest.raises(ConfigError, match=r"batch\['input_ids'\] must be an integer tensor"):
        hf_inputs({**t, "input_ids": t["input_ids"].float()}, m)
    with pytest.raises(ConfigError, match="labels='yes' must be True or False"):
        hf_inputs(BATCH, m, labels="yes")
    with pytest.raises(ConfigError, match="batch must be a tokenmill Batch"):
        hf_inputs([[1, 2, 3]], m)
    assert "labels" not in hf_inputs(BATCH, m, labels=False)
