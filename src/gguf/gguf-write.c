/* GGUF writer (version 3, the layout ggml writes): header, metadata, tensor infos, padding, then each tensor's
 * data padded to the alignment. Tensor data is streamed in chunks from a caller buffer or a fill callback, so
 * writing a multi-GB file needs no multi-GB buffer; with `sparse`, zero runs become holes. */
#include "gguf/gguf-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------------
 * The writer object
 * ------------------------------------------------------------------------------------------------------- */

typedef struct wkv {
    char *key;       /* owned copy            */
    lw_gguf_value v; /* owned deep copy       */
} wkv;

typedef struct wtensor {
    char *name;             /* owned copy                                      */
    uint32_t type;          /* lw_type id                                      */
    uint32_t n_dims;        /* as given (written as given)                     */
    int64_t ne[4];          /* dimensions, unused ones 1                       */
    uint64_t n_bytes;       /* data size                                       */
    uint64_t offset;        /* offset in the data section, assigned at write   */
    const void *data;       /* caller buffer, or NULL when fill is set         */
    lw_tensor_fill_fn fill; /* produces data in chunks                         */
    void *user;             /* for fill                                        */
} wtensor;

struct lw_gguf_writer {
    lw_allocator alloc;       /* for everything below                 */
    uint32_t alignment;       /* data alignment (power of two)        */
    wkv *kv;                  /* [n_kv] metadata in insertion order   */
    size_t n_kv, cap_kv;      /* count / capacity                     */
    wtensor *t;               /* [n_t] tensors in insertion order     */
    size_t n_t, cap_t;        /* count / capacity                     */
    char err[LW_ERRMSG_SIZE]; /* message of the last failure          */
};

lw_status lw_gguf_writer_new(const lw_allocator *alloc, lw_gguf_writer **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_gguf_writer *w = lw__calloc(&a, 1, sizeof(*w));
    if (!w) return LW_ERR_NOMEM;
    w->alloc = a;
    w->alignment = LW_GGUF_DEFAULT_ALIGNMENT;
    *out = w;
    return LW_OK;
}

const char *lw_gguf_writer_error(const lw_gguf_writer *w) {
    return w ? w->err : "no writer";
}

/* Frees what a deep-copied value owns (not the value itself). */
static void free_value(const lw_allocator *a, lw_gguf_value *v) {
    if (v->type == LW_GGUF_STRING) lw__free(a, (void *)v->v.str.s);
    if (v->type != LW_GGUF_ARRAY) return;
    if (v->v.arr.type == LW_GGUF_STRING) {
        lw_gguf_str *s = (lw_gguf_str *)v->v.arr.data;
        for (uint64_t i = 0; s && i < v->v.arr.n; i++) lw__free(a, (void *)s[i].s);
    } else if (v->v.arr.type == LW_GGUF_ARRAY) {
        lw_gguf_value *e = (lw_gguf_value *)v->v.arr.data;
        for (uint64_t i = 0; e && i < v->v.arr.n; i++) free_value(a, &e[i]);
    }
    lw__free(a, (void *)v->v.arr.data);
}

void lw_gguf_writer_free(lw_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        lw__free(&w->alloc, w->kv[i].key);
        free_value(&w->alloc, &w->kv[i].v);
    }
    for (size_t i = 0; i < w->n_t; i++) lw__free(&w->alloc, w->t[i].name);
    lw__free(&w->alloc, w->kv);
    lw__free(&w->alloc, w->t);
    lw_allocator a = w->alloc;
    lw__free(&a, w);
}

/* ---------------------------------------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------------------------------------- */

static char *copy_bytes(const lw_allocator *a, const char *s, uint64_t len) {
    if (len >= SIZE_MAX) return NULL;
    char *d = lw__malloc(a, (size_t)len + 1);
    if (!d) return NULL;
    if (len) memcpy(d, s, (size_t)len);
    d[len] = 0;
    return d;
}

/* Deep-copies src into dst; on failure dst owns nothing. */
static lw_status copy_value(lw_gguf_writer *w, lw_gguf_value *dst, const lw_gguf_value *src, int depth) {
    const lw_allocator *a = &w->alloc;
    *dst = *src;
    if ((unsigned)src->type >= LW_GGUF_TYPE_COUNT)
        return lw__errorf(w->err, LW_ERR_BAD_VALUE_TYPE, "value type %d does not exist", (int)src->type);
    if (src->type == LW_GGUF_STRING) {
        dst->v.str.s = copy_bytes(a, src->v.str.s, src->v.str.len);
        return dst->v.str.s ? LW_OK : LW_ERR_NOMEM;
    }
    if (src->type != LW_GGUF_ARRAY) return LW_OK;
    if (depth >= LW_GGUF_MAX_DEPTH) return lw__errorf(w->err, LW_ERR_TOO_LARGE, "arrays nested too deep");
    lw_gguf_type et = src->v.arr.type;
    if ((unsigned)et >= LW_GGUF_TYPE_COUNT)
        return lw__errorf(w->err, LW_ERR_BAD_VALUE_TYPE, "array element type %d does not exist", (int)et);
    uint64_t n = src->v.arr.n, bytes;
    if (!lw__mul_u64(n, lw__gguf_elem_mem_size(et), &bytes) || bytes > SIZE_MAX)
        return lw__errorf(w->err, LW_ERR_OVERFLOW, "array of %" PRIu64 " elements is too large", n);
    void *data = lw__calloc(a, 1, (size_t)bytes);
    if (!data) return LW_ERR_NOMEM;
    dst->v.arr.data = data;
    if (et == LW_GGUF_STRING) {
        const lw_gguf_str *s = src->v.arr.data;
        lw_gguf_str *d = data;
        for (uint64_t i = 0; i < n; i++) {
            d[i].len = s[i].len;
            if (!(d[i].s = copy_bytes(a, s[i].s, s[i].len))) {
                free_value(a, dst);
                return LW_ERR_NOMEM;
            }
        }
    } else if (et == LW_GGUF_ARRAY) {
        const lw_gguf_value *s = src->v.arr.data;
        lw_gguf_value *d = data;
        for (uint64_t i = 0; i < n; i++) {
            lw_status rc = copy_value(w, &d[i], &s[i], depth + 1);
            if (rc != LW_OK) {
                d[i].type = LW_GGUF_UINT8; /* owns nothing */
                free_value(a, dst);
                return rc;
            }
        }
    } else if (bytes) {
        memcpy(data, src->v.arr.data, (size_t)bytes);
    }
    return LW_OK;
}

lw_status lw_gguf_writer_set(lw_gguf_writer *w, const char *key, const lw_gguf_value *v) {
    if (!w || !key || !v) return LW_ERR_INVALID_ARG;
    if (!*key) return lw__errorf(w->err, LW_ERR_BAD_STRING, "empty key");
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return lw__errorf(w->err, LW_ERR_DUPLICATE_KEY, "duplicate key '%s'", key);
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *kv = lw__realloc(&w->alloc, w->kv, cap * sizeof(wkv));
        if (!kv) return LW_ERR_NOMEM;
        w->kv = kv;
        w->cap_kv = cap;
    }
    wkv *e = &w->kv[w->n_kv];
    if (!(e->key = lw__strdup(&w->alloc, key))) return LW_ERR_NOMEM;
    lw_status rc = copy_value(w, &e->v, v, 0);
    if (rc != LW_OK) {
        lw__free(&w->alloc, e->key);
        if (rc == LW_ERR_NOMEM) lw__errorf(w->err, rc, "key '%s': out of memory", key);
        return rc;
    }
    w->n_kv++;
    return LW_OK;
}

lw_status lw_gguf_writer_set_u32(lw_gguf_writer *w, const char *key, uint32_t x) {
    lw_gguf_value v = {.type = LW_GGUF_UINT32, .v.u64 = x};
    return lw_gguf_writer_set(w, key, &v);
}
lw_status lw_gguf_writer_set_i32(lw_gguf_writer *w, const char *key, int32_t x) {
    lw_gguf_value v = {.type = LW_GGUF_INT32, .v.i64 = x};
    return lw_gguf_writer_set(w, key, &v);
}
lw_status lw_gguf_writer_set_u64(lw_gguf_writer *w, const char *key, uint64_t x) {
    lw_gguf_value v = {.type = LW_GGUF_UINT64, .v.u64 = x};
    return lw_gguf_writer_set(w, key, &v);
}
lw_status lw_gguf_writer_set_f32(lw_gguf_writer *w, const char *key, float x) {
    lw_gguf_value v = {.type = LW_GGUF_FLOAT32, .v.f64 = x};
    return lw_gguf_writer_set(w, key, &v);
}
lw_status lw_gguf_writer_set_bool(lw_gguf_writer *w, const char *key, int x) {
    lw_gguf_value v = {.type = LW_GGUF_BOOL, .v.u64 = x != 0};
    return lw_gguf_writer_set(w, key, &v);
}
lw_status lw_gguf_writer_set_str(lw_gguf_writer *w, const char *key, const char *s) {
    if (!s) return LW_ERR_INVALID_ARG;
    lw_gguf_value v = {.type = LW_GGUF_STRING, .v.str = {strlen(s), s}};
    return lw_gguf_writer_set(w, key, &v);
}
lw_status lw_gguf_writer_set_arr(lw_gguf_writer *w, const char *key, lw_gguf_type type, uint64_t n,
                                 const void *data) {
    lw_gguf_value v = {.type = LW_GGUF_ARRAY};
    v.v.arr.type = type;
    v.v.arr.n = n;
    v.v.arr.data = data;
    if (n && !data) return LW_ERR_INVALID_ARG;
    return lw_gguf_writer_set(w, key, &v);
}

lw_status lw_gguf_writer_set_alignment(lw_gguf_writer *w, uint32_t alignment) {
    if (!w) return LW_ERR_INVALID_ARG;
    if (alignment == 0 || (alignment & (alignment - 1)))
        return lw__errorf(w->err, LW_ERR_BAD_ALIGNMENT, "alignment %" PRIu32 " is not a power of two", alignment);
    w->alignment = alignment;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw_gguf_writer_add_tensor(lw_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                    const int64_t *ne, const void *data, lw_tensor_fill_fn fill, void *user) {
    if (!w || !name || (!ne && n_dims) || (!data && !fill)) return LW_ERR_INVALID_ARG;
    if (strlen(name) >= LW_GGUF_MAX_NAME)
        return lw__errorf(w->err, LW_ERR_BAD_STRING, "tensor name '%s' is longer than %d bytes", name,
                          LW_GGUF_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return lw__errorf(w->err, LW_ERR_DUPLICATE_NAME, "duplicate tensor name '%s'", name);
    wtensor t = {.type = type, .n_dims = n_dims, .data = data, .fill = data ? NULL : fill, .user = user};
    for (int j = 0; j < 4; j++) t.ne[j] = 1;
    for (uint32_t j = 0; j < n_dims && j < 4; j++) t.ne[j] = ne[j];
    uint64_t n_el;
    lw_status rc = lw__gguf_check_tensor(w->err, name, type, n_dims, t.ne, &n_el, &t.n_bytes);
    if (rc != LW_OK) return rc;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *nt = lw__realloc(&w->alloc, w->t, cap * sizeof(wtensor));
        if (!nt) return LW_ERR_NOMEM;
        w->t = nt;
        w->cap_t = cap;
    }
    if (!(t.name = lw__strdup(&w->alloc, name))) return LW_ERR_NOMEM;
    w->t[w->n_t++] = t;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Output: a buffered file writer that can skip zero runs (holes) in sparse mode.
 * ------------------------------------------------------------------------------------------------------- */

#define OUT_BUF   (1u << 20)
#define HOLE_GRAN 65536 /* zero runs of this size (aligned in the file) become holes */

typedef struct out {
    lw_gguf_writer *w; /* for messages                      */
    int fd;            /* destination                       */
    uint64_t pos;      /* file offset of buf[0]             */
    size_t len;        /* bytes pending in buf              */
    int sparse;        /* leave zero runs as holes          */
    uint8_t *buf;      /* OUT_BUF bytes                     */
} out;

static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static lw_status out_flush(out *o) {
    size_t done = 0;
    while (done < o->len) {
        size_t n = o->len - done;
        if (o->sparse) {
            /* Pieces end on HOLE_GRAN boundaries of the file; an all-zero piece is simply not written (the file
             * is new, so unwritten ranges read as zeros; ftruncate at the end gives the file its size). */
            size_t to_boundary = HOLE_GRAN - (size_t)((o->pos + done) % HOLE_GRAN);
            if (n > to_boundary) n = to_boundary;
            if (all_zero(o->buf + done, n)) {
                done += n;
                continue;
            }
        }
        ssize_t k = pwrite(o->fd, o->buf + done, n, (off_t)(o->pos + done));
        if (k < 0) {
            if (errno == EINTR) continue;
            return lw__errorf(o->w->err, LW_ERR_IO, "write at offset %" PRIu64 ": %s", o->pos + done, strerror(errno));
        }
        done += (size_t)k;
    }
    o->pos += o->len;
    o->len = 0;
    return LW_OK;
}

static lw_status out_write(out *o, const void *p, size_t n) {
    const uint8_t *s = p;
    while (n > 0) {
        size_t take = OUT_BUF - o->len < n ? OUT_BUF - o->len : n;
        memcpy(o->buf + o->len, s, take);
        o->len += take, s += take, n -= take;
        if (o->len == OUT_BUF) {
            lw_status rc = out_flush(o);
            if (rc != LW_OK) return rc;
        }
    }
    return LW_OK;
}

/* Reserves n bytes in the buffer for a producer to fill in place (n <= OUT_BUF). */
static lw_status out_reserve(out *o, size_t n, uint8_t **dst) {
    if (OUT_BUF - o->len < n) {
        lw_status rc = out_flush(o);
        if (rc != LW_OK) return rc;
    }
    *dst = o->buf + o->len;
    o->len += n;
    return LW_OK;
}

static lw_status out_u32(out *o, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return out_write(o, b, 4);
}
static lw_status out_u64(out *o, uint64_t v) {
    lw_status rc = out_u32(o, (uint32_t)v);
    return rc != LW_OK ? rc : out_u32(o, (uint32_t)(v >> 32));
}
static lw_status out_str(out *o, const char *s, uint64_t len) {
    lw_status rc = out_u64(o, len);
    return rc != LW_OK ? rc : out_write(o, s, (size_t)len);
}
static lw_status out_pad(out *o, uint64_t align) {
    static const uint8_t zeros[64];
    uint64_t at = o->pos + o->len, to;
    if (!lw__align_up_u64(at, align, &to)) return LW_ERR_OVERFLOW;
    for (uint64_t n = to - at; n > 0;) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        lw_status rc = out_write(o, zeros, k);
        if (rc != LW_OK) return rc;
        n -= k;
    }
    return LW_OK;
}

/* Encodes one scalar's bytes in the file layout. */
static size_t encode_scalar(const lw_gguf_value *v, uint8_t *b) {
    size_t n = lw__gguf_scalar_size(v->type);
    uint64_t bits = v->v.u64;
    if (v->type == LW_GGUF_FLOAT32) {
        float f = (float)v->v.f64;
        uint32_t u;
        memcpy(&u, &f, 4);
        bits = u;
    } else if (v->type == LW_GGUF_FLOAT64) {
        memcpy(&bits, &v->v.f64, 8);
    } else if (v->type == LW_GGUF_INT8 || v->type == LW_GGUF_INT16 || v->type == LW_GGUF_INT32 ||
               v->type == LW_GGUF_INT64) {
        bits = (uint64_t)v->v.i64;
    }
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(bits >> (8 * i));
    return n;
}

static lw_status out_array_body(out *o, const lw_gguf_value *v);

static lw_status out_value(out *o, const lw_gguf_value *v) {
    if (v->type == LW_GGUF_STRING) return out_str(o, v->v.str.s, v->v.str.len);
    if (v->type == LW_GGUF_ARRAY) return out_array_body(o, v);
    uint8_t b[8];
    return out_write(o, b, encode_scalar(v, b));
}

static lw_status out_array_body(out *o, const lw_gguf_value *v) {
    lw_status rc;
    lw_gguf_type et = v->v.arr.type;
    if ((rc = out_u32(o, (uint32_t)et)) != LW_OK) return rc;
    if ((rc = out_u64(o, v->v.arr.n)) != LW_OK) return rc;
    if (et == LW_GGUF_STRING) {
        const lw_gguf_str *s = v->v.arr.data;
        for (uint64_t i = 0; i < v->v.arr.n; i++)
            if ((rc = out_str(o, s[i].s, s[i].len)) != LW_OK) return rc;
        return LW_OK;
    }
    if (et == LW_GGUF_ARRAY) {
        const lw_gguf_value *e = v->v.arr.data;
        for (uint64_t i = 0; i < v->v.arr.n; i++)
            if ((rc = out_array_body(o, &e[i])) != LW_OK) return rc;
        return LW_OK;
    }
    /* Packed numbers are already in the file's little-endian layout. */
    return out_write(o, v->v.arr.data, (size_t)(v->v.arr.n * lw__gguf_elem_mem_size(et)));
}

static lw_status out_tensor_data(out *o, const wtensor *t) {
    for (uint64_t off = 0; off < t->n_bytes;) {
        size_t n = t->n_bytes - off > OUT_BUF ? OUT_BUF : (size_t)(t->n_bytes - off);
        lw_status rc;
        if (t->data) {
            rc = out_write(o, (const uint8_t *)t->data + off, n);
        } else {
            uint8_t *dst;
            if ((rc = out_reserve(o, n, &dst)) != LW_OK) return rc;
            rc = t->fill(t->user, off, dst, n);
            if (rc != LW_OK) lw__errorf(o->w->err, rc, "tensor '%s': fill callback failed at %" PRIu64, t->name, off);
        }
        if (rc != LW_OK) return rc;
        off += n;
    }
    return out_pad(o, o->w->alignment);
}

static lw_status write_all(out *o) {
    lw_gguf_writer *w = o->w;
    lw_status rc;
    /* general.alignment is written when it differs from the default, as ggml does. */
    if (w->alignment != LW_GGUF_DEFAULT_ALIGNMENT) {
        int have = 0;
        for (size_t i = 0; i < w->n_kv; i++) have |= !strcmp(w->kv[i].key, "general.alignment");
        if (!have && (rc = lw_gguf_writer_set_u32(w, "general.alignment", w->alignment)) != LW_OK) return rc;
    }
    /* Assign data offsets: tensors in order, each padded to the alignment (ggml's reader requires this). */
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        uint64_t padded;
        if (!lw__align_up_u64(w->t[i].n_bytes, w->alignment, &padded) || !lw__add_u64(off, padded, &off))
            return lw__errorf(w->err, LW_ERR_OVERFLOW, "data section size overflows");
    }
    if ((rc = out_u32(o, LW_GGUF_MAGIC)) != LW_OK) return rc;
    if ((rc = out_u32(o, 3)) != LW_OK) return rc;
    if ((rc = out_u64(o, w->n_t)) != LW_OK) return rc;
    if ((rc = out_u64(o, w->n_kv)) != LW_OK) return rc;
    for (size_t i = 0; i < w->n_kv; i++) {
        if ((rc = out_str(o, w->kv[i].key, strlen(w->kv[i].key))) != LW_OK) return rc;
        if ((rc = out_u32(o, (uint32_t)w->kv[i].v.type)) != LW_OK) return rc;
        if ((rc = out_value(o, &w->kv[i].v)) != LW_OK) return rc;
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if ((rc = out_str(o, t->name, strlen(t->name))) != LW_OK) return rc;
        if ((rc = out_u32(o, t->n_dims)) != LW_OK) return rc;
        for (uint32_t j = 0; j < t->n_dims; j++)
            if ((rc = out_u64(o, (uint64_t)t->ne[j])) != LW_OK) return rc;
        if ((rc = out_u32(o, t->type)) != LW_OK) return rc;
        if ((rc = out_u64(o, t->offset)) != LW_OK) return rc;
    }
    if ((rc = out_pad(o, w->alignment)) != LW_OK) return rc;
    for (size_t i = 0; i < w->n_t; i++)
        if ((rc = out_tensor_data(o, &w->t[i])) != LW_OK) return rc;
    return out_flush(o);
}

lw_status lw_gguf_writer_write_file(lw_gguf_writer *w, const char *path, int sparse) {
    if (!w || !path) return LW_ERR_INVALID_ARG;
    out o = {.w = w, .sparse = sparse};
    o.buf = lw__malloc(&w->alloc, OUT_BUF);
    if (!o.buf) return lw__errorf(w->err, LW_ERR_NOMEM, "no memory for the output buffer");
    o.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    lw_status rc;
    if (o.fd < 0) {
        rc = lw__errorf(w->err, LW_ERR_IO, "%s: %s", path, strerror(errno));
    } else {
        rc = write_all(&o);
        /* Holes at the end are not written at all: the size comes from ftruncate. */
        if (rc == LW_OK && ftruncate(o.fd, (off_t)o.pos) != 0)
            rc = lw__errorf(w->err, LW_ERR_IO, "%s: %s", path, strerror(errno));
        if (close(o.fd) != 0 && rc == LW_OK) rc = lw__errorf(w->err, LW_ERR_IO, "%s: %s", path, strerror(errno));
    }
    lw__free(&w->alloc, o.buf);
    return rc;
}
