#!/usr/bin/env bash
# The build enforces the layering (issue 35): a copy of the tree where a
# lower library calls a function of a higher (or sibling) library fails to
# link its layer check, tests/layers' layer_<lib>, with an undefined
# reference to that function; the unmodified copy's same target links
# (the control: the failure is the planted call, not a broken copy).
#
# Usage: layer_break.sh SRCDIR [LIB:FILE:SYMBOL ...]
#   LIB     the library whose layer target is built (layer_LIB)
#   FILE    a source of LIB (relative to SRCDIR) that gets the call
#   SYMBOL  a function defined only above LIB (or in a sibling)
# Without pairs, PAIRS below. For the folder tree, e.g.
#   egressd_nft:egressd/nft/nft_core.c:dns_new  (a sibling)
#   egressd_proto:egressd/proto/dns_wire.c:log_init  (base, above)
set -euo pipefail

PAIRS=(
	# util calling policy: the bottom library reaching up one layer.
	"egressd_util:util/err.c:policy_config_new"
	# a pure codec calling the event loop's logger (base, above it).
	"egressd_proto:egressd/proto/dns_wire.c:log_init"
	# nft calling its sibling dns: siblings never call each other.
	"egressd_nft:egressd/nft/nft_core.c:dns_new"
)

src=$(cd "${1:?usage: layer_break.sh SRCDIR [LIB:FILE:SYMBOL ...]}" && pwd)
shift
[ $# -eq 0 ] || PAIRS=("$@")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/layer_break.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say() { printf 'layer_break: %s\n' "$*"; }

# The copy: what git tracks plus untracked files not ignored (the work in
# progress), or everything but build directories outside a checkout.
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$src" && git ls-files -co --exclude-standard -z |
		while IFS= read -r -d '' f; do
			[ -e "$f" ] && printf '%s\0' "$f"
		done | tar -cf - --null -T -) | tar -xf - -C "$tmp"
else
	(cd "$src" && tar -cf - --exclude='./build*' --exclude=node_modules .) |
		tar -xf - -C "$tmp"
fi
mkdir -p "$tmp/src" && (cd "$tmp" && find . -mindepth 1 -maxdepth 1 \
	! -name src -exec mv {} src/ \;)

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if ! cmake "${gen[@]}" -S "$tmp/src" -B "$tmp/build" >"$tmp/configure.log" \
	2>&1; then
	cat "$tmp/configure.log"
	say "FAIL: the unmodified copy does not configure"
	exit 1
fi

targets=()
for p in "${PAIRS[@]}"; do
	IFS=: read -r lib file sym <<<"$p"
	[ -f "$tmp/src/$file" ] || { say "FAIL: no $file in the tree"; exit 1; }
	targets+=("layer_$lib")
done

# Control: the untouched layer targets link.
if ! cmake --build "$tmp/build" -j2 --target "${targets[@]}" \
	>"$tmp/control.log" 2>&1; then
	tail -40 "$tmp/control.log"
	say "FAIL: control: ${targets[*]} do not build from the unmodified copy"
	exit 1
fi
say "control: ${targets[*]} build from the unmodified copy"

rc=0
for p in "${PAIRS[@]}"; do
	IFS=: read -r lib file sym <<<"$p"
	f=$tmp/src/$file
	cp "$f" "$f.orig"
	# A function of its own with a prototype (-Wmissing-prototypes), and
	# the callee declared where it is used, so the compiler is content
	# and only the linker can object.
	cat >>"$f" <<EOF

void layer_break_probe(void);

void
layer_break_probe(void)
{
	extern void $sym(void);

	$sym();
}
EOF
	log=$tmp/break-$lib.log
	if cmake --build "$tmp/build" -j2 --target "layer_$lib" >"$log" 2>&1
	then
		say "FAIL: $file ($lib) calls $sym, and layer_$lib still links:" \
			"the layering is not enforced"
		rc=1
	elif grep -q "undefined reference to \`$sym'" "$log"; then
		say "ok: $file ($lib) calling $sym: layer_$lib fails to link" \
			"($(grep -m1 -o "undefined reference to \`$sym'" "$log"))"
	else
		tail -30 "$log"
		say "FAIL: layer_$lib failed, but not with an undefined reference" \
			"to $sym (see above)"
		rc=1
	fi
	mv "$f.orig" "$f"
done
exit $rc
