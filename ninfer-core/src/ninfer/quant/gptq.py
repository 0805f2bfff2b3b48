"""GPTQ checkpoints (AutoGPTQ / GPTQModel): ``qweight``, ``qzeros``, ``scales``, ``g_idx``.

``qweight`` int32 [K*bits/32, N] packs consecutive input rows from bit 0 up, so its transpose's
bytes are ninfer's layout. ``qzeros`` int32 [G, N*bits/32] packs along N. The reference formula:
W[n, k] = scales[g, n] * (q[k, n] - z[g, n]) with g = g_idx[k], where the stored zero is z - 1 in
checkpoint format v1 ("gptq", AutoGPTQ's historical off-by-one) and z in v2 ("gptq_v2").
"""

from __future__ import annotations

import json
import os

import torch

from ..errors import NinferError
from ..weights.safetensors_dir import SafetensorsDir
from .layout import QuantWeight, dequantize, unpack_codes
from .reorder import grouped_by_g_idx


def _gptq_config(path: str) -> dict | None:
    for fn, key in (("config.json", "quantization_config"), ("quantize_config.json", None)):
        try:
            with open(os.path.join(path, fn), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        q = data.get(key) if key else data
        if isinstance(q, dict) and (q.get("quant_method", "gptq") == "gptq") and "bits" in q:
            return q
    return None


class GPTQDir(SafetensorsDir):
    name = "gptq"

    @staticmethod
    def can_open(path: str) -> bool:
        return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")) \
            and _gptq_config(path) is not None

    @classmethod
    def open(cls, path: str) -> "GPTQDir":
        return cls(path)

    def __init__(self, path: str):
        super().__init__(path)
        q = _gptq_config(path) or {}
        self.bits = int(q["bits"])
        if self.bits not in (4, 8):
            raise NinferError(f"{path} is a {self.bits}-bit GPTQ checkpoint; ninfer reads 4- and 8-bit GPTQ.")
        self.group_size = int(q.get("group_size", 128))
        fmt = q.get("checkpoint_format", "gptq")
        self.zero_offset = 1 if fmt == "gptq" else 0  # v1 stores z - 1
        stored = super().tensor_names()
        self._stored = set(stored)
        self._modules = {n[: -len(".qweight")] for n in stored if n.endswith(".qweight")}
        parts = (".qweight", ".qzeros", ".scales", ".g_idx")
        self._names = [n for n in stored if not n.endswith(parts)] + [f"{m}.weight" for m in sorted(self._modules)]
        self.config = {k: v for k, v in self.config.items() if k != "quantization_config"}

    def tensor_names(self) -> list[str]:
        return list(self._names)

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        module = name[: -len(".weight")]
        if name.endswith(".weight") and module in self._modules:
            rows, n = super().tensor_shape(f"{module}.qweight")
            return (n, rows * 32 // self.bits)
        return super().tensor_shape(name)

    def get(self, name: str) -> torch.Tensor:
        q = self.quant_weight(name)
        if q is None:
            return super().get(name)
        w = dequantize(q, q.scales.dtype)
        if q.perm is not None:
            w = torch.empty_like(w).index_copy_(1, q.perm, w)
        return w

    def quant_weight(self, name: str) -> QuantWeight | None:
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module not in self._modules:
            return None
        get, bits = super().get, self.bits
        qweight = get(f"{module}.qweight")  # int32 [K*bits/32, N]
        k, n = qweight.shape[0] * 32 // bits, qweight.shape[1]
        packed = qweight.t().contiguous().view(torch.uint8)  # [N, K*bits/8]
        scales = get(f"{module}.scales").t().contiguous()  # [N, G]
        g = scales.shape[1]
        zeros = unpack_codes(get(f"{module}.qzeros").contiguous().view(torch.uint8), bits)[:, :n]  # [G, N]
        zeros = zeros.t().to(torch.int16) + self.zero_offset
        zeros = zeros.to(torch.uint8) if int(zeros.max()) <= 255 else zeros
        q = QuantWeight(packed, scales, bits, k // g, k, zeros=zeros.contiguous())
        if f"{module}.g_idx" in self._stored:
            q = grouped_by_g_idx(q, get(f"{module}.g_idx"))
        return q
