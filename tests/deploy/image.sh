#!/bin/bash
# deploy_image (issue 19 item 2): deploy/Dockerfile's runtime stage built
# as a directory without Docker, and egressd run from it.
#
# The base is a debootstrap minbase of bookworm with the stage's apt-get
# packages included (image_rootfs.sh, cached outside the repository); the
# stage's other steps are replayed as written (dockerfile_replay.py), with
# this build's egressd as the build stage's binary. Then, as a container
# runtime would: the root filesystem read-only, the VOLUME a writable
# directory, the image's ENV, USER 65532, a bounding set of NET_ADMIN
# alone (--cap-drop ALL --cap-add NET_ADMIN), in the test bed's sandbox
# namespace. Checked: every library ldd lists is in the image and every
# package installed for it provides one (nothing missing, nothing extra
# but the CA roots); the file capability; egressd becomes ready and
# enforces (allowed name resolves, other names NXDOMAIN) with exactly
# CAP_NET_ADMIN effective; the HEALTHCHECK command passes while it runs
# and fails once it has stopped. Skipped (77), never passed, when the
# Debian archive cannot be reached for the base, and for sanitizer
# builds (the image carries a plain Release build).
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../e2e/lib/testbed.sh"

[ -x "${EGRESSD_BIN:-}" ] || tb_die "EGRESSD_BIN not set"
# a here-string, not a pipe: grep -q's early exit would SIGPIPE ldd, and
# pipefail would turn the match into "not a sanitizer build" (CI did).
grep -q -e libasan -e libubsan <<<"$(ldd "$EGRESSD_BIN")" &&
    tb_skip "sanitizer build: the image carries a plain build (checked in the plain run)"
[ "$(id -u)" -eq 0 ] || tb_skip "needs root (chroot, namespaces)"
base=$("$here/image_rootfs.sh") || tb_skip "no base tree for the image (see above)"
SRC=${EGRESSD_SRCDIR:-$(cd "$here/../.." && pwd)}

tb_setup

# --- build the runtime stage -------------------------------------------------
R=$TB_DIR/image
cp -a "$base" "$R" && rm -f "$R/.complete" || tb_die "copy $base"
tb_check "the Dockerfile's runtime stage replays" sh -c \
    "python3 '$here/dockerfile_replay.py' build '$SRC/deploy/Dockerfile' runtime \
    '$R' '$SRC' --from 'build:/build/egressd/egressd=$EGRESSD_BIN' \
    >'$TB_DIR/image.json' 2>'$TB_DIR/replay.err' || { cat '$TB_DIR/replay.err'; exit 1; }"
cfg() { python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$TB_DIR/image.json" "$1"; }
BIN=$(cfg 'c["entrypoint"][0]')
VOL=$(cfg 'c["volumes"][0]')
USR=$(cfg 'c["user"]')
mapfile -t PKGS < <(cfg '"\n".join(c["packages"])')
mapfile -t ENVS < <(cfg '"\n".join(k+"="+v for k,v in c["env"].items())')
mapfile -t HC < <(cfg '"\n".join(c["healthcheck"]["test"])')
tb_expect_eq "the image runs egressd as uid:gid 65532:65532" 65532:65532 "$USR"

# --- libraries: all there, none without a reason -------------------------------
lddout=$(chroot "$R" ldd "$BIN" 2>&1)
tb_check_fails "ldd inside the image: no library not found" grep -q 'not found' \
    <<<"$lddout"
libs=$(awk '/=>/ {print $3} /^[[:space:]]*\// {print $1}' <<<"$lddout")
tb_expect_eq "ldd inside the image lists what it lists outside" \
    "$(ldd "$EGRESSD_BIN" | awk '/=>/ {print $1}' | sort | paste -sd' ')" \
    "$(awk '/=>/ {print $1}' <<<"$lddout" | sort | paste -sd' ')"
owners=$(for l in $libs; do
	chroot "$R" dpkg -S "$(chroot "$R" readlink -f "$l")" 2>/dev/null ||
	    chroot "$R" dpkg -S "$l" 2>/dev/null || echo "NONE: $l"
done | cut -d: -f1 | sort -u)
tb_check_fails "every linked library belongs to a package" grep -q NONE <<<"$owners"
extra=()
for p in "${PKGS[@]}"; do
	case $p in
	ca-certificates | libcap2-bin) continue ;;
	esac
	grep -qxF "$p" <<<"$owners" || extra+=("$p")
done
tb_expect_eq "every package the Dockerfile installs provides a linked library (or is the CA roots)" \
    "" "${extra[*]}"
missing=()
essential_deps=$(chroot "$R" dpkg-query -W \
    -f '${Package} ${Essential} ${Pre-Depends}, ${Depends}\n')
for p in $owners; do
	case " ${PKGS[*]} " in *" $p "*) continue ;; esac
	# what the base has for its Essential packages (libc6) needs no line
	grep -E "^[^ ]+ yes .*(^|[ ,|])$p([ ,:(]|\$)" <<<"$essential_deps" \
	    >/dev/null && continue
	missing+=("$p")
done
tb_expect_eq "every library package is the Dockerfile's or the base's own" "" \
    "${missing[*]}"
tb_check "the CA roots are in the image" test -s "$R/etc/ssl/certs/ca-certificates.crt"
tb_check_fails "libcap2-bin is gone again" chroot "$R" dpkg-query -W libcap2-bin
tb_expect_eq "the binary's file capability is cap_net_admin=ep, nothing more" \
    "cap_net_admin=ep" "$(getcap "$R$BIN" | awk '{print $2}')"
tb_expect_eq "the volume belongs to 65532" "65532:65532" \
    "$(stat -c %u:%g "$R$VOL")"

# --- run it as a runtime would --------------------------------------------------
# In a private mount namespace (nothing leaks to the host's): the image's
# root bound read-only, the VOLUME a writable directory of ours, the test
# bed's directory at its own path (log file, policy), minimal /proc.
W=$TB_DIR/volume
mkdir -p "$W" && chown 65532:65532 "$W" && chmod 0750 "$W"
cp -a "$R$VOL/." "$W/"
mkdir -p "$R$TB_DIR"
chown 65532 "$TB_DIR/egressd"
touch "$TB_DIR/egressd/egressd.log" && chown 65532 "$TB_DIR/egressd/egressd.log"
RUNNER=$TB_DIR/in-image
# in-image [--root] CMD...: CMD in the image, as its USER with NET_ADMIN
# alone in the bounding set (or, with --root, as root with no capability),
# in a mount namespace of its own (in-image-ns does the mounts).
printf '#!/bin/sh\nexec unshare --mount --propagation private %q "$@"\n' \
    "$TB_DIR/in-image-ns" >"$RUNNER"
{
	echo '#!/bin/sh'
	echo 'set -e'
	echo 'who="--reuid=65532 --regid=65532 --clear-groups --inh-caps=-all --bounding-set=-all,+net_admin"'
	echo '[ "${1:-}" = --root ] && { who="--inh-caps=-all --bounding-set=-all"; shift; }'
	printf 'R=%q W=%q D=%q V=%q\n' "$R" "$W" "$TB_DIR" "$VOL"
	echo 'mount --bind "$R" "$R"'
	echo 'mount --bind "$W" "$R$V"'
	echo 'mount --bind "$D" "$R$D"'
	echo 'mount -t proc -o nosuid,nodev,noexec proc "$R/proc"'
	echo 'mount -o remount,bind,ro "$R"'
	printf 'exec chroot "$R" /usr/bin/setpriv $who -- /usr/bin/env -i'
	printf ' PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	printf ' %q' "${ENVS[@]}"
	echo ' "$@"'
} >"$TB_DIR/in-image-ns"
chmod 0755 "$RUNNER" "$TB_DIR/in-image-ns"
# tb_start_egressd runs EGRESSD_BIN in the sandbox namespace: the image's
# entrypoint through the runner, the same PID all along (every step execs).
printf '#!/bin/sh\nexec %s %s "$@"\n' "$RUNNER" "$BIN" >"$TB_DIR/egressd-in-image"
chmod 0755 "$TB_DIR/egressd-in-image"
POLICY=$TB_DIR/egressd/policy.yaml
printf 'defaultAction: deny\negress:\n  - {action: allow, target: a.test}\n' >"$POLICY"
chmod 0644 "$POLICY"

tb_check_fails "the runner's root file system is read-only" \
    ip netns exec "$TB_SBX" "$RUNNER" --root /bin/sh -c ': >/usr/probe'
EGRESSD_BIN=$TB_DIR/egressd-in-image tb_start_egressd --policy "$POLICY"
tb_expect_eq "egressd from the image is ready, running as 65532" 65532 \
    "$(awk '/^Uid:/ {print $2}' "/proc/$TB_EGRESSD_PID/status")"
tb_expect_eq "with CAP_NET_ADMIN alone effective" 0000000000001000 \
    "$(awk '/^CapEff:/ {print $2}' "/proc/$TB_EGRESSD_PID/status")"
tb_expect_eq "the policy is in force: a.test resolves" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_expect_match "b.test is denied" 'status: NXDOMAIN' \
    "$(tb_sandbox dig +time=2 +tries=1 b.test A)"
tb_check "the image's HEALTHCHECK passes (${HC[*]})" \
    ip netns exec "$TB_SBX" "$RUNNER" "${HC[@]}"
tb_check "the API socket is in the volume" test -S "$W/api.sock"
tb_stop_egressd TERM
tb_expect_eq "a clean stop" 0 "$TB_EGRESSD_STATUS"
tb_check_fails "and the HEALTHCHECK fails once egressd is gone" \
    ip netns exec "$TB_SBX" "$RUNNER" "${HC[@]}"
tb_finish
