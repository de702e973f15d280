# kernelscope's pinned CUDA environment. env/kernelscope.def builds the same environment for Apptainer;
# tests/test_container.py fails unless both pin the same base image, system packages, environment, lock and
# build checks. Build from the repository root:  docker build -t kernelscope:dev .
#
# Base image: plain Ubuntu 24.04, whose python3.12 matches the lock's --python-version 3.12. No CUDA base is
# needed: torch's wheel brings its own CUDA 13.0 user-space libraries (the nvidia-* / cuda-toolkit packages in
# the lock: runtime, cuBLAS, cuDNN, NVRTC, ...) and Triton bundles ptxas, so the host supplies only the driver
# (CUDA 13.0 needs >= 580), through `docker run --gpus all` or `apptainer --nv`. What nvidia/cuda's "base"
# flavour adds on top of Ubuntu, and why none of it is needed: cuda-cudart (the wheels' nvidia-cuda-runtime
# replaces it), cuda-compat (forward compatibility for older datacenter drivers; kernelscope asks for a
# CUDA 13 driver instead), and the NVIDIA_* variables the NVIDIA container runtime reads (set below).
# scripts/container-e2e.sh builds this recipe with Apptainer and runs the workflow in it (docs/container.md).
#
# Where the digest came from: it was NOT resolved against the registry by the machine that wrote this file
# (it has no registry access). It is the digest that at least ten unrelated public repositories pin for
# ubuntu:24.04 (found with a code search of stored public GitHub repositories, 2026-11-30). Verify it, or
# refresh it to a newer publication of the tag, with either of
#   docker buildx imagetools inspect ubuntu:24.04 --format '{{json .Manifest.Digest}}'
#   skopeo inspect --format '{{.Digest}}' docker://docker.io/library/ubuntu:24.04
# and write the result here (FROM and the base.digest label) and in env/kernelscope.def (From and its label).
FROM ubuntu:24.04@sha256:c35e29c9450151419d9448b0fd75374fec4fff364a27f176fb458d472dfc9e54

LABEL org.opencontainers.image.title="kernelscope" \
      org.opencontainers.image.description="Triton kernel correctness, sweeps, timing and profiles (pinned CUDA environment)" \
      org.opencontainers.image.base.name="docker.io/library/ubuntu:24.04" \
      org.opencontainers.image.base.digest="sha256:c35e29c9450151419d9448b0fd75374fec4fff364a27f176fb458d472dfc9e54"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# gcc, libc6-dev and python3.12-dev: Triton compiles a small C launcher (it includes Python.h) the first time
# it sees a kernel signature. git: the environment record stores the checkout's commit.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3.12 python3.12-venv python3.12-dev gcc libc6-dev git ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# TRITON_CACHE_DIR: writable for any user the container runs as (the image's files are not). NVIDIA_*: what
# the NVIDIA container runtime reads to mount the GPUs and the driver's compute and nvidia-smi libraries (the
# nvidia/cuda images set the same values; `docker run --gpus all` needs neither).
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    TRITON_CACHE_DIR=/tmp/triton-cache \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

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
