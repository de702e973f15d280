"""Device-side tensor descriptors (``tl.make_tensor_descriptor``: TMA on sm_90+, emulated by Triton's
interpreter), shared by the kernels that use them: the feature check, and the global memory each program
writes its descriptors to (``triton.set_allocator``). Each kernel checks its own operand layouts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from kernelscope import runtime

#: whether this Triton can build tensor descriptors inside a kernel (3.4 onwards); checked once, by feature
HAS_DEVICE_DESCRIPTORS = hasattr(tl, "make_tensor_descriptor") and hasattr(triton, "set_allocator")
#: global memory for one descriptor (a CUtensorMap is 128 bytes)
DESCRIPTOR_BYTES = 128


def feature_reason(limits: Mapping[str, Any], has_descriptors: bool = HAS_DEVICE_DESCRIPTORS) -> str | None:
    """Why this Triton and device (``runtime.device_limits()``) have no device-side descriptors, or None.
    ``has_descriptors`` is a parameter so the selection can be tested without another Triton."""
    if not has_descriptors:
        return "this Triton has no tl.make_tensor_descriptor / triton.set_allocator"
    if not limits.get("interpreter") and tuple(limits["capability"]) < (9, 0):
        return f"TMA needs compute capability >= 9.0, the device has {tuple(limits['capability'])}"
    return None


class DescriptorScratch:
    """The ``triton.set_allocator`` hook. ``reserve`` (at prepare time) sizes it, so the timed launch
    allocates nothing; the buffer is shared by all launches of its owner (one stream, so never two at
    once) and only grows if a launch asks for more."""

    def __init__(self) -> None:
        self.buffer: torch.Tensor | None = None

    def reserve(self, nbytes: int, device: torch.device) -> None:
        if self.buffer is None or self.buffer.numel() < nbytes or self.buffer.device != device:
            self.buffer = torch.empty(nbytes, dtype=torch.int8, device=device)

    def __call__(self, size: int, alignment: int, stream: int | None) -> torch.Tensor:
        # torch's allocations are at least 256-byte aligned, more than descriptors need (128)
        if self.buffer is None or self.buffer.numel() < size:
            self.reserve(size, self.buffer.device if self.buffer is not None else runtime.device())
        return self.buffer
