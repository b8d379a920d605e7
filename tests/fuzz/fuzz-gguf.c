/* libFuzzer target for the GGUF reader: any bytes, served through a memory source and through a host-callback
 * source; on success every accessor is exercised and every tensor's first and last bytes are read. Built with
 * -DLW_FUZZ=ON (clang, -fsanitize=fuzzer,address,undefined); run by scripts/fuzz.sh. */
#include "llamaweb.h"

#include <string.h>

typedef struct mem {
    const uint8_t *p; /* fuzz input */
} mem;

static lw_status host_read(void *u, uint64_t off, void *dst, size_t n) {
    memcpy(dst, ((mem *)u)->p + off, n);
    return LW_OK;
}

static void exercise(lw_gguf *g) {
    uint64_t u;
    int64_t i;
    double d;
    int b;
    const char *s;
    for (int64_t k = 0; k < lw_gguf_n_kv(g); k++) {
        const char *key = lw_gguf_key(g, k);
        const lw_gguf_value *v = lw_gguf_value_at(g, k);
        if (lw_gguf_find_key(g, key) != k) __builtin_trap(); /* the index must find what it holds */
        lw_gguf_get_u64(g, key, &u);
        lw_gguf_get_i64(g, key, &i);
        lw_gguf_get_f64(g, key, &d);
        lw_gguf_get_bool(g, key, &b);
        lw_gguf_get_str(g, key, &s);
        if (v->type == LW_GGUF_STRING && v->v.str.s[v->v.str.len] != 0) __builtin_trap();
    }
    uint8_t buf[64];
    for (int64_t k = 0; k < lw_gguf_n_tensors(g); k++) {
        const lw_gguf_tensor *t = lw_gguf_tensor_at(g, k);
        if (lw_gguf_find_tensor(g, t->name) != k) __builtin_trap();
        size_t n = t->n_bytes < sizeof buf ? (size_t)t->n_bytes : sizeof buf;
        if (lw_gguf_read_tensor(g, k, 0, buf, n) != LW_OK) __builtin_trap(); /* validated: must be readable */
        if (lw_gguf_read_tensor(g, k, t->n_bytes - n, buf, n) != LW_OK) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lw_source *src;
    lw_gguf *g;
    if (lw_source_from_memory(data, size, NULL, &src) != LW_OK) return 0;
    lw_status rc = lw_gguf_open(src, NULL, &g);
    if (rc == LW_OK) exercise(g);
    else if (!g || !lw_gguf_error(g)[0]) __builtin_trap(); /* every failure carries a message */
    lw_gguf_close(g);
    lw_source_close(src);

    /* The same bytes through host callbacks must give the same verdict. */
    mem m = {data};
    if (lw_source_from_callbacks(size, host_read, NULL, &m, NULL, &src) != LW_OK) return 0;
    lw_status rc2 = lw_gguf_open(src, NULL, &g);
    if (rc2 != rc) __builtin_trap();
    lw_gguf_close(g);
    lw_source_close(src);
    return 0;
}
