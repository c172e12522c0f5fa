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
