"""Logits processing and sampling: penalties, temperature, top-k, top-p, min-p, seeded draws."""

from __future__ import annotations

import torch

from ..config.sampling import SamplingParams


class Sampler:
    def __init__(self, params: SamplingParams, device: torch.device):
        self.p = params
        self.device = device
        self.gen = torch.Generator(device=device)
        if params.seed is not None:
            self.gen.manual_seed(params.seed)
        else:
            self.gen.seed()

    def penalise(self, logits: torch.Tensor, prompt_ids: list[int], output_ids: list[int]) -> torch.Tensor:
        p = self.p
        if p.repetition_penalty != 1.0:
            seen = torch.tensor(sorted(set(prompt_ids) | set(output_ids)), dtype=torch.long, device=logits.device)
            if seen.numel():
                v = logits[seen]
                logits[seen] = torch.where(v > 0, v / p.repetition_penalty, v * p.repetition_penalty)
        if (p.presence_penalty or p.frequency_penalty) and output_ids:
            ids, counts = torch.tensor(output_ids, device=logits.device).unique(return_counts=True)
            logits[ids] -= p.presence_penalty + p.frequency_penalty * counts.float()
        return logits

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The sampling distribution [V] after temperature, top-k, top-p and min-p (temperature > 0)."""
        p = self.p
        logits = logits / p.temperature
        if p.top_k and p.top_k < logits.numel():
            kth = torch.topk(logits, p.top_k).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if p.top_p < 1.0:
            sp, idx = probs.sort(descending=True)
            cum = sp.cumsum(0)
            drop = (cum - sp) >= p.top_p  # keep the smallest prefix whose mass reaches top_p
            probs = probs.scatter(0, idx, sp.masked_fill(drop, 0.0))
        if p.min_p > 0:
            probs = probs.masked_fill(probs < p.min_p * probs.max(), 0.0)
        return probs / probs.sum()

    def _draw(self, probs: torch.Tensor) -> torch.Tensor:
        """One draw from probs as a device tensor (Gumbel-max via exponential noise)."""
        q = torch.empty_like(probs).exponential_(generator=self.gen)
        return (probs / q).argmax()

    def draw(self, probs: torch.Tensor) -> int:
        return int(self._draw(probs))

    def on_device(self) -> bool:
        """Whether ``sample`` serves these parameters: no penalty reads the output so far (which only the host
        knows while decode runs ahead of it)."""
        p = self.p
        return p.repetition_penalty == 1.0 and not p.presence_penalty and not p.frequency_penalty

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """The token as an int64 tensor of one element on the logits' device, without waiting for it: the same
        draw as ``__call__`` (the same operations on the same generator) for parameters ``on_device`` serves."""
        if self.p.greedy:
            return logits.argmax().view(1)
        return self._draw(self.probs(logits)).view(1)

    def __call__(self, logits: torch.Tensor, prompt_ids: list[int], output_ids: list[int]) -> int:
        logits = self.penalise(logits.clone(), prompt_ids, output_ids)
        if self.p.greedy:
            return int(logits.argmax())
        return self.draw(self.probs(logits))


def top_logprobs(logits: torch.Tensor, token: int, n: int) -> dict:
    """Log-probability of the chosen token and the n most likely ones, from the model's logits."""
    lp = torch.log_softmax(logits.float(), dim=-1)
    out = {"token_id": token, "logprob": float(lp[token]), "top": []}
    if n:
        v, i = lp.topk(n)
        out["top"] = [(int(a), float(b)) for a, b in zip(i.tolist(), v.tolist())]
    return out
