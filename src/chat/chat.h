/* Chat templates: render the Jinja chat template stored in a GGUF file (`tokenizer.chat_template`) for a
 * conversation, the way Hugging Face transformers' apply_chat_template does (Jinja2 with trim_blocks and
 * lstrip_blocks, transformers' tojson, raise_exception and strftime_now; tools and documents are none).
 *
 * Intended for include/llamaweb.h once the API settles. Two ways to use it:
 *   - once:   lw_chat_apply(tmpl, msgs, n, 1, "<s>", "</s>", NULL, &out, &len, err, sizeof err);
 *   - reused: lw_chat_template_parse() once at model load, lw_chat_template_render() per request.
 * Output strings are allocated with the given allocator (libc when NULL) and NUL-terminated; free them with
 * lw_chat_string_free(). Hostile templates cannot hang or exhaust memory: a render is bounded in evaluation
 * steps, output bytes, memory and nesting, and fails with LW_ERR_TOO_LARGE past a limit.
 *
 * The Jinja subset (what chat templates use; src/chat/jinja-*.c):
 *   tags      {{ }} {% %} {# #}, whitespace control {%- -%} {{- -}} {#- -#} {%+ +%}, trim_blocks and
 *             lstrip_blocks on, keep_trailing_newline off, {% raw %}
 *   blocks    if/elif/else, for (else, `if` filter, unpacking `for k, v in d.items()`, loop.index/index0/
 *             revindex/revindex0/first/last/length/previtem/nextitem, break/continue), set (name, ns.attr,
 *             a, b = ..., block set with filters), macro (defaults, keyword arguments), filter blocks, do,
 *             generation blocks (rendered in place)
 *   values    none, bool, int (64-bit, overflow is an error), float, str (UTF-8; indexing, slicing and
 *             length count code points), list, dict (insertion-ordered), namespace()
 *   operators and or not, in / not in, == != < > <= >=, + - * / // % **, ~, a if c else b, [i], [a:b:c],
 *             .attr, calls; Python semantics (1 == 1.0, 'ab' * 2, floor division and modulo signs)
 *   tests     defined undefined none string number integer float boolean mapping iterable sequence
 *             true false odd even divisibleby eq/equalto/== ne lt gt le ge in sameas lower upper callable
 *   filters   abs attr capitalize center count d/default dictsort e/escape first float indent int items
 *             join last length list lower map max min reject rejectattr replace reverse round safe select
 *             selectattr sort string sum title tojson (indent, sort_keys, ensure_ascii) trim unique upper
 *             wordcount, and llama.cpp's from_json; an unknown filter or test is an error only if it runs
 *   methods   str: strip lstrip rstrip startswith endswith split splitlines upper lower title capitalize
 *             replace find rfind index count join format removeprefix removesuffix isdigit isalpha
 *             isspace isalnum; dict: items keys values get; list: append pop index count
 *   globals   range, namespace, dict, raise_exception(msg), strftime_now(fmt) (UTC, C locale)
 * Differences from Jinja2: attribute access on undefined values gives undefined, and iterating none gives
 * no iterations, instead of errors (templates test `tools` loosely); unknown filters fail at render time; case
 * mapping (upper, lower, title, capitalize) is ASCII-only (whitespace handling follows Python, Unicode
 * spaces included); no include/import/extends, call blocks, recursive loops, loop.cycle, or '%' string
 * formatting. */
#ifndef LW_CHAT_H
#define LW_CHAT_H

#include "llamaweb.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One message of a conversation. content may be NULL (seen by the template as none). */
typedef struct lw_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* UTF-8 text                               */
} lw_chat_message;

/* What went wrong in the last failed parse or render of a template. */
typedef enum lw_chat_error_kind {
    LW_CHAT_OK = 0,      /* no error                                                    */
    LW_CHAT_ERR_SYNTAX,  /* the template does not parse (LW_ERR_INVALID_ARG)            */
    LW_CHAT_ERR_RENDER,  /* a type error, undefined function, ... (LW_ERR_INVALID_ARG)  */
    LW_CHAT_ERR_RAISED,  /* the template called raise_exception(msg) (LW_ERR_INVALID_ARG) */
    LW_CHAT_ERR_LIMIT,   /* a step/output/memory/nesting limit (LW_ERR_TOO_LARGE)        */
    LW_CHAT_ERR_MEMORY   /* the allocator failed (LW_ERR_NOMEM)                          */
} lw_chat_error_kind;

#define LW_CHAT_NOW_CURRENT INT64_MIN /* lw_chat_params.now: use the current time */

/* Render options; start from lw_chat_params_default(). */
typedef struct lw_chat_params {
    int add_generation_prompt; /* end with the assistant header                              */
    const char *bos_token;     /* bos_token variable (NULL: "")                              */
    const char *eos_token;     /* eos_token variable (NULL: "")                              */
    int enable_thinking;       /* -1: leave undefined (template default), 0: false, 1: true  */
    int64_t now;               /* strftime_now() time, seconds since the epoch, UTC           */
    uint64_t max_steps;        /* evaluation steps (0: default, 5M)                          */
    size_t max_output;         /* output bytes (0: default, 4 MiB)                           */
    size_t max_memory;         /* render memory (0: default, 64 MiB)                         */
} lw_chat_params;

void lw_chat_params_default(lw_chat_params *p);

typedef struct lw_chat_template lw_chat_template;

/* Parses a template (len bytes; NUL not required). On failure *out is NULL and err (if given) says why,
 * e.g. "syntax error, line 3: unclosed 'for' block opened on line 1". */
lw_status lw_chat_template_parse(const char *src, size_t len, const lw_allocator *alloc, lw_chat_template **out,
                                 char *err, size_t err_size);
/* Renders the template for n messages (one render at a time per object: the error and step count of the
 * last render are kept on it; parse once per thread, or serialise renders); *out (NUL-terminated, *out_len bytes without the NUL) is the prompt.
 * On failure *out is NULL and lw_chat_template_error() has the message (for raise_exception: its text). */
lw_status lw_chat_template_render(lw_chat_template *t, const lw_chat_message *msgs, size_t n,
                                  const lw_chat_params *params, char **out, size_t *out_len);
const char *lw_chat_template_error(const lw_chat_template *t);          /* "" when none */
lw_chat_error_kind lw_chat_template_error_kind(const lw_chat_template *t);
uint64_t lw_chat_template_last_steps(const lw_chat_template *t);        /* steps of the last render */
void lw_chat_string_free(lw_chat_template *t, char *s);                 /* frees a rendered string  */
void lw_chat_template_free(lw_chat_template *t);

/* From a GGUF file's metadata: the chat template (tokenizer.chat_template) and the texts of its BOS and
 * EOS tokens (tokenizer.ggml.tokens[tokenizer.ggml.{bos,eos}_token_id]). Pointers are owned by g; a
 * missing item is NULL. Returns LW_ERR_NOT_FOUND when the file has no chat template. */
lw_status lw_chat_from_gguf(lw_gguf *g, const char **tmpl, const char **bos, const char **eos);

/* One-shot: parse + render + free. err (if given) receives the message on failure. Free *out with
 * alloc->free (or libc free() when alloc is NULL). */
lw_status lw_chat_apply(const char *tmpl, const lw_chat_message *msgs, size_t n, int add_generation_prompt,
                        const char *bos, const char *eos, const lw_allocator *alloc, char **out, size_t *out_len,
                        char *err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif
