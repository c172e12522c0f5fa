"""Tiny tensors on a shared CPU: one intra-op thread avoids spin-waiting against other processes
(measured: a 4-micro-batch backward took 2 s with the default threads, 0.03 s with one)."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
