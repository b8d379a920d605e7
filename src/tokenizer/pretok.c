/* Pre-tokenization for byte-level BPE: the regex sets llama.cpp selects by tokenizer.ggml.pre, run as a
 * chain of split stages over code points. The most common patterns have hand-written splitters that
 * reproduce llama.cpp's own hand-written ones (unicode.cpp) decision for decision, including their small
 * departures from the regex they stand for; the other patterns run through the regex engine in regex.c
 * with llama.cpp's std::regex view of the text. The patterns below are transcribed from llama.cpp's
 * llama-vocab.cpp (release v0.4.0). */
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------------------------
 * Regex sets (NULL-terminated lists, applied in order)
 * ------------------------------------------------------------------------------------------------------- */

static const char *const set_llama3[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_jais2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL,
};
static const char *const set_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
    NULL,
};
static const char *const set_deepseek3[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_youtu[] = {
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_deepseek_coder[] = {
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}",
    NULL,
};
static const char *const set_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
    NULL,
};
static const char *const set_starcoder[] = {
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL,
};
static const char *const set_gpt2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL,
};
static const char *const set_qwen2[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_qwen35[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_poro[] = {
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    NULL,
};
static const char *const set_viking[] = {
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    "\\p{N}",
    NULL,
};
static const char *const set_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_chameleon[] = {
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    NULL,
};
static const char *const set_gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_granite_emb_multi[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_tiny_aya[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_seed_coder[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_afmoe[] = {
    "\\p{AFMoE_digits}",
    "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_laguna[] = {
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_exaone_moe[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_gemma4[] = {
    "[^\\n]+|[\\n]+",
    NULL,
};
static const char *const set_minicpm5[] = {
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const set_whitespace[] = {
    "\\S+",
    NULL,
};
static const char *const set_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
    NULL,
};
static const char *const *const pre_sets[LW_PRE_COUNT] = {
    [LW_PRE_LLAMA3] = set_llama3,
    [LW_PRE_JAIS2] = set_jais2,
    [LW_PRE_DEEPSEEK_LLM] = set_deepseek_llm,
    [LW_PRE_DEEPSEEK3] = set_deepseek3,
    [LW_PRE_YOUTU] = set_youtu,
    [LW_PRE_DEEPSEEK_CODER] = set_deepseek_coder,
    [LW_PRE_FALCON] = set_falcon,
    [LW_PRE_STARCODER] = set_starcoder,
    [LW_PRE_GPT2] = set_gpt2,
    [LW_PRE_QWEN2] = set_qwen2,
    [LW_PRE_QWEN35] = set_qwen35,
    [LW_PRE_PORO] = set_poro,
    [LW_PRE_VIKING] = set_viking,
    [LW_PRE_TEKKEN] = set_tekken,
    [LW_PRE_CHAMELEON] = set_chameleon,
    [LW_PRE_GPT4O] = set_gpt4o,
    [LW_PRE_GRANITE_EMB_MULTI] = set_granite_emb_multi,
    [LW_PRE_TINY_AYA] = set_tiny_aya,
    [LW_PRE_BAILINGMOE] = set_bailingmoe,
    [LW_PRE_SEED_CODER] = set_seed_coder,
    [LW_PRE_AFMOE] = set_afmoe,
    [LW_PRE_LAGUNA] = set_laguna,
    [LW_PRE_EXAONE_MOE] = set_exaone_moe,
    [LW_PRE_GEMMA4] = set_gemma4,
    [LW_PRE_MINICPM5] = set_minicpm5,
    [LW_PRE_WHITESPACE] = set_whitespace,
    [LW_PRE_DEFAULT] = set_default,
};

/* Patterns with a hand-written splitter. */
static const struct {
    const char *pattern;
    lw__split_kind kind;
} custom_splitters[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", LW_SPLIT_GPT2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     LW_SPLIT_LLAMA3},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     LW_SPLIT_LLAMA3},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     LW_SPLIT_QWEN2},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     LW_SPLIT_QWEN35},
    {"[^\\n]+|[\\n]+", LW_SPLIT_NEWLINES},
    {"\\p{AFMoE_digits}", LW_SPLIT_DIGITS3},
    {"\\d{1,3}(?=(?:\\d{3})*\\b)", LW_SPLIT_DIGITS3},
};

lw_status lw__pretok_init(lw__pretok *p, lw__pre_set set, const lw_allocator *alloc, char *err) {
    memset(p, 0, sizeof(*p));
    if ((unsigned)set >= LW_PRE_COUNT || !pre_sets[set])
        return lw__errorf(err, LW_ERR_UNSUPPORTED, "pre-tokenizer set %d is not implemented", (int)set);
    for (const char *const *e = pre_sets[set]; *e; e++) {
        if (p->n_stages == LW_PRETOK_MAX_STAGES) return lw__errorf(err, LW_ERR_UNSUPPORTED, "too many stages");
        uint32_t k = p->n_stages;
        p->kind[k] = LW_SPLIT_REGEX;
        for (size_t j = 0; j < sizeof(custom_splitters) / sizeof(custom_splitters[0]); j++)
            if (!strcmp(*e, custom_splitters[j].pattern)) p->kind[k] = custom_splitters[j].kind;
        if (p->kind[k] == LW_SPLIT_REGEX) {
            lw_status st = lw__regex_compile(*e, alloc, &p->re[k], err);
            if (st != LW_OK) {
                lw__pretok_free(p);
                return st;
            }
        }
        p->n_stages++;
    }
    return LW_OK;
}

void lw__pretok_free(lw__pretok *p) {
    for (uint32_t k = 0; k < LW_PRETOK_MAX_STAGES; k++) lw__regex_free(p->re[k]);
    memset(p, 0, sizeof(*p));
}

/* ---------------------------------------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------------------------------------- */

lw_status lw__u32buf_reserve(lw__u32buf *b, const lw_allocator *a, size_t need) {
    if (need <= b->cap) return LW_OK;
    size_t nc = b->cap ? b->cap : 64, bytes;
    while (nc < need) {
        if (!lw__mul_size(nc, 2, &nc)) return LW_ERR_OVERFLOW;
    }
    if (!lw__mul_size(nc, sizeof(uint32_t), &bytes)) return LW_ERR_OVERFLOW;
    uint32_t *nv = lw__realloc(a, b->v, bytes);
    if (!nv) return LW_ERR_NOMEM;
    b->v = nv;
    b->cap = nc;
    return LW_OK;
}

lw_status lw__u32buf_push(lw__u32buf *b, const lw_allocator *a, uint32_t x) {
    if (b->n == b->cap) {
        lw_status st = lw__u32buf_reserve(b, a, b->n + 1);
        if (st != LW_OK) return st;
    }
    b->v[b->n++] = x;
    return LW_OK;
}

void lw__pretok_scratch_free(lw__pretok_scratch *s, const lw_allocator *a) {
    lw__free(a, s->lens.v);
    lw__free(a, s->tmp.v);
    lw__free(a, s->units.v);
    lw__free(a, s->stack.v);
    lw__free(a, s->stack.memo);
    memset(s, 0, sizeof(*s));
}

/* ---------------------------------------------------------------------------------------------------------
 * Hand-written splitters. Each handles one piece [ini, end) of the previous stage and appends the
 * lengths of its sub-pieces. Out-of-piece positions read as "no code point" (flags 0, OUT_OF_RANGE), as in
 * llama.cpp.
 * ------------------------------------------------------------------------------------------------------- */

#define OUT_OF_RANGE 0xFFFFFFFFu

typedef struct span {
    const uint32_t *cpts;   /* whole text          */
    const uint16_t *flags;  /* their flags         */
    size_t ini, end;        /* the piece           */
    size_t prev_end;        /* end of last output  */
    lw__u32buf *out;        /* piece lengths       */
    const lw_allocator *a;  /* for out             */
    lw_status st;           /* first push failure  */
} span;

static inline uint32_t cpt_at(const span *s, size_t pos) {
    return pos >= s->ini && pos < s->end ? s->cpts[pos] : OUT_OF_RANGE;
}
static inline uint16_t flags_at(const span *s, size_t pos) {
    return pos >= s->ini && pos < s->end ? s->flags[pos] : 0;
}
static size_t add_token(span *s, size_t end) {
    size_t len = end - s->prev_end;
    if (len > 0 && s->st == LW_OK) s->st = lw__u32buf_push(s->out, s->a, (uint32_t)len);
    s->prev_end = end;
    return len;
}

#define IS_WS(f) ((f) & LW_UCP_WHITESPACE)
#define IS_L(f) ((f) & LW_UCP_LETTER)
#define IS_N(f) ((f) & LW_UCP_NUMBER)
#define IS_M(f) ((f) & LW_UCP_MARK)

/* 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when fold) at pos; returns the length matched (0, 2, 3). */
static size_t contraction(const span *s, size_t pos, int fold) {
    if (cpt_at(s, pos) != '\'' || pos + 1 >= s->end) return 0;
    uint32_t c1 = cpt_at(s, pos + 1);
    if (fold) c1 = lw__ucp_tolower(c1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 < s->end) {
        uint32_t c2 = cpt_at(s, pos + 2);
        if (fold) c2 = lw__ucp_tolower(c2);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    }
    return 0;
}

/* Trailing whitespace rules shared by the splitters: \s+(?!\S) then \s+ (and for llama3-like ones,
 * \s*[\r\n]+ first). Returns 1 when it consumed something. */
static int split_whitespace(span *s, size_t *ppos, int newline_rule) {
    size_t pos = *ppos, nws = 0, last_rn = 0;
    while (IS_WS(flags_at(s, pos + nws))) {
        uint32_t c = cpt_at(s, pos + nws);
        if (newline_rule && (c == '\r' || c == '\n')) last_rn = pos + nws + 1;
        nws++;
    }
    if (last_rn > 0) {
        *ppos = last_rn;
        add_token(s, *ppos);
        return 1;
    }
    if (nws > 1 && cpt_at(s, pos + nws) != OUT_OF_RANGE) {
        *ppos = pos + nws - 1;
        add_token(s, *ppos);
        return 1;
    }
    if (nws > 0) {
        *ppos = pos + nws;
        add_token(s, *ppos);
        return 1;
    }
    return 0;
}

static void split_gpt2(span *s) {
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = cpt_at(s, pos);
        uint16_t flags = flags_at(s, pos);
        size_t c = contraction(s, pos, 0);
        if (c) {
            pos += add_token(s, pos + c);
            continue;
        }
        uint16_t f2 = cpt == ' ' ? flags_at(s, pos + 1) : flags;
        if (IS_L(f2)) { /* <space>?\p{L}+ */
            pos += cpt == ' ';
            while (IS_L(f2)) f2 = flags_at(s, ++pos);
            add_token(s, pos);
            continue;
        }
        if (IS_N(f2)) { /* <space>?\p{N}+ */
            pos += cpt == ' ';
            while (IS_N(f2)) f2 = flags_at(s, ++pos);
            add_token(s, pos);
            continue;
        }
        if (!(IS_WS(f2) || IS_L(f2) || IS_N(f2)) && f2) { /* <space>?[^\s\p{L}\p{N}]+ */
            pos += cpt == ' ';
            while (!(IS_WS(f2) || IS_L(f2) || IS_N(f2)) && f2) f2 = flags_at(s, ++pos);
            add_token(s, pos);
            continue;
        }
        if (split_whitespace(s, &pos, 0)) continue;
        add_token(s, ++pos); /* no match */
    }
}

/* llama3 / qwen2 / qwen35 share one shape: digits_max 3 (llama3) or 1 (qwen), marks count as letters
 * for qwen35. */
static void split_llama3_like(span *s, size_t digits_max, int marks) {
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t cpt = cpt_at(s, pos);
        uint16_t flags = flags_at(s, pos);
        size_t c = contraction(s, pos, 1);
        if (c) {
            pos += add_token(s, pos + c);
            continue;
        }
        uint16_t lm = LW_UCP_LETTER | (marks ? LW_UCP_MARK : 0);
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!(cpt == '\r' || cpt == '\n' || IS_N(flags))) {
            if ((flags & lm) || (flags_at(s, pos + 1) & lm)) {
                pos++;
                while (flags_at(s, pos) & lm) pos++;
                add_token(s, pos);
                continue;
            }
        }
        /* \p{N}{1,3} or \p{N} */
        if (IS_N(flags)) {
            if (digits_max == 1) {
                add_token(s, ++pos);
                continue;
            }
            size_t ini = pos;
            while (IS_N(flags_at(s, pos))) {
                if (++pos - ini >= digits_max) {
                    add_token(s, pos);
                    ini = pos;
                }
            }
            add_token(s, pos);
            continue;
        }
        /* <space>?[^\s\p{L}\p{N}]+[\r\n]* */
        uint16_t f2 = cpt == ' ' ? flags_at(s, pos + 1) : flags;
        if (!(IS_WS(f2) || (f2 & lm) || IS_N(f2)) && flags) {
            pos += cpt == ' ';
            while (!(IS_WS(f2) || (f2 & lm) || IS_N(f2)) && f2) f2 = flags_at(s, ++pos);
            uint32_t c2 = cpt_at(s, pos);
            while (c2 == '\r' || c2 == '\n') c2 = cpt_at(s, ++pos);
            add_token(s, pos);
            continue;
        }
        if (split_whitespace(s, &pos, 1)) continue;
        add_token(s, ++pos);
    }
}

static void split_newlines(span *s) {
    size_t pos = s->ini;
    while (pos < s->end) {
        int nl = s->cpts[pos] == '\n';
        size_t run = pos;
        while (pos < s->end && (s->cpts[pos] == '\n') == nl) pos++;
        add_token(s, pos);
        (void)run;
    }
}

/* Digit runs split so that the first group takes len % 3 digits and the rest groups of 3; the text
 * between runs is one piece each. */
static void split_digits3(span *s) {
    for (size_t pos = s->ini; pos < s->end;) {
        if (IS_N(flags_at(s, pos))) {
            size_t start = pos, count = 0;
            while (IS_N(flags_at(s, pos)) && pos < s->end) count++, pos++;
            size_t cur = start, rem = count % 3;
            if (rem > 0) {
                add_token(s, cur + rem);
                cur += rem;
            }
            while (cur < start + count) {
                add_token(s, cur + 3);
                cur += 3;
            }
            continue;
        }
        pos++;
    }
    if (s->prev_end < s->end) add_token(s, s->end);
}

/* ---------------------------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------------------------- */

/* Regex stage: the matches and the gaps between them are pieces (std::regex_iterator's walk). */
static lw_status split_regex(const lw__regex *re, const uint32_t *cpts, const uint16_t *flags, size_t ini, size_t end,
                             lw__pretok_scratch *sc, lw__u32buf *out, const lw_allocator *a) {
    const uint32_t *u = sc->units.v + ini;
    size_t n = end - ini, start = 0, ms, me;
    (void)cpts;
    (void)flags;
    for (;;) {
        int r = lw__regex_search(re, u, n, start, &sc->stack, a, &ms, &me);
        if (r < 0) return LW_ERR_NOMEM;
        if (r == 0) break;
        lw_status st;
        if (ms > start && (st = lw__u32buf_push(out, a, (uint32_t)(ms - start))) != LW_OK) return st;
        if ((st = lw__u32buf_push(out, a, (uint32_t)(me - ms))) != LW_OK) return st;
        start = me;
    }
    if (start < n) return lw__u32buf_push(out, a, (uint32_t)(n - start));
    return LW_OK;
}

lw_status lw__pretok_split(const lw__pretok *p, const uint32_t *cpts, const uint16_t *flags, size_t n,
                           lw__pretok_scratch *sc, const lw_allocator *a) {
    lw_status st;
    sc->lens.n = 0;
    if (n == 0) return LW_OK;
    if (n > UINT32_MAX) return LW_ERR_TOO_LARGE;
    if ((st = lw__u32buf_push(&sc->lens, a, (uint32_t)n)) != LW_OK) return st;
    for (uint32_t k = 0; k < p->n_stages; k++) {
        sc->tmp.n = 0;
        if (p->kind[k] == LW_SPLIT_REGEX) {
            if ((st = lw__u32buf_reserve(&sc->units, a, n)) != LW_OK) return st;
            lw__regex_units(p->re[k], cpts, flags, n, sc->units.v);
        }
        size_t start = 0;
        for (size_t i = 0; i < sc->lens.n; i++) {
            size_t ini = start, end = start + sc->lens.v[i];
            start = end;
            if (p->kind[k] == LW_SPLIT_REGEX) {
                if ((st = split_regex(p->re[k], cpts, flags, ini, end, sc, &sc->tmp, a)) != LW_OK) return st;
                continue;
            }
            span s = {cpts, flags, ini, end, ini, &sc->tmp, a, LW_OK};
            switch (p->kind[k]) {
            case LW_SPLIT_GPT2: split_gpt2(&s); break;
            case LW_SPLIT_LLAMA3: split_llama3_like(&s, 3, 0); break;
            case LW_SPLIT_QWEN2: split_llama3_like(&s, 1, 0); break;
            case LW_SPLIT_QWEN35: split_llama3_like(&s, 1, 1); break;
            case LW_SPLIT_NEWLINES: split_newlines(&s); break;
            case LW_SPLIT_DIGITS3: split_digits3(&s); break;
            default: break;
            }
            if (s.st != LW_OK) return s.st;
        }
        lw__u32buf t = sc->lens;
        sc->lens = sc->tmp;
        sc->tmp = t;
    }
    return LW_OK;
}
