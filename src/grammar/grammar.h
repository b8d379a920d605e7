/* Grammars (internal): the compiled form of a GBNF grammar, shared by the parser (gbnf.c), the matcher
 * (match.c) and the JSON Schema converter (json-schema.c). Public API: lw_grammar_* in include/llamaweb.h.
 *
 * A program is one flat array of elements. Rule r occupies elems[rule_start[r] ..] as a list of
 * alternatives separated by GE_ALT and closed by GE_END. A terminal is one GE_CLASS element followed by its
 * ranges (GE_RANGE elements): it matches one code point c when (c lies in some range) != negated. A string
 * literal is a sequence of one-range classes; `.` is a negated class with no ranges. GE_RULE refers to a
 * rule by id. Repetitions and groups are rewritten into generated rules by the parser, so the matcher only
 * sees sequences, alternatives, references and terminals. */
#ifndef LW_GRAMMAR_H
#define LW_GRAMMAR_H

#include "llamaweb.h"

#include <stddef.h>
#include <stdint.h>

/* Limits against hostile grammars (the parser fails cleanly with LW_ERR_TOO_LARGE beyond them). */
#define LW_GRAMMAR_MAX_TEXT    (16u << 20) /* bytes of GBNF text                                */
#define LW_GRAMMAR_MAX_ELEMS   (1u << 21)  /* elements in the compiled program                  */
#define LW_GRAMMAR_MAX_RULES   (1u << 18)  /* rules, generated ones included                    */
#define LW_GRAMMAR_MAX_DEPTH   128         /* nesting of parentheses                            */
#define LW_GRAMMAR_MAX_REPEAT  100000      /* m and n in x{m,n}                                 */
#define LW_GRAMMAR_MAX_RANGES  4096        /* ranges in one character class                     */

/* Element kinds. */
enum {
    LW_GE_END = 0, /* end of a rule (also ends its last alternative)          */
    LW_GE_ALT,     /* ends one alternative, the next begins after it           */
    LW_GE_RULE,    /* reference: a = rule id                                   */
    LW_GE_CLASS,   /* terminal head: a = number of ranges, b = 1 when negated  */
    LW_GE_RANGE,   /* one range of the class before it: a..b inclusive         */
};

/* One element of a rule. */
typedef struct lw__gelem {
    uint32_t type; /* LW_GE_*               */
    uint32_t a;    /* see the kinds above   */
    uint32_t b;    /* see the kinds above   */
} lw__gelem;

/* A compiled grammar: vocabulary-independent, immutable after parsing. */
typedef struct lw__gprog {
    lw__gelem *elems;     /* every rule's elements, back to back                          */
    uint32_t n_elems;     /* elements                                                     */
    uint32_t *rule_start; /* n_rules: first element of each rule                          */
    uint32_t *alt_off;    /* n_rules + 1: rule r's alternatives are alts[alt_off[r]..]     */
    uint32_t *alts;       /* first element of each alternative (a GE_ALT/GE_END: empty)    */
    uint32_t n_rules;     /* rules                                                        */
    uint32_t root;        /* the start rule                                               */
} lw__gprog;

/* Parses GBNF text (llama.cpp's dialect) into p, starting at rule `root` ("root" when NULL). On failure
 * returns the status and writes a message (LW_ERRMSG_SIZE bytes) to err; p is then empty. */
lw_status lw__gbnf_parse(const char *text, size_t len, const char *root, const lw_allocator *a, lw__gprog *p,
                         char *err);
void lw__gprog_free(const lw_allocator *a, lw__gprog *p);

/* Converts a JSON Schema document (or, with schema NULL, "any JSON value") into GBNF text, NUL-terminated,
 * allocated with a (free with lw__free). Failure: status + message in err (LW_ERRMSG_SIZE bytes). */
lw_status lw__json_schema_to_gbnf(const char *schema, size_t len, const lw_allocator *a, char **out,
                                  size_t *out_len, char *err);

/* JSON documents: json-schema.c's reader (limits on size and depth), also used by the tool-call parser. A
 * document is a tree of nodes (first child / next sibling; object members carry their key). */
enum { LW_JSON_NULL, LW_JSON_FALSE, LW_JSON_TRUE, LW_JSON_NUM, LW_JSON_STR, LW_JSON_ARR, LW_JSON_OBJ };
#define LW_JSON_NONE UINT32_MAX /* no node */

typedef struct lw__jnode {
    uint32_t type;         /* LW_JSON_*                                              */
    uint32_t first, next;  /* first child, next sibling (LW_JSON_NONE: none)         */
    uint32_t key, klen;    /* member key: offset and length in strs                  */
    uint32_t str, slen;    /* string value (decoded) or number text, in strs         */
    uint32_t src, src_len; /* the value's own text in the document: offset, length   */
    double num;            /* number value                                           */
} lw__jnode;

typedef struct lw__json {
    lw__jnode *n;  /* nodes                                        */
    uint32_t nn;   /* how many                                     */
    char *strs;    /* decoded strings and keys, back to back       */
    size_t ns;     /* their bytes                                  */
    uint32_t root; /* the top value                                */
    size_t used;   /* bytes of the text the value took (prefix mode: where the rest begins) */
} lw__json;

/* Parses text[0..len) as one JSON value (prefix != 0: a value at the start, after whitespace, followed by
 * anything; out->used says where it ended). Failure: status + message in err (LW_ERRMSG_SIZE bytes), out
 * empty. Free with lw__json_free. */
lw_status lw__json_parse(const char *text, size_t len, int prefix, const lw_allocator *a, lw__json *out, char *err);
/* The member of object node obj named key, or LW_JSON_NONE. */
uint32_t lw__json_member(const lw__json *j, uint32_t obj, const char *key);
void lw__json_free(const lw_allocator *a, lw__json *j);

/* A grammar object that only carries a failure (status st, message msg), for constructors that fail before
 * parsing (lw_grammar_from_tools); returns st (LW_ERR_NOMEM when not even that could be made). */
lw_status lw__grammar_failed(const lw_allocator *alloc, lw_status st, const char *msg, lw_grammar **out);

/* The allowed-token mask of the grammar's current state ((n_vocab + 31) / 32 words, owned by g, valid until
 * the grammar changes): the sampler's way in, without a copy. */
lw_status lw__grammar_mask_ref(lw_grammar *g, const uint32_t **bits);

#endif
