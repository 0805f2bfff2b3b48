"""ninfer-sm90: kernels for Hopper (H100, H200).

The CUDA C++ lives in ``kernels.cu`` (this generation's tuning and dtypes) on top of the shared
headers in ``ninfer/kernels/include``; it is compiled with NVRTC for the exact GPU at first use.
"""

from pathlib import Path

import torch

from ninfer.backends import Backend
from ninfer.kernels.library import KernelLibrary

__version__ = "0.1.0"

LIBRARY = KernelLibrary(name="sm90", source_path=Path(__file__).parent / "kernels.cu",
                        dtypes=(torch.bfloat16, torch.float16), arches=("sm_90",))


class Sm90Backend(Backend):
    name = "sm90"
    description = "Hopper (H100, H200): NVRTC-compiled CUDA kernels"
    capabilities = ((9, 0),)
    dtypes = (torch.bfloat16, torch.float16)
    kernels = LIBRARY
