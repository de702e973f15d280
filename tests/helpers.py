"""Helpers shared by the kernel test modules: shapes, the correctness gate on one implementation, and the
H200's limits for checking a kernel's declared config space against the device it is for."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from kernelscope import correctness
from kernelscope.spec import Implementation, KernelSpec, Shape

#: kernelscope.runtime.device_limits() of an H200 (227 KiB of shared memory per block, 60 MiB of L2)
H200_LIMITS = {
    "num_sms": 132,
    "max_shared_mem_per_block": 227 * 1024,
    "l2_bytes": 60 * 2**20,
    "capability": (9, 0),
    "interpreter": False,
}


def shape(**params: int) -> Shape:
    return Shape(params, "test")


def gate(
    spec: KernelSpec, impl: str | Implementation, shp: Shape, dtype: torch.dtype, config: dict | None = None, seeds=(0,)
) -> dict:
    """The correctness gate's record for one implementation (a Triton variant at its default config unless
    ``config`` is given)."""
    impl = spec.implementation(impl) if isinstance(impl, str) else impl
    if config is None and impl.kind == "triton":
        config = impl.default_config(shp, dtype)
    return correctness.check_implementation(spec, impl, shp, dtype, seeds, config)


def assert_pass(record: dict) -> None:
    assert record["status"] == "pass", f"{record['implementation']} {record['config']}: {record['failure']}"


#: the start of an ``offline_sm90`` script that builds Gluon kernels: the imports (or the "unavailable" skip) and
#: ``ptxas_usage(ptx)``, ptxas's registers and spill-store bytes a thread for sm_90a
GLUON_SM90_PREAMBLE = r"""
import json, re, subprocess, sys, tempfile, pathlib
try:
    import torch, triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type
except ImportError as e:
    print(json.dumps({"unavailable": f"no offline Gluon compiler: {e}"})); sys.exit()
_ptxas = next(pathlib.Path(triton.__file__).parent.glob("backends/nvidia/bin/ptxas"))

def ptxas_usage(ptx):
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    log = subprocess.run([str(_ptxas), "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"], capture_output=True, text=True)
    txt = log.stderr + log.stdout
    used = re.search(r"Used (\d+) registers", txt).group(1)
    return int(used), int(re.search(r"(\d+) bytes spill stores", txt).group(1))
"""


def offline_sm90(script: str, payload) -> dict:
    """Runs ``script`` (Python source that reads ``json.loads(sys.argv[1])`` and prints one JSON object last)
    in a subprocess without TRITON_INTERPRET, since under the interpreter @triton.jit functions cannot be
    compiled: for offline sm_90 builds (ptxas ships with Triton's NVIDIA backend), which show what the compiler
    emits where the interpreter cannot. Skips the test where the script prints ``{"unavailable": why}``."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(payload)],
        env=env,
        cwd=pathlib.Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "unavailable" in result:
        pytest.skip(result["unavailable"])
    return result
