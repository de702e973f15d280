"""scripts/gpu-container.sh's bundle checks, on the CPU: the scripts parse, and a bundle with a part missing or a
part corrupted is refused, by name, before anything is unpacked or installed (docs/container.md, the GPU path)."""

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "scripts" / "gpu-container.sh", ROOT / "scripts" / "gpu-container-bundle.sh"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_script_parses(script):
    run = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    if shutil.which("shellcheck"):
        run = subprocess.run(["shellcheck", "-S", "warning", str(script)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout


def _bundle(where: Path, pieces: list[bytes], whole: bytes, parts: int) -> None:
    """A .container-bundle/ as gpu-container-bundle.sh lays it out: part-NN/{bundle.tar.MM, SHA256SUMS, PARTS}."""
    sums = f"{hashlib.sha256(whole).hexdigest()}  bundle.tar\n"
    for i, piece in enumerate(pieces):
        part = where / ".container-bundle" / f"part-{i + 1:02d}"
        part.mkdir(parents=True)
        (part / f"bundle.tar.{i:02d}").write_bytes(piece)
        (part / "SHA256SUMS").write_text(sums)
        (part / "PARTS").write_text(f"{parts}\n")


def _install(where: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "KS_STEPS": "install", "KS_CONTAINER_WORK": str(where / "work")}
    return subprocess.run(
        ["bash", str(SCRIPTS[0]), str(where / "out"), "10", "label"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_missing_part_is_named_and_nothing_is_installed(tmp_path):
    _bundle(tmp_path, [b"first half"], b"first half" + b"second half", parts=2)
    run = _install(tmp_path)
    assert run.returncode == 1
    assert "FAILED: 1 of 2 parts in" in run.stdout and "part-01): carry the others" in run.stdout
    assert not (tmp_path / "work" / "bundle.tar").exists()  # nothing joined, nothing unpacked


def test_a_corrupt_part_is_refused_before_anything_is_unpacked(tmp_path):
    _bundle(tmp_path, [b"first half", b"second half, changed"], b"first half" + b"second half", parts=2)
    run = _install(tmp_path)
    assert run.returncode == 1
    assert "FAILED: the joined bundle's sha256 is not the bundle's" in run.stdout
    assert not (tmp_path / "work" / "bundle").exists()  # never unpacked
