/* Internal header of the chat-template engine: a Jinja subset interpreter for the templates stored in GGUF
 * files (`tokenizer.chat_template`). Pipeline: lexer (jinja-lex.c) → parser to an AST (jinja-parse.c) →
 * tree-walking interpreter (jinja-eval.c) with values (jinja-value.c) and built-in filters, tests, methods
 * and functions (jinja-builtins.c). The public-ish entry points are in chat.h / chat.c.
 *
 * Memory: everything lives in arenas (one for the parsed template, one per render) whose total size is
 * capped, so hostile templates cannot exhaust memory, and a failed render frees everything at once. Values
 * are never reference counted: a render's arena owns them all and is dropped in one go. */
#ifndef LW_CHAT_JINJA_H
#define LW_CHAT_JINJA_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------------------
 * Limits against hostile templates (defaults; the render limits can be changed per call)
 * ------------------------------------------------------------------------------------------------------- */

#define JJ_MAX_TEMPLATE_BYTES (4u << 20)   /* longest template source accepted                    */
#define JJ_MAX_PARSE_DEPTH 200             /* nesting of expressions + blocks in the parser        */
#define JJ_MAX_CALL_DEPTH 64               /* nested macro calls at render time                    */
#define JJ_MAX_VALUE_DEPTH 64              /* nesting followed by repr/tojson/equality             */
#define JJ_MAX_EVAL_DEPTH 600              /* nested eval/exec calls at render time (C stack)      */
#define JJ_DEFAULT_MAX_STEPS 5000000u      /* evaluation steps per render                          */
#define JJ_DEFAULT_MAX_OUTPUT (4u << 20)   /* bytes of rendered text                               */
#define JJ_DEFAULT_MAX_MEMORY (64u << 20)  /* bytes of render arena                                */

/* ---------------------------------------------------------------------------------------------------------
 * Arena: bump allocation in blocks obtained from the lw_allocator; total capped at `limit`.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct jj_block jj_block;
typedef struct jj_arena {
    lw_allocator alloc; /* where blocks come from                         */
    jj_block *head;     /* newest block (blocks form a singly linked list) */
    size_t total;       /* bytes obtained from the allocator so far       */
    size_t limit;       /* cap on total; beyond it allocations fail       */
    bool hit_limit;     /* the last failure was the cap, not the allocator */
} jj_arena;

void jj_arena_init(jj_arena *a, const lw_allocator *alloc, size_t limit);
void *jj_alloc(jj_arena *a, size_t n);                 /* 16-byte aligned, not zeroed; NULL on failure */
void *jj_zalloc(jj_arena *a, size_t n);                /* zeroed                                      */
void *jj_grow(jj_arena *a, void *p, size_t old_n, size_t new_n); /* copy into a larger allocation     */
void jj_arena_free(jj_arena *a);

/* ---------------------------------------------------------------------------------------------------------
 * Strings: byte ranges (UTF-8, not NUL-terminated) living in an arena or in the template source.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct jj_str {
    const char *p; /* first byte                      */
    size_t n;      /* length in bytes                 */
} jj_str;

static inline jj_str jj_s(const char *p, size_t n) {
    jj_str s = {p, n};
    return s;
}
bool jj_str_eq(jj_str a, jj_str b);
bool jj_str_eqz(jj_str a, const char *z); /* equals a NUL-terminated literal */

/* ---------------------------------------------------------------------------------------------------------
 * Lexer
 * ------------------------------------------------------------------------------------------------------- */

typedef enum jj_tok_kind {
    JT_TEXT,       /* literal template text (whitespace control already applied) */
    JT_EXPR_OPEN,  /* {{                                                          */
    JT_EXPR_CLOSE, /* }}                                                          */
    JT_STMT_OPEN,  /* {%                                                          */
    JT_STMT_CLOSE, /* %}                                                          */
    JT_NAME,       /* identifier or keyword                                       */
    JT_STRING,     /* string literal (escapes decoded)                            */
    JT_INT,        /* integer literal                                             */
    JT_FLOAT,      /* float literal                                               */
    JT_OP,         /* operator or punctuation; see jj_op                          */
    JT_EOF         /* end of the template                                         */
} jj_tok_kind;

/* Operators: single characters use their ASCII code; multi-character ones get codes above 255. */
enum jj_op {
    JO_FLOORDIV = 256, /* //  */
    JO_POW,            /* **  */
    JO_EQ,             /* ==  */
    JO_NE,             /* !=  */
    JO_LE,             /* <=  */
    JO_GE              /* >=  */
};

typedef struct jj_tok {
    uint8_t kind;  /* jj_tok_kind                                 */
    int op;        /* operator code for JT_OP                     */
    uint32_t line; /* 1-based line in the template, for messages  */
    jj_str s;      /* text, name or decoded string literal        */
    union {
        int64_t i; /* JT_INT value                                */
        double f;  /* JT_FLOAT value                              */
    };
} jj_tok;

/* Splits src into tokens (array in *out from arena tmp, *n_out entries, the last one JT_EOF; token texts
 * live in arena a), applying Jinja2's whitespace control with trim_blocks and lstrip_blocks on, as Hugging
 * Face transformers renders chat templates. Returns LW_OK or an error with a message in err. */
lw_status jj_lex(jj_arena *a, jj_arena *tmp, const char *src, size_t n, jj_tok **out, size_t *n_out, char *err);

/* ---------------------------------------------------------------------------------------------------------
 * Values
 * ------------------------------------------------------------------------------------------------------- */

typedef enum jj_type {
    JV_UNDEF, /* an undefined name or missing attribute                 */
    JV_NONE,  /* none / None                                            */
    JV_BOOL,  /* true / false                                           */
    JV_INT,   /* 64-bit integer                                         */
    JV_FLOAT, /* double                                                 */
    JV_STR,   /* string                                                 */
    JV_LIST,  /* list (tuples are lists too)                            */
    JV_DICT,  /* insertion-ordered mapping; namespace() is a dict too   */
    JV_MACRO, /* a macro defined by the template                        */
    JV_FUNC   /* a built-in global function (range, namespace, ...)     */
} jj_type;

typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_macro jj_macro;

typedef struct jj_val {
    uint8_t t; /* jj_type */
    union {
        bool b;            /* JV_BOOL                          */
        int64_t i;         /* JV_INT                           */
        double f;          /* JV_FLOAT                         */
        jj_str s;          /* JV_STR                           */
        jj_list *l;        /* JV_LIST (shared by reference)    */
        jj_dict *d;        /* JV_DICT (shared by reference)    */
        jj_macro *m;       /* JV_MACRO                         */
        int fn;            /* JV_FUNC: jj_func id              */
    } u;
} jj_val;

struct jj_list {
    jj_val *v;  /* items            */
    size_t n;   /* item count       */
    size_t cap; /* allocated items  */
};

struct jj_dict {
    jj_val *k;    /* keys (usually strings), in insertion order */
    jj_val *v;    /* values                                      */
    size_t n;     /* entries                                     */
    size_t cap;   /* allocated entries                           */
    bool is_ns;   /* made by namespace(): attribute assignment ok */
};

/* Built-in global functions. */
enum jj_func { JF_RANGE, JF_NAMESPACE, JF_RAISE, JF_STRFTIME_NOW, JF_DICT, JF_COUNT };

static inline jj_val jj_undef(void) {
    jj_val v;
    v.t = JV_UNDEF;
    v.u.i = 0;
    return v;
}
static inline jj_val jj_none(void) {
    jj_val v;
    v.t = JV_NONE;
    v.u.i = 0;
    return v;
}
static inline jj_val jj_bool(bool b) {
    jj_val v;
    v.t = JV_BOOL;
    v.u.i = 0;
    v.u.b = b;
    return v;
}
static inline jj_val jj_int(int64_t i) {
    jj_val v;
    v.t = JV_INT;
    v.u.i = i;
    return v;
}
static inline jj_val jj_float(double f) {
    jj_val v;
    v.t = JV_FLOAT;
    v.u.f = f;
    return v;
}
static inline jj_val jj_strv(jj_str s) {
    jj_val v;
    v.t = JV_STR;
    v.u.s = s;
    return v;
}

/* ---------------------------------------------------------------------------------------------------------
 * AST
 * ------------------------------------------------------------------------------------------------------- */

typedef enum jj_node_kind {
    /* statements */
    JN_TEXT,      /* lit: the text                                                           */
    JN_OUTPUT,    /* a: expression to print                                                  */
    JN_IF,        /* a: condition; body; ebody (an elif is a nested JN_IF in ebody)          */
    JN_FOR,       /* targets; a: iterable; b: optional filter; body; ebody (else)            */
    JN_SET,       /* a: target (JE_NAME, JE_ATTR or JE_LIST of names); b: value               */
    JN_SET_BLOCK, /* a: target; body captured; args: optional filters (JE_FILTER chain)      */
    JN_MACRO,     /* name; params in kwn/kwv (kwv[i] default or NULL); body                  */
    JN_BREAK,     /* {% break %}                                                             */
    JN_CONTINUE,  /* {% continue %}                                                          */
    JN_DO,        /* a: expression evaluated for its effect                                  */
    JN_FILTER,    /* a: filter chain applied to the captured body (operand JE_NAME "")       */
    JN_SCOPE,     /* body run in place (generation blocks, templates)                        */
    /* expressions */
    JE_LIT,       /* lit                                                                     */
    JE_NAME,      /* name                                                                    */
    JE_LIST,      /* args: items                                                             */
    JE_DICT,      /* args: keys; kwv: values (nkw == nargs)                                  */
    JE_ATTR,      /* a.name                                                                  */
    JE_ITEM,      /* a[b]                                                                    */
    JE_SLICE,     /* a[b:c:d] (missing parts NULL)                                           */
    JE_CALL,      /* a(args, kwn=kwv)                                                        */
    JE_FILTER,    /* a | name(args, kwn=kwv); op: filter id                                  */
    JE_TEST,      /* a is [not] name(args); op: test id; flag: negated                       */
    JE_UNARY,     /* op: '-', '+' or 'n' (not); a                                            */
    JE_BINARY,    /* op: operator (jj_op or ASCII, 'i' in, 'I' not in); a, b                 */
    JE_AND,       /* a and b                                                                 */
    JE_OR,        /* a or b                                                                  */
    JE_COND       /* b if a else c (c may be NULL: undefined)                                */
} jj_node_kind;

typedef struct jj_node jj_node;
struct jj_node {
    uint8_t kind;      /* jj_node_kind                                            */
    bool flag;         /* JE_TEST: negated                                        */
    int op;            /* operator, filter id or test id                          */
    uint32_t line;     /* source line, for messages                               */
    jj_val lit;        /* JN_TEXT / JE_LIT value                                  */
    jj_str name;       /* names: variable, attribute, filter, test, macro         */
    jj_node *a, *b, *c, *d;
    jj_node **args;    /* positional arguments / list items / dict keys           */
    uint32_t nargs;
    jj_str *kwn;       /* keyword names / macro parameter names                   */
    jj_node **kwv;     /* keyword values / dict values / macro parameter defaults */
    uint32_t nkw;
    jj_node **body;    /* statements                                              */
    uint32_t nbody;
    jj_node **ebody;   /* else statements                                         */
    uint32_t nebody;
    jj_str *targets;   /* for-loop variables                                      */
    uint32_t ntargets;
};

/* Parses tokens into a list of statements (the template body). */
lw_status jj_parse(jj_arena *a, const jj_tok *toks, size_t n, jj_node ***body, uint32_t *nbody, char *err);

/* Filter and test ids, resolved at parse time (an unknown name fails when it is evaluated). */
int jj_filter_id(jj_str name); /* -1 when unknown */
int jj_test_id(jj_str name);   /* -1 when unknown */

/* ---------------------------------------------------------------------------------------------------------
 * Interpreter state
 * ------------------------------------------------------------------------------------------------------- */

typedef struct jj_scope jj_scope;
struct jj_scope {
    jj_scope *parent; /* enclosing scope (NULL for the globals) */
    jj_str *names;    /* variable names                          */
    jj_val *vals;     /* their values                            */
    size_t n, cap;    /* count / allocated                       */
};

struct jj_macro {
    const jj_node *node; /* the JN_MACRO statement          */
    jj_scope *scope;     /* scope the macro was defined in  */
};

/* A growable byte buffer in the render arena. */
typedef struct jj_buf {
    char *p;
    size_t n, cap;
} jj_buf;

typedef struct jj_ctx {
    jj_arena *arena;       /* render arena (values, scopes, buffers)              */
    jj_buf *out;           /* where output goes now (swapped by macros/captures)   */
    jj_buf *main_out;      /* the render's own output                             */
    uint64_t steps;        /* evaluation steps so far                             */
    uint64_t max_steps;    /* limit on steps                                      */
    size_t max_output;     /* limit on main_out size                              */
    int call_depth;        /* nested macro calls                                  */
    int depth;             /* nested eval/exec calls (bounds the C stack)         */
    int64_t now;           /* seconds since the epoch for strftime_now (UTC)      */
    lw_status status;      /* first error                                         */
    bool raised;           /* the error came from raise_exception()               */
    char *err;             /* message buffer (LW_ERRMSG_SIZE)                     */
} jj_ctx;

/* Sets the context's error (first one wins) and returns false, for `return jj_fail(...)`. */
bool jj_fail(jj_ctx *c, lw_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bool jj_nomem(jj_ctx *c); /* NOMEM or TOO_LARGE depending on whether the arena cap was hit */

/* Counts `n` steps; false (with LW_ERR_TOO_LARGE) past the limit. */
static inline bool jj_step(jj_ctx *c, uint64_t n) {
    c->steps += n;
    if (c->steps > c->max_steps) return jj_fail(c, LW_ERR_TOO_LARGE, "step limit exceeded (%llu steps)",
                                                (unsigned long long)c->max_steps);
    return true;
}

/* Values (jinja-value.c) */
bool jj_buf_add(jj_ctx *c, jj_buf *b, const char *p, size_t n);
bool jj_str_new(jj_ctx *c, const char *p, size_t n, jj_str *out); /* copies into the arena */
jj_list *jj_list_new(jj_ctx *c, size_t cap);
bool jj_list_push(jj_ctx *c, jj_list *l, jj_val v);
jj_dict *jj_dict_new(jj_ctx *c, size_t cap);
bool jj_dict_set(jj_ctx *c, jj_dict *d, jj_val k, jj_val v);
/* Lookups scan linearly (template dicts are small); the scan is charged to c's step count (c may be NULL)
 * so huge hostile dicts cannot make a render slow. The limit is enforced at the caller's next jj_step. */
jj_val *jj_dict_get(jj_ctx *c, const jj_dict *d, jj_val k);
/* First occurrence of needle in hay at or after byte `from`; SIZE_MAX when none. Charged to c's steps. */
size_t jj_find(jj_ctx *c, jj_str hay, size_t from, jj_str needle);
static inline jj_val jj_listv(jj_list *l) {
    jj_val v;
    v.t = JV_LIST;
    v.u.l = l;
    return v;
}
static inline jj_val jj_dictv(jj_dict *d) {
    jj_val v;
    v.t = JV_DICT;
    v.u.d = d;
    return v;
}
bool jj_truthy(jj_val v);
const char *jj_type_name(jj_val v);
/* str(v) as Python/Jinja2 prints it (None → "None", True → "True", lists in Python repr). */
bool jj_to_str(jj_ctx *c, jj_val v, jj_str *out);
bool jj_write(jj_ctx *c, jj_buf *b, jj_val v);      /* appends str(v); undefined prints nothing */
bool jj_repr(jj_ctx *c, jj_buf *b, jj_val v, int depth);
/* json.dumps(v, ensure_ascii=..., indent=indent, sort_keys=...) as transformers' tojson; indent < 0: none. */
#define JJ_JSON_SORT_KEYS 1    /* sort object keys                        */
#define JJ_JSON_ASCII 2        /* escape non-ASCII as \uXXXX (ensure_ascii) */
bool jj_tojson(jj_ctx *c, jj_buf *b, jj_val v, int indent, int flags);
/* JSON text s as a value (objects as dicts in key order, integers as int, other numbers float), the whole
 * text one value: llama.cpp's from_json filter, and the JSON a render is given (tools, messages). */
bool jj_from_json(jj_ctx *c, jj_str s, jj_val *out);
bool jj_equal(jj_ctx *c, jj_val a, jj_val b, int depth, bool *eq);
bool jj_compare(jj_ctx *c, jj_val a, jj_val b, int *cmp); /* numbers, strings, lists of them */
void jj_fmt_float(double f, char buf[40]);
/* UTF-8 helpers: code point count and byte offset of the i-th code point. */
size_t jj_utf8_len(jj_str s);
size_t jj_utf8_offset(jj_str s, size_t cp);

/* Interpreter (jinja-eval.c) */
bool jj_eval(jj_ctx *c, jj_scope *sc, const jj_node *e, jj_val *out);
bool jj_call_macro(jj_ctx *c, jj_macro *m, const jj_val *args, size_t nargs, const jj_str *kwn,
                   const jj_val *kwv, size_t nkw, jj_val *out);
jj_scope *jj_scope_new(jj_ctx *c, jj_scope *parent);
bool jj_scope_set(jj_ctx *c, jj_scope *sc, jj_str name, jj_val v);
bool jj_render_body(jj_ctx *c, jj_scope *sc, jj_node *const *body, uint32_t n);

/* Built-ins (jinja-builtins.c). Arguments are already evaluated. */
bool jj_apply_filter(jj_ctx *c, jj_scope *sc, int id, jj_val in, const jj_val *args, size_t nargs,
                     const jj_str *kwn, const jj_val *kwv, size_t nkw, jj_val *out);
bool jj_apply_test(jj_ctx *c, int id, jj_val in, const jj_val *args, size_t nargs, bool *out);
/* obj.name(args): string/list/dict methods. *found = false when there is no such method. */
bool jj_call_method(jj_ctx *c, jj_val obj, jj_str name, const jj_val *args, size_t nargs, const jj_str *kwn,
                    const jj_val *kwv, size_t nkw, jj_val *out, bool *found);
bool jj_call_func(jj_ctx *c, int fn, const jj_val *args, size_t nargs, const jj_str *kwn, const jj_val *kwv,
                  size_t nkw, jj_val *out);
int jj_func_id(jj_str name); /* -1 when not a built-in function */

#endif
