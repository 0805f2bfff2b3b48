"""ninfer-sm120: kernels for Blackwell consumer (RTX 50xx).

The CUDA C++ lives in ``kernels.cu`` (this generation's tuning and dtypes) on top of the shared
headers in ``ninfer/kernels/include``; it is compiled with NVRTC for the exact GPU at first use.
"""

from pathlib import Path

import torch

from ninfer.backends import Backend
from ninfer.kernels.library import KernelLibrary

__version__ = "0.1.0"

LIBRARY = KernelLibrary(name="sm120", source_path=Path(__file__).parent / "kernels.cu",
                        dtypes=(torch.bfloat16, torch.float16), arches=("sm_120",))


class Sm120Backend(Backend):
    name = "sm120"
    description = "Blackwell consumer (RTX 50xx): NVRTC-compiled CUDA kernels"
    capabilities = ((12, 0),)
    dtypes = (torch.bfloat16, torch.float16)
    kernels = LIBRARY
