"""CUDA graphs for decode (1 token) and each verify width (k tokens).

Batch-1 decode is a few hundred small kernels per token; launched from Python they take longer than
the GPU needs to run them. A width's first step runs eagerly (that is the real step), then its
forward and lm_head are captured into a graph on static input buffers; later steps copy token ids,
positions and KV slots into those buffers and replay. The block table, KV cache, rope table and
recurrent state are persistent tensors, so the graph reads and writes them in place.

Python-side effects of the forward (the recurrent state's bookkeeping of what a verify left behind)
happen once, at capture; they are recorded then and re-applied after each replay. The reference
backend cannot be captured (its attention reads the context length on the host); a width whose
capture fails runs eagerly from then on.
"""

from __future__ import annotations

import os
import sys

import torch

from .context import ForwardContext

MAX_WIDTH = 16  # widest verify step captured


def graphs_wanted(device: torch.device, backend: str) -> bool:
    return (device.type == "cuda" and backend != "reference"
            and os.environ.get("NINFER_CUDA_GRAPHS", "1") not in ("0", "false", "off"))


def _python_state(state) -> dict | None:
    """The non-tensor bookkeeping of a recurrent state, one level deep (lists are copied)."""
    if state is None:
        return None
    return {k: (list(v) if isinstance(v, list) else v) for k, v in vars(state).items()}


def _set_python_state(state, saved: dict | None) -> None:
    if state is not None and saved is not None:
        vars(state).update({k: (list(v) if isinstance(v, list) else v) for k, v in saved.items()})


class _Graph:
    def __init__(self, width: int, device: torch.device):
        self.width = width
        # ids, positions, slots staged on the host, two buffers taken in turn: with the decode pipeline
        # (engine/pipeline.py) the host stages a step while the previous step's copy may not have run yet
        self.hosts = [torch.empty(3, width, dtype=torch.int64, pin_memory=True) for _ in range(2)]
        self.turn = 0
        self.inputs = torch.empty(3, width, dtype=torch.int64, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.ctx: ForwardContext | None = None
        self.hidden = self.logits = None
        self.state_after: dict | None = None


class CudaGraphs:
    """Decode/verify forwards of a ModelRunner through captured CUDA graphs."""

    def __init__(self, runner):
        self.runner = runner
        self.graphs: dict[int, _Graph] = {}
        self.failed: set[int] = set()
        self.replays = 0

    def usable(self, width: int) -> bool:
        return 1 <= width <= MAX_WIDTH and width not in self.failed

    def _ctx(self, g: _Graph, phase: str) -> ForwardContext:
        r = self.runner
        return ForwardContext(positions=g.inputs[1], slots=g.inputs[2], block_table=r.seq.block_table, kv=r.kv,
                              cos_sin=r.cos_sin, phase=phase, state=r.state)

    def step(self, ids: list[int], phase: str, ids_dev: torch.Tensor | None = None,
             fresh: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ids (decode/verify); return (hidden [T, H], float32 logits [T, V]), both fresh tensors, or with
        ``fresh=False`` the graph's own outputs (valid until this width's next step: no copies).
        ``ids_dev``: the ids are on the device (int64 [T], e.g. the previous step's sample, not yet known on the
        host); ``ids`` then only holds what runner.tokens records until the caller knows them."""
        r, T = self.runner, len(ids)
        start = len(r.tokens)
        r.seq.ensure(start + T)
        positions = torch.arange(start, start + T, dtype=torch.int64)
        g = self.graphs.get(T)
        if g is None:
            g = self.graphs[T] = _Graph(T, r.device)
        host = g.hosts[g.turn]
        g.turn ^= 1
        if ids_dev is None:
            host[0] = torch.tensor(ids, dtype=torch.int64)
        host[1] = positions
        host[2] = r.seq.slots(positions)
        g.inputs.copy_(host, non_blocking=True)
        if ids_dev is not None:
            g.inputs[0].copy_(ids_dev.view(T))
        if g.graph is None:
            hidden, logits = self._eager_then_capture(g, phase)
        else:
            g.graph.replay()
            _set_python_state(r.state, g.state_after)
            self.replays += 1
            hidden, logits = (g.hidden.clone(), g.logits.clone()) if fresh else (g.hidden, g.logits)
            r.last_ctx = g.ctx
        r.tokens.extend(ids)
        return hidden, logits

    def _eager_then_capture(self, g: _Graph, phase: str):
        r = self.runner
        ctx = self._ctx(g, phase)
        hidden = r.model.forward(g.inputs[0], ctx)  # the real step
        logits = r.model.logits(hidden)
        r.last_ctx = ctx
        eager_state = _python_state(r.state)
        torch.cuda.synchronize(r.device)
        try:
            graph = torch.cuda.CUDAGraph()
            cap_ctx = self._ctx(g, phase)
            with torch.cuda.graph(graph):  # records only: nothing below runs now
                g.hidden = r.model.forward(g.inputs[0], cap_ctx)
                g.logits = r.model.logits(g.hidden)
            g.graph, g.ctx = graph, cap_ctx
            g.state_after = _python_state(r.state)
        except Exception as e:  # e.g. an op that syncs with the host: this width stays eager
            self.failed.add(g.width)
            del self.graphs[g.width]
            print(f"ninfer: CUDA graph capture of width {g.width} failed ({type(e).__name__}: {e}); "
                  "running it eagerly", file=sys.stderr)
        finally:
            _set_python_state(r.state, eager_state)
        return hidden, logits
