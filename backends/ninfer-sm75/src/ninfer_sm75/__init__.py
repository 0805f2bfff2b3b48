"""ninfer-sm75: kernels for Turing (RTX 20xx, T4, 2080 Ti).

The CUDA C++ lives in ``kernels.cu`` (this generation's tuning and dtypes) on top of the shared
headers in ``ninfer/kernels/include``; it is compiled with NVRTC for the exact GPU at first use.
"""

from pathlib import Path

import torch

from ninfer.backends import Backend
from ninfer.kernels.library import KernelLibrary

__version__ = "0.1.0"

LIBRARY = KernelLibrary(name="sm75", source_path=Path(__file__).parent / "kernels.cu",
                        dtypes=(torch.float16,), arches=("sm_75",))


class Sm75Backend(Backend):
    name = "sm75"
    description = "Turing (RTX 20xx, T4, 2080 Ti): NVRTC-compiled CUDA kernels"
    capabilities = ((7, 5),)
    dtypes = (torch.float16,)
    kernels = LIBRARY
