"""Can this Gluon exchange a row's partials between the CTAs of a thread-block cluster (QuACK's design for rows too
wide for one CTA)? Two offline sm_90a builds of a pair of CTAs (``num_ctas=2``) that share one fp16 row of 8192
elements, each the row's sum then ``x / sum``:

- ``reduce``: the row as [1, N] with its columns split over the pair (``cga_layout``), reduced with ``gl.sum``;
- ``convert``: the row as [2, N / 2], a half a CTA, each half reduced inside its CTA and the two partials made
  visible to both CTAs by ``gl.convert_layout`` to a layout not split over the cluster (distributed shared memory).

Prints whether each builds and, where it does, the PTX's cluster barriers, ``mapa`` and ``shared::cluster``
accesses; where it does not, the compiler's first error line. No GPU needed.

    python docs/experiments/cluster_probe.py
"""

import contextlib
import io
import json
import os
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def _reduce(x_ptr, y_ptr, N: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [1, num_warps], [1, 0], cga_layout=[[0, 1]])
    rows = gl.arange(0, 1, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    offs = gl.expand_dims(rows, 1) * N + gl.expand_dims(cols, 0)
    x = gl.load(x_ptr + offs).to(gl.float32)
    s = gl.sum(x, axis=1)
    gl.store(y_ptr + offs, (x / gl.expand_dims(s, 1)).to(gl.float16))


@gluon.jit
def _convert(x_ptr, y_ptr, N: gl.constexpr, num_warps: gl.constexpr):
    split: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [1, num_warps], [1, 0], cga_layout=[[1, 0]])
    halves = gl.arange(0, 2, layout=gl.SliceLayout(1, split))
    cols = gl.arange(0, N // 2, layout=gl.SliceLayout(0, split))
    offs = gl.expand_dims(halves, 1) * (N // 2) + gl.expand_dims(cols, 0)
    x = gl.load(x_ptr + offs).to(gl.float32)
    part = gl.sum(x, axis=1)  # inside each CTA
    both: gl.constexpr = gl.BlockedLayout([2], [32], [num_warps], [0], cga_layout=[[0]])
    s = gl.sum(gl.convert_layout(part, both), axis=0)  # both partials in both CTAs
    gl.store(y_ptr + offs, (x / s).to(gl.float16))


def build(fn) -> dict:
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "N": "constexpr", "num_warps": "constexpr"}
    src = GluonASTSource(fn=fn, signature=sig, constexprs={"N": 8192, "num_warps": 4})
    err = io.StringIO()
    try:
        # the compiler's diagnostics go to the process's stderr (fd 2), not Python's: into a file (a pipe read only
        # afterwards would block the compiler once its buffer filled)
        saved = os.dup(2)
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                with contextlib.redirect_stderr(err):
                    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": 2})
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                log = captured.read().decode(errors="replace")
        ptx = k.asm["ptx"]
        return {
            "builds": True,
            "barrier.cluster": ptx.count("barrier.cluster"),
            "mapa": ptx.count("mapa"),
            "shared::cluster": ptx.count("shared::cluster"),
        }
    except Exception as exc:  # the build's failure is the finding
        here = os.path.dirname(os.path.abspath(__file__)) + os.sep
        text = (log + err.getvalue()).replace(here, "")
        lines = [ln for ln in text.splitlines() if "error" in ln or "Assertion" in ln]
        return {"builds": False, "error": type(exc).__name__, "first": lines[0][-300:] if lines else str(exc)[-300:]}


def main() -> None:
    print(json.dumps({"triton": triton.__version__, "reduce": build(_reduce), "convert": build(_convert)}))


if __name__ == "__main__":
    sys.exit(main())
