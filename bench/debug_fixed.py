"""Which one-token GEMVs of a 4-layer Qwen3.5-27B-shaped int4 model take the fixed-point form, and why not."""
import sys

import torch

sys.path.insert(0, "bench")
import random_model as rm  # noqa: E402
from quant import quant_model  # noqa: E402

from ninfer.quant import fixed, gpu  # noqa: E402

real = gpu._fixed_form


def spy(x, w):
    f = real(x, w)
    raw = getattr(x, fixed.FIXED_ATTR, None)
    print(f"rows {w.scales.shape[0]} served {f is not None} attr {raw is not None} "
          f"ver {None if raw is None else raw[2]} now {fixed.version_of(x)} pack {w.packing} perm {w.perm is None} "
          f"g {w.group_size} k {w.in_features} xq {None if raw is None else tuple(raw[0].shape)}", flush=True)
    return f


gpu._fixed_form = spy
graphed, weights = quant_model("qwen3.5-27b", 4, 4)
eager, _ = rm.build("qwen3.5-27b", "sm90", "cuda", torch.bfloat16, 512, layers=4, weights=weights)
eager.graphs = None
lg = eager.prefill(list(range(60)))
print("decode", flush=True)
eager.decode(int(lg.argmax()))
for i, b in enumerate(eager.model.layers):
    print(i, type(b.mixer).__name__, b.input_norm.fixed, b.post_norm.fixed)
