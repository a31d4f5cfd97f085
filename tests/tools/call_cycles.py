#!/usr/bin/env python3
"""No cycle in the call graph between production files (issue 35).

The include-cycle check (include_cycles.py) sees only the headers a file
includes; a cycle hidden behind one shared internal header (the old nft_int.h
declaring what nft_ct.c, nft_ctdump.c and nft_live.c call of each other)
shows only in the calls. Here file A uses file B when an undefined symbol
of A's object is defined (global) by B's object (nm, on the production
objects of a CMake build directory; srctree.objects maps them back to
their sources), within one library and across libraries alike. A cycle
(a strongly connected component of more than one file) is printed with
the symbols on each of its edges.

KNOWN lists the cycles tracked today, by the basenames of their files
(so an entry survives a move to a folder), each with why; the run fails
on any other cycle, and also when a known one is gone or has changed, so
the entry goes (or shrinks) with the fix and cannot hide a new cycle.
Usage: call_cycles.py BUILDDIR"""
import os, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srctree  # noqa: E402
from include_cycles import cycles  # noqa: E402

KNOWN = {
}


def graph(syms):
    """{file: {file it calls: symbols}}"""
    owner = {}
    for src, (d, _) in syms.items():
        for s in d:
            owner.setdefault(s, set()).add(src)
    edges = dict((src, {}) for src in syms)
    for src, (_, u) in syms.items():
        for s in u:
            for dst in owner.get(s, ()):
                if dst != src:
                    edges[src].setdefault(dst, set()).add(s)
    return edges


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    syms = srctree.nm_symbols(srctree.objects(sys.argv[1]))
    edges = graph(syms)
    bad = 0
    found = {}
    for comp in cycles(dict((k, set(v)) for k, v in edges.items())):
        key = tuple(sorted(os.path.basename(f) for f in comp))
        found[key] = comp
    for key in sorted(found):
        comp = found[key]
        if key in KNOWN:
            print("known call cycle among %s (tracked: %s)" %
                  (", ".join(comp), KNOWN[key]))
        else:
            bad += 1
            print("call cycle among %s:" % ", ".join(comp))
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print("    %s -> %s: %s" % (a, b,
                                                ", ".join(sorted(edges[a][b]))))
    for key in sorted(set(KNOWN) - set(found)):
        bad += 1
        print("known call cycle among %s is gone or changed: remove it from "
              "KNOWN (or update it to the cycle above)" % ", ".join(key))
    print("call_cycles: %d files, %d edges; %d cycles (%d known); "
          "%d problems" % (len(edges), sum(len(v) for v in edges.values()),
                           len(found), len(KNOWN), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
