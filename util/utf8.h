/*
 * utf8: the one UTF-8 decoder and encoder. Strict (RFC 3629): no overlong
 * forms, no surrogates, nothing above U+10FFFF, no sequence cut short.
 * Pure; used by the JSON reader, the YAML writer and the log escaper.
 */
#ifndef EGRESSD_UTF8_H
#define EGRESSD_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * Length (1 to 4) of the valid sequence at s[0..n), its code point in *cp
 * when cp is not NULL; 0 when n is 0 or the sequence is invalid or cut.
 */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/*
 * Writes cp at o (room for 4 bytes) and returns its length; 0 (nothing
 * written) for a surrogate or a value above U+10FFFF.
 */
size_t utf8_encode(char *o, uint32_t cp);

#endif
