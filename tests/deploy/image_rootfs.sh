#!/bin/bash
# image_rootfs.sh: print the directory holding deploy/Dockerfile's runtime
# FROM with its apt-get packages (a debootstrap minbase of bookworm with
# them included), building it first if it is not cached. The cache lives
# outside the repository, in $EGRESSD_IMAGE_CACHE (/var/cache/egressd-test),
# one tree per package list; a test copies it before replaying the
# Dockerfile's other steps. Exit 77, saying why, when it cannot be had
# (no debootstrap, not root, the Debian archive unreachable, too slow):
# the image test is then skipped, never passed.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${EGRESSD_SRCDIR:-$(cd "$here/../.." && pwd)}
cache=${EGRESSD_IMAGE_CACHE:-/var/cache/egressd-test}
limit=${EGRESSD_DEBOOTSTRAP_TIMEOUT:-240}
no() { echo "image_rootfs: $*" >&2; exit 77; }

[ "$(id -u)" -eq 0 ] || no "debootstrap needs root"
command -v debootstrap >/dev/null || no "debootstrap not installed (./run deps)"
pkgs=$(python3 "$here/dockerfile_replay.py" packages "$src/deploy/Dockerfile" \
    runtime | sort -u | paste -sd, -) || no "cannot read deploy/Dockerfile"
[ -n "$pkgs" ] || no "deploy/Dockerfile's runtime stage installs nothing?"
key=$(printf 'bookworm minbase %s\n' "$pkgs" | sha256sum | cut -c1-16)
tree=$cache/rootfs-$key
[ -f "$tree/.complete" ] && { echo "$tree"; exit 0; }

mkdir -p "$cache" || no "cannot create $cache"
exec 9>"$cache/.lock"
flock -w "$limit" 9 || no "$cache is locked by another build"
[ -f "$tree/.complete" ] && { echo "$tree"; exit 0; }
# The machine's own Debian mirror, as apt is configured.
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources \
    2>/dev/null)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit}' \
    /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || no "no Debian mirror in the apt sources"
tmp=$cache/.rootfs-$key.$$
rm -rf "$tmp"
echo "image_rootfs: debootstrap --variant=minbase bookworm (at most ${limit}s, once)" >&2
if ! timeout "$limit" debootstrap --variant=minbase --include="$pkgs" \
    bookworm "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1; then
	rc=$?
	rm -rf "$tmp"
	[ "$rc" -eq 124 ] && no "debootstrap did not finish in ${limit}s"
	no "debootstrap failed (archive unreachable?): $(tail -n 2 "$cache/debootstrap.log" | tr '\n' ' ')"
fi
rm -rf "$tmp/var/cache/apt/archives/"*.deb
touch "$tmp/.complete"
rm -rf "$tree"
mv "$tmp" "$tree"
echo "$tree"
