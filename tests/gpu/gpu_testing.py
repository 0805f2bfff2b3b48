"""Helpers of the GPU conformance suite (a uniquely named module, so the CPU tests' helpers cannot
shadow it or be shadowed by it)."""

from __future__ import annotations

import torch


def runnable_backends() -> list[str]:
    from ninfer.backends import backend_statuses

    return [s.name for s in backend_statuses(torch.device("cuda")) if s.can_run and s.name != "reference"]


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
