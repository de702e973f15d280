"""kernelscope: a reproducible experiment pipeline for GPU kernels (correctness, sweep, timing, profile, report)."""

__version__ = "0.1.0"
