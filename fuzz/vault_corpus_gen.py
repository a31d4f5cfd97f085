#!/usr/bin/env python3
"""Writes the seed inputs of fuzz/corpus/binding_match/ and redact/ (the
input layouts are described in fuzz/fuzz_binding_match.c and
fuzz/fuzz_redact.c; the index tables below mirror their pools).
Deterministic; run from the repository root:
    python3 fuzz/vault_corpus_gen.py
The corpora checked in are these seeds plus what libFuzzer found, merged
(-merge=1); the seeds are rewritten, never the found inputs."""
import base64
import json
import os
import re
import struct
import urllib.parse

BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# ---- binding_match ----
BHOSTS = ["api.example.com", "*.example.com", "*.api.example.com",
          "example.com", "a.b.example.com", "*.b.example.com", "test.org",
          "*.test.org"]
BPATHS = ["/*", "/v1/*", "/v1/chat", "/v1/chat/*", "/v1", "/admin", "/v1/",
          "/v1/models", "/a%20b*", "/v1/chat/x"]
BMETHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
RHOSTS = ["api.example.com", "x.example.com", "x.api.example.com",
          "example.com", "a.b.example.com", "x.b.example.com", "test.org",
          "x.test.org", "API.Example.COM", "api.example.com.",
          "y.x.api.example.com", "evil.com", "api.example.com.evil.com",
          "xexample.com", "b.example.com", "x.y.test.org", "EXAMPLE.com."]
RMETHODS = BMETHODS + ["get", "TRACE", "track", "CONNECT", "GETX", "",
                       "POST "]
PORTS = [0, 443, 80, 8443]


def bits(pool, names):
    v = 0
    for n in names:
        v |= 1 << pool.index(n)
    return v


def binding(hosts, paths=(), methods=(), schemes=()):
    return bytes([bits(BHOSTS, hosts)]) + \
        struct.pack("<H", bits(BPATHS, paths)) + \
        bytes([bits(BMETHODS, methods), bits(["https", "http"], schemes)])


def bm_input(slots, req_scheme, port, method, host, path):
    """slots: {slot index 0..7: binding bytes}."""
    mask = 0
    out = b""
    for i in sorted(slots):
        mask |= 1 << i
        out += slots[i]
    c = (1 if req_scheme == "http" else 0) | PORTS.index(port) << 1
    out += bytes([c, RMETHODS.index(method)])
    if host in RHOSTS:
        out += bytes([RHOSTS.index(host)])
    else:
        hb = host.encode()
        out += bytes([0xf0, len(hb)]) + hb
    return bytes([mask]) + out + path


CHAT = binding(["api.example.com"], ["/v1/chat/*"], ["POST"])
MODELS = binding(["api.example.com"], ["/v1/models"], ["GET"])
WILD = binding(["*.example.com"], [], ["GET"])
PLAIN = binding(["test.org", "*.test.org"], ["/*"], [], ["http"])
ALL = binding(["a.b.example.com", "*.b.example.com"], ["/v1", "/v1/"],
              BMETHODS, ["https", "http"])
POL = {0: CHAT, 1: MODELS, 2: WILD, 3: PLAIN, 4: ALL}

binding_match = {
    "chat_post": bm_input(POL, "https", 0, "POST", "api.example.com",
                          b"/v1/chat/completions"),
    "chat_dotdot": bm_input(POL, "https", 443, "POST", "api.example.com",
                            b"/v1/chat/../../admin"),
    "chat_enc_dotdot": bm_input(POL, "https", 0, "POST", "api.example.com",
                                b"/v1/chat/%2e%2E/%2E%2e/admin"),
    "chat_enc_slash": bm_input(POL, "https", 0, "POST", "api.example.com",
                               b"/v1/chat%2f..%2fadmin"),
    "chat_backslash": bm_input(POL, "https", 0, "POST", "api.example.com",
                               b"/v1/chat/..\\admin"),
    "chat_semicolon": bm_input(POL, "https", 0, "POST", "api.example.com",
                               b"/v1/chat/..;/admin"),
    "chat_double_slash": bm_input(POL, "https", 0, "POST",
                                  "api.example.com", b"/v1//chat/x"),
    "chat_dot": bm_input(POL, "https", 0, "POST", "api.example.com",
                         b"/./v1/./chat/./x/."),
    "chat_wrong_method": bm_input(POL, "https", 0, "GET", "api.example.com",
                                  b"/v1/chat/x"),
    "chat_lower_method": bm_input(POL, "https", 0, "get", "api.example.com",
                                  b"/v1/models"),
    "chat_http": bm_input(POL, "http", 0, "POST", "api.example.com",
                          b"/v1/chat/x"),
    "chat_port": bm_input(POL, "https", 8443, "POST", "api.example.com",
                          b"/v1/chat/x"),
    "chat_http_port443": bm_input(POL, "http", 443, "POST",
                                  "api.example.com", b"/v1/chat/x"),
    "chat_upper_host": bm_input(POL, "https", 0, "POST", "API.Example.COM",
                                b"/v1/chat/x"),
    "chat_dot_host": bm_input(POL, "https", 0, "POST", "api.example.com.",
                              b"/v1/chat/x"),
    "chat_suffix_host": bm_input(POL, "https", 0, "POST",
                                 "api.example.com.evil.com", b"/v1/chat/x"),
    "chat_query": bm_input(POL, "https", 0, "POST", "api.example.com",
                           b"/v1/chat/x?a=b"),
    "chat_fragment": bm_input(POL, "https", 0, "POST", "api.example.com",
                              b"/v1/chat/x#f"),
    "chat_nul": bm_input(POL, "https", 0, "POST", "api.example.com",
                         b"/v1/chat/x\x00/admin"),
    "chat_enc_nul": bm_input(POL, "https", 0, "POST", "api.example.com",
                             b"/v1/chat/x%00"),
    "chat_unreserved": bm_input(POL, "https", 0, "POST", "api.example.com",
                                b"/%76%31/%63hat/%7e%41%2D%5f"),
    "chat_reserved_lower": bm_input(POL, "https", 0, "POST",
                                    "api.example.com", b"/v1/chat/%3b%40"),
    "models_exact": bm_input(POL, "https", 0, "GET", "api.example.com",
                             b"/v1/models"),
    "models_trailing": bm_input(POL, "https", 0, "GET", "api.example.com",
                                b"/v1/models/"),
    "wild_get": bm_input(POL, "https", 0, "GET", "x.example.com", b"/"),
    "wild_apex": bm_input(POL, "https", 0, "GET", "example.com", b"/"),
    "wild_exact_beats": bm_input(POL, "https", 0, "GET", "api.example.com",
                                 b"/v1/models"),
    "wild_deep": bm_input(POL, "https", 0, "GET", "y.x.api.example.com",
                          b"/v1"),
    "trace": bm_input(POL, "https", 0, "TRACE", "api.example.com", b"/"),
    "track_lower": bm_input(POL, "https", 0, "track", "x.example.com", b"/"),
    "trace_unbound": bm_input(POL, "https", 0, "TRACE", "evil.com", b"/"),
    "plain_http": bm_input(POL, "http", 80, "GET", "x.test.org", b"/a"),
    "plain_https": bm_input(POL, "https", 0, "GET", "test.org", b"/a"),
    "all_methods": bm_input(POL, "http", 0, "OPTIONS", "a.b.example.com",
                            b"/v1/"),
    "all_wild": bm_input(POL, "https", 0, "PATCH", "x.b.example.com",
                         b"/v1/x/.."),
    "raw_host_ip": bm_input(POL, "https", 0, "GET", "10.0.0.1", b"/"),
    "raw_host_hex": bm_input(POL, "https", 0, "GET", "x.example.0x1f", b"/"),
    "raw_host_under": bm_input(POL, "https", 0, "GET", "a_b.example.com",
                               b"/"),
    "raw_host_empty_label": bm_input(POL, "https", 0, "GET",
                                     "x..example.com", b"/"),
    "raw_host_two_dots": bm_input(POL, "https", 0, "GET",
                                  "api.example.com..", b"/"),
    "overlap_same": bm_input({0: CHAT, 5: CHAT}, "https", 0, "POST",
                             "api.example.com", b"/v1/chat/x"),
    "overlap_prefix": bm_input(
        {0: binding(["api.example.com"], ["/v1/*"]),
         1: binding(["api.example.com"], ["/v1/chat/x"])},
        "https", 0, "GET", "api.example.com", b"/v1/chat/x"),
    "overlap_wild_nested": bm_input(
        {0: binding(["*.example.com"]), 1: binding(["*.api.example.com"])},
        "https", 0, "GET", "x.api.example.com", b"/"),
    "no_overlap_methods": bm_input(
        {0: binding(["api.example.com"], [], ["GET"]),
         1: binding(["api.example.com"], [], ["HEAD"])},
        "https", 0, "HEAD", "api.example.com", b"/"),
    "no_overlap_schemes": bm_input(
        {0: binding(["api.example.com"], [], [], ["https"]),
         1: binding(["api.example.com"], [], [], ["http"])},
        "http", 0, "GET", "api.example.com", b"/"),
    "no_overlap_levels": bm_input(
        {0: binding(["api.example.com"]), 1: binding(["*.example.com"])},
        "https", 0, "GET", "api.example.com", b"/"),
    "no_bindings": bm_input({}, "https", 0, "GET", "api.example.com", b"/"),
    "long_path": bm_input(POL, "https", 0, "POST", "api.example.com",
                          b"/v1/chat/" + b"a/../" * 300 + b"x"),
}

# ---- redact ----
FIXED = ["sk-live-4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a99", "a/b c+d\"e\\f",
         "p\u00e4ss w\u00f6rd/\u20ac", "tab\there<&>'=?;:@",
         "ghp_R2D2c3poBB8x",
         # basic (fuzz_redact.c FIXED_BASIC): base64 of this pair
         "YWxpY2U6czNjcmV0LXBhc3MtNDI="]
BASIC_PAIR = b"alice:s3cret-pass-42"


def forms(v):
    b = v.encode()
    out = [b, b"Bearer " + b,
           base64.b64encode(b).rstrip(b"="),
           base64.urlsafe_b64encode(b).rstrip(b"="),
           base64.b64encode(b),
           urllib.parse.quote(b, safe="-._~").encode(),
           re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                  urllib.parse.quote(b, safe="-._~")).encode(),
           urllib.parse.quote_plus(b, safe="-._~").encode(),
           json.dumps(v, ensure_ascii=False)[1:-1].encode(),
           json.dumps(v, ensure_ascii=False)[1:-1].replace("/", "\\/")
           .encode()]
    return out


def rd_input(body, values=(), flush=False, cuts=()):
    assert len(values) <= 3 and len(cuts) <= 16
    flags = len(values) | (4 if flush else 0) | len(cuts) << 3
    out = bytes([flags])
    for v in values:
        assert 1 <= len(v) <= 24
        out += bytes([len(v) - 1]) + v
    for c in cuts:
        out += struct.pack("<H", c)
    return out + body


S0 = FIXED[0].encode()
every_form = b" | ".join(f for v in FIXED for f in forms(v))
redact = {
    "plain": rd_input(b"HTTP/1.1 200 OK no secret here"),
    "raw": rd_input(b"token=" + S0 + b";"),
    "raw_split": rd_input(b"token=" + S0 + b";", cuts=[10, 11, 30]),
    "every_form": rd_input(every_form),
    "every_form_split": rd_input(every_form,
                                 cuts=list(range(7, 1000, 67))[:16]),
    "every_form_flush": rd_input(every_form, flush=True,
                                 cuts=list(range(3, 1000, 67))[:16]),
    "json_body": rd_input(json.dumps({"echo": FIXED[1], "k": FIXED[3],
                                      "n": [1, 2, 3]}).encode(),
                          cuts=[5, 17]),
    "sse": rd_input(b"".join(b"data: {\"t\": \"" + f + b"\"}\n\n"
                             for f in forms(FIXED[4])), flush=True,
                    cuts=[12, 40, 41, 90, 150]),
    "chunked": rd_input(b"1a\r\n" + S0[:20] + b"\r\n" + b"\r\n14\r\n" +
                        S0[20:] + b"\r\n0\r\n\r\n", cuts=[6, 26]),
    "prefix_only": rd_input(b"sk-live-4f3c sk-live-4f3c2a1b0e9d8c7b6a5f4e3d",
                            flush=True, cuts=[12, 30]),
    "overlap": rd_input(b"xababababy abab", [b"abab"], cuts=[3]),
    "two_values": rd_input(b"k1=s3cr3t-K k2=czNjcjN0LUs k3=a%2Fb",
                           [b"s3cr3t-K", b"a/b"], flush=True, cuts=[4, 20]),
    "three_values": rd_input(b"Bearer x.y-z Bearer%20x QmVhcmVy a\\/b",
                             [b"x.y-z", b"Bearer", b"a/b c"], cuts=[7, 8]),
    "one_byte": rd_input(b"abcabc%61YQ", [b"a"]),
    "space_plus": rd_input(b"q=a+b+c&r=a%20b%20c", [b"a b c"]),
    "control": rd_input(b"\"t\\u0001x\\tq\" t\x01x\tq", [b"t\x01x\tq"],
                        cuts=[2]),
    "quote_backslash": rd_input(b"\"\\\"\\\\\" %22%5C \"\\", [b"\"\\"]),
    "many_cuts": rd_input(b"--" + S0 + b"--" + S0,
                          cuts=list(range(0, 90, 6))[:16]),
}


def large(values=()):
    """36 KiB with values straddling 16384 and 32768 (the redactor's
    chunk), fed whole and with one cut."""
    body = bytearray(b"x" * 36000)
    for at, f in ((16370, forms(FIXED[0])[0]), (32760, forms(FIXED[1])[5]),
                  (5000, forms(FIXED[2])[8]), (30000, forms(FIXED[4])[2])):
        body[at:at + len(f)] = f
    return bytes(body)


# The longest form split one byte before its end (and at every other
# offset): the round that holds back one byte too few misses it.
# (forms()[4], padded base64, is no pattern of its own)
LONGEST = max((f for v in FIXED for i, f in enumerate(forms(v)) if i != 4),
              key=len)
redact["split_longest"] = rd_input(
    b"xx" + LONGEST + b"xx",
    cuts=sorted({2 + len(LONGEST) - 1} | set(range(1, 64, 4)))[:16])
redact["split_longest_value"] = rd_input(b"xBearer a bx", [b"a b"],
                                         cuts=list(range(1, 12)))
redact["large"] = rd_input(large())
redact["large_cut"] = rd_input(large(), cuts=[16380])
redact["large_flush"] = rd_input(large(), flush=True, cuts=[100, 16390])


def lanes_body(runs):
    """20000 bytes of '.' with runs of 'a' (start, length): with the
    value "aaaaaaaa" every window ending in "aa" is a skip-filter
    candidate (vault_redact.c's lanes are 4096 bytes apart and queue
    256)."""
    body = bytearray(b"." * 20000)
    for at, n in runs:
        body[at:at + n] = b"a" * n
    return bytes(body)


# a lane ahead fills its queue one candidate before the run's last match:
# fed whole, the lanes' chunks are 4997 bytes (a quarter of the starts
# with a whole window), the second lane's filter jumps 7 at a time over
# the dots from 4997 and meets its first "aa" at 5095 = 5101 - 6, so the
# run of 258 has 257 candidates
redact["lanes_queue_full"] = rd_input(lanes_body([(5101, 258)]),
                                      [b"aaaaaaaa"])
redact["lanes_runs"] = rd_input(
    lanes_body([(4090, 13), (8185, 300), (12280, 7), (16380, 260)]),
    [b"aaaaaaaa"], flush=True, cuts=[4093, 8190, 8191, 16384])


def near_misses():
    """Every fixed value's first 2..len-1 bytes and a byte that breaks
    it, back to back (the skip filter's and the groups' worst case)."""
    out = b""
    while len(out) < 30000:
        for v in FIXED:
            b = v.encode()
            for k in range(2, len(b)):
                out += b[:k] + (b"#" if b[k:k + 1] != b"#" else b"!")
    return out[:30000]


redact["near_misses"] = rd_input(near_misses(), flush=True,
                                 cuts=[4096, 4100, 12288, 20000])


# ---- issue 34: forms and pieces ----


def wrap(enc, width, brk):
    return brk.join(enc[i:i + width] for i in range(0, len(enc), width))


def pieces(f, w):
    return b" ".join(f[i:i + w] for i in range(0, len(f) - w + 1))


B64LINE = b"Authorization: Bearer " + S0 + b"\r\n"
redact["b64_align"] = rd_input(b"\n".join(
    base64.b64encode(b"x" * k + B64LINE) for k in range(3)))
redact["b64url_align"] = rd_input(b"\n".join(
    base64.urlsafe_b64encode(b"x" * k + b"Bearer " + FIXED[1].encode() +
                             b"?>~") for k in range(3)), cuts=[9, 50, 51])
redact["b64_mime76_crlf"] = rd_input(b"\r\n\r\n".join(
    wrap(base64.b64encode(b"y" * k + S0 + b" tail"), 76, b"\r\n")
    for k in range(0, 60, 7)), cuts=[76, 77, 78, 300])
redact["b64_mime76_lf"] = rd_input(b"\n\n".join(
    wrap(base64.b64encode(b"y" * k + S0), 76, b"\n")
    for k in range(0, 60, 5)), flush=True, cuts=[76, 77, 200])
redact["b64_pem64_short"] = rd_input(b"\n\n".join(
    wrap(base64.b64encode(b"z" * k + FIXED[4].encode() + b"."), 64, b"\n")
    for k in range(40, 70)))
redact["b64_wrapped_value"] = rd_input(b"\r\n".join(
    wrap(base64.b64encode(b"q" * k + b"k9Zq-Xw7"), 12, b"\r\n")
    for k in range(12)), [b"k9Zq-Xw7"])
redact["hex"] = rd_input(b"sha=" + S0.hex().encode() + b" SHA=" +
                         S0.hex().upper().encode() + b" mid=" +
                         FIXED[3].encode().hex()[5:31].encode())
redact["pieces"] = rd_input(pieces(S0, 12) + b" | " + pieces(S0, 11),
                            cuts=[11, 12, 13, 500])
redact["pieces_forms"] = rd_input(b" | ".join(
    pieces(f, 12) for f in forms(FIXED[2])[2:]), flush=True,
    cuts=[100, 400])
redact["basic_decoded"] = rd_input(
    b"hello " + BASIC_PAIR + b"! pw=" + BASIC_PAIR[6:] + b" u=" +
    urllib.parse.quote(BASIC_PAIR, safe="").encode() + b" b=" +
    base64.b64encode(b"Basic-auth user " + BASIC_PAIR) + b" x=" +
    BASIC_PAIR.hex().encode(), cuts=[10, 30])


def write(name, items):
    d = os.path.join(BASE, name)
    os.makedirs(d, exist_ok=True)
    for k, v in items.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)


write("binding_match", binding_match)
write("redact", redact)
