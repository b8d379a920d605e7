/* WGSL files generated at run time from the C lookup tables of the quantized formats (kernels-dequant.h):
 * the grids and level tables exist once, in src/quant, and every shader that reads them gets them from here.
 * The text is made once per pipeline expansion (only on a pipeline-cache miss, i.e. at load): about 60 KB,
 * well under a millisecond, next to a pipeline compile of tens of milliseconds. */
#include "webgpu/kernels-dequant.h"

#include "quant/iq-grids.h"
#include "quant/quant.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Table descriptions
 * ------------------------------------------------------------------------------------------------------- */

/* How the WGSL words of a table are made from its C array. */
typedef enum table_kind {
    KIND_LEVELS, /* int8 levels -> array<ftype, n> of the same values                        */
    KIND_GRID8,  /* uint64 entries of 8 bytes -> 2 words each (bytes 0-3, then 4-7)           */
    KIND_GRID4,  /* uint32 entries of 4 bytes -> 1 word each                                   */
    KIND_TERN8,  /* uint64 entries of 8 int8 in {-1, 0, 1} -> 16 bits each (2 bits + 1 per value),
                    two entries per word                                                       */
} table_kind;

/* One generated file. */
typedef struct table_spec {
    const char *file;   /* name for #include                              */
    const char *name;   /* WGSL constant                                  */
    const char *source; /* C array it is generated from (for the comment) */
    table_kind kind;    /* conversion                                     */
    const void *data;   /* the C array                                    */
    size_t n;           /* entries of the C array                         */
} table_spec;

static const table_spec tables[] = {
    {"iq4nl-values.wgsl", "IQ4NL_VALUES", "lw__iq4nl_values", KIND_LEVELS, lw__iq4nl_values, LW_IQ4NL_NVALUES},
    {"fp4-values.wgsl", "FP4_VALUES", "lw__kvalues_fp4", KIND_LEVELS, lw__kvalues_fp4, 16},
    {"iq-grid-iq2xxs.wgsl", "IQ2XXS_GRID", "lw__iq2xxs_grid", KIND_GRID8, lw__iq2xxs_grid, LW_IQ2XXS_GRID_N},
    {"iq-grid-iq2xs.wgsl", "IQ2XS_GRID", "lw__iq2xs_grid", KIND_GRID8, lw__iq2xs_grid, LW_IQ2XS_GRID_N},
    {"iq-grid-iq2s.wgsl", "IQ2S_GRID", "lw__iq2s_grid", KIND_GRID8, lw__iq2s_grid, LW_IQ2S_GRID_N},
    {"iq-grid-iq3xxs.wgsl", "IQ3XXS_GRID", "lw__iq3xxs_grid", KIND_GRID4, lw__iq3xxs_grid, LW_IQ3XXS_GRID_N},
    {"iq-grid-iq3s.wgsl", "IQ3S_GRID", "lw__iq3s_grid", KIND_GRID4, lw__iq3s_grid, LW_IQ3S_GRID_N},
    {"iq-grid-iq1s.wgsl", "IQ1S_GRID", "lw__iq1s_grid", KIND_TERN8, lw__iq1s_grid, LW_IQ1S_GRID_N},
};
#define N_TABLES (sizeof tables / sizeof tables[0])

/* Values (WGSL array elements) of table t. */
static size_t table_len(const table_spec *t) {
    switch (t->kind) {
    case KIND_GRID8: return 2 * t->n;
    case KIND_TERN8: return (t->n + 1) / 2;
    default: return t->n;
    }
}

/* 16 bits for one IQ1 grid entry: value j (-1, 0, 1) as (value + 1) at bits 2j..2j+1. */
static uint32_t tern16(uint64_t e) {
    uint32_t h = 0;
    for (int j = 0; j < 8; j++) h |= (uint32_t)((int8_t)(uint8_t)(e >> (8 * j)) + 1) << (2 * j);
    return h;
}

/* Word i of a u32 table. */
static uint32_t table_word(const table_spec *t, size_t i) {
    switch (t->kind) {
    case KIND_GRID8: {
        uint64_t e = ((const uint64_t *)t->data)[i / 2];
        return (uint32_t)(e >> (32 * (i % 2)));
    }
    case KIND_GRID4: return ((const uint32_t *)t->data)[i];
    case KIND_TERN8: {
        const uint64_t *g = t->data;
        uint32_t w = tern16(g[2 * i]);
        if (2 * i + 1 < t->n) w |= tern16(g[2 * i + 1]) << 16;
        return w;
    }
    default: return 0;
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------------------------- */

#define HEADER_MAX 320 /* bytes of a file's comment, pragma and declaration, generously */
#define VALUE_MAX  14  /* bytes of one value with its separator ("0x12345678u, ", "-127.0, ")     */

/* Writes table t at p (room for HEADER_MAX + VALUE_MAX * table_len(t) bytes); returns the bytes written,
 * without the NUL that follows them. */
static size_t write_table(const table_spec *t, char *p) {
    char *s = p;
    size_t n = table_len(t);
    s += sprintf(s,
                 "// Generated at run time from %s (src/quant) by src/webgpu/shader-tables.c: do not edit.\n"
                 "#pragma once\nconst %s = array<%s, %zu>(",
                 t->source, t->name, t->kind == KIND_LEVELS ? "ftype" : "u32", n);
    for (size_t i = 0; i < n; i++) {
        const char *sep = i + 1 < n ? (i % 8 == 7 ? ",\n" : ", ") : ");\n";
        if (i % 8 == 0) s += sprintf(s, "%s", i ? "    " : "\n    ");
        if (t->kind == KIND_LEVELS) {
            s += sprintf(s, "%d.0", ((const int8_t *)t->data)[i]);
        } else { /* thousands of words: hex by hand, sprintf would be most of the time spent here */
            uint32_t w = table_word(t, i);
            *s++ = '0';
            *s++ = 'x';
            for (int k = 28; k >= 0; k -= 4) *s++ = "0123456789abcdef"[(w >> k) & 0xf];
            *s++ = 'u';
        }
        size_t sl = strlen(sep);
        memcpy(s, sep, sl + 1);
        s += sl;
    }
    return (size_t)(s - p);
}

lw_status lw__gpu_shader_files_make(const lw_allocator *alloc, lw__gpu_shader_files *out) {
    const lw_allocator a = lw__allocator_or_default(alloc);
    memset(out, 0, sizeof *out);
    size_t n_builtin = 0;
    const lw__wgsl_file *builtin = lw__wgsl_builtin(&n_builtin);
    size_t bytes = 0; /* a fixed few tens of KB: the tables are static, so no product can overflow */
    for (size_t i = 0; i < N_TABLES; i++) bytes += HEADER_MAX + VALUE_MAX * table_len(&tables[i]) + 1;
    out->files = lw__calloc(&a, n_builtin + N_TABLES, sizeof *out->files);
    out->text = lw__malloc(&a, bytes);
    if (!out->files || !out->text) {
        lw__gpu_shader_files_free(alloc, out);
        return LW_ERR_NOMEM;
    }
    memcpy(out->files, builtin, n_builtin * sizeof *builtin);
    char *p = out->text;
    for (size_t i = 0; i < N_TABLES; i++) {
        out->files[n_builtin + i].name = tables[i].file;
        out->files[n_builtin + i].text = p;
        p += write_table(&tables[i], p) + 1; /* past the NUL sprintf left */
    }
    out->n = n_builtin + N_TABLES;
    return LW_OK;
}

void lw__gpu_shader_files_free(const lw_allocator *alloc, lw__gpu_shader_files *f) {
    const lw_allocator a = lw__allocator_or_default(alloc);
    lw__free(&a, f->files);
    lw__free(&a, f->text);
    memset(f, 0, sizeof *f);
}
