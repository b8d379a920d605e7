/* Internal view of a vocabulary, shared by the loader (vocab.c), the tokenizers (tokenize.c), the
 * pre-tokenizer (pretok.c) and the detokenizer (detok.c). */
#ifndef LW_TOKENIZER_VOCAB_H
#define LW_TOKENIZER_VOCAB_H

#include "core/core.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------------------------------------------------------
 * Pre-tokenizer: a list of split stages, each a hand-written splitter or a compiled regex
 * ------------------------------------------------------------------------------------------------------- */

/* Hand-written splitters (llama.cpp uses the same ones for these exact patterns). */
typedef enum lw__split_kind {
    LW_SPLIT_REGEX = 0, /* generic engine                                     */
    LW_SPLIT_GPT2,      /* 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
    LW_SPLIT_LLAMA3,    /* llama3 pattern with \p{N}{1,3}                       */
    LW_SPLIT_QWEN2,     /* llama3 pattern with \p{N}                            */
    LW_SPLIT_QWEN35,    /* qwen2 pattern with [\p{L}\p{M}]                      */
    LW_SPLIT_NEWLINES,  /* [^\n]+|[\n]+                                         */
    LW_SPLIT_DIGITS3,   /* digit runs split into groups of 3 from the right     */
} lw__split_kind;

#define LW_PRETOK_MAX_STAGES 8

typedef struct lw__pretok {
    uint32_t n_stages;                           /* stages applied in order      */
    lw__split_kind kind[LW_PRETOK_MAX_STAGES];   /* splitter of each stage       */
    lw__regex *re[LW_PRETOK_MAX_STAGES];         /* for LW_SPLIT_REGEX stages    */
} lw__pretok;

/* Regex sets by llama.cpp pre-tokenizer type. */
typedef enum lw__pre_set {
    LW_PRE_DEFAULT, LW_PRE_LLAMA3, LW_PRE_JAIS2, LW_PRE_DEEPSEEK_LLM, LW_PRE_DEEPSEEK3, LW_PRE_YOUTU,
    LW_PRE_DEEPSEEK_CODER, LW_PRE_FALCON, LW_PRE_STARCODER, LW_PRE_GPT2, LW_PRE_QWEN2, LW_PRE_QWEN35,
    LW_PRE_PORO, LW_PRE_VIKING, LW_PRE_TEKKEN, LW_PRE_CHAMELEON, LW_PRE_GPT4O, LW_PRE_GRANITE_EMB_MULTI,
    LW_PRE_TINY_AYA, LW_PRE_BAILINGMOE, LW_PRE_SEED_CODER, LW_PRE_AFMOE, LW_PRE_LAGUNA, LW_PRE_EXAONE_MOE,
    LW_PRE_GEMMA4, LW_PRE_MINICPM5, LW_PRE_WHITESPACE, LW_PRE_COUNT
} lw__pre_set;

/* Builds the stages of a regex set (message in err). */
lw_status lw__pretok_init(lw__pretok *p, lw__pre_set set, const lw_allocator *alloc, char *err);
void lw__pretok_free(lw__pretok *p);

/* Growable array of uint32_t through an allocator. */
typedef struct lw__u32buf {
    uint32_t *v;
    size_t n, cap;
} lw__u32buf;
lw_status lw__u32buf_push(lw__u32buf *b, const lw_allocator *a, uint32_t x);
lw_status lw__u32buf_reserve(lw__u32buf *b, const lw_allocator *a, size_t need);

/* Scratch memory for one pre-tokenization call. */
typedef struct lw__pretok_scratch {
    lw__u32buf lens, tmp;  /* piece lengths (code points), ping-pong                    */
    lw__u32buf units;      /* regex view of the code points                            */
    lw__regex_stack stack; /* backtracking stack                                       */
} lw__pretok_scratch;
void lw__pretok_scratch_free(lw__pretok_scratch *s, const lw_allocator *a);

/* Splits cpts[0..n) (with their flags) into pieces; on return s->lens holds the piece lengths. */
lw_status lw__pretok_split(const lw__pretok *p, const uint32_t *cpts, const uint16_t *flags, size_t n,
                           lw__pretok_scratch *s, const lw_allocator *a);

/* ---------------------------------------------------------------------------------------------------------
 * The vocabulary
 * ------------------------------------------------------------------------------------------------------- */

typedef struct lw__token {
    uint32_t off, len; /* text in lw_vocab.text (NUL-terminated)      */
    float score;       /* SPM merge priority / log probability        */
    uint32_t attr;     /* LW_TOKEN_ATTR_* bits                         */
    uint32_t piece_off, piece_len; /* token_to_piece(special=1) text in lw_vocab.pieces */
} lw__token;

/* UGM: one node of a token trie, as a hash-set entry keyed by the prefix it spells. */
typedef struct lw__ugm_prefix {
    uint32_t tok;  /* id + 1 of a token starting with the prefix (0 = empty slot) */
    uint32_t len;  /* prefix length                                              */
    int32_t value; /* id of the token equal to the prefix, or -1                  */
} lw__ugm_prefix;

typedef struct lw__merge {
    uint32_t a_off, a_len; /* left part in lw_vocab.merge_text  */
    uint32_t b_off, b_len; /* right part                        */
    int32_t a_id, b_id;    /* token ids of the parts, -1 if none */
} lw__merge;

struct lw_vocab {
    lw_allocator alloc;         /* every allocation below                                     */
    char err[LW_ERRMSG_SIZE];   /* last load failure                                          */
    lw_vocab_type type;         /* tokenizer family                                           */
    char pre_name[64];          /* tokenizer.ggml.pre, truncated                              */
    lw__pre_set pre;            /* regex set                                                  */
    int is_gemma4;              /* gemma4 newline-run rule                                    */
    lw__pretok pretok;          /* BPE pre-tokenizer                                          */

    uint32_t n_tokens;          /* vocabulary size                                            */
    lw__token *tokens;          /* per id                                                     */
    char *text;                 /* all token texts, NUL-separated                             */
    uint32_t *tok_hash;         /* open addressing: id + 1, 0 = empty                         */
    uint32_t tok_hash_mask;     /* table size - 1 (power of two)                              */
    uint32_t max_token_len;     /* longest token text in bytes                                */
    char *pieces;               /* token_to_piece cache                                       */
    uint32_t max_piece_len;     /* longest cached piece                                       */

    uint32_t n_merges;          /* BPE merges, rank = index                                   */
    lw__merge *merges;          /* the pairs                                                  */
    char *merge_text;           /* their strings                                              */
    uint32_t *merge_hash;       /* by strings, merges with a part that is no token: rank + 1  */
    uint32_t merge_hash_mask;   /* table size - 1                                             */
    uint32_t *merge_id_hash;    /* by (a_id, b_id), merges of two tokens: rank + 1            */
    uint32_t merge_id_hash_mask; /* table size - 1                                            */

    int32_t *special_cache;     /* control / user-defined / unknown ids, longest text first   */
    uint32_t n_special_cache;   /* count                                                      */
    int32_t *eog;               /* end-of-generation ids, sorted                              */
    uint32_t n_eog;             /* count                                                      */
    int32_t special[LW_TOKEN_SPECIAL_COUNT]; /* ids of special tokens, -1 = none             */
    int32_t byte_tokens[256];   /* SPM byte fallback ids (-1 = none)                           */
    char byte_u8[256][2];       /* GPT-2 byte mapping, UTF-8 (1 or 2 bytes) ...                 */
    uint8_t byte_u8_len[256];   /* ... and its length                                          */
    uint8_t *pair_bits;         /* SPM: bit (a << 8 | b) set when bytes a, b are adjacent in some
                                 * token's text; where a pair is absent no merge can cross, so the
                                 * text is merged in independent chunks (small heaps, same result)  */

    lw__ugm_prefix *ugm_all;    /* UGM: prefixes of normal, user-defined and unused tokens     */
    uint32_t ugm_all_mask;      /* table size - 1                                             */
    lw__ugm_prefix *ugm_user;   /* UGM: prefixes of user-defined tokens                       */
    uint32_t ugm_user_mask;     /* table size - 1                                             */
    float ugm_unk_score;        /* UGM: lowest normal score - 10                              */
    uint8_t *ugm_charsmap;      /* UGM: precompiled_charsmap copy (NULL = none)               */
    const uint8_t *ugm_xcda;    /* its XCDA entries (u32 little-endian)                       */
    size_t ugm_xcda_n;          /* entry count                                                */
    const uint8_t *ugm_repl;    /* NUL-terminated replacement strings                         */
    size_t ugm_repl_n;          /* their bytes                                                */

    /* Behaviour flags, with llama.cpp's defaults per family and overrides from the file. */
    uint8_t add_space_prefix, add_bos, add_eos, add_sep, ignore_merges, clean_spaces;
    uint8_t remove_extra_ws, escape_ws, treat_ws_suffix, byte_encode, lowercase, strip_accents;
};

/* UGM: builds the prefix sets and takes a copy of the character map (ugm.c). */
lw_status lw__ugm_init(lw_vocab *v, const void *charsmap, size_t charsmap_len);
/* UGM: tokenizes one text fragment, calling emit for each id in order. */
lw_status lw__ugm_tokenize(const lw_vocab *v, const char *text, size_t len, void (*emit)(void *, int32_t), void *ctx);

/* RWKV: builds the trie over unescaped token texts (needs the piece cache). */
lw_status lw__rwkv_init(lw_vocab *v);
/* RWKV: greedy longest-match tokenization of one fragment. */
void lw__rwkv_tokenize(const lw_vocab *v, const char *text, size_t len, void (*emit)(void *, int32_t), void *ctx);

/* Id of the token whose text is s[0..n), or -1. */
int32_t lw__vocab_find(const lw_vocab *v, const char *s, size_t n);
/* Rank of the merge (a, b), or -1, for strings a and b of which at least one is not a token. */
int32_t lw__vocab_merge_rank(const lw_vocab *v, const char *a, size_t an, const char *b, size_t bn);
/* Rank of the merge of tokens a and b (ids as lw__vocab_find returns them), or -1. Together the two
 * lookups answer llama.cpp's find_bpe_rank(a, b) on strings: a merge whose parts are both tokens can only
 * match symbols that are those tokens, and the other way round. */
int32_t lw__vocab_merge_rank_ids(const lw_vocab *v, int32_t a, int32_t b);
static inline const char *lw__tok_text(const lw_vocab *v, int32_t id) {
    return v->text + v->tokens[id].off;
}

/* Hash of a byte string (FNV-1a, 32 bits). */
static inline uint32_t lw__hash_bytes(const char *s, size_t n, uint32_t h) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}
#define LW_HASH_SEED 2166136261u

#endif
