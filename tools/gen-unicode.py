#!/usr/bin/env python3
"""Generates src/tokenizer/unicode-data.c from the Unicode Character Database.

usage: python3 tools/gen-unicode.py [/usr/share/unicode/UnicodeData.txt] > src/tokenizer/unicode-data.c

Input: UnicodeData.txt (Debian package `unicode-data`). The tables follow the definitions llama.cpp's
tokenizer uses (its scripts/gen-unicode-data.py), so pre-tokenization splits text the same way:
  * one category flag per code point (\\p{N}, \\p{L}, \\p{Z}, \\p{M}, \\p{P}, \\p{S}, \\p{C}, or undefined),
    plus a whitespace flag for the White_Space code points, stored as ranges of equal flags;
  * the simple lowercase mapping (UnicodeData field 13);
  * the first code point of each code point's canonical decomposition (NFD), which is all that the
    WordPiece accent stripping uses, stored as ranges mapping to one value.
Code points new in Unicode 15.1 (llama.cpp's table is 15.1) are added from a short list when the input is
older. The output is compact: about 2,300 + 1,400 + 1,800 small entries instead of 1.1M per-code-point
values.
"""
import sys

MAX_CODEPOINTS = 0x110000

# Flag bits: must match LW_UCP_* in src/tokenizer/unicode.h.
F_UNDEFINED, F_NUMBER, F_LETTER, F_SEPARATOR = 0x0001, 0x0002, 0x0004, 0x0008
F_MARK, F_PUNCT, F_SYMBOL, F_CONTROL, F_WHITESPACE = 0x0010, 0x0020, 0x0040, 0x0080, 0x0100

CATEGORY_FLAG = {
    "Cc": F_CONTROL, "Cf": F_CONTROL, "Co": F_CONTROL, "Cs": F_CONTROL,
    "Ll": F_LETTER, "Lm": F_LETTER, "Lo": F_LETTER, "Lt": F_LETTER, "Lu": F_LETTER,
    "Mc": F_MARK, "Me": F_MARK, "Mn": F_MARK,
    "Nd": F_NUMBER, "Nl": F_NUMBER, "No": F_NUMBER,
    "Pc": F_PUNCT, "Pd": F_PUNCT, "Pe": F_PUNCT, "Pf": F_PUNCT, "Pi": F_PUNCT, "Po": F_PUNCT, "Ps": F_PUNCT,
    "Sc": F_SYMBOL, "Sk": F_SYMBOL, "Sm": F_SYMBOL, "So": F_SYMBOL,
    "Zl": F_SEPARATOR, "Zp": F_SEPARATOR, "Zs": F_SEPARATOR,
}

# White_Space property (PropList.txt); the same list llama.cpp uses.
WHITESPACE = list(range(0x0009, 0x000D + 1)) + list(range(0x2000, 0x200A + 1)) + \
    [0x0020, 0x0085, 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]

# Code points assigned in Unicode 15.1, which llama.cpp's table (v0.4.0) has and Debian 12's unicode-data
# (15.0) lacks: (first, last, category), from the Unicode 15.1 release notes. Applied only when the input
# does not know them, so a newer UnicodeData.txt takes precedence.
UNICODE_15_1_ADDITIONS = [
    (0x2FFC, 0x2FFF, "So"),    # ideographic description characters
    (0x31EF, 0x31EF, "So"),    # CJK stroke HXG
    (0x2EBF0, 0x2EE5D, "Lo"),  # CJK Unified Ideographs Extension I
]

# Hangul syllables decompose algorithmically (Unicode 3.12).
S_BASE, L_BASE, N_COUNT, S_COUNT = 0xAC00, 0x1100, 588, 11172


def records(path):
    """Yields (code point, category, canonical decomposition or None, simple lowercase or 0)."""
    first = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 15:
                continue
            cpt = int(fields[0], 16)
            name, categ, decomp = fields[1], fields[2], fields[5]
            lower = int(fields[13], 16) if fields[13] else 0
            canon = None
            if decomp and not decomp.startswith("<"):
                canon = [int(x, 16) for x in decomp.split()]
            if name.endswith(", First>"):
                first = cpt
                continue
            if name.endswith(", Last>"):
                for c in range(first, cpt):
                    yield c, categ, None, 0
            yield cpt, categ, canon, lower


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode/UnicodeData.txt"
    flags = [F_UNDEFINED] * MAX_CODEPOINTS
    decomp = {}
    lower = []
    for cpt, categ, canon, low in records(path):
        flags[cpt] = CATEGORY_FLAG[categ]
        if canon:
            decomp[cpt] = canon
        if low:
            lower.append((cpt, low))
    for first, last, categ in UNICODE_15_1_ADDITIONS:
        for cpt in range(first, last + 1):
            if flags[cpt] == F_UNDEFINED:
                flags[cpt] = CATEGORY_FLAG[categ]
    for cpt in WHITESPACE:
        flags[cpt] |= F_WHITESPACE

    def nfd_first(c):
        if S_BASE <= c < S_BASE + S_COUNT:
            return L_BASE + (c - S_BASE) // N_COUNT
        while c in decomp:
            c = decomp[c][0]
        return c

    nfd = [(c, nfd_first(c)) for c in sorted(decomp)]
    nfd += [(c, nfd_first(c)) for c in range(S_BASE, S_BASE + S_COUNT)]
    nfd = sorted((c, n) for c, n in nfd if c != n)

    ranges = [(0, flags[0])]
    for cpt in range(1, MAX_CODEPOINTS):
        if flags[cpt] != ranges[-1][1]:
            ranges.append((cpt, flags[cpt]))

    nfd_ranges = []  # (first, last, value): consecutive code points with the same first NFD code point
    for cpt, n in nfd:
        if nfd_ranges and nfd_ranges[-1][1] == cpt - 1 and nfd_ranges[-1][2] == n:
            nfd_ranges[-1] = (nfd_ranges[-1][0], cpt, n)
        else:
            nfd_ranges.append((cpt, cpt, n))

    out = sys.stdout.write
    out("/* GENERATED by tools/gen-unicode.py from UnicodeData.txt (Debian package unicode-data). Do not edit.\n")
    out(" * Tables behind src/tokenizer/unicode.c: category + whitespace flags as ranges, simple lowercase\n")
    out(" * mapping, first code point of the canonical decomposition (NFD). */\n")
    out('#include "tokenizer/unicode.h"\n\n')
    out("/* Flag ranges: entry i covers [start_i, start_{i+1}); the last one runs to 0x10FFFF. */\n")
    out("const uint32_t lw__ucd_flag_start[%d] = {\n" % len(ranges))
    for i in range(0, len(ranges), 8):
        out("    " + " ".join("0x%05X," % r[0] for r in ranges[i:i + 8]) + "\n")
    out("};\n")
    out("const uint16_t lw__ucd_flag_value[%d] = {\n" % len(ranges))
    for i in range(0, len(ranges), 12):
        out("    " + " ".join("0x%03X," % r[1] for r in ranges[i:i + 12]) + "\n")
    out("};\n")
    out("const uint32_t lw__ucd_flag_count = %d;\n\n" % len(ranges))
    out("/* The same flags for U+0000..U+00FF, looked up directly (most text is there). */\n")
    out("const uint16_t lw__ucd_flags_latin[256] = {\n")
    for i in range(0, 256, 12):
        out("    " + " ".join("0x%03X," % f for f in flags[i:min(i + 12, 256)]) + "\n")
    out("};\n\n")
    out("/* Simple lowercase mapping, sorted by code point: {from, to}. */\n")
    out("const uint32_t lw__ucd_lower[%d][2] = {\n" % len(lower))
    for i in range(0, len(lower), 5):
        out("    " + " ".join("{0x%05X, 0x%05X}," % p for p in lower[i:i + 5]) + "\n")
    out("};\n")
    out("const uint32_t lw__ucd_lower_count = %d;\n\n" % len(lower))
    out("/* First code point of NFD: {first, last, value} ranges, sorted. */\n")
    out("const uint32_t lw__ucd_nfd[%d][3] = {\n" % len(nfd_ranges))
    for i in range(0, len(nfd_ranges), 4):
        out("    " + " ".join("{0x%05X, 0x%05X, 0x%05X}," % t for t in nfd_ranges[i:i + 4]) + "\n")
    out("};\n")
    out("const uint32_t lw__ucd_nfd_count = %d;\n" % len(nfd_ranges))


if __name__ == "__main__":
    main()
