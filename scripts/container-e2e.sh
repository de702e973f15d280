#!/usr/bin/env bash
# Build the pinned image with a real Apptainer and run the workflow in it, on a Debian 12 machine without
# Docker or a reachable container registry (docs/container.md says what this proves and what it does not).
#
#   scripts/container-e2e.sh build               # tools, Apptainer (sid root), the image -> build/kernelscope.sif
#   scripts/container-e2e.sh snakemake ARGS...   # `snakemake ARGS` here (the working directory) with the real
#                                                # Apptainer behind `apptainer`
#   scripts/container-e2e.sh apptainer ARGS...   # the real Apptainer (e.g. `apptainer version`)
#   scripts/container-e2e.sh pack                # pack an image root kept by KS_KEEP_IMAGE_ROOT=1 again
#   make container-e2e                           # both, on the small CPU config, checked (tests/test_container_e2e.py)
#
# Why it is built this way (facts of these machines, see docs/container.md):
# - Apptainer: Debian sid's 1.4.5 needs glibc >= 2.38 (Debian 12 has 2.36), so it lives in a sid root made
#   with mmdebstrap and is entered with bwrap (scripts/sid-apptainer/apptainer, first on PATH for Snakemake).
#   These machines withhold CAP_SYS_RESOURCE, so the sid root's apptainer.conf sets
#   `root default capabilities = no`, and a definition's %post cannot run under Apptainer here.
# - The image: env/kernelscope.def's base is ubuntu:24.04 pinned by digest, which cannot be pulled here (no
#   registry). Its root is made instead with mmdebstrap from Ubuntu's archive (noble, noble-updates,
#   noble-security: the suites the ubuntu:24.04 image's apt sources name); then the definition's own %files
#   are copied in and its own %post runs in that root (chroot), and Apptainer packs the root with the
#   definition's own %labels and %environment. So what is tested is the published recipe, apart from how the
#   base root is fetched and that %post runs under chroot rather than under Apptainer.
#
# Needs root (apt-get, mmdebstrap, bwrap, Apptainer's setuid-free root mode). Everything large lives under
# $KS_CONTAINER_WORK (default /var/tmp/kernelscope-container); the image goes to build/kernelscope.sif.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${KS_CONTAINER_WORK:-/var/tmp/kernelscope-container}
SID_ROOT=$WORK/sid-root
IMAGE_ROOT=$WORK/image-root
IMAGE=${KS_CONTAINER_IMAGE:-$ROOT/build/kernelscope.sif}
DEFINITION=env/kernelscope.def
DEBIAN_MIRROR=${KS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
UBUNTU_MIRROR=${KS_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
UBUNTU_SECURITY=${KS_UBUNTU_SECURITY_MIRROR:-http://security.ubuntu.com/ubuntu}
NICE=(nice -n "${KS_NICE:-15}")  # the build and the workflow share the machine

log() { printf '[container-e2e %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

host_tools() {
    local missing=()
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    command -v bwrap >/dev/null || missing+=(bubblewrap)
    if ((${#missing[@]})); then
        log "installing ${missing[*]} (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

# Apptainer's user space: a Debian sid root with apptainer (and ubuntu-keyring, whose archive key verifies
# the image root's Ubuntu packages; Debian 12 does not package it). sid's Release file on the mirror can be
# past its Valid-Until date, hence the apt option.
sid_root() {
    if [[ ! -x $SID_ROOT/usr/bin/apptainer ]]; then
        log "making the Debian sid root with Apptainer: $SID_ROOT"
        rm -rf "$SID_ROOT"
        mkdir -p "$WORK"
        "${NICE[@]}" mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
            --include=apptainer,ubuntu-keyring,ca-certificates sid "$SID_ROOT" "$DEBIAN_MIRROR"
    fi
    # Apptainer asks for the full capability set for root by default; these machines withhold
    # CAP_SYS_RESOURCE, so its containers would not start.
    sed -i 's/^root default capabilities = .*/root default capabilities = no/' "$SID_ROOT/etc/apptainer/apptainer.conf"
    # bwrap binds the host's /etc/hosts over this file; Apptainer binds /etc/localtime into containers and
    # fails if it is missing (the sid root has no tzdata, so a copy of the host's, not a link).
    touch "$SID_ROOT/etc/hosts"
    rm -f "$SID_ROOT/etc/localtime"
    cp -L /etc/localtime "$SID_ROOT/etc/localtime"
    log "$(apptainer_ version)"
}

apptainer_() {
    KS_SID_ROOT=$SID_ROOT "$ROOT/scripts/sid-apptainer/apptainer" "$@"
}

# One section of the definition, exactly as written there.
section() {
    PYTHONPATH=$ROOT python3 -c 'import sys; from kernelscope import container
header, sections = container._sections(open(sys.argv[1]).read()); sys.stdout.write(sections.get(sys.argv[2], ""))' \
        "$ROOT/$DEFINITION" "$1"
}

# The image's root file system: Ubuntu 24.04 (mmdebstrap: Essential and Priority:required packages plus apt,
# about the ubuntu:24.04 image's package set),
# then the definition's %files and %post, as `apptainer build` would apply them to the pulled base.
image_root() {
    local keyring=$SID_ROOT/usr/share/keyrings/ubuntu-archive-keyring.gpg hook=$WORK/definition-hook.sh
    local components="main restricted universe multiverse"
    mkdir -p "$WORK"
    section post > "$WORK/post.sh"
    section files | grep -v '^[[:space:]]*\(#\|$\)' > "$WORK/files.txt"
    # %files: `SOURCE DEST` per line, SOURCE relative to the repository root, copied as `cp -a` would.
    # %post: run by /bin/sh -e in the root, with a clean environment (none of this host's PIP_* settings),
    # except that pip trusts the host's CA bundle: where the host reaches PyPI through a TLS-inspecting proxy,
    # only the host's bundle has that proxy's CA. The bundle is removed after %post; it is not in the image.
    cat > "$hook" <<HOOK
#!/bin/sh
set -eu
root=\$1
cd '$ROOT'
while read -r src dest; do mkdir -p "\$root\$(dirname "\$dest")" && cp -a "\$src" "\$root\$dest"; done < '$WORK/files.txt'
cp '$WORK/post.sh' "\$root/.kernelscope-post.sh"
cp /etc/ssl/certs/ca-certificates.crt "\$root/.kernelscope-host-ca.crt"
chroot "\$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \\
    LANG=C.UTF-8 PIP_CERT=/.kernelscope-host-ca.crt /bin/sh -e /.kernelscope-post.sh
rm -f "\$root/.kernelscope-post.sh" "\$root/.kernelscope-host-ca.crt"
HOOK
    chmod +x "$hook"
    rm -rf "$IMAGE_ROOT"
    log "making the image root (Ubuntu 24.04 + the definition's %files and %post): $IMAGE_ROOT"
    "${NICE[@]}" mmdebstrap --variant=minbase --include=apt --keyring="$keyring" --components="${components// /,}" \
        --customize-hook="$hook" noble "$IMAGE_ROOT" \
        "deb $UBUNTU_MIRROR noble $components" \
        "deb $UBUNTU_MIRROR noble-updates $components" \
        "deb $UBUNTU_SECURITY noble-security $components"
}

# Pack the root into a SIF: a definition made of the published one's %labels and %environment, bootstrapped
# from the local root instead of the registry (its %files and %post were applied above).
image() {
    local def=$WORK/kernelscope-local.def
    {
        printf 'Bootstrap: localimage\nFrom: %s\n\n' "$IMAGE_ROOT"
        printf '%%labels\n'; section labels
        printf '%%environment\n'; section environment
    } > "$def"
    mkdir -p "$(dirname "$IMAGE")" "$WORK/tmp"
    log "packing $IMAGE (apptainer build)"
    APPTAINER_TMPDIR=$WORK/tmp "${NICE[@]}" env KS_SID_ROOT="$SID_ROOT" "$ROOT/scripts/sid-apptainer/apptainer" \
        build --force "$IMAGE" "$def" < /dev/null
    log "image sha256 $(sha256sum "$IMAGE" | cut -d' ' -f1)  size $(du -h "$IMAGE" | cut -f1)"
}

build() {
    host_tools
    sid_root
    image_root
    image
    if [[ -z ${KS_KEEP_IMAGE_ROOT:-} ]]; then
        log "removing the image root (the SIF holds it; KS_KEEP_IMAGE_ROOT=1 keeps it)"
        rm -rf "$IMAGE_ROOT" "$WORK/tmp"
    fi
}

case ${1:-} in
    build) build ;;
    pack) image ;;
    apptainer) shift; apptainer_ "$@" ;;
    snakemake)
        shift
        [[ -x $SID_ROOT/usr/bin/apptainer ]] || { log "no sid root yet: run '$0 build' first"; exit 1; }
        export KS_SID_ROOT=$SID_ROOT
        export PATH="$ROOT/scripts/sid-apptainer:$PATH"
        exec "${NICE[@]}" snakemake "$@"
        ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
