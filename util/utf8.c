#include "util/utf8.h"

size_t
utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t need, i;
	uint32_t v;

	if (n == 0)
		return 0;
	if (s[0] < 0x80) {
		need = 1;
		v = s[0];
	} else if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		need = 2;
		v = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		need = 3;
		v = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		need = 4;
		v = s[0] & 0x07;
	} else
		return 0; /* continuation byte, C0/C1 overlong lead, F5+ */
	if (n < need)
		return 0;
	for (i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if ((need == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
	    (need == 4 && (v < 0x10000 || v > 0x10ffff)))
		return 0;
	if (cp != NULL)
		*cp = v;
	return need;
}

size_t
utf8_encode(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp >= 0xd800 && cp <= 0xdfff)
		return 0;
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	if (cp > 0x10ffff)
		return 0;
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}
