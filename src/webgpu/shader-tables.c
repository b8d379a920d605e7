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

/* How a table is turned into WGSL. */
typedef enum table_kind {
    KIND_LEVELS, /* int8 levels -> array<ftype, n> of the same values                                   */
    KIND_PACKED, /* grid entries of `width` bytes (values as int8) -> a 16-bit code per entry, value j as
                    its index in `levels` at bits bits*j.., 8 entries per vec4<u32> (entry i: component
                    (i / 2) % 4 of element i / 8, bits 16 (i % 2)..)                                    */
} table_kind;

/* One generated file. */
typedef struct table_spec {
    const char *file;     /* name for #include                                  */
    const char *name;     /* WGSL constant                                      */
    const char *source;   /* C array it is generated from (for the comment)     */
    table_kind kind;      /* conversion                                         */
    const void *data;     /* the C array (int8_t, uint64_t or uint32_t entries) */
    size_t n;             /* entries of the C array                             */
    unsigned width;       /* KIND_PACKED: bytes per entry, 8 (uint64) or 4 (uint32) */
    unsigned bits;        /* KIND_PACKED: bits per value code (width * bits <= 16)  */
    const int8_t *levels; /* KIND_PACKED: the values, code c meaning levels[c]      */
    unsigned n_levels;    /* KIND_PACKED: entries of levels                         */
} table_spec;

/* The magnitudes of each grid family: the shaders decode code c back with the formula noted (dequant-iq.wgsl,
 * dequant-iq1.wgsl), and test-wgsl-dequant checks that every grid value has a code. */
static const int8_t levels_iq2[] = {8, 25, 43};                           /* 8 + 17c + c / 2 */
static const int8_t levels_iq3xxs[] = {4, 12, 20, 28, 36, 44, 52, 62};    /* 4 + 8c + 2 (c / 7) */
static const int8_t levels_iq3s[] = {1, 3, 5, 7, 9, 11, 13, 15};          /* 1 + 2c          */
static const int8_t levels_iq1[] = {-1, 0, 1};                            /* c - 1           */

#define PACKED(grid, width, bits, levels) grid, sizeof grid / sizeof grid[0], width, bits, levels, sizeof levels
static const table_spec tables[] = {
    {"iq4nl-values.wgsl", "IQ4NL_VALUES", "lw__iq4nl_values", KIND_LEVELS, lw__iq4nl_values, LW_IQ4NL_NVALUES, 0, 0,
     NULL, 0},
    {"fp4-values.wgsl", "FP4_VALUES", "lw__kvalues_fp4", KIND_LEVELS, lw__kvalues_fp4, 16, 0, 0, NULL, 0},
    {"iq-grid-iq2xxs.wgsl", "IQ2XXS_GRID", "lw__iq2xxs_grid", KIND_PACKED, PACKED(lw__iq2xxs_grid, 8, 2, levels_iq2)},
    {"iq-grid-iq2xs.wgsl", "IQ2XS_GRID", "lw__iq2xs_grid", KIND_PACKED, PACKED(lw__iq2xs_grid, 8, 2, levels_iq2)},
    {"iq-grid-iq2s.wgsl", "IQ2S_GRID", "lw__iq2s_grid", KIND_PACKED, PACKED(lw__iq2s_grid, 8, 2, levels_iq2)},
    {"iq-grid-iq3xxs.wgsl", "IQ3XXS_GRID", "lw__iq3xxs_grid", KIND_PACKED,
     PACKED(lw__iq3xxs_grid, 4, 3, levels_iq3xxs)},
    {"iq-grid-iq3s.wgsl", "IQ3S_GRID", "lw__iq3s_grid", KIND_PACKED, PACKED(lw__iq3s_grid, 4, 3, levels_iq3s)},
    {"iq-grid-iq1s.wgsl", "IQ1S_GRID", "lw__iq1s_grid", KIND_PACKED, PACKED(lw__iq1s_grid, 8, 2, levels_iq1)},
};
#define N_TABLES (sizeof tables / sizeof tables[0])

/* Elements of table t's WGSL array. */
static size_t table_len(const table_spec *t) {
    return t->kind == KIND_PACKED ? (t->n + 7) / 8 : t->n;
}

/* The 16-bit code of entry i of a packed table (a value missing from its levels gets code 0; the test
 * catches that). */
static uint32_t entry16(const table_spec *t, size_t i) {
    if (i >= t->n) return 0;
    uint64_t e = t->width == 8 ? ((const uint64_t *)t->data)[i] : ((const uint32_t *)t->data)[i];
    uint32_t h = 0;
    for (unsigned j = 0; j < t->width; j++) {
        int8_t v = (int8_t)(uint8_t)(e >> (8 * j));
        for (unsigned c = 0; c < t->n_levels; c++)
            if (t->levels[c] == v) h |= c << (t->bits * j);
    }
    return h;
}

/* Word w (0..3) of element i of a packed table: entries 8i + 2w (low half) and 8i + 2w + 1 (high half). */
static uint32_t packed_word(const table_spec *t, size_t i, unsigned w) {
    return entry16(t, 8 * i + 2 * w) | entry16(t, 8 * i + 2 * w + 1) << 16;
}

/* ---------------------------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------------------------- */

#define HEADER_MAX 320 /* bytes of a file's comment, pragma and declaration, generously               */
#define VALUE_MAX  64  /* bytes of one element with its separator ("vec4<u32>(0x..u, ...), ", "-127.0, ") */

/* Appends word u as 0x%08xu (thousands of words: by hand, sprintf would be most of the time spent here). */
static char *put_hex(char *s, uint32_t u) {
    *s++ = '0';
    *s++ = 'x';
    for (int k = 28; k >= 0; k -= 4) *s++ = "0123456789abcdef"[(u >> k) & 0xf];
    *s++ = 'u';
    return s;
}

/* Writes table t at p (room for HEADER_MAX + VALUE_MAX * table_len(t) bytes); returns the bytes written,
 * without the NUL that follows them. */
static size_t write_table(const table_spec *t, char *p) {
    char *s = p;
    size_t n = table_len(t);
    const int packed = t->kind == KIND_PACKED;
    s += sprintf(s,
                 "// Generated at run time from %s (src/quant) by src/webgpu/shader-tables.c: do not edit.\n"
                 "#pragma once\nconst %s = array<%s, %zu>(",
                 t->source, t->name, packed ? "vec4<u32>" : "ftype", n);
    const size_t per_line = packed ? 2 : 8;
    for (size_t i = 0; i < n; i++) {
        if (i % per_line == 0) {
            memcpy(s, "\n    ", 5);
            s += 5;
        } else {
            *s++ = ' ';
        }
        if (packed) {
            memcpy(s, "vec4<u32>(", 10);
            s += 10;
            for (unsigned w = 0; w < 4; w++) {
                s = put_hex(s, packed_word(t, i, w));
                if (w < 3) *s++ = ',', *s++ = ' ';
            }
            *s++ = ')';
        } else {
            s += sprintf(s, "%d.0", ((const int8_t *)t->data)[i]);
        }
        if (i + 1 < n) *s++ = ',';
    }
    memcpy(s, ");\n", 4); /* with its NUL */
    return (size_t)(s + 3 - p);
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
