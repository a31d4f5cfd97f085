#!/usr/bin/env python3
"""No production .c over 1,200 lines, no function over 80 (issue 35).

Production files are those under util/, policy/, vault/ and egressd/ (any
depth; not tests/, fuzz/, bench/). A file's size is its line count. A
function is measured from the first line of its signature to its closing
brace: the code is clang-formatted (.clang-format), so a function body
opens with "{" alone at column 0 and closes where its braces balance
(comments and literals skipped), and the signature is the run of lines just above the "{" back to a blank
line, a comment, a preprocessor line or the end of a declaration. Both
.c files and headers (static inline functions) are measured for functions.

FILES and FUNCTIONS allow the offenders of today, each at its current
size, so the test passes while the tree is rebuilt. The lists only
shrink: an entry that grows past its size fails, and one that is under
the limit (or gone) fails with "remove from allow-list", so the entry
goes with the split that fixed it.
Usage: sizes.py SRCDIR"""
import os, re, sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srctree  # noqa: E402

MAX_FILE = 1200
MAX_FUNC = 80

# Allow-lists, shrink-only (empty since issue 35; an entry needs its
# reason): file basename -> its line count; function name -> its length.
FILES = {}
FUNCTIONS = {}

NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# What brace counting skips: comments, string and character literals.
NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'
                   r"'(?:\\.|[^'\\\n])*'", re.S)


def blank(m):
    """A comment or literal as spaces, its newlines kept."""
    return re.sub(r"[^\n]", " ", m.group(0))


def drop_attributes(sig):
    """sig without its __attribute__((...)) clauses."""
    while True:
        i = sig.find("__attribute__")
        if i < 0:
            return sig
        j = sig.find("(", i)
        depth = 0
        for k in range(j, len(sig)):
            depth += {"(": 1, ")": -1}.get(sig[k], 0)
            if depth == 0:
                break
        sig = sig[:i] + sig[k + 1:]


def functions(path):
    """(name, first line, length) of each function defined in path."""
    with open(path, errors="replace") as f:
        text = f.read()
    lines = text.split("\n")
    code = NOISE.sub(blank, text).split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != "{":
            i += 1
            continue
        start = i
        while start > 0:
            s = lines[start - 1].strip()
            if (s == "" or s.startswith(("#", "/*", "*", "//")) or
                    s.endswith(("*/", ";", "}", "{"))):
                break
            start -= 1
        sig = drop_attributes(" ".join(code[j].strip()
                                       for j in range(start, i)))
        names = NAME.findall(sig)
        # The body ends where its braces balance (a block at column 0,
        # as clang-format leaves one after a label, does not end it).
        depth, end = 0, i
        while end < len(lines):
            depth += code[end].count("{") - code[end].count("}")
            if depth <= 0:
                break
            end += 1
        if names and start < i:
            out.append((names[0], start + 1, end - start + 1))
        i = end + 1
    return out


def check(root):
    bad = []
    big_files, big_funcs, where = {}, {}, {}
    nfiles = nfuncs = 0
    for rel in srctree.sources(root, (".c", ".h")):
        path = os.path.join(root, rel)
        if rel.endswith(".c"):
            nfiles += 1
            with open(path, errors="replace") as f:
                n = f.read().count("\n")
            b = os.path.basename(rel)
            if n > MAX_FILE or b in FILES:
                big_files[b] = max(n, big_files.get(b, 0))
                where[b] = rel
        for name, line, n in functions(path):
            nfuncs += 1
            if n > MAX_FUNC or name in FUNCTIONS:
                if n > big_funcs.get(name, 0):
                    big_funcs[name] = n
                    where[name] = "%s:%d" % (rel, line)

    def judge(kind, found, allowed, limit, unit):
        for k in sorted(found):
            n = found[k]
            if n > limit and k not in allowed:
                bad.append("%s: %s %s is %d %s (limit %d)" %
                           (where[k], kind, k, n, unit, limit))
            elif k in allowed and n > allowed[k]:
                bad.append("%s: %s %s grew to %d %s (allow-list: %d, "
                           "limit %d)" % (where[k], kind, k, n, unit,
                                          allowed[k], limit))
            elif k in allowed and n <= limit:
                bad.append("%s: %s %s is %d %s, under the limit: remove "
                           "from allow-list" % (where[k], kind, k, n, unit))
            elif k in allowed:
                print("%s: %s %s is %d %s (allow-listed, limit %d)" %
                      (where[k], kind, k, n, unit, limit))
        for k in sorted(set(allowed) - set(found)):
            bad.append("%s %s not found: remove from allow-list" % (kind, k))

    judge("file", big_files, FILES, MAX_FILE, "lines")
    judge("function", big_funcs, FUNCTIONS, MAX_FUNC, "lines")
    for b in bad:
        print(b)
    print("sizes: %d files, %d functions; %d allow-listed files, %d "
          "allow-listed functions; %d problems" %
          (nfiles, nfuncs, len(FILES), len(FUNCTIONS), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(check(sys.argv[1]))
