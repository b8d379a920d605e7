/* GGUF writer → reader round trips: every metadata type (nested arrays included), tensors of several types and
 * shapes, alignments; read back through all three source kinds (file, memory, host callbacks). Also: the
 * allocator hook sees every allocation, and an allocator that fails the Nth call makes every step fail
 * cleanly (no crash, no leak under ASAN). */
#include "llamaweb.h"
#include "test.h"

#include <stdio.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------------------
 * Counting / failing allocator
 * ------------------------------------------------------------------------------------------------------- */

typedef struct counting {
    long calls;   /* malloc + realloc calls so far                    */
    long live;    /* blocks allocated and not yet freed               */
    long fail_at; /* the call number that fails (0: never)            */
} counting;

static void *c_malloc(void *u, size_t n) {
    counting *c = u;
    if (++c->calls == c->fail_at) return NULL;
    void *p = malloc(n);
    if (p) c->live++;
    return p;
}
static void *c_realloc(void *u, void *p, size_t n) {
    counting *c = u;
    if (++c->calls == c->fail_at) return NULL;
    void *q = realloc(p, n);
    if (q && !p) c->live++;
    return q;
}
static void c_free(void *u, void *p) {
    counting *c = u;
    if (p) c->live--;
    free(p);
}

/* ---------------------------------------------------------------------------------------------------------
 * The file we write
 * ------------------------------------------------------------------------------------------------------- */

static const char *const strs[] = {"", "hello", "▁the", "with\0nul"};
static const int32_t i32s[] = {-1, 0, 7, INT32_MIN, INT32_MAX};
static const float f32s[] = {0.5f, -2.25f, 1e-30f};
static const uint8_t bools[] = {1, 0, 1};
static uint8_t q4[18 * 4];  /* q4_0 [64, 2]: 4 blocks */
static float f32t[3 * 5];   /* f32 [3, 5]             */
static uint16_t f16t[7];    /* f16 [7]                */

static lw_status fill_pattern(void *user, uint64_t off, void *dst, size_t n) {
    (void)user;
    for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)((off + i) * 7 + 3);
    return LW_OK;
}

static lw_status build(lw_gguf_writer *w, uint32_t alignment) {
    lw_status rc;
#define TRY(x)                                                                                                       \
    if ((rc = (x)) != LW_OK) return rc
    TRY(lw_gguf_writer_set_alignment(w, alignment));
    TRY(lw_gguf_writer_set_str(w, "general.architecture", "llama"));
    TRY(lw_gguf_writer_set_u32(w, "llama.block_count", 5));
    TRY(lw_gguf_writer_set_i32(w, "test.i32", -42));
    TRY(lw_gguf_writer_set_u64(w, "test.u64", UINT64_MAX));
    TRY(lw_gguf_writer_set_f32(w, "test.f32", 1e-5f));
    TRY(lw_gguf_writer_set_bool(w, "test.bool", 1));
    lw_gguf_value v = {.type = LW_GGUF_INT8, .v.i64 = -128};
    TRY(lw_gguf_writer_set(w, "test.i8", &v));
    v = (lw_gguf_value){.type = LW_GGUF_UINT16, .v.u64 = 65535};
    TRY(lw_gguf_writer_set(w, "test.u16", &v));
    v = (lw_gguf_value){.type = LW_GGUF_INT16, .v.i64 = -300};
    TRY(lw_gguf_writer_set(w, "test.i16", &v));
    v = (lw_gguf_value){.type = LW_GGUF_INT64, .v.i64 = INT64_MIN};
    TRY(lw_gguf_writer_set(w, "test.i64", &v));
    v = (lw_gguf_value){.type = LW_GGUF_FLOAT64, .v.f64 = 3.141592653589793};
    TRY(lw_gguf_writer_set(w, "test.f64", &v));
    v = (lw_gguf_value){.type = LW_GGUF_UINT8, .v.u64 = 200};
    TRY(lw_gguf_writer_set(w, "test.u8", &v));
    lw_gguf_str s[4];
    for (int i = 0; i < 4; i++) s[i] = (lw_gguf_str){i == 3 ? 8 : strlen(strs[i]), strs[i]};
    TRY(lw_gguf_writer_set_arr(w, "test.strs", LW_GGUF_STRING, 4, s));
    TRY(lw_gguf_writer_set_arr(w, "test.i32s", LW_GGUF_INT32, 5, i32s));
    TRY(lw_gguf_writer_set_arr(w, "test.f32s", LW_GGUF_FLOAT32, 3, f32s));
    TRY(lw_gguf_writer_set_arr(w, "test.bools", LW_GGUF_BOOL, 3, bools));
    TRY(lw_gguf_writer_set_arr(w, "test.empty", LW_GGUF_UINT64, 0, NULL));
    /* Nested: [[-1, 0, 7], ["", "hello"], [[]]] */
    lw_gguf_value inner_empty = {.type = LW_GGUF_ARRAY};
    inner_empty.v.arr.type = LW_GGUF_UINT8;
    lw_gguf_value nested[3] = {{.type = LW_GGUF_ARRAY}, {.type = LW_GGUF_ARRAY}, {.type = LW_GGUF_ARRAY}};
    nested[0].v.arr.type = LW_GGUF_INT32, nested[0].v.arr.n = 3, nested[0].v.arr.data = i32s;
    nested[1].v.arr.type = LW_GGUF_STRING, nested[1].v.arr.n = 2, nested[1].v.arr.data = s;
    nested[2].v.arr.type = LW_GGUF_ARRAY, nested[2].v.arr.n = 1, nested[2].v.arr.data = &inner_empty;
    TRY(lw_gguf_writer_set_arr(w, "test.nested", LW_GGUF_ARRAY, 3, nested));
    TRY(lw_gguf_writer_add_tensor(w, "q4", LW_TYPE_Q4_0, 2, (int64_t[]){64, 2}, q4, NULL, NULL));
    TRY(lw_gguf_writer_add_tensor(w, "f32", LW_TYPE_F32, 2, (int64_t[]){3, 5}, f32t, NULL, NULL));
    TRY(lw_gguf_writer_add_tensor(w, "f16", LW_TYPE_F16, 1, (int64_t[]){7}, f16t, NULL, NULL));
    TRY(lw_gguf_writer_add_tensor(w, "filled", LW_TYPE_Q8_0, 3, (int64_t[]){64, 3, 2}, NULL, fill_pattern, NULL));
    TRY(lw_gguf_writer_add_tensor(w, "scalar", LW_TYPE_I32, 0, NULL, i32s, NULL, NULL));
#undef TRY
    return LW_OK;
}

/* ---------------------------------------------------------------------------------------------------------
 * Checking what we read back
 * ------------------------------------------------------------------------------------------------------- */

static void check_file(lw_gguf *g, uint32_t alignment) {
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f;
    double d;
    int b;
    const char *str;
    CHECK(lw_gguf_version(g) == 3);
    CHECK(lw_gguf_alignment(g) == alignment);
    CHECK(lw_gguf_data_offset(g) % alignment == 0);
    CHECK(lw_gguf_get_str(g, "general.architecture", &str) == LW_OK && !strcmp(str, "llama"));
    CHECK(lw_gguf_get_u32(g, "llama.block_count", &u32) == LW_OK && u32 == 5);
    CHECK(lw_gguf_get_i64(g, "test.i32", &i64) == LW_OK && i64 == -42);
    CHECK(lw_gguf_get_u64(g, "test.i32", &u64) == LW_ERR_TYPE_MISMATCH); /* negative: not a u64 */
    CHECK(strstr(lw_gguf_error(g), "test.i32") != NULL);
    CHECK(lw_gguf_get_u64(g, "test.u64", &u64) == LW_OK && u64 == UINT64_MAX);
    CHECK(lw_gguf_get_u32(g, "test.u64", &u32) == LW_ERR_TYPE_MISMATCH);
    CHECK(lw_gguf_get_i64(g, "test.u64", &i64) == LW_ERR_TYPE_MISMATCH);
    CHECK(lw_gguf_get_f32(g, "test.f32", &f) == LW_OK && f == 1e-5f);
    CHECK(lw_gguf_get_f64(g, "test.f64", &d) == LW_OK && d == 3.141592653589793);
    CHECK(lw_gguf_get_f64(g, "llama.block_count", &d) == LW_OK && d == 5.0);
    CHECK(lw_gguf_get_bool(g, "test.bool", &b) == LW_OK && b == 1);
    CHECK(lw_gguf_get_i64(g, "test.i8", &i64) == LW_OK && i64 == -128);
    CHECK(lw_gguf_get_u32(g, "test.u16", &u32) == LW_OK && u32 == 65535);
    CHECK(lw_gguf_get_i64(g, "test.i16", &i64) == LW_OK && i64 == -300);
    CHECK(lw_gguf_get_i64(g, "test.i64", &i64) == LW_OK && i64 == INT64_MIN);
    CHECK(lw_gguf_get_u32(g, "test.u8", &u32) == LW_OK && u32 == 200);
    CHECK(lw_gguf_get_str(g, "llama.block_count", &str) == LW_ERR_TYPE_MISMATCH);
    CHECK(lw_gguf_get_u32(g, "no.such.key", &u32) == LW_ERR_NOT_FOUND);
    CHECK(strstr(lw_gguf_error(g), "no.such.key") != NULL);

    lw_gguf_type et;
    uint64_t n;
    const void *data;
    CHECK(lw_gguf_get_arr(g, "test.strs", &et, &n, &data) == LW_OK && et == LW_GGUF_STRING && n == 4);
    if (et == LW_GGUF_STRING && n == 4) {
        const lw_gguf_str *s = data;
        CHECK(s[0].len == 0 && s[0].s[0] == 0);
        CHECK(s[1].len == 5 && !strcmp(s[1].s, "hello"));
        CHECK(s[2].len == strlen("▁the") && !strcmp(s[2].s, "▁the"));
        CHECK(s[3].len == 8 && !memcmp(s[3].s, "with\0nul", 8) && s[3].s[8] == 0);
    }
    CHECK(lw_gguf_get_arr(g, "test.i32s", &et, &n, &data) == LW_OK && et == LW_GGUF_INT32 && n == 5 &&
          !memcmp(data, i32s, sizeof i32s));
    CHECK(lw_gguf_get_arr(g, "test.f32s", &et, &n, &data) == LW_OK && et == LW_GGUF_FLOAT32 && n == 3 &&
          !memcmp(data, f32s, sizeof f32s));
    CHECK(lw_gguf_get_arr(g, "test.bools", &et, &n, &data) == LW_OK && et == LW_GGUF_BOOL && n == 3 &&
          !memcmp(data, bools, sizeof bools));
    CHECK(lw_gguf_get_arr(g, "test.empty", &et, &n, &data) == LW_OK && et == LW_GGUF_UINT64 && n == 0);
    CHECK(lw_gguf_get_arr(g, "test.nested", &et, &n, &data) == LW_OK && et == LW_GGUF_ARRAY && n == 3);
    if (et == LW_GGUF_ARRAY && n == 3) {
        const lw_gguf_value *a = data;
        CHECK(a[0].v.arr.type == LW_GGUF_INT32 && a[0].v.arr.n == 3 && !memcmp(a[0].v.arr.data, i32s, 12));
        CHECK(a[1].v.arr.type == LW_GGUF_STRING && a[1].v.arr.n == 2 &&
              !strcmp(((const lw_gguf_str *)a[1].v.arr.data)[1].s, "hello"));
        CHECK(a[2].v.arr.type == LW_GGUF_ARRAY && a[2].v.arr.n == 1);
        if (a[2].v.arr.n == 1) {
            const lw_gguf_value *e = a[2].v.arr.data;
            CHECK(e->type == LW_GGUF_ARRAY && e->v.arr.type == LW_GGUF_UINT8 && e->v.arr.n == 0);
        }
    }
    /* Key order and count are kept. */
    CHECK(lw_gguf_n_kv(g) == 18 + (alignment != 32)); /* 18 set + general.alignment when not 32 */
    CHECK(!strcmp(lw_gguf_key(g, 0), "general.architecture"));
    CHECK(!strcmp(lw_gguf_key(g, 17), "test.nested"));

    /* Tensors: shapes, types and bytes. */
    CHECK(lw_gguf_n_tensors(g) == 5);
    struct {
        const char *name;
        uint32_t type, n_dims;
        int64_t ne0, ne1, ne2;
        uint64_t bytes;
        const void *data;
    } want[] = {{"q4", LW_TYPE_Q4_0, 2, 64, 2, 1, sizeof q4, q4},
                {"f32", LW_TYPE_F32, 2, 3, 5, 1, sizeof f32t, f32t},
                {"f16", LW_TYPE_F16, 1, 7, 1, 1, sizeof f16t, f16t},
                {"filled", LW_TYPE_Q8_0, 3, 64, 3, 2, 34 * 2 * 3 * 2, NULL},
                {"scalar", LW_TYPE_I32, 0, 1, 1, 1, 4, i32s}};
    for (int i = 0; i < 5; i++) {
        int64_t k = lw_gguf_find_tensor(g, want[i].name);
        CHECK_MSG(k == i, "tensor %s at %lld", want[i].name, (long long)k);
        if (k < 0) continue;
        const lw_gguf_tensor *t = lw_gguf_tensor_at(g, k);
        CHECK(t->type == want[i].type && t->n_dims == want[i].n_dims);
        CHECK(t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1 && t->ne[2] == want[i].ne2 && t->ne[3] == 1);
        CHECK_MSG(t->n_bytes == want[i].bytes, "%s: %llu bytes", t->name, (unsigned long long)t->n_bytes);
        CHECK(t->offset % alignment == 0);
        uint8_t buf[512];
        CHECK(t->n_bytes <= sizeof buf);
        if (t->n_bytes > sizeof buf) continue;
        CHECK(lw_gguf_read_tensor(g, k, 0, buf, (size_t)t->n_bytes) == LW_OK);
        if (want[i].data) {
            CHECK(!memcmp(buf, want[i].data, (size_t)t->n_bytes));
        } else {
            uint8_t exp[512];
            fill_pattern(NULL, 0, exp, (size_t)t->n_bytes);
            CHECK(!memcmp(buf, exp, (size_t)t->n_bytes));
        }
        CHECK(lw_gguf_read_tensor(g, k, 1, buf, (size_t)t->n_bytes) == LW_ERR_INVALID_ARG); /* past its end */
    }
    CHECK(lw_gguf_find_tensor(g, "nope") == -1);
}

/* Host callback source over a memory buffer, standing in for JavaScript. */
typedef struct host {
    const uint8_t *p; /* bytes          */
    int closed;       /* close() called */
    long reads;       /* read() calls   */
} host;
static lw_status host_read(void *u, uint64_t off, void *dst, size_t n) {
    host *h = u;
    h->reads++;
    memcpy(dst, h->p + off, n);
    return LW_OK;
}
static void host_close(void *u) {
    ((host *)u)->closed = 1;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n ? *n : 1);
    if (p && fread(p, 1, *n, f) != *n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    return p;
}

static void round_trip(uint32_t alignment) {
    char path[1024];
    mkdir(test_tmp_dir(), 0755);
    snprintf(path, sizeof path, "%s/roundtrip-%u.gguf", test_tmp_dir(), alignment);
    lw_gguf_writer *w;
    CHECK(lw_gguf_writer_new(NULL, &w) == LW_OK);
    CHECK(build(w, alignment) == LW_OK);
    CHECK_MSG(lw_gguf_writer_write_file(w, path, 0) == LW_OK, "%s", lw_gguf_writer_error(w));
    lw_gguf_writer_free(w);

    /* File source. */
    char err[256];
    lw_source *src;
    CHECK(lw_source_open_file(path, NULL, &src, err, sizeof err) == LW_OK);
    lw_gguf *g;
    CHECK_MSG(lw_gguf_open(src, NULL, &g) == LW_OK, "%s", lw_gguf_error(g));
    check_file(g, alignment);
    lw_gguf_close(g);
    lw_source_close(src);

    /* Memory and callback sources over the same bytes. */
    size_t n;
    uint8_t *bytes = slurp(path, &n);
    CHECK(bytes != NULL);
    if (!bytes) return;
    CHECK(lw_source_from_memory(bytes, n, NULL, &src) == LW_OK);
    CHECK(lw_gguf_open(src, NULL, &g) == LW_OK);
    check_file(g, alignment);
    lw_gguf_close(g);
    lw_source_close(src);

    host h = {bytes, 0, 0};
    CHECK(lw_source_from_callbacks(n, host_read, host_close, &h, NULL, &src) == LW_OK);
    CHECK(lw_gguf_open(src, NULL, &g) == LW_OK);
    check_file(g, alignment);
    lw_gguf_close(g);
    lw_source_close(src);
    CHECK(h.closed == 1);
    CHECK(h.reads > 0 && h.reads < 40); /* buffered: a few reads for the header, one per tensor read */

    /* The allocator hook: every allocation goes through it and all are freed. */
    counting c = {0, 0, 0};
    lw_allocator a = {c_malloc, c_realloc, c_free, &c};
    CHECK(lw_source_from_memory(bytes, n, &a, &src) == LW_OK);
    CHECK(lw_gguf_open(src, &a, &g) == LW_OK);
    check_file(g, alignment);
    lw_gguf_close(g);
    lw_source_close(src);
    CHECK(c.calls > 0 && c.live == 0);

    /* Fail each allocation in turn: the open fails with NOMEM (or succeeds once we pass the last one). */
    long total = c.calls;
    for (long k = 1; k <= total; k++) {
        counting f = {0, 0, k};
        lw_allocator fa = {c_malloc, c_realloc, c_free, &f};
        lw_source *s2 = NULL;
        lw_status rc = lw_source_from_memory(bytes, n, &fa, &s2);
        if (rc == LW_OK) {
            lw_gguf *g2 = NULL;
            rc = lw_gguf_open(s2, &fa, &g2);
            lw_gguf_close(g2);
            lw_source_close(s2);
        }
        CHECK_MSG(rc == LW_ERR_NOMEM, "failing allocation %ld of %ld gave %s", k, total, lw_status_str(rc));
        CHECK_MSG(f.live == 0, "failing allocation %ld leaked %ld blocks", k, f.live);
    }
    /* Writer under a failing allocator too. */
    for (long k = 1; k < 200; k++) {
        counting f = {0, 0, k};
        lw_allocator fa = {c_malloc, c_realloc, c_free, &f};
        lw_gguf_writer *w2 = NULL;
        lw_status rc = lw_gguf_writer_new(&fa, &w2);
        if (rc == LW_OK) rc = build(w2, alignment);
        if (rc == LW_OK) rc = lw_gguf_writer_write_file(w2, path, 0);
        lw_gguf_writer_free(w2);
        CHECK_MSG(f.live == 0, "writer: failing allocation %ld leaked %ld blocks", k, f.live);
        if (rc == LW_OK) break;
        CHECK_MSG(rc == LW_ERR_NOMEM, "writer: failing allocation %ld gave %s", k, lw_status_str(rc));
    }
    free(bytes);
}

int main(void) {
    for (size_t i = 0; i < sizeof q4; i++) q4[i] = (uint8_t)(i * 13 + 1);
    for (int i = 0; i < 15; i++) f32t[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 7; i++) f16t[i] = (uint16_t)(0x3c00 + i);
    round_trip(32);
    round_trip(64);
    round_trip(4096);

    /* Writer refuses what the reader would refuse. */
    lw_gguf_writer *w;
    CHECK(lw_gguf_writer_new(NULL, &w) == LW_OK);
    CHECK(lw_gguf_writer_set_u32(w, "k", 1) == LW_OK);
    CHECK(lw_gguf_writer_set_u32(w, "k", 2) == LW_ERR_DUPLICATE_KEY);
    CHECK(lw_gguf_writer_set_alignment(w, 48) == LW_ERR_BAD_ALIGNMENT);
    CHECK(lw_gguf_writer_add_tensor(w, "t", LW_TYPE_Q4_0, 1, (int64_t[]){33}, q4, NULL, NULL) == LW_ERR_BAD_DIMS);
    CHECK(lw_gguf_writer_add_tensor(w, "t", 4, 1, (int64_t[]){32}, q4, NULL, NULL) == LW_ERR_BAD_TENSOR_TYPE);
    CHECK(lw_gguf_writer_add_tensor(w, "t", LW_TYPE_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, q4, NULL, NULL) ==
          LW_ERR_BAD_DIMS);
    CHECK(lw_gguf_writer_add_tensor(w, "t", LW_TYPE_F32, 1, (int64_t[]){4}, q4, NULL, NULL) == LW_OK);
    CHECK(lw_gguf_writer_add_tensor(w, "t", LW_TYPE_F32, 1, (int64_t[]){4}, q4, NULL, NULL) ==
          LW_ERR_DUPLICATE_NAME);
    CHECK(strstr(lw_gguf_writer_error(w), "'t'") != NULL);
    lw_gguf_writer_free(w);

    /* Source edge cases. */
    lw_source *src;
    uint8_t mem[16] = {0}, out[16];
    CHECK(lw_source_from_memory(mem, sizeof mem, NULL, &src) == LW_OK);
    CHECK(lw_source_read(src, 8, out, 8) == LW_OK);
    CHECK(lw_source_read(src, 9, out, 8) == LW_ERR_TRUNCATED);
    CHECK(lw_source_read(src, UINT64_MAX, out, 2) == LW_ERR_TRUNCATED); /* offset + n overflows */
    CHECK(strstr(lw_source_error(src), "passes the end") != NULL);
    lw_source_close(src);
    char err[256];
    CHECK(lw_source_open_file("/nonexistent/x.gguf", NULL, &src, err, sizeof err) == LW_ERR_IO && src == NULL);
    CHECK(strstr(err, "/nonexistent/x.gguf") != NULL);
    CHECK(lw_source_open_file("/", NULL, &src, err, sizeof err) == LW_ERR_IO);
    return test_summary("test-gguf-roundtrip");
}
