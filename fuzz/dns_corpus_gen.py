#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_dns_wire and fuzz_dns_rewrite.

Hand-built, real-looking DNS messages (no dnspython): queries as stub
resolvers send them and answers as recursive resolvers return them.
Run from the repository root: python3 fuzz/dns_corpus_gen.py
"""
import os
import struct

QR, AA, TC, RD, RA, AD, CD = 0x8000, 0x0400, 0x0200, 0x0100, 0x0080, 0x0020, 0x0010
A, NS, CNAME, SOA, PTR, MX, TXT, AAAA, SRV, NAPTR, DNAME, OPT, SVCB, HTTPS = \
    1, 2, 5, 6, 12, 15, 16, 28, 33, 35, 39, 41, 64, 65


def name(s):
    out = b""
    for lab in s.strip(".").split(".") if s.strip(".") else []:
        out += bytes([len(lab)]) + lab.encode()
    return out + b"\0"


def ptr(off, labels=""):
    return (name(labels)[:-1] if labels else b"") + struct.pack(">H", 0xC000 | off)


def hdr(id_, flags, qd, an, ns, ar):
    return struct.pack(">HHHHHH", id_, flags, qd, an, ns, ar)


def q(n, t, c=1):
    return name(n) + struct.pack(">HH", t, c)


def rr(owner, t, ttl, rdata, c=1):
    return owner + struct.pack(">HHIH", t, c, ttl, len(rdata)) + rdata


def opt(udp=1232, ext=0, ver=0, flags=0, opts=b""):
    return b"\0" + struct.pack(">HHBBHH", OPT, udp, ext, ver, flags, len(opts)) + opts


def ip4(s):
    return bytes(int(x) for x in s.split("."))


def ip6(s):
    head, _, tail = s.partition("::")
    h = [int(x, 16) for x in head.split(":") if x]
    t = [int(x, 16) for x in tail.split(":") if x]
    words = h + [0] * (8 - len(h) - len(t)) + t
    return struct.pack(">8H", *words)


def svc(prio, target, params):
    out = struct.pack(">H", prio) + name(target)
    for k, v in sorted(params):
        out += struct.pack(">HH", k, len(v)) + v
    return out


def soa(mname_, rname_, minimum=300):
    return mname_ + rname_ + struct.pack(">IIIII", 2024010101, 7200, 900, 1209600, minimum)


queries = {
    "q_a_0x20": hdr(0x1a2b, RD, 1, 0, 0, 0) + q("wWw.ExAmPlE.cOm", A),
    "q_aaaa_edns_do": hdr(0x0001, RD | AD, 1, 0, 0, 1) + q("api.example.org", AAAA) + opt(1232, flags=0x8000),
    "q_https_cookie": hdr(0xbeef, RD, 1, 0, 0, 1) + q("svc.example.net", HTTPS)
    + opt(4096, opts=struct.pack(">HH", 10, 8) + b"\x01\x02\x03\x04\x05\x06\x07\x08"),
    "q_localhost": hdr(7, RD, 1, 0, 0, 0) + q("localhost", A),
    "q_sub_localhost_aaaa": hdr(8, RD, 1, 0, 0, 0) + q("Dev.App.LOCALHOST", AAAA),
    "q_ptr_v4": hdr(9, RD, 1, 0, 0, 0) + q("1.0.0.127.in-addr.arpa", PTR),
    "q_ptr_v6": hdr(10, RD, 1, 0, 0, 0) + q(".".join("1" + "0" * 31) + ".ip6.arpa", PTR),
    "q_qd0": hdr(11, RD, 0, 0, 0, 0),
    "q_qd2": hdr(12, RD, 2, 0, 0, 0) + q("a.example", A) + q("b.example", A),
    "q_notify": hdr(13, 4 << 11, 1, 0, 0, 0) + q("example.com", SOA),
    "q_badvers": hdr(14, RD, 1, 0, 0, 1) + q("example.com", A) + opt(1232, ver=1),
    "q_loop_self": hdr(15, RD, 1, 0, 0, 0) + b"\xc0\x0c" + struct.pack(">HH", A, 1),
    "q_exfil_long": hdr(16, RD, 1, 0, 0, 0)
    + q(".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61]), TXT),
    "q_escapes": hdr(17, RD, 1, 0, 0, 0) + b"\x03a.b\x02\\x\x01*\x07example\x00" + struct.pack(">HH", A, 1),
    "q_response": hdr(18, QR | RD, 1, 0, 0, 0) + q("example.com", A),
    "q_any_tcp_size": hdr(19, RD, 1, 0, 0, 1) + q("example.com", 255) + opt(65535),
    "q_chaos": hdr(20, 0, 1, 0, 0, 0) + q("version.bind", TXT, 3),
    "q_chaos_edns": hdr(22, 0, 1, 0, 0, 1) + q("version.bind", TXT, 3) + opt(1232),
    "q_denied_edns_small": hdr(23, RD, 1, 0, 0, 1) + q("Exfil.Evil.Example", A) + opt(100),
    "tcp_framed": struct.pack(">H", 29) + hdr(21, RD, 1, 0, 0, 0) + q("example.com", A),
}

# Answers. Offsets: the question name always starts at 12.
QN = 12
answers = {}

b = hdr(0x1a2b, QR | RD | RA, 1, 4, 0, 1) + q("www.example.com", A)
c1 = len(b) + 12
b += rr(ptr(QN), CNAME, 300, name("www.example.com.cdn.example.net"))
c2 = len(b) + 12
b += rr(ptr(c1), CNAME, 60, ptr(c1 + 16, "edge1"))
b += rr(ptr(c2), A, 20, ip4("203.0.113.10"))
b += rr(ptr(c2), A, 20, ip4("203.0.113.11"))
b += opt(1232)
answers["a_cname_chain"] = b

b = hdr(2, QR | RD | RA, 1, 5, 0, 0) + q("rebind.example.com", A)
for a in ("10.0.0.1", "169.254.169.254", "127.0.0.1", "100.100.100.200", "198.51.100.20"):
    b += rr(ptr(QN), A, 5, ip4(a))
answers["a_rebind_v4"] = b

b = hdr(3, QR | RD | RA, 1, 6, 0, 0) + q("rebind6.example.com", AAAA)
for a in ("::ffff:0a00:0001", "64:ff9b::a9fe:a9fe", "2002:c0a8:0001::1", "fd00:ec2::254",
          "2001:0:cb00:7101:0:0:3fff:8efe", "2001:db8::53"):
    b += rr(ptr(QN), AAAA, 30, ip6(a))
answers["a_rebind_v6"] = b

b = hdr(4, QR | RD | RA, 1, 1, 0, 1) + q("svc.example.net", HTTPS)
b += rr(ptr(QN), HTTPS, 300, svc(1, "", [(1, b"\x02h2\x02h3"), (4, ip4("203.0.113.5") + ip4("10.1.2.3")),
                                          (5, b"\x00\x04ECHx"), (6, ip6("2001:db8::5") + ip6("fe80::1"))]))
b += opt(1232, flags=0x8000)
answers["a_https_hints"] = b

b = hdr(5, QR | RD | RA, 1, 2, 0, 0) + q("_dns.resolver.example", SVCB)
b += rr(ptr(QN), SVCB, 300, svc(1, "dns.example", [(0, b"\x00\x04"), (1, b"\x03dot"), (3, b"\x03\x55"),
                                                   (4, ip4("192.0.2.53"))]))
b += rr(ptr(QN), SVCB, 300, svc(0, "alias.example", []))
answers["a_svcb_alias"] = b

b = hdr(6, QR | RD | RA | 3, 1, 0, 1, 1) + q("nope.example.com", A)
b += rr(ptr(QN + 5), SOA, 900, soa(ptr(QN + 5, "ns1"), ptr(QN + 5, "hostmaster"), 60))
b += opt(1232)
answers["a_nxdomain_soa"] = b

b = hdr(7, QR | RD | RA, 1, 0, 1, 0) + q("example.com", AAAA)
b += rr(ptr(QN), SOA, 3600, soa(ptr(QN, "ns"), ptr(QN, "admin"), 120))
answers["a_nodata_soa"] = b

b = hdr(8, QR | RD | RA, 1, 3, 0, 0) + q("x.y.example.com", A)
b += rr(ptr(QN + 4), DNAME, 60, name("example.net"))
b += rr(ptr(QN, ""), CNAME, 60, name("x.y.example.net"))
b += rr(name("x.y.example.net"), A, 60, ip4("198.51.100.9"))
answers["a_dname"] = b

b = hdr(9, QR | RD | RA, 1, 2, 2, 2) + q("example.org", MX)
b += rr(ptr(QN), MX, 300, struct.pack(">H", 10) + ptr(QN, "mx1"))
b += rr(ptr(QN), MX, 300, struct.pack(">H", 20) + ptr(QN, "mx2"))
b += rr(ptr(QN), NS, 86400, ptr(QN, "ns1"))
b += rr(ptr(QN), NS, 86400, ptr(QN, "ns2"))
b += rr(name("mx1.example.org"), A, 300, ip4("203.0.113.25"))
b += rr(name("mx2.example.org"), A, 300, ip4("192.168.0.25"))
answers["a_mx_glue"] = b

b = hdr(10, QR | RD | RA, 1, 2, 0, 0) + q("_sip._tcp.example.com", SRV)
b += rr(ptr(QN), SRV, 300, struct.pack(">HHH", 10, 60, 5060) + ptr(QN + 10, "sip1"))
b += rr(ptr(QN), TXT, 300, b"\x0bhello world\x03abc")
answers["a_srv_txt"] = b

b = hdr(11, QR | RD | RA, 1, 1, 0, 0) + q("example.com", NAPTR)
b += rr(ptr(QN), NAPTR, 300, struct.pack(">HH", 100, 10) + b"\x01u\x07E2U+sip\x00" + name("_sip._udp.example.com"))
answers["a_naptr"] = b

b = hdr(12, QR | RD | RA | TC, 1, 0, 0, 0) + q("big.example.com", TXT)
answers["a_truncated"] = b

b = hdr(13, QR | RD | RA, 1, 2, 0, 0) + q("loop.example", A)
l2 = len(b) + 12
b += rr(ptr(QN), CNAME, 60, name("loop2.example"))
b += rr(ptr(l2), CNAME, 60, ptr(QN))
answers["a_cname_loop"] = b

b = hdr(14, QR | RD | RA, 1, 1, 0, 0) + q("ptr.example", A)
b += rr(b"\xc0\x30", A, 60, ip4("203.0.113.1"))  # forward pointer
answers["a_forward_ptr"] = b

b = hdr(15, QR | RD | RA, 1, 1, 0, 1) + q("x.example", A)
b += rr(ptr(QN), A, 60, ip4("203.0.113.2"))
b += opt(1232, ext=1)  # extended rcode BADVERS/BADSIG range
answers["a_ext_rcode"] = b

b = hdr(16, QR | RD | RA | 2, 1, 0, 0, 0) + q("fail.example", A)
answers["a_servfail"] = b

b = hdr(17, QR | RD | RA, 1, 3, 0, 0) + q("MiXeD.ExAmPlE", A)
b += rr(ptr(QN), A, 60, ip4("198.51.100.1"))
b += rr(name("mixed.example"), A, 60, ip4("198.51.100.2"))
b += rr(name("unrelated.example"), A, 60, ip4("198.51.100.3"))
answers["a_case_unrelated"] = b

b = hdr(18, QR | RD | RA, 1, 1, 0, 0) + q("1.0.0.127.in-addr.arpa", PTR)
b += rr(ptr(QN), PTR, 60, name("localhost"))
answers["a_ptr"] = b

b = hdr(19, QR | RD | RA | AD, 1, 2, 0, 1) + q("signed.example", A)
b += rr(ptr(QN), A, 60, ip4("203.0.113.3"))
b += rr(ptr(QN), 46, 60, struct.pack(">HBBIIIH", 1, 13, 2, 60, 1700000000, 1690000000, 12345) + name("example") + b"S" * 64)
b += opt(1232, flags=0x8000)
answers["a_rrsig"] = b

# egressd's own denied answer: NXDOMAIN, SOA, an OPT with EDE 15 (RFC 8914).
def ede(code, text=b""):
    return struct.pack(">HHH", 15, 2 + len(text), code) + text


b = hdr(24, QR | RD | RA, 1, 0, 1, 1) + q("secret.evil.test", A)
b += rr(ptr(QN), SOA, 42, soa(name("egressd.invalid"), name("hostmaster.egressd.invalid"), 42))
b += opt(1232, opts=ede(15, b"egressd: denied by policy"))
answers["a_nxdomain_ede"] = b
b = hdr(25, QR | RD | RA, 1, 0, 0, 1) + q("x.example", A)
b += opt(1232, opts=struct.pack(">HH", 10, 8) + b"12345678" + ede(18, "\u00e9t\u00e9".encode()))
answers["a_ede_after_cookie"] = b
b = hdr(26, QR | RD | RA, 1, 0, 0, 1) + q("x.example", A)
b += opt(1232, opts=struct.pack(">HHB", 15, 1, 0))
answers["a_ede_short"] = b

# Queries are answers too for the wire target; answers seed both.
os.makedirs("fuzz/corpus/dns_wire", exist_ok=True)
os.makedirs("fuzz/corpus/dns_rewrite", exist_ok=True)
for k, v in list(queries.items()) + list(answers.items()):
    with open(f"fuzz/corpus/dns_wire/{k}", "wb") as f:
        f.write(v)
# Rewrite inputs: one option byte (see fuzz_dns_rewrite.c) + the answer.
optbytes = [0x00, 0x01, 0x03, 0x05, 0x09, 0x10, 0x20, 0x41, 0x80, 0xff]
for i, (k, v) in enumerate(answers.items()):
    for j in (0, 1):
        ob = optbytes[(i + j * 3) % len(optbytes)]
        with open(f"fuzz/corpus/dns_rewrite/{k}_{ob:02x}", "wb") as f:
            f.write(bytes([ob]) + v)
