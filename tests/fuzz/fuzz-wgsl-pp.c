/* libFuzzer target: the WGSL template preprocessor (src/webgpu/wgsl-pp.c) on hostile input. The first byte
 * picks the mode:
 *   even: the rest is a table of files "name\0text\0name\0text..." (at most 8; the first is the entry), so
 *         templates include each other, recurse, nest conditionals and define macros as an attacker likes;
 *   odd:  the rest is lines "NAME value" passed as predefined macros to a real shader of the embedded table
 *         (byte 0 >> 1 picks which), as a device's limits or a tune file's overrides reach them.
 * Invariants: no crash, leak or hang; success gives a NUL-terminated text of the reported length within the
 * output limit; failure gives NULL and a message. Seeds: tests/fuzz/seeds/wgsl-pp. */
#include "webgpu/wgsl-pp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILES 8
#define MAX_DEFS  16

static void check(const lw__wgsl_pp_params *p, const char *entry) {
    char *out = NULL, err[LW_ERRMSG_SIZE];
    size_t len = 0;
    err[0] = 0;
    const lw_status st = lw__wgsl_pp(NULL, entry, p, &out, &len, err);
    if (st == LW_OK) {
        if (!out || out[len] != 0 || strlen(out) > len || len > p->max_output) abort();
        lw_allocator a = lw__allocator_or_default(NULL);
        lw__free(&a, out);
    } else if (out || !err[0]) {
        abort(); /* a failure without a message, or with output */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 65536) return 0;
    /* a NUL-terminated copy: file texts and define values are C strings */
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    const size_t n = size - 1;
    lw__wgsl_pp_params p = {0};
    p.max_output = 1 << 16; /* small limits: every input ends quickly */
    p.max_depth = 8;
    if (!(data[0] & 1)) {
        lw__wgsl_file files[MAX_FILES];
        size_t nf = 0, i = 0;
        while (nf < MAX_FILES && i < n) {
            const char *name = buf + i;
            i += strlen(name) + 1;
            const char *text = i < n ? buf + i : "";
            if (i < n) i += strlen(text) + 1;
            files[nf++] = (lw__wgsl_file){name, text};
        }
        if (nf == 0) files[nf++] = (lw__wgsl_file){"main.wgsl", ""};
        p.files = files;
        p.n_files = nf;
        static const lw__wgsl_define defs[] = {{"F16", "1"}, {"WG", "64"}, {"EMPTY", ""}};
        p.defines = defs;
        p.n_defines = 3;
        check(&p, files[0].name);
    } else {
        size_t nb = 0;
        const lw__wgsl_file *table = lw__wgsl_builtin(&nb);
        if (nb == 0) {
            free(buf);
            return 0;
        }
        const lw__wgsl_file *entry = &table[(data[0] >> 1) % nb];
        lw__wgsl_define defs[MAX_DEFS];
        size_t nd = 0;
        for (char *line = buf; nd < MAX_DEFS && line < buf + n;) {
            char *end = strchr(line, '\n');
            if (end) *end = 0;
            char *sp = strchr(line, ' ');
            if (sp) *sp = 0;
            defs[nd++] = (lw__wgsl_define){line, sp ? sp + 1 : NULL};
            if (!end) break;
            line = end + 1;
        }
        p.files = table;
        p.n_files = nb;
        p.defines = defs;
        p.n_defines = nd;
        p.max_output = LW_WGSL_PP_DEFAULT_MAX_OUTPUT;
        check(&p, entry->name);
    }
    free(buf);
    return 0;
}
