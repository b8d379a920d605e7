/* WGSL template preprocessor: one kernel source per op family, expanded in C at run time into the variant a
 * device needs (weight format, f16 or f32 arithmetic, subgroup or workgroup reductions, sizes).
 *
 * A small, strict subset of the C preprocessor, applied line by line:
 *   #include "name"          text of another file of the table (depth-limited; `#pragma once` honoured)
 *   #define NAME value       object-like macro; identifiers of later lines are replaced (recursively, a
 *                            macro never re-expands inside its own expansion). Function-like macros and
 *                            redefinition with a different value are errors.
 *   #undef NAME
 *   #if/#elif EXPR, #ifdef/#ifndef NAME, #else, #endif
 *                            EXPR: 64-bit integers with C's operators and precedence (unary + - ~ !,
 *                            * / %, + -, << >>, < <= > >=, == !=, &, ^, |, &&, ||, ?:, parentheses) and
 *                            defined(NAME) / defined NAME. Unlike C, an identifier that is not a macro is an
 *                            error where it is evaluated (a typo in a variant name must not silently read
 *                            as 0); short-circuited operands are not evaluated (`defined(F16) && F16`).
 *   #error message           fails with LW_ERR_UNSUPPORTED and the message (e.g. an unsupported variant)
 * Lines inside false branches are skipped unparsed, except for conditional nesting. Directive lines may be
 * continued with a trailing backslash; `//` and one-line block comments are stripped from directives.
 * Directive lines produce no output; every other line of an active branch is emitted, macro-expanded.
 *
 * Errors name the file and line ("matvec.wgsl:12: #elif after #else"). Limits bound the include depth,
 * the nesting of conditionals and macro expansion, the number of lines processed and the output size, so
 * a hostile or broken template fails cleanly instead of exhausting memory. */
#ifndef LW_WGSL_PP_H
#define LW_WGSL_PP_H

#include "core/core.h"

#include <stddef.h>
#include <stdint.h>

#define LW_WGSL_PP_DEFAULT_MAX_OUTPUT ((size_t)4 << 20) /* bytes of expanded WGSL                 */
#define LW_WGSL_PP_DEFAULT_MAX_DEPTH  16u               /* nested #include levels                 */
#define LW_WGSL_PP_MAX_COND           64u               /* nested #if levels within one file      */
#define LW_WGSL_PP_MAX_EXPAND         64u               /* nested macro expansions                */
#define LW_WGSL_PP_MAX_LINES          1000000u          /* lines processed, includes counted      */

/* One named source: an entry of the embedded shader table (lw__wgsl_builtin) or a caller's own. */
typedef struct lw__wgsl_file {
    const char *name; /* how #include names it, e.g. "dequant-q4_0.wgsl" */
    const char *text; /* NUL-terminated WGSL template                   */
} lw__wgsl_file;

/* A define passed in from C, as if the entry file began with `#define name value`. */
typedef struct lw__wgsl_define {
    const char *name;  /* an identifier: [A-Za-z_][A-Za-z0-9_]*  */
    const char *value; /* one line of text ("" allowed, NULL = "") */
} lw__wgsl_define;

/* Inputs of one expansion. */
typedef struct lw__wgsl_pp_params {
    const lw__wgsl_file *files;     /* the include table (the entry is looked up here too) */
    size_t n_files;                 /* entries in files                                    */
    const lw__wgsl_define *defines; /* predefined macros, may be NULL                      */
    size_t n_defines;               /* entries in defines                                  */
    size_t max_output;              /* 0: LW_WGSL_PP_DEFAULT_MAX_OUTPUT                    */
    uint32_t max_depth;             /* 0: LW_WGSL_PP_DEFAULT_MAX_DEPTH                     */
} lw__wgsl_pp_params;

/* Expands the file named entry. On success *out is a NUL-terminated string of *out_len bytes (out_len may
 * be NULL) allocated with alloc (NULL: libc; free it with lw__free on lw__allocator_or_default(alloc)). On
 * failure *out is NULL and err (LW_ERRMSG_SIZE bytes) holds the reason: LW_ERR_INVALID_ARG (syntax, bad
 * define, unbalanced conditionals), LW_ERR_NOT_FOUND (entry or include missing), LW_ERR_UNSUPPORTED (#error),
 * LW_ERR_TOO_LARGE (a limit), LW_ERR_NOMEM. */
lw_status lw__wgsl_pp(const lw_allocator *alloc, const char *entry, const lw__wgsl_pp_params *params,
                      char **out, size_t *out_len, char *err);

/* The shaders of src/webgpu/shaders/, embedded at build time (cmake/webgpu.cmake generates the table). */
const lw__wgsl_file *lw__wgsl_builtin(size_t *n_files);

#endif
