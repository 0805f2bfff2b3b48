"""The grouped-int GEMV on CUDA: compile ``kernels/qgemv.cu`` with the core's NVRTC toolchain, launch
it for decode/verify widths (1..16 tokens), and fall back to dequantise + cuBLAS for prefill (T > 16): the dense
weight comes from one kernel launch (:func:`dequantize_dense`: ``qdeq_*`` for tiles, ``qdeqr_*`` for row packing).

Two kernels. On sm_80+ a weight the tensor-core kernel covers (integer or no zero point, 16-bit
scales, group_size % 32 == 0, K % 64 (int4) / 32 (int8) == 0; see TILE_BITS) is
repacked once into 16-row tiles
(:func:`prepare`, called at load; ``layout.pack_tiles``) and served by the tensor-core kernel: fp16/bf16 MMAs
of exact (u - z) codes, float32 accumulation. Its split form ``qmsk_*`` gives each warp one
contiguous part of a tile, S parts a tile so that the grid's warps fill every SM evenly, the parts summed
through a float32 workspace in a fixed order (the default for 9..16 tokens, SPLIT_WIDTHS); ``qmma_*`` gives each
tile a block whose warps split K, each warp keeping a ring of loads in flight; its burst form ``qmv1_*`` / ``qmv8_*``
(the default for 1 / 2..8 tokens, where the weight covers it: see qmv_covers) has each warp load 4 consecutive chunks at
once instead. Everything else (GGUF mins, group 16, float32 scales,
sm_75) takes the CUDA-core kernel ``qgemv_*``.

Registered for every GPU backend by name (``quant.plugin``); the shared headers come from
``ninfer/kernels/include``, so the kernel meets the same build rules as the backends' own.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

import torch

from . import fixed
from .layout import TILE_ROWS, QuantWeight, dequantize, pack_tiles, tile_chunk

SOURCE = Path(__file__).parent / "kernels" / "qgemv.cu"
WIDTHS = (1, 2, 4, 8, 16)
MAX_TOKENS = 16
WARPS = 4
BACKENDS = {"sm75": (torch.float16,), "sm86": (torch.bfloat16, torch.float16), "sm89": (torch.bfloat16, torch.float16),
            "sm90": (torch.bfloat16, torch.float16), "sm120": (torch.bfloat16, torch.float16)}
_SUFFIX = {torch.float16: "f16", torch.bfloat16: "bf16"}
MMA_WIDTHS = (8, 16)  # qmma_*_t8 serves 1..8 tokens, _t16 9..16
MMA_MAX_WARPS = 16
# Warps per SM the launcher plans qmma's grid for (mma_warps); ptxas gives the 1..8-token kernels ~64-76
# registers a thread (~24-32 warps an SM); 32 matched the per-shape sweep's best warps on the H200.
RESIDENT_WARPS = 32
# Which weights get the tiled packing and the tensor-core kernel, by bits. Measured on the H200 (bench/RESULTS.md,
# 2026-12-02, issue 7, session 3): qmma beats qgemv for int4 and int8 at every width (int8 at 1 token: 0.655 vs
# 0.605 of copy bandwidth), so both take it. NINFER_QMMA=int4 keeps int8 on qgemv, NINFER_QMMA=0 both.
TILE_BITS: set[int] = {"0": set(), "false": set(), "off": set(), "int4": {4}}.get(
    os.environ.get("NINFER_QMMA", "all"), {4, 8})
# bench/quant.py's A/B and the GPU tests: another source for the tiled kernels (the previous qmma,
# bench/quant_legacy_qgemv.cu) and extra -D options for every tiled launch (-DQM_SMEM_RING: the ring of loads in
# flight in shared memory instead of registers; -DQM_RAW: offsets off by a second mma). Not for use.
BENCH_SOURCE: Path | None = None
BENCH_EXTRA: tuple[str, ...] = tuple(os.environ.get("NINFER_QMMA_EXTRA", "").split())
SMEM_RING = 8  # chunks in flight per lane in qmma's shared-memory ring (its QM_U in kernels/qgemv.cu)
# The split form of the tensor-core kernel (qmsk_*, kernels/qgemv.cu): one warp per part of a tile, S parts a tile,
# S x tiles about the warps the GPU holds at once, the parts summed through a float32 workspace (deterministic).
# SPLIT_WIDTHS: the kernel widths (8: 1..8 tokens, 16: 9..16) that take it; the others take the per-tile form
# (qmma_*, a block per tile). Measured on the H200 (bench/RESULTS.md, 2026-12-02 session 4, GEMV-only, 8 layers):
# at 16 tokens the split form reads 0.338 / 0.482 of copy bandwidth (27B W4A16 / 8B W8A16) vs 0.318 / 0.440, at
# 1 token 0.580 / 0.663 vs 0.590 / 0.704, end to end (1 token) 142.1 / 289.7 vs 141.6 / 300.2 tok/s.
# NINFER_QMMA_SPLIT = 16 (default) | all | none.
SPLIT_WIDTHS: set[int] = {"all": {8, 16}, "none": set(), "0": set()}.get(os.environ.get("NINFER_QMMA_SPLIT", "16"),
                                                                          {16})
# The burst form (qmv1_* one token, kernels/qgemv.cu): each warp reads QMV_BURST consecutive chunks at once, for groups
# of whole chunks x 2^j. Measured on the H200 (bench/RESULTS.md, 2026-12-03 session 6, GEMV only): int8 0.86 of copy
# bandwidth against qmma's 0.73, int4 0.68 against 0.61. NINFER_QMV1=0 keeps one token on qmma.
QMV1: bool = os.environ.get("NINFER_QMV1", "1").lower() not in ("0", "false", "off")
QMV1S: bool = os.environ.get("NINFER_QMV1S", "1").lower() not in ("0", "false", "off")  # SwiGLU in qmv1's epilogue
# A Gated DeltaNet layer's conv update and gates in the epilogue of its one-token input projection (qmv1g_*)
QMV1G: bool = os.environ.get("NINFER_QMV1G", "1").lower() not in ("0", "false", "off")
def _bits(v: str) -> set[int] | None:
    """The weight bits a setting names: "0" / "off" none, "1" / "all" 4 and 8, else a comma list of 4 and 8; None
    for anything else."""
    v = v.strip().lower().replace(" ", "")
    if v in ("0", "false", "off", "none", ""):
        return set()
    if v in ("1", "true", "on", "all"):
        return {4, 8}
    parts = v.split(",")
    return {int(b) for b in parts} if all(b in ("4", "8") for b in parts) else None


def _bits_env(name: str, default: str) -> set[int]:
    """_bits of the environment variable ``name`` (unset: ``default``); a value it cannot read warns, then takes
    ``default``."""
    bits = _bits(os.environ.get(name, default))
    if bits is None:
        warnings.warn(f"{name}={os.environ[name]!r} names no weight bits (4, 8, 4,8, all or 0); using {default}",
                      stacklevel=2)
        bits = _bits(default)
    return bits


# One token of an int4 weight with its activations in 16-bit fixed point, multiplied on the integer tensor cores
# (qmv1f / qmv1sf / qmv1gf, ninfer.quant.fixed): taken where the norm before the GEMV attached that form to its row.
# Its products take 15-30 % less time than qmv1's; the 27B W4A16 decode 4.5-5.6 % faster on the H200 (bench/RESULTS.md
# session 24). NINFER_QMV1F=0 keeps such weights on qmv1 (bf16 products).
QMV1F: bool = os.environ.get("NINFER_QMV1F", "1").lower() not in ("0", "false", "off", "")
# ... and of an int8 weight (NINFER_QMV1F_INT8=0: qmv1, fp16 products): a lane's 16 bytes of codes are one IMMA's A
# fragment after a byte permute a register, the same form and k order as int4's (qgemv.cu FIX8). On an H100 the 8B
# W8A16 decode +1.3 % with an int4 lm_head, +0.6 % with an int8 one (bench/RESULTS.md session 26; not run on the H200).
QMV1F_INT8: bool = os.environ.get("NINFER_QMV1F_INT8", "1").lower() not in ("0", "false", "off", "")
# ... and lm_head, the final norm writing the form (NINFER_QMV1F_HEAD=1, opt-in): on an H100 level with lm_head from
# the bf16 row in 6 of 8 A/B pairs, 0.8-1.4 % slower in 2 (int8 lm_head; bench/RESULTS.md session 26).
QMV1F_HEAD: bool = os.environ.get("NINFER_QMV1F_HEAD", "0").lower() not in ("0", "false", "off", "")
# ... and the SwiGLU form of it (qmv1sf) writing its output in that form for the down projection (NINFER_QMV1F_DOWN=1).
# Opt-in: on the H100 the 27B W4A16 decode lost 2-3 % with it, more than down's faster products can win (likely the
# fence and group count at every block's end; not measured apart; bench/RESULTS.md session 24).
QMV1F_DOWN: bool = os.environ.get("NINFER_QMV1F_DOWN", "0").lower() not in ("0", "false", "off", "")
# ... and one token whose row has no form (down, the 8B's attention o, lm_head): each warp makes the form of the
# bursts it multiplies from the bf16 / fp16 row itself (qmv1x), for the weights' bits in NINFER_QMV1X: "4" (the
# default), "8", "4,8" or "all" (= 1), "0". On an H100 (bench/RESULTS.md session 27) the 27B W4A16 decode +1.4-3.3 %
# (down and lm_head); int8 too leaves the 8B W8A16 level (-0.6 to +0.7 %: o, down, lm_head), so int8 is opt-in.
QMV1X: set[int] = _bits_env("NINFER_QMV1X", "4")
# ... and the mixers' output projections (GDN out_proj, attention o) on qmv1f too: the op before each (the recurrence's
# output norm, the attention output gate) writes its output in the form (NINFER_QMV1F_OUT=0: from the bf16 row, qmv1).
# The 27B W4A16 decode +0.4-0.5 % on an H100 (bench/RESULTS.md session 25; not run on the H200).
QMV1F_OUT: bool = os.environ.get("NINFER_QMV1F_OUT", "1").lower() not in ("0", "false", "off", "")
# 2..8 tokens (verify) through the same burst kernel's 8-token form qmv8_*; NINFER_QMV8=0 keeps them on qmma.
QMV8: bool = os.environ.get("NINFER_QMV8", "1").lower() not in ("0", "false", "off")
# 9..16 tokens through its 16-token form qmv16_* (NINFER_QMV16=1); off by default: the split form qmsk serves them.
QMV16: bool = os.environ.get("NINFER_QMV16", "0").lower() not in ("0", "false", "off")
QMV_BURST = 4  # chunks a warp loads at once (kernels/qgemv.cu QMV_BURST)
QMV_WARPS: int | None = None  # bench/quant.py: warps a tile for qmv1 instead of qmv_warps' choice
# Warps a tile for the burst kernels by waves (qmv_warps); NINFER_QMV_WAVES=0: mma_warps' rule (before session 11)
QMV_WAVES: bool = os.environ.get("NINFER_QMV_WAVES", "1").lower() not in ("0", "false", "off")
SK_BLOCK = 32  # threads of a qmsk block: one warp, so that every SM gets the same number of warps
SK_MIN_CHUNKS = 4  # at least this many 512-byte chunks a warp
SK_SPLITS: int | None = None  # bench/quant.py and the tests: a fixed number of parts a tile
# bench/quant.py's sweep: (N, K, bits) -> (warps per tile, extra compile options such as -DQM_U=8)
CONFIG_OVERRIDE: dict[tuple[int, int, int], tuple[int, tuple[str, ...]]] = {}
_modules: dict[tuple, object] = {}
_sms: dict[int, int] = {}
_lock = threading.Lock()


def _include_dir() -> str:
    from .. import kernels

    return str(Path(kernels.__file__).parent / "include")


def _has_mma(arch: str) -> bool:
    return int(arch.split("_")[1][:-1] if arch[-1].isalpha() else arch.split("_")[1]) >= 80


def options(arch: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """NVRTC options: the tensor-core kernel from sm_80 on, with its ring of loads in flight in registers
    (-DQM_REG_RING) unless ``extra`` asks for the shared-memory ring (-DQM_SMEM_RING, a bench variant)."""
    base = ("-DQG_NO_BF16",) if arch == "sm_75" else ()
    if _has_mma(arch):
        base += ("-DQG_MMA",) if "-DQM_SMEM_RING" in extra else ("-DQG_MMA", "-DQM_REG_RING")
    return base + tuple(extra)


def compile_for(arch: str, use_cache: bool = True, extra: tuple[str, ...] = (), source: Path | None = None) -> bytes:
    """The cubin for ``arch`` ('sm_90'); needs no GPU. ``extra``: more -D options, ``source``: another .cu
    (bench variants)."""
    from ..kernels.nvrtc import compile_cubin

    cubin, _ = compile_cubin((source or SOURCE).read_text(), "ninfer_qgemv", arch, options(arch, extra),
                             include_dirs=(_include_dir(),), use_cache=use_cache, progress=False)
    return cubin


def mma_kernel_name(dtype: torch.dtype, scale_dtype: torch.dtype, bits: int, zero_point: bool, width: int,
                    split: bool = False) -> str:
    return (f"{'qmsk' if split else 'qmma'}_{_SUFFIX[dtype]}_s{_SUFFIX[scale_dtype]}_b{bits}_"
            f"{'zp' if zero_point else 'sym'}_t{width}")


def qmv_kernel_name(dtype: torch.dtype, scale_dtype: torch.dtype, bits: int, zero_point: bool, width: int = 1) -> str:
    """The burst kernel for ``width`` = 1, 8 or 16 tokens (qmv1_*, qmv8_*, qmv16_*)."""
    return f"qmv{width}_{_SUFFIX[dtype]}_s{_SUFFIX[scale_dtype]}_b{bits}_{'zp' if zero_point else 'sym'}"


def qmv_covers(w: QuantWeight, extra: tuple[str, ...] = ()) -> bool:
    """Whether the burst kernel (qmv1 / qmv8 / qmv16) serves a tiled weight (built with the -DQMV_ options ``extra``): groups
    of whole chunks (64 int4 / 32 int8 codes) times a power of two, K a whole number of bursts (QMV_BURST chunks)."""
    burst = next((int(o.split("=")[1]) for o in extra if o.startswith("-DQMV_BURST=")), QMV_BURST)
    chunk = tile_chunk(w.bits)
    cpg = w.group_size // chunk
    return (w.bits in (4, 8) and w.group_size % chunk == 0 and cpg & (cpg - 1) == 0
            and all(o.startswith("-DQMV_") for o in extra)
            and w.in_features % (chunk * burst) == 0)


def kernel_names(arch: str) -> list[str]:
    dts = ("f16",) if arch == "sm_75" else ("f16", "bf16")
    names = [f"qgemv_{s}_b{b}_t{t}" for s in dts for b in (8, 4) for t in WIDTHS]
    names += [f"qdeqr_{s}_b{b}" for s in dts for b in (8, 4)]
    if _has_mma(arch):
        names += [mma_kernel_name(d, sd, b, z, t, sk) for d in _SUFFIX for sd in _SUFFIX for b in (8, 4)
                  for z in (False, True) for t in MMA_WIDTHS for sk in (False, True)]
        names += [qmv_kernel_name(d, sd, b, z, wd) for d in _SUFFIX for sd in _SUFFIX for b in (4, 8)
                  for z in (False, True) for wd in (1, 8, 16)]
        forms = ("qmv1s", "qmv1g", "qdeq", "qmv1f", "qmv1sf", "qmv1gf", "qmv1x")
        names += [p + qmv_kernel_name(d, sd, b, z)[4:] for p in forms
                  for d in _SUFFIX for sd in _SUFFIX for b in (4, 8) for z in (False, True)]
    return names


def _module(device: torch.device, extra: tuple[str, ...] = (), source: Path | None = None):
    from ..kernels.launch import Module

    idx = device.index if device.index is not None else torch.cuda.current_device()
    with _lock:
        if (idx, extra, source) not in _modules:
            major, minor = torch.cuda.get_device_capability(idx)
            arch = f"sm_{major}{minor}"
            # qgemv.cu's entry points wait (griddepcontrol.wait) before reading activations or writing: launched
            # with PDL on sm_90+; a bench variant from another source is not known to, so it launches plainly
            _modules[idx, extra, source] = Module(compile_for(arch, extra=extra, source=source), idx,
                                                  label="ninfer-qgemv", pdl_arch=arch if source is None else None)
    return _modules[idx, extra, source]


def tiles_cover(w: QuantWeight, device: torch.device) -> bool:
    """Whether the tensor-core kernel serves ``w`` on ``device`` (see the module docstring)."""
    if device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 8:
        return False
    return (w.mins is None and w.scales.dtype in _SUFFIX and w.group_size % 32 == 0
            and w.in_features % tile_chunk(w.bits) == 0 and w.in_features % w.group_size == 0)


def tile_params(w: QuantWeight) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scales (and zero points) of a tiled weight, per tile and group, the two rows a lane needs side by
    side: int32 [tiles, groups, 8] = s[16i + g] | s[16i + g + 8] << 16; int16 likewise for zeros (bytes)."""
    cached = getattr(w, "_tile_params", None)
    if cached is not None:
        return cached
    n, ng = w.scales.shape
    tiles = -(-n // TILE_ROWS)

    def pairs(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        p = torch.zeros(tiles * TILE_ROWS, ng, dtype=t.dtype, device=t.device)
        p[:n] = t
        return p.view(tiles, 2, 8, ng).permute(0, 3, 2, 1).contiguous().view(dtype)[..., 0]

    s = pairs(w.scales, torch.int32)
    z = None if w.zeros is None else pairs(w.zeros.to(torch.uint8), torch.int16)
    w._tile_params = (s, z)
    return w._tile_params


def prepare(w: QuantWeight) -> QuantWeight:
    """Repack ``w`` (on its CUDA device) for the tensor-core kernel, in place, when it covers it; once, at
    load: a weight first seen during CUDA-graph capture is served by the CUDA-core kernel instead."""
    if w.packing == "rows" and w.bits in TILE_BITS and tiles_cover(w, w.device):
        w.qweight = pack_tiles(w).qweight
        w.packing = "tiles16"
    if w.packing == "tiles16":
        tile_params(w)
        if SPLIT_WIDTHS and w.device.type == "cuda":  # the split kernel's workspace, before any graph capture
            idx = w.device.index if w.device.index is not None else torch.cuda.current_device()
            sk_workspace(w.device, _sm_count(idx) * 64, -(-w.scales.shape[0] // TILE_ROWS), grow=True)
    return w


def mma_warps(tiles: int, k: int, bits: int, device: torch.device) -> int:
    """Warps per tile (they split K): as many as keep every block of the grid resident at once
    (RESIDENT_WARPS an SM), at least 4, at most 16, and no more than the chunks of a row."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _sms:
        _sms[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    room = _sms[idx] * RESIDENT_WARPS
    w = 16
    while w > 4 and tiles * w > room:
        w //= 2
    return max(1, min(w, k // tile_chunk(bits)))


_qmv_plans: dict[tuple, int] = {}


def qmv_warps(kernel, tiles: int, k: int, bits: int, device: torch.device) -> int:
    """Warps a tile for the burst kernel ``kernel`` (a qmv1 / qmv8 / qmv16 entry point, a block a tile): mma_warps'
    choice, unless its blocks need more than one wave of what the GPU holds at once (the occupancy API for that block
    size: int4's 80 registers a thread leave 24-25 warps an SM, not the 32 mma_warps plans for) and fewer warps a tile
    fit in one wave with fewer bursts a warp than the waves of mma_warps' choice take in all. The 27B shape's 1030- and
    896-tile int4 projections (K 5120): 4 warps a tile run 1.3 waves, 10 rounds of bursts; 3 run one wave, 7
    rounds. Grids of many waves keep mma_warps' choice (measured: 16 warps on the 8B's int8 lm_head, which a rounds
    count favours, lost 7 % end to end, bench/RESULTS.md session 11). The SwiGLU and Gated DeltaNet forms take the
    plain qmv1 kernel's choice for the same weight, so their sums stay bit for bit the plain launch's."""
    base = mma_warps(tiles, k, bits, device)
    if not QMV_WAVES or device.type != "cuda":
        return base
    idx = device.index if device.index is not None else torch.cuda.current_device()
    key = (idx, id(kernel), tiles, k, bits)
    if key not in _qmv_plans:
        from ..kernels.launch import _driver, _ok

        bursts = k // tile_chunk(bits) // QMV_BURST
        sms = _sm_count(idx)

        def wave(w: int) -> int:  # blocks of w warps the GPU holds at once
            return sms * int(_ok(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel.fn, w * 32, 0),
                                 "cuOccupancyMaxActiveBlocksPerMultiprocessor"))

        plan = base
        if wave(base) < tiles:
            one = [w for w in range(1, base) if wave(w) >= tiles]
            if one and -(-bursts // max(one)) < -(-tiles // max(1, wave(base))) * -(-bursts // base):
                plan = max(one)
        _qmv_plans[key] = plan
    return _qmv_plans[key]


def mma_smem(warps: int, w: QuantWeight, extra: tuple[str, ...] = ()) -> int:
    """Dynamic shared memory of one qmma block: none for the default build; with -DQM_SMEM_RING, per warp,
    its QM_U slots of 32 lanes x 16 bytes of codes and 32 x 4 bytes of scales per group the chunk touches (two
    when the group does not hold whole chunks)."""
    if BENCH_SOURCE is not None or "-DQM_SMEM_RING" not in extra:
        return 0
    ring = next((int(o.split("=")[1]) for o in extra if o.startswith("-DQM_U=")), SMEM_RING)
    groups = 1 if w.group_size % tile_chunk(w.bits) == 0 else 2
    return warps * ring * (512 + 128 * groups)


_sk_buffers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
_sk_retired: list[tuple[torch.Tensor, torch.Tensor]] = []  # outgrown buffers a captured CUDA graph may still use
_sk_resident: dict[tuple, int] = {}


def sk_resident_warps(kernel, device: torch.device) -> int:
    """Warps of ``kernel`` (a qmsk entry point, SK_BLOCK threads a block) the whole GPU holds at once."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    key = (idx, kernel.name, id(kernel), SK_BLOCK)
    if key not in _sk_resident:
        from ..kernels.launch import _driver, _ok

        blocks = _ok(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel.fn, SK_BLOCK, 0),
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        _sk_resident[key] = max(1, int(blocks)) * _sm_count(idx) * (SK_BLOCK // 32)
    return _sk_resident[key]


def _sm_count(idx: int) -> int:
    if idx not in _sms:
        _sms[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _sms[idx]


def sk_splits(tiles: int, k: int, bits: int, resident: int) -> int:
    """Parts a tile for the split kernel: as many as keep S x tiles within the resident warps, each part at least
    SK_MIN_CHUNKS chunks long."""
    return SK_SPLITS or max(1, min(resident // tiles, (k // tile_chunk(bits)) // SK_MIN_CHUNKS))


def sk_workspace(device: torch.device, warps: int, tiles: int, grow: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The split kernel's workspace on ``device``: a float32 slot a warp (16 rows x 16 tokens) and a counter a tile,
    zero (every launch leaves them zero). Grown only when ``grow`` (never inside a graph capture); None when too
    small. Shared by every launch on the device: the launches of one stream at a time, as ninfer's engine makes."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    buf = _sk_buffers.get(idx)
    if buf is not None and buf[0].numel() >= warps * 256 and buf[1].numel() >= tiles:
        return buf
    if not grow:
        return None
    if buf is not None:
        _sk_retired.append(buf)
    nw = max(warps, 0 if buf is None else buf[0].numel() // 256)
    nt = max(tiles, 0 if buf is None else buf[1].numel())
    buf = (torch.empty(nw * 256, dtype=torch.float32, device=device), torch.zeros(nt, dtype=torch.int32, device=device))
    _sk_buffers[idx] = buf
    return buf


def gpu_params(w: QuantWeight) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 scale and offset [N, G] with W = u * s + o, made once per weight and kept on it."""
    cached = getattr(w, "_gpu_params", None)
    if cached is not None:
        return cached
    s = w.scales.float()
    if w.mins is not None:
        o = w.mins.float()
    elif w.zeros is not None:
        o = -w.zeros.float() * s
    else:
        o = -float(1 << (w.bits - 1)) * s
    w._gpu_params = (s.contiguous(), o.contiguous())
    return w._gpu_params


_persist_grids: dict[tuple, int] = {}


def qmv1_grid(kernel, tiles: int, threads: int, k: int, bits: int, extra: tuple[str, ...],
              device: torch.device) -> tuple[int, int]:
    """(blocks, dynamic shared memory bytes) of a one-token burst launch (qmv1 / qmv1s / qmv1g) over ``tiles`` loop
    tiles: one block a tile, none; in a -DQMV_PERSIST=1 build (bench only) an int4 weight's launch takes persistent
    blocks, as many as the GPU holds at once with the token's K 16-bit activations in shared memory."""
    if bits != 4 or "-DQMV_PERSIST=1" not in extra:
        return tiles, 0
    smem = 2 * k
    idx = device.index if device.index is not None else torch.cuda.current_device()
    key = (idx, id(kernel), threads, smem)
    if key not in _persist_grids:
        from ..kernels.launch import _driver, _ok

        if smem > 48 * 1024:
            kernel.set_max_dynamic_smem(smem)
        per_sm = int(_ok(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel.fn, threads, smem),
                         "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
        _persist_grids[key] = max(1, per_sm) * _sm_count(idx)
    return min(tiles, _persist_grids[key]), smem


_counts: dict = {}


def _group_counts(device: torch.device, h: int) -> torch.Tensor:
    """qmv1sf's per-group block counts for an output row of h (zeros; each launch sets them back to zero as it ends),
    one buffer per device and width (one stream launches them: the decode step's)."""
    key = (device.index if device.index is not None else torch.cuda.current_device(), h)
    if key not in _counts:
        _counts[key] = torch.zeros(h // fixed.GROUP, dtype=torch.int32, device=device)
    return _counts[key]


def _fixed_form(x: torch.Tensor, w: QuantWeight):
    """(xq, xg) where the fixed-point kernels serve one token x with w: the form the norm attached to x (unchanged
    since), an int4 (or, unless NINFER_QMV1F_INT8=0, int8) tiled weight with groups of whole 128-k runs and no column
    permutation; else None."""
    f = fixed.attached(x) if QMV1F else None
    if f is None or not fixed_kernels_serve(w) or f[0].shape != (2, w.in_features) or f[0].device != x.device:
        return None
    return f[0], f[1]


def fixed_kernels_serve(w: QuantWeight) -> bool:
    """Whether the fixed-point kernels (qmv1f*, qmv1x) serve w (where the burst kernel does): int4, or int8 unless
    NINFER_QMV1F_INT8=0, tiled, no column permutation, groups of whole 128-k runs."""
    return ((w.bits == 4 or w.bits == 8 and QMV1F_INT8) and w.packing == "tiles16" and w.perm is None
            and w.group_size % fixed.GROUP == 0)


def _one_token_form(x: torch.Tensor, w: QuantWeight, enabled: bool):
    """What the one-launch forms of qmv1 (qmv1s, qmv1g) share: None where they cannot serve one token x with w; else
    (x as one 16-byte-aligned row, the tile scales and zero points, the tiles, the plain qmv1 launch's warps a tile for
    w, the kernel module, the kernels' name suffix)."""
    k, n = w.in_features, w.scales.shape[0]
    if (not QMV1 or not enabled or not x.is_cuda or x.dtype not in _SUFFIX or x.numel() != k
            or w.packing != "tiles16" or BENCH_SOURCE is not None or (n, k, w.bits) in CONFIG_OVERRIDE
            or not qmv_covers(w, BENCH_EXTRA) or not tiles_cover(w, x.device)):
        return None  # (bench variants of the burst kernel, -DQMV_ options only, take these forms from their build)
    if w.perm is not None:
        x = x.index_select(-1, w.perm)
    x2 = x.reshape(1, k).contiguous()
    if x2.data_ptr() % 16:
        x2 = x2.clone()
    sp, zp = tile_params(w)
    tiles = -(-n // TILE_ROWS)
    mod = _module(x.device, BENCH_EXTRA)
    name = qmv_kernel_name(x.dtype, w.scales.dtype, w.bits, zp is not None)
    return x2, sp, zp, tiles, QMV_WARPS or qmv_warps(mod[name], tiles, k, w.bits, x.device), mod, name[4:]


def quant_linear_silu_mul(x: torch.Tensor, w: QuantWeight, fixed_out: bool = False) -> torch.Tensor | None:
    """silu(x @ gate^T) * (x @ up^T) for a gate_up weight [gate | up] in one launch of the burst kernel (qmv1s:
    each block one gate tile and its up tile, every sum as quant_linear's qmv1 launch makes it, so the bits are
    silu_mul(quant_linear(x, w))'s); None where that kernel does not serve (the caller then runs the two ops).
    NINFER_QMV1S=0 turns it off. ``fixed_out``: where x comes in the fixed-point form (qmv1sf), the output row is
    attached in that form too (ninfer.quant.fixed), for the down projection, if its width is a multiple of 128 and
    NINFER_QMV1F_DOWN=1 (QMV1F_DOWN)."""
    k, n = w.in_features, w.scales.shape[0]
    form = None if n % 32 else _one_token_form(x, w, QMV1S)
    if form is None or 2 * form[4] > 16:  # QM_MAX_WARPS: the plain launch's warps a tile, twice
        return None
    x2, sp, zp, tiles, warps, mod, sfx = form
    y = torch.empty(*x.shape[:-1], n // 2, dtype=x.dtype, device=x.device)
    fx = _fixed_form(x, w)
    if fx is not None:
        h = n // 2
        out = (None, None, None)
        if fixed_out and QMV1F_DOWN and h % fixed.GROUP == 0:
            out = (torch.empty(2, h, dtype=torch.int8, device=x.device),
                   torch.empty(h // fixed.GROUP, 2, dtype=torch.int32, device=x.device), _group_counts(x.device, h))
        mod["qmv1sf" + sfx]((tiles // 2,), (2 * warps * 32,), w.qweight, sp, zp, fx[0], fx[1], y, n, k, w.group_size,
                            *out)
        return y if out[0] is None else fixed.attach(y, out[0], out[1])
    kernel = mod["qmv1s" + sfx]
    grid, smem = qmv1_grid(kernel, tiles // 2, 2 * warps * 32, k, w.bits, BENCH_EXTRA, x.device)
    kernel((grid,), (2 * warps * 32,), w.qweight, sp, zp, x2, y, n, k, w.group_size, smem=smem)
    return y


def quant_gdn_in_proj(x: torch.Tensor, w: QuantWeight, conv_weight: torch.Tensor, conv_state: torch.Tensor,
                      A_log: torch.Tensor, dt_bias: torch.Tensor, conv_dim: int, z_dim: int):
    """A Gated DeltaNet layer's one-token input side in one launch of the burst kernel (qmv1g): the projection by a
    quantised weight with rows [q|k|v (conv_dim) | z (z_dim) | b (H) | a (H)], then in its epilogue the causal conv
    update with SiLU (the window ``conv_state`` [conv_dim, 3] fp32 updated in place) and the gates, as the dense
    ``gdn_in_proj`` kernels run them (ninfer/gdn_in_epilogue.cuh). Every sum is quant_linear's qmv1 launch's, so the
    results are bit for bit ``reference.gdn_in_proj``'s composition of quant_linear, causal_conv1d_update and
    gdn_gates on the GPU. Returns (conv output [1, conv_dim], z [1, z_dim], g [1, H] fp32, beta [1, H]), or None
    where that kernel does not serve (the layer then runs the ops one by one). NINFER_QMV1G=0 turns it off."""
    k, n = w.in_features, w.scales.shape[0]
    H = (n - conv_dim - z_dim) // 2
    f32 = torch.float32
    if (H <= 0 or n != conv_dim + z_dim + 2 * H
            or conv_weight.shape != (conv_dim, 4) or conv_weight.dtype != x.dtype or not conv_weight.is_contiguous()
            or conv_state.shape != (conv_dim, 3) or conv_state.dtype != f32 or not conv_state.is_contiguous()
            or A_log.shape != (H,) or dt_bias.shape != (H,) or A_log.dtype != f32 or dt_bias.dtype != f32
            or not A_log.is_contiguous() or not dt_bias.is_contiguous()
            or any(t.device != x.device for t in (w.qweight, conv_weight, conv_state, A_log, dt_bias))):
        return None
    form = _one_token_form(x, w, QMV1G)
    if form is None:
        return None
    x2, sp, zp, tiles, warps, mod, sfx = form
    y = torch.empty(1, conv_dim + z_dim, dtype=x.dtype, device=x.device)
    g = torch.empty(1, H, dtype=f32, device=x.device)
    beta = torch.empty(1, H, dtype=x.dtype, device=x.device)
    fx = _fixed_form(x, w)
    if fx is not None:
        mod["qmv1gf" + sfx]((tiles,), (warps * 32,), w.qweight, sp, zp, fx[0], fx[1], y, n, k, w.group_size,
                            conv_weight, conv_state, A_log, dt_bias, g, beta, conv_dim, z_dim, H)
        return y[:, :conv_dim], y[:, conv_dim:], g, beta
    kernel = mod["qmv1g" + sfx]
    grid, smem = qmv1_grid(kernel, tiles, warps * 32, k, w.bits, BENCH_EXTRA, x.device)
    kernel((grid,), (warps * 32,), w.qweight, sp, zp, x2, y, n, k, w.group_size, conv_weight, conv_state, A_log,
           dt_bias, g, beta, conv_dim, z_dim, H, smem=smem)
    return y[:, :conv_dim], y[:, conv_dim:], g, beta


def dequantize_dense(w: QuantWeight, dtype: torch.dtype) -> torch.Tensor:
    """The dense [N, K] weight in ``dtype`` (packed column order) for a prefill's cuBLAS GEMM, in one kernel launch (a
    thread a 16-byte vector of codes: the read 0.5 / 1 byte a weight, the write 2): a tiled weight through ``qdeq_*``
    (bit for bit ``layout.dequantize``), one in row packing (sm_75, GGUF mins) through ``qdeqr_*`` from the CUDA-core
    kernel's float32 scale and offset (bit for bit where the scales are 16-bit); anything else (groups not a multiple
    of a vector, CPU) through ``layout.dequantize``'s torch ops, which go through float32 [N, K] temporaries."""
    n, k = w.scales.shape[0], w.in_features
    if not (w.qweight.is_cuda and dtype in _SUFFIX and w.bits in (4, 8)) or (
            dtype == torch.bfloat16 and torch.cuda.get_device_capability(w.qweight.device)[0] < 8):  # sm_75: fp16
        return dequantize(w, dtype)
    if w.packing == "tiles16":
        out = torch.empty(n, k, dtype=dtype, device=w.qweight.device)
        sp, zp = tile_params(w)
        total = -(-n // TILE_ROWS) * (k // tile_chunk(w.bits)) * 32
        name = f"qdeq_{_SUFFIX[dtype]}_s{_SUFFIX[w.scales.dtype]}_b{w.bits}_{'zp' if zp is not None else 'sym'}"
        _module(w.qweight.device)[name]((-(-total // 256),), (256,), w.qweight, sp, zp, out, n, k, w.group_size)
        return out
    per = 128 // w.bits
    if (w.packing != "rows" or k % per or w.group_size % per or w.qweight.data_ptr() % 16
            or not w.qweight.is_contiguous()):
        return dequantize(w, dtype)
    s, o = gpu_params(w)
    out = torch.empty(n, k, dtype=dtype, device=w.qweight.device)
    total = n * (k // per)
    _module(w.qweight.device)[f"qdeqr_{_SUFFIX[dtype]}_b{w.bits}"]((-(-total // 256),), (256,), w.qweight, s, o, out, n,
                                                                   k, w.group_size)
    return out


def _width(t: int) -> int:
    return next(w for w in WIDTHS if w >= t)


def quant_linear(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ dequant(W)^T (+ b). x: [..., K] fp16/bf16 on CUDA -> [..., N]."""
    k, n = w.in_features, w.scales.shape[0]
    if w.perm is not None:
        x = x.index_select(-1, w.perm)
    x2 = x.reshape(-1, k)  # [T, K]
    t = x2.shape[0]
    per = 128 // w.bits
    if (w.packing == "rows" and x.is_cuda and w.bits in TILE_BITS and not torch.cuda.is_current_stream_capturing()
            and tiles_cover(w, x.device)):
        prepare(w)  # a weight that missed prepare() at load: repack now, outside any graph capture
    tiled = w.packing == "tiles16"
    if (not x.is_cuda or x.dtype not in _SUFFIX or t == 0 or t > MAX_TOKENS
            or (not tiled and (k % per or w.group_size % per)) or (bias is not None and bias.dtype != x.dtype)):
        # prefill (and anything the kernels do not cover): dequantise once, then cuBLAS
        return torch.nn.functional.linear(x, dequantize_dense(w, x.dtype), bias)
    x2 = x2.contiguous()
    if x2.data_ptr() % 16:  # the kernels read activations in 16-byte vectors
        x2 = x2.clone()
    y = torch.empty(t, n, dtype=x.dtype, device=x.device)  # [T, N]
    if tiled:
        sp, zp = tile_params(w)
        tiles = -(-n // TILE_ROWS)
        warps, extra = CONFIG_OVERRIDE.get((n, k, w.bits)) or (mma_warps(tiles, k, w.bits, x.device), ())
        extra = tuple(extra) + BENCH_EXTRA
        qw = 1 if t == 1 else 8 if t <= 8 else 16
        if {1: QMV1, 8: QMV8, 16: QMV16}[qw] and BENCH_SOURCE is None and qmv_covers(w, extra):
            name = qmv_kernel_name(x.dtype, w.scales.dtype, w.bits, zp is not None, qw)
            kernel = _module(x.device, extra)[name]
            args = (w.qweight, sp, zp, x2, bias, y, n, k, w.group_size) + (() if t == 1 else (t,))
            if (n, k, w.bits) not in CONFIG_OVERRIDE:
                warps = qmv_warps(kernel, tiles, k, w.bits, x.device)
            threads = (QMV_WARPS or warps) * 32
            fx = _fixed_form(x, w) if t == 1 else None
            if fx is not None:  # the same warps a tile as qmv1 (and its SwiGLU / Gated DeltaNet forms)
                _module(x.device, extra)["qmv1f" + name[4:]]((tiles,), (threads,), w.qweight, sp, zp, fx[0], fx[1],
                                                             bias, y, n, k, w.group_size)
                return y.view(*x.shape[:-1], n)
            if t == 1 and QMV1F and w.bits in QMV1X and fixed_kernels_serve(w):  # form made per burst from the row
                _module(x.device, extra)["qmv1x" + name[4:]]((tiles,), (threads,), *args)
                return y.view(*x.shape[:-1], n)
            grid, smem = qmv1_grid(kernel, tiles, threads, k, w.bits, extra, x.device) if t == 1 else (tiles, 0)
            kernel((grid,), (threads,), *args, smem=smem)
            return y.view(*x.shape[:-1], n)
        width = 8 if t <= 8 else 16
        if (width in SPLIT_WIDTHS and BENCH_SOURCE is None and "-DQM_SMEM_RING" not in extra
                and (n, k, w.bits) not in CONFIG_OVERRIDE):
            kernel = _module(x.device, extra)[mma_kernel_name(x.dtype, w.scales.dtype, w.bits, zp is not None, width,
                                                              True)]
            parts = sk_splits(tiles, k, w.bits, sk_resident_warps(kernel, x.device))
            ws = None
            if parts > 1:
                ws = sk_workspace(x.device, tiles * parts, tiles, grow=not torch.cuda.is_current_stream_capturing())
            if parts == 1 or ws is not None:
                per = SK_BLOCK // 32
                kernel((-(-tiles * parts // per),), (SK_BLOCK,), w.qweight, sp, zp, x2, bias, y,
                       None if ws is None else ws[0], None if ws is None else ws[1], n, k, w.group_size, t, parts)
                return y.view(*x.shape[:-1], n)
        name = mma_kernel_name(x.dtype, w.scales.dtype, w.bits, zp is not None, width)
        kernel = _module(x.device, extra, BENCH_SOURCE)[name]
        smem = mma_smem(warps, w, extra)
        if smem > 48 * 1024:
            kernel.set_max_dynamic_smem(smem)
        kernel((tiles,), (warps * 32,), w.qweight, sp, zp, x2, bias, y, n, k, w.group_size, t, smem=smem)
        return y.view(*x.shape[:-1], n)
    s, o = gpu_params(w)
    nt = _width(t)
    _module(x.device)[f"qgemv_{_SUFFIX[x.dtype]}_b{w.bits}_t{nt}"](
        ((n + WARPS - 1) // WARPS, (t + nt - 1) // nt), (WARPS * 32,), w.qweight, s, o, x2, bias, y, n, k,
        w.group_size, t)
    return y.view(*x.shape[:-1], n)


quant_linear.with_silu_mul = quant_linear_silu_mul  # the SwiGLU layer's one-launch form (layers/mlp.py)
quant_linear.with_gdn_in = quant_gdn_in_proj  # the Gated DeltaNet layer's (layers/gated_deltanet.py)
quant_gdn_in_proj.prepare = prepare  # run by that layer on the [in_proj | in_proj_ba] weight it makes, before capture
