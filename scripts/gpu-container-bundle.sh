#!/usr/bin/env bash
# Run HERE (a machine that reaches a Debian mirror through apt), not on the GPU host: fetch what
# scripts/gpu-container.sh installs on an offline Ubuntu 24.04 GPU host, into the ignored folder
# .container-bundle/, split into parts small enough to be carried to the device one call at a time.
#
#   scripts/gpu-container-bundle.sh
#
# What it fetches (Debian sid, with apt, from the Debian mirror this machine's apt configuration names, or
# $KS_DEBIAN_MIRROR): Apptainer 1.4.5 (needs glibc >= 2.38: the host's 2.39 is enough), and the packages it
# needs that Ubuntu 24.04 does not install by default: libseccomp2 (not in a minimal Ubuntu 24.04 root: found by
# gpu-container.sh's ldd check in one), squashfs-tools (mksquashfs, which `apptainer build`
# packs the image with) and its liblzo2-2; squashfuse, libsquashfuse0, libfuse3-4 and fuse3 (fusermount3),
# with which Apptainer mounts a SIF where it may not use the kernel's loop devices. Left out: uidmap and
# containernetworking-plugins (Apptainer's other dependencies: for user-namespace runs with subordinate IDs and
# for --net, neither used), and libc6 and libsqlite3-0, which Ubuntu 24.04 has (python3 needs the latter)
# (gpu-container.sh checks with ldd and names any library that is missing). Also packed: the Snakemake wheels
# of .whl/ (../shared/tools/device-wheels.sh makes them), which the GPU host needs as gpu-session.sh does.
#
# The result: .container-bundle/bundle.tar (the .debs under debs/, the wheels under whl/), its SHA256SUMS, and
# .container-bundle/part-NN/ folders of at most $KS_BUNDLE_PART_MIB MiB each (default 3: the device tool
# carries at most 64 MiB in all, tracked tree included, and the tracked tree alone is ~60 MiB). The device
# keeps an ignored folder between calls while the machine stays warm, so the parts go over in consecutive
# calls, one `carry` each; the script prints the plan. gpu-container.sh joins the parts and checks the sum.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
out=.container-bundle
part_mib=${KS_BUNDLE_PART_MIB:-3}
packages=(apptainer libseccomp2 squashfs-tools liblzo2-2 squashfuse libsquashfuse0 libfuse3-4 fuse3)

# The Debian archive this machine's apt uses (not its -security or -updates suite).
mirror=${KS_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(SUITE)' 2>/dev/null \
    | awk '$2 !~ /-/ && $1 ~ /debian\/?$/ { print $1; exit }')}
[[ -n $mirror ]] || { echo "no Debian archive in this machine's apt configuration: set KS_DEBIAN_MIRROR" >&2; exit 1; }

apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,sources} "$out"
printf 'Types: deb\nURIs: %s\nSuites: sid\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" > "$apt_dir/sources/sid.sources"
# A private apt state: this machine's own lists and package database are neither read nor changed. sid's
# Release file on the mirror can be past its Valid-Until date.
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/sources"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Dir::State::status=/dev/null
    -o Acquire::Check-Valid-Until=false -o APT::Architecture=amd64 -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update -qq
stage=$(mktemp -d -p "$apt_dir")
mkdir -p "$stage/debs" "$stage/whl"
(cd "$stage/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}" >/dev/null)
version=$(dpkg-deb -f "$stage"/debs/apptainer_*.deb Version)
[[ $version == 1.4.5-* ]] || echo "note: sid's apptainer is now $version, not 1.4.5 (docs/container.md names 1.4.5)" >&2
if compgen -G ".whl/*.whl" >/dev/null; then
    cp .whl/*.whl "$stage/whl/"
else
    echo "note: no .whl/ here (../shared/tools/device-wheels.sh makes it): the bundle has no Snakemake wheels" >&2
fi
(cd "$stage" && find debs whl -type f | sort > MANIFEST && xargs sha256sum < MANIFEST > SHA256SUMS.files)
rm -rf "$out"/part-* "$out/bundle.tar"
tar -C "$stage" -cf "$out/bundle.tar" MANIFEST SHA256SUMS.files debs whl
(cd "$out" && sha256sum bundle.tar > SHA256SUMS)
# Parts: part-01/bundle.tar.00, part-02/bundle.tar.01, ...; every part carries the sum, so any one tells
# gpu-container.sh what the whole must hash to.
split -b "${part_mib}M" -d -a 2 "$out/bundle.tar" "$out/bundle.tar."
n=0
for piece in "$out"/bundle.tar.[0-9][0-9]; do
    n=$((n + 1))
    dir=$(printf '%s/part-%02d' "$out" "$n")
    mkdir -p "$dir"
    mv "$piece" "$dir/"
    cp "$out/SHA256SUMS" "$dir/"
done
rm "$out/bundle.tar"
for dir in "$out"/part-*; do echo "$n" > "$dir/PARTS"; done
tree_bytes=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s }')
printf 'bundle: %s packages (%s), %s wheels; %s bytes in %s part(s) of at most %s MiB; tracked tree %s bytes\n' \
    "$(ls "$stage/debs" | wc -l)" "apptainer $version" "$(ls "$stage/whl" | wc -l)" \
    "$(du -cb "$out"/part-*/bundle.tar.* | tail -1 | cut -f1)" "$n" "$part_mib" "$tree_bytes"
echo "carry plan (consecutive device calls while the machine stays warm; the last one runs the script):"
for i in $(seq 1 "$n"); do
    printf '  call %d: carry ["%s/part-%02d"]%s\n' "$i" "$out" "$i" \
        "$( ((i < n)) && echo "  command: ls $out" || echo "  command: scripts/gpu-container.sh \$OUT LIMIT_S LABEL")"
done
