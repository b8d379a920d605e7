/* A small backtracking regular-expression engine for pre-tokenizer patterns (we have no regex library).
 *
 * It runs ECMAScript-style leftmost, first-alternative-wins matching over code points, which is what
 * llama.cpp gets from std::regex for the patterns it has no hand-written splitter for. Supported:
 * alternation, (...), (?:...), (?i:...), (?=...), (?!...), classes [...] with ranges, negation and the
 * escapes \s \S \d \D \w \W \p{L} \p{N} \p{P} \p{S} \p{M} (\p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} mean \p{L},
 * as in llama.cpp), quantifiers ? * + {n} {n,} {n,m} (greedy, or lazy with a trailing ?), ^ and $.
 *
 * llama.cpp does not hand the text to std::regex as it is: code points >= 128 that are whitespace become
 * U+000B, and when the pattern uses \p{..} every other code point >= 128 is "collapsed" to one byte
 * standing for its category (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark, 0xD5 symbol, 0xD0
 * other). The matcher reproduces that view (lw__regex_units) so that splits agree exactly. */
#ifndef LW_TOKENIZER_REGEX_H
#define LW_TOKENIZER_REGEX_H

#include "core/core.h"

typedef struct lw__regex lw__regex;

/* Compiles a UTF-8 pattern. On failure returns LW_ERR_UNSUPPORTED or LW_ERR_NOMEM with a message in err
 * (LW_ERRMSG_SIZE bytes). */
lw_status lw__regex_compile(const char *pattern, const lw_allocator *alloc, lw__regex **out, char *err);
void lw__regex_free(lw__regex *re);

/* Whether the pattern uses \p{..} classes (then the subject is matched in the collapsed view). */
int lw__regex_collapsed(const lw__regex *re);

/* Maps code points to the units the pattern sees (see above); flags[i] are the code points' flags. */
void lw__regex_units(const lw__regex *re, const uint32_t *cpts, const uint16_t *flags, size_t n, uint32_t *units);

/* Backtracking stack reused across calls (grown through the allocator). */
typedef struct lw__regex_stack {
    uint32_t *v;       /* pairs (pc, position)                                     */
    size_t n, cap;     /* used / allocated uint32_t slots                          */
    uint8_t *memo;     /* visited (position, SPLIT) bits; all zero between calls   */
    size_t memo_bytes; /* allocated bytes                                          */
} lw__regex_stack;

/* Searches units[from..n) for the leftmost match (the subject is units[0..n), so $ means position n and
 * lookaheads stop there). Returns 1 and sets *mstart and *mend on a match, 0 when there is none, -1 when
 * memory ran out. Empty matches are skipped (none of the pre-tokenizer patterns produce them).
 * Search time is linear in the span examined: a (position, branch point) state that failed once is not
 * explored again (the pruning of RE2's BitState, valid without backreferences), so patterns like \s+$
 * cannot go quadratic on long runs, where std::regex in llama.cpp does. */
int lw__regex_search(const lw__regex *re, const uint32_t *units, size_t n, size_t from, lw__regex_stack *st,
                     const lw_allocator *alloc, size_t *mstart, size_t *mend);

#endif
