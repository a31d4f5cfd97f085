#!/usr/bin/env python3
"""Replays one stage of deploy/Dockerfile into a directory, without Docker.

  dockerfile_replay.py packages DOCKERFILE STAGE
      the packages the stage's apt-get install names, one a line
  dockerfile_replay.py build DOCKERFILE STAGE ROOTFS SRCDIR [--from STAGE:PATH=FILE]...
      replay the stage's steps into ROOTFS, which must already hold its
      FROM (a debootstrap minbase of the same Debian release, with the
      packages above included: the apt-get step is checked, not run, since
      the archive is what debootstrap already fetched from); print the
      image's configuration (ENV, USER, VOLUME, HEALTHCHECK, ENTRYPOINT,
      CMD) as JSON

RUN runs as `chroot ROOTFS /bin/sh -c CMD` (Docker's shell form), with the
stage's ENV so far. COPY copies from SRCDIR, or for --from=STAGE the file
mapped with --from, as root:root with the source's mode, as Docker does.
An instruction it does not know is an error: the test must not pass over
a step the image would run.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

KNOWN_FROM = {"debian:12-slim": "bookworm"}


def instructions(path):
    """(keyword, argument text, line number) of each instruction."""
    out, cur, start = [], "", 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.rstrip("\n")
            if not cur and (not s.strip() or s.lstrip().startswith("#")):
                continue
            if cur and s.lstrip().startswith("#"):
                continue  # comment inside a continued instruction
            if not cur:
                start = n
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            cur += s
            kw, _, rest = cur.strip().partition(" ")
            out.append((kw.upper(), rest.strip(), start))
            cur = ""
    return out


def stage(path, name):
    """The stage's FROM image and its instructions."""
    steps, image, inside = [], None, False
    for kw, arg, n in instructions(path):
        if kw == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arg, re.I)
            inside = m is not None and m.group(2) == name
            if inside:
                image = m.group(1)
            continue
        if inside:
            steps.append((kw, arg, n))
    if image is None:
        sys.exit(f"{path}: no stage {name}")
    return image, steps


def apt_packages(cmd):
    """The packages of an `apt-get install` in a RUN, else None."""
    m = re.search(r"apt-get install((?:\s+(?!&&)\S+)+)", cmd)
    if not m:
        return None
    return [w for w in m.group(1).split() if not w.startswith("-")]


def json_or_shell(arg):
    arg = arg.strip()
    if arg.startswith("["):
        return json.loads(arg)
    return ["/bin/sh", "-c", arg]


def parse_env(arg):
    if "=" not in arg.split()[0]:
        k, _, v = arg.partition(" ")
        return {k: v.strip()}
    return dict(w.split("=", 1) for w in shlex.split(arg))


def build(dockerfile, name, rootfs, srcdir, froms):
    image, steps = stage(dockerfile, name)
    if image not in KNOWN_FROM:
        sys.exit(f"{dockerfile}: FROM {image}: only {list(KNOWN_FROM)} can be replayed")
    cfg = {"from": image, "release": KNOWN_FROM[image], "env": {}, "user": "0",
           "volumes": [], "healthcheck": None, "entrypoint": None, "cmd": None,
           "expose": [], "packages": []}
    for kw, arg, n in steps:
        where = f"{dockerfile}:{n}: {kw}"
        if kw == "RUN":
            pk = apt_packages(arg)
            if pk is not None:
                cfg["packages"] += pk
                q = subprocess.run(["chroot", rootfs, "dpkg-query", "-W", "-f",
                                    "${Package} ${Status}\n", *pk],
                                   capture_output=True, text=True)
                bad = [l for l in q.stdout.splitlines() if not l.endswith(" install ok installed")]
                if q.returncode or bad:
                    sys.exit(f"{where}: not in the base tree: {bad or q.stderr.strip()}")
                print(f"replay: {where}: {len(pk)} packages installed (debootstrap --include)",
                      file=sys.stderr)
                continue
            env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                   "DEBIAN_FRONTEND": "noninteractive", **cfg["env"]}
            r = subprocess.run(["chroot", rootfs, "/bin/sh", "-c", arg],
                               env=env, capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"{where}: exit {r.returncode}: {r.stderr.strip()[-800:]}")
            print(f"replay: {where}: ok", file=sys.stderr)
        elif kw == "COPY":
            words = shlex.split(arg)
            opts = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            src_stage = None
            for o in opts:
                if o.startswith("--from="):
                    src_stage = o[len("--from="):]
                else:
                    sys.exit(f"{where}: option {o} not replayed")
            *srcs, dst = paths
            for s in srcs:
                if src_stage is not None:
                    key = f"{src_stage}:{s}"
                    if key not in froms:
                        sys.exit(f"{where}: {key}: give it with --from {key}=FILE")
                    f = froms[key]
                else:
                    f = os.path.join(srcdir, s)
                target = os.path.join(rootfs, dst.lstrip("/"))
                if dst.endswith("/"):
                    target = os.path.join(target, os.path.basename(s))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy(f, target)  # content and mode; no xattrs
                os.chown(target, 0, 0)
            print(f"replay: {where}: ok", file=sys.stderr)
        elif kw == "ENV":
            cfg["env"].update(parse_env(arg))
        elif kw == "USER":
            cfg["user"] = arg
        elif kw == "VOLUME":
            cfg["volumes"] += json_or_shell(arg) if arg.startswith("[") else arg.split()
        elif kw == "EXPOSE":
            cfg["expose"] += arg.split()
        elif kw == "HEALTHCHECK":
            m = re.fullmatch(r"((?:--\S+\s+)*)CMD\s+(.*)", arg, re.S)
            if not m:
                sys.exit(f"{where}: not HEALTHCHECK [OPTIONS] CMD ...")
            cfg["healthcheck"] = {"options": m.group(1).split(), "test": json_or_shell(m.group(2))}
        elif kw == "ENTRYPOINT":
            cfg["entrypoint"] = json_or_shell(arg)
        elif kw == "CMD":
            cfg["cmd"] = json_or_shell(arg)
        else:
            sys.exit(f"{where}: instruction not replayed")
    json.dump(cfg, sys.stdout, indent=1)
    print()


def main(argv):
    if len(argv) >= 3 and argv[0] == "packages":
        _, steps = stage(argv[1], argv[2])
        for kw, arg, _ in steps:
            if kw == "RUN" and apt_packages(arg) is not None:
                print("\n".join(apt_packages(arg)))
        return
    if len(argv) >= 5 and argv[0] == "build":
        froms, rest = {}, argv[5:]
        while rest:
            if rest[0] != "--from" or len(rest) < 2 or "=" not in rest[1]:
                sys.exit(__doc__)
            k, v = rest[1].split("=", 1)
            froms[k] = v
            rest = rest[2:]
        build(argv[1], argv[2], argv[3], argv[4], froms)
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
