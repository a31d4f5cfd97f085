#!/usr/bin/env python3
"""Every exported name carries its file's prefix (issue 35, STYLE.md).

The exports are the global symbols an object file defines (nm
--defined-only -g), for the production objects of a CMake build directory
(sources under util/, policy/, vault/, egressd/; srctree.objects maps each
object back to its source).

A file's prefix is its basename up to the first "_", or the whole
basename when it has none: policy/policy_binding_match.c exports
policy_*, egressd/nft_build.c nft_*, egressd/http_chunk.c http_*,
util/addr.c addr_*, egressd/webhook.c webhook_*. That is STYLE.md's "one
prefix for every exported name (policy_, vault_, nft_, dns_, proxy_,
tls_, http_, api_, log_)": the prefix names the concept family, and a
file of the family (nft_build.c, nft_ct.c) shares it, so moving a
function between the files of one family never renames it. A symbol is
fine when it starts with PREFIX_ or is PREFIX itself (main.c's main).
Everything else a file defines should be static. Names starting with
"__" are the compiler's (ASan's __odr_asan_gen_*), not the file's.

ALLOWED maps each other exported name to why: where a library forces a
name (none today: main fits the rule), and today's offenders, which issue 35 renames. It only
shrinks: an entry that no file exports any more fails the run with
"remove from allow-list".
Usage: exports.py BUILDDIR"""
import os, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srctree  # noqa: E402

ALLOWED = {
}


def prefix(src):
    base = os.path.basename(src)
    return base[:-2].split("_", 1)[0]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    objs = srctree.objects(sys.argv[1])
    syms = srctree.nm_symbols(objs)
    bad, seen, n = [], set(), 0
    for src in sorted(syms):
        p = prefix(src)
        for s in sorted(syms[src][0]):
            if s.startswith("__"):
                continue
            n += 1
            if s == p or s.startswith(p + "_"):
                continue
            if s in ALLOWED:
                seen.add(s)
                print("%s: %s (allow-listed: %s)" % (src, s, ALLOWED[s]))
                continue
            bad.append("%s: exports %s, not %s_*: rename it or make it "
                       "static" % (src, s, p))
    for s in sorted(set(ALLOWED) - seen):
        bad.append("%s: no file exports it under another prefix: remove "
                   "from allow-list" % s)
    for b in bad:
        print(b)
    print("exports: %d symbols of %d objects; %d allow-listed; %d problems" %
          (n, len(syms), len(ALLOWED), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
