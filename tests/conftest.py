"""Tests run on the CPU through Triton's interpreter (the backend is selected before kernels import)."""

from kernelscope import runtime

runtime.select_backend()
