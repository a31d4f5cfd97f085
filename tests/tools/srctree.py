"""The source tree as the checks in tests/tools see it (issue 35).

One place for what the checks share: which folders hold production code,
the layering of the folders (LAYERS, the one table to edit as the tree
moves), and how an object file CMake built maps back to its source.

A file's folder is its directory relative to the source root
("egressd/nft/nft_build.c" is in "egressd/nft", today's flat
"egressd/nft_build.c" in "egressd"); nothing else is derived from names,
so the same checks run on the flat tree and on the folder tree.
Python 3 stdlib and binutils (nm) only."""
import os, re, subprocess

# Top-level folders of production code; tests, fuzz and bench are not.
PROD_ROOTS = ("util", "policy", "vault", "egressd")

# The layering, lowest row first: (folder, CMake library). A folder may
# use (include, call, link) the folders of lower rows and its own, never
# another folder of its own row (the siblings).
# A row's folders need not exist: a check has nothing to check there.
LAYERS = [
    [("util", "egressd_util")],
    [("egressd/proto", "egressd_proto")],
    [("policy", "egressd_policy")],
    [("vault", "egressd_vault")],
    [("egressd/base", "egressd_base")],
    [("egressd/nft", "egressd_nft"), ("egressd/dns", "egressd_dns"),
     ("egressd/proxy", "egressd_proxy"), ("egressd/api", "egressd_api"),
     ("egressd/nfq", "egressd_nfq")],
    [("egressd/daemon", "egressd_daemon")],
]

LEVEL = {}
LIBRARY = {}
for _n, _row in enumerate(LAYERS):
    for _folder, _lib in _row:
        LEVEL[_folder] = _n
        LIBRARY[_folder] = _lib


def folder_of(rel):
    """The folder of a path relative to the source root."""
    return os.path.dirname(rel.replace(os.sep, "/"))


def is_production(rel):
    return rel.replace(os.sep, "/").split("/")[0] in PROD_ROOTS


def may_use(src_folder, dst_folder):
    """True when a file of src_folder may use one of dst_folder; None when
    either folder is not in LAYERS (nothing to say)."""
    if src_folder not in LEVEL or dst_folder not in LEVEL:
        return None
    if src_folder == dst_folder:
        return True
    return LEVEL[dst_folder] < LEVEL[src_folder]


# Programs for the kernel's BPF machine (egressd/nfq/bpf): compiled by
# clang -target bpf and loaded into the kernel, never linked into
# egressd, so no check of its objects, calls or layers applies to them.
BPF_SUFFIX = ".bpf.c"


def sources(root, exts=(".c",)):
    """Production files under root, as sorted paths relative to it."""
    out = []
    for top in PROD_ROOTS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for f in files:
                if f.endswith(exts) and not f.endswith(BPF_SUFFIX):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(p.replace(os.sep, "/") for p in out)


def cmake_source_dir(builddir):
    with open(os.path.join(builddir, "CMakeCache.txt"), errors="replace") as f:
        for line in f:
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                return line.split("=", 1)[1].strip()
    raise SystemExit("%s: no CMAKE_HOME_DIRECTORY in CMakeCache.txt" %
                     builddir)


OBJ = re.compile(r"^(.*?)/?CMakeFiles/([^/]+)\.dir/(.+)\.o$")


def objects(builddir):
    """Production object files of a CMake build: a list of (object path,
    source path relative to the source root, target). CMake puts the
    object of DIR/sub/x.c of a target declared in DIR/CMakeLists.txt at
    BUILDDIR/DIR/CMakeFiles/<target>.dir/sub/x.c.o ("__" standing for
    ".."). A source built into several targets is listed once; an object
    whose source is gone (a stale build directory) is left out, and a
    production source without an object is an error: the check would
    otherwise pass on what it never saw."""
    srcdir = cmake_source_dir(builddir)
    out, seen = [], set()
    for d, dirs, files in os.walk(builddir):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith(".c.o"):
                continue
            p = os.path.join(d, f)
            m = OBJ.match(os.path.relpath(p, builddir).replace(os.sep, "/"))
            if m is None:
                continue
            rel = "/".join(x for x in m.group(3).split("/")
                           if x not in ("", "."))
            rel = rel.replace("__/", "../")
            src = os.path.normpath(os.path.join(m.group(1), rel))
            src = src.replace(os.sep, "/")
            if (not is_production(src) or src in seen or
                    not os.path.isfile(os.path.join(srcdir, src))):
                continue
            seen.add(src)
            out.append((p, src, m.group(2)))
    missing = sorted(set(sources(srcdir)) - seen)
    if missing:
        raise SystemExit("%s: no object file for %s (build first)" %
                         (builddir, ", ".join(missing)))
    return out


def nm_symbols(objs):
    """{source: (defined global symbols, undefined symbols)} for the
    (object, source, target) triples of objects()."""
    res = {}
    by_obj = {}
    for o, src, _ in objs:
        res[src] = (set(), set())
        by_obj[o] = src
    paths = list(by_obj)
    for i in range(0, len(paths), 200):
        chunk = paths[i:i + 200]
        out = subprocess.run(["nm", "-A", "-g", "-P"] + chunk, check=True,
                             stdout=subprocess.PIPE,
                             universal_newlines=True).stdout
        for line in out.splitlines():
            # "file.o: sym T 0000 0010" (POSIX format, -A: "file.o: ")
            head, _, rest = line.partition(": ")
            f = rest.split()
            if len(f) < 2 or head not in by_obj:
                continue
            sym, kind = f[0], f[1]
            d, u = res[by_obj[head]]
            if kind == "U":
                u.add(sym)
            elif kind not in ("w", "v"):
                d.add(sym)
    return res
