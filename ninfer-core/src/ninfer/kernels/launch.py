"""Load a cubin into PyTorch's CUDA context and launch its kernels on PyTorch's current stream.

Arguments are passed as tensor ``data_ptr()``s and plain numbers, on
``torch.cuda.current_stream().cuda_stream``, so a launch inside ``torch.cuda.graph`` is captured
like any PyTorch kernel. No launch synchronises with the host.

Programmatic dependent launch (PDL): a module whose kernels all call ``griddepcontrol.wait`` before their first
read of earlier kernels' data and before their first global write (ninfer's own, ``include/ninfer``: see
``pdl_wait`` in common.cuh) and that was compiled for sm_90 or newer (below, the instruction is compiled out)
launches them with the programmatic-stream-serialization attribute: each kernel's blocks are scheduled while the
previous kernel still runs and wait for it on the GPU, which removes most of the gap between two launches, also
in a captured CUDA graph. ``NINFER_PDL=0`` launches every kernel plainly (A/B measurements).
"""

from __future__ import annotations

import ctypes
import os
import threading

import torch

from ..errors import NinferError

_lock = threading.Lock()
PDL = os.environ.get("NINFER_PDL", "1").strip() != "0"  # read at import; benchmarks may assign it
PDL_MIN_ARCH = 90  # griddepcontrol exists from sm_90 on


def pdl_capable(arch: str | None) -> bool:
    """Whether a module compiled for ``arch`` ('sm_90') has its griddepcontrol instructions compiled in."""
    if not arch:
        return False
    from .nvrtc import parse_arch

    return parse_arch(arch) >= PDL_MIN_ARCH


def _driver():
    from cuda.bindings import driver

    return driver


def _ok(result, what: str):
    err = result[0]
    if int(err) != 0:
        raise NinferError(f"CUDA driver call {what} failed ({err.name}); check the GPU and its driver.")
    return result[1] if len(result) == 2 else result[1:]


def _ensure_context(device_index: int):
    """Make PyTorch's primary context current on this thread (the server runs the engine in a worker)."""
    driver = _driver()
    torch.cuda.init()
    with torch.cuda.device(device_index):
        torch.cuda.current_stream()  # creates the primary context if PyTorch has not yet
    _ok(driver.cuInit(0), "cuInit")
    ctx = _ok(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        dev = _ok(driver.cuDeviceGet(device_index), "cuDeviceGet")
        ctx = _ok(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _ok(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


class Module:
    """One loaded cubin on one device; ``module[name]`` gives a launchable :class:`Kernel`.

    ``pdl_arch``: the arch the cubin was compiled for, given only when every kernel in it is PDL-aware (waits with
    ``griddepcontrol.wait`` before touching anything but constants); its kernels then launch with PDL from
    sm_90 on. Left out, every launch is a plain one."""

    def __init__(self, cubin: bytes, device_index: int, label: str = "", pdl_arch: str | None = None):
        self.device_index = device_index
        self.label = label
        self.pdl = pdl_capable(pdl_arch)
        self.arch = pdl_arch
        with _lock:
            _ensure_context(device_index)
            self._mod = _ok(_driver().cuModuleLoadData(cubin), "cuModuleLoadData")
        self._kernels: dict[str, Kernel] = {}

    def __getitem__(self, name: str) -> "Kernel":
        k = self._kernels.get(name)
        if k is None:
            fn = _driver().cuModuleGetFunction(self._mod, name.encode())
            if int(fn[0]) != 0:
                raise NinferError(f"kernel {name!r} is not in {self.label or 'this module'}; "
                                  "rebuild the backend's kernels (`ninfer kernels build`).")
            k = self._kernels[name] = Kernel(fn[1], name, pdl=self.pdl)
        return k


class Kernel:
    """A launchable kernel. Call with grid, block, args; tensors pass as pointers, ints as int32."""

    def __init__(self, fn, name: str, pdl: bool = False):
        self.fn = fn
        self.name = name
        self.pdl = pdl  # PDL-aware and compiled for sm_90+: launched with PDL unless NINFER_PDL=0
        self._smem_set = 0
        self._wide_clusters = False

    def set_max_dynamic_smem(self, nbytes: int):
        """Opt in to more than 48 KB of dynamic shared memory for this kernel."""
        if nbytes > self._smem_set:
            drv = _driver()
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _ok(drv.cuFuncSetAttribute(self.fn, attr, nbytes), "cuFuncSetAttribute")
            self._smem_set = nbytes

    def _allow_cluster(self, n: int):
        """Clusters of more than 8 blocks (sm_90: up to 16) need the kernel's non-portable attribute."""
        if n > 8 and not self._wide_clusters:
            drv = _driver()
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            _ok(drv.cuFuncSetAttribute(self.fn, attr, 1), "cuFuncSetAttribute")
            self._wide_clusters = True

    def __call__(self, grid, block, *args, smem: int = 0, stream=None, cluster=None):
        vals = []
        for a in args:
            if isinstance(a, torch.Tensor):
                vals.append(ctypes.c_void_p(a.data_ptr()))
            elif a is None:
                vals.append(ctypes.c_void_p(0))
            elif isinstance(a, bool):
                vals.append(ctypes.c_int(int(a)))
            elif isinstance(a, int):
                vals.append(ctypes.c_int(a))
            elif isinstance(a, float):
                vals.append(ctypes.c_float(a))
            elif isinstance(a, ctypes._SimpleCData):
                vals.append(a)
            else:
                raise TypeError(f"kernel {self.name}: cannot pass {type(a).__name__}")
        ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = (tuple(block) + (1, 1))[:3]
        s = stream if stream is not None else torch.cuda.current_stream().cuda_stream
        if cluster is not None:  # thread block clusters (sm_90+), with PDL where the module has it
            cx, cy, cz = (tuple(cluster) + (1, 1))[:3]
            self._allow_cluster(cx * cy * cz)
            err = _driver().cuLaunchKernelEx(_launch_config(gx, gy, gz, bx, by, bz, smem, s, self.pdl and PDL,
                                                            (cx, cy, cz)), self.fn, ctypes.addressof(ptrs), 0)[0]
        elif self.pdl and PDL:
            err = _driver().cuLaunchKernelEx(_launch_config(gx, gy, gz, bx, by, bz, smem, s), self.fn,
                                             ctypes.addressof(ptrs), 0)[0]
        else:
            err = _driver().cuLaunchKernel(self.fn, gx, gy, gz, bx, by, bz, smem, s, ctypes.addressof(ptrs), 0)[0]
        if int(err) != 0:
            raise NinferError(f"launching kernel {self.name} failed ({err.name}); "
                              "check the GPU state and the launch shape.")


_pdl_attr = None


def _launch_config(gx, gy, gz, bx, by, bz, smem, stream, pdl: bool = True, cluster=None):
    """The config of a cuLaunchKernelEx launch: the shape, the stream, programmatic stream serialization (PDL) and
    the cluster shape, where asked."""
    global _pdl_attr
    drv = _driver()
    if _pdl_attr is None:
        a = drv.CUlaunchAttribute()
        a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        a.value.programmaticStreamSerializationAllowed = 1
        _pdl_attr = a
    attrs = [_pdl_attr] if pdl else []
    if cluster is not None:
        a = drv.CUlaunchAttribute()
        a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster
        attrs.append(a)
    c = drv.CUlaunchConfig()
    c.gridDimX, c.gridDimY, c.gridDimZ = gx, gy, gz
    c.blockDimX, c.blockDimY, c.blockDimZ = bx, by, bz
    c.sharedMemBytes = smem
    c.hStream = stream
    c.attrs = attrs
    c.numAttrs = len(attrs)
    return c
