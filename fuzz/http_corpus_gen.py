#!/usr/bin/env python3
"""Writes the synthetic part of fuzz/corpus/http_head/ and http_chunk/ (the
real_* heads of curl, python, node and git were captured once from
loopback). Deterministic; run from the repository root:
    python3 fuzz/http_corpus_gen.py
The bad_* heads are request-smuggling and Host-confusion shapes from the
literature (CL.TE, TE.CL, TE.TE obfuscation, obs-fold, bare CR/LF, NUL,
duplicate Host, absolute-form vs Host); tests/unit/egressd/proto/test_http_head.c
holds the status each must get."""
import os

BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
G = "GET / HTTP/1.1\r\nHost: a.test\r\n"
heads = {
    "ok_get": G + "\r\n",
    "ok_post_cl": "POST /v1/x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello",
    "ok_chunked": "POST /up HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "ok_http10": "GET / HTTP/1.0\r\n\r\n",
    "ok_absolute": "GET http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "ok_absolute_port": "GET http://a.test:80/x HTTP/1.1\r\nHost: A.TEST\r\n\r\n",
    "ok_options_star": "OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "ok_expect": "PUT /f HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
    "ok_websocket": "GET /ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "ok_pipelined": G + "\r\n" + "GET /2 HTTP/1.1\r\nHost: evil.test\r\n\r\n",
    "ok_ows_value": "GET / HTTP/1.1\r\nHost:   a.test  \r\nX-A:\t1\t\r\n\r\n",
    "ok_ipv6_host": "GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n",
    "more_partial": "GET / HTTP/1.1\r\nHost: a.te",
    "bad_cl_te": "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
    "bad_te_cl": "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
    "bad_te_te_obfuscated": "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n",
    "bad_te_xchunked": "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: xchunked\r\n\r\n",
    "bad_te_gzip_chunked": "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "bad_te_space_colon": "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding : chunked\r\n\r\n",
    "bad_te_http10": "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    "bad_two_cl": "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    "bad_two_cl_same": "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
    "bad_cl_list": "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5, 5\r\n\r\n",
    "bad_cl_plus": "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: +5\r\n\r\n",
    "bad_cl_hex": "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0x5\r\n\r\n",
    "bad_obs_fold": "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\n 2\r\n\r\n",
    "bad_bare_cr": "GET / HTTP/1.1\r\nHost: a.test\rX: 1\r\n\r\n",
    "bad_bare_lf": "GET / HTTP/1.1\nHost: a.test\n\n",
    "bad_nul": "GET / HTTP/1.1\r\nHost: a.test\x00.evil\r\n\r\n",
    "bad_two_host": "GET / HTTP/1.1\r\nHost: a.test\r\nHost: evil.test\r\n\r\n",
    "bad_no_host": "GET / HTTP/1.1\r\n\r\n",
    "bad_host_userinfo": "GET / HTTP/1.1\r\nHost: a.test@evil.test\r\n\r\n",
    "bad_absolute_other_host": "GET http://evil.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_absolute_ftp": "GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_two_spaces": "GET  / HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_space_in_target": "GET /a b HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_http2_preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "bad_http09": "GET /\r\n\r\n",
    "bad_version_12": "GET / HTTP/1.2\r\nHost: a.test\r\n\r\n",
    "bad_expect": "PUT / HTTP/1.1\r\nHost: a.test\r\nExpect: 200-ok\r\n\r\n",
    "bad_fragment": "GET /a#b HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_star_get": "GET * HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_long_line": "GET /" + "a" * 9000 + " HTTP/1.1\r\nHost: a.test\r\n\r\n",
    "bad_many_headers": G + "".join("X-%d: 1\r\n" % i for i in range(130)) + "\r\n",
    "bad_big_head": G + "X: " + "a" * 70000 + "\r\n\r\n",
    "bad_ctl_value": "GET / HTTP/1.1\r\nHost: a.test\r\nX: a\x01b\r\n\r\n",
    "resp_ok": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
    "resp_chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    "resp_close": "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n",
    "resp_204": "HTTP/1.1 204 No Content\r\n\r\n",
    "resp_101": "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "resp_no_reason": "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
}
chunks = {
    "ok_simple": "5\r\nhello\r\n0\r\n\r\n",
    "ok_ext": "5;name=val;q=\"a;b\\\"c\"\r\nhello\r\n0\r\n\r\n",
    "ok_trailer": "3\r\nabc\r\n0\r\nX-Checksum: 1\r\nX-B: 2\r\n\r\n",
    "ok_upper_hex": "A\r\n0123456789\r\n0\r\n\r\nGET / HTTP/1.1\r\n",
    "ok_leading_zeros": "0005\r\nhello\r\n000\r\n\r\n",
    "bad_no_digits": ";x\r\n\r\n",
    "bad_0x": "0x5\r\nhello\r\n0\r\n\r\n",
    "bad_space_before": " 5\r\nhello\r\n0\r\n\r\n",
    "bad_neg": "-1\r\n\r\n",
    "bad_overflow": "1" + "0" * 16 + "\r\n",
    "bad_bare_lf": "5\nhello\n0\n\n",
    "bad_data_longer": "3\r\nhello\r\n0\r\n\r\n",
    "bad_ctl_ext": "5;a\x01\r\nhello\r\n0\r\n\r\n",
    "bad_trailer_fold": "0\r\nX: 1\r\n 2\r\n\r\n",
    "bad_unterminated_quote": "5;a=\"x\r\nhello\r\n",
    # an extension starts with ';' after optional whitespace; nothing
    # else may follow the hex digits (RFC 9112 7.1.1)
    "ok_ext_bws": "5 ;\tname = val ; q=\"x\\\"y\" ;flag\r\nhello\r\n0 ; last\r\n\r\n",
    "bad_ext_no_semi": "5zz\r\nhello\r\n0\r\n\r\n",
    "bad_ext_ws_only": "5 \r\nhello\r\n0\r\n\r\n",
    "bad_ext_ws_token": "5 x\r\nhello\r\n0\r\n\r\n",
    "bad_ext_eq_after_size": "5=1\r\nhello\r\n0\r\n\r\n",
    "bad_ext_no_name": "5;=v\r\nhello\r\n0\r\n\r\n",
    "bad_ext_no_value": "5;a=\r\nhello\r\n0\r\n\r\n",
    "bad_ext_two_values": "5;a=b c\r\nhello\r\n0\r\n\r\n",
    "bad_ext_trailing_ws": "5;a \r\nhello\r\n0\r\n\r\n",
    "bad_ext_quote_del": "5;a=\"x\x7fy\"\r\nhello\r\n0\r\n\r\n",
    "bad_ext_last_chunk": "5\r\nhello\r\n0 x\r\n\r\n",
    # trailer sections the vault path hands on field by field
    "ok_trailer_fields": "2\r\nhi\r\n0\r\nX-A:  one two \t\r\nx-b:\r\n"
                         "Grpc-Status:0\r\nX-C: a:b\r\n\r\nNEXT",
    "ok_trailer_max": "0\r\n" + "X-Pad: " + "p" * 16374 + "\r\n\r\n",
    "bad_trailer_big": "0\r\n" + "X-Pad: " + "p" * 16375 + "\r\n\r\n",
    "bad_trailer_space_name": "0\r\nX-A : 1\r\n\r\n",
    "bad_trailer_no_colon": "0\r\nX-A\r\n\r\n",
    "bad_trailer_bare_lf": "0\r\nX-A: 1\n\r\n",
}
for d, cases in (("http_head", heads), ("http_chunk", chunks)):
    os.makedirs(os.path.join(BASE, d), exist_ok=True)
    for name, text in sorted(cases.items()):
        with open(os.path.join(BASE, d, name), "wb") as f:
            f.write(text.encode("latin-1"))
print("wrote %d heads, %d chunked bodies" % (len(heads), len(chunks)))
