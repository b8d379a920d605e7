/* Chat templates: the tree-walking interpreter. Expressions evaluate to jj_val in the render arena;
 * statements append to the current output buffer. Every node evaluated costs a step (bounded), macro calls
 * and nesting are bounded, and errors carry a message and stop the render at once. */
#include "chat/jinja.h"

#include <math.h>
#include <string.h>

enum { R_ERR = 0, R_OK, R_BREAK, R_CONTINUE };

/* ---------------------------------------------------------------------------------------------------------
 * Scopes
 * ------------------------------------------------------------------------------------------------------- */

jj_scope *jj_scope_new(jj_ctx *c, jj_scope *parent) {
    jj_scope *s = jj_zalloc(c->arena, sizeof *s);
    if (!s) return jj_nomem(c), NULL;
    s->parent = parent;
    return s;
}

bool jj_scope_set(jj_ctx *c, jj_scope *sc, jj_str name, jj_val v) {
    if (!jj_step(c, (sc->n >> 4) + (name.n >> 6))) return false;
    for (size_t i = 0; i < sc->n; i++)
        if (jj_str_eq(sc->names[i], name)) {
            sc->vals[i] = v;
            return true;
        }
    if (sc->n == sc->cap) {
        size_t ncap = sc->cap ? sc->cap * 2 : 8;
        jj_str *nn = jj_grow(c->arena, NULL, 0, ncap * sizeof(jj_str));
        jj_val *nv = jj_grow(c->arena, NULL, 0, ncap * sizeof(jj_val));
        if (!nn || !nv) return jj_nomem(c);
        if (sc->n) {
            memcpy(nn, sc->names, sc->n * sizeof(jj_str));
            memcpy(nv, sc->vals, sc->n * sizeof(jj_val));
        }
        sc->names = nn;
        sc->vals = nv;
        sc->cap = ncap;
    }
    sc->names[sc->n] = name;
    sc->vals[sc->n] = v;
    sc->n++;
    return true;
}

/* Finds a variable from the innermost scope out; the scan is charged to the step count. */
static jj_val *lookup(jj_ctx *c, jj_scope *sc, jj_str name) {
    size_t scanned = 0;
    uint64_t bytes = 0; /* bytes compared between names of equal length */
    for (; sc; sc = sc->parent) {
        for (size_t i = sc->n; i-- > 0;) {
            if (sc->names[i].n == name.n) bytes += name.n;
            if (jj_str_eq(sc->names[i], name)) {
                c->steps += ((scanned + sc->n - i) >> 4) + (bytes >> 6);
                return &sc->vals[i];
            }
        }
        scanned += sc->n;
    }
    c->steps += (scanned >> 4) + (bytes >> 6);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * Arithmetic and operators
 * ------------------------------------------------------------------------------------------------------- */

static bool is_num(jj_val v) {
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
static double num_f(jj_val v) {
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t num_i(jj_val v) {
    return v.t == JV_INT ? v.u.i : (int64_t)v.u.b;
}

static const char *op_name(int op) {
    switch (op) {
    case JO_FLOORDIV: return "//";
    case JO_POW: return "**";
    case '+': return "+";
    case '-': return "-";
    case '*': return "*";
    case '/': return "/";
    case '%': return "%";
    default: return "?";
    }
}

static bool bad_operands(jj_ctx *c, int op, jj_val a, jj_val b) {
    return jj_fail(c, LW_ERR_INVALID_ARG, "unsupported operand types for %s: '%s' and '%s'", op_name(op),
                   jj_type_name(a), jj_type_name(b));
}

/* s * n for strings and lists, with the size checked before allocating. */
static bool repeat(jj_ctx *c, jj_val s, int64_t n, jj_val *out) {
    if (n < 0) n = 0;
    if ((s.t == JV_STR && s.u.s.n == 0) || (s.t == JV_LIST && s.u.l->n == 0)) n = 0; /* '' * 10**18 is '' */
    if (s.t == JV_STR) {
        size_t bytes;
        if (!lw__mul_size(s.u.s.n, (size_t)n, &bytes) || bytes > c->arena->limit)
            return jj_fail(c, LW_ERR_TOO_LARGE, "string repetition too large");
        jj_buf b = {0};
        for (int64_t i = 0; i < n; i++)
            if (!jj_buf_add(c, &b, s.u.s.p, s.u.s.n) || !jj_step(c, 1)) return false;
        *out = jj_strv(jj_s(b.p ? b.p : "", b.n));
        return true;
    }
    size_t items;
    if (!lw__mul_size(s.u.l->n, (size_t)n, &items) || items > c->arena->limit / sizeof(jj_val))
        return jj_fail(c, LW_ERR_TOO_LARGE, "list repetition too large");
    jj_list *l = jj_list_new(c, items);
    if (!l) return false;
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < s.u.l->n; k++)
            if (!jj_list_push(c, l, s.u.l->v[k]) || !jj_step(c, 1)) return false;
    *out = jj_listv(l);
    return true;
}

static bool arith(jj_ctx *c, int op, jj_val a, jj_val b, jj_val *out) {
    if (op == '+') {
        if (a.t == JV_STR && b.t == JV_STR) {
            jj_buf buf = {0};
            if (!jj_buf_add(c, &buf, a.u.s.p, a.u.s.n) || !jj_buf_add(c, &buf, b.u.s.p, b.u.s.n)) return false;
            *out = jj_strv(jj_s(buf.p ? buf.p : "", buf.n));
            return true;
        }
        if (a.t == JV_LIST && b.t == JV_LIST) {
            jj_list *l = jj_list_new(c, a.u.l->n + b.u.l->n);
            if (!l) return false;
            for (size_t i = 0; i < a.u.l->n; i++)
                if (!jj_list_push(c, l, a.u.l->v[i])) return false;
            for (size_t i = 0; i < b.u.l->n; i++)
                if (!jj_list_push(c, l, b.u.l->v[i])) return false;
            *out = jj_listv(l);
            return jj_step(c, l->n);
        }
    }
    if (op == '*') {
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(c, a, num_i(b), out);
        if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(c, b, num_i(a), out);
    }
    if (!is_num(a) || !is_num(b)) return bad_operands(c, op, a, b);
    bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
    if (op == '/') {
        if (num_f(b) == 0) return jj_fail(c, LW_ERR_INVALID_ARG, "division by zero");
        *out = jj_float(num_f(a) / num_f(b));
        return true;
    }
    if (fl) {
        double x = num_f(a), y = num_f(b), r;
        switch (op) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = x * y; break;
        case JO_FLOORDIV:
            if (y == 0) return jj_fail(c, LW_ERR_INVALID_ARG, "division by zero");
            r = floor(x / y);
            break;
        case '%':
            if (y == 0) return jj_fail(c, LW_ERR_INVALID_ARG, "modulo by zero");
            r = fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            break;
        case JO_POW: r = pow(x, y); break;
        default: return bad_operands(c, op, a, b);
        }
        *out = jj_float(r);
        return true;
    }
    int64_t x = num_i(a), y = num_i(b), r;
    bool ok = true;
    switch (op) {
    case '+': ok = !__builtin_add_overflow(x, y, &r); break;
    case '-': ok = !__builtin_sub_overflow(x, y, &r); break;
    case '*': ok = !__builtin_mul_overflow(x, y, &r); break;
    case JO_FLOORDIV:
    case '%':
        if (y == 0) return jj_fail(c, LW_ERR_INVALID_ARG, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
            ok = op == '%';
            r = 0;
            break;
        }
        r = op == '%' ? x % y : x / y;
        if (op == '%' && r != 0 && ((r < 0) != (y < 0))) r += y;
        if (op == JO_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0))) r -= 1;
        break;
    case JO_POW:
        if (y < 0) {
            *out = jj_float(pow((double)x, (double)y));
            return true;
        }
        r = 1;
        for (int64_t k = 0; k < y && ok; k++) {
            ok = !__builtin_mul_overflow(r, x, &r);
            if (x == 0 || x == 1) break;
            if (x == -1) {
                r = (y % 2) ? -1 : 1;
                break;
            }
        }
        if (x == 0 && y > 0) r = 0;
        break;
    default: return bad_operands(c, op, a, b);
    }
    if (!ok) return jj_fail(c, LW_ERR_OVERFLOW, "integer overflow in %s", op_name(op));
    *out = jj_int(r);
    return true;
}

static bool contains(jj_ctx *c, jj_val item, jj_val coll, bool *res) {
    *res = false;
    if (coll.t == JV_STR) {
        if (item.t != JV_STR)
            return jj_fail(c, LW_ERR_INVALID_ARG, "'in <string>' requires a string, not %s", jj_type_name(item));
        *res = jj_find(c, coll.u.s, 0, item.u.s) != SIZE_MAX;
        return jj_step(c, 1);
    }
    if (coll.t == JV_LIST) {
        for (size_t i = 0; i < coll.u.l->n; i++) {
            bool eq;
            if (!jj_equal(c, item, coll.u.l->v[i], 0, &eq)) return false;
            if (eq) {
                *res = true;
                break;
            }
        }
        return true;
    }
    if (coll.t == JV_DICT) {
        *res = jj_dict_get(c, coll.u.d, item) != NULL;
        return jj_step(c, 1);
    }
    if (coll.t == JV_UNDEF || coll.t == JV_NONE) return true;
    return jj_fail(c, LW_ERR_INVALID_ARG, "argument of type '%s' is not iterable", jj_type_name(coll));
}

/* ---------------------------------------------------------------------------------------------------------
 * Subscripts
 * ------------------------------------------------------------------------------------------------------- */

static jj_val get_attr(jj_ctx *c, jj_val obj, jj_str name) {
    if (obj.t == JV_DICT) {
        jj_val *v = jj_dict_get(c, obj.u.d, jj_strv(name));
        if (v) return *v;
    }
    return jj_undef();
}

static bool get_item(jj_ctx *c, jj_val obj, jj_val key, jj_val *out) {
    *out = jj_undef();
    if (obj.t == JV_DICT) {
        jj_val *v = jj_dict_get(c, obj.u.d, key);
        if (v) *out = *v;
        return true;
    }
    if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = num_i(key);
        size_t n = obj.t == JV_LIST ? obj.u.l->n : jj_utf8_len(obj.u.s);
        if (i < 0) i += (int64_t)n;
        if (i < 0 || (uint64_t)i >= n) return true; /* out of range: undefined, as Jinja2 */
        if (obj.t == JV_LIST) {
            *out = obj.u.l->v[i];
        } else {
            size_t b0 = jj_utf8_offset(obj.u.s, (size_t)i), b1 = jj_utf8_offset(obj.u.s, (size_t)i + 1);
            *out = jj_strv(jj_s(obj.u.s.p + b0, b1 - b0));
        }
        return jj_step(c, obj.t == JV_STR ? obj.u.s.n >> 6 : 0);
    }
    return true;
}

/* Python slice semantics over n elements. */
static bool slice_bounds(jj_ctx *c, jj_val vstart, jj_val vstop, jj_val vstep, int64_t n, int64_t *start,
                         int64_t *stop, int64_t *step) {
    *step = 1;
    if (vstep.t != JV_UNDEF && vstep.t != JV_NONE) {
        if (vstep.t != JV_INT) return jj_fail(c, LW_ERR_INVALID_ARG, "slice step must be an integer");
        *step = vstep.u.i;
        if (*step == 0) return jj_fail(c, LW_ERR_INVALID_ARG, "slice step cannot be zero");
    }
    bool neg = *step < 0;
    int64_t lo = neg ? -1 : 0, hi = neg ? n - 1 : n;
    jj_val vs[2] = {vstart, vstop};
    int64_t *outs[2] = {start, stop};
    for (int k = 0; k < 2; k++) {
        if (vs[k].t == JV_UNDEF || vs[k].t == JV_NONE) { /* defaults: the whole range in step's direction */
            if (k == 0) *outs[k] = neg ? hi : lo;
            else *outs[k] = neg ? lo : hi;
            continue;
        }
        if (vs[k].t != JV_INT && vs[k].t != JV_BOOL)
            return jj_fail(c, LW_ERR_INVALID_ARG, "slice indices must be integers");
        int64_t x = num_i(vs[k]);
        if (x < 0) {
            x += n;
            if (x < lo) x = lo;
        } else if (x > hi) {
            x = hi;
        }
        *outs[k] = x;
    }
    return true;
}

static bool do_slice(jj_ctx *c, jj_val obj, jj_val a, jj_val b, jj_val s, jj_val *out) {
    int64_t start, stop, step;
    if (obj.t == JV_LIST) {
        if (!slice_bounds(c, a, b, s, (int64_t)obj.u.l->n, &start, &stop, &step)) return false;
        jj_list *l = jj_list_new(c, 0);
        if (!l) return false;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            if (!jj_list_push(c, l, obj.u.l->v[i]) || !jj_step(c, 1)) return false;
        *out = jj_listv(l);
        return true;
    }
    if (obj.t == JV_STR) {
        jj_str str = obj.u.s;
        if (!jj_step(c, str.n >> 6)) return false;
        size_t n = jj_utf8_len(str);
        if (!slice_bounds(c, a, b, s, (int64_t)n, &start, &stop, &step)) return false;
        if (n == str.n && step == 1) { /* ASCII, contiguous: a view, no copy */
            *out = jj_strv(jj_s(str.p + start, stop > start ? (size_t)(stop - start) : 0));
            return jj_step(c, 1);
        }
        /* code point offsets, then gather */
        size_t *off = jj_alloc(c->arena, (n + 1) * sizeof(size_t));
        if (!off) return jj_nomem(c);
        size_t k = 0;
        for (size_t i = 0; i < str.n; i++)
            if (((unsigned char)str.p[i] & 0xC0) != 0x80) off[k++] = i;
        off[n] = str.n;
        jj_buf buf = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            if (!jj_buf_add(c, &buf, str.p + off[i], off[i + 1] - off[i]) || !jj_step(c, 1)) return false;
        *out = jj_strv(jj_s(buf.p ? buf.p : "", buf.n));
        return true;
    }
    if (obj.t == JV_UNDEF || obj.t == JV_NONE) {
        *out = jj_undef();
        return true;
    }
    return jj_fail(c, LW_ERR_INVALID_ARG, "cannot slice %s", jj_type_name(obj));
}

/* ---------------------------------------------------------------------------------------------------------
 * Calls
 * ------------------------------------------------------------------------------------------------------- */

#define JJ_SMALL_ARGS 8

typedef struct argv_t {
    jj_val *v;                     /* positional values            */
    jj_val *kv;                    /* keyword values               */
    jj_val small[JJ_SMALL_ARGS];   /* storage for few arguments    */
    jj_val ksmall[JJ_SMALL_ARGS];
} argv_t;

static bool eval_args(jj_ctx *c, jj_scope *sc, const jj_node *e, argv_t *A) {
    A->v = e->nargs <= JJ_SMALL_ARGS ? A->small : jj_alloc(c->arena, e->nargs * sizeof(jj_val));
    A->kv = e->nkw <= JJ_SMALL_ARGS ? A->ksmall : jj_alloc(c->arena, e->nkw * sizeof(jj_val));
    if (!A->v || !A->kv) return jj_nomem(c);
    for (uint32_t i = 0; i < e->nargs; i++)
        if (!jj_eval(c, sc, e->args[i], &A->v[i])) return false;
    for (uint32_t i = 0; i < e->nkw; i++)
        if (!jj_eval(c, sc, e->kwv[i], &A->kv[i])) return false;
    return true;
}

static bool exec_body(jj_ctx *c, jj_scope *sc, jj_node *const *body, uint32_t n, int *res);

bool jj_call_macro(jj_ctx *c, jj_macro *m, const jj_val *args, size_t nargs, const jj_str *kwn, const jj_val *kwv,
                   size_t nkw, jj_val *out) {
    const jj_node *md = m->node;
    if (c->call_depth >= JJ_MAX_CALL_DEPTH)
        return jj_fail(c, LW_ERR_TOO_LARGE, "macro calls nested deeper than %d", JJ_MAX_CALL_DEPTH);
    if (nargs > md->nkw)
        return jj_fail(c, LW_ERR_INVALID_ARG, "macro '%.*s' takes %u arguments, %zu given", (int)md->name.n,
                       md->name.p, md->nkw, nargs);
    jj_scope *sc = jj_scope_new(c, m->scope);
    if (!sc) return false;
    size_t name_bytes = 0; /* matching keyword names is linear in their length */
    for (size_t k = 0; k < nkw; k++) name_bytes += kwn[k].n;
    if (!jj_step(c, (uint64_t)(name_bytes >> 6) * md->nkw)) return false;
    for (uint32_t i = 0; i < md->nkw; i++) {
        jj_val v = jj_undef();
        bool have = false;
        if (i < nargs) {
            v = args[i];
            have = true;
        }
        for (size_t k = 0; k < nkw; k++)
            if (jj_str_eq(kwn[k], md->kwn[i])) {
                v = kwv[k];
                have = true;
            }
        if (!have && md->kwv[i] && !jj_eval(c, sc, md->kwv[i], &v)) return false;
        if (!jj_scope_set(c, sc, md->kwn[i], v)) return false;
    }
    for (size_t k = 0; k < nkw; k++) {
        bool known = false;
        for (uint32_t i = 0; i < md->nkw; i++) known |= jj_str_eq(kwn[k], md->kwn[i]);
        if (!known)
            return jj_fail(c, LW_ERR_INVALID_ARG, "macro '%.*s' has no parameter '%.*s'", (int)md->name.n, md->name.p,
                           (int)(kwn[k].n > 40 ? 40 : kwn[k].n), kwn[k].p);
    }
    jj_buf buf = {0}, *saved = c->out;
    c->out = &buf;
    c->call_depth++;
    int res;
    bool ok = exec_body(c, sc, md->body, md->nbody, &res);
    c->call_depth--;
    c->out = saved;
    if (!ok) return false;
    *out = jj_strv(jj_s(buf.p ? buf.p : "", buf.n));
    return true;
}

static bool eval_call(jj_ctx *c, jj_scope *sc, const jj_node *e, jj_val *out) {
    argv_t A;
    if (e->a->kind == JE_ATTR) { /* obj.method(...) unless obj is a dict holding a callable under that key */
        jj_val obj;
        if (!jj_eval(c, sc, e->a->a, &obj)) return false;
        jj_val f = get_attr(c, obj, e->a->name);
        if (f.t != JV_MACRO && f.t != JV_FUNC) {
            bool found;
            if (!eval_args(c, sc, e, &A)) return false;
            if (!jj_call_method(c, obj, e->a->name, A.v, e->nargs, e->kwn, A.kv, e->nkw, out, &found)) return false;
            if (!found)
                return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: %s has no method '%.*s'", e->line, jj_type_name(obj),
                               (int)(e->a->name.n > 40 ? 40 : e->a->name.n), e->a->name.p);
            return true;
        }
    }
    jj_val f;
    if (!jj_eval(c, sc, e->a, &f)) return false;
    if (!eval_args(c, sc, e, &A)) return false;
    if (f.t == JV_MACRO) return jj_call_macro(c, f.u.m, A.v, e->nargs, e->kwn, A.kv, e->nkw, out);
    if (f.t == JV_FUNC) return jj_call_func(c, f.u.fn, A.v, e->nargs, e->kwn, A.kv, e->nkw, out);
    if (f.t == JV_UNDEF && e->a->kind == JE_NAME)
        return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: '%.*s' is undefined", e->line,
                       (int)(e->a->name.n > 40 ? 40 : e->a->name.n), e->a->name.p);
    return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: %s is not callable", e->line, jj_type_name(f));
}

/* ---------------------------------------------------------------------------------------------------------
 * Expressions
 * ------------------------------------------------------------------------------------------------------- */

bool jj_eval(jj_ctx *c, jj_scope *sc, const jj_node *e, jj_val *out) {
    if (!jj_step(c, 1)) return false;
    if (++c->depth > JJ_MAX_EVAL_DEPTH) {
        c->depth--;
        return jj_fail(c, LW_ERR_TOO_LARGE, "template evaluation nested too deeply");
    }
    bool ok = true;
    jj_val a, b;
    switch (e->kind) {
    case JE_LIT: *out = e->lit; break;
    case JE_NAME: {
        jj_val *v = lookup(c, sc, e->name);
        if (v) {
            *out = *v;
        } else {
            int fn = jj_func_id(e->name);
            *out = jj_undef();
            if (fn >= 0) {
                out->t = JV_FUNC;
                out->u.fn = fn;
            }
        }
        break;
    }
    case JE_LIST: {
        jj_list *l = jj_list_new(c, e->nargs);
        ok = l != NULL;
        for (uint32_t i = 0; ok && i < e->nargs; i++) ok = jj_eval(c, sc, e->args[i], &a) && jj_list_push(c, l, a);
        if (ok) *out = jj_listv(l);
        break;
    }
    case JE_DICT: {
        jj_dict *d = jj_dict_new(c, e->nargs);
        ok = d != NULL;
        for (uint32_t i = 0; ok && i < e->nargs; i++)
            ok = jj_eval(c, sc, e->args[i], &a) && jj_eval(c, sc, e->kwv[i], &b) && jj_dict_set(c, d, a, b);
        if (ok) *out = jj_dictv(d);
        break;
    }
    case JE_ATTR:
        ok = jj_eval(c, sc, e->a, &a);
        if (ok) *out = get_attr(c, a, e->name);
        break;
    case JE_ITEM: ok = jj_eval(c, sc, e->a, &a) && jj_eval(c, sc, e->b, &b) && get_item(c, a, b, out); break;
    case JE_SLICE: {
        jj_val s0 = jj_undef(), s1 = jj_undef(), s2 = jj_undef();
        ok = jj_eval(c, sc, e->a, &a) && (!e->b || jj_eval(c, sc, e->b, &s0)) && (!e->c || jj_eval(c, sc, e->c, &s1)) &&
             (!e->d || jj_eval(c, sc, e->d, &s2)) && do_slice(c, a, s0, s1, s2, out);
        break;
    }
    case JE_CALL: ok = eval_call(c, sc, e, out); break;
    case JE_FILTER: {
        argv_t A;
        if (e->op < 0) {
            ok = jj_fail(c, LW_ERR_INVALID_ARG, "line %u: unknown filter '%.*s'", e->line,
                         (int)(e->name.n > 40 ? 40 : e->name.n), e->name.p);
            break;
        }
        ok = jj_eval(c, sc, e->a, &a) && eval_args(c, sc, e, &A) &&
             jj_apply_filter(c, sc, e->op, a, A.v, e->nargs, e->kwn, A.kv, e->nkw, out);
        break;
    }
    case JE_TEST: {
        argv_t A;
        bool r = false;
        if (e->op < 0) {
            ok = jj_fail(c, LW_ERR_INVALID_ARG, "line %u: unknown test '%.*s'", e->line,
                         (int)(e->name.n > 40 ? 40 : e->name.n), e->name.p);
            break;
        }
        ok = jj_eval(c, sc, e->a, &a) && eval_args(c, sc, e, &A) && jj_apply_test(c, e->op, a, A.v, e->nargs, &r);
        if (ok) *out = jj_bool(e->flag ? !r : r);
        break;
    }
    case JE_UNARY:
        ok = jj_eval(c, sc, e->a, &a);
        if (!ok) break;
        if (e->op == 'n') {
            *out = jj_bool(!jj_truthy(a));
        } else if (!is_num(a)) {
            ok = jj_fail(c, LW_ERR_INVALID_ARG, "bad operand type for unary %c: '%s'", e->op, jj_type_name(a));
        } else if (e->op == '-') {
            if (a.t == JV_FLOAT) *out = jj_float(-a.u.f);
            else if (num_i(a) == INT64_MIN) ok = jj_fail(c, LW_ERR_OVERFLOW, "integer overflow in unary -");
            else *out = jj_int(-num_i(a));
        } else {
            *out = a.t == JV_BOOL ? jj_int(a.u.b) : a;
        }
        break;
    case JE_AND:
        ok = jj_eval(c, sc, e->a, &a);
        if (ok) {
            if (!jj_truthy(a)) *out = a;
            else ok = jj_eval(c, sc, e->b, out);
        }
        break;
    case JE_OR:
        ok = jj_eval(c, sc, e->a, &a);
        if (ok) {
            if (jj_truthy(a)) *out = a;
            else ok = jj_eval(c, sc, e->b, out);
        }
        break;
    case JE_COND:
        ok = jj_eval(c, sc, e->a, &a);
        if (ok) {
            if (jj_truthy(a)) ok = jj_eval(c, sc, e->b, out);
            else if (e->c) ok = jj_eval(c, sc, e->c, out);
            else *out = jj_undef();
        }
        break;
    case JE_BINARY: {
        ok = jj_eval(c, sc, e->a, &a) && jj_eval(c, sc, e->b, &b);
        if (!ok) break;
        bool r;
        int cmp;
        switch (e->op) {
        case JO_EQ:
        case JO_NE:
            ok = jj_equal(c, a, b, 0, &r);
            if (ok) *out = jj_bool(e->op == JO_EQ ? r : !r);
            break;
        case '<':
        case '>':
        case JO_LE:
        case JO_GE:
            ok = jj_compare(c, a, b, &cmp);
            if (ok)
                *out = jj_bool(e->op == '<' ? cmp < 0 : e->op == '>' ? cmp > 0 : e->op == JO_LE ? cmp <= 0 : cmp >= 0);
            break;
        case 'i':
        case 'I':
            ok = contains(c, a, b, &r);
            if (ok) *out = jj_bool(e->op == 'i' ? r : !r);
            break;
        case '~': {
            jj_buf buf = {0};
            ok = jj_write(c, &buf, a) && jj_write(c, &buf, b);
            if (ok) *out = jj_strv(jj_s(buf.p ? buf.p : "", buf.n));
            break;
        }
        default:
            if (a.t == JV_UNDEF || b.t == JV_UNDEF)
                ok = jj_fail(c, LW_ERR_INVALID_ARG, "line %u: undefined value in '%s' expression", e->line,
                             op_name(e->op));
            else
                ok = arith(c, e->op, a, b, out);
        }
        break;
    }
    default: ok = jj_fail(c, LW_ERR_INVALID_ARG, "line %u: statement used as an expression", e->line);
    }
    c->depth--;
    return ok;
}

/* ---------------------------------------------------------------------------------------------------------
 * Statements
 * ------------------------------------------------------------------------------------------------------- */

static bool assign(jj_ctx *c, jj_scope *sc, const jj_node *target, jj_val v) {
    if (target->kind == JE_NAME) return jj_scope_set(c, sc, target->name, v);
    if (target->kind == JE_ATTR) {
        jj_val *obj = lookup(c, sc, target->a->name);
        if (!obj || obj->t != JV_DICT)
            return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: cannot assign attribute '%.*s' on %s", target->line,
                           (int)target->name.n, target->name.p, obj ? jj_type_name(*obj) : "an undefined name");
        return jj_dict_set(c, obj->u.d, jj_strv(target->name), v);
    }
    /* unpacking */
    if (v.t != JV_LIST || v.u.l->n != target->nargs)
        return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: cannot unpack %s into %u names", target->line,
                       jj_type_name(v), target->nargs);
    for (uint32_t i = 0; i < target->nargs; i++)
        if (!assign(c, sc, target->args[i], v.u.l->v[i])) return false;
    return true;
}

/* Binds the loop variables of a for statement. */
static bool bind_targets(jj_ctx *c, jj_scope *sc, const jj_node *st, jj_val item) {
    if (st->ntargets == 1) return jj_scope_set(c, sc, st->targets[0], item);
    if (item.t != JV_LIST || item.u.l->n != st->ntargets)
        return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: cannot unpack %s into %u loop variables", st->line,
                       jj_type_name(item), st->ntargets);
    for (uint32_t i = 0; i < st->ntargets; i++)
        if (!jj_scope_set(c, sc, st->targets[i], item.u.l->v[i])) return false;
    return true;
}

/* The items a for loop walks: lists as they are, dict keys, string characters; none/undefined: nothing. */
static bool iter_items(jj_ctx *c, jj_val v, jj_list **out, uint32_t line) {
    if (v.t == JV_LIST) {
        *out = v.u.l;
        return true;
    }
    jj_list *l = jj_list_new(c, 0);
    if (!l) return false;
    if (v.t == JV_DICT) {
        for (size_t i = 0; i < v.u.d->n; i++)
            if (!jj_list_push(c, l, v.u.d->k[i])) return false;
    } else if (v.t == JV_STR) {
        size_t i = 0;
        while (i < v.u.s.n) {
            size_t j = i + 1;
            while (j < v.u.s.n && ((unsigned char)v.u.s.p[j] & 0xC0) == 0x80) j++;
            if (!jj_list_push(c, l, jj_strv(jj_s(v.u.s.p + i, j - i))) || !jj_step(c, 1)) return false;
            i = j;
        }
    } else if (v.t != JV_UNDEF && v.t != JV_NONE) {
        return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: %s is not iterable", line, jj_type_name(v));
    }
    *out = l;
    return true;
}

static bool exec_for(jj_ctx *c, jj_scope *sc, const jj_node *st) {
    jj_val it;
    jj_list *items = NULL;
    if (!jj_eval(c, sc, st->a, &it) || !iter_items(c, it, &items, st->line)) return false;
    jj_scope *body_sc = jj_scope_new(c, sc);
    if (!body_sc) return false;
    if (st->b) { /* loop filter: applied first, so loop.length and friends count only what passes */
        jj_list *kept = jj_list_new(c, 0);
        if (!kept) return false;
        for (size_t i = 0; i < items->n; i++) {
            jj_val cond;
            body_sc->n = 0;
            if (!bind_targets(c, body_sc, st, items->v[i]) || !jj_eval(c, body_sc, st->b, &cond)) return false;
            if (jj_truthy(cond) && !jj_list_push(c, kept, items->v[i])) return false;
        }
        items = kept;
    }
    if (items->n == 0) {
        int res;
        return exec_body(c, sc, st->ebody, st->nebody, &res);
    }
    /* one loop object per loop, updated in place each iteration (no allocation per iteration) */
    static const char *const keys[] = {"index",  "index0",   "revindex", "revindex0", "first", "last",
                                       "length", "previtem", "nextitem", "depth",     "depth0"};
    jj_dict *loop = jj_dict_new(c, 11);
    if (!loop) return false;
    for (int k = 0; k < 11; k++)
        if (!jj_dict_set(c, loop, jj_strv(jj_s(keys[k], strlen(keys[k]))), jj_undef())) return false;
    size_t n = items->n;
    /* n is fixed at the start: a body that appends to the list does not extend the loop, and one that pops
     * from it reads stale but valid arena memory (old arrays are never freed during a render) */
    jj_list *snapshot = items;
    for (size_t i = 0; i < n; i++) {
        if (!jj_step(c, 1)) return false;
        loop->v[0] = jj_int((int64_t)i + 1);
        loop->v[1] = jj_int((int64_t)i);
        loop->v[2] = jj_int((int64_t)(n - i));
        loop->v[3] = jj_int((int64_t)(n - i - 1));
        loop->v[4] = jj_bool(i == 0);
        loop->v[5] = jj_bool(i + 1 == n);
        loop->v[6] = jj_int((int64_t)n);
        loop->v[7] = i > 0 ? snapshot->v[i - 1] : jj_undef();
        loop->v[8] = i + 1 < n ? snapshot->v[i + 1] : jj_undef();
        loop->v[9] = jj_int(1);
        loop->v[10] = jj_int(0);
        body_sc->n = 0; /* fresh variables each iteration */
        if (!bind_targets(c, body_sc, st, snapshot->v[i]) ||
            !jj_scope_set(c, body_sc, jj_s("loop", 4), jj_dictv(loop)))
            return false;
        int res;
        if (!exec_body(c, body_sc, st->body, st->nbody, &res)) return false;
        if (res == R_BREAK) break;
    }
    return true;
}

/* Renders body into a fresh buffer and returns it as a string. */
static bool capture(jj_ctx *c, jj_scope *sc, jj_node *const *body, uint32_t n, jj_val *out) {
    jj_buf buf = {0}, *saved = c->out;
    c->out = &buf;
    int res;
    bool ok = exec_body(c, sc, body, n, &res);
    c->out = saved;
    if (ok) *out = jj_strv(jj_s(buf.p ? buf.p : "", buf.n));
    return ok;
}

/* Applies a filter chain whose innermost operand is the placeholder name " body". */
static bool filter_captured(jj_ctx *c, jj_scope *sc, const jj_node *chain, jj_val body, jj_val *out) {
    jj_scope *fs = jj_scope_new(c, sc);
    return fs && jj_scope_set(c, fs, jj_s(" body", 5), body) && jj_eval(c, fs, chain, out);
}

static bool exec_stmt(jj_ctx *c, jj_scope *sc, const jj_node *st, int *res) {
    jj_val v;
    *res = R_OK;
    if (!jj_step(c, 1)) return false;
    switch (st->kind) {
    case JN_TEXT: return jj_buf_add(c, c->out, st->lit.u.s.p, st->lit.u.s.n);
    case JN_OUTPUT: return jj_eval(c, sc, st->a, &v) && jj_write(c, c->out, v);
    case JN_IF:
        if (!jj_eval(c, sc, st->a, &v)) return false;
        if (jj_truthy(v)) return exec_body(c, sc, st->body, st->nbody, res);
        return exec_body(c, sc, st->ebody, st->nebody, res);
    case JN_FOR: return exec_for(c, sc, st);
    case JN_SET: return jj_eval(c, sc, st->b, &v) && assign(c, sc, st->a, v);
    case JN_SET_BLOCK:
        if (!capture(c, sc, st->body, st->nbody, &v)) return false;
        if (st->b && !filter_captured(c, sc, st->b, v, &v)) return false;
        return assign(c, sc, st->a, v);
    case JN_MACRO: {
        jj_macro *m = jj_alloc(c->arena, sizeof *m);
        if (!m) return jj_nomem(c);
        m->node = st;
        m->scope = sc;
        v.t = JV_MACRO;
        v.u.m = m;
        return jj_scope_set(c, sc, st->name, v);
    }
    case JN_BREAK: *res = R_BREAK; return true;
    case JN_CONTINUE: *res = R_CONTINUE; return true;
    case JN_DO: return jj_eval(c, sc, st->a, &v);
    case JN_FILTER:
        return capture(c, sc, st->body, st->nbody, &v) && filter_captured(c, sc, st->a, v, &v) &&
               jj_write(c, c->out, v);
    case JN_SCOPE: return exec_body(c, sc, st->body, st->nbody, res);
    default: return jj_fail(c, LW_ERR_INVALID_ARG, "line %u: expression used as a statement", st->line);
    }
}

static bool exec_body(jj_ctx *c, jj_scope *sc, jj_node *const *body, uint32_t n, int *res) {
    *res = R_OK;
    if (++c->depth > JJ_MAX_EVAL_DEPTH) {
        c->depth--;
        return jj_fail(c, LW_ERR_TOO_LARGE, "template evaluation nested too deeply");
    }
    bool ok = true;
    for (uint32_t i = 0; i < n && ok; i++) {
        ok = exec_stmt(c, sc, body[i], res);
        if (ok && *res != R_OK) break; /* break/continue propagate to the enclosing loop */
    }
    c->depth--;
    return ok;
}

bool jj_render_body(jj_ctx *c, jj_scope *sc, jj_node *const *body, uint32_t n) {
    int res;
    return exec_body(c, sc, body, n, &res);
}
