#!/usr/bin/env python3
"""A skipped test is not a passed one (issue 35).

    skips.py --build plain|asan --allow tests/skips.allow JUNIT.xml

Reads ctest's JUnit report (ctest --output-junit) and lists every test
that did not run to the end: exit 77 (SKIP_RETURN_CODE), a skipped cmocka
case (SKIP_REGULAR_EXPRESSION), a disabled test. Each is named with the
reason its output gave. Exits 1 when one of them is not on the allow-list
for this build, 0 otherwise; prints nothing when nothing was skipped.

The allow-list has one entry a line: TEST BUILD REASON, BUILD being plain,
asan or any; '#' starts a comment. An entry whose test ran is reported
(the list stays short and true), never an error: the allow-list permits
a skip, it does not require one.
"""

import argparse
import re
import sys
import xml.etree.ElementTree as ET

BUILDS = ("plain", "asan", "any")
# What a skipping test says about why: the bed's tb_skip and validate.mjs
# ("SKIP ..."), cmocka's per-case line, tests/support's netns notes.
REASON_RE = re.compile(r"^SKIP\b|\[  SKIPPED \] (?!\d+ test)|skipped", re.I)


def load_allow(path):
    allow = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in BUILDS:
                sys.exit(f"{path}:{n}: want TEST BUILD REASON, BUILD one "
                         f"of {', '.join(BUILDS)}")
            allow.setdefault(parts[0], []).append((parts[1], parts[2]))
    return allow


def reason_of(case):
    out = "\n".join(e.text or "" for e in case.iter("system-out"))
    seen = []
    for line in out.splitlines():
        line = line.strip()
        if REASON_RE.search(line) and line not in seen:
            seen.append(line)
    text = "; ".join(seen) or "(no reason printed)"
    return text if len(text) <= 300 else text[:297] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, choices=BUILDS[:2])
    ap.add_argument("--allow", required=True)
    ap.add_argument("junit")
    a = ap.parse_args()
    allow = load_allow(a.allow)
    cases = ET.parse(a.junit).getroot().iter("testcase")
    skipped, ran = [], set()
    for c in cases:
        name = c.get("name")
        s = c.find("skipped")
        if s is None:
            ran.add(name)
        else:
            skipped.append((name, s.get("message") or "", reason_of(c)))
    bad = 0
    for name, how, why in skipped:
        ok = [r for b, r in allow.get(name, ()) if b in (a.build, "any")]
        if ok:
            print(f"  skipped ({a.build}, allowed): {name}: {ok[0]}")
        else:
            bad += 1
            print(f"  SKIPPED ({a.build}, NOT ALLOWED): {name} [{how}]: "
                  f"{why}")
    for name in sorted(ran & allow.keys()):
        if any(b in (a.build, "any") for b, _ in allow[name]):
            print(f"  note ({a.build}): {name} is on the allow-list and ran")
    if bad:
        print(f"  {bad} skipped test(s) not on {a.allow}: a skip is not a "
              f"pass (fix the machine, ./run deps, or add TEST BUILD "
              f"REASON)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
