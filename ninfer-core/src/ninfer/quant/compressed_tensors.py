"""compressed-tensors ``pack-quantized`` checkpoints (llm-compressor output, W4A16 / W8A16).

A quantised Linear ``X`` is stored as ``X.weight_packed`` (int32 [N, ceil(K*bits/32)], code + 2**(bits-1)
packed from bit 0 upwards, so on a little-endian machine its bytes are already our uint8 layout),
``X.weight_scale`` [N, G], ``X.weight_shape`` [2], and when asymmetric ``X.weight_zero_point``
(int32 [ceil(N*bits/32), G], packed along N), optionally ``X.weight_g_idx`` [K] (act-order).
Dequantised: W = (q - zp) * scale in the scale's dtype.
"""

from __future__ import annotations

import json
import os
import re

import torch

from ..errors import NinferError
from ..weights.safetensors_dir import SafetensorsDir
from .layout import QuantWeight, dequantize, unpack_codes
from .reorder import grouped_by_g_idx

_PARTS = ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx")


def _quant_config(path: str) -> dict | None:
    cfg_file = os.path.join(path, "config.json")
    try:
        with open(cfg_file, encoding="utf-8") as f:
            q = json.load(f).get("quantization_config")
    except (OSError, json.JSONDecodeError):
        return None
    return q if isinstance(q, dict) else None


def _matches(name: str, patterns) -> bool:
    for p in patterns or []:
        if p.startswith("re:") and re.match(p[3:], name):
            return True
        if name == p or name.endswith("." + p) or p in ("Linear", "torch.nn.Linear"):
            return True
    return False


class CompressedTensorsDir(SafetensorsDir):
    name = "compressed-tensors"

    @staticmethod
    def can_open(path: str) -> bool:
        if not os.path.isdir(path):
            return False
        q = _quant_config(path)
        return bool(q) and q.get("quant_method") == "compressed-tensors"

    @classmethod
    def open(cls, path: str) -> "CompressedTensorsDir":
        return cls(path)

    def __init__(self, path: str):
        super().__init__(path)
        self.qconfig = _quant_config(path) or {}
        self._check_format()
        stored = super().tensor_names()
        self._stored = set(stored)
        self._modules = {n[: -len(".weight_packed")] for n in stored if n.endswith(".weight_packed")}
        self._names = [n for n in stored if not any(n.endswith("." + p) for p in _PARTS)]
        self._names += [f"{m}.weight" for m in sorted(self._modules)]
        self.config = {k: v for k, v in self.config.items() if k != "quantization_config"}

    def _check_format(self) -> None:
        formats = {self.qconfig.get("format")}
        formats |= {g.get("format") for g in (self.qconfig.get("config_groups") or {}).values()}
        formats -= {None, "dense"}
        bad = formats - {"pack-quantized"}
        if bad:
            raise NinferError(f"{self.path} is compressed-tensors format {sorted(bad)[0]!r}; ninfer reads "
                              "'pack-quantized' (W4A16/W8A16) checkpoints, so re-export with that format.")

    def scheme_for(self, module: str) -> dict:
        """The weight quantisation args of the first config group targeting ``module``."""
        if _matches(module, self.qconfig.get("ignore")):
            return {}
        for group in (self.qconfig.get("config_groups") or {}).values():
            if _matches(module, group.get("targets")):
                return group.get("weights") or {}
        return {}

    # -- tensors ---------------------------------------------------------------------------
    def tensor_names(self) -> list[str]:
        return list(self._names)

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        module = name[: -len(".weight")]
        if name.endswith(".weight") and module in self._modules:
            return tuple(int(v) for v in super().get(f"{module}.weight_shape").tolist())
        return super().tensor_shape(name)

    def get(self, name: str) -> torch.Tensor:
        q = self.quant_weight(name)
        if q is None:
            return super().get(name)
        w = dequantize(q, q.scales.dtype)  # [N, K] packed column order
        if q.perm is not None:
            w = torch.empty_like(w).index_copy_(1, q.perm, w)  # back to the checkpoint's column order
        return w

    def quant_weight(self, name: str) -> QuantWeight | None:
        """The weight in ninfer's grouped-int layout, or None when it is stored unquantised."""
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module not in self._modules:
            return None
        get = super().get
        packed, scale = get(f"{module}.weight_packed"), get(f"{module}.weight_scale")
        n, k = (int(v) for v in get(f"{module}.weight_shape").tolist())
        if scale.dim() == 1:
            scale = scale.unsqueeze(1)
        g = scale.shape[1]
        bits = self.scheme_for(module).get("num_bits") or packed.shape[1] * 32 // k
        if bits not in (4, 8) or k % g:
            raise NinferError(f"{module} in {self.path} is packed as {bits}-bit with {g} groups over {k} inputs; "
                              "ninfer reads 4- and 8-bit groupwise or channelwise weights.")
        qweight = packed.contiguous().view(torch.uint8)[:, : k * bits // 8].contiguous()  # [N, K*bits/8]
        zeros = None
        names = self._stored
        if f"{module}.weight_zero_point" in names:
            zp = get(f"{module}.weight_zero_point")  # int32 [ceil(N*bits/32), G], packed along N
            zeros = unpack_codes(zp.t().contiguous().view(torch.uint8), bits)[:, :n].t().contiguous()  # [N, G]
        q = QuantWeight(qweight, scale.contiguous(), bits, k // g, k, zeros=zeros)
        if f"{module}.weight_g_idx" in names:
            q = grouped_by_g_idx(q, get(f"{module}.weight_g_idx"))
        return q
