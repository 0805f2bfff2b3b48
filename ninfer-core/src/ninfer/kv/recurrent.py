"""Per-sequence recurrent state of the Gated DeltaNet layers, kept beside the paged KV cache.

Each GDN layer carries, for the one running sequence:
- ``conv[i]``: the conv window, the last K-1 inputs of its causal conv1d, [C, K-1] float32;
- ``ssm[i]``:  the delta-rule state, [H, Dk, Dv] float32.

Unlike KV, this state cannot be cut back by forgetting positions: it only exists at the end of
the sequence. Speculative decoding therefore verifies k tokens with the recurrent form that yields
the state after *every* position (``commit_verify``), keeps them all, and after acceptance
selects the one at the accepted length (``keep``) - no recomputation. ``snapshot``/``restore``
copy the whole state (prefix reuse, tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class _Verified:
    """What one verify forward left behind for one layer, so any accepted length can be kept."""

    inputs: torch.Tensor  # [K-1+T, C]: the old conv window followed by the T verified inputs
    before: torch.Tensor  # [H, Dk, Dv] fp32: the state before the run
    states: torch.Tensor  # [T, H, Dk, Dv] fp32: the state after each token


class RecurrentState:
    def __init__(self, num_layers: int, conv_dim: int, kernel: int, heads: int, k_dim: int, v_dim: int,
                 device: torch.device | str = "cpu"):
        self.num_layers, self.conv_dim, self.kernel = num_layers, conv_dim, kernel
        self.heads, self.k_dim, self.v_dim = heads, k_dim, v_dim
        self.device = torch.device(device)
        # the conv window is stored in fp32: exact for any model dtype, and it is small
        self.conv = [torch.zeros(conv_dim, kernel - 1, dtype=torch.float32, device=self.device)
                     for _ in range(num_layers)]  # [C, K-1] per layer
        self.ssm = [torch.zeros(heads, k_dim, v_dim, dtype=torch.float32, device=self.device)
                    for _ in range(num_layers)]  # [H, Dk, Dv] per layer
        self._verified: list[_Verified | None] = [None] * num_layers
        self._last_run = 0  # tokens in the last forward; rollback can reach back only into it

    # -- sizes ---------------------------------------------------------------------------------
    @staticmethod
    def bytes_per_sequence(num_layers: int, conv_dim: int, kernel: int, heads: int, k_dim: int, v_dim: int) -> int:
        """Committed state of one sequence (verify snapshots add (k+1) states per layer while in flight)."""
        return num_layers * 4 * (conv_dim * (kernel - 1) + heads * k_dim * v_dim)

    def nbytes(self) -> int:
        return self.bytes_per_sequence(self.num_layers, self.conv_dim, self.kernel, self.heads,
                                       self.k_dim, self.v_dim)

    # -- updates from the mixer ----------------------------------------------------------------
    def reset(self) -> None:
        """A new sequence starts from zeros."""
        for c, s in zip(self.conv, self.ssm):
            c.zero_()
            s.zero_()
        self._verified = [None] * self.num_layers
        self._last_run = 0

    def commit(self, layer: int, conv: torch.Tensor, ssm: torch.Tensor, tokens: int) -> None:
        """Prefill/decode: the layer's state after ``tokens`` more tokens (copied into place, unless
        the op already wrote it there through ``out_state``)."""
        if conv is not self.conv[layer]:
            self.conv[layer].copy_(conv)
        if ssm is not self.ssm[layer]:
            self.ssm[layer].copy_(ssm)
        self._verified[layer] = None
        self._last_run = tokens

    def before_verify(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Verify, before the layer runs: keeps copies of its conv window and state (what ``keep(0)``
        returns to), so the ops may then update both in place. Returns (window [C, K-1], state)."""
        return self.conv[layer].clone(), self.ssm[layer].clone()

    def commit_verify(self, layer: int, inputs: torch.Tensor, states: torch.Tensor,
                      before: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Verify, after the ops updated the layer's conv window and state in place (as if all T
        tokens are accepted): inputs [T, C] are the conv inputs of the T tokens, states [T, H, Dk, Dv]
        the state after each, ``before`` what ``before_verify`` kept. Keeps what ``keep`` needs to
        go back to any shorter accepted length."""
        conv0, ssm0 = before
        window = torch.cat([conv0.t(), inputs.float()], dim=0)  # [K-1+T, C]
        self._verified[layer] = _Verified(window, ssm0, states)
        self._last_run = inputs.shape[0]

    # -- speculative decoding ------------------------------------------------------------------
    def keep(self, accepted: int) -> None:
        """After a verify of T tokens, keep the state after the first ``accepted`` (0..T) of them."""
        k1 = self.kernel - 1
        for i, ver in enumerate(self._verified):
            if ver is None:
                raise RuntimeError("keep() needs the per-position states of a verify forward; "
                                   "the last forward was not a verify")
            T = ver.states.shape[0]
            if not 0 <= accepted <= T:
                raise RuntimeError(f"keep({accepted}) outside the {T} verified positions")
            if accepted < T:  # all T accepted: the committed state is already that one
                self.conv[i].copy_(ver.inputs[accepted: accepted + k1].t())
                self.ssm[i].copy_(ver.states[accepted - 1] if accepted else ver.before)
            self._verified[i] = None
        self._last_run = accepted

    def rollback(self, old_len: int, new_len: int) -> None:
        """The runner's truncate: the sequence goes from old_len to new_len tokens. Possible only
        back into the last verify forward."""
        if new_len == old_len:
            return
        drop = old_len - new_len
        if drop < 0 or drop > self._last_run or any(v is None for v in self._verified):
            raise RuntimeError(f"recurrent state cannot go back from {old_len} to {new_len} tokens: "
                               "only positions of the last verify forward are kept")
        self.keep(self._last_run - drop)

    # -- whole copies --------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """A copy of the committed state (not of pending verify snapshots)."""
        return {"conv": [c.clone() for c in self.conv], "ssm": [s.clone() for s in self.ssm]}

    def restore(self, snap: dict) -> None:
        for dst, src in zip(self.conv, snap["conv"]):
            dst.copy_(src)
        for dst, src in zip(self.ssm, snap["ssm"]):
            dst.copy_(src)
        self._verified = [None] * self.num_layers
        self._last_run = 0
