#!/usr/bin/python3
"""The test bed's canary secrets and the sweep that looks for them.

Usage (testbed.sh drives it; docs/testing.md, "The canary sweep"):
  canary.py init DIR SRC            new values for this run in DIR/state.json
                                    (DIR root-only), the file credential's
                                    value at SRC (0600), the needles grep
                                    uses on /proc (DIR/needles, one form a
                                    line; DIR/needles.LABEL, one canary's)
  canary.py inject DIR SRC POLICY   add the file and inline canaries (their
                                    credentials, bindings and covering
                                    allows) to the policy file POLICY, in
                                    place (init first when DIR has none)
  canary.py inject-rules DIR SRC    the file canary into the JSON rules of
                                    OPENSANDBOX_EGRESS_RULES (stdin to stdout)
  canary.py plant DIR LABEL FORM FILE
                                    append one rendered form of a canary to
                                    FILE (the self-test of testbed_self)
  canary.py exec-with DIR LABEL CMD...
                                    run CMD with the canary in its
                                    environment (the self-test, for /proc)
  canary.py sweep DIR TBDIR SBX [--live]
                                    the sweep over the files of the bed in
                                    TBDIR (and egressd's elsewhere), with
                                    --live first the API of the egressd
                                    running in network namespace SBX;
                                    talks to testbed.sh on stdin/stdout
                                    (see cmd_sweep)

No value ever reaches an argument, stdout, stderr or a file other than
DIR/*, SRC and the policy files it was put into (and, in the self-test,
where plant and exec-with are told to put one): every message names a
canary by its label. Each value is random per run, so a hit is a leak,
never a coincidence.
"""

import base64
import json
import os
import re
import stat
import sys

# Bounds of the sweep: files and bytes read, one API answer, each request.
SWEEP_FILES_MAX = 20000
SWEEP_FILE_BYTES_MAX = 64 << 20
SWEEP_TOTAL_BYTES_MAX = 1 << 30
API_ANSWER_MAX = 8 << 20
API_TIMEOUT_S = 5.0
PART_HEX = 12
PART_STEP = 4

# The canaries: label, credential and binding name, the host its binding
# names (under .invalid, RFC 6761: no scenario contacts it, no resolver
# answers it), the auth type, and how it reaches egressd.
CANARIES = (
    ("canary-file", "tb-canary-file", "file.tb-canary.invalid", "bearer",
     "file"),
    ("canary-inline", "tb-canary-inline", "inline.tb-canary.invalid", "basic",
     "inline"),
    ("canary-api", "tb-canary-api", "api.tb-canary.invalid", "apiKey", "api"),
)
MARKER = "tb-canary-"  # in every credential name: "already injected?"


def die(msg):
    sys.stderr.write("canary.py: %s\n" % msg)
    sys.exit(2)


def state_path(d):
    return os.path.join(d, "state.json")


def load_state(d):
    with open(state_path(d), encoding="utf-8") as f:
        return json.load(f)


def save_state(d, st):
    tmp = state_path(d) + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(st, f)
    os.replace(tmp, state_path(d))


def new_value(label):
    # Recognisable, random, and with the bytes that JSON, percent and
    # YAML encoders change (" \ / + = %), so an encoded leak differs from
    # the raw value and the sweep must (and does) look for each form.
    # The random part is hex: no word a scenario greps for (ALLOW, deny,
    # a.test) can turn up in it by chance.
    return "tbcanary.%s.%s\"\\/+=%%%s" % (
        label.split("-", 1)[1], os.urandom(16).hex(), os.urandom(8).hex())


# --- rendered forms ---------------------------------------------------------


def b64_cores(v):
    """Base64 of v at each of the three alignments it can have inside a
    longer encoded string (user:value, a header block): only the groups
    made of v's bytes alone, which are the same whatever surrounds v."""
    out = []
    for k in range(3):
        e = base64.b64encode(b"\0" * k + v)
        start = 0 if k == 0 else 4
        end = len(e) if (k + len(v)) % 3 == 0 else len(e) - 4
        core = e[start:end]
        out.append(("base64", core))
        out.append(("base64url",
                    core.replace(b"+", b"-").replace(b"/", b"_")))
    return out


UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       b"0123456789-._~")


def percent(v, space=b"%20"):
    """RFC 3986 percent-encoding of every byte but the unreserved ones
    (urllib.parse's quote, without its import: the sweep's cost is
    mostly the interpreter starting)."""
    return b"".join(bytes([c]) if c in UNRESERVED else
                    space if c == 0x20 else b"%%%02X" % c for c in v)


def forms(value):
    """(form name, bytes) to look for, the whole value's forms first.
    "Bearer v", "Basic v" and "Name: v" contain the raw value and are
    found by it."""
    v = value.encode()
    j = json.dumps(value)[1:-1].encode()
    pct = percent(v)
    out = [("raw", v), ("json", j), ("json", j.replace(b"/", b"\\/")),
           ("percent", pct),
           ("percent", re.sub(rb"%[0-9A-F]{2}", lambda m: m.group().lower(),
                              pct)),
           ("form", percent(v, b"+")),
           ("hex", v.hex().encode()), ("hex", v.hex().upper().encode())]
    out += b64_cores(v)
    # Part of it, raw: a message that cuts what it quotes ("%.32s", a
    # field cut at its bound) still leaks. Windows of PART_HEX digits of
    # the random hex, every PART_STEP: any 15 digits in a row hold one (a
    # chance match: about 2^-48 a byte compared, per window).
    for run in re.findall(rb"[0-9a-f]{%d,}" % PART_HEX, v):
        out += [("part", run[i:i + PART_HEX])
                for i in range(0, len(run) - PART_HEX + 1, PART_STEP)]
    seen, uniq = set(), []
    for name, n in out:
        if n not in seen:
            seen.add(n)
            uniq.append((name, n))
    return uniq


# --- init, inject, plant ----------------------------------------------------


def cmd_init(d, src):
    if os.path.exists(state_path(d)):
        return
    os.makedirs(d, mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    st = {"canaries": [], "policies": []}
    needles = []
    for label, cred, host, auth, source in CANARIES:
        value = new_value(label)
        c = {"label": label, "cred": cred, "host": host, "auth": auth,
             "source": source, "value": value, "allowed": []}
        if source == "file":
            os.makedirs(os.path.dirname(src), mode=0o700, exist_ok=True)
            fd = os.open(src, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(value + "\n")
            c["path"] = os.path.abspath(src)
            c["allowed"].append(os.path.realpath(src))
        st["canaries"].append(c)
        mine = [n for _, n in forms(value)]
        write_lines(os.path.join(d, "needles." + label), mine)
        needles += mine
    write_lines(os.path.join(d, "needles"), needles)
    save_state(d, st)


def write_lines(path, lines):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")


def yaml_str(s):
    # Double-quoted YAML: escape what would end or change the scalar.
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def canary_match(host):
    """A canary binding's match, JSON and YAML flow. TB_CANARY_SCOPED=1
    (a scenario whose egressd requires scoped bindings,
    OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH) names
    methods and a path; otherwise the host alone, as before."""
    if os.environ.get("TB_CANARY_SCOPED") != "1":
        return {"hosts": [host]}, "{hosts: [%s]}" % host
    return ({"hosts": [host], "methods": ["GET"],
             "paths": ["/tb-canary/*"]},
            "{hosts: [%s], methods: [GET], paths: ['/tb-canary/*']}" % host)


def items_for(st, sources=("file", "inline")):
    """The policy items of the canaries that live in the policy file:
    {key: [(json object, YAML flow text)]}."""
    items = {"credentials": [], "bindings": [], "infra": []}
    for c in st["canaries"]:
        if c["source"] not in sources:
            continue
        if c["source"] == "file":
            src = {"type": "file", "path": c["path"]}
            ysrc = "{type: file, path: %s}" % yaml_str(c["path"])
        else:
            src = {"type": "inline", "value": c["value"]}
            ysrc = "{type: inline, value: %s}" % yaml_str(c["value"])
        items["credentials"].append(
            ({"name": c["cred"], "source": src},
             "{name: %s, source: %s}" % (c["cred"], ysrc)))
        match, ymatch = canary_match(c["host"])
        items["bindings"].append(
            ({"name": c["cred"], "match": match,
              "auth": {"type": c["auth"], "credential": c["cred"]}},
             "{name: %s, match: %s, auth: {type: %s, "
             "credential: %s}}" % (c["cred"], ymatch, c["auth"],
                                   c["cred"])))
        items["infra"].append((c["host"], c["host"]))
    return items


TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)$")


def inject_yaml(text, items):
    """Adds the items to a block-style YAML policy (what scenarios write):
    to a top-level key's block or flow list when the key exists, as a new
    key at the end otherwise. Anything else is refused, never guessed."""
    lines = text.split("\n")
    keys = {}
    content = False
    for i, ln in enumerate(lines):
        m = TOP_KEY.match(ln)
        if m:
            keys[m.group(1)] = i
        s = ln.strip()
        if s and not s.startswith("#") and s != "---":
            content = True
    if content and not keys:
        raise ValueError("not a YAML mapping")
    tail = []
    # Bottom-up, so earlier line numbers stay valid.
    for key in sorted(items, key=lambda k: -keys.get(k, -1)):
        flows = [y for _, y in items[key]]
        if key not in keys:
            tail += ["%s:" % key] + ["  - %s" % y for y in flows]
            continue
        i = keys[key]
        rest = TOP_KEY.match(lines[i]).group(2)
        val = rest.split(" #", 1)[0].strip()
        if val == "":
            ind = "  "
            for nxt in lines[i + 1:]:
                if nxt.strip() and not nxt.strip().startswith("#"):
                    m = re.match(r"^(\s*)- ", nxt)
                    if m:
                        ind = m.group(1)
                    break
            lines[i + 1:i + 1] = ["%s- %s" % (ind, y) for y in flows]
        elif val in ("[]", "null", "~"):
            lines[i] = "%s: [%s]" % (key, ", ".join(flows))
        elif val.startswith("["):
            at = lines[i].index("[")
            lines[i] = (lines[i][:at + 1] + ", ".join(flows) + ", " +
                        lines[i][at + 1:])
        else:
            raise ValueError("%s is neither a list nor empty" % key)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines + tail) + "\n"


def inject_json(text, items):
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    for key, lst in items.items():
        cur = doc.get(key)
        if cur is None:
            cur = doc[key] = []
        if not isinstance(cur, list):
            raise ValueError("%s is not a list" % key)
        cur[:0] = [o for o, _ in lst]
    return json.dumps(doc, indent=1) + "\n"


def cmd_inject(d, src, policy):
    """Prints "injected N" (N bindings), "present" or "skip REASON" (exit
    0); the file keeps its inode, owner and mode (links and watches stay
    valid). An operator keeps inline values only in a file nobody else
    can read: a policy file others may read (a ConfigMap) gets the file
    canary alone (its path is no secret)."""
    cmd_init(d, src)
    st = load_state(d)
    try:
        with open(policy, "r+", encoding="utf-8") as f:
            text = f.read()
            if MARKER in text:
                print("present")
                return
            sources = ("file", "inline")
            if os.fstat(f.fileno()).st_mode & 0o077:
                sources = ("file",)
            items = items_for(st, sources)
            if text.lstrip()[:1] in ("{", "["):
                out = inject_json(text, items)
            else:
                out = inject_yaml(text, items)
            f.seek(0)
            f.write(out)
            f.truncate()
    except FileNotFoundError:
        print("skip the policy file does not exist")
        return
    except (ValueError, UnicodeDecodeError) as e:
        print("skip the policy file cannot take them (%s)" % e)
        return
    real = os.path.realpath(policy)
    for c in st["canaries"]:
        if c["source"] == "inline" and "inline" in sources and \
                real not in c["allowed"]:
            c["allowed"].append(real)
    if real not in st["policies"]:
        st["policies"].append(real)
    mark_loaded(st, [c["label"] for c in st["canaries"]
                     if c["source"] in sources])
    save_state(d, st)
    print("injected %d" % len(sources))


def rendered(d, label, form):
    """One form of a canary: a form of forms(), or "userpass", the whole
    base64 of "tb:value" (what a basic header would carry), which only
    an unaligned base64 core can find."""
    for c in load_state(d)["canaries"]:
        if c["label"] != label:
            continue
        if form == "userpass":
            return base64.b64encode(b"tb:" + c["value"].encode())
        for name, n in forms(c["value"]):
            if name == form:
                return n
    die("no form %s of %s" % (form, label))
    return None


def mark_loaded(st, labels):
    loaded = st.setdefault("loaded", [])
    for label in labels:
        if label not in loaded:
            loaded.append(label)


def cmd_inject_rules(d, src):
    """OPENSANDBOX_EGRESS_RULES (JSON, stdin) with the file canary added,
    on stdout: only its path goes into the environment, never a value
    (an inline one there would sit in /proc/PID/environ). Exit 3 with the
    reason when the text is no JSON object."""
    cmd_init(d, src)
    st = load_state(d)
    text = sys.stdin.read()
    if MARKER not in text:
        try:
            text = json.dumps(json.loads(
                inject_json(text, items_for(st, ("file",)))))
        except ValueError as e:
            print("the rules cannot take them (%s)" % e)
            sys.exit(3)
    mark_loaded(st, ["canary-file"])
    save_state(d, st)
    print(text)


def cmd_plant(d, label, form, path):
    with open(path, "ab") as f:
        f.write(b'{"ev":"planted","x":"' + rendered(d, label, form) + b'"}\n')


def cmd_exec_with(d, label, argv):
    """Runs argv with one canary's raw value in its environment."""
    env = dict(os.environ, TB_PLANTED=rendered(d, label, "raw").decode())
    os.execvpe(argv[0], argv, env)


# --- the sweep --------------------------------------------------------------


class Finder:
    """Every form of every canary; hits are (label, form, where)."""

    def __init__(self, st):
        self.canaries = st["canaries"]
        self.needles = [(c, name, n) for c in self.canaries
                        for name, n in forms(c["value"])]
        self.hits = []
        self.files = 0
        self.bytes = 0
        self.answers = 0
        self.partial = []

    def hit(self, label, form, where):
        if (label, where) not in [(h[0], h[2]) for h in self.hits]:
            self.hits.append((label, form, where))

    def scan(self, data, where, real=None, mode=0):
        """A canary in data is a hit, but where it is allowed (its
        source, the policy files it was put in), and there only if the
        file keeps it from everybody else (0600, as egressd writes a
        policy with inline values)."""
        for c, name, n in self.needles:
            if n not in data:
                continue
            if real is None or real not in c["allowed"]:
                self.hit(c["label"], name, where)
            elif mode & 0o077:
                self.hit(c["label"], "mode-%04o" % (mode & 0o7777), where)

    def scan_file(self, path):
        if self.files >= SWEEP_FILES_MAX:
            if not self.partial or self.partial[-1] != "the rest":
                self.partial.append("the rest")
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            room = min(SWEEP_FILE_BYTES_MAX,
                       SWEEP_TOTAL_BYTES_MAX - self.bytes)
            data = f.read(room + 1)
        if len(data) > room:
            self.partial.append(path)
            data = data[:room]
        self.files += 1
        self.bytes += len(data)
        self.scan(data, path, os.path.realpath(path), st.st_mode)

    def walk(self, root, skip):
        if os.path.isfile(root):
            self.scan_file(root)
            return
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs
                       if os.path.join(dirpath, x) not in skip]
            for n in names:
                p = os.path.join(dirpath, n)
                if p not in skip:
                    self.scan_file(p)


def read_nul(path):
    try:
        with open(path, "rb") as f:
            return [x.decode() for x in f.read().split(b"\0") if x]
    except FileNotFoundError:
        return []


# Flags and variables of egressd the sweep needs (docs/operations.md).
OPT_ENV = {
    "--policy": "OPENSANDBOX_EGRESS_POLICY_FILE",
    "--http-addr": "OPENSANDBOX_EGRESS_HTTP_ADDR",
    "--api-socket": "EGRESSD_API_SOCKET",
    "--api-tls-cert": "EGRESSD_API_TLS_CERT",
    "--api-token-file": "EGRESSD_API_TOKEN_FILE",
    "--api-token": "OPENSANDBOX_EGRESS_TOKEN",
    "--mark": "EGRESSD_MARK",
    "--log-file": "EGRESSD_LOG_FILE",
    "--state-dir": "EGRESSD_STATE_DIR",
    "--ca-bundle": "EGRESSD_CA_BUNDLE",
    "--ca-key": "EGRESSD_CA_KEY_FILE",
    "--ca-cert": "EGRESSD_CA_CERT_FILE",
    "--rules-dir": "EGRESSD_RULES_DIR",
    "--proxy": "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT",
    "--ssl-insecure": "OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE",
}
BOOL_OPTS = ("--proxy", "--ssl-insecure")
TRUE = ("1", "true", "yes", "on")


def egressd_config(d, n):
    """Start n's settings: {variable name: value}, flags over variables."""
    cfg = {}
    for kv in read_nul(os.path.join(d, "env.%d" % n)):
        k, _, v = kv.partition("=")
        cfg[k] = v
    argv = read_nul(os.path.join(d, "argv.%d" % n))
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, val = a.partition("=")
        if flag in OPT_ENV:
            if flag in BOOL_OPTS:
                cfg[OPT_ENV[flag]] = "1"
            elif eq:
                cfg[OPT_ENV[flag]] = val
            elif i + 1 < len(argv):
                cfg[OPT_ENV[flag]] = argv[i + 1]
                i += 1
        i += 1
    return cfg


def starts(d):
    n = 0
    while os.path.exists(os.path.join(d, "argv.%d" % (n + 1))):
        n += 1
    return n


class Api:
    """The control API of the running egressd, as the operator reaches
    it: the Unix socket when there is one, else the TCP address from
    inside the pod with egressd's SO_MARK (nft keeps every unmarked socket
    off the port, root's too: docs/nft.md), over TLS when it is on."""

    def __init__(self, cfg, sbx):
        self.unix = cfg.get("EGRESSD_API_SOCKET") or None
        self.addr = None
        self.tls = bool(cfg.get("EGRESSD_API_TLS_CERT"))
        self.mark = int(cfg.get("EGRESSD_MARK") or "1", 0)
        # The token egressd was given (not $TB_EGRESSD_TOKEN, which a
        # scenario may have set to a wrong one on purpose).
        self.token = cfg.get("OPENSANDBOX_EGRESS_TOKEN", "")
        tf = cfg.get("EGRESSD_API_TOKEN_FILE")
        if not self.token and tf:
            try:
                with open(tf, encoding="utf-8") as f:
                    self.token = f.read().strip()
            except OSError:
                pass
        if self.unix is None:
            http = cfg.get("OPENSANDBOX_EGRESS_HTTP_ADDR", ":18080")
            m = re.match(r"^(\[([^\]]*)\]|([^:]*)):([0-9]+)$", http)
            if m:
                host = m.group(2) or m.group(3) or ""
                if host in ("", "::", "0.0.0.0", "localhost"):
                    host = "127.0.0.1"
                self.addr = (host, int(m.group(4)))
                self.netns(sbx)

    @staticmethod
    def netns(name):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/run/netns/" + name, os.O_RDONLY)
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            die("setns %s: %s" % (name, os.strerror(ctypes.get_errno())))
        os.close(fd)

    def usable(self):
        return self.unix is not None or self.addr is not None

    def request(self, method, path, body=None):
        """(status, answer bytes); status 0 when it could not connect."""
        import socket
        if self.unix is not None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            dest = self.unix
        else:
            fam = socket.AF_INET6 if ":" in self.addr[0] else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, 36, self.mark)  # SO_MARK
            dest = self.addr
        s.settimeout(API_TIMEOUT_S)
        try:
            s.connect(dest)
            if self.tls and self.unix is None:
                import ssl
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                s = ctx.wrap_socket(s)
            head = "%s %s HTTP/1.1\r\nHost: egressd\r\nConnection: close\r\n" % (
                method, path)
            if self.token:
                head += "OPENSANDBOX-EGRESS-AUTH: %s\r\n" % self.token
            data = b""
            if body is not None:
                data = body.encode()
                head += ("Content-Type: application/json\r\n"
                         "Content-Length: %d\r\n" % len(data))
            s.sendall(head.encode() + b"\r\n" + data)
            ans = bytearray()
            while len(ans) <= API_ANSWER_MAX:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                ans += chunk
            ans = bytes(ans)
        except OSError:
            return 0, b""
        finally:
            s.close()
        m = re.match(rb"^HTTP/1\.[01] ([0-9]{3})", ans)
        return (int(m.group(1)) if m else 0), ans


READS = ("/v1/status", "/metrics", "/policy", "/credential-vault",
         "/credential-vault/credentials", "/credential-vault/bindings")


def api_canary(api, st, cfg):
    """Puts canary-api into the API's vault the way the SDKs do and makes
    egressd rewrite its policy file while it is there (a /policy PATCH):
    that file may keep the operator's values, never the API's. Returns
    the answers to sweep. Needs the proxy, a token and a policy file."""
    c = [x for x in st["canaries"] if x["source"] == "api"][0]
    why = None
    if cfg.get("OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT", "").lower() \
            not in TRUE:
        why = "no --proxy"
    elif cfg.get("OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE", "").lower() \
            in TRUE:
        why = "--ssl-insecure"
    elif not api.token:
        why = "no API token"
    elif not cfg.get("OPENSANDBOX_EGRESS_POLICY_FILE"):
        why = "no policy file"
    if why:
        st["api_why"] = why
        return []
    out = []
    allow = json.dumps([{"action": "allow", "target": c["host"]}])
    cred = {"name": c["cred"], "source": {"type": "inline",
                                          "value": c["value"]}}
    bind = {"name": c["cred"], "match": canary_match(c["host"])[0],
            "auth": {"type": "apiKey", "name": "X-Tb-Canary",
                     "credential": c["cred"]}}
    steps = [("PATCH", "/policy", allow)]
    code, ans = api.request("GET", "/credential-vault")
    out.append(("GET /credential-vault", ans))
    if code == 404:
        steps.append(("POST", "/credential-vault", json.dumps(
            {"credentials": [cred], "bindings": [bind]})))
    else:
        steps.append(("PATCH", "/credential-vault", json.dumps(
            {"credentials": {"add": [cred]}, "bindings": {"add": [bind]}})))
    steps.append(("PATCH", "/policy", allow))
    # Refusals must not quote what they refuse: a bad name beside the
    # value, the value where a name belongs, the value twice.
    bad = [
        json.dumps({"credentials": {"add": [
            {"name": "bad name!", "source": {"value": c["value"]}}]}}),
        json.dumps({"credentials": {"add": [
            {"name": c["value"], "source": {"value": "x"}}]}}),
        json.dumps({"credentials": {"add": [cred]}}),
    ]
    for m, p, b in steps:
        code, ans = api.request(m, p, b)
        out.append(("%s %s" % (m, p), ans))
        if code not in (200, 201):
            st["api_why"] = "%s %s answered %d" % (m, p, code)
            return out
    mark_loaded(st, [c["label"]])
    for b in bad:
        code, ans = api.request("PATCH", "/credential-vault", b)
        out.append(("PATCH /credential-vault (refused: %d)" % code, ans))
    for p in ("/credential-vault/credentials/" + c["cred"],
              "/credential-vault/bindings/" + c["cred"]):
        out.append(("GET " + p, api.request("GET", p)[1]))
    return out


def cmd_sweep(d, tbdir, sbx, live):
    """Protocol: with --live, the API phase runs first (egressd is up),
    then "live" is printed and the sweep waits for a line on stdin (the
    bed has stopped egressd: its last log lines are written). Then files.
    Output lines: "hit LABEL FORM WHERE", "note TEXT", "done TEXT"."""
    st = load_state(d)
    fnd = Finder(st)

    def say(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    n = starts(d)
    cfgs = [egressd_config(d, i) for i in range(1, n + 1)]
    if live and n:
        api = Api(cfgs[-1], sbx)
        answers = []
        if api.usable():
            answers += api_canary(api, st, cfgs[-1])
            for p in READS:
                answers.append(("GET " + p, api.request("GET", p)[1]))
        else:
            st["api_why"] = "no API listener"
        for where, ans in answers:
            fnd.answers += 1
            fnd.scan(ans, "API answer to " + where)
        save_state(d, st)
        say("live")
        sys.stdin.readline()
    # egressd's files wherever its flags put them, and the whole bed.
    roots = [tbdir]
    for cfg in cfgs:
        for k in ("OPENSANDBOX_EGRESS_POLICY_FILE", "EGRESSD_LOG_FILE",
                  "EGRESSD_CA_BUNDLE", "EGRESSD_CA_KEY_FILE",
                  "EGRESSD_CA_CERT_FILE", "EGRESSD_API_TOKEN_FILE"):
            if cfg.get(k):
                roots.append(os.path.dirname(os.path.abspath(cfg[k])))
        for k in ("EGRESSD_STATE_DIR", "EGRESSD_RULES_DIR"):
            if cfg.get(k):
                roots.append(os.path.abspath(cfg[k]))
    done = []
    for r in roots:
        r = os.path.normpath(r)
        if any(r == x or r.startswith(x + "/") for x in done):
            continue
        if not os.path.exists(r) or r in ("/", "/etc", "/tmp", "/var"):
            continue
        done.append(r)
        fnd.walk(r, {os.path.normpath(d)})
    for label, form, where in fnd.hits:
        say("hit %s %s %s" % (label, form, where))
    if fnd.partial:
        say("note not swept in full: %s" % ", ".join(fnd.partial[:5]))
    loaded = ", ".join(sorted(set(st.get("loaded", [])))) or \
        "no canary loaded"
    if n and not live:
        loaded += " (no API read: egressd not running at the sweep)"
    elif st.get("api_why"):
        loaded += " (canary-api: %s)" % st["api_why"]
    say("done %s; %d files (%d KiB), %d API answers" % (
        loaded, fnd.files, fnd.bytes >> 10, fnd.answers))


def main(argv):
    if len(argv) < 2:
        die("usage: see the source")
    cmd, a = argv[1], argv[2:]
    if cmd == "init" and len(a) == 2:
        cmd_init(*a)
    elif cmd == "inject" and len(a) == 3:
        cmd_inject(*a)
    elif cmd == "inject-rules" and len(a) == 2:
        cmd_inject_rules(*a)
    elif cmd == "plant" and len(a) == 4:
        cmd_plant(*a)
    elif cmd == "exec-with" and len(a) >= 3:
        cmd_exec_with(a[0], a[1], a[2:])
    elif cmd == "sweep" and len(a) in (3, 4):
        cmd_sweep(a[0], a[1], a[2], a[3:] == ["--live"])
    else:
        die("usage: see the source")


if __name__ == "__main__":
    main(sys.argv)
