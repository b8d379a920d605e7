/* Tool calls: parsing a reply's calls in the common chat-template conventions (Hermes/Qwen <tool_call>
 * blocks, Llama 3's bare JSON object, Mistral's [TOOL_CALLS] array) into OpenAI-shaped calls, and a GBNF
 * grammar that makes a reply exactly such calls for given OpenAI tool definitions.
 *
 * The grammar: each function's `parameters` schema goes through the JSON Schema converter on its own (so its
 * "$ref": "#/..." resolve within it), its rules renamed with a per-tool prefix; the primitive rules (string,
 * number, space, ...) are the same text in every tool's grammar and kept once. A call is the object
 * {"name": "<that name>", "arguments": <its schema>} ("parameters" for Llama 3), in the converter's layout
 * ("{" space key space ":" space value ... "}" space), and the reply is the format's wrapping of calls. */
#include "grammar/grammar.h"

#include "core/core.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_TOOLS 1024 /* functions in one tools array */

/* ---------------------------------------------------------------------------------------------------------
 * A growable string
 * ------------------------------------------------------------------------------------------------------- */

typedef struct tbuf {
    const lw_allocator *a; /* allocator                 */
    char *s;               /* NUL-terminated text       */
    size_t n, cap;         /* length, room              */
    bool bad;              /* an allocation failed      */
} tbuf;

static void tb_put(tbuf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->bad = true;
                return;
            }
            cap *= 2;
        }
        char *ns = lw__realloc(b->a, b->s, cap);
        if (!ns) {
            b->bad = true;
            return;
        }
        b->s = ns, b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void tb_str(tbuf *b, const char *s) {
    tb_put(b, s, strlen(s));
}

/* Appends s[0..n) as the body of a JSON string (quotes not included). */
static void tb_json_escaped(tbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        if (ch == '"' || ch == '\\')
            e[0] = '\\', e[1] = (char)ch, tb_put(b, e, 2);
        else if (ch == '\n')
            tb_put(b, "\\n", 2);
        else if (ch == '\r')
            tb_put(b, "\\r", 2);
        else if (ch == '\t')
            tb_put(b, "\\t", 2);
        else if (ch < 0x20)
            snprintf(e, sizeof e, "\\u%04x", ch), tb_put(b, e, 6);
        else
            tb_put(b, (const char *)&ch, 1);
    }
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Position of needle in s[from..n), or n when absent. */
static size_t find(const char *s, size_t n, size_t from, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = from; i + k <= n; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, k)) return i;
    return n;
}

static size_t skip_space(const char *s, size_t n, size_t i) {
    while (i < n && is_space(s[i])) i++;
    return i;
}

static int starts(const char *s, size_t n, size_t i, const char *lit) {
    const size_t k = strlen(lit);
    return i + k <= n && !memcmp(s + i, lit, k);
}

/* ---------------------------------------------------------------------------------------------------------
 * Parsed calls
 * ------------------------------------------------------------------------------------------------------- */

struct lw_tool_calls {
    lw_allocator alloc;       /* for everything below                          */
    char err[LW_ERRMSG_SIZE]; /* last failure                                  */
    lw_tool_call *calls;      /* the calls (strings owned here)                */
    size_t n, cap;            /* used, room                                    */
    tbuf content;             /* the text outside the calls                    */
    tbuf json;                /* lw_tool_calls_json, made on first request     */
};

static char *dup_n(const lw_allocator *a, const char *s, size_t n) {
    char *d = lw__malloc(a, n + 1);
    if (d) {
        if (n) memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static bool add_call(lw_tool_calls *t, const char *name, size_t nl, const char *args, size_t al) {
    if (t->n == t->cap) {
        size_t c = t->cap ? 2 * t->cap : 4, bytes;
        if (!lw__mul_size(c, sizeof(lw_tool_call), &bytes)) return false;
        lw_tool_call *nc = lw__realloc(&t->alloc, t->calls, bytes);
        if (!nc) return false;
        t->calls = nc, t->cap = c;
    }
    char *n = dup_n(&t->alloc, name, nl), *a = dup_n(&t->alloc, args, al);
    if (!n || !a) {
        lw__free(&t->alloc, n);
        lw__free(&t->alloc, a);
        return false;
    }
    t->calls[t->n].name = n, t->calls[t->n].arguments = a;
    t->n++;
    return true;
}

/* A call found in a parsed JSON value. */
typedef struct found {
    const char *name, *args; /* into the JSON's strings or the source text */
    size_t name_len, args_len;
} found;

/* Whether node v of j (parsed from src) is a call object: {"name": "f", "arguments" or "parameters": {...}}
 * (arguments may also be a string holding a JSON object, as some models write them; absent: "{}"). */
static bool as_call(const lw__json *j, const char *src, uint32_t v, const lw_allocator *a, found *f) {
    if (v == LW_JSON_NONE || j->n[v].type != LW_JSON_OBJ) return false;
    uint32_t name = lw__json_member(j, v, "name");
    if (name == LW_JSON_NONE) name = lw__json_member(j, v, "function");
    if (name == LW_JSON_NONE || j->n[name].type != LW_JSON_STR || j->n[name].slen == 0) return false;
    uint32_t args = lw__json_member(j, v, "arguments");
    if (args == LW_JSON_NONE) args = lw__json_member(j, v, "parameters");
    f->name = j->strs + j->n[name].str, f->name_len = j->n[name].slen;
    if (args == LW_JSON_NONE) {
        f->args = "{}", f->args_len = 2;
        return true;
    }
    if (j->n[args].type == LW_JSON_OBJ) {
        f->args = src + j->n[args].src, f->args_len = j->n[args].src_len;
        return true;
    }
    if (j->n[args].type != LW_JSON_STR) return false;
    /* a string: it must hold one JSON object */
    lw__json inner;
    char err[LW_ERRMSG_SIZE];
    const char *s = j->strs + j->n[args].str;
    if (lw__json_parse(s, j->n[args].slen, 0, a, &inner, err) != LW_OK) return false;
    bool ok = inner.n[inner.root].type == LW_JSON_OBJ;
    if (ok) f->args = s + inner.n[inner.root].src, f->args_len = inner.n[inner.root].src_len; /* no spaces */
    lw__json_free(a, &inner);
    return ok;
}

/* Content: text[from..to). */
static void keep(lw_tool_calls *t, const char *text, size_t from, size_t to) {
    if (to > from) tb_put(&t->content, text + from, to - from);
}

static lw_status oom(lw_tool_calls *t) {
    return lw__errorf(t->err, LW_ERR_NOMEM, "tool calls: out of memory");
}

/* Hermes: <tool_call> JSON </tool_call> blocks anywhere (the closing tag may be cut off at the very end). */
static lw_status parse_hermes(lw_tool_calls *t, const char *text, size_t n) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    size_t pos = 0;
    for (;;) {
        size_t at = find(text, n, pos, open);
        keep(t, text, pos, at);
        if (at == n) return LW_OK;
        size_t q = at + sizeof open - 1;
        lw__json j;
        char err[LW_ERRMSG_SIZE];
        found f;
        bool ok = false;
        size_t r = q;
        if (lw__json_parse(text + q, n - q, 1, &t->alloc, &j, err) == LW_OK) {
            if (as_call(&j, text + q, j.root, &t->alloc, &f)) {
                r = skip_space(text, n, q + j.used);
                if (starts(text, n, r, close))
                    r += sizeof close - 1, ok = true;
                else if (r == n)
                    ok = true; /* generation stopped before the closing tag */
                if (ok && !add_call(t, f.name, f.name_len, f.args, f.args_len)) {
                    lw__json_free(&t->alloc, &j);
                    return oom(t);
                }
            }
            lw__json_free(&t->alloc, &j);
        }
        if (!ok) { /* not a call: the tag is text */
            keep(t, text, at, q);
            pos = q;
            continue;
        }
        /* the whitespace between blocks is not content */
        pos = r;
        size_t next = skip_space(text, n, pos);
        if (starts(text, n, next, open)) pos = next;
    }
}

/* Calls as a JSON array of call objects at text[q..): all of them, or none (*ok 0). *end: after it. */
static lw_status parse_array(lw_tool_calls *t, const char *text, size_t n, size_t q, bool *ok, size_t *end) {
    *ok = false;
    lw__json j;
    char err[LW_ERRMSG_SIZE];
    if (lw__json_parse(text + q, n - q, 1, &t->alloc, &j, err) != LW_OK) return LW_OK;
    bool all = j.n[j.root].type == LW_JSON_ARR && j.n[j.root].first != LW_JSON_NONE;
    found f;
    for (uint32_t k = all ? j.n[j.root].first : LW_JSON_NONE; k != LW_JSON_NONE && all; k = j.n[k].next)
        all = as_call(&j, text + q, k, &t->alloc, &f);
    lw_status st = LW_OK;
    for (uint32_t k = all ? j.n[j.root].first : LW_JSON_NONE; k != LW_JSON_NONE && st == LW_OK;
         k = j.n[k].next)
        if (!as_call(&j, text + q, k, &t->alloc, &f) || !add_call(t, f.name, f.name_len, f.args, f.args_len))
            st = oom(t);
    *ok = all && st == LW_OK;
    *end = q + j.used;
    lw__json_free(&t->alloc, &j);
    return st;
}

/* Mistral: [TOOL_CALLS] then an array of calls (the marker may be missing when control tokens were not
 * printed: then the reply must start with the array). */
static lw_status parse_mistral(lw_tool_calls *t, const char *text, size_t n) {
    static const char tag[] = "[TOOL_CALLS]";
    size_t at = find(text, n, 0, tag), q;
    if (at < n)
        q = at + sizeof tag - 1;
    else if (starts(text, n, q = skip_space(text, n, 0), "["))
        at = q;
    else {
        keep(t, text, 0, n);
        return LW_OK;
    }
    bool ok;
    size_t end = q;
    lw_status st = parse_array(t, text, n, q, &ok, &end);
    if (st != LW_OK) return st;
    if (!ok) {
        keep(t, text, 0, n);
        return LW_OK;
    }
    keep(t, text, 0, at);
    keep(t, text, end, n);
    return LW_OK;
}

/* Llama 3: the reply (after <|python_tag|>, when printed) is a call object; several may follow one another,
 * separated by ';' or whitespace. Anything else is content. */
static lw_status parse_llama3(lw_tool_calls *t, const char *text, size_t n) {
    static const char tag[] = "<|python_tag|>";
    size_t q = skip_space(text, n, 0);
    if (starts(text, n, q, tag)) q = skip_space(text, n, q + sizeof tag - 1);
    const size_t n_before = t->n;
    while (q < n && text[q] == '{') {
        lw__json j;
        char err[LW_ERRMSG_SIZE];
        found f;
        if (lw__json_parse(text + q, n - q, 1, &t->alloc, &j, err) != LW_OK) break;
        bool ok = as_call(&j, text + q, j.root, &t->alloc, &f);
        if (ok && !add_call(t, f.name, f.name_len, f.args, f.args_len)) {
            lw__json_free(&t->alloc, &j);
            return oom(t);
        }
        size_t used = j.used;
        lw__json_free(&t->alloc, &j);
        if (!ok) break;
        q = skip_space(text, n, q + used);
        if (q < n && text[q] == ';') q = skip_space(text, n, q + 1);
    }
    keep(t, text, t->n > n_before ? q : 0, n);
    return LW_OK;
}

lw_tool_format lw_tool_format_detect(const char *tmpl) {
    if (!tmpl) return LW_TOOL_FORMAT_AUTO;
    if (strstr(tmpl, "<tool_call>")) return LW_TOOL_FORMAT_HERMES;
    if (strstr(tmpl, "[TOOL_CALLS]")) return LW_TOOL_FORMAT_MISTRAL;
    if (strstr(tmpl, "<|python_tag|>") || strstr(tmpl, "ipython")) return LW_TOOL_FORMAT_LLAMA3;
    return LW_TOOL_FORMAT_AUTO;
}

static void clear_calls(lw_tool_calls *t) {
    for (size_t i = 0; i < t->n; i++) {
        lw__free(&t->alloc, (void *)t->calls[i].name);
        lw__free(&t->alloc, (void *)t->calls[i].arguments);
    }
    t->n = 0;
    t->content.n = 0;
    if (t->content.s) t->content.s[0] = 0;
}

lw_status lw_tool_calls_parse(const char *text, size_t len, lw_tool_format format, const lw_allocator *alloc,
                              lw_tool_calls **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_tool_calls *t = lw__calloc(&a, 1, sizeof *t);
    *out = t;
    if (!t) return LW_ERR_NOMEM;
    t->alloc = a;
    t->content.a = t->json.a = &t->alloc;
    if (!text && len) return lw__errorf(t->err, LW_ERR_INVALID_ARG, "lw_tool_calls_parse: NULL text");
    if (!text) text = "";
    lw_status st = LW_OK;
    switch (format) {
    case LW_TOOL_FORMAT_HERMES:
        st = parse_hermes(t, text, len);
        break;
    case LW_TOOL_FORMAT_LLAMA3:
        st = parse_llama3(t, text, len);
        break;
    case LW_TOOL_FORMAT_MISTRAL:
        st = parse_mistral(t, text, len);
        break;
    case LW_TOOL_FORMAT_AUTO: { /* the first format that finds calls */
        lw_status (*const order[])(lw_tool_calls *, const char *, size_t) = {parse_hermes, parse_mistral,
                                                                             parse_llama3};
        for (size_t i = 0; i < 3 && st == LW_OK; i++) {
            clear_calls(t);
            st = order[i](t, text, len);
            if (t->n) break;
        }
        break;
    }
    default:
        return lw__errorf(t->err, LW_ERR_INVALID_ARG, "lw_tool_calls_parse: unknown format %d", (int)format);
    }
    if (st == LW_OK && t->content.bad) st = oom(t);
    if (st != LW_OK) return st;
    /* trim the content */
    tbuf *c = &t->content;
    size_t b = 0, e = c->n;
    while (b < e && is_space(c->s[b])) b++;
    while (e > b && is_space(c->s[e - 1])) e--;
    if (c->s) {
        memmove(c->s, c->s + b, e - b);
        c->n = e - b;
        c->s[c->n] = 0;
    }
    return LW_OK;
}

size_t lw_tool_calls_count(const lw_tool_calls *t) {
    return t ? t->n : 0;
}

const lw_tool_call *lw_tool_calls_get(const lw_tool_calls *t, size_t i) {
    return t && i < t->n ? &t->calls[i] : NULL;
}

const char *lw_tool_calls_content(const lw_tool_calls *t, size_t *len) {
    if (len) *len = t && t->content.s ? t->content.n : 0;
    return t && t->content.s ? t->content.s : "";
}

const char *lw_tool_calls_json(const lw_tool_calls *t, size_t *len) {
    if (len) *len = 0;
    if (!t) return NULL;
    lw_tool_calls *m = (lw_tool_calls *)t; /* made once, on first request */
    if (!m->json.s || m->json.bad) {
        m->json.n = 0, m->json.bad = false;
        tb_str(&m->json, "[");
        for (size_t i = 0; i < t->n; i++) {
            char id[128];
            snprintf(id, sizeof id,
                     "%s{\"id\": \"call_%zu\", \"type\": \"function\", \"function\": {\"name\": \"",
                     i ? ", " : "", i);
            tb_str(&m->json, id);
            tb_json_escaped(&m->json, t->calls[i].name, strlen(t->calls[i].name));
            tb_str(&m->json, "\", \"arguments\": \"");
            tb_json_escaped(&m->json, t->calls[i].arguments, strlen(t->calls[i].arguments));
            tb_str(&m->json, "\"}}");
        }
        tb_str(&m->json, "]");
        if (m->json.bad) return NULL;
    }
    if (len) *len = m->json.n;
    return m->json.s;
}

const char *lw_tool_calls_error(const lw_tool_calls *t) {
    return t ? t->err : "out of memory";
}

void lw_tool_calls_free(lw_tool_calls *t) {
    if (!t) return;
    lw_allocator a = t->alloc;
    clear_calls(t);
    lw__free(&a, t->calls);
    lw__free(&a, t->content.s);
    lw__free(&a, t->json.s);
    lw__free(&a, t);
}

/* ---------------------------------------------------------------------------------------------------------
 * The grammar
 * ------------------------------------------------------------------------------------------------------- */

/* Whether the name is OpenAI's [a-zA-Z0-9_-]{1,64} (so it needs no escaping in JSON or GBNF). */
static bool good_name(const char *s, size_t n) {
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Whether the identifier s[0..n) is one of the converter's own rule names (root, r<N>): renamed per tool. */
static bool own_rule(const char *s, size_t n) {
    if (n == 4 && !memcmp(s, "root", 4)) return true;
    if (n < 2 || s[0] != 'r') return false;
    for (size_t i = 1; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

/* Appends one line of the converter's GBNF with its own rule names prefixed (literals and classes kept). */
static void rename_line(tbuf *b, const char *s, size_t n, const char *prefix) {
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '"' || c == '[') { /* a literal or a class, with backslash escapes */
            const char close = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < n && s[j] != close) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            j = j < n ? j + 1 : n;
            tb_put(b, s + i, j - i);
            i = j;
        } else if (ident_char(c)) {
            size_t j = i;
            while (j < n && ident_char(s[j])) j++;
            if (own_rule(s + i, j - i)) tb_str(b, prefix);
            tb_put(b, s + i, j - i);
            i = j;
        } else {
            tb_put(b, s + i, 1);
            i++;
        }
    }
}

/* Adds the converter's GBNF for one tool: its own rules renamed into rules, its primitive rules (the lines
 * after "root ::=") into prims unless already there. */
static void add_tool_rules(tbuf *rules, tbuf *prims, const char *g, size_t n, const char *prefix) {
    bool after_root = false;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && g[e] != '\n') e++;
        const size_t len = e - i;
        if (len) {
            size_t k = 0;
            while (k < len && ident_char(g[i + k])) k++;
            const bool own = own_rule(g + i, k);
            if (!own || after_root) {
                /* a primitive: the same line in every tool's grammar; keep the first */
                bool have = false;
                for (size_t p = 0; prims->s && p < prims->n && !have;) {
                    size_t q = p;
                    while (q < prims->n && prims->s[q] != '\n') q++;
                    have = q - p == len && !memcmp(prims->s + p, g + i, len);
                    p = q + 1;
                }
                if (!have) tb_put(prims, g + i, len), tb_str(prims, "\n");
            } else {
                rename_line(rules, g + i, len, prefix);
                tb_str(rules, "\n");
                if (k == 4 && !memcmp(g + i, "root", 4)) after_root = true;
            }
        }
        i = e + 1;
    }
}

static lw_status build_tools_gbnf(const char *tools, size_t len, lw_tool_format format, const char *only,
                                  int parallel, const lw_allocator *a, tbuf *out, char *err) {
    if (!tools) return lw__errorf(err, LW_ERR_INVALID_ARG, "tools: NULL text");
    if (format == LW_TOOL_FORMAT_AUTO) format = LW_TOOL_FORMAT_HERMES;
    if (format != LW_TOOL_FORMAT_HERMES && format != LW_TOOL_FORMAT_LLAMA3 &&
        format != LW_TOOL_FORMAT_MISTRAL)
        return lw__errorf(err, LW_ERR_INVALID_ARG, "tools: unknown format %d", (int)format);
    lw__json j;
    lw_status st = lw__json_parse(tools, len, 0, a, &j, err);
    if (st != LW_OK) return st;
    tbuf rules = {a, NULL, 0, 0, false}, prims = {a, NULL, 0, 0, false}, calls = {a, NULL, 0, 0, false};
    const char *args_key = format == LW_TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments";
    uint32_t n_tools = 0, n_used = 0;
    if (j.n[j.root].type != LW_JSON_ARR) {
        st = lw__errorf(err, LW_ERR_INVALID_ARG, "tools: not a JSON array");
        goto done;
    }
    for (uint32_t k = j.n[j.root].first; k != LW_JSON_NONE && st == LW_OK; k = j.n[k].next) {
        if (++n_tools > MAX_TOOLS) {
            st = lw__errorf(err, LW_ERR_TOO_LARGE, "tools: more than %d", MAX_TOOLS);
            break;
        }
        uint32_t fn = lw__json_member(&j, k, "function");
        if (fn == LW_JSON_NONE) fn = k; /* a bare function object */
        const uint32_t name = lw__json_member(&j, fn, "name"), params = lw__json_member(&j, fn, "parameters");
        if (j.n[fn].type != LW_JSON_OBJ || name == LW_JSON_NONE || j.n[name].type != LW_JSON_STR ||
            !good_name(j.strs + j.n[name].str, j.n[name].slen)) {
            st = lw__errorf(err, LW_ERR_INVALID_ARG, "tools[%u]: needs a name of [a-zA-Z0-9_-]{1,64}",
                            n_tools - 1);
            break;
        }
        const char *nm = j.strs + j.n[name].str;
        const size_t nl = j.n[name].slen;
        if (only && (strlen(only) != nl || memcmp(only, nm, nl))) continue;
        /* its arguments: the parameters schema, or no arguments at all */
        static const char no_args[] = "{\"type\": \"object\", \"additionalProperties\": false}";
        const char *schema = no_args;
        size_t sl = sizeof no_args - 1;
        if (params != LW_JSON_NONE) schema = tools + j.n[params].src, sl = j.n[params].src_len;
        char *g = NULL;
        size_t gl = 0;
        char msg[LW_ERRMSG_SIZE];
        if ((st = lw__json_schema_to_gbnf(schema, sl, a, &g, &gl, msg)) != LW_OK) {
            lw__errorf(err, st, "tools[%u] (%.*s): %s", n_tools - 1, (int)nl, nm, msg);
            break;
        }
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%u-", n_used);
        add_tool_rules(&rules, &prims, g, gl, prefix);
        lw__free(a, g);
        char line[256];
        snprintf(
            line, sizeof line,
            "%scall ::= \"{\" space \"\\\"name\\\"\" space \":\" space \"\\\"%.*s\\\"\" space \",\" space "
            "\"\\\"%s\\\"\" space \":\" space %sroot \"}\" space\n",
            prefix, (int)nl, nm, args_key, prefix);
        tb_str(&rules, line);
        char alt[40];
        snprintf(alt, sizeof alt, "%s%scall", n_used ? " | " : "", prefix);
        tb_str(&calls, alt);
        n_used++;
    }
    if (st == LW_OK && n_used == 0)
        st = only ? lw__errorf(err, LW_ERR_NOT_FOUND, "tools: no function named '%s'", only)
                  : lw__errorf(err, LW_ERR_INVALID_ARG, "tools: the array is empty");
    if (st != LW_OK) goto done;
    switch (format) {
    case LW_TOOL_FORMAT_LLAMA3:
        tb_str(out, "root ::= call\n");
        break;
    case LW_TOOL_FORMAT_MISTRAL:
        tb_str(out, parallel ? "root ::= \"[\" space call (\",\" space call)* \"]\" space\n"
                             : "root ::= \"[\" space call \"]\" space\n");
        break;
    default:
        tb_str(out, parallel
                        ? "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\" (\"\\n<tool_call>\\n\" call "
                          "\"\\n</tool_call>\")*\n"
                        : "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n");
    }
    tb_str(out, "call ::= ");
    tb_put(out, calls.s, calls.n);
    tb_str(out, "\n");
    tb_put(out, rules.s, rules.n);
    tb_put(out, prims.s, prims.n);
    if (!strstr(prims.s ? prims.s : "", "space ::="))
        tb_str(out, "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n");
    if (out->bad || rules.bad || prims.bad || calls.bad)
        st = lw__errorf(err, LW_ERR_NOMEM, "tools: out of memory");
done:
    lw__free(a, rules.s);
    lw__free(a, prims.s);
    lw__free(a, calls.s);
    lw__json_free(a, &j);
    return st;
}

lw_status lw_tool_grammar_gbnf(const char *tools, size_t len, lw_tool_format format, const char *only,
                               int parallel, const lw_allocator *alloc, char **out, size_t *out_len,
                               char *err, size_t err_size) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    if (out_len) *out_len = 0;
    lw_allocator a = lw__allocator_or_default(alloc);
    char msg[LW_ERRMSG_SIZE];
    tbuf b = {&a, NULL, 0, 0, false};
    lw_status st = build_tools_gbnf(tools, len, format, only, parallel, &a, &b, msg);
    if (st != LW_OK) {
        lw__free(&a, b.s);
        if (err && err_size) {
            size_t k = strlen(msg) < err_size - 1 ? strlen(msg) : err_size - 1;
            memcpy(err, msg, k);
            err[k] = 0;
        }
        return st;
    }
    *out = b.s;
    if (out_len) *out_len = b.n;
    return LW_OK;
}

lw_status lw_grammar_from_tools(const char *tools, size_t len, lw_tool_format format, const char *only,
                                int parallel, const lw_vocab *vocab, const lw_allocator *alloc,
                                lw_grammar **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    lw_allocator a = lw__allocator_or_default(alloc);
    char msg[LW_ERRMSG_SIZE];
    tbuf b = {&a, NULL, 0, 0, false};
    lw_status st = build_tools_gbnf(tools, len, format, only, parallel, &a, &b, msg);
    if (st == LW_OK)
        st = lw_grammar_parse(b.s, b.n, "root", vocab, alloc, out);
    else
        st = lw__grammar_failed(alloc, st, msg, out);
    lw__free(&a, b.s);
    return st;
}
