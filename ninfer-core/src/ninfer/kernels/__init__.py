"""ninfer's kernel toolchain: NVRTC compilation with a disk cache, module loading, launches on PyTorch's
stream, the shared CUDA headers (``include/ninfer``) and the launchers every backend registers."""

from .library import KernelLibrary
from .nvrtc import compile_cubin, nvrtc_version

__all__ = ["KernelLibrary", "compile_cubin", "nvrtc_version"]
