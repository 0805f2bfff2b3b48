"""The GPU conformance suite: one suite, run against every installed backend that can execute on this
device (sm75/sm86/sm89 through their code compiled for this GPU's arch; sm90 natively on Hopper).
Skipped as a whole where PyTorch sees no CUDA device."""

from __future__ import annotations

import os
import sys

import torch

from gpu_testing import runnable_backends

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))

if not torch.cuda.is_available():
    collect_ignore_glob = ["test_*.py"]


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", runnable_backends() if torch.cuda.is_available() else [])
