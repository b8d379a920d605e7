/* Tokenizer unit tests that need no downloaded data: Unicode tables and UTF-8 decoding against facts from
 * the Unicode standard, the GPT-2 byte map, the regex engine on small patterns with hand-derived matches,
 * SPM and byte-level BPE on tiny vocabularies (written with the GGUF writer) whose expected ids are worked
 * out by hand in the comments, streaming detokenization of split characters, load errors, and allocation
 * failures at every allocation. (llama.cpp agreement on real vocabularies: test-tokenizer-vectors and
 * test-tokenizer-llama.) */
#include "test.h"

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------------------
 * Unicode
 * ------------------------------------------------------------------------------------------------------- */

static void test_unicode(void) {
    CHECK(lw__ucp_flags('A') == LW_UCP_LETTER);
    CHECK(lw__ucp_flags('5') == LW_UCP_NUMBER);
    CHECK(lw__ucp_flags(' ') == (LW_UCP_SEPARATOR | LW_UCP_WHITESPACE));
    CHECK(lw__ucp_flags('\n') == (LW_UCP_CONTROL | LW_UCP_WHITESPACE));
    CHECK(lw__ucp_flags('$') == LW_UCP_SYMBOL);
    CHECK(lw__ucp_flags('_') == LW_UCP_PUNCT);
    CHECK(lw__ucp_flags(0x00A0) == (LW_UCP_SEPARATOR | LW_UCP_WHITESPACE)); /* no-break space */
    CHECK(lw__ucp_flags(0x0085) == (LW_UCP_CONTROL | LW_UCP_WHITESPACE));   /* next line */
    CHECK(lw__ucp_flags(0x0301) == LW_UCP_MARK);                            /* combining acute */
    CHECK(lw__ucp_flags(0x4E2D) == LW_UCP_LETTER);                          /* CJK, in a First/Last range */
    CHECK(lw__ucp_flags(0xAC01) == LW_UCP_LETTER);                          /* Hangul syllable range */
    CHECK(lw__ucp_flags(0x0663) == LW_UCP_NUMBER);                          /* Arabic-Indic three */
    CHECK(lw__ucp_flags(0x1F999) == LW_UCP_SYMBOL);                         /* llama emoji */
    CHECK(lw__ucp_flags(0x200B) == LW_UCP_CONTROL);                         /* zero width space: Cf */
    CHECK(lw__ucp_flags(0xE000) == LW_UCP_CONTROL);                         /* private use */
    CHECK(lw__ucp_flags(0x0378) == LW_UCP_UNDEFINED);                       /* unassigned */
    CHECK(lw__ucp_flags(0x10FFFF) == LW_UCP_UNDEFINED);
    CHECK(lw__ucp_flags(0x110000) == LW_UCP_UNDEFINED);
    CHECK(lw__ucp_flags(0x3000) == (LW_UCP_SEPARATOR | LW_UCP_WHITESPACE)); /* ideographic space */
    CHECK(lw__ucp_flags(0x2EBF0) == LW_UCP_LETTER);                         /* CJK Ext. I (Unicode 15.1) */
    CHECK(lw__ucp_flags(0x31EF) == LW_UCP_SYMBOL);                          /* CJK stroke HXG (15.1) */

    CHECK(lw__ucp_tolower('A') == 'a');
    CHECK(lw__ucp_tolower('a') == 'a');
    CHECK(lw__ucp_tolower(0x00C4) == 0x00E4); /* Ä -> ä */
    CHECK(lw__ucp_tolower(0x0391) == 0x03B1); /* Α -> α */
    CHECK(lw__ucp_tolower(0x0130) == 0x0069); /* İ -> i (simple mapping) */
    CHECK(lw__ucp_tolower(0x1F999) == 0x1F999);

    CHECK(lw__ucp_nfd_first(0x00E9) == 'e');    /* é = e + U+0301 */
    CHECK(lw__ucp_nfd_first(0x1E69) == 's');    /* ṩ = s + dot below + dot above (two levels) */
    CHECK(lw__ucp_nfd_first(0x212B) == 'A');    /* Angstrom sign -> Å -> A */
    CHECK(lw__ucp_nfd_first(0xAC00) == 0x1100); /* 가 = ᄀ + ᅡ */
    CHECK(lw__ucp_nfd_first(0xD7A3) == 0x1112); /* 힣 */
    CHECK(lw__ucp_nfd_first('x') == 'x');
    CHECK(lw__ucp_nfd_first(0x4E2D) == 0x4E2D);
}

static void test_utf8(void) {
    size_t off = 0;
    CHECK(lw__utf8_decode("\xc3\xa9", 2, &off) == 0xE9 && off == 2);
    off = 0;
    CHECK(lw__utf8_decode("\xf0\x9f\xa6\x99", 4, &off) == 0x1F999 && off == 4);
    off = 0;
    CHECK(lw__utf8_decode("\xc3", 1, &off) == 0xFFFD && off == 1); /* truncated */
    off = 0;
    CHECK(lw__utf8_decode("\xe2\x82z", 3, &off) == 0xFFFD && off == 1);
    off = 0;
    CHECK(lw__utf8_decode("\x80", 1, &off) == 0xFFFD && off == 1); /* lone continuation */
    off = 0;
    CHECK(lw__utf8_decode("\xff", 1, &off) == 0xFFFD && off == 1);
    off = 0;
    CHECK(lw__utf8_decode("\xc0\x80", 2, &off) == 0 && off == 2); /* overlong: accepted, as llama.cpp */
    char b[4];
    CHECK(lw__utf8_encode(0x1F999, b) == 4 && !memcmp(b, "\xf0\x9f\xa6\x99", 4));
    CHECK(lw__utf8_encode(0x20AC, b) == 3 && !memcmp(b, "\xe2\x82\xac", 3));
    CHECK(lw__utf8_encode('z', b) == 1 && b[0] == 'z');

    /* GPT-2 byte map (facts from its encoder): space -> U+0120 'Ġ', newline -> U+010A 'Ċ', soft hyphen ->
     * U+0143 'Ń', printable bytes map to themselves */
    CHECK(lw__byte_to_ucp(' ') == 0x120);
    CHECK(lw__byte_to_ucp('\n') == 0x10A);
    CHECK(lw__byte_to_ucp(0x00) == 0x100);
    CHECK(lw__byte_to_ucp(0xAD) == 0x143);
    CHECK(lw__byte_to_ucp('!') == '!' && lw__byte_to_ucp(0xFF) == 0xFF);
    int all = 1;
    for (int c = 0; c < 256; c++) all &= lw__ucp_to_byte(lw__byte_to_ucp((uint8_t)c)) == c;
    CHECK(all);
    CHECK(lw__ucp_to_byte(0x20) == -1 && lw__ucp_to_byte(0x200) == -1);
}

/* ---------------------------------------------------------------------------------------------------------
 * Regex engine
 * ------------------------------------------------------------------------------------------------------- */

/* First match of pattern in text at or after from: returns 1 and the code point span, 0 for none, -1 for a
 * compile error. */
static int re_find(const char *pattern, const char *text, size_t from, size_t *ms, size_t *me) {
    lw_allocator a = lw__allocator_or_default(NULL);
    lw__regex *re = NULL;
    char err[LW_ERRMSG_SIZE];
    if (lw__regex_compile(pattern, &a, &re, err) != LW_OK) return -1;
    uint32_t cpts[256], units[256];
    uint16_t flags[256];
    size_t n = 0, off = 0, len = strlen(text);
    while (off < len && n < 256) {
        cpts[n] = lw__utf8_decode(text, len, &off);
        flags[n] = lw__ucp_flags(cpts[n]);
        n++;
    }
    lw__regex_units(re, cpts, flags, n, units);
    lw__regex_stack st = {0};
    int r = lw__regex_search(re, units, n, from, &st, &a, ms, me);
    lw__free(&a, st.v);
    lw__free(&a, st.memo);
    lw__regex_free(re);
    return r;
}

#define RE(pat, text, s, e)                                                                                  \
    do {                                                                                                     \
        size_t ms_ = 99, me_ = 99;                                                                           \
        int r_ = re_find(pat, text, 0, &ms_, &me_);                                                          \
        CHECK_MSG(r_ == 1 && ms_ == (s) && me_ == (e), "/%s/ on \"%s\": got %d [%zu,%zu)", pat, text, r_, ms_, \
                  me_);                                                                                      \
    } while (0)
#define RE_NONE(pat, text)                                                                                   \
    do {                                                                                                     \
        size_t ms_, me_;                                                                                     \
        CHECK_MSG(re_find(pat, text, 0, &ms_, &me_) == 0, "/%s/ should not match \"%s\"", pat, text);         \
    } while (0)

static void test_regex(void) {
    RE("a|ab", "ab", 0, 1);                 /* first alternative wins, not the longest */
    RE("ab|a", "ab", 0, 2);
    RE("\\s+(?!\\S)", "a   b", 1, 3);       /* backs off one space before the word */
    RE("\\s+(?!\\S)", "a   ", 1, 4);        /* the end counts as not-\S */
    RE("\\p{N}{1,3}", "x12345", 1, 4);
    RE("[^\\s\\p{L}]+", "ab!?c", 2, 4);
    RE("(?i:ab)", "xAB", 1, 3);
    RE("\\s+$", "a  ", 1, 3);
    RE_NONE("\\s+$", "a  b");
    RE("((?=[\\p{L}])([^a-z]))+", "1ABc", 1, 3);
    RE("[0-9][0-9][0-9]", "12 345", 3, 6);
    RE("x{2}", "xxxx", 0, 2);
    RE("x{2,}", "xxxx", 0, 4);
    RE("x+?y", "xxy", 0, 3);
    RE(" ?[^(\\s|.,!?)]+", "ab, cd", 0, 2);
    RE("\\p{L}+", "1 caf\xc3\xa9!", 2, 6);  /* é is a letter in the collapsed view */
    RE("[\xe4\xb8\x80-\xe9\xbe\xa5]+", "a\xe4\xb8\xad\xe6\x96\x87" "b", 1, 3); /* literal CJK range (wide view) */
    RE("\\s", "a\xe3\x80\x80", 1, 2);       /* non-ASCII whitespace reads as \v, as in llama.cpp */
    RE_NONE("[\xe3\x80\x80-\xe3\x80\x82]", "\xe3\x80\x80"); /* ...so a literal U+3000 no longer matches it */
    RE("[\\-x]+", "a-x-", 1, 4);
    /* 200k spaces then 'x': plain backtracking tries \s+ to the end from every start (2e10 steps); the
     * visited bits make it one pass. (Quadratic here means this test takes minutes instead of ms.) */
    {
        lw_allocator a = lw__allocator_or_default(NULL);
        lw__regex *re = NULL;
        char err[LW_ERRMSG_SIZE];
        enum { N = 200000 };
        uint32_t *u = malloc((N + 1) * sizeof(uint32_t));
        CHECK(u && lw__regex_compile("\\s+$", &a, &re, err) == LW_OK);
        if (u && re) {
            for (size_t i = 0; i < N; i++) u[i] = ' ';
            u[N] = 'x';
            lw__regex_stack st = {0};
            size_t s0, e0;
            CHECK(lw__regex_search(re, u, N + 1, 0, &st, &a, &s0, &e0) == 0);
            CHECK(lw__regex_search(re, u, N, 0, &st, &a, &s0, &e0) == 1 && s0 == 0 && e0 == N);
            lw__free(&a, st.v);
            lw__free(&a, st.memo);
        }
        lw__regex_free(re);
        free(u);
    }
    size_t ms, me;
    CHECK(re_find("\\bfoo", "foo", 0, &ms, &me) == -1); /* unsupported: reported, not misread */
    CHECK(re_find("\\p{Han}+", "x", 0, &ms, &me) == -1);
    CHECK(re_find("(ab", "ab", 0, &ms, &me) == -1);
    CHECK(re_find("ab)", "ab", 0, &ms, &me) == -1);
    CHECK(re_find("\\p{L}\xc3\xa9", "x", 0, &ms, &me) == -1); /* \p with a non-ASCII literal */
}

/* ---------------------------------------------------------------------------------------------------------
 * Tiny vocabularies
 * ------------------------------------------------------------------------------------------------------- */

/* Writes a GGUF with the given tokenizer keys; extra_fn adds more. Returns 1 on success. */
typedef struct spec {
    const char *model, *pre;
    const char *const *tokens;
    size_t n_tokens;
    const float *scores;
    const int32_t *types;
    const char *const *merges;
    size_t n_merges;
    int short_scores; /* write one score fewer than tokens */
} spec;

static int write_vocab(const char *path, const spec *s) {
    lw_gguf_writer *w = NULL;
    if (lw_gguf_writer_new(NULL, &w) != LW_OK) return 0;
    lw_gguf_str strs[600];
    int ok = lw_gguf_writer_set_str(w, "general.architecture", "llama") == LW_OK;
    if (s->model) ok = ok && lw_gguf_writer_set_str(w, "tokenizer.ggml.model", s->model) == LW_OK;
    if (s->pre) ok = ok && lw_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre) == LW_OK;
    for (size_t i = 0; i < s->n_tokens; i++) strs[i] = (lw_gguf_str){strlen(s->tokens[i]), s->tokens[i]};
    ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, s->n_tokens, strs) == LW_OK;
    if (s->scores)
        ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LW_GGUF_FLOAT32,
                                          s->n_tokens - (s->short_scores ? 1 : 0), s->scores) == LW_OK;
    if (s->types)
        ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LW_GGUF_INT32, s->n_tokens, s->types) == LW_OK;
    if (s->merges) {
        lw_gguf_str ms[16];
        for (size_t i = 0; i < s->n_merges; i++) ms[i] = (lw_gguf_str){strlen(s->merges[i]), s->merges[i]};
        ok = ok && lw_gguf_writer_set_arr(w, "tokenizer.ggml.merges", LW_GGUF_STRING, s->n_merges, ms) == LW_OK;
    }
    ok = ok && lw_gguf_writer_write_file(w, path, 0) == LW_OK;
    lw_gguf_writer_free(w);
    return ok;
}

/* Opens a vocab file with an allocator; returns the load status (*v set as lw_vocab_load sets it). */
static lw_status open_vocab(const char *path, const lw_allocator *alloc, lw_source **src, lw_gguf **g, lw_vocab **v) {
    char err[256];
    *src = NULL, *g = NULL, *v = NULL;
    if (lw_source_open_file(path, NULL, src, err, sizeof(err)) != LW_OK) return LW_ERR_IO;
    if (lw_gguf_open(*src, NULL, g) != LW_OK) return LW_ERR_IO;
    return lw_vocab_load(*g, alloc, v);
}

static void close_vocab(lw_source *src, lw_gguf *g, lw_vocab *v) {
    lw_vocab_free(v);
    lw_gguf_close(g);
    lw_source_close(src);
}

/* SPM vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then 259 "▁" -1, 260 "a" -2, 261 "b" -3,
 * 262 "ab" -0.5, 263 "▁a" -0.6, 264 "▁ab" -0.1. */
static char spm_bytes[256][8];
static const char *spm_tokens[265];
static float spm_scores[265];
static int32_t spm_types[265];

static void make_spm(void) {
    spm_tokens[0] = "<unk>", spm_tokens[1] = "<s>", spm_tokens[2] = "</s>";
    spm_types[0] = 2, spm_types[1] = 3, spm_types[2] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(spm_bytes[b], sizeof(spm_bytes[b]), "<0x%02X>", b);
        spm_tokens[3 + b] = spm_bytes[b];
        spm_types[3 + b] = 6;
    }
    static const char *const words[] = {"\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81" "a", "\xe2\x96\x81" "ab"};
    static const float sc[] = {-1.0f, -2.0f, -3.0f, -0.5f, -0.6f, -0.1f};
    for (int i = 0; i < 6; i++) spm_tokens[259 + i] = words[i], spm_scores[259 + i] = sc[i], spm_types[259 + i] = 1;
}

#define EXPECT_IDS(v, text, add, parse, ...)                                                                 \
    do {                                                                                                     \
        const int32_t exp_[] = {__VA_ARGS__};                                                                \
        int32_t got_[64];                                                                                    \
        size_t n_ = 0;                                                                                       \
        lw_status st_ = lw_tokenize(v, text, strlen(text), add, parse, got_, 64, &n_);                        \
        int same_ = st_ == LW_OK && n_ == sizeof(exp_) / sizeof(exp_[0]) && !memcmp(got_, exp_, sizeof(exp_)); \
        CHECK_MSG(same_, "tokenize \"%s\" (add %d parse %d): status %d, %zu ids, first %d", text, add, parse,   \
                  (int)st_, n_, n_ ? got_[0] : -1);                                                          \
    } while (0)

static void expect_detok(const lw_vocab *v, const int32_t *ids, size_t n, int rm, int unparse, const char *want) {
    char buf[256];
    size_t k = 0;
    lw_status st = lw_detokenize(v, ids, n, rm, unparse, buf, sizeof(buf), &k);
    CHECK_MSG(st == LW_OK && k == strlen(want) && !memcmp(buf, want, k), "detokenize: want \"%s\", got \"%.*s\"", want,
              (int)k, buf);
}

static void test_spm(const char *dir) {
    char path[512];
    snprintf(path, sizeof(path), "%s/tok-spm.gguf", dir);
    make_spm();
    spec s = {"llama", NULL, spm_tokens, 265, spm_scores, spm_types, NULL, 0, 0};
    CHECK(write_vocab(path, &s));
    lw_source *src;
    lw_gguf *g;
    lw_vocab *v;
    CHECK(open_vocab(path, NULL, &src, &g, &v) == LW_OK);
    if (!v || lw_vocab_n_tokens(v) != 265) {
        close_vocab(src, g, v);
        return;
    }
    CHECK(lw_vocab_get_type(v) == LW_VOCAB_SPM);
    CHECK(lw_vocab_special(v, LW_TOKEN_BOS) == 1 && lw_vocab_special(v, LW_TOKEN_EOS) == 2); /* SPM defaults */
    CHECK(lw_vocab_special(v, LW_TOKEN_NL) == 3 + '\n');
    CHECK(lw_vocab_is_eog(v, 2) && !lw_vocab_is_eog(v, 1));
    CHECK(lw_vocab_find(v, "ab", 2) == 262 && lw_vocab_find(v, "</s>", 4) == 2 && lw_vocab_find(v, "abc", 3) == -1);
    CHECK(lw_vocab_find(v, "<0x41>", 6) == 3 + 0x41);
    /* " ab" -> [▁ a b]; best pair "ab" (-0.5) then "▁ab" (-0.1) */
    EXPECT_IDS(v, "ab", 0, 0, 264);
    EXPECT_IDS(v, "ab", 1, 0, 1, 264);
    /* "c" has no token: byte fallback <0x63> = 3 + 0x63 */
    EXPECT_IDS(v, "abc", 0, 0, 264, 3 + 0x63);
    /* "▁é": no merge; é goes out as its two bytes */
    EXPECT_IDS(v, "\xc3\xa9", 0, 0, 259, 3 + 0xC3, 3 + 0xA9);
    /* "<s>" is a control token: only with parse_special; the text after it gets the prefix space again */
    EXPECT_IDS(v, "<s>a", 0, 1, 1, 263);
    EXPECT_IDS(v, "<s>a", 0, 0, 259, 3 + '<', 3 + 's', 3 + '>', 260);
    /* spaces: " a" -> "▁▁a" -> ▁ + ▁a */
    EXPECT_IDS(v, " a", 0, 0, 259, 263);
    EXPECT_IDS(v, "", 0, 0, );
    /* cap contract */
    int32_t one[1];
    size_t n = 0;
    CHECK(lw_tokenize(v, "abc", 3, 0, 0, one, 1, &n) == LW_ERR_TOO_LARGE && n == 2 && one[0] == 264);

    /* detokenize: the prefix space goes unless a BOS was removed first */
    const int32_t ids1[] = {264}, ids2[] = {1, 264}, ids3[] = {3 + 0xC3, 3 + 0xA9, 260};
    expect_detok(v, ids1, 1, 0, 0, "ab");
    expect_detok(v, ids2, 2, 1, 0, " ab");
    expect_detok(v, ids2, 2, 0, 0, " ab");
    expect_detok(v, ids2, 2, 0, 1, "<s> ab");
    expect_detok(v, ids3, 3, 0, 0, "\xc3\xa9" "a");
    char buf[8];
    size_t k = 0;
    CHECK(lw_token_to_piece(v, 1, 0, 0, buf, sizeof(buf), &k) == LW_OK && k == 0);
    CHECK(lw_token_to_piece(v, 1, 1, 0, buf, sizeof(buf), &k) == LW_OK && k == 3 && !memcmp(buf, "<s>", 3));
    CHECK(lw_token_to_piece(v, 264, 0, 1, buf, sizeof(buf), &k) == LW_OK && k == 2 && !memcmp(buf, "ab", 2));
    CHECK(lw_token_to_piece(v, 264, 0, 0, buf, 2, &k) == LW_ERR_TOO_LARGE && k == 3);
    CHECK(lw_token_to_piece(v, 265, 0, 0, buf, sizeof(buf), &k) == LW_ERR_INVALID_ARG);

    /* streaming: é split over two byte tokens is held back, then emitted whole; a broken sequence becomes
     * U+FFFD; a dangling lead byte is flushed as U+FFFD */
    lw_detok_stream ds;
    lw_detok_stream_init(&ds, v, 0, 0);
    char out[256];
    size_t cap = lw_detok_stream_max_out(&ds);
    CHECK(cap <= sizeof(out));
    CHECK(lw_detok_stream_push(&ds, 3 + 0xC3, out, cap, &k) == LW_OK && k == 0);
    CHECK(lw_detok_stream_push(&ds, 3 + 0xA9, out, cap, &k) == LW_OK && k == 2 && !memcmp(out, "\xc3\xa9", 2));
    CHECK(lw_detok_stream_push(&ds, 3 + 0xE2, out, cap, &k) == LW_OK && k == 0);
    CHECK(lw_detok_stream_push(&ds, 260, out, cap, &k) == LW_OK && k == 4 && !memcmp(out, "\xef\xbf\xbd" "a", 4));
    CHECK(lw_detok_stream_push(&ds, 3 + 0xF0, out, cap, &k) == LW_OK && k == 0);
    CHECK(lw_detok_stream_flush(&ds, out, cap, &k) == LW_OK && k == 3 && !memcmp(out, "\xef\xbf\xbd", 3));
    CHECK(lw_detok_stream_push(&ds, 1, out, cap, &k) == LW_OK && k == 0); /* control: hidden */
    CHECK(lw_detok_stream_push(&ds, 264, out, 3, &k) == LW_ERR_TOO_LARGE);
    lw_detok_stream_init(&ds, v, 1, 1);
    CHECK(lw_detok_stream_push(&ds, 264, out, cap, &k) == LW_OK && k == 2 && !memcmp(out, "ab", 2)); /* stripped */
    CHECK(lw_detok_stream_push(&ds, 264, out, cap, &k) == LW_OK && k == 3 && !memcmp(out, " ab", 3));
    close_vocab(src, g, v);
    remove(path);
}

/* Byte-level BPE: ids 0..255 are the byte symbols in byte order, then 256 "he", 257 "ll", 258 "hell",
 * 259 "hello", 260 "Ġw"; merges by rank: "h e", "l l", "he ll", "hell o", "Ġ w". */
static char bpe_bytes[256][4];
static const char *bpe_tokens[261];

static void test_bpe(const char *dir) {
    char path[512];
    snprintf(path, sizeof(path), "%s/tok-bpe.gguf", dir);
    for (int b = 0; b < 256; b++) {
        bpe_bytes[b][lw__utf8_encode(lw__byte_to_ucp((uint8_t)b), bpe_bytes[b])] = 0;
        bpe_tokens[b] = bpe_bytes[b];
    }
    static const char *const words[] = {"he", "ll", "hell", "hello", "\xc4\xa0w"};
    for (int i = 0; i < 5; i++) bpe_tokens[256 + i] = words[i];
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"};
    spec s = {"gpt2", "gpt-2", bpe_tokens, 261, NULL, NULL, merges, 5, 0};
    CHECK(write_vocab(path, &s));
    lw_source *src;
    lw_gguf *g;
    lw_vocab *v;
    CHECK(open_vocab(path, NULL, &src, &g, &v) == LW_OK);
    if (!v || lw_vocab_n_tokens(v) != 261) {
        close_vocab(src, g, v);
        return;
    }
    /* "hello" merges fully: h e -> he; l l -> ll; he ll -> hell; hell o -> hello. " world" only gets Ġw. */
    EXPECT_IDS(v, "hello world", 0, 0, 259, 260, 'o', 'r', 'l', 'd');
    /* the pre-tokenizer keeps "hello" and "hellos" apart from punctuation: "hello!" -> hello, ! */
    EXPECT_IDS(v, "hello!", 0, 0, 259, '!');
    /* "ll" alone; "lll": rank of (l,l) at the left pair first -> ll, l */
    EXPECT_IDS(v, "lll", 0, 0, 257, 'l');
    /* a newline is the byte symbol 'Ċ' = id 10 */
    EXPECT_IDS(v, "\n", 0, 0, 10);
    CHECK(lw_vocab_special(v, LW_TOKEN_NL) == 10);
    /* invalid UTF-8: the byte becomes U+FFFD = EF BF BD, three byte symbols */
    EXPECT_IDS(v, "\xff", 0, 0, 0xEF, 0xBF, 0xBD);
    const int32_t ids[] = {259, 260, 'o', 'r', 'l', 'd', ' ', '?'};
    expect_detok(v, ids, 6, 0, 0, "hello world");
    expect_detok(v, ids, 8, 0, 0, "hello world?"); /* " ?" cleaned up: gpt-2 sets clean_spaces */
    close_vocab(src, g, v);
    remove(path);
}

/* ---------------------------------------------------------------------------------------------------------
 * Errors and allocation failures
 * ------------------------------------------------------------------------------------------------------- */

static long fail_after = -1; /* allocations left before failing; -1 = never */
static long n_allocs = 0;
static void *f_malloc(void *u, size_t n) {
    (void)u;
    n_allocs++;
    if (fail_after == 0) return NULL;
    if (fail_after > 0) fail_after--;
    return malloc(n);
}
static void *f_realloc(void *u, void *p, size_t n) {
    (void)u;
    n_allocs++;
    if (fail_after == 0) return NULL;
    if (fail_after > 0) fail_after--;
    return realloc(p, n);
}
static void f_free(void *u, void *p) {
    (void)u;
    free(p);
}

static void test_errors(const char *dir) {
    char path[512];
    snprintf(path, sizeof(path), "%s/tok-err.gguf", dir);
    lw_source *src;
    lw_gguf *g;
    lw_vocab *v;
    make_spm();
    struct {
        spec s;
        lw_status want;
    } cases[] = {
        {{NULL, NULL, spm_tokens, 265, spm_scores, spm_types, NULL, 0, 0}, LW_ERR_NOT_FOUND},  /* no model */
        {{"plamo2", NULL, spm_tokens, 265, spm_scores, spm_types, NULL, 0, 0}, LW_ERR_UNSUPPORTED},
        {{"gpt2", "gpt-2", spm_tokens, 265, NULL, NULL, NULL, 0, 0}, LW_ERR_NOT_FOUND},        /* no merges */
        {{"gpt2", "no-such-pre", spm_tokens, 265, NULL, NULL, (const char *const[]){"a b"}, 1, 0}, LW_ERR_UNSUPPORTED},
        {{"llama", NULL, spm_tokens, 265, spm_scores, spm_types, NULL, 0, 1}, LW_ERR_TRUNCATED}, /* short scores */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK(write_vocab(path, &cases[i].s));
        lw_status st = open_vocab(path, NULL, &src, &g, &v);
        CHECK_MSG(st == cases[i].want, "error case %zu: status %d, want %d (%s)", i, (int)st, (int)cases[i].want,
                  v ? lw_vocab_error(v) : "");
        CHECK(v && lw_vocab_error(v)[0]);
        close_vocab(src, g, v);
    }

    /* every allocation of load and tokenize may fail: NOMEM, no leak, no crash (ASAN checks the rest) */
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"};
    spec bpe = {"gpt2", "deepseek-llm", bpe_tokens, 261, NULL, NULL, merges, 5, 0}; /* regex engine stages */
    CHECK(write_vocab(path, &bpe));
    lw_allocator fa = {f_malloc, f_realloc, f_free, NULL};
    fail_after = -1, n_allocs = 0;
    CHECK(open_vocab(path, &fa, &src, &g, &v) == LW_OK);
    long total = n_allocs;
    close_vocab(src, g, v);
    int load_ok = 1;
    for (long k = 0; k < total; k++) {
        fail_after = k;
        lw_status st = open_vocab(path, &fa, &src, &g, &v);
        load_ok &= st == LW_ERR_NOMEM;
        close_vocab(src, g, v);
    }
    CHECK_MSG(load_ok, "a failed allocation during load was not reported as LW_ERR_NOMEM");
    fail_after = -1;
    CHECK(open_vocab(path, &fa, &src, &g, &v) == LW_OK);
    const char *text = "hello world 123 \xe4\xb8\xad\xe6\x96\x87 \xff!";
    int32_t ids[256];
    size_t n = 0;
    n_allocs = 0;
    CHECK(lw_tokenize(v, text, strlen(text), 1, 1, ids, 256, &n) == LW_OK);
    long tok_allocs = n_allocs;
    CHECK(tok_allocs > 0);
    int tok_ok = 1;
    for (long k = 0; k < tok_allocs; k++) {
        fail_after = k;
        tok_ok &= lw_tokenize(v, text, strlen(text), 1, 1, ids, 256, &n) == LW_ERR_NOMEM;
    }
    fail_after = -1;
    CHECK_MSG(tok_ok, "a failed allocation during tokenize was not reported as LW_ERR_NOMEM");
    close_vocab(src, g, v);
    remove(path);

    CHECK(lw_vocab_load(NULL, NULL, NULL) == LW_ERR_INVALID_ARG);
    CHECK(lw_vocab_load(NULL, NULL, &v) == LW_ERR_INVALID_ARG);
    lw_vocab_free(v);
}

int main(void) {
    const char *dir = test_tmp_dir();
    mkdir(dir, 0755);
    test_unicode();
    test_utf8();
    test_regex();
    test_spm(dir);
    test_bpe(dir);
    test_errors(dir);
    return test_summary("test-tokenizer");
}
