/* GGUF reader (versions 2 and 3) over an lw_source.
 *
 * The header (metadata + tensor infos) is parsed into memory once; tensor data stays in the source and is
 * read on demand. Every count, length and product is checked against the bytes that remain in the source and
 * against overflow before anything is allocated, so a hostile file costs at most a small multiple of its own
 * size in memory (capped at LW_GGUF_MAX_META_BYTES) and never crashes. */
#include "gguf/gguf-internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Bump arena: all metadata of one file lives in a few large chunks freed together at close.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct arena_chunk {
    struct arena_chunk *next; /* older chunk               */
    size_t used, cap;         /* bytes used / usable bytes */
    max_align_t data[];       /* the bytes                 */
} arena_chunk;

/* ---------------------------------------------------------------------------------------------------------
 * The reader object
 * ------------------------------------------------------------------------------------------------------- */

struct lw_gguf {
    lw_allocator alloc;      /* allocator for everything below                          */
    lw_source *src;          /* caller-owned byte source                                */
    uint32_t version;        /* 2 or 3                                                  */
    uint64_t alignment;      /* general.alignment or 32                                 */
    uint64_t data_offset;    /* absolute offset of the tensor data section              */
    int64_t n_kv;            /* metadata pairs parsed so far                            */
    const char **keys;       /* [n_kv] NUL-terminated keys                              */
    lw_gguf_value *values;   /* [n_kv] values                                           */
    int64_t n_tensors;       /* tensor infos parsed so far                              */
    lw_gguf_tensor *tensors; /* [n_tensors]                                             */
    int64_t *key_slots;      /* open-addressing index of keys: -1 empty, else kv index  */
    int64_t *name_slots;     /* same for tensor names                                   */
    uint64_t key_cap;        /* slots in key_slots (power of two)                       */
    uint64_t name_cap;       /* slots in name_slots (power of two)                      */
    arena_chunk *arena;      /* metadata storage                                        */
    uint64_t meta_bytes;     /* bytes taken from the arena, checked against the cap     */
    char err[LW_ERRMSG_SIZE]; /* message of the last failure                            */
};

/* Allocates n bytes (8-byte aligned) from the object's arena; NULL when out of memory or over the cap. */
static void *arena_alloc(lw_gguf *g, uint64_t n64) {
    /* The cap check comes first and in 64 bits: on wasm32 a length from a >4 GB file must not wrap size_t. */
    if (n64 > LW_GGUF_MAX_META_BYTES || g->meta_bytes + n64 + 15 > LW_GGUF_MAX_META_BYTES) return NULL;
    size_t n = ((size_t)n64 + 15) & ~(size_t)15;
    arena_chunk *c = g->arena;
    if (!c || c->cap - c->used < n) {
        /* Chunks double from 16 KiB to 1 MiB: small headers stay cheap, tokenizer tables take few chunks. */
        size_t grow = c ? c->cap * 2 : ((size_t)1 << 14);
        if (grow > ((size_t)1 << 20)) grow = (size_t)1 << 20;
        size_t cap = n > grow ? n : grow;
        c = lw__malloc(&g->alloc, sizeof(arena_chunk) + cap);
        if (!c) return NULL;
        c->next = g->arena;
        c->used = 0;
        c->cap = cap;
        g->arena = c;
    }
    void *p = (uint8_t *)c->data + c->used;
    c->used += n;
    g->meta_bytes += n;
    return p;
}

/* An array of n elements of size bytes from the arena; NULL on overflow, cap or memory failure. */
static void *arena_array(lw_gguf *g, uint64_t n, uint64_t size) {
    uint64_t bytes;
    return lw__mul_u64(n, size, &bytes) ? arena_alloc(g, bytes) : NULL;
}

/* ---------------------------------------------------------------------------------------------------------
 * Buffered sequential reader over the source (one pread per 64 KiB, not per field).
 * ------------------------------------------------------------------------------------------------------- */

#define RD_BUF 65536

typedef struct reader {
    lw_gguf *g;           /* where errors go                    */
    uint64_t pos;         /* next byte to hand out              */
    uint64_t size;        /* source size                        */
    uint64_t buf_off;     /* source offset of buf[0]            */
    size_t buf_len;       /* valid bytes in buf                 */
    uint8_t buf[RD_BUF];  /* read-ahead                         */
} reader;

static uint64_t rd_left(const reader *r) {
    return r->size - r->pos;
}

/* Copies n bytes at the current position; `what` names the field for the message. */
static lw_status rd_bytes(reader *r, void *dst, size_t n, const char *what) {
    if (n > rd_left(r))
        return lw__errorf(r->g->err, LW_ERR_TRUNCATED,
                          "file ends at byte %" PRIu64 " inside %s (needs %zu bytes at offset %" PRIu64 ")", r->size,
                          what, n, r->pos);
    uint8_t *d = dst;
    while (n > 0) {
        if (r->pos >= r->buf_off && r->pos < r->buf_off + r->buf_len) {
            size_t at = (size_t)(r->pos - r->buf_off);
            size_t take = r->buf_len - at < n ? r->buf_len - at : n;
            memcpy(d, r->buf + at, take);
            d += take, n -= take, r->pos += take;
            continue;
        }
        if (n >= RD_BUF) { /* large strings and arrays: read straight into place */
            lw_status rc = lw_source_read(r->g->src, r->pos, d, n);
            if (rc != LW_OK)
                return lw__errorf(r->g->err, rc, "reading %s: %s", what, lw_source_error(r->g->src));
            r->pos += n;
            return LW_OK;
        }
        size_t fill = rd_left(r) < RD_BUF ? (size_t)rd_left(r) : RD_BUF;
        lw_status rc = lw_source_read(r->g->src, r->pos, r->buf, fill);
        if (rc != LW_OK) return lw__errorf(r->g->err, rc, "reading %s: %s", what, lw_source_error(r->g->src));
        r->buf_off = r->pos;
        r->buf_len = fill;
    }
    return LW_OK;
}

static lw_status rd_u32(reader *r, uint32_t *v, const char *what) {
    uint8_t b[4];
    lw_status rc = rd_bytes(r, b, 4, what);
    if (rc == LW_OK) *v = lw__rd_u32(b);
    return rc;
}

static lw_status rd_u64(reader *r, uint64_t *v, const char *what) {
    uint8_t b[8];
    lw_status rc = rd_bytes(r, b, 8, what);
    if (rc == LW_OK) *v = lw__rd_u64(b);
    return rc;
}

/* Reads a length-prefixed string into the arena (NUL-terminated). max_len bounds it beyond the file size. */
static lw_status rd_str(reader *r, lw_gguf_str *out, uint64_t max_len, const char *what) {
    uint64_t len;
    lw_status rc = rd_u64(r, &len, what);
    if (rc != LW_OK) return rc;
    if (len > rd_left(r))
        return lw__errorf(r->g->err, LW_ERR_TRUNCATED,
                          "%s: string length %" PRIu64 " passes the end of the file (%" PRIu64 " bytes left)", what,
                          len, rd_left(r));
    if (len > max_len)
        return lw__errorf(r->g->err, LW_ERR_BAD_STRING, "%s: string length %" PRIu64 " exceeds %" PRIu64, what, len,
                          max_len);
    char *s = arena_alloc(r->g, len + 1);
    if (!s) return lw__errorf(r->g->err, LW_ERR_NOMEM, "%s: no memory for a %" PRIu64 "-byte string", what, len);
    rc = rd_bytes(r, s, (size_t)len, what);
    if (rc != LW_OK) return rc;
    s[len] = 0;
    out->len = len;
    out->s = s;
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Metadata values
 * ------------------------------------------------------------------------------------------------------- */

/* Decodes one scalar of type t from little-endian bytes b into v. */
static void decode_scalar(lw_gguf_type t, const uint8_t *b, lw_gguf_value *v) {
    v->type = t;
    switch (t) {
    case LW_GGUF_UINT8: v->v.u64 = b[0]; break;
    case LW_GGUF_INT8: v->v.i64 = (int8_t)b[0]; break;
    case LW_GGUF_UINT16: v->v.u64 = lw__rd_u16(b); break;
    case LW_GGUF_INT16: v->v.i64 = (int16_t)lw__rd_u16(b); break;
    case LW_GGUF_UINT32: v->v.u64 = lw__rd_u32(b); break;
    case LW_GGUF_INT32: v->v.i64 = (int32_t)lw__rd_u32(b); break;
    case LW_GGUF_BOOL: v->v.u64 = b[0]; break;
    case LW_GGUF_UINT64: v->v.u64 = lw__rd_u64(b); break;
    case LW_GGUF_INT64: v->v.i64 = (int64_t)lw__rd_u64(b); break;
    case LW_GGUF_FLOAT32: {
        uint32_t u = lw__rd_u32(b);
        float f;
        memcpy(&f, &u, 4);
        v->v.f64 = f;
        break;
    }
    case LW_GGUF_FLOAT64: {
        uint64_t u = lw__rd_u64(b);
        memcpy(&v->v.f64, &u, 8);
        break;
    }
    default: break;
    }
}

static lw_status read_value(reader *r, lw_gguf_type t, lw_gguf_value *v, const char *key, int depth);

/* Reads an array body (element type + count + elements) into v. */
static lw_status read_array(reader *r, lw_gguf_value *v, const char *key, int depth) {
    lw_gguf *g = r->g;
    if (depth >= LW_GGUF_MAX_DEPTH)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "key '%s': arrays nested deeper than %d", key, LW_GGUF_MAX_DEPTH);
    uint32_t et;
    uint64_t n;
    lw_status rc = rd_u32(r, &et, "array element type");
    if (rc != LW_OK) return rc;
    if (et >= LW_GGUF_TYPE_COUNT)
        return lw__errorf(g->err, LW_ERR_BAD_VALUE_TYPE, "key '%s': array element type %" PRIu32 " does not exist",
                          key, et);
    if ((rc = rd_u64(r, &n, "array length")) != LW_OK) return rc;
    /* Every element takes at least min_file_size bytes, so the file bounds the count before we allocate. */
    uint64_t min = lw__gguf_min_file_size((lw_gguf_type)et), need;
    if (!lw__mul_u64(n, min, &need))
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "key '%s': array length %" PRIu64 " overflows", key, n);
    if (need > rd_left(r))
        return lw__errorf(g->err, LW_ERR_TRUNCATED,
                          "key '%s': array of %" PRIu64 " %s elements needs %" PRIu64 " bytes, the file has %" PRIu64
                          " left",
                          key, n, lw_gguf_type_name((lw_gguf_type)et), need, rd_left(r));
    uint64_t mem;
    if (!lw__mul_u64(n, lw__gguf_elem_mem_size((lw_gguf_type)et), &mem) || mem > LW_GGUF_MAX_META_BYTES)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "key '%s': array of %" PRIu64 " elements is too large", key, n);
    void *data = arena_alloc(g, mem);
    if (!data)
        return lw__errorf(g->err, LW_ERR_NOMEM, "key '%s': no memory for an array of %" PRIu64 " elements", key, n);
    v->type = LW_GGUF_ARRAY;
    v->v.arr.type = (lw_gguf_type)et;
    v->v.arr.n = n;
    v->v.arr.data = data;
    if (et == LW_GGUF_STRING) {
        lw_gguf_str *s = data;
        for (uint64_t i = 0; i < n; i++)
            if ((rc = rd_str(r, &s[i], UINT64_MAX, "array string")) != LW_OK) return rc;
    } else if (et == LW_GGUF_ARRAY) {
        lw_gguf_value *a = data;
        for (uint64_t i = 0; i < n; i++)
            if ((rc = read_array(r, &a[i], key, depth + 1)) != LW_OK) return rc;
    } else {
        /* Packed numbers: the file layout is the native little-endian layout, so one copy suffices. */
        if ((rc = rd_bytes(r, data, (size_t)mem, "array data")) != LW_OK) return rc;
        if (et == LW_GGUF_BOOL) {
            uint8_t *b = data;
            for (uint64_t i = 0; i < n; i++)
                if (b[i] > 1)
                    return lw__errorf(g->err, LW_ERR_TYPE_MISMATCH, "key '%s': bool element %" PRIu64 " is %u", key, i,
                                      b[i]);
        }
    }
    return LW_OK;
}

static lw_status read_value(reader *r, lw_gguf_type t, lw_gguf_value *v, const char *key, int depth) {
    if (t == LW_GGUF_STRING) {
        v->type = t;
        return rd_str(r, &v->v.str, UINT64_MAX, key);
    }
    if (t == LW_GGUF_ARRAY) return read_array(r, v, key, depth);
    uint8_t b[8];
    lw_status rc = rd_bytes(r, b, lw__gguf_scalar_size(t), key);
    if (rc != LW_OK) return rc;
    decode_scalar(t, b, v);
    if (t == LW_GGUF_BOOL && b[0] > 1)
        return lw__errorf(r->g->err, LW_ERR_TYPE_MISMATCH, "key '%s': bool value is %u", key, b[0]);
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Name index (open addressing, linear probing; capacity a power of two at least twice the count)
 * ------------------------------------------------------------------------------------------------------- */

static lw_status index_new(lw_gguf *g, uint64_t n, int64_t **slots, uint64_t *cap) {
    if (n > LW_GGUF_MAX_META_BYTES / 16) /* each entry also costs >= 16 bytes of metadata */
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "%" PRIu64 " entries are more than we hold in memory", n);
    uint64_t c = 16;
    while (c < 2 * n) c <<= 1;
    *slots = lw__malloc(&g->alloc, (size_t)c * sizeof(int64_t));
    if (!*slots) return lw__errorf(g->err, LW_ERR_NOMEM, "no memory for an index of %" PRIu64 " names", n);
    memset(*slots, 0xff, (size_t)c * sizeof(int64_t)); /* all -1 */
    *cap = c;
    return LW_OK;
}

/* Finds name; returns the slot holding it or the empty slot where it would go. name_of(i) gives entry i. */
static uint64_t index_probe(const int64_t *slots, uint64_t cap, const char *name, const char *(*name_of)(const lw_gguf *, int64_t),
                            const lw_gguf *g) {
    uint64_t i = lw__hash_str(name) & (cap - 1);
    while (slots[i] >= 0 && strcmp(name_of(g, slots[i]), name) != 0) i = (i + 1) & (cap - 1);
    return i;
}

static const char *key_of(const lw_gguf *g, int64_t i) {
    return g->keys[i];
}
static const char *tensor_name_of(const lw_gguf *g, int64_t i) {
    return g->tensors[i].name;
}

/* ---------------------------------------------------------------------------------------------------------
 * Parsing
 * ------------------------------------------------------------------------------------------------------- */

static lw_status parse_kv(lw_gguf *g, reader *r, uint64_t n_kv) {
    lw_status rc = index_new(g, n_kv, &g->key_slots, &g->key_cap);
    if (rc != LW_OK) return rc;
    g->keys = arena_array(g, n_kv, sizeof(char *));
    g->values = arena_array(g, n_kv, sizeof(lw_gguf_value));
    if (!g->keys || !g->values)
        return lw__errorf(g->err, LW_ERR_NOMEM, "no memory for %" PRIu64 " metadata entries", n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        lw_gguf_str key;
        if ((rc = rd_str(r, &key, LW_GGUF_MAX_KEY, "metadata key")) != LW_OK) return rc;
        if (key.len == 0 || strlen(key.s) != key.len)
            return lw__errorf(g->err, LW_ERR_BAD_STRING, "metadata key %" PRIu64 " is empty or contains a NUL byte", i);
        uint64_t slot = index_probe(g->key_slots, g->key_cap, key.s, key_of, g);
        if (g->key_slots[slot] >= 0) return lw__errorf(g->err, LW_ERR_DUPLICATE_KEY, "duplicate key '%s'", key.s);
        uint32_t t;
        if ((rc = rd_u32(r, &t, key.s)) != LW_OK) return rc;
        if (t >= LW_GGUF_TYPE_COUNT)
            return lw__errorf(g->err, LW_ERR_BAD_VALUE_TYPE, "key '%s': value type %" PRIu32 " does not exist", key.s,
                              t);
        if ((rc = read_value(r, (lw_gguf_type)t, &g->values[i], key.s, 0)) != LW_OK) return rc;
        g->keys[i] = key.s;
        g->key_slots[slot] = (int64_t)i;
        g->n_kv = (int64_t)i + 1;
    }
    return LW_OK;
}

static lw_status parse_alignment(lw_gguf *g) {
    g->alignment = LW_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = lw_gguf_find_key(g, "general.alignment");
    if (i < 0) return LW_OK;
    const lw_gguf_value *v = &g->values[i];
    if (v->type != LW_GGUF_UINT32)
        return lw__errorf(g->err, LW_ERR_BAD_ALIGNMENT, "general.alignment has type %s, must be u32",
                          lw_gguf_type_name(v->type));
    if (v->v.u64 == 0 || (v->v.u64 & (v->v.u64 - 1)) != 0)
        return lw__errorf(g->err, LW_ERR_BAD_ALIGNMENT, "general.alignment %" PRIu64 " is not a power of two",
                          v->v.u64);
    g->alignment = v->v.u64;
    return LW_OK;
}

static lw_status parse_tensor_infos(lw_gguf *g, reader *r, uint64_t n) {
    lw_status rc = index_new(g, n, &g->name_slots, &g->name_cap);
    if (rc != LW_OK) return rc;
    g->tensors = arena_array(g, n, sizeof(lw_gguf_tensor));
    if (!g->tensors) return lw__errorf(g->err, LW_ERR_NOMEM, "no memory for %" PRIu64 " tensor infos", n);
    for (uint64_t i = 0; i < n; i++) {
        lw_gguf_tensor *t = &g->tensors[i];
        lw_gguf_str name;
        if ((rc = rd_str(r, &name, UINT64_MAX, "tensor name")) != LW_OK) return rc;
        if (name.len >= LW_GGUF_MAX_NAME || strlen(name.s) != name.len)
            return lw__errorf(g->err, LW_ERR_BAD_STRING,
                              "tensor %" PRIu64 ": name of %" PRIu64 " bytes (at most %d, no NUL bytes)", i, name.len,
                              LW_GGUF_MAX_NAME - 1);
        t->name = name.s;
        uint64_t slot = index_probe(g->name_slots, g->name_cap, name.s, tensor_name_of, g);
        if (g->name_slots[slot] >= 0)
            return lw__errorf(g->err, LW_ERR_DUPLICATE_NAME, "duplicate tensor name '%s'", name.s);
        if ((rc = rd_u32(r, &t->n_dims, name.s)) != LW_OK) return rc;
        if (t->n_dims > LW_GGUF_MAX_DIMS)
            return lw__errorf(g->err, LW_ERR_BAD_DIMS, "tensor '%s': %" PRIu32 " dimensions, at most %d", name.s,
                              t->n_dims, LW_GGUF_MAX_DIMS);
        for (int j = 0; j < LW_GGUF_MAX_DIMS; j++) t->ne[j] = 1;
        for (uint32_t j = 0; j < t->n_dims; j++) {
            uint64_t d;
            if ((rc = rd_u64(r, &d, name.s)) != LW_OK) return rc;
            t->ne[j] = (int64_t)d;
        }
        if ((rc = rd_u32(r, &t->type, name.s)) != LW_OK) return rc;
        if ((rc = rd_u64(r, &t->offset, name.s)) != LW_OK) return rc;
        rc = lw__gguf_check_tensor(g->err, name.s, t->type, t->n_dims, t->ne, &t->n_elements, &t->n_bytes);
        if (rc != LW_OK) return rc;
        if (t->offset % g->alignment != 0)
            return lw__errorf(g->err, LW_ERR_BAD_ALIGNMENT,
                              "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64, name.s,
                              t->offset, g->alignment);
        g->name_slots[slot] = (int64_t)i;
        g->n_tensors = (int64_t)i + 1;
    }
    return LW_OK;
}

/* Sort helper: (offset, index) pairs, so the comparison needs no context pointer (C11 qsort has none). */
typedef struct offset_index {
    uint64_t offset; /* tensor data offset */
    int64_t index;   /* tensor index       */
} offset_index;
static int cmp_offset(const void *a, const void *b) {
    uint64_t x = ((const offset_index *)a)->offset, y = ((const offset_index *)b)->offset;
    return x < y ? -1 : x > y;
}

/* Places the data section and checks every tensor lies inside the file and that no two overlap. */
static lw_status check_data(lw_gguf *g, uint64_t header_end) {
    uint64_t size = lw_source_size(g->src);
    if (g->n_tensors == 0) {
        g->data_offset = header_end; /* ggml pads only when there are tensors */
        return LW_OK;
    }
    if (!lw__align_up_u64(header_end, g->alignment, &g->data_offset) || g->data_offset > size)
        return lw__errorf(g->err, LW_ERR_TRUNCATED, "file ends (%" PRIu64 " bytes) before the data section at %" PRIu64,
                          size, g->data_offset);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        lw_gguf_tensor *t = &g->tensors[i];
        uint64_t end;
        if (!lw__add_u64(g->data_offset, t->offset, &t->file_offset) || !lw__add_u64(t->file_offset, t->n_bytes, &end) ||
            end > size)
            return lw__errorf(g->err, LW_ERR_OUT_OF_FILE,
                              "tensor '%s': data at offset %" PRIu64 " + %" PRIu64 " bytes passes the end of the file (%" PRIu64
                              " bytes)",
                              t->name, t->offset, t->n_bytes, size);
    }
    /* Overlap: sort by offset, then each tensor must end before the next begins. */
    offset_index *order = lw__calloc(&g->alloc, (size_t)g->n_tensors, sizeof(offset_index));
    if (!order) return lw__errorf(g->err, LW_ERR_NOMEM, "no memory to check tensor overlap");
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = (offset_index){g->tensors[i].offset, i};
    qsort(order, (size_t)g->n_tensors, sizeof(offset_index), cmp_offset);
    lw_status rc = LW_OK;
    for (int64_t i = 0; i + 1 < g->n_tensors; i++) {
        const lw_gguf_tensor *a = &g->tensors[order[i].index], *b = &g->tensors[order[i + 1].index];
        if (a->n_bytes > 0 && b->n_bytes > 0 && a->offset + a->n_bytes > b->offset) {
            rc = lw__errorf(g->err, LW_ERR_OVERLAP, "tensors '%s' [%" PRIu64 ", +%" PRIu64 ") and '%s' [%" PRIu64
                            ", +%" PRIu64 ") overlap",
                            a->name, a->offset, a->n_bytes, b->name, b->offset, b->n_bytes);
            break;
        }
    }
    lw__free(&g->alloc, order);
    return rc;
}

/* A count of n entries of at least min bytes each: TOO_LARGE when absurd in itself (overflow, more entries
 * than we would ever hold), TRUNCATED when the file ends before the entries it announces. */
static lw_status check_count(lw_gguf *g, reader *r, uint64_t n, uint64_t min, const char *what) {
    uint64_t need;
    if (!lw__mul_u64(n, min, &need) || n > LW_GGUF_MAX_META_BYTES / 16)
        return lw__errorf(g->err, LW_ERR_TOO_LARGE, "%s %" PRIu64 " is beyond any real file", what, n);
    if (need > rd_left(r))
        return lw__errorf(g->err, LW_ERR_TRUNCATED,
                          "%s %" PRIu64 " needs at least %" PRIu64 " bytes, the file has %" PRIu64 " left", what, n,
                          need, rd_left(r));
    return LW_OK;
}

static lw_status parse(lw_gguf *g) {
    reader *r = lw__malloc(&g->alloc, sizeof(reader));
    if (!r) return lw__errorf(g->err, LW_ERR_NOMEM, "no memory for the reader");
    r->g = g;
    r->pos = 0;
    r->size = lw_source_size(g->src);
    r->buf_off = 0;
    r->buf_len = 0;

    lw_status rc;
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;
    if ((rc = rd_u32(r, &magic, "magic")) != LW_OK) goto done;
    if (magic != LW_GGUF_MAGIC) {
        rc = lw__errorf(g->err, LW_ERR_BAD_MAGIC, "not a GGUF file (magic 0x%08" PRIx32 ", expected \"GGUF\")", magic);
        goto done;
    }
    if ((rc = rd_u32(r, &version, "version")) != LW_OK) goto done;
    if (version != 2 && version != 3) {
        const char *why = (version & 0xffff) == 0 && version != 0 ? " (big-endian file?)"
                          : version == 1                          ? " (GGUF v1 is obsolete)"
                                                                  : "";
        rc = lw__errorf(g->err, LW_ERR_BAD_VERSION, "GGUF version %" PRIu32 " is not supported%s; only 2 and 3", version,
                        why);
        goto done;
    }
    g->version = version;
    if ((rc = rd_u64(r, &n_tensors, "tensor count")) != LW_OK) goto done;
    if ((rc = rd_u64(r, &n_kv, "metadata count")) != LW_OK) goto done;
    /* A tensor info takes >= 8 (name) + 4 (n_dims) + 4 (type) + 8 (offset) bytes; a pair >= 8 + 4 + 1. */
    if ((rc = check_count(g, r, n_tensors, 24, "tensor count")) != LW_OK) goto done;
    if ((rc = check_count(g, r, n_kv, 13, "metadata count")) != LW_OK) goto done;
    if ((rc = parse_kv(g, r, n_kv)) != LW_OK) goto done;
    if ((rc = parse_alignment(g)) != LW_OK) goto done;
    if ((rc = parse_tensor_infos(g, r, n_tensors)) != LW_OK) goto done;
    rc = check_data(g, r->pos);
done:
    lw__free(&g->alloc, r);
    return rc;
}

lw_status lw_gguf_open(lw_source *src, const lw_allocator *alloc, lw_gguf **out) {
    if (!out) return LW_ERR_INVALID_ARG;
    *out = NULL;
    lw_allocator a = lw__allocator_or_default(alloc);
    lw_gguf *g = lw__calloc(&a, 1, sizeof(*g));
    if (!g) return LW_ERR_NOMEM;
    g->alloc = a;
    g->src = src;
    *out = g;
    if (!src) return lw__errorf(g->err, LW_ERR_INVALID_ARG, "no source");
    return parse(g);
}

void lw_gguf_close(lw_gguf *g) {
    if (!g) return;
    for (arena_chunk *c = g->arena, *next; c; c = next) {
        next = c->next;
        lw__free(&g->alloc, c);
    }
    lw__free(&g->alloc, g->key_slots);
    lw__free(&g->alloc, g->name_slots);
    lw_allocator a = g->alloc;
    lw__free(&a, g);
}

/* ---------------------------------------------------------------------------------------------------------
 * Accessors
 * ------------------------------------------------------------------------------------------------------- */

const char *lw_gguf_error(const lw_gguf *g) {
    return g ? g->err : "no gguf object (out of memory?)";
}
uint32_t lw_gguf_version(const lw_gguf *g) {
    return g->version;
}
uint64_t lw_gguf_alignment(const lw_gguf *g) {
    return g->alignment;
}
uint64_t lw_gguf_data_offset(const lw_gguf *g) {
    return g->data_offset;
}
int64_t lw_gguf_n_kv(const lw_gguf *g) {
    return g->n_kv;
}
int64_t lw_gguf_n_tensors(const lw_gguf *g) {
    return g->n_tensors;
}

int64_t lw_gguf_find_key(const lw_gguf *g, const char *key) {
    if (!g || !key || !g->key_slots) return -1;
    return g->key_slots[index_probe(g->key_slots, g->key_cap, key, key_of, g)];
}

int64_t lw_gguf_find_tensor(const lw_gguf *g, const char *name) {
    if (!g || !name || !g->name_slots) return -1;
    return g->name_slots[index_probe(g->name_slots, g->name_cap, name, tensor_name_of, g)];
}

const char *lw_gguf_key(const lw_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->keys[i] : NULL;
}

const lw_gguf_value *lw_gguf_value_at(const lw_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->values[i] : NULL;
}

const lw_gguf_tensor *lw_gguf_tensor_at(const lw_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

lw_status lw_gguf_read_tensor(lw_gguf *g, int64_t i, uint64_t off, void *dst, size_t n) {
    const lw_gguf_tensor *t = lw_gguf_tensor_at(g, i);
    if (!t) return lw__errorf(g->err, LW_ERR_NOT_FOUND, "no tensor %" PRId64, i);
    uint64_t end;
    if (!lw__add_u64(off, n, &end) || end > t->n_bytes)
        return lw__errorf(g->err, LW_ERR_INVALID_ARG, "tensor '%s': read of %zu bytes at %" PRIu64 " passes its %" PRIu64
                          " bytes", t->name, n, off, t->n_bytes);
    lw_status rc = lw_source_read(g->src, t->file_offset + off, dst, n);
    if (rc != LW_OK) lw__errorf(g->err, rc, "tensor '%s': %s", t->name, lw_source_error(g->src));
    return rc;
}

/* ---------------------------------------------------------------------------------------------------------
 * Typed getters
 * ------------------------------------------------------------------------------------------------------- */

static const lw_gguf_value *get(lw_gguf *g, const char *key, lw_status *rc) {
    int64_t i = lw_gguf_find_key(g, key);
    if (i < 0) {
        *rc = lw__errorf(g->err, LW_ERR_NOT_FOUND, "key '%s' not found", key);
        return NULL;
    }
    *rc = LW_OK;
    return &g->values[i];
}

static int is_unsigned(lw_gguf_type t) {
    return t == LW_GGUF_UINT8 || t == LW_GGUF_UINT16 || t == LW_GGUF_UINT32 || t == LW_GGUF_UINT64;
}
static int is_signed(lw_gguf_type t) {
    return t == LW_GGUF_INT8 || t == LW_GGUF_INT16 || t == LW_GGUF_INT32 || t == LW_GGUF_INT64;
}

static lw_status mismatch(lw_gguf *g, const char *key, const lw_gguf_value *v, const char *want) {
    return lw__errorf(g->err, LW_ERR_TYPE_MISMATCH, "key '%s' has type %s, not convertible to %s", key,
                      lw_gguf_type_name(v->type), want);
}

lw_status lw_gguf_get_u64(lw_gguf *g, const char *key, uint64_t *out) {
    lw_status rc;
    const lw_gguf_value *v = get(g, key, &rc);
    if (!v) return rc;
    if (is_unsigned(v->type)) *out = v->v.u64;
    else if (is_signed(v->type) && v->v.i64 >= 0) *out = (uint64_t)v->v.i64;
    else return mismatch(g, key, v, "u64");
    return LW_OK;
}

lw_status lw_gguf_get_u32(lw_gguf *g, const char *key, uint32_t *out) {
    uint64_t x = 0;
    lw_status rc = lw_gguf_get_u64(g, key, &x);
    if (rc != LW_OK) return rc;
    if (x > UINT32_MAX) return mismatch(g, key, &g->values[lw_gguf_find_key(g, key)], "u32");
    *out = (uint32_t)x;
    return LW_OK;
}

lw_status lw_gguf_get_i64(lw_gguf *g, const char *key, int64_t *out) {
    lw_status rc;
    const lw_gguf_value *v = get(g, key, &rc);
    if (!v) return rc;
    if (is_signed(v->type)) *out = v->v.i64;
    else if (is_unsigned(v->type) && v->v.u64 <= (uint64_t)INT64_MAX) *out = (int64_t)v->v.u64;
    else return mismatch(g, key, v, "i64");
    return LW_OK;
}

lw_status lw_gguf_get_f64(lw_gguf *g, const char *key, double *out) {
    lw_status rc;
    const lw_gguf_value *v = get(g, key, &rc);
    if (!v) return rc;
    if (v->type == LW_GGUF_FLOAT32 || v->type == LW_GGUF_FLOAT64) *out = v->v.f64;
    else if (is_signed(v->type)) *out = (double)v->v.i64;
    else if (is_unsigned(v->type)) *out = (double)v->v.u64;
    else return mismatch(g, key, v, "f64");
    return LW_OK;
}

lw_status lw_gguf_get_f32(lw_gguf *g, const char *key, float *out) {
    double d = 0;
    lw_status rc = lw_gguf_get_f64(g, key, &d);
    if (rc == LW_OK) *out = (float)d;
    return rc;
}

lw_status lw_gguf_get_bool(lw_gguf *g, const char *key, int *out) {
    lw_status rc;
    const lw_gguf_value *v = get(g, key, &rc);
    if (!v) return rc;
    if (v->type != LW_GGUF_BOOL) return mismatch(g, key, v, "bool");
    *out = v->v.u64 != 0;
    return LW_OK;
}

lw_status lw_gguf_get_str(lw_gguf *g, const char *key, const char **out) {
    lw_status rc;
    const lw_gguf_value *v = get(g, key, &rc);
    if (!v) return rc;
    if (v->type != LW_GGUF_STRING) return mismatch(g, key, v, "str");
    *out = v->v.str.s;
    return LW_OK;
}

lw_status lw_gguf_get_arr(lw_gguf *g, const char *key, lw_gguf_type *type, uint64_t *n, const void **data) {
    lw_status rc;
    const lw_gguf_value *v = get(g, key, &rc);
    if (!v) return rc;
    if (v->type != LW_GGUF_ARRAY) return mismatch(g, key, v, "arr");
    if (type) *type = v->v.arr.type;
    if (n) *n = v->v.arr.n;
    if (data) *data = v->v.arr.data;
    return LW_OK;
}
