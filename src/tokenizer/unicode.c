/* Unicode lookups over the generated tables, UTF-8 coding, GPT-2 byte mapping. */
#include "tokenizer/unicode.h"

/* ---------------------------------------------------------------------------------------------------------
 * Table lookups (binary searches; ASCII and Latin-1 dominate real text, so they get a direct path)
 * ------------------------------------------------------------------------------------------------------- */

static uint16_t flags_search(uint32_t cpt) {
    uint32_t lo = 0, hi = lw__ucd_flag_count; /* find the last start <= cpt */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (lw__ucd_flag_start[mid] <= cpt) lo = mid;
        else hi = mid;
    }
    return lw__ucd_flag_value[lo];
}

uint16_t lw__ucp_flags(uint32_t cpt) {
    if (cpt < 256) return lw__ucd_flags_latin[cpt];
    if (cpt > 0x10FFFF) return LW_UCP_UNDEFINED;
    return flags_search(cpt);
}

uint32_t lw__ucp_tolower(uint32_t cpt) {
    uint32_t lo = 0, hi = lw__ucd_lower_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (lw__ucd_lower[mid][0] < cpt) lo = mid + 1;
        else hi = mid;
    }
    return lo < lw__ucd_lower_count && lw__ucd_lower[lo][0] == cpt ? lw__ucd_lower[lo][1] : cpt;
}

uint32_t lw__ucp_nfd_first(uint32_t cpt) {
    uint32_t lo = 0, hi = lw__ucd_nfd_count; /* first range whose start > cpt */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (lw__ucd_nfd[mid][0] <= cpt) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return cpt;
    const uint32_t *r = lw__ucd_nfd[lo - 1];
    return cpt <= r[1] ? r[2] : cpt;
}

/* ---------------------------------------------------------------------------------------------------------
 * UTF-8
 * ------------------------------------------------------------------------------------------------------- */

uint32_t lw__utf8_decode(const char *str, size_t n, size_t *off) {
    const uint8_t *s = (const uint8_t *)str + *off;
    size_t left = n - *off;
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *off += 1;
        return b0;
    }
    if (!(b0 & 0x40)) goto invalid;
    if (!(b0 & 0x20)) {
        if (left < 2 || (s[1] & 0xC0) != 0x80) goto invalid;
        *off += 2;
        return ((uint32_t)(b0 & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (!(b0 & 0x10)) {
        if (left < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) goto invalid;
        *off += 3;
        return ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if (!(b0 & 0x08)) {
        if (left < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) goto invalid;
        *off += 4;
        return ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
               (s[3] & 0x3F);
    }
invalid:
    *off += 1;
    return LW_UCP_REPLACEMENT;
}

size_t lw__utf8_encode(uint32_t cpt, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cpt <= 0x7F) {
        o[0] = (uint8_t)cpt;
        return 1;
    }
    if (cpt <= 0x7FF) {
        o[0] = (uint8_t)(0xC0 | (cpt >> 6));
        o[1] = (uint8_t)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt <= 0xFFFF) {
        o[0] = (uint8_t)(0xE0 | (cpt >> 12));
        o[1] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cpt & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | ((cpt >> 18) & 0x07));
    o[1] = (uint8_t)(0x80 | ((cpt >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cpt & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------------------------------------------------
 * GPT-2 byte <-> code point: printable Latin-1 bytes map to themselves, the other 68 bytes to 256 + n in
 * byte order.
 * ------------------------------------------------------------------------------------------------------- */

static int byte_is_printable(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* The 68 non-printable bytes are 0x00..0x20 (33), 0x7F..0xA0 (34) and 0xAD (1), numbered in that order. */
uint32_t lw__byte_to_ucp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

int lw__ucp_to_byte(uint32_t cpt) {
    if (cpt < 256) return byte_is_printable(cpt) ? (int)cpt : -1;
    if (cpt >= 256 + 68) return -1;
    uint32_t n = cpt - 256;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(0x7F + (n - 33));
    return 0xAD;
}
