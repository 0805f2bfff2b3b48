"""ninfer-sm86: kernels for Ampere (A100, RTX 30xx, A10).

The CUDA C++ lives in ``kernels.cu`` (this generation's tuning and dtypes) on top of the shared
headers in ``ninfer/kernels/include``; it is compiled with NVRTC for the exact GPU at first use.
"""

from pathlib import Path

import torch

from ninfer.backends import Backend
from ninfer.kernels.library import KernelLibrary

__version__ = "0.1.0"

LIBRARY = KernelLibrary(name="sm86", source_path=Path(__file__).parent / "kernels.cu",
                        dtypes=(torch.bfloat16, torch.float16), arches=("sm_80", "sm_86"))


class Sm86Backend(Backend):
    name = "sm86"
    description = "Ampere (A100, RTX 30xx, A10): NVRTC-compiled CUDA kernels"
    capabilities = ((8, 0), (8, 6))
    dtypes = (torch.bfloat16, torch.float16)
    kernels = LIBRARY
