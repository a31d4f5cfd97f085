#!/bin/bash
# deploy_manpage: docs/egressd.8 and docs/operations.md name every flag and
# every variable egressd/daemon/config.c accepts and state every value of
# egressd/base/defaults.h, and the man page renders without a groff warning.
set -u -o pipefail
src=${EGRESSD_SRCDIR:?}
page=$src/docs/egressd.8
rc=0 n=0
flags=$(grep -oE '^ *(CF_(KEY|TRUE|PORT)\(|\{)"[a-z][a-z-]+"' "$src/egressd/daemon/config.c" |
    grep -oE '"[a-z-]+"' | tr -d '"')
vars=$(grep -oE '\{"(OPENSANDBOX|EGRESSD)_[A-Z0-9_]+"' "$src/egressd/daemon/config.c" | tr -d '{"')
# the reference's newer settings (config_compat.c names them in #defines)
vars="$vars $(grep -oE '^#define ENV_[A-Z_]+ +"OPENSANDBOX_[A-Z0-9_]+"' \
    "$src/egressd/daemon/config_compat.c" | grep -oE 'OPENSANDBOX_[A-Z0-9_]+')"
# Every number and path of egressd/base/defaults.h (defaults and the ranges of
# settings): changing a default without the docs fails here.
vals=$(sed -nE 's%^#define EGRESSD_[A-Z0-9_]+ +("[^"]*"|[0-9][0-9a-fx]*)u?( +/[*].*)?$%\1%p' \
    "$src/egressd/base/defaults.h" | tr -d '"')
[ "$(wc -w <<<"$flags")" -ge 20 ] && [ "$(wc -w <<<"$vars")" -ge 30 ] ||
    { echo "FAIL: could not read the flag and variable tables of config.c"; exit 1; }
[ "$(wc -w <<<"$vals")" -ge 12 ] ||
    { echo "FAIL: could not read the values of defaults.h"; exit 1; }
for doc in "$page" "$src/docs/operations.md"; do
	text=$(sed 's/\\-/-/g' "$doc")
	for f in $flags; do
		n=$((n + 1))
		grep -qE -- "(^|[^a-z-])--$f([^a-z-]|\$)" <<<"$text" ||
		    { echo "FAIL: --$f not in ${doc#"$src"/}"; rc=1; }
	done
	for v in $vars; do
		n=$((n + 1))
		grep -qw -- "$v" <<<"$text" ||
		    { echo "FAIL: $v not in ${doc#"$src"/}"; rc=1; }
	done
	for v in $vals; do
		n=$((n + 1))
		grep -qE -- "(^|[^0-9A-Za-z/])$v([^0-9A-Za-z/]|\$)" <<<"$text" ||
		    { echo "FAIL: default $v (defaults.h) not in ${doc#"$src"/}"; rc=1; }
	done
done
# groff (groff-base, a ./run dependency) renders the page; without it the
# rendering is not checked, which is a failure, not a silent pass
n=$((n + 1))
if command -v groff >/dev/null; then
	w=$(groff -man -ww -z "$page" 2>&1)
	[ -z "$w" ] || { echo "FAIL: groff: $w"; rc=1; }
else
	echo "FAIL: groff not installed (./run deps): the page is not rendered"
	rc=1
fi
echo "docs/egressd.8, docs/operations.md: $n names and the rendering checked, rc=$rc"
exit $rc
