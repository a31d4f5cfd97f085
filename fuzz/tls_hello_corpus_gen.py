#!/usr/bin/env python3
"""Writes the synthetic part of fuzz/corpus/tls_hello/ (the real hellos of
curl, openssl, python and node were captured once from loopback and are
kept as they are). Deterministic; run from the repository root:
    python3 fuzz/tls_hello_corpus_gen.py
Each file is a case the parser must get right: split records, ECH and
ESNI, IP literals, case and a trailing dot, duplicates, truncations."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tls_hello")


def u8(v): return struct.pack("!B", v)
def u16(v): return struct.pack("!H", v)
def v8(b): return u8(len(b)) + b
def v16(b): return u16(len(b)) + b
def ext(t, body): return u16(t) + v16(body)


def sni(*names, typ=0):
    return ext(0, v16(b"".join(u8(typ) + v16(n) for n in names)))


def alpn(*protos):
    return ext(16, v16(b"".join(v8(p) for p in protos)))


def versions(*vs):
    return ext(43, v8(b"".join(u16(v) for v in vs)))


def hello(exts, version=0x0303, sid=b"\x11" * 32, suites=(0x1301, 0x1302, 0xc02f), comp=b"\x00",
          suites_raw=None):
    if suites_raw is None:
        suites_raw = b"".join(u16(s) for s in suites)
    body = u16(version) + b"\x42" * 32 + v8(sid) + v16(suites_raw) + v8(comp)
    if exts is not None:
        body += v16(b"".join(exts))
    return b"\x01" + struct.pack("!I", len(body))[1:] + body


def records(msg, size=16384, ctype=22, rver=0x0301):
    out = b""
    for i in range(0, len(msg), size):
        frag = msg[i:i + size]
        out += u8(ctype) + u16(rver) + v16(frag)
    return out


STD = [sni(b"api.example.com"), alpn(b"h2", b"http/1.1"), versions(0x0a0a, 0x0304, 0x0303)]
cases = {
    "gen_basic": records(hello(STD)),
    "gen_split_1": records(hello(STD), 1),
    "gen_split_7": records(hello(STD), 7),
    "gen_split_100_then_appdata": records(hello(STD), 100) + records(b"early", ctype=23),
    "gen_no_ext_tls10": records(hello(None, version=0x0301)),
    "gen_no_sni": records(hello([alpn(b"http/1.1")])),
    "gen_ech": records(hello([sni(b"cloudflare-ech.com"), ext(0xfe0d, b"\x00" * 40)])),
    "gen_ech_nosni": records(hello([ext(0xfe0d, b"\x00" * 40)])),
    "gen_esni": records(hello([ext(0xffce, b"\x00" * 20), sni(b"a.test")])),
    "gen_sni_ipv4": records(hello([sni(b"203.0.113.5")])),
    "gen_sni_ipv6": records(hello([sni(b"2001:db8::1")])),
    "gen_sni_inet_aton": records(hello([sni(b"0x7f.1")])),
    "gen_sni_case_dot": records(hello([sni(b"API.Example.COM.")])),
    "gen_sni_underscore": records(hello([sni(b"_dmarc.a.test")])),
    "gen_bad_sni_nul": records(hello([sni(b"a.test\x00.evil.test")])),
    "gen_bad_sni_two": records(hello([sni(b"a.test", b"b.test")])),
    "gen_bad_sni_type": records(hello([sni(b"a.test", typ=1)])),
    "gen_bad_sni_empty_label": records(hello([sni(b"a..test")])),
    "gen_bad_sni_two_dots": records(hello([sni(b"a.test..")])),
    "gen_bad_sni_long_label": records(hello([sni(b"a" * 64 + b".test")])),
    "gen_bad_sni_254": records(hello([sni((b"a" * 62 + b".") * 4 + b"bc")])),
    "gen_bad_dup_ext": records(hello([sni(b"a.test"), sni(b"b.test")])),
    "gen_bad_psk_not_last": records(hello([ext(41, b"\x00\x00"), sni(b"a.test")])),
    "gen_bad_ext_len": records(hello([sni(b"a.test"), u16(21) + u16(100) + b"ab"])),
    "gen_bad_record_type": records(hello(STD), ctype=21),
    "gen_bad_record_ver": records(hello(STD), rver=0x0200),
    "gen_bad_interleaved": records(hello(STD)[:50]) + records(b"\x01", ctype=20) + records(hello(STD)[50:]),
    "gen_bad_not_clienthello": records(b"\x02" + hello(STD)[1:]),
    "gen_bad_trailing_in_record": records(hello(STD) + b"\x00\x00\x00\x00"),
    "gen_bad_sslv3": records(hello(STD, version=0x0300)),
    "gen_bad_no_null_comp": records(hello(STD, comp=b"\x01")),
    "gen_bad_sid_33": records(hello(STD, sid=b"\x00" * 33)),
    "gen_bad_odd_suites": records(hello(STD, suites_raw=b"\x13\x01\x13")),
    "gen_truncated_half": records(hello(STD))[:60],
    "gen_alpn_nul": records(hello([sni(b"a.test"), alpn(b"h2\x00x", b"http/1.1")])),
    "gen_alpn_many": records(hello([sni(b"a.test"), alpn(*[b"p%d" % i for i in range(12)])])),
    "gen_big_padding": records(hello([sni(b"a.test"), ext(21, b"\x00" * 20000)])),
    "gen_bad_too_big": records(hello([sni(b"a.test"), ext(21, b"\x00" * 33000)])),
    "gen_http_get": b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
}

os.makedirs(OUT, exist_ok=True)
for name, data in sorted(cases.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("wrote %d files to %s" % (len(cases), OUT))
