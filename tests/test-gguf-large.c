/* A 5 GB GGUF written sparsely by our writer (data region mostly holes): the header parses through the file
 * source and the last tensor, which lies past 4 GiB, reads back byte for byte. Proves 64-bit offsets end to
 * end (and, on a wasm32 host, that nothing wraps size_t). */
#include "llamaweb.h"
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

#define GIB (1ull << 30)

/* Zeros for the bulk tensors: they become holes. */
static lw_status fill_zero(void *user, uint64_t off, void *dst, size_t n) {
    (void)user, (void)off;
    memset(dst, 0, n);
    return LW_OK;
}

/* A position-dependent pattern for the last tensor, so a wrong offset cannot pass. */
static uint8_t pattern(uint64_t i) {
    return (uint8_t)((i * 2654435761u) >> 13);
}
static lw_status fill_pattern(void *user, uint64_t off, void *dst, size_t n) {
    (void)user;
    for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = pattern(off + i);
    return LW_OK;
}

int main(void) {
    char path[1024];
    mkdir(test_tmp_dir(), 0755);
    snprintf(path, sizeof path, "%s/large-5g.gguf", test_tmp_dir());

    lw_gguf_writer *w;
    CHECK(lw_gguf_writer_new(NULL, &w) == LW_OK);
    CHECK(lw_gguf_writer_set_str(w, "general.architecture", "llama") == LW_OK);
    char name[64];
    for (int i = 0; i < 5; i++) { /* 5 x 1 GiB of f32 zeros */
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
        CHECK(lw_gguf_writer_add_tensor(w, name, LW_TYPE_F32, 2, (int64_t[]){16384, 16384}, NULL, fill_zero,
                                        NULL) == LW_OK);
    }
    const uint64_t last_bytes = 96 * 1000 * 34; /* q8_0 [3072, 1000] */
    CHECK(lw_gguf_writer_add_tensor(w, "output.weight", LW_TYPE_Q8_0, 2, (int64_t[]){3072, 1000}, NULL,
                                    fill_pattern, NULL) == LW_OK);
    lw_status rc = lw_gguf_writer_write_file(w, path, 1);
    CHECK_MSG(rc == LW_OK, "%s", lw_gguf_writer_error(w));
    lw_gguf_writer_free(w);
    if (rc != LW_OK) return test_summary("test-gguf-large");

    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK((uint64_t)st.st_size > 5 * GIB);
    printf("file size %llu bytes, %llu bytes allocated on disk\n", (unsigned long long)st.st_size,
           (unsigned long long)st.st_blocks * 512);

    char err[256];
    lw_source *src;
    CHECK(lw_source_open_file(path, NULL, &src, err, sizeof err) == LW_OK);
    lw_gguf *g;
    CHECK_MSG(lw_gguf_open(src, NULL, &g) == LW_OK, "%s", lw_gguf_error(g));
    CHECK(lw_gguf_n_tensors(g) == 6);
    int64_t k = lw_gguf_find_tensor(g, "output.weight");
    CHECK(k == 5);
    const lw_gguf_tensor *t = lw_gguf_tensor_at(g, k);
    if (t) {
        CHECK(t->file_offset > 5 * GIB);
        CHECK(t->n_bytes == last_bytes);
        uint8_t *buf = malloc(last_bytes);
        CHECK(lw_gguf_read_tensor(g, k, 0, buf, last_bytes) == LW_OK);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < last_bytes; i++) bad += buf[i] != pattern(i);
        CHECK_MSG(bad == 0, "%llu bytes differ", (unsigned long long)bad);
        /* A read straddling nothing but holes returns zeros. */
        CHECK(lw_gguf_read_tensor(g, 4, GIB - 4096, buf, 4096) == LW_OK);
        uint64_t nz = 0;
        for (int i = 0; i < 4096; i++) nz += buf[i] != 0;
        CHECK(nz == 0);
        free(buf);
    }
    lw_gguf_close(g);
    lw_source_close(src);
    unlink(path);
    return test_summary("test-gguf-large");
}
