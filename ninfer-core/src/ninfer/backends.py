"""Backends: one per GPU generation, plus the pure-PyTorch reference.

A backend declares the compute capabilities it serves. ``--backend auto`` picks, among installed
backends that can run here, the one that fits the device best: an exact match of the device's
generation first, then the newest older generation (its PTX runs on newer cards), then reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import NinferError


class Backend:
    """Base class for backends. Subclasses set the class attributes."""

    name: str = ""
    description: str = ""
    # compute capabilities whose own machine code this backend ships, e.g. ((8, 6), (8, 7))
    capabilities: tuple[tuple[int, int], ...] = ()
    # whether its code for an older generation may run on a newer card through PTX
    runs_on_newer: bool = True
    dtypes: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16)

    @classmethod
    def check(cls, device: torch.device) -> tuple[bool, str, int]:
        """(can run, why, fit score). Higher score fits better."""
        if device.type != "cuda":
            return False, "needs a CUDA GPU; this device is " + device.type, 0
        if not torch.cuda.is_available():
            return False, "no CUDA GPU is visible to PyTorch", 0
        cap = torch.cuda.get_device_capability(device)
        if cap in cls.capabilities:
            return True, f"serves sm_{cap[0]}{cap[1]} natively", 100
        older = [c for c in cls.capabilities if c < cap]
        if cls.runs_on_newer and older:
            best = max(older)
            return True, f"runs on sm_{cap[0]}{cap[1]} through its sm_{best[0]}{best[1]} code", 50 + best[0] * 2 + best[1] // 10
        caps = ", ".join(f"sm_{a}{b}" for a, b in cls.capabilities)
        return False, f"serves {caps}; this GPU is sm_{cap[0]}{cap[1]}", 0


class ReferenceBackend(Backend):
    name = "reference"
    description = "pure PyTorch: every op, any device; the oracle for all kernels"
    dtypes = (torch.float32, torch.bfloat16, torch.float16)

    @classmethod
    def check(cls, device: torch.device) -> tuple[bool, str, int]:
        return True, f"pure PyTorch runs on {device.type}", 1


@dataclass
class BackendStatus:
    name: str
    distribution: str
    can_run: bool
    why: str
    score: int
    capabilities: list[str]

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def installed_backends() -> dict[str, type[Backend]]:
    from .plugins import collect

    found: dict[str, type[Backend]] = {}
    for cls in collect("ninfer_register_backends"):
        if not getattr(cls, "name", ""):
            continue
        found.setdefault(cls.name, cls)
    return found


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def backend_statuses(device: torch.device | None = None) -> list[BackendStatus]:
    device = device or default_device()
    out = []
    for name, cls in installed_backends().items():
        try:
            ok, why, score = cls.check(device)
        except Exception as e:  # a backend whose check breaks cannot run, and says why
            ok, why, score = False, f"its check failed: {type(e).__name__}: {e}", 0
        caps = [f"sm_{a}{b}" for a, b in cls.capabilities]
        dist = "ninfer-core" if name == "reference" else f"ninfer-{name}"
        out.append(BackendStatus(name, dist, ok, why, score, caps))
    return sorted(out, key=lambda s: (-s.score, s.name))


def choose_backend(name: str = "auto", device: torch.device | None = None) -> tuple[str, str]:
    """Return (backend name, why). ``auto`` picks the best that can run; a name is checked."""
    device = device or default_device()
    statuses = backend_statuses(device)
    by_name = {s.name: s for s in statuses}
    if name == "auto":
        runnable = [s for s in statuses if s.can_run]
        best = runnable[0]
        return best.name, f"{best.name}: {best.why}"
    if name not in by_name:
        known = ", ".join(sorted(by_name)) or "none"
        raise NinferError(f"Unknown backend {name!r}; installed backends are: {known} (or use --backend auto).")
    st = by_name[name]
    if not st.can_run:
        raise NinferError(f"Backend {name!r} cannot run here: {st.why}; use --backend auto to pick one that can.")
    return name, f"{name}: {st.why}"
