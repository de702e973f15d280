"""The pinned container: what the Dockerfile and the Apptainer definition pin, and a built image's identity.

Both container files build one environment: a CUDA base image pinned by tag and digest, a few system
packages, the Python stack from ``env/requirements.lock`` (exact versions, sha256 hashes) and kernelscope
itself. :func:`recipe` reduces either file to the same :class:`Recipe`, so a test can prove that the two
pin the same things; :func:`identity` is what the environment record stores about the image a run used.

Standard library only: the workflow imports this module on a host that may not have the container's stack.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOCKERFILE = "Dockerfile"
DEFINITION = "env/kernelscope.def"
REQUIREMENTS = "env/requirements.in"
LOCK = "env/requirements.lock"

# OCI annotation keys for the base image; the Apptainer definition needs them for the tag (see BaseImage).
BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"

# Apptainer binds the host's /tmp, which other users share; its definition makes the Triton cache per user
# with this suffix. Docker's /tmp is private to the container. Nothing else may differ between the two.
PER_USER_SUFFIX = "-$(id -u)"

_REFERENCE = re.compile(r"^(?P<repository>[^:@\s]+)(?::(?P<tag>[^@\s]+))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")
_LOCK_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})\b")


class ContainerFileError(ValueError):
    """A container file, requirements file or lock that does not say what kernelscope needs it to say."""


@dataclass(frozen=True)
class BaseImage:
    """A base image reference. Docker takes ``repository:tag@digest`` (it pulls by the digest); Apptainer
    refuses a reference with both, so its definition pulls ``repository@digest`` and labels the tag."""

    repository: str
    tag: str
    digest: str

    def __str__(self) -> str:
        return f"{self.repository}:{self.tag}@{self.digest}"

    @classmethod
    def parse(cls, reference: str, tag: str | None = None) -> BaseImage:
        match = _REFERENCE.match(reference.strip())
        if not match or not match["digest"]:
            raise ContainerFileError(f"base image {reference!r} is not pinned by a sha256 digest")
        tag = match["tag"] or tag
        if not tag:
            raise ContainerFileError(f"base image {reference!r} names no tag (and none is labelled)")
        return cls(match["repository"], tag, match["digest"])


@dataclass(frozen=True)
class Recipe:
    """What one container file pins, in a form that does not depend on the file's syntax."""

    base: BaseImage
    labels: dict[str, str]
    apt_packages: frozenset[str]
    environment: dict[str, str]
    pip_installs: tuple[tuple[str, ...], ...]
    files: dict[str, str]  # destination in the image -> source in the repository
    checks: tuple[tuple[str, ...], ...]  # build-time checks: `pip check`, `python -m kernelscope.container ...`


def _logical_lines(text: str) -> list[str]:
    """Join backslash continuations and drop comments and blank lines."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current)
    return lines


def _commands(script: str) -> list[list[str]]:
    """Shell commands of a RUN instruction or a %post script, split on `&&`, `;` and newlines."""
    commands = []
    for line in _logical_lines(script):
        for part in re.split(r"&&|;", line):
            words = shlex.split(part, comments=True)
            if words:
                commands.append(words)
    return commands


def _collect(commands: list[list[str]]) -> tuple[frozenset[str], tuple, tuple]:
    """System packages, pip installs and build-time checks, with programs named without their directory
    (``/opt/venv/bin/pip`` and ``pip`` on the venv's PATH are the same command)."""
    apt, pips, checks = set(), [], []
    for words in commands:
        while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefixes (DEBIAN_FRONTEND=...)
            words = words[1:]
        command = (Path(words[0]).name, *words[1:])
        if command[0] == "apt-get" and "install" in command:
            apt.update(w for w in command[command.index("install") + 1 :] if not w.startswith("-"))
        elif command[:2] == ("pip", "install"):
            pips.append(command)
        elif command[:2] == ("pip", "check") or command[1:3] == ("-m", "kernelscope.container"):
            checks.append(command)
    return frozenset(apt), tuple(pips), tuple(checks)


def _key_values(text: str) -> dict[str, str]:
    """``K=V K2="V 2"`` (Dockerfile ENV/LABEL) as a dict."""
    pairs = {}
    for word in shlex.split(text):
        key, sep, value = word.partition("=")
        if not sep:
            raise ContainerFileError(f"expected KEY=VALUE, got {word!r} (use the KEY=VALUE form)")
        pairs[key] = value
    return pairs


def parse_dockerfile(path: str | Path) -> Recipe:
    base, labels, env, files, scripts = None, {}, {}, {}, []
    for line in _logical_lines(Path(path).read_text()):
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            if base is not None:
                raise ContainerFileError(f"{path}: one stage expected, found a second FROM")
            base = BaseImage.parse(rest.split()[0])
        elif instruction == "LABEL":
            labels.update(_key_values(rest))
        elif instruction == "ENV":
            env.update(_key_values(rest))
        elif instruction == "COPY":
            *sources, dest = [w for w in shlex.split(rest) if not w.startswith("--")]
            for source in sources:
                files[dest + Path(source).name if dest.endswith("/") else dest] = source
        elif instruction == "RUN":
            scripts.append(rest)
    if base is None:
        raise ContainerFileError(f"{path}: no FROM instruction")
    apt, pips, checks = _collect([c for s in scripts for c in _commands(s)])
    return Recipe(base, labels, apt, env, pips, files, checks)


def _sections(text: str) -> tuple[dict[str, str], dict[str, str]]:
    header, sections, name = {}, {}, None
    for raw in text.splitlines():
        if raw.startswith("%"):
            name = raw[1:].split()[0]
            sections[name] = ""
        elif name is not None:
            sections[name] += raw + "\n"
        elif raw.strip() and not raw.lstrip().startswith("#"):
            key, _, value = raw.partition(":")
            header[key.strip().lower()] = value.strip()
    return header, sections


def parse_definition(path: str | Path) -> Recipe:
    header, sections = _sections(Path(path).read_text())
    if header.get("bootstrap") != "docker" or "from" not in header:
        raise ContainerFileError(f"{path}: expected 'Bootstrap: docker' and a 'From:' line")
    labels = {}
    for line in _logical_lines(sections.get("labels", "")):
        key, _, value = line.partition(" ")
        labels[key] = value.strip()
    base = BaseImage.parse(header["from"], tag=_tag_of(labels.get(BASE_NAME_LABEL, "")))
    env = {}
    for line in _logical_lines(sections.get("environment", "")):
        if not line.startswith("export ") or "=" not in line:
            raise ContainerFileError(f"{path}: %environment lines must be 'export KEY=VALUE', got {line!r}")
        key, _, value = line.removeprefix("export ").partition("=")
        env[key.strip()] = value.strip().strip('"')
    files = {}
    for line in _logical_lines(sections.get("files", "")):
        source, dest = line.split()
        files[dest] = source
    apt, pips, checks = _collect(_commands(sections.get("post", "")))
    return Recipe(base, labels, apt, env, pips, files, checks)


def _tag_of(name: str) -> str | None:
    match = _REFERENCE.match(name.removeprefix("docker.io/"))
    return match["tag"] if match else None


def recipe(path: str | Path) -> Recipe:
    """The recipe of a Dockerfile or an Apptainer definition (``*.def``)."""
    return parse_definition(path) if str(path).endswith(".def") else parse_dockerfile(path)


def differences(docker: Recipe, apptainer: Recipe) -> list[str]:
    """How a Dockerfile's recipe and an Apptainer definition's differ (empty: they build the same
    environment). Also checks each file's base-image labels against the image it builds from."""
    found = []
    for name, r in (("Dockerfile", docker), ("definition", apptainer)):
        labelled = (_tag_of(r.labels.get(BASE_NAME_LABEL, "")), r.labels.get(BASE_DIGEST_LABEL))
        if labelled != (r.base.tag, r.base.digest):
            found.append(f"{name}: base-image labels {labelled} do not match the image it builds from {r.base}")
    apptainer_env = {k: v.removesuffix(PER_USER_SUFFIX) for k, v in apptainer.environment.items()}
    for field, a, b in (
        ("base image", docker.base, apptainer.base),
        ("labels", docker.labels, apptainer.labels),
        ("system packages", docker.apt_packages, apptainer.apt_packages),
        ("environment", docker.environment, apptainer_env),
        ("pip installs", docker.pip_installs, apptainer.pip_installs),
        ("copied files", docker.files, apptainer.files),
        ("build checks", docker.checks, apptainer.checks),
    ):
        if a != b:
            found.append(f"{field}: Dockerfile has {a}, the definition has {b}")
    return found


def parse_requirements(path: str | Path) -> dict[str, str]:
    """Top-level ``name==version`` pins of a requirements file; anything looser is an error."""
    pins = {}
    for line in _logical_lines(Path(path).read_text()):
        match = _LOCK_ENTRY.match(line)
        if not match or line[match.end() :].strip():
            raise ContainerFileError(f"{path}: {line!r} is not an exact 'name==version' pin")
        pins[normalize(match["name"])] = match["version"]
    return pins


@dataclass(frozen=True)
class Locked:
    version: str
    hashes: tuple[str, ...]
    via: tuple[str, ...]  # what required it, as the lock's "# via" comments say


def parse_lock(path: str | Path) -> dict[str, Locked]:
    """Every entry of a hash-pinned lock (pip-compile / uv format). Raises on an entry that is not
    ``name==version`` followed by at least one sha256 hash."""
    entries, name, version, hashes, via = {}, None, None, [], []

    def close():
        if name is None:
            return
        if not hashes:
            raise ContainerFileError(f"{path}: {name}=={version} has no --hash")
        entries[normalize(name)] = Locked(version, tuple(hashes), tuple(via))

    for raw in Path(path).read_text().splitlines():
        stripped = raw.strip()
        if not stripped:
            continue
        if not raw.startswith((" ", "#")):
            close()
            match = _LOCK_ENTRY.match(stripped)
            if not match:
                raise ContainerFileError(f"{path}: {stripped!r} is not an exact 'name==version' pin")
            name, version, hashes, via = match["name"], match["version"], [], []
            hashes += _HASH.findall(stripped)
        elif stripped.startswith("--hash"):
            hashes += _HASH.findall(stripped)
        elif raw.startswith("    #") and name is not None:
            text = stripped.lstrip("#").strip()
            if text != "via":
                via.append(text.removeprefix("via ").strip())
    close()
    return entries


def normalize(name: str) -> str:
    """PEP 503 name normalisation (``PyYAML`` and ``pyyaml``, ``jupyter_core`` and ``jupyter-core``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_file(path: str | Path, chunk: int = 1 << 24) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def identity(image: str | Path, definition: str | Path = DEFINITION, lock: str | Path = LOCK) -> dict[str, Any]:
    """What the environment record stores about the image a run used: the image file's sha256 (for a registry
    URI pinned by digest, the URI and that digest instead: Snakemake pulls it), the base image (reference and
    digest) of this checkout's recipe, and the sha256 of this checkout's lock. For a pre-built image those two
    say what it should have been built from; the image's own record of what it holds is the environment
    record's package versions, taken inside it."""
    image = str(image)
    if "://" in image:
        digest = re.search(r"@(sha256:[0-9a-f]{64})$", image)
        if not digest:
            raise ContainerFileError(f"container image {image!r} is not pinned by a sha256 digest")
        found = {"image_reference": image, "image_digest": digest[1]}
    else:
        found = {"image_sha256": sha256_file(image)}
    return {**found, "base_image": str(recipe(definition).base), "lock_sha256": sha256_file(lock)}


def write_identity(image: str | Path, definition: str | Path, lock: str | Path, out: str | Path) -> None:
    from kernelscope import results

    results.write_text(out, json.dumps(identity(image, definition, lock)) + "\n")


#: what Apptainer's ``--bind`` cannot carry in a path (``src[:dst[:opts]][,src2...]``), nor ``--env`` in a value
_BIND_SEPARATORS = (",", ":")


def apptainer_args(args: str, lock_dir: str | Path) -> str:
    """``--apptainer-args`` plus what every containerized job needs to share the host's per-GPU lock
    (:mod:`kernelscope.gpus`): the lock directory bound at its own path and ``KERNELSCOPE_LOCK_DIR`` set to it
    inside. Each job runs in its own container; without these a container with a private ``/tmp``
    (``--contain``, ``--containall``, a site's ``mount tmp = no``) or a cleaned environment would lock files
    that no other job sees, and two jobs would sample one card at once. Idempotent: a job that a cluster
    executor starts re-reads the workflow with these arguments already in place."""
    from kernelscope.gpus import LOCK_DIR_ENV

    path = str(Path(lock_dir).absolute())
    if any(c in path for c in _BIND_SEPARATORS):
        raise ContainerFileError(
            f"{LOCK_DIR_ENV}={path}: a path with ',' or ':' cannot be bound into the container "
            "(Apptainer's --bind and --env split on them); choose a lock directory without them"
        )
    words = shlex.split(args)
    needed = ["--bind", f"{path}:{path}", "--env", f"{LOCK_DIR_ENV}={path}"]
    if any(words[i : i + 4] == needed for i in range(len(words))):
        return args
    return shlex.join([*words, *needed])


#: where Apptainer keeps an image's labels (its definition's %labels and its own), seen from inside the image
APPTAINER_LABELS = "/.singularity.d/labels.json"
#: the packages whose versions decide the numbers; an image whose versions differ from the lock's is not its image
DECIDING_PACKAGES = ("torch", "triton")


def image_labels(path: str | Path = APPTAINER_LABELS) -> dict[str, str] | None:
    """The labels of the Apptainer image this process runs in (None outside one, or where it has none)."""
    try:
        labels = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return labels if isinstance(labels, dict) else None


def _public(version: str) -> str:
    return version.split("+", 1)[0]  # torch 2.13.0+cu130 is the lock's torch==2.13.0


def versus_lock(
    versions: dict[str, str],
    labels: dict[str, str] | None,
    lock: str | Path = LOCK,
    definition: str | Path = DEFINITION,
) -> dict[str, Any]:
    """Whether the image a job ran in is this checkout's pinned image: ``versions`` (torch and triton, read
    inside it) against the lock's pins, and the image's base-image labels against the recipe's. Returns
    ``{"lock_image": bool, "differences": [...]}``; every difference is a sentence a report can print."""
    differences = []
    try:
        pins = parse_lock(lock)
    except (OSError, ContainerFileError) as exc:
        pins = {}
        differences.append(f"the lock {lock} could not be read ({exc})")
    for name in DECIDING_PACKAGES:
        pinned = pins.get(name)
        if pinned and _public(versions.get(name) or "") != pinned.version:
            differences.append(f"{name} {versions.get(name)} (the lock pins {pinned.version})")
    try:
        base = recipe(definition).base
    except (OSError, ContainerFileError) as exc:
        differences.append(f"the recipe {definition} could not be read ({exc})")
        return {"lock_image": False, "differences": differences}
    found = (labels or {}).get(BASE_DIGEST_LABEL)
    if found != base.digest:
        differences.append(
            f"image label {BASE_DIGEST_LABEL} {found or 'absent'} (the recipe {definition} builds from {base.digest}): "
            "not built from the recipe"
        )
    return {"lock_image": not differences, "differences": differences}


def check_image(lock: str | Path, cuda: str) -> list[str]:
    """Inside a freshly built image: every locked distribution is installed at its locked version, and
    torch is the build for the expected CUDA version. Returns the problems found (none means pass)."""
    from importlib import metadata

    import torch
    from packaging.version import Version

    problems = []
    for name, entry in parse_lock(lock).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name}=={entry.version} is not installed")
            continue
        if Version(installed) != Version(entry.version):
            problems.append(f"{name} is {installed}, the lock says {entry.version}")
    if torch.version.cuda != cuda:
        problems.append(f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, expected {cuda}")
    return problems


def main(argv: list[str] | None = None) -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m kernelscope.container", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check-image", help="verify the installed stack against the lock (run at build time)")
    p.add_argument("--lock", required=True)
    p.add_argument("--cuda", required=True, help="CUDA version torch must be built for, e.g. 13.0")
    args = parser.parse_args(argv)
    problems = check_image(args.lock, args.cuda)
    for problem in problems:
        print(f"kernelscope image check: {problem}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
