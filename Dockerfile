# kernelscope's pinned CUDA environment. env/kernelscope.def builds the same environment for Apptainer;
# tests/test_container.py fails unless both pin the same base image, system packages, environment, lock and
# build checks. Build from the repository root:  docker build -t kernelscope:dev .
#
# Base image: NVIDIA's CUDA 13.0 "base" image on Ubuntu 24.04 (whose python3.12 matches the lock's
# --python-version 3.12). torch's wheel brings its own CUDA 13.0 libraries (the nvidia-* / cuda-toolkit
# packages in the lock) and Triton bundles ptxas, so the slim "base" flavour is enough; the host supplies only
# the driver (CUDA 13.0 needs >= 580), through `docker run --gpus all` or `apptainer --nv`.
#
# Where the digest came from: it was NOT resolved against the registry by the machine that wrote this file
# (it has no registry access). It is the digest that three unrelated public repositories pin for this tag
# (found by code search, 2026-11). Verify it, or refresh it after moving to a newer tag, with either of
#   docker buildx imagetools inspect nvidia/cuda:13.0.1-base-ubuntu24.04 --format '{{json .Manifest.Digest}}'
#   skopeo inspect --format '{{.Digest}}' docker://docker.io/nvidia/cuda:13.0.1-base-ubuntu24.04
# and write the result here (FROM and the base.digest label) and in env/kernelscope.def (From and its label).
FROM nvidia/cuda:13.0.1-base-ubuntu24.04@sha256:f8ef28f579ea42a44b415d2c5d46f788e6a9b395c6c83f2929416e1fc192c143

LABEL org.opencontainers.image.title="kernelscope" \
      org.opencontainers.image.description="Triton kernel correctness, sweeps, timing and profiles (pinned CUDA environment)" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:13.0.1-base-ubuntu24.04" \
      org.opencontainers.image.base.digest="sha256:f8ef28f579ea42a44b415d2c5d46f788e6a9b395c6c83f2929416e1fc192c143"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# gcc, libc6-dev and python3.12-dev: Triton compiles a small C launcher (it includes Python.h) the first time
# it sees a kernel signature. git: the environment record stores the checkout's commit.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3.12 python3.12-venv python3.12-dev gcc libc6-dev git ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# TRITON_CACHE_DIR: writable for any user the container runs as (the image's files are not).
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    TRITON_CACHE_DIR=/tmp/triton-cache

# The Python stack, exactly as locked: every file checked against its sha256, nothing resolved at build time.
# One locked package has no wheel on PyPI (connection-pool, a Snakemake dependency): pip builds its
# hash-checked sdist with the current setuptools in an isolated environment, the only unpinned input.
COPY env/requirements.lock /opt/kernelscope/env/requirements.lock
RUN python3.12 -m venv /opt/venv \
    && pip install --no-cache-dir --require-hashes --no-deps -r /opt/kernelscope/env/requirements.lock

# kernelscope itself (workflow jobs import the checkout they run in, which comes first on sys.path; this copy
# serves `python -m kernelscope` outside a checkout). Built with the locked setuptools, no index.
COPY pyproject.toml README.md /opt/kernelscope/src/
COPY kernelscope /opt/kernelscope/src/kernelscope
COPY kernels /opt/kernelscope/src/kernels
RUN pip install --no-cache-dir --no-deps --no-build-isolation --no-index /opt/kernelscope/src \
    && pip check \
    && python -m kernelscope.container check-image --lock /opt/kernelscope/env/requirements.lock --cuda 13.0

# No root needed to run: a plain user by default; `docker run --user "$(id -u):$(id -g)"` works as well.
RUN useradd --create-home --uid 10001 --user-group --shell /bin/bash kernelscope
USER 10001:10001
WORKDIR /work
