"""What every Gluon (``triton.experimental.gluon``) variant needs to run, checked by feature, in one place: the
Hopper module in this Triton, a real GPU (Gluon kernels do not run on Triton's interpreter) of compute capability
9.x. The kernel modules (``kernels/_attention_gluon.py``, ``kernels/_rows_gluon.py``) import Gluon themselves and
pass whether that worked; the reason names the variant and the Hopper features it uses."""

from __future__ import annotations

from kernelscope import runtime


def hopper_reason(variant: str, has_hopper_module: bool, uses: str) -> str | None:
    """Why ``variant`` (a Gluon kernel for sm_90 that uses ``uses``) cannot run on this Triton and device, or None."""
    if not has_hopper_module:
        return f"this Triton has no triton.experimental.gluon Hopper module ({uses})"
    limits = runtime.device_limits()
    if limits["interpreter"]:
        return (
            f"Gluon kernels do not run on Triton's interpreter (on the CPU the tests build {variant} offline for "
            "sm_90a instead)"
        )
    if tuple(limits["capability"])[0] != 9:
        capability = limits["capability"]
        return f"{variant} is built and checked for sm_90 ({uses}); the device has compute capability {capability}"
    return None
