#!/usr/bin/env bash
# The user's command, every job in an Apptainer image, on an offline GPU host (Ubuntu 24.04, glibc 2.39, root,
# /dev/fuse and loop devices; no apptainer, squashfs-tools, squashfuse or bwrap; the host's CUDA Python stack
# is a virtual environment, $KS_HOST_VENV, default /opt/torch/.venv). docs/container.md says what it proves.
#
#   scripts/gpu-container.sh OUT LIMIT_S LABEL [CORES]
#
# Before: the parts of .container-bundle/ (scripts/gpu-container-bundle.sh makes them on a machine with apt)
# carried over consecutive device calls. Then, in order, each step logged to
# OUT/gpu-container.log (kept in $KS_CONTAINER_WORK between calls, as the record gpu-container.json is):
#   1. join the parts and check their sha256; unpack the .debs (Debian sid's Apptainer 1.4.5, squashfs-tools,
#      squashfuse, libfuse3-4, ...) into / without replacing any file already there; check with ldd that no
#      library is missing; install the Snakemake wheels into /tmp/site, as gpu-session.sh does;
#   2. assemble the image root under $KS_CONTAINER_WORK: the host's own /usr (hard links where it can, else a
#      copy: it is the smallest root known to run the venv's python, its C compiler for Triton's launcher,
#      git and bash), the merged-/usr links, a few files of /etc, the venv at its own path, the wheels; check
#      it with chroot (torch and triton import); pack it with `apptainer build` (Bootstrap: localimage, the
#      definition's %environment with the venv for /opt/venv, labels that say it is not the lock's image);
#   3. check the image on the GPU (`apptainer exec --nv`: nvidia-smi, torch.cuda);
#   4. run `snakemake --cores CORES --use-singularity --config label=LABEL container_image=<the .sif> ...`
#      (CORES default nproc: > 1, so the per-GPU lock is exercised across containers), stopped at LIMIT_S by
#      SIGINT like gpu-session.sh (a later start on the same machine resumes);
#   5. pack results/LABEL, reports/LABEL, logs/LABEL and the record of steps 1-3 into OUT/LABEL.tar.gz.
#
# Extra Snakemake arguments go in SNAKEMAKE_ARGS and extra config entries in SNAKEMAKE_CONFIG (as in
# gpu-session.sh), e.g. the priority subset that docs/container.md names. KS_STEPS=install,image,check,run
# (the default) picks steps: a later call on a warm machine can skip what is done (the image is kept);
# KS_STEPS=root only assembles and checks the image root and writes the definition (a dry run of step 2).
set -uo pipefail
out=${1:?out dir}; limit=${2:?time limit in seconds}; label=${3:?run label}; cores=${4:-$(nproc)}
case " ${SNAKEMAKE_ARGS:-} " in
  *" --config "*|*" -C "*) echo "put config entries in SNAKEMAKE_CONFIG, not --config in SNAKEMAKE_ARGS" >&2; exit 2 ;;
esac
root=$PWD
venv=${KS_HOST_VENV:-/opt/torch/.venv}
work=${KS_CONTAINER_WORK:-/var/tmp/kernelscope-gpu-container}
bundle=$root/.container-bundle
image=$work/kernelscope-host.sif
steps=${KS_STEPS:-install,image,check,run}
record=$work/gpu-container.json  # kept beside the image, so a later call on the same machine adds to it
mkdir -p "$out" "$work"
exec > >(tee -a "$work/gpu-container.log") 2>&1
log() { printf '[gpu-container %s +%ss] %s\n' "$(date -u +%H:%M:%S)" "$SECONDS" "$*"; }
die() { log "FAILED: $*"; cp "$record" "$work/gpu-container.log" "$out/" 2>/dev/null; exit 1; }
want() { [[ ,$steps, == *,$1,* ]]; }
note() { python3 - "$record" "$@" <<'PY'  # note KEY VALUE: one entry of the run's container record
import json, sys
path, key, value = sys.argv[1:4]
try:
    doc = json.load(open(path))
except (OSError, ValueError):
    doc = {}
try:
    doc[key] = json.loads(value)
except ValueError:
    doc[key] = value
json.dump(doc, open(path, "w"), indent=1)
PY
}
SECONDS=0

install() {
    local expected parts have
    [[ -d $bundle ]] || die "no $bundle: carry its parts first (scripts/gpu-container-bundle.sh prints the plan)"
    expected=$(cat "$bundle"/part-*/PARTS 2>/dev/null | sort -u)
    [[ $expected =~ ^[0-9]+$ ]] || die "the parts in $bundle disagree on their number (PARTS: ${expected:-none})"
    have=$(ls -d "$bundle"/part-* | wc -l)
    ((have == expected)) || die "$have of $expected parts in $bundle ($(cd "$bundle" && echo part-*)): carry the others"
    log "joining $have parts"
    parts=("$bundle"/part-*/bundle.tar.[0-9][0-9])
    cat "${parts[@]}" > "$work/bundle.tar"
    (cd "$work" && sha256sum -c --quiet "$bundle/part-01/SHA256SUMS") || die "the joined bundle's sha256 is not the bundle's"
    rm -rf "$work/bundle" "$work/pkgroot" && mkdir -p "$work/bundle" "$work/pkgroot"
    tar -C "$work/bundle" -xf "$work/bundle.tar" && rm "$work/bundle.tar"
    (cd "$work/bundle" && sha256sum -c --quiet SHA256SUMS.files) || die "a file of the bundle does not match its sum"
    for deb in "$work"/bundle/debs/*.deb; do dpkg-deb -x "$deb" "$work/pkgroot"; done
    # Into / without replacing anything the host has (-n): the packages only add files an Ubuntu 24.04 host lacks.
    (cd "$work/pkgroot" && find . ! -type d | sed 's|^\.||' | sort) > "$out/installed-files.txt"
    cp -a --update=none "$work/pkgroot/." / 2>/dev/null || cp -an "$work/pkgroot/." /
    ldconfig
    # These machines may withhold capabilities that Apptainer asks for root by default (CAP_SYS_RESOURCE on the
    # CPU machines, docs/container.md); the jobs need none.
    sed -i 's/^root default capabilities = .*/root default capabilities = no/' /etc/apptainer/apptainer.conf
    local missing
    missing=$(ldd /usr/bin/apptainer /usr/bin/mksquashfs /usr/bin/squashfuse 2>&1 | grep 'not found' | sort -u)
    [[ -z $missing ]] || die "libraries missing on this host (add their packages to gpu-container-bundle.sh): $missing"
    log "$(apptainer --version)"
    note apptainer "\"$(apptainer --version)\""
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$work"/bundle/whl/*.whl \
        || die "installing the Snakemake wheels"
}

# The image root: the host's /usr and the venv, linked (same file system) or copied.
link_or_copy() {  # SOURCE DEST
    mkdir -p "$(dirname "$2")"
    cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2"; cp -a "$1" "$2"; }
}

take_into_root() {  # DIR...: each directory outside the root's /usr (and not there yet) into the root, at its path
    local d
    for d in "$@"; do
        [[ $d == /usr || $d == /usr/* || -e $rootfs$d ]] || link_or_copy "$d" "$rootfs$d"
    done
}

assemble() {
    local rootfs=$work/root python prefix
    [[ -x $venv/bin/python ]] || die "no python in $venv (set KS_HOST_VENV)"
    rm -rf "$rootfs" && mkdir -p "$rootfs"
    log "assembling the image root from /usr and $venv"
    link_or_copy /usr "$rootfs/usr"
    for d in bin sbin lib lib32 lib64 libx32; do  # merged /usr: the same links as the host
        if [[ -L /$d ]]; then ln -s "$(readlink "/$d")" "$rootfs/$d"; elif [[ -d /$d ]]; then link_or_copy "/$d" "$rootfs/$d"; fi
    done
    mkdir -p "$rootfs"/{etc,proc,sys,dev,tmp,var/tmp,root,home,run,mnt,opt}
    chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
    local f
    for f in alternatives ld.so.cache ld.so.conf ld.so.conf.d nsswitch.conf ssl ca-certificates ca-certificates.conf \
             passwd group os-release lsb-release debian_version gitconfig python3 python3.12 localtime; do
        [[ -e /etc/$f || -L /etc/$f ]] && cp -a "/etc/$f" "$rootfs/etc/"
    done
    touch "$rootfs/etc/hosts" "$rootfs/etc/resolv.conf"
    link_or_copy "$venv" "$rootfs$venv"
    # The venv's base interpreter, where it is not under /usr (uv and pyenv keep theirs under a home directory), at
    # its own path: relocated, an interpreter built with an absolute rpath loads another libpython (seen: pyenv's
    # 3.11.7 ran as Debian's 3.11.2). Snakemake gives every job --home <workdir>, so no home is mounted over it.
    python=$(readlink -f "$venv/bin/python")
    prefix=$(dirname "$(dirname "$python")")
    take_into_root "$prefix"
    # Nsight Compute, where the host has it outside /usr (its own directory, e.g. /opt/nvidia/nsight-compute/<v>)
    local ncu
    rm -f "$work/ncu-dir"
    if ncu=$(command -v ncu); then
        # its directory on PATH inside too: Apptainer gives the container its own PATH, and on the first GPU run
        # the ncu stage inside found no ncu although the image held it (under /usr/local/cuda-13.0/bin)
        dirname "$ncu" > "$work/ncu-dir"
        # the directory PATH names and the one the binary resolves to (a link may point elsewhere)
        take_into_root "$(dirname "$ncu")" "$(dirname "$(readlink -f "$ncu")")"
        # CUDA's bin/ncu is a wrapper that runs the newest Nsight Compute it finds under its toolkit
        # (<cuda>/nsight-compute-*) or /opt/nvidia/nsight-compute: on the second GPU run the image held the
        # wrapper but not the tool ("nsight-compute directory is not found"), so those go in too, as their
        # links resolve
        local tool
        for tool in "$(dirname "$(readlink -f "$ncu")")"/../nsight-compute* /opt/nvidia/nsight-compute; do
            [[ -e $tool ]] && take_into_root "$tool" "$(readlink -f "$tool")"
        done
        note ncu "\"$(dirname "$ncu")\""
    else
        log "no ncu on PATH: the ncu stage will fail inside the image"
    fi
    # The C compiler Triton builds its launcher with ($CC, which Apptainer passes into the image, else cc or
    # gcc on PATH), where it is not under /usr: on the first GPU run the host's CC=/opt/gcc/bin/gcc was missing
    # in the image, and every Triton and torch.compile implementation failed ("No such file or directory").
    local cc
    cc=${CC:-$(command -v cc || command -v gcc || true)}
    if [[ -n $cc && -x $cc ]]; then
        # the prefix of the path as named (what $CC says inside) and of the binary it resolves to
        take_into_root "$(dirname "$(dirname "$cc")")" "$(dirname "$(dirname "$(readlink -f "$cc")")")"
        note cc "\"$cc\""
    else
        log "no C compiler (CC, cc, gcc): Triton cannot build its launcher inside the image"
    fi
    [[ -d /tmp/site ]] && link_or_copy /tmp/site "$rootfs/opt/kernelscope/site"
    log "checking the root with chroot"
    # in a private mount namespace, with the host's /dev and /proc (torch reads /dev/urandom at import)
    unshare -m sh -c 'mount --rbind /dev "$1/dev" && mount -t proc proc "$1/proc" && shift && exec chroot "$@"' _ \
        "$rootfs" "$rootfs" "$venv/bin/python" -c \
        'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)' \
        > "$work/versions.txt" || die "the assembled root does not run $venv/bin/python with torch and triton"
    local host_versions
    host_versions=$("$venv/bin/python" -c 'import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)')
    [[ $(cat "$work/versions.txt") == "$host_versions" ]] \
        || die "the root runs python torch triton $(cat "$work/versions.txt"), the host's venv $host_versions"
    log "root runs: python torch triton = $(cat "$work/versions.txt")"
    note root_versions "\"$(cat "$work/versions.txt")\""
    note root_bytes "$(du -sb "$rootfs" | cut -f1)"
}

definition() {  # the definition Apptainer packs the root with
    local def=$work/kernelscope-host.def
    {
        printf 'Bootstrap: localimage\nFrom: %s\n\n%%labels\n' "$work/root"
        printf '    org.opencontainers.image.title kernelscope (assembled from a host virtual environment)\n'
        printf '    org.kernelscope.image.kind host-venv: not env/kernelscope.def, not the lock (env/requirements.lock)\n'
        printf '    org.kernelscope.image.venv %s\n' "$venv"
        printf '    org.kernelscope.image.versions %s\n' "$(cat "$work/versions.txt")"
        printf '%%environment\n'
        # the published definition's own %environment, with the host's venv for the image's /opt/venv
        PYTHONPATH=$root python3 -c 'import sys; from kernelscope import container
sys.stdout.write(container._sections(open("env/kernelscope.def").read())[1]["environment"])' | sed "s|/opt/venv|$venv|g"
        printf '    export PYTHONPATH=/opt/kernelscope/site${PYTHONPATH:+:$PYTHONPATH}\n'
        [[ -s $work/ncu-dir ]] && printf '    export PATH=$PATH:%s\n' "$(cat "$work/ncu-dir")"
    } > "$def"
    echo "$def"
}

build_image() {
    local def started
    assemble
    def=$(definition) || die "writing the definition"
    mkdir -p "$work/tmp"
    # Apptainer copies a localimage root into its temporary directory, then packs it: about twice the root.
    local need free
    need=$(($(du -sb --apparent-size "$work/root" | cut -f1) * 22 / 10)) free=$(($(df -B1 --output=avail "$work" | tail -1)))
    ((free > need)) || die "$free bytes free under $work, about $need needed to pack the image (set KS_CONTAINER_WORK)"
    log "packing $image (apptainer build; no compression: the image stays on this host)"
    started=$SECONDS
    APPTAINER_TMPDIR=$work/tmp apptainer build --force --mksquashfs-args "-noI -noD -noF -noX" "$image" "$def" \
        < /dev/null > "$out/apptainer-build.log" 2>&1 || { tail -20 "$out/apptainer-build.log"; die "apptainer build"; }
    note build_s "$((SECONDS - started))"
    note image "\"$image\""
    note image_bytes "$(stat -c %s "$image")"
    note image_sha256 "\"$(sha256sum "$image" | cut -d' ' -f1)\""
    log "image $(stat -c %s "$image") bytes, sha256 $(sha256sum "$image" | cut -d' ' -f1), built in $((SECONDS - started)) s"
    rm -rf "$work/root" "$work/tmp"  # hard links or a copy; the SIF holds it now
}

check_image() {
    [[ -f $image ]] || die "no image $image: run the image step first"
    log "the image on the GPU (apptainer exec --nv)"
    apptainer exec --nv "$image" nvidia-smi -L || die "nvidia-smi inside the image"
    apptainer exec --nv "$image" python -c '
import json, torch, triton
print(json.dumps({"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.cuda.is_available(),
                  "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}))' \
        > "$work/inside.json" || die "python inside the image"
    cat "$work/inside.json"
    note inside "$(cat "$work/inside.json")"
    grep -q '"cuda": true' "$work/inside.json" || die "torch sees no GPU inside the image"
    # Triton's JIT inside: its launcher built with the C compiler, a kernel compiled with ptxas and run
    local check=$bundle/jit-check.py
    mkdir -p "$bundle"
    cat > "$check" <<'PY'
import torch
import triton
import triton.language as tl


@triton.jit
def _one(x_ptr):
    tl.store(x_ptr, 1.0)


x = torch.zeros(1, device="cuda")
_one[(1,)](x)
torch.cuda.synchronize()
assert x.item() == 1.0, x
print("triton JIT inside the image: a kernel compiled and ran")
PY
    apptainer exec --nv "$image" python "$check" || die "Triton's JIT inside the image (its C compiler: CC=${CC:-unset})"
    note triton_jit '"ok"'
    if apptainer exec --nv "$image" ncu --version > "$work/ncu-inside.txt" 2>&1; then
        note ncu_inside "\"$(tail -1 "$work/ncu-inside.txt")\""
    else
        log "no ncu inside the image: the ncu stage will record it as not run"
        note ncu_inside '"missing"'
    fi
}

run_workflow() {
    [[ -f $image ]] || die "no image $image: run the image step first"
    [[ -d /tmp/site ]] || die "no /tmp/site: run the install step first"
    export PYTHONPATH=/tmp/site:$root${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=index,uuid,name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv \
        | tee "$out/nvidia-smi-before.csv"
    [[ -d results/$label ]] || rm -rf "reports/$label"  # as gpu-session.sh: a committed report would satisfy the target
    log "snakemake --cores $cores --use-singularity (label $label, image $image)"
    # shellcheck disable=SC2086  # SNAKEMAKE_ARGS and SNAKEMAKE_CONFIG are word lists, as in gpu-session.sh
    timeout --signal=INT "$limit" python3 -m snakemake --cores "$cores" --use-singularity ${SNAKEMAKE_ARGS:-} \
        --config label="$label" container_image="$image" ${SNAKEMAKE_CONFIG:-} > "$out/snakemake-$label.log" 2>&1
    local status=$?
    log "snakemake exit $status"
    note snakemake_exit "$status"
    grep -E "steps \(|Error in rule|Exiting because" "$out/snakemake-$label.log" | tail -5
    # every job of every containerized rule says from inside where it ran; the lock across containers
    grep -rhoE "^kernelscope [a-z-]+: in Apptainer image" "logs/$label" 2>/dev/null | sort | uniq -c
    [[ -f reports/$label/run.json ]] && python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print("exclusive overlaps:", r["exclusive_overlaps"], "cards:", r["gpus"], "cases timed:", r["cases_timed"])' \
        "reports/$label/run.json"
}

want install && install
if want image; then build_image; elif want root; then assemble && definition; fi  # root: assemble only (a dry run)
want check && check_image
want run && run_workflow
cp "$record" "$work/gpu-container.log" "$out/" 2>/dev/null
tar czf "$out/$label.tar.gz" "results/$label" "reports/$label" "logs/$label" -C "$out" gpu-container.json \
    gpu-container.log 2>/dev/null
log "packed $out/$label.tar.gz"
ls -la "$out"
