#!/usr/bin/env python3
"""Writes fuzz/corpus/http_decode/: compressed bodies for
fuzz/fuzz_http_decode.c, each a coding byte ('g' gzip, 'd' deflate) then
the body. Deterministic; run from the repository root:
    python3 fuzz/decode_corpus_gen.py
Both wrappings of deflate (zlib and raw), gzip members one after
another, gzip header fields, stored blocks, a preset dictionary (which
HTTP cannot carry), truncations, trailing bytes, a bad CRC, and bombs
(zeros: about 1000:1) past the ratio limit and, unlimited, the size one."""
import gzip
import os
import zlib

BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "http_decode")
TEXT = b"".join(b'{"authorization": "Bearer real-secret-value-1", "n": %d}\n'
                % i for i in range(200))


def deflate(data, wbits, level=6, zdict=None):
    c = zlib.compressobj(level, zlib.DEFLATED, wbits, 8,
                         zlib.Z_DEFAULT_STRATEGY, *([zdict] if zdict else []))
    return c.compress(data) + c.flush()


def gz(data, **kw):
    return gzip.compress(data, mtime=0, **kw)


g = gz(TEXT)
z = deflate(TEXT, 15)
raw = deflate(TEXT, -15)
# gzip with FEXTRA, FNAME, FCOMMENT and FHCRC set, written by hand
hdr = bytes([0x1f, 0x8b, 8, 0x1e, 0, 0, 0, 0, 0, 255])
hdr += (4).to_bytes(2, "little") + b"abcd" + b"name\0" + b"comment\0"
hdr += (zlib.crc32(hdr) & 0xffff).to_bytes(2, "little")
fields = hdr + deflate(TEXT, -15) + \
    zlib.crc32(TEXT).to_bytes(4, "little") + len(TEXT).to_bytes(4, "little")
bad_crc = bytearray(g)
bad_crc[-8] ^= 1
cases = {
    "ok_gzip": b"g" + g,
    "ok_gzip_fields": b"g" + fields,
    "ok_gzip_members": b"g" + g + gz(b"second member\n"),
    "ok_gzip_stored": b"g" + gz(TEXT, compresslevel=0),
    "ok_gzip_empty_body": b"g",
    "ok_deflate_zlib": b"d" + z,
    "ok_deflate_raw": b"d" + raw,
    "ok_deflate_raw_stored": b"d" + deflate(TEXT[:300], -15, level=0),
    "ok_deflate_empty_stream": b"d" + deflate(b"", 15),
    "bad_gzip_truncated": b"g" + g[:-3],
    "bad_gzip_crc": b"g" + bytes(bad_crc),
    "bad_gzip_garbage_member": b"g" + g + b"\0\0\0\0",
    "bad_gzip_not": b"g" + TEXT[:200],
    "bad_deflate_trailing": b"d" + z + b"x",
    "bad_deflate_truncated": b"d" + raw[:len(raw) // 2],
    "bad_deflate_one_byte": b"d" + z[:1],
    "bad_deflate_dict": b"d" + deflate(TEXT, 15, zdict=b"authorization"),
    "bomb_ratio_gzip": b"g" + gz(bytes(2 << 20)),
    "bomb_ratio_deflate": b"d" + deflate(bytes(2 << 20), -15),
}
os.makedirs(BASE, exist_ok=True)
for name, data in sorted(cases.items()):
    with open(os.path.join(BASE, name), "wb") as f:
        f.write(data)
print("wrote %d compressed bodies" % len(cases))
