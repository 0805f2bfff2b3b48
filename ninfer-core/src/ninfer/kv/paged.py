"""Block-paged KV cache owned by the engine.

Keys and values of every full-attention layer live in a pool of fixed-size blocks; a sequence
owns a block table mapping its logical blocks to pool blocks. Paging keeps quantized formats and
prefix sharing a matter of the pool and the table, not of the model.
"""

from __future__ import annotations

import torch

from ..errors import NinferError


class PagedKVCache:
    def __init__(self, num_layers: int, num_blocks: int, block_size: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device, kv_format: str = "bf16"):
        self.block_size, self.num_blocks, self.kv_format = block_size, num_blocks, kv_format
        shape = (num_blocks, block_size, kv_heads, head_dim)  # [blocks, block_size, kv_heads, head_dim]
        if kv_format != "bf16":  # quantised pools with their scales (ninfer.quant.kv_cache)
            from ..quant.kv_cache import make_pool

            self.k = [make_pool(kv_format, True, *shape, device) for _ in range(num_layers)]
            self.v = [make_pool(kv_format, False, *shape, device) for _ in range(num_layers)]
        else:
            self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
            self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.free_blocks = list(range(num_blocks - 1, -1, -1))

    @staticmethod
    def bytes_per_token(num_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
        return 2 * num_layers * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()

    def allocate(self) -> int:
        if not self.free_blocks:
            raise NinferError("The KV cache is full; raise --max-context or shorten the prompt.")
        return self.free_blocks.pop()

    def release(self, blocks: list[int]) -> None:
        self.free_blocks.extend(reversed(blocks))


class SequenceKV:
    """One sequence's view of the cache: its block table and slot arithmetic.

    ``block_table`` is a fixed-size device tensor (so CUDA graphs can capture reads of it).
    """

    def __init__(self, cache: PagedKVCache, max_tokens: int, device: torch.device):
        self.cache = cache
        self.max_blocks = (max_tokens + cache.block_size - 1) // cache.block_size
        self.blocks: list[int] = []
        self.block_table = torch.zeros(self.max_blocks, dtype=torch.int32, device=device)
        self._host_table = torch.zeros(self.max_blocks, dtype=torch.int32)

    def ensure(self, num_tokens: int) -> None:
        """Own enough blocks for positions [0, num_tokens)."""
        need = (num_tokens + self.cache.block_size - 1) // self.cache.block_size
        if need > self.max_blocks:
            raise NinferError(f"The sequence needs {num_tokens} tokens of KV cache but the context holds "
                              f"{self.max_blocks * self.cache.block_size}; raise --max-context.")
        grew = False
        while len(self.blocks) < need:
            self._host_table[len(self.blocks)] = self.cache.allocate()
            self.blocks.append(int(self._host_table[len(self.blocks)]))
            grew = True
        if grew:
            self.block_table.copy_(self._host_table, non_blocking=False)

    def slots(self, positions: torch.Tensor) -> torch.Tensor:
        """Pool slot of each position: block_table[pos // bs] * bs + pos % bs (host positions in, host out)."""
        bs = self.cache.block_size
        return self._host_table[positions // bs].long() * bs + positions % bs

    def free(self) -> None:
        self.cache.release(self.blocks)
        self.blocks = []
        self._host_table.zero_()
        self.block_table.zero_()
