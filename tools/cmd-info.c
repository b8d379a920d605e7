/* `llamaweb info FILE.gguf [--json]`: what is in a GGUF file — a model summary, every metadata key (long
 * arrays summarised), the tensor table, totals by type, the parameter count and the bytes the weights need. */
#include "cli.h"
#include "gguf/gguf-internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Printing values
 * ------------------------------------------------------------------------------------------------------- */

#define SHOW_ARRAY_MAX 8    /* text mode: arrays longer than this are summarised      */
#define SHOW_STR_MAX   120  /* text mode: strings longer than this are cut            */
#define JSON_ARRAY_MAX 64   /* json mode: arrays longer than this are summarised      */

/* Writes s (len bytes, may hold NUL) as a JSON string literal; max_len cuts it (text mode). */
static void put_str(FILE *f, const char *s, uint64_t len, uint64_t max_len) {
    fputc('"', f);
    uint64_t n = len < max_len ? len : max_len;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
    if (n < len) fprintf(f, "... (%" PRIu64 " bytes)", len);
}

/* Element i of a packed numeric array as a scalar value. */
static lw_gguf_value array_elem(const lw_gguf_value *a, uint64_t i) {
    lw_gguf_value v = {.type = a->v.arr.type};
    const uint8_t *p = (const uint8_t *)a->v.arr.data + i * lw__gguf_elem_mem_size(a->v.arr.type);
    switch (a->v.arr.type) {
    case LW_GGUF_UINT8: case LW_GGUF_BOOL: v.v.u64 = *p; break;
    case LW_GGUF_INT8: v.v.i64 = (int8_t)*p; break;
    case LW_GGUF_UINT16: v.v.u64 = lw__rd_u16(p); break;
    case LW_GGUF_INT16: v.v.i64 = (int16_t)lw__rd_u16(p); break;
    case LW_GGUF_UINT32: v.v.u64 = lw__rd_u32(p); break;
    case LW_GGUF_INT32: v.v.i64 = (int32_t)lw__rd_u32(p); break;
    case LW_GGUF_UINT64: v.v.u64 = lw__rd_u64(p); break;
    case LW_GGUF_INT64: v.v.i64 = (int64_t)lw__rd_u64(p); break;
    case LW_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v.v.f64 = x; break; }
    case LW_GGUF_FLOAT64: memcpy(&v.v.f64, p, 8); break;
    case LW_GGUF_STRING: v.v.str = ((const lw_gguf_str *)a->v.arr.data)[i]; break;
    case LW_GGUF_ARRAY: v = ((const lw_gguf_value *)a->v.arr.data)[i]; break;
    default: break;
    }
    return v;
}

/* Prints a value; arrays longer than arr_max become a summary like [512 strings]. */
static void put_value(FILE *f, const lw_gguf_value *v, int json, uint64_t arr_max) {
    uint64_t str_max = json ? UINT64_MAX : SHOW_STR_MAX;
    switch (v->type) {
    case LW_GGUF_UINT8: case LW_GGUF_UINT16: case LW_GGUF_UINT32: case LW_GGUF_UINT64:
        fprintf(f, "%" PRIu64, v->v.u64);
        break;
    case LW_GGUF_INT8: case LW_GGUF_INT16: case LW_GGUF_INT32: case LW_GGUF_INT64:
        fprintf(f, "%" PRId64, v->v.i64);
        break;
    case LW_GGUF_FLOAT32: fprintf(f, "%.9g", v->v.f64); break;
    case LW_GGUF_FLOAT64: fprintf(f, "%.17g", v->v.f64); break;
    case LW_GGUF_BOOL: fputs(v->v.u64 ? "true" : "false", f); break;
    case LW_GGUF_STRING: put_str(f, v->v.str.s, v->v.str.len, str_max); break;
    case LW_GGUF_ARRAY: {
        uint64_t n = v->v.arr.n;
        const char *en = v->v.arr.type == LW_GGUF_STRING ? "strings" : lw_gguf_type_name(v->v.arr.type);
        if (n > arr_max) {
            if (json) fprintf(f, "{\"array_of\": \"%s\", \"length\": %" PRIu64 "}", lw_gguf_type_name(v->v.arr.type), n);
            else fprintf(f, "[%" PRIu64 " %s]", n, en);
            break;
        }
        fputc('[', f);
        for (uint64_t i = 0; i < n; i++) {
            lw_gguf_value e = array_elem(v, i);
            if (i) fputs(", ", f);
            put_value(f, &e, json, arr_max);
        }
        fputc(']', f);
        break;
    }
    default: fputs("null", f); break;
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Model summary
 * ------------------------------------------------------------------------------------------------------- */

/* Counts per tensor type. */
typedef struct type_total {
    uint64_t tensors; /* how many tensors of this type  */
    uint64_t bytes;   /* their data bytes               */
    uint64_t params;  /* their elements                 */
} type_total;

/* Summary facts looked up under "<arch>.<name>"; absent keys print nothing. */
static const struct {
    const char *suffix; /* key after the architecture prefix */
    const char *label;  /* what we call it                   */
} summary_keys[] = {
    {"block_count", "blocks"},
    {"context_length", "context length"},
    {"embedding_length", "embedding length"},
    {"feed_forward_length", "feed-forward length"},
    {"attention.head_count", "heads"},
    {"attention.head_count_kv", "kv heads"},
    {"rope.freq_base", "rope freq base"},
    {"attention.layer_norm_rms_epsilon", "rms norm epsilon"},
    {"expert_count", "experts"},
};

static uint64_t vocab_size(lw_gguf *g) {
    uint64_t n = 0;
    if (lw_gguf_get_arr(g, "tokenizer.ggml.tokens", NULL, &n, NULL) == LW_OK) return n;
    int64_t i = lw_gguf_find_tensor(g, "token_embd.weight");
    return i >= 0 ? (uint64_t)lw_gguf_tensor_at(g, i)->ne[1] : 0;
}

static void put_shape(FILE *f, const lw_gguf_tensor *t) {
    fputc('[', f);
    for (uint32_t j = 0; j < t->n_dims; j++) fprintf(f, "%s%" PRId64, j ? ", " : "", t->ne[j]);
    fputc(']', f);
}

/* Bytes the weights take in GPU buffers: each tensor's binding offset aligned to 256 bytes (WebGPU's
 * minStorageBufferOffsetAlignment on most devices). */
static uint64_t plan_bytes(lw_gguf *g) {
    uint64_t total = 0;
    for (int64_t i = 0; i < lw_gguf_n_tensors(g); i++) {
        uint64_t b = 0;
        if (!lw__align_up_u64(lw_gguf_tensor_at(g, i)->n_bytes, 256, &b)) return UINT64_MAX; /* cannot happen: */
        total += b; /* the reader bounds n_bytes by the file size */
    }
    return total;
}

static void print_text(lw_gguf *g, const char *path, uint64_t file_size, const type_total *tot, uint64_t params,
                       uint64_t bytes) {
    const char *arch = "?";
    lw_gguf_get_str(g, "general.architecture", &arch);
    printf("file:                %s (%" PRIu64 " bytes)\n", path, file_size);
    printf("format:              GGUF v%" PRIu32 ", alignment %" PRIu64 ", data at offset %" PRIu64 "\n", lw_gguf_version(g),
           lw_gguf_alignment(g), lw_gguf_data_offset(g));
    printf("architecture:        %s\n", arch);
    char key[256];
    for (size_t i = 0; i < sizeof(summary_keys) / sizeof(summary_keys[0]); i++) {
        snprintf(key, sizeof key, "%s.%s", arch, summary_keys[i].suffix);
        int64_t k = lw_gguf_find_key(g, key);
        if (k < 0) continue;
        char label[64];
        snprintf(label, sizeof label, "%s:", summary_keys[i].label);
        printf("%-21s", label);
        put_value(stdout, lw_gguf_value_at(g, k), 0, SHOW_ARRAY_MAX);
        putchar('\n');
    }
    uint64_t nv = vocab_size(g);
    if (nv) printf("vocab:               %" PRIu64 "\n", nv);
    printf("parameters:          %" PRIu64 " (%.2f M)\n", params, params / 1e6);
    printf("weight bytes:        %" PRIu64 " (%.2f MiB); GPU plan with 256-byte aligned bindings: %" PRIu64 "\n", bytes,
           bytes / 1048576.0, plan_bytes(g));

    printf("\nmetadata (%" PRId64 " keys):\n", lw_gguf_n_kv(g));
    for (int64_t i = 0; i < lw_gguf_n_kv(g); i++) {
        const lw_gguf_value *v = lw_gguf_value_at(g, i);
        printf("  %s [%s]: ", lw_gguf_key(g, i), lw_gguf_type_name(v->type));
        put_value(stdout, v, 0, SHOW_ARRAY_MAX);
        putchar('\n');
    }
    printf("\ntensors (%" PRId64 "):\n", lw_gguf_n_tensors(g));
    printf("  %-40s %-8s %-24s %14s %14s\n", "name", "type", "shape", "offset", "bytes");
    for (int64_t i = 0; i < lw_gguf_n_tensors(g); i++) {
        const lw_gguf_tensor *t = lw_gguf_tensor_at(g, i);
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t j = 0; j < t->n_dims && n < (int)sizeof shape; j++)
            n += snprintf(shape + n, sizeof shape - n, "%s%" PRId64, j ? ", " : "", t->ne[j]);
        if (n < (int)sizeof shape) snprintf(shape + n, sizeof shape - n, "]");
        printf("  %-40s %-8s %-24s %14" PRIu64 " %14" PRIu64 "\n", t->name, lw_type_get(t->type)->name, shape,
               t->offset, t->n_bytes);
    }
    printf("\ntotals by type:\n");
    for (uint32_t ty = 0; ty < LW_TYPE_COUNT; ty++)
        if (tot[ty].tensors)
            printf("  %-8s %6" PRIu64 " tensors %14" PRIu64 " params %14" PRIu64 " bytes\n", lw_type_get(ty)->name,
                   tot[ty].tensors, tot[ty].params, tot[ty].bytes);
}

static void print_json(lw_gguf *g, const char *path, uint64_t file_size, const type_total *tot, uint64_t params,
                       uint64_t bytes) {
    const char *arch = NULL;
    lw_gguf_get_str(g, "general.architecture", &arch);
    printf("{\n  \"file\": ");
    put_str(stdout, path, strlen(path), UINT64_MAX);
    printf(",\n  \"file_size\": %" PRIu64 ",\n  \"version\": %" PRIu32 ",\n  \"alignment\": %" PRIu64
           ",\n  \"data_offset\": %" PRIu64 ",\n  \"architecture\": ",
           file_size, lw_gguf_version(g), lw_gguf_alignment(g), lw_gguf_data_offset(g));
    if (arch) put_str(stdout, arch, strlen(arch), UINT64_MAX);
    else printf("null");
    printf(",\n  \"vocab_size\": %" PRIu64 ",\n  \"parameters\": %" PRIu64 ",\n  \"weight_bytes\": %" PRIu64
           ",\n  \"gpu_plan_bytes\": %" PRIu64 ",\n  \"metadata\": {",
           vocab_size(g), params, bytes, plan_bytes(g));
    for (int64_t i = 0; i < lw_gguf_n_kv(g); i++) {
        printf("%s\n    ", i ? "," : "");
        put_str(stdout, lw_gguf_key(g, i), strlen(lw_gguf_key(g, i)), UINT64_MAX);
        printf(": ");
        put_value(stdout, lw_gguf_value_at(g, i), 1, JSON_ARRAY_MAX);
    }
    printf("\n  },\n  \"tensors\": [");
    for (int64_t i = 0; i < lw_gguf_n_tensors(g); i++) {
        const lw_gguf_tensor *t = lw_gguf_tensor_at(g, i);
        printf("%s\n    {\"name\": ", i ? "," : "");
        put_str(stdout, t->name, strlen(t->name), UINT64_MAX);
        printf(", \"type\": \"%s\", \"shape\": ", lw_type_get(t->type)->name);
        put_shape(stdout, t);
        printf(", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", t->offset, t->n_bytes);
    }
    printf("\n  ],\n  \"totals_by_type\": {");
    int first = 1;
    for (uint32_t ty = 0; ty < LW_TYPE_COUNT; ty++) {
        if (!tot[ty].tensors) continue;
        printf("%s\n    \"%s\": {\"tensors\": %" PRIu64 ", \"params\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
               first ? "" : ",", lw_type_get(ty)->name, tot[ty].tensors, tot[ty].params, tot[ty].bytes);
        first = 0;
    }
    printf("\n  }\n}\n");
}

int lw__cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!path && argv[i][0] != '-') path = argv[i];
        else {
            fprintf(stderr, "llamaweb info: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: llamaweb info FILE.gguf [--json]\n");
        return 2;
    }
    char err[LW_ERRMSG_SIZE];
    lw_source *src;
    if (lw_source_open_file(path, NULL, &src, err, sizeof err) != LW_OK) {
        fprintf(stderr, "llamaweb info: %s\n", err);
        return 1;
    }
    lw_gguf *g;
    lw_status rc = lw_gguf_open(src, NULL, &g);
    if (rc != LW_OK) {
        fprintf(stderr, "llamaweb info: %s: %s: %s\n", path, lw_status_str(rc), lw_gguf_error(g));
        lw_gguf_close(g);
        lw_source_close(src);
        return 1;
    }
    type_total tot[LW_TYPE_COUNT] = {{0}};
    uint64_t params = 0, bytes = 0;
    for (int64_t i = 0; i < lw_gguf_n_tensors(g); i++) {
        const lw_gguf_tensor *t = lw_gguf_tensor_at(g, i);
        tot[t->type].tensors++;
        tot[t->type].bytes += t->n_bytes;
        tot[t->type].params += t->n_elements;
        params += t->n_elements;
        bytes += t->n_bytes;
    }
    if (json) print_json(g, path, lw_source_size(src), tot, params, bytes);
    else print_text(g, path, lw_source_size(src), tot, params, bytes);
    lw_gguf_close(g);
    lw_source_close(src);
    return 0;
}
