/* The corrupt-GGUF corpus: hand-made broken files, each of which must fail with its specific status and a
 * message (never crash, never succeed). With an argument DIR, the corpus (and the valid base file) is also
 * written there as fuzzing seeds. */
#include "gguf-bytes.h"
#include "llamaweb.h"
#include "test.h"

#include <stdio.h>

/* ---------------------------------------------------------------------------------------------------------
 * A small valid file: 3 keys, 2 tensors (f32 [8,2] and q4_0 [32]), 32-byte alignment.
 * ------------------------------------------------------------------------------------------------------- */

typedef struct layout {
    size_t after_header; /* byte offsets of section boundaries in the valid file */
    size_t after_kv;
    size_t after_infos;
    size_t data_offset;
} layout;

static gb valid_file(layout *L) {
    gb b = {0};
    gb_header(&b, 3, 2, 3);
    L->after_header = b.n;
    gb_kv_str(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "llama.block_count", 1);
    gb_str(&b, "tokenizer.ggml.scores");
    gb_u32(&b, 9 /* ARRAY */);
    gb_u32(&b, 6 /* FLOAT32 */);
    gb_u64(&b, 2);
    gb_u32(&b, 0x3f800000);
    gb_u32(&b, 0x40000000);
    L->after_kv = b.n;
    gb_tensor(&b, "a", 2, (uint64_t[]){8, 2}, 0, 0);
    gb_tensor(&b, "b", 1, (uint64_t[]){32}, 2, 64);
    L->after_infos = b.n;
    gb_pad(&b, 32);
    L->data_offset = b.n;
    for (int i = 0; i < 64 + 32; i++) gb_u8(&b, (uint8_t)i); /* a: 64 bytes, b: 18 bytes + padding */
    return b;
}

/* Parses bytes from memory; returns the status and checks the message is non-empty on failure. */
static lw_status parse(const gb *b, char *msg, size_t msg_size) {
    lw_source *src;
    lw_status rc = lw_source_from_memory(b->p, b->n, NULL, &src);
    if (rc != LW_OK) return rc;
    lw_gguf *g;
    rc = lw_gguf_open(src, NULL, &g);
    snprintf(msg, msg_size, "%s", lw_gguf_error(g));
    lw_gguf_close(g);
    lw_source_close(src);
    return rc;
}

static const char *seed_dir;
static int n_cases;

/* One corpus case: expects status `want` and a message mentioning `needle` (when given). */
static void expect(const char *name, const gb *b, lw_status want, const char *needle) {
    char msg[512];
    lw_status got = parse(b, msg, sizeof msg);
    n_cases++;
    CHECK_MSG(got == want, "%s: got %s (%s), want %s", name, lw_status_str(got), msg, lw_status_str(want));
    if (got != LW_OK) CHECK_MSG(msg[0] != 0, "%s: empty message", name);
    if (needle) CHECK_MSG(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'", name, msg, needle);
    if (seed_dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", seed_dir, name);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(b->p, 1, b->n, f);
            fclose(f);
        }
    }
}

/* Builds a file whose single metadata pair is written by kv(), and no tensors. */
static gb one_kv(void (*kv)(gb *)) {
    gb b = {0};
    gb_header(&b, 3, 0, 1);
    kv(&b);
    return b;
}

/* Builds a file with one tensor info written by t() (no metadata) and `data` bytes of data. */
static gb one_tensor(void (*t)(gb *), size_t data) {
    gb b = {0};
    gb_header(&b, 3, 1, 0);
    t(&b);
    gb_pad(&b, 32);
    for (size_t i = 0; i < data; i++) gb_u8(&b, 0);
    return b;
}

static void kv_bad_type(gb *b) { gb_str(b, "k"); gb_u32(b, 13); gb_u32(b, 0); }
static void kv_str_past_eof(gb *b) { gb_str(b, "k"); gb_u32(b, 8); gb_u64(b, 1000); gb_raw(b, "abc", 3); }
static void kv_key_past_eof(gb *b) { gb_u64(b, 1u << 30); gb_raw(b, "abc", 3); }
static void kv_huge_array(gb *b) { gb_str(b, "k"); gb_u32(b, 9); gb_u32(b, 4); gb_u64(b, UINT64_MAX / 2); }
static void kv_huge_str_array(gb *b) { gb_str(b, "k"); gb_u32(b, 9); gb_u32(b, 8); gb_u64(b, 1u << 28); }
static void kv_bad_array_type(gb *b) { gb_str(b, "k"); gb_u32(b, 9); gb_u32(b, 99); gb_u64(b, 1); }
static void kv_empty_key(gb *b) { gb_str(b, ""); gb_u32(b, 4); gb_u32(b, 1); }
static void kv_bad_bool(gb *b) { gb_str(b, "k"); gb_u32(b, 7); gb_u8(b, 2); }
static void kv_deep(gb *b) {
    gb_str(b, "deep");
    gb_u32(b, 9);
    for (int i = 0; i < 20; i++) { gb_u32(b, 9); gb_u64(b, 1); }
    gb_u32(b, 4); gb_u64(b, 0);
}
static void kv_align_zero(gb *b) { gb_kv_u32(b, "general.alignment", 0); }
static void kv_align_3(gb *b) { gb_kv_u32(b, "general.alignment", 48); }
static void kv_align_str(gb *b) { gb_kv_str(b, "general.alignment", "32"); }

static void t_dims5(gb *b) { gb_tensor(b, "t", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0); }
static void t_neg(gb *b) { gb_tensor(b, "t", 2, (uint64_t[]){4, (uint64_t)-3}, 0, 0); }
static void t_overflow(gb *b) { gb_tensor(b, "t", 3, (uint64_t[]){1u << 31, 1u << 31, 1u << 31}, 0, 0); }
static void t_bytes_overflow(gb *b) { gb_tensor(b, "t", 2, (uint64_t[]){1u << 31, (1ull << 31) - 1}, 0, 0); }
static void t_unknown_type(gb *b) { gb_tensor(b, "t", 1, (uint64_t[]){4}, 4 /* removed Q4_2 */, 0); }
static void t_type_99(gb *b) { gb_tensor(b, "t", 1, (uint64_t[]){4}, 99, 0); }
static void t_not_blocks(gb *b) { gb_tensor(b, "t", 1, (uint64_t[]){33}, 2 /* q4_0 */, 0); }
static void t_misaligned(gb *b) { gb_tensor(b, "t", 1, (uint64_t[]){4}, 0, 4); }
static void t_out_of_file(gb *b) { gb_tensor(b, "t", 1, (uint64_t[]){64}, 0, 0); }
static void t_far_offset(gb *b) { gb_tensor(b, "t", 1, (uint64_t[]){4}, 0, UINT64_MAX - 31); }
static void t_long_name(gb *b) {
    char name[80];
    memset(name, 'x', 64);
    name[64] = 0;
    gb_tensor(b, name, 1, (uint64_t[]){4}, 0, 0);
}
static void t_dup(gb *b) {
    gb_tensor(b, "dup", 1, (uint64_t[]){4}, 0, 0);
    gb_tensor(b, "dup", 1, (uint64_t[]){4}, 0, 32);
}
static void t_overlap(gb *b) {
    gb_tensor(b, "x", 1, (uint64_t[]){16}, 0, 0);
    gb_tensor(b, "y", 1, (uint64_t[]){16}, 0, 32);
}

static gb two_tensors(void (*t)(gb *), size_t data) {
    gb b = {0};
    gb_header(&b, 3, 2, 0);
    t(&b);
    gb_pad(&b, 32);
    for (size_t i = 0; i < data; i++) gb_u8(&b, 0);
    return b;
}

int main(int argc, char **argv) {
    seed_dir = argc > 1 ? argv[1] : NULL;
    layout L;
    gb base = valid_file(&L);
    expect("valid", &base, LW_OK, NULL);

    /* Truncation at every byte: each prefix must fail; inside the header it is TRUNCATED, once the header is
     * whole the tensors lie past the end (OUT_OF_FILE). Boundaries are named seeds. */
    for (size_t n = 0; n < base.n; n++) {
        gb p = {base.p, n, n};
        char msg[512];
        lw_status got = parse(&p, msg, sizeof msg);
        lw_status want = n < L.data_offset ? LW_ERR_TRUNCATED : LW_ERR_OUT_OF_FILE;
        if (n >= L.data_offset + 64 + 18) want = LW_OK; /* only the last tensor's padding is missing: fine */
        CHECK_MSG(got == want, "prefix %zu/%zu: got %s (%s), want %s", n, base.n, lw_status_str(got), msg,
                  lw_status_str(want));
    }
    const size_t cuts[] = {2, L.after_header - 3, L.after_header, L.after_kv - 1, L.after_kv, L.after_infos - 1,
                           L.data_offset, L.data_offset + 63};
    const char *cut_names[] = {"cut-magic", "cut-counts", "cut-after-header", "cut-in-kv", "cut-after-kv",
                               "cut-in-infos", "cut-at-data", "cut-in-data"};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        gb p = {base.p, cuts[i], cuts[i]};
        expect(cut_names[i], &p, cuts[i] >= L.data_offset ? LW_ERR_OUT_OF_FILE : LW_ERR_TRUNCATED, NULL);
    }
    {
        gb p = {base.p, L.data_offset + 64 + 18, 0};
        expect("no-final-padding", &p, LW_OK, NULL);
    }

    gb b = {0};
    /* Header-level. */
    gb_raw(&b, "GGUX", 4), gb_u32(&b, 3), gb_u64(&b, 0), gb_u64(&b, 0);
    expect("bad-magic", &b, LW_ERR_BAD_MAGIC, "magic"), gb_free(&b);
    gb_header(&b, 1, 0, 0);
    expect("version-1", &b, LW_ERR_BAD_VERSION, "version 1"), gb_free(&b);
    gb_header(&b, 4, 0, 0);
    expect("version-4", &b, LW_ERR_BAD_VERSION, "version 4"), gb_free(&b);
    gb_header(&b, 0x03000000, 0, 0);
    expect("version-big-endian", &b, LW_ERR_BAD_VERSION, "big-endian"), gb_free(&b);
    gb_header(&b, 3, UINT64_MAX, 0);
    expect("huge-tensor-count", &b, LW_ERR_TOO_LARGE, "tensor count"), gb_free(&b);
    gb_header(&b, 3, 0, 1ull << 40);
    expect("huge-kv-count", &b, LW_ERR_TOO_LARGE, "metadata count"), gb_free(&b);
    gb_header(&b, 3, 0, 1000);
    expect("kv-count-past-eof", &b, LW_ERR_TRUNCATED, "metadata count 1000"), gb_free(&b);
    gb_header(&b, 2, 0, 0);
    expect("version-2-empty", &b, LW_OK, NULL), gb_free(&b);

    /* Metadata. */
    b = one_kv(kv_bad_type), expect("bad-value-type", &b, LW_ERR_BAD_VALUE_TYPE, "'k'"), gb_free(&b);
    b = one_kv(kv_str_past_eof), expect("string-past-eof", &b, LW_ERR_TRUNCATED, "1000"), gb_free(&b);
    b = one_kv(kv_key_past_eof), expect("key-past-eof", &b, LW_ERR_TRUNCATED, NULL), gb_free(&b);
    b = one_kv(kv_huge_array), expect("huge-array", &b, LW_ERR_TOO_LARGE, "'k'"), gb_free(&b);
    b = one_kv(kv_huge_str_array), expect("huge-string-array", &b, LW_ERR_TRUNCATED, "'k'"), gb_free(&b);
    b = one_kv(kv_bad_array_type), expect("bad-array-type", &b, LW_ERR_BAD_VALUE_TYPE, "99"), gb_free(&b);
    b = one_kv(kv_empty_key), expect("empty-key", &b, LW_ERR_BAD_STRING, NULL), gb_free(&b);
    b = one_kv(kv_bad_bool), expect("bad-bool", &b, LW_ERR_TYPE_MISMATCH, "'k'"), gb_free(&b);
    b = one_kv(kv_deep), expect("nested-too-deep", &b, LW_ERR_TOO_LARGE, "'deep'"), gb_free(&b);
    b = one_kv(kv_align_zero), expect("alignment-zero", &b, LW_ERR_BAD_ALIGNMENT, "0"), gb_free(&b);
    b = one_kv(kv_align_3), expect("alignment-48", &b, LW_ERR_BAD_ALIGNMENT, "48"), gb_free(&b);
    b = one_kv(kv_align_str), expect("alignment-string", &b, LW_ERR_BAD_ALIGNMENT, "str"), gb_free(&b);
    gb_header(&b, 3, 0, 2), gb_kv_u32(&b, "dup.key", 1), gb_kv_u32(&b, "dup.key", 2);
    expect("duplicate-key", &b, LW_ERR_DUPLICATE_KEY, "dup.key"), gb_free(&b);

    /* Tensor infos and data. */
    b = one_tensor(t_dims5, 32), expect("dims-5", &b, LW_ERR_BAD_DIMS, "'t'"), gb_free(&b);
    b = one_tensor(t_neg, 32), expect("negative-dim", &b, LW_ERR_BAD_DIMS, "negative"), gb_free(&b);
    b = one_tensor(t_overflow, 32), expect("elements-overflow", &b, LW_ERR_OVERFLOW, "'t'"), gb_free(&b);
    b = one_tensor(t_bytes_overflow, 32), expect("bytes-overflow", &b, LW_ERR_OVERFLOW, "'t'"), gb_free(&b);
    b = one_tensor(t_unknown_type, 32), expect("removed-type", &b, LW_ERR_BAD_TENSOR_TYPE, "4"), gb_free(&b);
    b = one_tensor(t_type_99, 32), expect("unknown-type", &b, LW_ERR_BAD_TENSOR_TYPE, "99"), gb_free(&b);
    b = one_tensor(t_not_blocks, 64), expect("row-not-blocks", &b, LW_ERR_BAD_DIMS, "block size"), gb_free(&b);
    b = one_tensor(t_misaligned, 64), expect("misaligned-data", &b, LW_ERR_BAD_ALIGNMENT, "offset 4"), gb_free(&b);
    b = one_tensor(t_out_of_file, 64), expect("data-out-of-file", &b, LW_ERR_OUT_OF_FILE, "'t'"), gb_free(&b);
    b = one_tensor(t_far_offset, 64), expect("offset-overflow", &b, LW_ERR_OUT_OF_FILE, "'t'"), gb_free(&b);
    b = one_tensor(t_long_name, 32), expect("name-too-long", &b, LW_ERR_BAD_STRING, "64 bytes"), gb_free(&b);
    b = two_tensors(t_dup, 64), expect("duplicate-tensor", &b, LW_ERR_DUPLICATE_NAME, "'dup'"), gb_free(&b);
    b = two_tensors(t_overlap, 128), expect("overlapping-tensors", &b, LW_ERR_OVERLAP, "'x'"), gb_free(&b);

    gb_free(&base);
    printf("%d corpus cases\n", n_cases);
    return test_summary("test-gguf-corrupt");
}
