"""Compile CUDA C++ to a cubin for one GPU architecture with NVRTC, cached on disk.

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel (driven through ``cuda-bindings``) and needs no GPU,
no host compiler and no nvcc; the CUDA headers come from the ``nvidia-cuda-runtime`` wheel. A cubin
is cached under ``~/.cache/ninfer/kernels`` (``NINFER_KERNEL_CACHE`` overrides) keyed by the hash of
the source, every header it may include, the options, the arch and the NVRTC version, so an edit or
an NVRTC upgrade recompiles and nothing else does.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from ..errors import NinferError

CORE_INCLUDE = Path(__file__).parent / "include"
_ARCH = re.compile(r"^sm_(\d+)([a-z]?)$")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise NinferError("ninfer's GPU kernels need NVRTC; install it with "
                          "`pip install cuda-bindings nvidia-cuda-nvrtc nvidia-cuda-runtime`.") from e
    return nvrtc


def _check(result, what: str, prog=None):
    err = result[0]
    if int(err) != 0:
        log = _program_log(prog) if prog is not None else ""
        raise NinferError(f"NVRTC failed in {what} ({err.name}); fix the kernel source:\n{log}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _program_log(prog) -> str:
    nvrtc = _nvrtc()
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace").rstrip("\x00 \n")


@lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    if int(err) != 0:
        raise NinferError("NVRTC could not report its version; reinstall `nvidia-cuda-nvrtc`.")
    return int(major), int(minor)


@lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories holding cuda_fp16.h / cuda_bf16.h: the runtime wheel first, then a CUDA toolkit."""
    candidates = []
    try:
        import nvidia

        for root in nvidia.__path__:
            candidates += [Path(root) / "cu13" / "include", Path(root) / "cuda_runtime" / "include"]
    except ImportError:
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(Path(os.environ[env]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    found = tuple(str(p) for p in candidates if (p / "cuda_bf16.h").exists())
    if not found:
        raise NinferError("the CUDA headers (cuda_bf16.h) were not found; install them with "
                          "`pip install nvidia-cuda-runtime`.")
    return found[:1]


def parse_arch(arch: str) -> int:
    """'sm_90' -> 90. Raises NinferError naming the fix for anything else."""
    m = _ARCH.match(arch.strip())
    if not m:
        raise NinferError(f"Unknown GPU architecture {arch!r}; write it as sm_XX, e.g. sm_86 or sm_90.")
    return int(m.group(1))


def cache_dir() -> Path:
    d = Path(os.environ.get("NINFER_KERNEL_CACHE") or Path.home() / ".cache" / "ninfer" / "kernels")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _headers_digest(include_dirs: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for d in include_dirs:
        for p in sorted(Path(d).rglob("*.cuh")):
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(source: str, arch: str, options: tuple[str, ...], include_dirs: tuple[str, ...]) -> str:
    major, minor = nvrtc_version()
    h = hashlib.sha256()
    for part in (source, arch, "\0".join(options), _headers_digest(include_dirs), f"{major}.{minor}"):
        h.update(part.encode())
        h.update(b"\0")
    return f"{h.hexdigest()[:24]}-{arch}-nvrtc{major}.{minor}"


def compile_cubin(source: str, name: str, arch: str, options: tuple[str, ...] = (),
                  include_dirs: tuple[str, ...] = (), use_cache: bool = True,
                  progress: bool = True) -> tuple[bytes, bool]:
    """Compile ``source`` to a cubin for ``arch`` (e.g. 'sm_90'). Returns (cubin, was_cached)."""
    parse_arch(arch)
    incs = (str(CORE_INCLUDE), *include_dirs)
    key = cache_key(source, arch, options, incs)
    path = cache_dir() / f"{name}-{key}.cubin"
    if use_cache and path.exists():
        return path.read_bytes(), True
    if progress:
        print(f"ninfer: compiling {name} kernels for {arch} (first use; cached after)...", file=sys.stderr, flush=True)
    cubin = _compile(source, name, arch, options, incs)
    if use_cache:
        # write then rename, so a concurrent reader never sees half a cubin
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        os.replace(tmp, path)
    return cubin, False


def compile_ptx(source: str, name: str, arch: str, options: tuple[str, ...] = (),
                include_dirs: tuple[str, ...] = ()) -> str:
    """The PTX of ``source`` for ``arch`` ('sm_90' compiles for compute_90), uncached: to inspect what a kernel
    was compiled to (tests read the instructions each entry point holds)."""
    parse_arch(arch)
    ptx = _compile(source, name, arch.replace("sm_", "compute_"), options, (str(CORE_INCLUDE), *include_dirs),
                   ptx=True)
    return ptx.decode(errors="replace").rstrip("\x00")


def _compile(source: str, name: str, arch: str, options: tuple[str, ...], incs: tuple[str, ...],
             ptx: bool = False) -> bytes:
    nvrtc = _nvrtc()
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "create")
    try:
        opts = [f"--gpu-architecture={arch}", "--std=c++17", "-default-device",
                *(f"--include-path={d}" for d in (*incs, *cuda_include_dirs())), *options]
        res = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if int(res[0]) != 0:
            raise NinferError(f"NVRTC could not compile {name} for {arch}; fix the kernel source:\n"
                              + _program_log(prog))
        if ptx:
            size = _check(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
            buf = b" " * size
            _check(nvrtc.nvrtcGetPTX(prog, buf), "PTX")
            return buf
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        buf = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, buf), "cubin")
        return buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
