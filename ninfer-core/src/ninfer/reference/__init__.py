"""The pure-PyTorch reference backend: every op, on any device; the oracle for all kernels."""
