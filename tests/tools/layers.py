#!/usr/bin/env python3
"""Include layering of the production folders (issue 35, STYLE.md).

A file (.c or .h) in folder X may include the project headers of X and of
the folders below X in srctree.LAYERS, never of a folder above it nor of
a sibling (another folder of X's row: egressd/nft never includes
egressd/dns). A folder of production code missing from LAYERS is an
error too, so the table stays complete. A file's folder is its directory:
on today's flat tree egressd/ is one folder (egressd_core) above vault,
policy and util, and the rows of the new folders have nothing to check
until the folders exist.

SYSTEM lists the system headers a folder may not include: the pure codecs
of egressd/proto link util and zlib only (no libevent, no OpenSSL's ssl,
no c-ares, no netlink); vault and policy have no sockets or event loop. A
row's rule holds for every folder below it too (what a lower library
links, every library above it links).

ALLOWED lists tolerated violations as (file, included header): reason;
shrink-only like the other checks (an entry that no longer occurs fails
with "remove from allow-list").

  layers.py SRCDIR             the check (ctest unit_layers)
  layers.py --self-test        a tiny temporary tree with each kind of
                               violation, which must all be caught"""
import os, re, shutil, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srctree  # noqa: E402

# Folder: include paths (a prefix ending in "/" is a directory) it and
# every folder below it may not include.
SYSTEM = {
    "egressd/proto": ["event2/", "openssl/ssl.h", "ares.h", "nftnl/",
                      "libnftnl/", "libmnl/"],
    "vault": ["event2/", "ares.h", "nftnl/", "libnftnl/", "libmnl/"],
}

ALLOWED = {
}

INC = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def forbidden_system(folder):
    """System include prefixes the folder may not use, with the row
    whose rule forbids each."""
    out = []
    lvl = srctree.LEVEL.get(folder)
    for f, heads in sorted(SYSTEM.items(), key=lambda r: srctree.LEVEL[r[0]]):
        if lvl is not None and srctree.LEVEL.get(f, -1) >= lvl:
            out += [(h, f) for h in heads]
    return out


def sys_match(inc, head):
    return inc.startswith(head) if head.endswith("/") else inc == head


def check(root, place=None):
    """Violations as (file, include, message); place(rel) is the folder a
    file is judged in (its directory by default)."""
    place = place or srctree.folder_of
    files = srctree.sources(root, (".c", ".h"))
    have = set(files)
    out = []
    for rel in files:
        x = place(rel)
        if x not in srctree.LEVEL:
            out.append((rel, "", "folder %s is not in srctree.LAYERS: add "
                        "it to its row" % x))
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            incs = INC.findall(f.read())
        for kind, inc in incs:
            if inc in have:
                y = place(inc)
                ok = srctree.may_use(x, y)
                if ok is None:
                    out.append((rel, inc, "folder %s is not in "
                                "srctree.LAYERS" % y))
                elif not ok:
                    what = ("its sibling" if srctree.LEVEL[y] ==
                            srctree.LEVEL[x] else "a higher folder")
                    out.append((rel, inc, "%s (%s) includes %s %s (%s)" %
                                (x, srctree.LIBRARY[x], what, y,
                                 srctree.LIBRARY[y])))
                continue
            for head, row in forbidden_system(x):
                if sys_match(inc, head):
                    out.append((rel, inc, "%s may not include <%s> (rule "
                                "of %s)" % (x, inc, row)))
                    break
    return out


def report(viol):
    bad, seen = 0, set()
    for rel, inc, msg in viol:
        if (rel, inc) in ALLOWED:
            seen.add((rel, inc))
            print("%s: %s (allow-listed: %s)" % (rel, msg,
                                                 ALLOWED[(rel, inc)]))
            continue
        bad += 1
        print("%s: %s" % (rel, msg))
    for k in sorted(set(ALLOWED) - seen):
        bad += 1
        print("%s: include of %s no longer a violation: remove from "
              "allow-list" % k)
    return bad


def self_test():
    """Each kind of violation in a tiny tree, and what must pass."""
    tree = {
        # allowed: down the layers, own folder, system headers in reach
        "util/u.h": "#include <stdint.h>\n",
        "egressd/proto/w.c": '#include "util/u.h"\n#include <zlib.h>\n',
        "egressd/nft/n.h": '#include "vault/v.h"\n',
        "egressd/nft/n.c": '#include "egressd/nft/n.h"\n'
                           '#include <libnftnl/rule.h>\n',
        "egressd/daemon/d.c": '#include "egressd/nft/n.h"\n'
                              '#include "egressd/dns/s.h"\n',
        "egressd/dns/s.h": "#include <ares.h>\n",
        "vault/v.h": '#include "policy/p.h"\n',
        "policy/p.h": '#include "util/u.h"\n',
        # violations
        "util/up.c": '#include "policy/p.h"\n',
        "egressd/nft/sib.c": '#include "egressd/dns/s.h"\n',
        "egressd/proto/ev.c": "#include <event2/event.h>\n",
        "egressd/proto/ssl.c": "# include <openssl/ssl.h>\n",
        "egressd/proto/mnl.c": "#include <libmnl/libmnl.h>\n",
        "util/ares.c": "#include <ares.h>\n",
        "vault/up.c": '#include "egressd/base/b.h"\n',
        "egressd/base/b.h": "",
        "egressd/stray/z.c": "",
    }
    want = set([
        ("util/up.c", "policy/p.h"),
        ("egressd/nft/sib.c", "egressd/dns/s.h"),
        ("egressd/proto/ev.c", "event2/event.h"),
        ("egressd/proto/ssl.c", "openssl/ssl.h"),
        ("egressd/proto/mnl.c", "libmnl/libmnl.h"),
        ("util/ares.c", "ares.h"),
        ("vault/up.c", "egressd/base/b.h"),
        ("egressd/stray/z.c", ""),
    ])
    d = tempfile.mkdtemp(prefix="layers-self-test.")
    try:
        for rel, text in tree.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        viol = check(d)
    finally:
        shutil.rmtree(d)
    got = set((rel, inc) for rel, inc, _ in viol)
    for rel, inc, msg in viol:
        print("caught: %s: %s" % (rel, msg))
    for k in sorted(want - got):
        print("self-test: MISSED %s including %s" % k)
    for k in sorted(got - want):
        print("self-test: FALSE ALARM %s including %s" % k)
    ok = got == want
    print("layers self-test: %s (%d violations planted, %d caught)" %
          ("ok" if ok else "FAILED", len(want), len(want & got)))
    return 0 if ok else 1


def main():
    a = sys.argv[1:]
    if a == ["--self-test"]:
        return self_test()
    if len(a) != 1:
        sys.exit(__doc__)
    viol = check(a[0])
    bad = report(viol)
    print("layers: %d files; %d problems" %
          (len(srctree.sources(a[0], (".c", ".h"))), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
