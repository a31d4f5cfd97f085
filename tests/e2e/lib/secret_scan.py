#!/usr/bin/python3
"""Looks for a credential in what a client received, in every form.

  secret_scan.py [--basic] [--run N] KEYFILE [FILE...]

KEYFILE holds the credential's value (its first line, as egressd reads a
file source). FILEs (stdin without any) are what the sandbox got: saved
responses, a raw client's bytes. Exit 0 when no form of the value is in
any of them, 1 when one is (each finding on a line of its own: the form,
the file and the offset; never the value), 2 on a usage error.

Forms, of the value and, with --basic (the value is a Basic credential,
base64 of "user:password"), of the decoded "user:password" and of the
password alone: every form lib/canary.py's forms() renders (raw, JSON
escapes with and without "\\/", percent-encoding in both hex cases and
with "+" for space, hex in both cases, base64 and base64url at each of
the three alignments a value can have inside a longer encoded string),
found whole or as any run of N (default 12) characters of one of them: a
slice, a page, a truncated quote. Each file is also searched with its CR
and LF bytes removed, which joins base64 wrapped at 76 columns (MIME).

A run of N characters of a form is 12 characters by default because
that is the bound issue 34 sets for what the redactor must mask; values
are random per run, so a hit is a leak, never a coincidence (a run of
12 base64 characters is 72 random bits, of 12 hex digits 48).
"""

import base64
import binascii
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from canary import forms  # noqa: E402

RUN_DEFAULT = 12
FILE_BYTES_MAX = 64 << 20


def values(v, basic):
    out = [("value", v)]
    if basic:
        try:
            dec = base64.b64decode(v, validate=True).decode("latin-1")
        except (binascii.Error, ValueError):
            sys.stderr.write("secret_scan.py: --basic: not base64\n")
            sys.exit(2)
        out.append(("user:password", dec))
        if ":" in dec:
            out.append(("password", dec.split(":", 1)[1]))
    return out


def needles(v, basic, run):
    """{bytes: label} of whole forms, and {run bytes: label} of pieces."""
    whole, pieces = {}, {}
    for vname, val in values(v, basic):
        for fname, f in forms(val):
            if fname == "part":
                continue  # canary.py's own windows; ours follow
            label = "%s %s" % (vname, fname)
            whole.setdefault(f, label)
            for i in range(0, len(f) - run + 1):
                pieces.setdefault(f[i:i + run], label)
    return whole, pieces


def scan(data, whole, pieces, run):
    """[(label, offset)], the whole forms first, one finding per label."""
    hits, seen = [], set()
    for f, label in whole.items():
        i = data.find(f)
        if i >= 0 and label not in seen:
            seen.add(label)
            hits.append((label, i))
    for i in range(0, len(data) - run + 1):
        label = pieces.get(data[i:i + run])
        if label is not None and label + " run" not in seen:
            seen.add(label + " run")
            hits.append(("%s, a run of %d" % (label, run), i))
    return hits


def main(argv):
    args = argv[1:]
    basic, run = False, RUN_DEFAULT
    while args and args[0].startswith("--"):
        if args[0] == "--basic":
            basic = True
            args = args[1:]
        elif args[0] == "--run" and len(args) > 1 and args[1].isdigit():
            run = max(4, int(args[1]))
            args = args[2:]
        else:
            sys.stderr.write("secret_scan.py: usage: see the source\n")
            return 2
    if not args:
        sys.stderr.write("secret_scan.py: usage: see the source\n")
        return 2
    with open(args[0], encoding="utf-8") as f:
        v = f.readline().rstrip("\n")
    whole, pieces = needles(v, basic, run)
    found = 0
    for path in args[1:] or ["-"]:
        if path == "-":
            data = sys.stdin.buffer.read(FILE_BYTES_MAX)
        else:
            with open(path, "rb") as f:
                data = f.read(FILE_BYTES_MAX)
        hits = scan(data, whole, pieces, run)
        joined = data.replace(b"\r", b"").replace(b"\n", b"")
        if joined != data:
            labels = {h[0] for h in hits}
            hits += [("%s (CR/LF removed)" % label, i)
                     for label, i in scan(joined, whole, pieces, run)
                     if label not in labels]
        for label, i in hits:
            print("secret found: %s in %s at byte %d" % (label, path, i))
        found += len(hits)
    if found == 0:
        print("no form of the secret, nor %d characters of one, in %s" %
              (run, " ".join(args[1:]) or "stdin"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
