/* libFuzzer target: tokenizes and detokenizes arbitrary bytes (invalid UTF-8 included) with real
 * vocabularies, and runs every pre-tokenizer regex set over them.
 *
 * Vocabularies come from $LW_SHARED/vocab (default ../shared/vocab); when none is there, a small byte-level
 * BPE vocabulary is written with the GGUF writer to $TMPDIR and used instead. The first input byte picks
 * the vocabulary, the flags and the regex set; the rest is the text.
 *
 * A first byte of 0xFF switches to the second mode: the rest is a GGUF file (hostile metadata) that is
 * loaded as a vocabulary and, when it loads, used to tokenize and detokenize a fixed text.
 *
 * Invariants checked (a failure aborts, which libFuzzer reports):
 *   - lw_tokenize succeeds, every id is in range, and a second call gives the same ids;
 *   - the pre-tokenizer pieces of every regex set cover the text exactly;
 *   - streaming detokenization emits valid UTF-8, and equals the concatenated pieces when those are valid;
 *   - for byte-level BPE (gpt-2) and llama SPM without special parsing, valid UTF-8 text round-trips
 *     (for SPM, text without U+2581, which SPM detokenizes as a space). */
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCABS 8

static struct {
    lw_source *src;
    lw_gguf *g;
    lw_vocab *v;
    int lossless; /* valid UTF-8 must round-trip when parse_special is off */
} vocabs[MAX_VOCABS];
static int n_vocabs = -1;
static lw__pretok pretoks[LW_PRE_COUNT];
static int pretok_ok[LW_PRE_COUNT];
static lw_allocator libc_alloc; /* internal helpers need an explicit allocator */

static void add_vocab(const char *path, int lossless) {
    char err[256];
    int i = n_vocabs;
    if (i >= MAX_VOCABS || lw_source_open_file(path, NULL, &vocabs[i].src, err, sizeof(err)) != LW_OK) return;
    if (lw_gguf_open(vocabs[i].src, NULL, &vocabs[i].g) != LW_OK || lw_vocab_load(vocabs[i].g, NULL, &vocabs[i].v) != LW_OK) {
        fprintf(stderr, "fuzz-tokenizer: cannot load %s\n", path);
        abort();
    }
    vocabs[i].lossless = lossless;
    n_vocabs++;
}

/* A byte-level BPE vocabulary: the 256 byte symbols, a few merges. */
static void write_small_vocab(const char *path) {
    lw_gguf_writer *w = NULL;
    if (lw_gguf_writer_new(NULL, &w) != LW_OK) abort();
    static char texts[256 + 8][8];
    const char *tok[256 + 8];
    int32_t types[256 + 8];
    size_t n = 0;
    for (int b = 0; b < 256; b++, n++) {
        texts[n][lw__utf8_encode(lw__byte_to_ucp((uint8_t)b), texts[n])] = 0;
        tok[n] = texts[n];
        types[n] = 1;
    }
    static const char *const extra[] = {"he", "ll", "hell", "hello", "\xc4\xa0w", "<|endoftext|>"};
    for (size_t e = 0; e < 6; e++, n++) tok[n] = extra[e], types[n] = e == 5 ? 3 : 1;
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"};
    lw_gguf_str toks[256 + 8], mg[5];
    for (size_t i = 0; i < n; i++) toks[i] = (lw_gguf_str){strlen(tok[i]), tok[i]};
    for (size_t i = 0; i < 5; i++) mg[i] = (lw_gguf_str){strlen(merges[i]), merges[i]};
    if (lw_gguf_writer_set_str(w, "general.architecture", "gpt2") != LW_OK ||
        lw_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2") != LW_OK ||
        lw_gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2") != LW_OK ||
        lw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", LW_GGUF_STRING, n, toks) != LW_OK ||
        lw_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LW_GGUF_INT32, n, types) != LW_OK ||
        lw_gguf_writer_set_arr(w, "tokenizer.ggml.merges", LW_GGUF_STRING, 5, mg) != LW_OK ||
        lw_gguf_writer_write_file(w, path, 0) != LW_OK)
        abort();
    lw_gguf_writer_free(w);
}

static void init(void) {
    n_vocabs = 0;
    const char *shared = getenv("LW_SHARED");
    char path[1024];
    static const struct {
        const char *name;
        int lossless;
    } files[] = {{"gpt-2", 1}, {"llama-spm", 1}, {"phi-3", 0}, {"starcoder", 1}, {"deepseek-llm", 1}, {"bert-bge", 0}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/vocab/ggml-vocab-%s.gguf", shared && *shared ? shared : "../shared", files[i].name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fclose(f);
        add_vocab(path, files[i].lossless);
    }
    if (n_vocabs == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof(path), "%s/fuzz-tokenizer-vocab.gguf", tmp && *tmp ? tmp : "/tmp");
        write_small_vocab(path);
        add_vocab(path, 1);
    }
    char err[LW_ERRMSG_SIZE];
    libc_alloc = lw__allocator_or_default(NULL);
    for (int s = 0; s < LW_PRE_COUNT; s++)
        pretok_ok[s] = lw__pretok_init(&pretoks[s], (lw__pre_set)s, &libc_alloc, err) == LW_OK;
}

static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        size_t l = b < 0x80 ? 1 : (b >= 0xC2 && b <= 0xDF) ? 2 : (b >= 0xE0 && b <= 0xEF) ? 3 : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t j = 1; j < l; j++) {
            uint8_t lo = 0x80, hi = 0xBF;
            if (j == 1 && b == 0xE0) lo = 0xA0;
            if (j == 1 && b == 0xED) hi = 0x9F;
            if (j == 1 && b == 0xF0) lo = 0x90;
            if (j == 1 && b == 0xF4) hi = 0x8F;
            if (s[i + j] < lo || s[i + j] > hi) return 0;
        }
        i += l;
    }
    return 1;
}

#define CHECKF(c)                                                                                            \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "fuzz-tokenizer: %s:%d: %s\n", __FILE__, __LINE__, #c);                          \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

/* Mode 2: an arbitrary GGUF as vocabulary. Loading may fail (with a message); a loaded one must work. */
static void fuzz_vocab_file(const uint8_t *data, size_t size) {
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    lw_vocab *v = NULL;
    if (lw_source_from_memory(data, size, NULL, &src) != LW_OK) return;
    if (lw_gguf_open(src, NULL, &g) == LW_OK) {
        lw_status st = lw_vocab_load(g, NULL, &v);
        CHECKF(v != NULL && (st == LW_OK || lw_vocab_error(v)[0]));
        if (st == LW_OK) {
            static const char text[] = "Hello world! <s> 123 \xe4\xb8\xad \xf0\x9f\xa6\x99 \xff it's\n\n";
            int32_t ids[256];
            size_t n = 0;
            lw_status ts = lw_tokenize(v, text, sizeof(text) - 1, 1, 1, ids, 256, &n);
            CHECKF(ts == LW_OK || ts == LW_ERR_UNSUPPORTED);
            uint32_t nv = lw_vocab_n_tokens(v);
            for (size_t i = 0; ts == LW_OK && i < n; i++) CHECKF(ids[i] >= 0 && (uint32_t)ids[i] < nv);
            static char out[1 << 16];
            size_t k = 0;
            if (ts == LW_OK) {
                lw_status ds = lw_detokenize(v, ids, n, 1, 1, out, sizeof(out), &k);
                CHECKF(ds == LW_OK || ds == LW_ERR_TOO_LARGE);
            }
            for (uint32_t id = 0; id < nv && id < 512; id++) {
                lw_status ps = lw_token_to_piece(v, (int32_t)id, 1, 1, out, sizeof(out), &k);
                CHECKF(ps == LW_OK || ps == LW_ERR_TOO_LARGE);
            }
        }
    }
    lw_vocab_free(v);
    lw_gguf_close(g);
    lw_source_close(src);
}

/* libFuzzer calls this once before the first input: loading the real vocabularies (150k-token ones among
 * them) takes seconds under ASAN, which counted against the first input's -timeout. The replay calls no
 * initializer: the first input loads them then. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (n_vocabs < 0) init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_vocabs < 0) init();
    if (size >= 1 && data[0] == 0xFF) {
        if (size <= (1u << 20)) fuzz_vocab_file(data + 1, size - 1);
        return 0;
    }
    if (size < 1 || size > 4096) return 0;
    uint8_t sel = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int vi = sel % n_vocabs, add_special = (sel >> 3) & 1, parse_special = (sel >> 4) & 1;
    lw_vocab *v = vocabs[vi].v;
    uint32_t n_vocab = lw_vocab_n_tokens(v);

    /* tokenize twice (the second time into a buffer one too small when possible) */
    size_t cap = 3 * len + 8, n = 0, n2 = 0; /* an invalid byte becomes U+FFFD: 3 byte tokens */
    int32_t *ids = malloc(cap * sizeof(int32_t)), *ids2 = malloc(cap * sizeof(int32_t));
    CHECKF(ids && ids2);
    CHECKF(lw_tokenize(v, text, len, add_special, parse_special, ids, cap, &n) == LW_OK);
    for (size_t i = 0; i < n; i++) CHECKF(ids[i] >= 0 && (uint32_t)ids[i] < n_vocab);
    if (n > 0) {
        CHECKF(lw_tokenize(v, text, len, add_special, parse_special, ids2, n - 1, &n2) == LW_ERR_TOO_LARGE && n2 == n);
        CHECKF(!memcmp(ids, ids2, (n - 1) * sizeof(int32_t)));
    }

    /* pieces, one-shot and streamed */
    size_t pcap = (size_t)lw_vocab_max_piece_len(v) * (n + 1) + 16, pn = 0, sn = 0, dn = 0;
    char *pieces = malloc(pcap), *streamed = malloc(3 * pcap + 16), *detok = malloc(pcap);
    lw_detok_stream ds;
    lw_detok_stream_init(&ds, v, parse_special, 0);
    size_t scap = lw_detok_stream_max_out(&ds);
    char *chunk = malloc(scap);
    CHECKF(pieces && streamed && detok && chunk);
    for (size_t i = 0; i < n; i++) {
        size_t k = 0, c = 0;
        CHECKF(lw_token_to_piece(v, ids[i], parse_special, 0, pieces + pn, pcap - pn, &k) == LW_OK);
        pn += k;
        CHECKF(lw_detok_stream_push(&ds, ids[i], chunk, scap, &c) == LW_OK);
        memcpy(streamed + sn, chunk, c);
        sn += c;
    }
    size_t c = 0;
    CHECKF(lw_detok_stream_flush(&ds, chunk, scap, &c) == LW_OK);
    memcpy(streamed + sn, chunk, c);
    sn += c;
    CHECKF(valid_utf8((const uint8_t *)streamed, sn));
    if (valid_utf8((const uint8_t *)pieces, pn)) CHECKF(sn == pn && !memcmp(streamed, pieces, pn));
    CHECKF(lw_detokenize(v, ids, n, 0, parse_special, detok, pcap, &dn) == LW_OK);
    if (vocabs[vi].lossless && !parse_special && !add_special && valid_utf8((const uint8_t *)text, len) &&
        !memchr(text, 0, len)) {
        /* SPM reads U+2581 in the text as a space on the way back, as llama.cpp does */
        int has_2581 = 0;
        for (size_t i = 0; i + 3 <= len && !has_2581; i++) has_2581 = !memcmp(text + i, "\xe2\x96\x81", 3);
        if (lw_vocab_get_type(v) != LW_VOCAB_SPM) CHECKF(pn == len && !memcmp(pieces, text, len));
        else if (!has_2581) CHECKF(dn == len && !memcmp(detok, text, len));
    }

    /* a regex set's pieces cover the text: one set per input (the sets of (sel >> 5) + 7k, k = the text's
     * length mod 4, reach all of them), not four: the regex VM under coverage hooks was ~half of the time of
     * an input, and the tokenizer above already runs its vocabulary's own set */
    const int set = ((sel >> 5) + 7 * (int)(len & 3)) % LW_PRE_COUNT;
    if (pretok_ok[set]) {
        uint32_t *cpts = malloc((len + 1) * sizeof(uint32_t));
        uint16_t *flags = malloc((len + 1) * sizeof(uint16_t));
        CHECKF(cpts && flags);
        size_t nc = 0, off = 0;
        while (off < len) {
            cpts[nc] = lw__utf8_decode(text, len, &off);
            flags[nc] = lw__ucp_flags(cpts[nc]);
            nc++;
        }
        lw__pretok_scratch sc;
        memset(&sc, 0, sizeof(sc));
        CHECKF(lw__pretok_split(&pretoks[set], cpts, flags, nc, &sc, &libc_alloc) == LW_OK);
        size_t total = 0;
        for (size_t i = 0; i < sc.lens.n; i++) {
            CHECKF(sc.lens.v[i] > 0);
            total += sc.lens.v[i];
        }
        CHECKF(total == nc);
        lw__pretok_scratch_free(&sc, &libc_alloc);
        free(cpts);
        free(flags);
    }
    free(ids);
    free(ids2);
    free(pieces);
    free(streamed);
    free(detok);
    free(chunk);
    return 0;
}
