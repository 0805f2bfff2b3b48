"""KV cache (paged) and recurrent-state cache."""
