/* Tokenizers compatible with llama.cpp (SPM, byte-level BPE with its pre-tokenizers, WPM, UGM, RWKV): public API.
 * (Declared here for now; these declarations are meant to move into include/llamaweb.h.)
 *
 * A vocabulary is read from a GGUF file's tokenizer.* keys and is immutable afterwards, so one lw_vocab
 * can serve several threads. Token ids are int32_t as in llama.cpp; -1 means "no token". */
#ifndef LW_TOKENIZER_H
#define LW_TOKENIZER_H

#include "llamaweb.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lw_vocab lw_vocab;

/* The tokenizer family (tokenizer.ggml.model). */
typedef enum lw_vocab_type {
    LW_VOCAB_NONE = 0, /* "no_vocab": ids only                        */
    LW_VOCAB_SPM = 1,  /* "llama": SentencePiece BPE with byte fallback */
    LW_VOCAB_BPE = 2,  /* "gpt2" (byte-level), "gemma4"               */
    LW_VOCAB_WPM = 3,  /* "bert": WordPiece                           */
    LW_VOCAB_UGM = 4,  /* "t5": unigram with a precompiled char map   */
    LW_VOCAB_RWKV = 5, /* "rwkv": greedy trie over escaped byte strings */
} lw_vocab_type;

/* Token attributes (llama.cpp's llama_token_attr bits). */
enum {
    LW_TOKEN_ATTR_UNKNOWN = 1 << 0,
    LW_TOKEN_ATTR_UNUSED = 1 << 1,
    LW_TOKEN_ATTR_NORMAL = 1 << 2,
    LW_TOKEN_ATTR_CONTROL = 1 << 3,
    LW_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    LW_TOKEN_ATTR_BYTE = 1 << 5,
    LW_TOKEN_ATTR_LSTRIP = 1 << 7,
    LW_TOKEN_ATTR_RSTRIP = 1 << 8,
};

/* Special tokens a vocabulary may name. */
typedef enum lw_special_token {
    LW_TOKEN_BOS, LW_TOKEN_EOS, LW_TOKEN_EOT, LW_TOKEN_EOM, LW_TOKEN_UNK, LW_TOKEN_SEP, LW_TOKEN_PAD,
    LW_TOKEN_MASK, LW_TOKEN_NL, LW_TOKEN_FIM_PRE, LW_TOKEN_FIM_SUF, LW_TOKEN_FIM_MID, LW_TOKEN_FIM_PAD,
    LW_TOKEN_FIM_REP, LW_TOKEN_FIM_SEP, LW_TOKEN_SPECIAL_COUNT
} lw_special_token;

/* Reads the vocabulary from g (which may be closed afterwards: everything is copied). Like lw_gguf_open,
 * *out is set even on failure (unless memory ran out) so lw_vocab_error can say why; free it either way.
 * LW_ERR_UNSUPPORTED for tokenizer models or pre-tokenizers this build does not implement. */
lw_status lw_vocab_load(lw_gguf *g, const lw_allocator *alloc, lw_vocab **out);
void lw_vocab_free(lw_vocab *v);
const char *lw_vocab_error(const lw_vocab *v);

lw_vocab_type lw_vocab_get_type(const lw_vocab *v);
uint32_t lw_vocab_n_tokens(const lw_vocab *v);
/* The pre-tokenizer name from the file ("" when absent). */
const char *lw_vocab_pre(const lw_vocab *v);
/* Token text as stored (NUL-terminated; *len may be NULL); NULL for ids out of range. */
const char *lw_vocab_token_text(const lw_vocab *v, int32_t id, size_t *len);
float lw_vocab_token_score(const lw_vocab *v, int32_t id);
/* Id of the token whose text is exactly text[0..len) (as stored, e.g. "<|im_end|>" or "\u2581the"), or -1. */
int32_t lw_vocab_find(const lw_vocab *v, const char *text, size_t len);
uint32_t lw_vocab_token_attr(const lw_vocab *v, int32_t id);
/* Id of a special token, -1 when the vocabulary has none. */
int32_t lw_vocab_special(const lw_vocab *v, lw_special_token which);
/* End-of-generation tokens (EOS, EOT, <|im_end|>, ... as llama.cpp decides). */
int lw_vocab_is_eog(const lw_vocab *v, int32_t id);
/* Whether tokenizing with add_special prepends BOS / appends EOS. */
int lw_vocab_adds_bos(const lw_vocab *v);
int lw_vocab_adds_eos(const lw_vocab *v);
/* Longest piece lw_token_to_piece can produce (for sizing buffers). */
size_t lw_vocab_max_piece_len(const lw_vocab *v);

/* Tokenizes text[0..len) exactly as llama_tokenize(vocab, text, len, ..., add_special, parse_special).
 * add_special adds BOS/EOS (or CLS/SEP) as the vocabulary asks; parse_special lets control tokens written
 * in the text become their ids (user-defined tokens always do). Writes at most cap ids to out and the full
 * count to *n_out; LW_ERR_TOO_LARGE when cap was too small (call again with *n_out). Arbitrary bytes are
 * accepted, including invalid UTF-8. There are never more than 4 * len + 2 ids (an invalid byte becomes
 * U+FFFD, three byte tokens). Working memory comes from the vocabulary's allocator. */
lw_status lw_tokenize(const lw_vocab *v, const char *text, size_t len, int add_special, int parse_special,
                      int32_t *out, size_t cap, size_t *n_out);

/* The text of one token as llama_token_to_piece: control/unknown tokens give "" unless special; lstrip
 * removes up to that many leading spaces. Writes at most cap bytes (no NUL) and the full length to *n_out;
 * LW_ERR_TOO_LARGE when cap was too small; LW_ERR_INVALID_ARG for an id out of range. */
lw_status lw_token_to_piece(const lw_vocab *v, int32_t id, int special, size_t lstrip, char *buf, size_t cap,
                            size_t *n_out);

/* Text of a token sequence as llama_detokenize (leading-space removal for SPM, optional removal of BOS/EOS,
 * clean-up of spaces before punctuation for vocabularies that ask for it). Same output contract as
 * lw_token_to_piece, except that on LW_ERR_TOO_LARGE *n_out is the length before the space clean-up (an
 * upper bound: enough room for the next call). */
lw_status lw_detokenize(const lw_vocab *v, const int32_t *tokens, size_t n_tokens, int remove_special,
                        int unparse_special, char *buf, size_t cap, size_t *n_out);

/* Streaming detokenizer for generation: feed tokens one at a time; the output is always valid UTF-8 and a
 * character split across tokens (byte tokens, byte-level BPE) is held back until it is complete. Invalid
 * sequences become U+FFFD. The struct is plain data: declare it anywhere, no allocation. */
typedef struct lw_detok_stream {
    const lw_vocab *vocab; /* the vocabulary                                        */
    int special;           /* render control tokens' text                           */
    int strip_space;       /* drop the leading space of the first piece (SPM prompt) */
    uint8_t pending[4];    /* bytes of an incomplete UTF-8 character                */
    uint32_t n_pending;    /* how many                                              */
} lw_detok_stream;

void lw_detok_stream_init(lw_detok_stream *s, const lw_vocab *v, int special, int strip_leading_space);
/* Bytes to reserve for one push: every push fits in this many bytes. */
size_t lw_detok_stream_max_out(const lw_detok_stream *s);
/* Appends the text that token completes; writes *n_out bytes to out. LW_ERR_TOO_LARGE (nothing consumed)
 * when cap < lw_detok_stream_max_out. */
lw_status lw_detok_stream_push(lw_detok_stream *s, int32_t token, char *out, size_t cap, size_t *n_out);
/* Emits what is still held back (as U+FFFD: it never completed). cap >= 3 suffices. */
lw_status lw_detok_stream_flush(lw_detok_stream *s, char *out, size_t cap, size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
