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
 * with a u suffix or decimals ending in .0; elements `vec4<u32>(a, b, c, d)` give their four words in order).
 * Returns the count of values, or -1 when the declaration is missing, malformed or its N differs from the
 * element count. */
static long parse_array(const char *text, const char *name, long long *out, long cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "const %s = array<", name);
    const char *p = text ? strstr(text, pat) : NULL;
    if (!p) return -1;
    p += strlen(pat);
    const int vec4 = strncmp(p, "vec4<u32>", 9) == 0;
    p = strchr(p, ',');
    if (!p) return -1;
    long declared = strtol(p + 1, (char **)&p, 10), n = 0, elems = 0;
    if (strncmp(p, ">(", 2) != 0) return -1;
    p += 2;
    for (;;) {
        while (*p == ' ' || *p == '\n') p++;
        if (*p == ')') break;
        if (vec4 && strncmp(p, "vec4<u32>(", 10) != 0) return -1;
        p += vec4 ? 10 : 0;
        for (int w = 0; w < (vec4 ? 4 : 1); w++) {
            while (*p == ' ') p++;
            char *end;
            long long v = strtoll(p, &end, 0);
            if (end == p || n >= cap) return -1;
            p = end;
            if (*p == 'u') p++;
            else if (strncmp(p, ".0", 2) == 0) p += 2;
            out[n++] = v;
            if (w < (vec4 ? 3 : 0) && *p++ != ',') return -1;
        }
        if (vec4 && *p++ != ')') return -1;
        elems++;
        if (*p == ',') p++;
        else if (*p != ')') return -1;
    }
    return elems == declared ? n : -1;
}

/* The 16-bit entry i of a packed grid parsed into words (kernels-dequant.h). */
static unsigned entry16(const long long *words, int i) {
    return (unsigned)(words[4 * (i / 8) + (i / 2) % 4] >> (16 * (i % 2))) & 0xffff;
}

/* Value j of entry e of each grid family, decoded as the shaders do (dequant-iq.wgsl, dequant-iq3_*.wgsl,
 * dequant-iq1.wgsl). */
static int iq2_value(unsigned e, int j) {
    unsigned c = (e >> (2 * j)) & 3;
    return (int)(8 + 17 * c + (c >> 1));
}
static int iq3xxs_value(unsigned e, int j) {
    unsigned c = (e >> (3 * j)) & 7;
    return (int)(4 + 8 * c + 2 * (c / 7));
}
static int iq3s_value(unsigned e, int j) {
    return (int)(1 + 2 * ((e >> (3 * j)) & 7));
}
static int iq1_value(unsigned e, int j) {
    return (int)((e >> (2 * j)) & 3) - 1;
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
    /* packed grids: every value of every entry, decoded as the shaders do */
    struct {
        const char *file, *name;
        const void *grid; /* uint64_t entries (8 values) or uint32_t (4 values) */
        int n, width;     /* entries, values per entry                         */
        int (*value)(unsigned e, int j);
    } g[] = {{"iq-grid-iq2xxs.wgsl", "IQ2XXS_GRID", lw__iq2xxs_grid, LW_IQ2XXS_GRID_N, 8, iq2_value},
             {"iq-grid-iq2xs.wgsl", "IQ2XS_GRID", lw__iq2xs_grid, LW_IQ2XS_GRID_N, 8, iq2_value},
             {"iq-grid-iq2s.wgsl", "IQ2S_GRID", lw__iq2s_grid, LW_IQ2S_GRID_N, 8, iq2_value},
             {"iq-grid-iq3xxs.wgsl", "IQ3XXS_GRID", lw__iq3xxs_grid, LW_IQ3XXS_GRID_N, 4, iq3xxs_value},
             {"iq-grid-iq3s.wgsl", "IQ3S_GRID", lw__iq3s_grid, LW_IQ3S_GRID_N, 4, iq3s_value},
             {"iq-grid-iq1s.wgsl", "IQ1S_GRID", lw__iq1s_grid, LW_IQ1S_GRID_N, 8, iq1_value}};
    for (size_t t = 0; t < sizeof g / sizeof g[0]; t++) {
        long words = parse_array(file_text(&f, g[t].file), g[t].name, v, 4096);
        CHECK_MSG(words == g[t].n / 2, "%s: %ld words", g[t].name, words); /* 8 entries per vec4 */
        if (words != g[t].n / 2) continue;
        int bad = 0;
        for (int i = 0; i < g[t].n; i++) {
            uint64_t e = g[t].width == 8 ? ((const uint64_t *)g[t].grid)[i] : ((const uint32_t *)g[t].grid)[i];
            for (int j = 0; j < g[t].width; j++)
                bad += g[t].value(entry16(v, i), j) != (int8_t)(uint8_t)(e >> (8 * j));
        }
        CHECK_MSG(bad == 0, "%s: %d values differ", g[t].name, bad);
    }
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
