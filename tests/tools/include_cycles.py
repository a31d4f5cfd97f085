#!/usr/bin/env python3
"""No include cycle among the modules of one library (issue #15).

A module is a .c/.h pair (one concept per pair) with its internal header
X_int.h, if any; module X depends on module Y when one of X's files
includes "lib/Y.h" (or "lib/Y_int.h") of the same library. A library is
a folder of production code (util, policy, egressd/nft; srctree.py), so
the check runs on the flat tree and on the folder tree alike. Cycles
hidden behind one shared header show in call_cycles.py. A cycle (X
needs Y needs X) means the two are one concept split in two, or a
layering mistake: it fails the test run, naming the cycle.

KNOWN lists the cycles that exist and are tracked, each with why; the
run fails when any other appears, and also when a known one is gone (so
the entry goes with the fix and cannot hide a new cycle).
Usage: include_cycles.py SRCDIR [FOLDER...]"""
import os, re, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srctree  # noqa: E402

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

KNOWN = set([
    # None today. An entry is (library, (module, ...)) with a comment
    # saying why the cycle is tolerated and how it would be broken.
])


def module(f):
    m = f[:-2]
    return m[:-4] if m.endswith("_int") else m


def graph(root, lib):
    d = os.path.join(root, lib)
    mods, edges = set(), {}
    files = [f for f in sorted(os.listdir(d)) if f.endswith((".c", ".h"))]
    for f in files:
        mods.add(module(f))
    for m in mods:
        edges[m] = set()
    for f in files:
        m = module(f)
        for inc in INC.findall(open(os.path.join(d, f), errors="replace").read()):
            folder, base = os.path.dirname(inc), os.path.basename(inc)
            if folder == lib and base.endswith(".h"):
                y = module(base)
                if y != m and y in mods:
                    edges[m].add(y)
    return edges


def cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    root = sys.argv[1]
    # Every folder of production code (egressd/nft as well as the flat
    # egressd of today): each is one library.
    libs = sys.argv[2:] or sorted(set(
        srctree.folder_of(f) for f in srctree.sources(root, (".c", ".h"))))
    bad = 0
    for lib in libs:
        if not os.path.isdir(os.path.join(root, lib)):
            print("%s: no such library folder" % lib)
            bad += 1
            continue
        e = graph(root, lib)
        found = set((lib, tuple(c)) for c in cycles(e))
        for k in sorted(found - KNOWN):
            bad += 1
            print("%s: include cycle among %s" % (lib, ", ".join(k[1])))
        for k in sorted(KNOWN - found):
            if k[0] == lib:
                bad += 1
                print("%s: known cycle among %s is gone: remove it from "
                      "KNOWN" % (lib, ", ".join(k[1])))
        for k in sorted(found & KNOWN):
            print("%s: known cycle among %s (tracked)" % (lib, ", ".join(k[1])))
        print("%s: %d modules, %d dependencies" %
              (lib, len(e), sum(len(v) for v in e.values())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
