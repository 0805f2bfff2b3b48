"""`ninfer kernels build [--arch sm_XX] [--json]`: compile every backend's kernels ahead of use."""

from __future__ import annotations

import json
import time

import click

from ..errors import NinferError


def _libraries():
    from ..backends import installed_backends

    return [(name, cls) for name, cls in installed_backends().items() if getattr(cls, "kernels", None) is not None]


def build(arch: str | None = None) -> dict:
    """Compile every installed backend's kernels that apply. With ``arch``, the backends that claim it
    (no GPU needed); without, the backends that can run on the local GPU, for its own arch."""
    from .nvrtc import nvrtc_version, parse_arch

    if arch is not None:
        parse_arch(arch)
        targets = [(n, c) for n, c in _libraries() if arch in c.kernels.arches]
    else:
        import torch

        if not torch.cuda.is_available():
            raise NinferError("No CUDA GPU is visible, so there is no local arch to build for; "
                              "pass --arch sm_XX (e.g. --arch sm_90).")
        major, minor = torch.cuda.get_device_capability()
        arch = f"sm_{major}{minor}"
        targets = [(n, c) for n, c in _libraries() if c.check(torch.device("cuda"))[0]]
    backends, total = [], 0
    for name, cls in targets:
        t0 = time.perf_counter()
        cubin, cached = cls.kernels.compile(arch)
        missing = cls.kernels.missing_kernels(cubin)
        if missing:
            raise NinferError(f"backend {name} compiled for {arch} but lacks kernels {missing}; "
                              "its kernels.cu must instantiate every entry point.")
        n = len(cls.kernels.kernel_names())
        total += n
        backends.append({"backend": name, "kernels": n, "cached": cached, "cubin_bytes": len(cubin),
                         "seconds": round(time.perf_counter() - t0, 2)})
    if arch in _quant_arches():  # the grouped-int GEMV of ninfer.quant, registered for every GPU backend
        from ..quant import gpu as qgpu
        from .nvrtc import cache_dir

        t0 = time.perf_counter()
        before = set(cache_dir().glob("ninfer_qgemv-*"))
        cubin = qgpu.compile_for(arch)
        missing = [k for k in qgpu.kernel_names(arch) if k.encode() + b"\0" not in cubin]
        if missing:
            raise NinferError(f"the quant kernels compiled for {arch} lack {missing}; fix quant/kernels/qgemv.cu.")
        n = len(qgpu.kernel_names(arch))
        total += n
        backends.append({"backend": "quant (qgemv/qmma)", "kernels": n,
                         "cached": set(cache_dir().glob("ninfer_qgemv-*")) == before,
                         "cubin_bytes": len(cubin), "seconds": round(time.perf_counter() - t0, 2)})
    major, minor = nvrtc_version()
    return {"arch": arch, "compiled": total, "backends": backends, "nvrtc": f"{major}.{minor}"}


def _quant_arches() -> set[str]:
    from ..quant import gpu as qgpu

    return {f"sm_{b[2:]}" for b in qgpu.BACKENDS}


@click.group("kernels")
def kernels():
    """Compile and inspect ninfer's GPU kernels."""


@kernels.command("build")
@click.option("--arch", default=None, help="target GPU arch, e.g. sm_86; default: the local GPU's")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def build_cmd(arch, as_json):
    """Compile every kernel each backend claims for ARCH (no GPU needed), or warm the cache for this GPU."""
    try:
        result = build(arch)
    except NinferError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(result))
        return
    if not result["backends"]:
        from ..backends import installed_backends

        arches = sorted({f"sm_{a}{b}" for c in installed_backends().values() for a, b in getattr(c, "capabilities", ())})
        raise click.ClickException(f"no installed backend claims {result['arch']}" + (
            f"; they build for {', '.join(arches)}." if arches else "; install one (pip install -e ./backends/...)."))
    for b in result["backends"]:
        how = "cached" if b["cached"] else f"compiled in {b['seconds']} s"
        click.echo(f"{b['backend']}: {b['kernels']} kernels for {result['arch']} ({how})")
    click.echo(f"{result['compiled']} kernels for {result['arch']} (NVRTC {result['nvrtc']})")
