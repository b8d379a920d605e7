/* WGSL dequantization of the IQ and FP4 formats without a GPU: the lookup tables generated at run time from
 * the C tables of src/quant (webgpu/shader-tables.c) decode back to exactly those tables, the sign rule the
 * shaders compute instead of a table matches lw__iq_ksigns, and every format's mat-vec variants expand with
 * its block constants and only the tables it reads. The routines themselves run against the CPU reference
 * on lavapipe and SwiftShader in tests/web/matvec.test.mjs. */
#include "test.h"
#include "quant/iq-grids.h"
#include "quant/quant.h"
#include "webgpu/kernels-dequant.h"
#include "webgpu/kernels.h"
#include "webgpu/wgsl-pp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The generated file called name, or NULL. */
static const char *file_text(const lw__gpu_shader_files *f, const char *name) {
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->files[i].name, name) == 0) return f->files[i].text;
    return NULL;
}

/* Parses the values of `const NAME = array<T, N>(v, v, ...);` in text into out (cap entries; integers, hex
 * with a u suffix or decimals ending in .0). Returns the count found, or -1 when the declaration is missing,
 * malformed or its N differs from the values' count. */
static long parse_array(const char *text, const char *name, long long *out, long cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "const %s = array<", name);
    const char *p = text ? strstr(text, pat) : NULL;
    if (!p) return -1;
    p = strchr(p, ',');
    if (!p) return -1;
    long declared = strtol(p + 1, (char **)&p, 10);
    if (strncmp(p, ">(", 2) != 0) return -1;
    p += 2;
    long n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\n') p++;
        if (*p == ')') break;
        char *end;
        long long v = strtoll(p, &end, 0);
        if (end == p || n >= cap) return -1;
        p = end;
        if (*p == 'u') p++;
        else if (strncmp(p, ".0", 2) == 0) p += 2;
        out[n++] = v;
        while (*p == ' ' || *p == '\n') p++;
        if (*p == ',') p++;
        else if (*p != ')') return -1;
    }
    return n == declared ? n : -1;
}

/* ---------------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------------- */

/* Every generated table decodes back to its C array, value for value. */
static void test_tables(void) {
    lw__gpu_shader_files f;
    CHECK(lw__gpu_shader_files_make(NULL, &f) == LW_OK);
    size_t n_builtin = 0;
    lw__wgsl_builtin(&n_builtin);
    CHECK(f.n == n_builtin + 8);
    static long long v[4096];
    /* level tables: the int8 values themselves */
    CHECK(parse_array(file_text(&f, "iq4nl-values.wgsl"), "IQ4NL_VALUES", v, 4096) == 16);
    for (int i = 0; i < 16; i++) CHECK(v[i] == lw__iq4nl_values[i]);
    CHECK(parse_array(file_text(&f, "fp4-values.wgsl"), "FP4_VALUES", v, 4096) == 16);
    for (int i = 0; i < 16; i++) CHECK(v[i] == lw__kvalues_fp4[i]);
    /* 8-byte grids: two words per entry, low word first */
    struct {
        const char *file, *name;
        const uint64_t *grid;
        long n;
    } g8[] = {{"iq-grid-iq2xxs.wgsl", "IQ2XXS_GRID", lw__iq2xxs_grid, LW_IQ2XXS_GRID_N},
              {"iq-grid-iq2xs.wgsl", "IQ2XS_GRID", lw__iq2xs_grid, LW_IQ2XS_GRID_N},
              {"iq-grid-iq2s.wgsl", "IQ2S_GRID", lw__iq2s_grid, LW_IQ2S_GRID_N}};
    for (int t = 0; t < 3; t++) {
        CHECK_MSG(parse_array(file_text(&f, g8[t].file), g8[t].name, v, 4096) == 2 * g8[t].n, "%s", g8[t].name);
        int bad = 0;
        for (long i = 0; i < g8[t].n; i++)
            bad += ((uint64_t)v[2 * i] | (uint64_t)v[2 * i + 1] << 32) != g8[t].grid[i];
        CHECK_MSG(bad == 0, "%s: %d entries differ", g8[t].name, bad);
    }
    /* 4-byte grids: one word per entry */
    struct {
        const char *file, *name;
        const uint32_t *grid;
        long n;
    } g4[] = {{"iq-grid-iq3xxs.wgsl", "IQ3XXS_GRID", lw__iq3xxs_grid, LW_IQ3XXS_GRID_N},
              {"iq-grid-iq3s.wgsl", "IQ3S_GRID", lw__iq3s_grid, LW_IQ3S_GRID_N}};
    for (int t = 0; t < 2; t++) {
        CHECK(parse_array(file_text(&f, g4[t].file), g4[t].name, v, 4096) == g4[t].n);
        int bad = 0;
        for (long i = 0; i < g4[t].n; i++) bad += (uint32_t)v[i] != g4[t].grid[i];
        CHECK_MSG(bad == 0, "%s: %d entries differ", g4[t].name, bad);
    }
    /* the IQ1 grid: 2 bits per value (value + 1), 16 bits per entry, two entries per word */
    CHECK(parse_array(file_text(&f, "iq-grid-iq1s.wgsl"), "IQ1S_GRID", v, 4096) == LW_IQ1S_GRID_N / 2);
    int bad = 0;
    for (int i = 0; i < LW_IQ1S_GRID_N; i++)
        for (int j = 0; j < 8; j++) {
            int code = (int)(((uint64_t)v[i / 2] >> (16 * (i % 2) + 2 * j)) & 3);
            bad += code - 1 != (int8_t)(uint8_t)(lw__iq1s_grid[i] >> (8 * j));
        }
    CHECK_MSG(bad == 0, "IQ1S_GRID: %d values differ", bad);
    lw__gpu_shader_files_free(NULL, &f);
    CHECK(f.files == NULL && f.text == NULL && f.n == 0);
}

/* The shaders compute the sign byte of a 7-bit index as the index plus an even-parity bit 7 (dq_ksigns in
 * dequant-iq.wgsl) instead of carrying lw__iq_ksigns. */
static void test_ksigns_rule(void) {
    for (unsigned i = 0; i < LW_IQ_KSIGNS_N; i++) {
        unsigned ones = 0;
        for (unsigned b = i; b; b >>= 1) ones += b & 1;
        CHECK_MSG(lw__iq_ksigns[i] == (i | (ones & 1) << 7), "ksigns[%u] = %u", i, lw__iq_ksigns[i]);
    }
}

/* Every format's mat-vec variants expand; block constants agree with the C tables; only the lookup tables
 * the format reads are in its shader. */
static void test_expand(void) {
    static const struct {
        uint32_t type;
        const char *tables; /* the WGSL constants its shader must hold, space-separated */
    } fmts[] = {
        {LW_TYPE_IQ4_NL, "IQ4NL_VALUES"}, {LW_TYPE_IQ4_XS, "IQ4NL_VALUES"}, {LW_TYPE_MXFP4, "FP4_VALUES"},
        {LW_TYPE_NVFP4, "FP4_VALUES"},    {LW_TYPE_IQ2_XXS, "IQ2XXS_GRID"}, {LW_TYPE_IQ2_XS, "IQ2XS_GRID"},
        {LW_TYPE_IQ2_S, "IQ2S_GRID"},     {LW_TYPE_IQ3_XXS, "IQ3XXS_GRID"}, {LW_TYPE_IQ3_S, "IQ3S_GRID"},
        {LW_TYPE_IQ1_S, "IQ1S_GRID"},     {LW_TYPE_IQ1_M, "IQ1S_GRID"},
    };
    static const char *all[] = {"IQ4NL_VALUES", "FP4_VALUES", "IQ2XXS_GRID", "IQ2XS_GRID",
                                "IQ2S_GRID",    "IQ3XXS_GRID", "IQ3S_GRID",  "IQ1S_GRID"};
    lw__gpu_shader_files f;
    CHECK(lw__gpu_shader_files_make(NULL, &f) == LW_OK);
    char err[LW_ERRMSG_SIZE];
    for (size_t t = 0; t < sizeof fmts / sizeof fmts[0]; t++) {
        const lw_type_info *ti = lw_type_get(fmts[t].type);
        const lw__gpu_format *gf = lw__gpu_format_of(fmts[t].type);
        CHECK_MSG(ti && gf, "type %u", fmts[t].type);
        if (!ti || !gf) continue;
        CHECK(gf->block % ti->block_size == 0 && gf->block_bytes == gf->block / ti->block_size * ti->type_size);
        for (int f16 = 0; f16 < 2; f16++)
            for (int sg = 0; sg < 2; sg++) {
                lw__wgsl_define d[] = {{"WEIGHT_TYPE", gf->define},
                                       {"F16", f16 ? "1" : "0"},
                                       {"SUBGROUPS", sg ? "1" : "0"},
                                       {"WG_SIZE", "64"},
                                       {"ROWS", sg ? "4" : "1"},
                                       {"BLOCKS", f16 ? "1" : "0"}};
                lw__wgsl_pp_params p = {f.files, f.n, d, sizeof d / sizeof d[0], 0, 0};
                char *out = NULL;
                lw_status st = lw__wgsl_pp(NULL, "matvec.wgsl", &p, &out, NULL, err);
                CHECK_MSG(st == LW_OK, "%s f16=%d sg=%d: %s", ti->name, f16, sg, err);
                if (!out) continue;
                char want[64];
                snprintf(want, sizeof want, "const DQ_BLOCK: u32 = %uu;", gf->block);
                CHECK_MSG(strstr(out, want) != NULL, "%s: %s", ti->name, want);
                snprintf(want, sizeof want, "const DQ_BYTES: u32 = %uu;", gf->block_bytes);
                CHECK_MSG(strstr(out, want) != NULL, "%s: %s", ti->name, want);
                CHECK(strstr(out, "fn dq_chunk(b: u32, c: u32) -> Dq8") != NULL);
                for (size_t a = 0; a < sizeof all / sizeof all[0]; a++) {
                    char decl[48];
                    snprintf(decl, sizeof decl, "const %s = array<", all[a]);
                    int has = strstr(out, decl) != NULL, needs = strstr(fmts[t].tables, all[a]) != NULL;
                    CHECK_MSG(has == needs, "%s: %s %s", ti->name, all[a], has ? "present" : "missing");
                }
                CHECK(strstr(out, "\n#") == NULL); /* every directive consumed */
                free(out);
            }
    }
    /* formats outside this family carry no table */
    lw__wgsl_define d[] = {{"WEIGHT_TYPE", "TYPE_Q4_0"}, {"F16", "0"}, {"SUBGROUPS", "0"}};
    lw__wgsl_pp_params p = {f.files, f.n, d, 3, 0, 0};
    char *out = NULL;
    CHECK(lw__wgsl_pp(NULL, "matvec.wgsl", &p, &out, NULL, err) == LW_OK && out);
    CHECK(out && strstr(out, "array<u32,") == NULL && strstr(out, "_VALUES") == NULL);
    free(out);
    lw__gpu_shader_files_free(NULL, &f);
}

int main(void) {
    test_tables();
    test_ksigns_rule();
    test_expand();
    return test_summary("test-wgsl-dequant");
}
