/* The row store (src/rows/): row files written from a byte source and read back, reused while their
 * manifest matches and rewritten when it does not (a changed source byte, a truncated file, a damaged or
 * hostile manifest); hostile manifest values refused with a status and a message; the row cache's LRU order,
 * counters, load hook and limits; allocation failures through the injectable allocator. */
#include "rows/rows.h"
#include "alloc-counter.h"
#include "test.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_ROWS    100
#define ROW_BYTES 36
#define TAB_OFF   40 /* the table sits inside a larger "model file", as a GGUF tensor does */

static uint8_t file_bytes[TAB_OFF + N_ROWS * ROW_BYTES + 17]; /* the model source's bytes */

static void fill_source(void) {
    for (size_t i = 0; i < sizeof file_bytes; i++) file_bytes[i] = (uint8_t)(i * 131u + (i >> 7) * 7u + 3u);
}

static lw__rows_spec spec_over(lw_source *src, size_t chunk) {
    lw__rows_spec sp = {
        src,  TAB_OFF, ROW_BYTES, N_ROWS, 0 /* f32: a type id; never interpreted */, "token_embd.weight",
        chunk};
    return sp;
}

/* Counts files in dir whose name contains ".tmp." (what a failed or finished write must not leave). */
static int tmp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static void test_hash_chunking(void) {
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 7 + 1);
    lw__rows_hash h;
    lw__rows_hash_init(&h);
    lw__rows_hash_update(&h, buf, sizeof buf);
    const uint64_t whole = lw__rows_hash_final(&h);
    for (size_t step = 1; step < 20; step++) {
        lw__rows_hash_init(&h);
        for (size_t i = 0; i < sizeof buf; i += step)
            lw__rows_hash_update(&h, buf + i, sizeof buf - i < step ? sizeof buf - i : step);
        CHECK_MSG(lw__rows_hash_final(&h) == whole, "chunks of %zu", step);
    }
    lw__rows_hash_init(&h);
    lw__rows_hash_update(&h, buf, 999);
    CHECK(lw__rows_hash_final(&h) != whole); /* one byte shorter */
    buf[500] ^= 1;
    lw__rows_hash_init(&h);
    lw__rows_hash_update(&h, buf, sizeof buf);
    CHECK(lw__rows_hash_final(&h) != whole); /* one bit changed */
}

static lw__rows_manifest good_manifest(void) {
    lw__rows_manifest m = {0};
    m.version = LW__ROWS_VERSION;
    m.row_bytes = 64;
    m.n_rows = 10;
    m.data_off = LW__ROWS_HEADER_BYTES;
    m.src_bytes = 640;
    strcpy(m.name, "t");
    return m;
}

/* Encodes m (a valid checksum over whatever values) and expects decode to refuse it with want. */
static void expect_refused(const lw__rows_manifest *m, lw_status want, const char *what) {
    uint8_t buf[LW__ROWS_HEADER_BYTES];
    lw__rows_manifest_encode(m, buf);
    lw__rows_manifest got;
    char err[LW_ERRMSG_SIZE] = "";
    lw_status st = lw__rows_manifest_decode(buf, sizeof buf, &got, err);
    CHECK_MSG(st == want, "%s: %s (%s), want %s", what, lw_status_str(st), err, lw_status_str(want));
    CHECK_MSG(err[0] != 0, "%s: no message", what);
}

static void test_manifest(void) {
    uint8_t buf[LW__ROWS_HEADER_BYTES];
    lw__rows_manifest m = good_manifest(), got;
    char err[LW_ERRMSG_SIZE];
    lw__rows_manifest_encode(&m, buf);
    CHECK(lw__rows_manifest_decode(buf, sizeof buf, &got, err) == LW_OK);
    CHECK(got.row_bytes == 64 && got.n_rows == 10 && !strcmp(got.name, "t"));
    CHECK(lw__rows_manifest_decode(buf, 100, &got, err) == LW_ERR_TRUNCATED);
    buf[70] ^= 0x10; /* a flipped bit: the checksum catches it */
    CHECK(lw__rows_manifest_decode(buf, sizeof buf, &got, err) == LW_ERR_BAD_MAGIC);
    buf[0] = 'X';
    CHECK(lw__rows_manifest_decode(buf, sizeof buf, &got, err) == LW_ERR_BAD_MAGIC);

    lw__rows_manifest h = good_manifest();
    h.version = 2;
    expect_refused(&h, LW_ERR_BAD_VERSION, "version 2");
    h = good_manifest(), h.n_rows = 0, h.src_bytes = 0;
    expect_refused(&h, LW_ERR_TOO_LARGE, "row count 0");
    h = good_manifest(), h.row_bytes = 0, h.src_bytes = 0;
    expect_refused(&h, LW_ERR_TOO_LARGE, "row size 0");
    h = good_manifest(), h.n_rows = 1ull << 40, h.src_bytes = 64ull << 40;
    expect_refused(&h, LW_ERR_TOO_LARGE, "2^40 rows");
    h = good_manifest(), h.row_bytes = 1ull << 62, h.n_rows = 4;
    expect_refused(&h, LW_ERR_TOO_LARGE, "rows of 2^62 bytes");
    h = good_manifest(), h.data_off = UINT64_MAX - 100;
    expect_refused(&h, LW_ERR_OVERFLOW, "data offset near 2^64");
    h = good_manifest(), h.row_bytes = LW__ROWS_MAX_ROW, h.n_rows = LW__ROWS_MAX_COUNT,
    h.data_off = (uint64_t)INT64_MAX - 4096;
    expect_refused(&h, LW_ERR_OVERFLOW, "end past off_t");
    h = good_manifest(), h.data_off = 100;
    expect_refused(&h, LW_ERR_OVERLAP, "rows inside the manifest");
    h = good_manifest(), h.src_bytes = 641;
    expect_refused(&h, LW_ERR_BAD_DIMS, "source size != rows");
    h = good_manifest(), memset(h.name, 'a', sizeof h.name);
    expect_refused(&h, LW_ERR_BAD_STRING, "unterminated name");
}

static lw__rowfile *open_ok(lw_source *src, const char *path, size_t chunk, lw__rows_outcome want,
                            const char *what) {
    lw__rows_spec sp = spec_over(src, chunk);
    lw__rowfile *rf = NULL;
    char err[LW_ERRMSG_SIZE] = "";
    lw_status st = lw__rowfile_open(NULL, &sp, path, &rf, err);
    CHECK_MSG(st == LW_OK, "%s: %s", what, err);
    if (!rf) return NULL;
    CHECK_MSG(lw__rowfile_outcome(rf) == want, "%s: outcome %d, want %d (%s)", what, lw__rowfile_outcome(rf),
              want, lw__rowfile_why(rf));
    printf("  %s: outcome %d%s%s\n", what, lw__rowfile_outcome(rf), *lw__rowfile_why(rf) ? ": " : "",
           lw__rowfile_why(rf));
    return rf;
}

/* Every row of rf equals the source's. */
static void check_rows(lw__rowfile *rf, const char *what) {
    uint8_t row[ROW_BYTES * 3];
    char err[LW_ERRMSG_SIZE];
    int bad = 0;
    for (uint64_t r = 0; r + 3 <= N_ROWS; r += 3) {
        CHECK(lw__rowfile_read(rf, r, 3, row, err) == LW_OK);
        bad += memcmp(row, file_bytes + TAB_OFF + r * ROW_BYTES, sizeof row) != 0;
    }
    CHECK(lw__rowfile_read(rf, N_ROWS - 1, 1, row, err) == LW_OK);
    bad += memcmp(row, file_bytes + TAB_OFF + (N_ROWS - 1) * ROW_BYTES, ROW_BYTES) != 0;
    CHECK_MSG(bad == 0, "%s: %d row groups differ", what, bad);
    CHECK(lw__rowfile_read(rf, N_ROWS, 1, row, err) == LW_ERR_INVALID_ARG);
    CHECK(lw__rowfile_read(rf, UINT64_MAX, 2, row, err) == LW_ERR_INVALID_ARG);
}

static void test_row_file(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/t.rows", dir);
    unlink(path);
    fill_source();
    lw_source *src = NULL;
    CHECK(lw_source_from_memory(file_bytes, sizeof file_bytes, NULL, &src) == LW_OK);

    lw__rowfile *rf = open_ok(src, path, 0, LW__ROWS_CREATED, "new");
    if (rf) check_rows(rf, "new");
    lw__rowfile_close(rf);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == LW__ROWS_HEADER_BYTES + N_ROWS * ROW_BYTES);

    /* the same source, streamed in odd chunks (7 bytes: words split across reads): the same fingerprint */
    rf = open_ok(src, path, 7, LW__ROWS_REUSED, "same source");
    lw__rowfile_close(rf);

    /* a byte of the source changes: stale by fingerprint, rewritten, and the rows are the new ones */
    file_bytes[TAB_OFF + 57 * ROW_BYTES + 5] ^= 0x5a;
    rf = open_ok(src, path, 1000, LW__ROWS_REWRITTEN, "changed byte");
    if (rf) {
        CHECK(strstr(lw__rowfile_why(rf), "fingerprint") != NULL);
        check_rows(rf, "changed byte");
    }
    lw__rowfile_close(rf);
    /* a byte outside the table does not matter */
    file_bytes[3] ^= 1;
    rf = open_ok(src, path, 0, LW__ROWS_REUSED, "byte outside the table");
    lw__rowfile_close(rf);

    /* truncated (a crash of another writer, a full disk): rewritten */
    CHECK(truncate(path, LW__ROWS_HEADER_BYTES + 10 * ROW_BYTES) == 0);
    rf = open_ok(src, path, 0, LW__ROWS_REWRITTEN, "truncated");
    if (rf) check_rows(rf, "truncated");
    lw__rowfile_close(rf);
    CHECK(truncate(path, 100) == 0);
    rf = open_ok(src, path, 0, LW__ROWS_REWRITTEN, "truncated into the manifest");
    lw__rowfile_close(rf);
    /* longer than the manifest says */
    CHECK(truncate(path, LW__ROWS_HEADER_BYTES + N_ROWS * ROW_BYTES + 1) == 0);
    rf = open_ok(src, path, 0, LW__ROWS_REWRITTEN, "too long");
    lw__rowfile_close(rf);

    /* a hostile manifest on disk (valid checksum, row count 0): refused by the parser, so rewritten */
    {
        lw__rows_manifest h = good_manifest();
        h.n_rows = 0;
        uint8_t hdr[LW__ROWS_HEADER_BYTES];
        lw__rows_manifest_encode(&h, hdr);
        FILE *f = fopen(path, "r+b");
        CHECK(f && fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr);
        if (f) fclose(f);
        rf = open_ok(src, path, 0, LW__ROWS_REWRITTEN, "hostile manifest on disk");
        if (rf) CHECK(strstr(lw__rowfile_why(rf), "row count") != NULL);
        lw__rowfile_close(rf);
    }
    /* another layout expected of the same file (the model's tensor changed shape): rewritten */
    {
        lw__rows_spec sp = spec_over(src, 0);
        sp.row_bytes = ROW_BYTES * 2, sp.n_rows = N_ROWS / 2;
        char err[LW_ERRMSG_SIZE];
        CHECK(lw__rowfile_open(NULL, &sp, path, &rf, err) == LW_OK);
        CHECK(rf && lw__rowfile_outcome(rf) == LW__ROWS_REWRITTEN);
        lw__rowfile_close(rf);
    }
    CHECK(tmp_files(dir) == 0);

    /* bad specs and paths: a status and a message, nothing left behind */
    {
        char err[LW_ERRMSG_SIZE] = "";
        lw__rows_spec sp = spec_over(src, 0);
        sp.n_rows = N_ROWS + 10; /* passes the end of the source */
        CHECK(lw__rowfile_open(NULL, &sp, path, &rf, err) == LW_ERR_OUT_OF_FILE && !rf && err[0]);
        sp = spec_over(src, 0), sp.row_bytes = 1ull << 40, sp.n_rows = 1ull << 40;
        CHECK(lw__rowfile_open(NULL, &sp, path, &rf, err) == LW_ERR_TOO_LARGE && !rf);
        sp = spec_over(src, 0), sp.n_rows = 0;
        CHECK(lw__rowfile_open(NULL, &sp, path, &rf, err) == LW_ERR_TOO_LARGE && !rf);
        sp = spec_over(src, 0);
        char bad[600];
        snprintf(bad, sizeof bad, "%s/no-such-dir/t.rows", dir);
        err[0] = 0;
        CHECK(lw__rowfile_open(NULL, &sp, bad, &rf, err) == LW_ERR_IO && !rf && err[0]);
        printf("  bad path: %s\n", err);
        CHECK(lw__rows_mkdirs("/dev/null/x", err) == LW_ERR_IO);
    }
    CHECK(tmp_files(dir) == 0);
    lw_source_close(src);
}

/* A failing host source: its reads fail from the n-th on. */
typedef struct failing {
    int calls, fail_from; /* reads so far / first failing read (1-based) */
} failing;
static lw_status failing_read(void *u, uint64_t off, void *dst, size_t n) {
    failing *f = u;
    if (++f->calls >= f->fail_from) return LW_ERR_IO;
    memcpy(dst, file_bytes + off, n);
    return LW_OK;
}

static void test_source_failure(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/fail.rows", dir);
    unlink(path);
    fill_source();
    for (int k = 1; k <= 3; k++) {
        failing f = {0, k};
        lw_source *src = NULL;
        CHECK(lw_source_from_callbacks(sizeof file_bytes, failing_read, NULL, &f, NULL, &src) == LW_OK);
        lw__rows_spec sp = spec_over(src, 1024); /* 4 reads per pass */
        lw__rowfile *rf = NULL;
        char err[LW_ERRMSG_SIZE] = "";
        CHECK(lw__rowfile_open(NULL, &sp, path, &rf, err) == LW_ERR_IO && !rf && err[0]);
        lw_source_close(src);
    }
    CHECK(access(path, F_OK) != 0); /* never a file for a table that could not be read */
    CHECK(tmp_files(dir) == 0);
}

/* The load hook's record. */
typedef struct loads {
    int n;                 /* calls          */
    uint32_t slot, id, ev; /* the last call's */
    int bytes_ok;          /* every call passed the row's bytes */
} loads;
static void on_load(void *u, uint32_t slot, uint32_t id, uint32_t evicted, const void *row, size_t n) {
    loads *l = u;
    l->n++;
    l->slot = slot, l->id = id, l->ev = evicted;
    l->bytes_ok &= n == ROW_BYTES && !memcmp(row, file_bytes + TAB_OFF + (size_t)id * ROW_BYTES, n);
}

static void test_cache(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/cache.rows", dir);
    fill_source();
    lw_source *src = NULL;
    CHECK(lw_source_from_memory(file_bytes, sizeof file_bytes, NULL, &src) == LW_OK);
    lw__rows_spec sp = spec_over(src, 0);
    lw__rowfile *rf = NULL;
    char err[LW_ERRMSG_SIZE];
    CHECK(lw__rowfile_open(NULL, &sp, path, &rf, err) == LW_OK);
    if (!rf) return;
    lw__rowcache *rc = NULL;
    CHECK(lw__rowcache_create(NULL, rf, 0, NULL, NULL, &rc, err) == LW_ERR_INVALID_ARG && !rc);
    CHECK(lw__rowcache_create(NULL, rf, N_ROWS + 1, NULL, NULL, &rc, err) == LW_ERR_INVALID_ARG && !rc);
    loads l = {0, 0, 0, 0, 1};
    CHECK(lw__rowcache_create(NULL, rf, 4, on_load, &l, &rc, err) == LW_OK);
    if (!rc) return;
    const uint32_t *map = lw__rowcache_id_slots(rc);
    lw__rowcache_stats s;
    uint32_t slots[8];

    const int32_t a[4] = {0, 1, 2, 3};
    CHECK(lw__rowcache_lookup(rc, a, 4, slots) == LW_OK);
    lw__rowcache_get_stats(rc, &s);
    CHECK(s.lookups == 4 && s.misses == 4 && s.hits == 0 && s.evictions == 0 &&
          s.bytes_read == 4 * ROW_BYTES);
    CHECK(l.n == 4 && l.ev == LW__ROWS_NONE);
    for (int i = 0; i < 4; i++) {
        CHECK(map[i] == slots[i]);
        CHECK(
            !memcmp(lw__rowcache_row(rc, slots[i]), file_bytes + TAB_OFF + (size_t)i * ROW_BYTES, ROW_BYTES));
    }
    /* LRU order now (most recent first): 3 2 1 0; touching 0 makes 1 the oldest */
    const int32_t zero = 0, four = 4, five = 5;
    CHECK(lw__rowcache_lookup(rc, &zero, 1, slots) == LW_OK);
    CHECK(lw__rowcache_lookup(rc, &four, 1, slots) == LW_OK);
    CHECK(map[1] == LW__ROWS_NONE && map[0] != LW__ROWS_NONE && map[4] == slots[0]);
    CHECK(l.id == 4 && l.ev == 1);
    CHECK(lw__rowcache_lookup(rc, &five, 1, slots) == LW_OK); /* then 2 goes */
    CHECK(map[2] == LW__ROWS_NONE && map[3] != LW__ROWS_NONE && l.ev == 2);
    lw__rowcache_get_stats(rc, &s);
    CHECK(s.lookups == 7 && s.hits == 1 && s.misses == 6 && s.evictions == 2);

    /* repeats inside one lookup: one miss, then hits */
    const int32_t rep[3] = {9, 9, 9};
    CHECK(lw__rowcache_lookup(rc, rep, 3, slots) == LW_OK);
    CHECK(slots[0] == slots[1] && slots[1] == slots[2]);
    lw__rowcache_get_stats(rc, &s);
    CHECK(s.misses == 7 && s.hits == 3);

    /* as many distinct ids as slots: all resident together, slots distinct */
    const int32_t four_new[4] = {10, 11, 12, 13};
    CHECK(lw__rowcache_lookup(rc, four_new, 4, slots) == LW_OK);
    int distinct = 1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++) distinct &= slots[i] != slots[j];
    CHECK(distinct);
    for (int i = 0; i < 4; i++) CHECK(map[10 + i] == slots[i]);
    /* one more than the slots: refused with a message; what was loaded stays consistent */
    const int32_t five_new[5] = {20, 21, 22, 23, 24};
    CHECK(lw__rowcache_lookup(rc, five_new, 5, slots) == LW_ERR_TOO_LARGE);
    CHECK(strstr(lw__rowcache_error(rc), "slots") != NULL);
    for (int i = 20; i < 24; i++) CHECK(map[i] != LW__ROWS_NONE);
    CHECK(map[24] == LW__ROWS_NONE);
    /* ids outside the table */
    const int32_t bad[2] = {-1, N_ROWS};
    CHECK(lw__rowcache_lookup(rc, bad, 1, slots) == LW_ERR_INVALID_ARG);
    CHECK(lw__rowcache_lookup(rc, bad + 1, 1, slots) == LW_ERR_INVALID_ARG);
    CHECK(l.bytes_ok);
    /* every map entry agrees with the slots */
    int resident = 0, consistent = 1;
    for (uint32_t id = 0; id < N_ROWS; id++)
        if (map[id] != LW__ROWS_NONE) {
            resident++;
            consistent &=
                !memcmp(lw__rowcache_row(rc, map[id]), file_bytes + TAB_OFF + id * ROW_BYTES, ROW_BYTES);
        }
    CHECK(resident == 4 && consistent);
    lw__rowcache_free(rc);

    /* warming: clipped to the slots and the table, counted apart from lookups */
    CHECK(lw__rowcache_create(NULL, rf, 8, NULL, NULL, &rc, err) == LW_OK);
    if (rc) {
        CHECK(lw__rowcache_warm(rc, 95, 100) == LW_OK); /* 95..99 */
        CHECK(lw__rowcache_warm(rc, 0, 100) == LW_OK);  /* 0..7: replaces those */
        CHECK(lw__rowcache_warm(rc, 1000, 5) == LW_OK);
        lw__rowcache_get_stats(rc, &s);
        CHECK(s.warm_loads == 13 && s.lookups == 0 && s.misses == 0);
        const int32_t w[2] = {7, 99};
        CHECK(lw__rowcache_lookup(rc, w, 2, slots) == LW_OK);
        lw__rowcache_get_stats(rc, &s);
        CHECK(s.hits == 1 && s.misses == 1);
        lw__rowcache_free(rc);
    }
    lw__rowfile_close(rf);
    lw_source_close(src);
}

/* Failing the k-th allocator call of open + cache creation, for every k: a clean error, nothing leaked. */
static void test_alloc_failures(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/alloc.rows", dir);
    fill_source();
    lw_source *src = NULL;
    CHECK(lw_source_from_memory(file_bytes, sizeof file_bytes, NULL, &src) == LW_OK);
    int nomem = 0, total = 0;
    for (long k = 1; k < 40; k++) {
        unlink(path);
        alloc_counter ac = {0, 0, k, 0};
        lw_allocator a = alloc_counter_hooks(&ac);
        lw__rows_spec sp = spec_over(src, 0);
        lw__rowfile *rf = NULL;
        lw__rowcache *rc = NULL;
        char err[LW_ERRMSG_SIZE] = "";
        lw_status st = lw__rowfile_open(&a, &sp, path, &rf, err);
        if (st == LW_OK) st = lw__rowcache_create(&a, rf, 10, NULL, NULL, &rc, err);
        if (st == LW_OK) {
            const int32_t ids[3] = {1, 50, 99};
            CHECK(lw__rowcache_lookup(rc, ids, 3, NULL) == LW_OK);
        }
        lw__rowcache_free(rc);
        lw__rowfile_close(rf);
        CHECK_MSG(ac.live == 0, "fail at %ld: %ld blocks leaked", k, ac.live);
        if (ac.failed) {
            total++;
            nomem += st == LW_ERR_NOMEM;
            CHECK_MSG(st != LW_OK && err[0], "fail at %ld: %s", k, lw_status_str(st));
        } else {
            CHECK(st == LW_OK);
            break;
        }
    }
    printf("  allocation failures: %d injected, %d LW_ERR_NOMEM\n", total, nomem);
    CHECK(total >= 5 && nomem == total);
    CHECK(tmp_files(dir) == 0);
    lw_source_close(src);
}

int main(void) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/test-rows", test_tmp_dir());
    char err[LW_ERRMSG_SIZE];
    if (lw__rows_mkdirs(dir, err) != LW_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_hash_chunking();
    test_manifest();
    test_row_file(dir);
    test_source_failure(dir);
    test_cache(dir);
    test_alloc_failures(dir);
    return test_summary("test-rows");
}
