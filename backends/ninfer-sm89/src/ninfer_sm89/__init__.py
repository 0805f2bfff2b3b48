"""ninfer-sm89: kernels for Ada (RTX 40xx, L4, L40).

The CUDA C++ lives in ``kernels.cu`` (this generation's tuning and dtypes) on top of the shared
headers in ``ninfer/kernels/include``; it is compiled with NVRTC for the exact GPU at first use.
"""

from pathlib import Path

import torch

from ninfer.backends import Backend
from ninfer.kernels.library import KernelLibrary

__version__ = "0.1.0"

LIBRARY = KernelLibrary(name="sm89", source_path=Path(__file__).parent / "kernels.cu",
                        dtypes=(torch.bfloat16, torch.float16), arches=("sm_89",))


class Sm89Backend(Backend):
    name = "sm89"
    description = "Ada (RTX 40xx, L4, L40): NVRTC-compiled CUDA kernels"
    capabilities = ((8, 9),)
    dtypes = (torch.bfloat16, torch.float16)
    kernels = LIBRARY
