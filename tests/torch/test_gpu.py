"""On CUDA: the FlexAttention (compiled) and varlen flash paths pass the equivalence check.
Marked ``gpu``; skipped where no CUDA device is present (CI). Results on an H200 are in
docs/benchmarks.md (bench/gpu_packing.py)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("attention, dtype, tol", [("flex", torch.float32, 1e-4), ("varlen", torch.bfloat16, 6e-2)])
@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_cuda_attention_paths_are_equivalent(attention, dtype, tol, positions):
    from tokenmill.torch import TinyCausalLM, TinyConfig
    from tokenmill.verify import packing_equivalence

    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 64, n) for n in rng.integers(2, 100, 24)]
    model = TinyCausalLM(TinyConfig(positions=positions), seed=0, dtype=dtype).cuda()
    report = packing_equivalence(model, docs, 256, attention=attention, atol=tol, rtol=tol)
    assert report.passed, str(report)
    stream = packing_equivalence(model, docs, 256, attention=attention, layout="stream", atol=tol, rtol=tol)
    assert not stream.passed


def test_step_normalizer_and_masks_with_cpu_counts_and_cuda_logits():
    """Targets counted on the CPU (a loader's labels before the copy), loss on the GPU: the running loss
    follows the loss; sdpa_mask of a batch on the GPU is made there."""
    from tokenmill.batching import pack
    from tokenmill.torch import StepNormalizer, sdpa_mask, to_tensors

    labels = torch.tensor([[1, 2, -100], [3, -100, -100]])
    logits = torch.randn(2, 3, 8, device="cuda")
    norm = StepNormalizer()
    assert norm.begin_step([labels]) == 3
    loss = norm.loss(logits, labels.cuda())
    assert loss.device.type == "cuda" and abs(norm.end_step() - float(loss)) < 1e-6
    block = next(pack([2, 1], 3).blocks([[1, 2], [3]], pad_id=0))
    t = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in to_tensors(block).items()}
    assert sdpa_mask(t).device.type == "cuda"
