"""Tests run on the CPU through Triton's interpreter (the backend is selected before kernels import).

Each test session compiles torch.compile baselines into its own Inductor cache. The default one under /tmp
is shared by every process of the user and outlives them: a test session killed while Inductor compiled a
graph left a zero-byte module there, and every later session that compiled the same graph loaded it and
failed the gate ("file too short")."""

import atexit
import os
import shutil
import tempfile

if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:  # before anything imports torch
    _INDUCTOR_CACHE = tempfile.mkdtemp(prefix="kernelscope-tests-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _INDUCTOR_CACHE
    atexit.register(shutil.rmtree, _INDUCTOR_CACHE, ignore_errors=True)

from kernelscope import runtime  # noqa: E402 - after the cache is chosen

runtime.select_backend()
