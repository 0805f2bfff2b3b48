"""The GPU conformance suite: one suite, run against every installed backend that can execute on this
device (sm75/sm86/sm89 through their code compiled for this GPU's arch; sm90 natively on Hopper).
Skipped as a whole where PyTorch sees no CUDA device."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))

if not torch.cuda.is_available():
    collect_ignore_glob = ["test_*.py"]


def runnable_backends() -> list[str]:
    from ninfer.backends import backend_statuses

    return [s.name for s in backend_statuses(torch.device("cuda")) if s.can_run and s.name != "reference"]


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", runnable_backends() if torch.cuda.is_available() else [])


def backend_dtypes(backend: str) -> list[torch.dtype]:
    from ninfer.backends import installed_backends

    return list(installed_backends()[backend].dtypes)


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert not torch.isnan(out).any(), "output has NaN (an element never written, or a real NaN)"
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def poison_allocator() -> None:
    """Fill the CUDA caching allocator's free blocks with NaN, so any output element a kernel fails to
    write reads back as NaN (outputs are allocated from those blocks)."""
    torch.cuda.synchronize()
    big = [torch.full((256 * 1024 * 1024,), float("nan"), dtype=torch.float32, device="cuda") for _ in range(2)]
    small = [torch.full((256 * 1024,), float("nan"), dtype=torch.float32, device="cuda") for _ in range(64)]
    torch.cuda.synchronize()
    del big, small
