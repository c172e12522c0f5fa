"""packed == unpacked: the reference model passes with proper packing, and the check can fail."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill.errors import ConfigError
from tokenmill.torch import TinyCausalLM, TinyConfig
from tokenmill.verify import packing_equivalence


def documents(n=16, block=40, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 64, k) for k in rng.integers(2, block // 2, n)]


@pytest.fixture(params=["learned", "rope"])
def model(request):
    return TinyCausalLM(TinyConfig(positions=request.param), seed=1, dtype=torch.float64)


@pytest.mark.parametrize("method", ["best_fit", "first_fit_decreasing", "greedy"])
def test_document_packing_is_equivalent(model, method):
    report = packing_equivalence(model, documents(), 40, method=method, atol=1e-10, rtol=0)
    assert report.passed, str(report)
    assert report.targets_compared == sum(len(d) - 1 for d in documents())
    assert report.replaced_doc is not None and report.max_abs_diff < 1e-12


def test_plain_stream_packing_fails(model):
    report = packing_equivalence(model, documents(), 40, layout="stream", atol=1e-6, rtol=0)
    assert not report.equivalent and not report.isolated and not report.passed
    assert "FAIL" in str(report)


class PositionsNotReset(torch.nn.Module):
    """Mask right, but position ids 0..T-1 over the whole block (only the mask was fixed)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, *, position_ids=None, attention_mask=None):
        return self.inner(input_ids, attention_mask=attention_mask)


class MaskIgnored(torch.nn.Module):
    """Positions reset, but one causal triangle per block (only the positions were fixed)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, *, position_ids=None, attention_mask=None):
        return self.inner(input_ids, position_ids=position_ids)


def test_learned_positions_need_the_reset_rope_does_not():
    # With absolute position embeddings packed B must use its own positions 0,1,2; a purely
    # relative scheme (RoPE) is invariant to shifting all of B's positions.
    docs = documents()
    learned = TinyCausalLM(TinyConfig(positions="learned"), seed=1, dtype=torch.float64)
    rope = TinyCausalLM(TinyConfig(positions="rope"), seed=1, dtype=torch.float64)
    assert not packing_equivalence(PositionsNotReset(learned), docs, 40, atol=1e-9, rtol=0).equivalent
    r = packing_equivalence(PositionsNotReset(rope), docs, 40, atol=1e-9, rtol=0)
    assert r.passed, str(r)


def test_masking_attention_is_needed_too(model):
    # Ignoring only B's BOS label is not enough: without the mask B still reads A.
    report = packing_equivalence(MaskIgnored(model), documents(), 40, atol=1e-9, rtol=0)
    assert not report.equivalent and not report.isolated


def test_labels_that_cross_a_document_are_found(model, monkeypatch):
    """The mask alone is not enough either: with right masks and positions but a document's first label not
    ignored (A's EOS trained to predict B's BOS) the check had passed, comparing logits only."""
    from tokenmill.batching.packing import PackPlan

    report = packing_equivalence(model, documents(), 40, atol=1e-9, rtol=0)
    assert report.passed and report.labels_ok and "every label is its document's own" in str(report)
    real = PackPlan.batches

    def first_labels_kept(self, source, **kw):
        for b in real(self, source, **kw):
            first = (b.doc_ids >= 0) & (b.token_offsets == 0) & (np.arange(b.input_ids.shape[1]) > 0)
            labels = np.array(b.labels)
            labels[first] = b.input_ids[first]
            object.__setattr__(b, "labels", labels)
            yield b

    monkeypatch.setattr(PackPlan, "batches", first_labels_kept)
    report = packing_equivalence(model, documents(), 40, atol=1e-9, rtol=0)
    crossing = report.label_errors
    assert report.equivalent and report.isolated and not report.passed and crossing > 0
    assert f"{crossing:,d} labels are not their document's own next token" in str(report)
    assert "FAIL" in str(packing_equivalence(model, documents(), 40, layout="stream", atol=1e-6, rtol=0))


def test_flex_attention_block_mask_path_on_cpu():
    import warnings

    rope = TinyCausalLM(TinyConfig(positions="rope"), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = packing_equivalence(rope, documents(n=6), 40, attention="flex", atol=1e-5)
    assert report.passed, str(report)


def test_mode_is_restored_and_errors():
    m = TinyCausalLM(TinyConfig(), seed=0)
    m.train()
    packing_equivalence(m, [[1, 2, 3], [4, 5]], 8)
    assert m.training
    with pytest.raises(ConfigError, match="document 0 has 9 tokens, more than block_size=8"):
        packing_equivalence(m, [list(range(9))], 8)


def test_single_document_blocks_report_no_isolation_check(model):
    report = packing_equivalence(model, [[1, 2, 3, 4], [5, 6, 7, 8]], 4)
    assert report.passed and report.replaced_doc is None


def test_inputs_that_cannot_be_compared_are_named():
    """An empty document crashed inside torch ("max(): Expected reduction dim"), ids past the model's
    vocabulary raised torch's IndexError, vocab_size=0 was ignored, and method="concat" (which cuts
    documents) reported FAIL for documents that fit a block."""
    from tokenmill.errors import InputError

    model = TinyCausalLM(TinyConfig(), seed=0)
    with pytest.raises(InputError, match="document 0 holds -3"):
        packing_equivalence(model, [[1, -3, 2]], 8)
    for kw, match in [({"docs": [[1, 5, 2], []]}, "document 1 is empty"),
                      ({"docs": []}, "docs is empty"),
                      ({"method": "concat"}, "method='concat' cuts documents"),
                      ({"vocab_size": 0}, "vocab_size=0"),
                      ({"docs": [[1, 5, 10**6]]}, "id 1,000,000, outside the model's vocabulary of 64")]:
        args = {"docs": [[1, 5, 2], [3, 4]], **kw}
        with pytest.raises(ConfigError, match=match):
            packing_equivalence(model, args.pop("docs"), 8, **args)
    assert packing_equivalence(model, [[1, 5, 2], [3, 4]], 8).passed
