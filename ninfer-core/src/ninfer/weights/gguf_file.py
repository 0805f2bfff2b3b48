"""The GGUF container: header, metadata, tensor infos and a memory map of the tensor data.

Layout (little-endian): magic "GGUF", version u32, tensor count u64, metadata count u64, the
metadata key/value pairs, the tensor infos (name, dims in ggml order, ggml type, offset), padding
to `general.alignment`, then the data. Versions 2 and 3 share this layout; 1 (u32 counts and
lengths, 2023) is refused.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NinferError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# metadata value types: id -> (struct format, numpy dtype) for the fixed-size ones
_SCALAR = {
    0: ("<B", np.uint8), 1: ("<b", np.int8), 2: ("<H", np.uint16), 3: ("<h", np.int16),
    4: ("<I", np.uint32), 5: ("<i", np.int32), 6: ("<f", np.float32), 7: ("<?", np.bool_),
    10: ("<Q", np.uint64), 11: ("<q", np.int64), 12: ("<d", np.float64),
}
_STRING, _ARRAY = 8, 9

# ggml tensor types: id -> (name, elements per block, bytes per block)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 30: ("BF16", 1, 2),
}

# known ggml types ninfer does not read, named so the error says which one the file uses
_UNREAD_TYPES = {16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
                 22: "IQ2_S", 23: "IQ4_XS", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}


class CorruptGGUF(Exception):
    """Raised inside the parser; the reader turns it into one NinferError sentence."""


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # PyTorch order: ggml's dims reversed, so [rows, cols]
    ggml_type: int
    offset: int  # absolute byte offset in the file
    nbytes: int

    @property
    def type_name(self) -> str:
        return GGML_TYPES[self.ggml_type][0]


class _Cursor:
    """Sequential little-endian reads over the mapped file; running off the end means truncation."""

    def __init__(self, buf: memoryview):
        self.buf, self.pos = buf, 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptGGUF("read past the end")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def string(self) -> str:
        raw = bytes(self.take(self.scalar("<Q")))
        # A few vocabularies store invalid UTF-8 in byte tokens; keep them decodable, never crash.
        return raw.decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype == 6:  # float32: the shortest decimal that round-trips (1e-05, not 9.99999974e-06)
            return float(str(np.float32(self.scalar("<f"))))
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype][0])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type, count = self.scalar("<I"), self.scalar("<Q")
            if item_type in _SCALAR:  # numeric arrays in one read (token types: ~150k entries)
                dtype = np.dtype(_SCALAR[item_type][1]).newbyteorder("<")
                data = self.take(count * dtype.itemsize)
                return np.frombuffer(data, dtype=dtype).tolist()
            return [self.value(item_type) for _ in range(count)]
        raise CorruptGGUF(f"unknown metadata value type {vtype}")


class GGUFFile:
    """A parsed GGUF file. `metadata` holds plain Python values; tensor bytes stay on disk (mmap)."""

    def __init__(self, path: str):
        self.path = path
        try:
            size = os.path.getsize(path)
            if size < 24:
                raise _truncated(path)
            self.data = np.memmap(path, dtype=np.uint8, mode="r")  # never read fully into RAM
        except OSError as e:
            raise NinferError(f"Cannot read {path} ({e.strerror}); check the path and its permissions.") from None
        try:
            self._parse(memoryview(self.data), size)
        except (CorruptGGUF, struct.error, UnicodeDecodeError, OverflowError, MemoryError, ValueError):
            raise _truncated(path) from None

    def _parse(self, buf: memoryview, size: int) -> None:
        cur = _Cursor(buf)
        if bytes(cur.take(4)) != GGUF_MAGIC:
            raise CorruptGGUF("bad magic")
        self.version = cur.scalar("<I")
        if self.version == 1:
            raise NinferError(f"{self.path} is a GGUF version 1 file, which ninfer does not read; convert the "
                              "model again with a current llama.cpp.")
        if self.version not in (2, 3):  # a big-endian file also lands here, byte-swapped
            raise CorruptGGUF(f"version {self.version}")
        n_tensors, n_kv = cur.scalar("<Q"), cur.scalar("<Q")
        if n_tensors > size or n_kv > size:
            raise CorruptGGUF("impossible counts")
        self.metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            self.metadata[key] = cur.value(cur.scalar("<I"))
        infos = []
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.scalar("<I")
            if n_dims > 8:
                raise CorruptGGUF("too many dims")
            dims = [cur.scalar("<Q") for _ in range(n_dims)]
            infos.append((name, dims, cur.scalar("<I"), cur.scalar("<Q")))
        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        data_start = -(-cur.pos // self.alignment) * self.alignment
        self.tensors: dict[str, TensorInfo] = {}
        for name, dims, ggml_type, rel in infos:
            if ggml_type not in GGML_TYPES:
                kind = _UNREAD_TYPES.get(ggml_type, f"type {ggml_type}")
                raise NinferError(f"Tensor {name} in {self.path} is stored as ggml {kind}, which ninfer cannot read; "
                                  "use a GGUF quantised as F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or a K-quant.")
            _, block, block_bytes = GGML_TYPES[ggml_type]
            n = int(np.prod(dims, dtype=np.int64)) if dims else 1
            if dims and dims[0] % block:
                raise CorruptGGUF(f"{name}: row not a whole number of blocks")
            nbytes = n // block * block_bytes
            start = data_start + rel
            if start + nbytes > size:  # every tensor must lie inside the file
                raise CorruptGGUF(f"{name} ends past the file")
            self.tensors[name] = TensorInfo(name, tuple(reversed(dims)), ggml_type, start, nbytes)

    def raw_bytes(self, info: TensorInfo) -> np.ndarray:
        """The tensor's stored bytes as a read-only view of the map, [rows, bytes per row]."""
        flat = self.data[info.offset:info.offset + info.nbytes]
        rows = int(np.prod(info.shape[:-1], dtype=np.int64)) if len(info.shape) > 1 else 1
        return flat.reshape(rows, -1)


def _truncated(path: str) -> NinferError:
    return NinferError(f"{path} is truncated or not a GGUF file; download it again.")
