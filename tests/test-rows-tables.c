/* The CPU engine's row store beyond token embeddings:
 *  - Gemma 4's per-layer token embeddings (lw_model_params.rows_per_layer) on a gemma-4-e2b-shape tiny synth
 *    (tiny-gemma4, 32,000 ids) with 1/8 of the rows in memory: 1,000 greedy tokens identical to the resident
 *    table, the table out of the weight allocation, nothing allocated while decoding, a prompt longer than
 *    the slots;
 *  - MoE experts (lw_model_params.rows_experts) on tiny-qwen3moe and tiny-gemma4-moe (fused gate|up) with
 *    half the experts of each layer in memory: 1,000 greedy tokens identical, nothing allocated while
 *    decoding, a 300-token prompt whose steps route to more experts than the slots (rounds), one slot;
 *  - the fallbacks said per table (a directory that cannot exist, a model without the table, token_embd tied
 *    on the same model, all rows asked for); allocation failures at load and context creation clean.
 * Prints memory saved, hit rates and tokens/s both ways (never asserted). Synthesized with the built-in
 * vocabulary: needs nothing from ../shared. */
#include "llamaweb.h"
#include "alloc-counter.h"
#include "rows-greedy.h"
#include "synth/synth.h"
#include "test.h"

#include <sys/stat.h>
#include <time.h>

#define N_GEN   1000
#define N_VOCAB 32000

static char rows_dir[600]; /* $LW_TMP/test-rows-tables */

/* What a run asks of the row store. */
typedef struct rows_ask {
    uint32_t embd;      /* lw_model_params.rows_embd      */
    uint32_t per_layer; /* lw_model_params.rows_per_layer */
    const char *dir;    /* lw_model_params.rows_dir       */
    uint32_t experts;   /* lw_model_params.rows_experts   */
} rows_ask;

/* The greedy run's results. */
typedef struct run_out {
    lw_status st;                        /* first failure (LW_OK)                       */
    int32_t toks[N_GEN];                 /* generated ids                               */
    int n;                               /* how many                                    */
    double tps;                          /* generated tokens per second                 */
    lw_rows_stats rs[LW_ROWS_N_TABLES];  /* each table's row cache counters after it    */
    uint64_t weights;                    /* the model's weight bytes                    */
    uint64_t ctx_bytes;                  /* the context's arena                         */
    lw_status rows_st;                   /* lw_model_rows_status                        */
    char rows_msg[800];                  /* its message                                 */
    lw_status tab_st[LW_ROWS_N_TABLES];  /* lw_model_rows_table_status                  */
    char tab_msg[LW_ROWS_N_TABLES][256]; /* its messages                                */
    long decode_allocs;                  /* allocator calls while decoding              */
} run_out;

/* Loads path with what `ask` says and decodes prompt then n_gen greedy tokens. */
static void run(const char *path, const rows_ask *ask, const int32_t *prompt, int n_prompt, int n_gen,
                run_out *o) {
    memset(o, 0, sizeof(*o));
    alloc_counter ac = {0, 0, 0, 0};
    lw_allocator a = alloc_counter_hooks(&ac);
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    mp.no_vocab = 1;
    mp.rows_embd = ask->embd;
    mp.rows_per_layer = ask->per_layer;
    mp.rows_dir = ask->dir;
    mp.rows_experts = ask->experts;
    lw_model *m = NULL;
    lw_context *c = NULL;
    if ((o->st = lw_model_load_file(path, &mp, &m)) != LW_OK) {
        fprintf(stderr, "load: %s\n", lw_model_error(m));
        goto done;
    }
    const char *msg;
    o->rows_st = lw_model_rows_status(m, &msg);
    snprintf(o->rows_msg, sizeof o->rows_msg, "%s", msg);
    for (int t = 0; t < LW_ROWS_N_TABLES; t++) {
        o->tab_st[t] = lw_model_rows_table_status(m, (lw_rows_table)t, &msg);
        snprintf(o->tab_msg[t], sizeof o->tab_msg[t], "%s", msg);
    }
    o->weights = lw_model_weight_bytes(m);
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen + 8);
    cp.n_batch = 512;
    cp.n_threads = 2;
    if ((o->st = lw_context_create(m, &cp, &c)) != LW_OK) {
        fprintf(stderr, "context: %s\n", lw_context_error(c));
        goto done;
    }
    o->ctx_bytes = lw_context_bytes(c);
    if ((o->st = rows_greedy(c, &ac, prompt, n_prompt, n_gen, o->toks, &o->n, &o->tps, &o->decode_allocs)) != LW_OK)
        goto done;
    for (int t = 0; t < LW_ROWS_N_TABLES; t++) lw_context_rows_table_stats(c, (lw_rows_table)t, &o->rs[t]);
done:
    lw_context_free(c);
    lw_model_free(m);
    CHECK_MSG(ac.live == 0, "%ld blocks leaked", ac.live);
}

static void report(const char *what, const run_out *o) {
    static const char *const names[LW_ROWS_N_TABLES] = {"token_embd", "per_layer", "experts"};
    printf("  %-30s %8.1f t/s  weights %8.1f KiB", what, o->tps, (double)o->weights / 1024.0);
    for (int t = 0; t < LW_ROWS_N_TABLES; t++) {
        const lw_rows_stats *rs = &o->rs[t];
        if (!rs->active) continue;
        const double hit = rs->lookups ? 100.0 * (double)rs->hits / (double)rs->lookups : 100.0;
        printf("\n    %s rows %u/%u (%.1f of %.1f KiB): %llu lookups, %.2f %% hits, %llu misses, %llu warm, "
               "%.1f KiB read",
               names[t], rs->n_slots, rs->n_rows, (double)rs->n_slots * (double)rs->row_bytes / 1024.0,
               (double)rs->n_rows * (double)rs->row_bytes / 1024.0, (unsigned long long)rs->lookups, hit,
               (unsigned long long)rs->misses, (unsigned long long)rs->warm_loads,
               (double)rs->bytes_read / 1024.0);
    }
    printf("\n");
}

static int same_tokens(const run_out *a, const run_out *b) {
    return rows_same_tokens(a->toks, a->n, b->toks, b->n);
}

static run_out base, with_rows, other; /* big: static */
static int32_t prompt[700];

static void make_model(const char *preset, const char *type, const char *name, char *path, size_t cap) {
    char err[LW_ERRMSG_SIZE];
    snprintf(path, cap, "%s/%s", test_tmp_dir(), name);
    lw__synth_params sp = {
        .preset = preset, .type = type, .vocab_path = "builtin", .n_vocab = N_VOCAB, .seed = 11};
    const lw_status st = lw__synth_write(&sp, path, NULL, NULL, err);
    CHECK_MSG(st == LW_OK, "synth %s: %s", preset, err);
    if (st != LW_OK) exit(test_summary("test-rows-tables"));
}

/* Gemma 4's per-layer table, 1/8 resident, against the resident table. */
static void per_layer(const char *type) {
    char path[700];
    char name[64];
    snprintf(name, sizeof name, "rows-tiny-gemma4-%s.gguf", type);
    make_model("tiny-gemma4", type, name, path, sizeof path);
    const uint32_t eighth = N_VOCAB / 8;
    printf("tiny-gemma4 %s: per_layer_token_embd %u of %u rows resident, prompt 300, %d greedy tokens\n",
           type, eighth, N_VOCAB, N_GEN);
    const rows_ask none = {0, 0, rows_dir, 0}, pl = {0, eighth, rows_dir, 0};
    run(path, &none, prompt, 300, N_GEN, &base);
    CHECK(base.st == LW_OK && base.n == N_GEN);
    report("resident table", &base);
    run(path, &pl, prompt, 300, N_GEN, &with_rows);
    const lw_rows_stats *rs = &with_rows.rs[LW_ROWS_PER_LAYER];
    CHECK_MSG(with_rows.st == LW_OK && with_rows.rows_st == LW_OK, "%s", with_rows.rows_msg);
    CHECK(rs->active && rs->n_slots == eighth && rs->n_rows == N_VOCAB && !with_rows.rs[0].active);
    printf("  %s\n", with_rows.rows_msg);
    report("row store (1/8, warmed)", &with_rows);
    CHECK_MSG(same_tokens(&base, &with_rows), "tiny-gemma4 %s: tokens differ", type);
    CHECK(with_rows.decode_allocs == 0);
    const uint64_t table = (uint64_t)N_VOCAB * rs->row_bytes, cache = (uint64_t)eighth * rs->row_bytes;
    CHECK(base.weights - with_rows.weights >= table);
    printf(
        "  memory: weights %.1f KiB less (the table), the cache holds %.1f KiB: %.1f KiB saved per context\n",
        (double)(base.weights - with_rows.weights) / 1024.0, (double)cache / 1024.0,
        (double)(table - cache) / 1024.0);
    CHECK(rs->lookups == (uint64_t)300 + N_GEN - 1);
    CHECK(strstr(with_rows.rows_msg, "per_layer_token_embd: ") == with_rows.rows_msg);
    CHECK(with_rows.tab_st[LW_ROWS_PER_LAYER] == LW_OK &&
          !strcmp(with_rows.tab_msg[LW_ROWS_PER_LAYER], with_rows.rows_msg));

    /* a 700-token prompt in one step: more distinct ids than the 256 slots, gathered in several lookups */
    const rows_ask small = {0, 256, rows_dir, 0};
    run(path, &none, prompt, 700, 64, &base);
    run(path, &small, prompt, 700, 64, &other);
    CHECK(other.st == LW_OK && same_tokens(&base, &other));
    report("row store, prompt 700 > 256", &other);
}

/* The experts, half of each layer's resident, against all of them. */
static void experts(const char *preset, const char *type, uint32_t n_expert, uint32_t n_layer_moe) {
    char path[700];
    char name[96];
    snprintf(name, sizeof name, "rows-%s-%s.gguf", preset, type);
    make_model(preset, type, name, path, sizeof path);
    const uint32_t half = n_expert / 2;
    printf("%s %s: %u of %u experts per layer resident, prompt 300, %d greedy tokens\n", preset, type, half,
           n_expert, N_GEN);
    const rows_ask none = {0, 0, rows_dir, 0}, ex = {0, 0, rows_dir, half};
    run(path, &none, prompt, 300, N_GEN, &base);
    CHECK(base.st == LW_OK && base.n == N_GEN);
    report("resident experts", &base);
    run(path, &ex, prompt, 300, N_GEN, &with_rows);
    const lw_rows_stats *rs = &with_rows.rs[LW_ROWS_EXPERTS];
    CHECK_MSG(with_rows.st == LW_OK && with_rows.rows_st == LW_OK, "%s", with_rows.rows_msg);
    printf("  %s\n", with_rows.rows_msg);
    report("row store (1/2 of the experts)", &with_rows);
    CHECK_MSG(same_tokens(&base, &with_rows), "%s %s: tokens differ", preset, type);
    CHECK(with_rows.decode_allocs == 0);
    /* a cache per layer and tensor (gate|up fused: 2, else 3), half the experts each */
    const uint32_t n_tensors = strstr(preset, "gemma4") ? 2 : 3;
    CHECK(rs->active && rs->n_rows == n_expert * n_layer_moe * n_tensors && rs->n_slots * 2 == rs->n_rows);
    CHECK(strstr(with_rows.rows_msg, "experts: ") == with_rows.rows_msg);
    const uint64_t table = (uint64_t)rs->n_rows * rs->row_bytes,
                   cache = (uint64_t)rs->n_slots * rs->row_bytes;
    CHECK(base.weights - with_rows.weights >= table);
    printf("  memory: weights %.1f KiB less (the experts), the caches hold %.1f KiB: %.1f KiB saved per "
           "context\n",
           (double)(base.weights - with_rows.weights) / 1024.0, (double)cache / 1024.0,
           (double)(table - cache) / 1024.0);

    /* one slot per tensor: every step's experts go one round each */
    const rows_ask one = {0, 0, rows_dir, 1};
    run(path, &none, prompt, 300, 64, &base);
    run(path, &one, prompt, 300, 64, &other);
    CHECK(other.st == LW_OK && same_tokens(&base, &other));
    report("row store, 1 expert per layer", &other);
}

int main(void) {
    snprintf(rows_dir, sizeof rows_dir, "%s/test-rows-tables", test_tmp_dir());
    mkdir(test_tmp_dir(), 0777);
    uint32_t x = 7;
    for (int i = 0; i < 700; i++) {
        x = x * 1664525u + 1013904223u;
        prompt[i] = (int32_t)((x >> 8) % N_VOCAB);
    }

    per_layer("q8_0");
    per_layer("q4_k_m");

    experts("tiny-qwen3moe", "q4_k_m", 16, 2);
    experts("tiny-qwen3moe", "q8_0", 16, 2);
    experts("tiny-gemma4-moe", "q4_k_m", 16, 3);

    char g4[700], moe[700];
    make_model("tiny-gemma4", "q8_0", "rows-tiny-gemma4-q8_0.gguf", g4, sizeof g4);
    const uint32_t eighth = N_VOCAB / 8;

    /* fallbacks, said once per table through lw_model_rows_status / lw_model_rows_table_status */
    {
        const rows_ask none = {0, 0, rows_dir, 0}, bad = {0, eighth, "/dev/null/rows", 0},
                       both = {eighth, eighth, rows_dir, 0};
        run(g4, &none, prompt, 20, 32, &base);
        run(g4, &bad, prompt, 20, 32, &other);
        printf("  bad directory: %s: %s\n", lw_status_str(other.rows_st), other.rows_msg);
        CHECK(other.st == LW_OK && other.rows_st == LW_ERR_IO && !other.rs[LW_ROWS_PER_LAYER].active);
        CHECK(strstr(other.rows_msg, "per_layer_token_embd resident") != NULL);
        CHECK(other.weights == base.weights && same_tokens(&base, &other));

        /* token_embd is the tied output projection on gemma4: it stays resident, the per-layer table not */
        run(g4, &both, prompt, 20, 32, &other);
        printf("  both asked: %s: %s\n", lw_status_str(other.rows_st), other.rows_msg);
        CHECK(other.st == LW_OK && other.rows_st == LW_ERR_UNSUPPORTED);
        CHECK(other.tab_st[LW_ROWS_TOKEN_EMBD] == LW_ERR_UNSUPPORTED &&
              other.tab_st[LW_ROWS_PER_LAYER] == LW_OK);
        CHECK(strstr(other.tab_msg[LW_ROWS_TOKEN_EMBD], "token_embd resident") != NULL);
        CHECK(strstr(other.rows_msg, "; per_layer_token_embd: ") != NULL);
        CHECK(!other.rs[LW_ROWS_TOKEN_EMBD].active && other.rs[LW_ROWS_PER_LAYER].active);
        CHECK(same_tokens(&base, &other));

        /* more rows than the table: nothing to store */
        const rows_ask all = {0, N_VOCAB, rows_dir, 0};
        run(g4, &all, prompt, 20, 32, &other);
        CHECK(other.st == LW_OK && other.rows_st == LW_OK && !other.rs[LW_ROWS_PER_LAYER].active);
        CHECK(other.weights == base.weights && strstr(other.rows_msg, "whole table") != NULL);

        /* a model without the table */
        make_model("tiny-qwen3moe", "q8_0", "rows-tiny-qwen3moe-q8_0.gguf", moe, sizeof moe);
        run(moe, &(rows_ask){0, 64, rows_dir, 0}, prompt, 20, 32, &other);
        printf("  no table: %s: %s\n", lw_status_str(other.rows_st), other.rows_msg);
        CHECK(other.st == LW_OK && other.rows_st == LW_ERR_NOT_FOUND);
        CHECK(strstr(other.rows_msg, "no such table") != NULL);

        /* experts: a bad directory, all of them asked for, a model without experts */
        run(moe, &(rows_ask){0, 0, rows_dir, 0}, prompt, 20, 32, &base);
        run(moe, &(rows_ask){0, 0, "/dev/null/rows", 8}, prompt, 20, 32, &other);
        printf("  experts, bad directory: %s: %s\n", lw_status_str(other.rows_st), other.rows_msg);
        CHECK(other.st == LW_OK && other.tab_st[LW_ROWS_EXPERTS] == LW_ERR_IO &&
              !other.rs[LW_ROWS_EXPERTS].active);
        CHECK(strstr(other.rows_msg, "experts resident") != NULL);
        CHECK(other.weights == base.weights && same_tokens(&base, &other));
        run(moe, &(rows_ask){0, 0, rows_dir, 16}, prompt, 20, 32, &other);
        CHECK(other.st == LW_OK && other.rows_st == LW_OK && !other.rs[LW_ROWS_EXPERTS].active);
        CHECK(other.weights == base.weights && strstr(other.rows_msg, "resident, no row files") != NULL);
        run(g4, &(rows_ask){0, 0, rows_dir, 4}, prompt, 20, 32, &other);
        printf("  no experts: %s: %s\n", lw_status_str(other.rows_st), other.rows_msg);
        CHECK(other.st == LW_OK && other.tab_st[LW_ROWS_EXPERTS] == LW_ERR_NOT_FOUND);
    }

    /* failing the k-th allocation of load + context creation with the store: clean, nothing leaked */
    for (int pass = 0; pass < 2; pass++) {
        int injected = 0;
        for (long k = 1; k < 4000; k++) {
            alloc_counter ac = {0, 0, k, 0};
            lw_allocator a = alloc_counter_hooks(&ac);
            lw_model_params mp = lw_model_default_params();
            mp.alloc = &a;
            mp.no_vocab = 1;
            const int moe_run = pass == 1; /* the experts' store on tiny-qwen3moe */
            mp.rows_per_layer = moe_run ? 0 : 512;
            mp.rows_experts = moe_run ? 8 : 0;
            mp.rows_dir = rows_dir;
            lw_model *m = NULL;
            lw_context *c = NULL;
            lw_status st = lw_model_load_file(moe_run ? moe : g4, &mp, &m);
            lw_status rst = m ? lw_model_rows_status(m, NULL) : LW_OK;
            if (st == LW_OK) {
                lw_context_params cp = lw_context_default_params();
                cp.n_ctx = 64;
                cp.n_threads = 1;
                st = lw_context_create(m, &cp, &c);
            }
            lw_context_free(c);
            lw_model_free(m);
            CHECK_MSG(ac.live == 0, "fail at %ld: %ld leaked", k, ac.live);
            if (!ac.failed) break;
            injected++;
            /* the store's own allocations fail into the fallback (reported), the rest fail the call */
            CHECK_MSG(st != LW_OK || rst != LW_OK, "fail at %ld went unnoticed", k);
        }
        printf("  allocation failures injected: %d, all clean\n", injected);
        CHECK(injected > 10);
    }
    return test_summary("test-rows-tables");
}
