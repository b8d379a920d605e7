/* The static memory planner: on random graphs, no two activations whose lifetimes overlap share bytes, a
 * node's output never shares memory with its inputs, offsets are aligned, the arena is at least the
 * largest live set and at most the sum of all tensors, and chains reuse memory. Plus build errors. */
#include "graph/graph.h"
#include "test.h"

static uint32_t rng = 12345;
static uint32_t next(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* Checks the plan of g (all activations f32, rows = tokens). */
static void check_plan(lw__graph *g, int64_t max_tokens, uint64_t align) {
    CHECK(lw__graph_plan(g, max_tokens, 1, align) == LW_OK);
    uint64_t sum = 0, peak = 0;
    for (int32_t i = 0; i < g->n_t; i++) {
        const lw__tensor *a = &g->t[i];
        if (a->kind == LW_T_WEIGHT || a->first < 0) continue;
        sum += a->size;
        CHECK(a->offset % align == 0);
        CHECK(a->offset + a->size <= g->arena_size);
        CHECK(a->size >= (uint64_t)a->ne0 * 4 * (uint64_t)a->ne1);
        int32_t a_end = a->kind == LW_T_OUTPUT ? g->n_nodes : (a->last < 0 ? a->first : a->last);
        for (int32_t j = i + 1; j < g->n_t; j++) {
            const lw__tensor *b = &g->t[j];
            if (b->kind == LW_T_WEIGHT || b->first < 0) continue;
            int32_t b_end = b->kind == LW_T_OUTPUT ? g->n_nodes : (b->last < 0 ? b->first : b->last);
            int live_together = a->first <= b_end && b->first <= a_end;
            int overlap = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
            CHECK_MSG(!(live_together && overlap), "tensors %d [%d,%d] and %d [%d,%d] share memory", i, a->first, a_end,
                      j, b->first, b_end);
        }
    }
    /* the live set at each node is a lower bound */
    for (int32_t n = 0; n < g->n_nodes; n++) {
        uint64_t live = 0;
        for (int32_t i = 0; i < g->n_t; i++) {
            const lw__tensor *a = &g->t[i];
            if (a->kind == LW_T_WEIGHT || a->first < 0) continue;
            int32_t end = a->kind == LW_T_OUTPUT ? g->n_nodes : (a->last < 0 ? a->first : a->last);
            if (a->first <= n && n <= end) live += a->size;
        }
        if (live > peak) peak = live;
    }
    CHECK(g->arena_size >= peak);
    CHECK(g->arena_size <= sum);
}

static void test_random_graphs(void) {
    for (int iter = 0; iter < 200; iter++) {
        lw__graph g;
        CHECK(lw__graph_init(&g, NULL, 300, 300) == LW_OK);
        static float wdata[64 * 64];
        int32_t w = lw__graph_weight(&g, "w", LW_TYPE_F32, 64, 64, wdata);
        int32_t acts[200];
        int n_acts = 0;
        int n_nodes = 5 + (int)(next() % 120);
        for (int n = 0; n < n_nodes; n++) {
            int32_t d = lw__graph_act(&g, "a", 1 + (int64_t)(next() % 200), LW_ROWS_TOKENS);
            /* sources: weights or earlier activations, sometimes the same one twice */
            int32_t s0 = n_acts ? acts[next() % (uint32_t)n_acts] : w;
            int32_t s1 = n_acts && next() % 2 ? acts[next() % (uint32_t)n_acts] : (next() % 3 ? s0 : -1);
            CHECK(lw__graph_node(&g, LW_OP_ADD, d, s0, s1, -1) != NULL);
            acts[n_acts++] = d;
        }
        if (next() % 2) g.t[acts[n_acts - 1]].kind = LW_T_OUTPUT;
        check_plan(&g, 1 + (int64_t)(next() % 64), (uint64_t)1 << (next() % 8));
        lw__graph_free(&g);
    }
}

static void test_chain_reuse(void) {
    /* x0 -> x1 -> ... -> x99, equal sizes: at most 2 live at once, so 2 blocks suffice */
    lw__graph g;
    CHECK(lw__graph_init(&g, NULL, 128, 128) == LW_OK);
    static float e[16 * 10];
    int32_t w = lw__graph_weight(&g, "emb", LW_TYPE_F32, 16, 10, e);
    int32_t prev = lw__graph_act(&g, "x", 16, LW_ROWS_TOKENS);
    lw__graph_node(&g, LW_OP_GET_ROWS, prev, w, -1, -1);
    for (int i = 1; i < 100; i++) {
        int32_t d = lw__graph_act(&g, "x", 16, LW_ROWS_TOKENS);
        lw__graph_node(&g, LW_OP_RMS_NORM, d, prev, -1, -1);
        prev = d;
    }
    check_plan(&g, 8, 64);
    printf("chain of 100 tensors of %d bytes: arena %llu bytes\n", 16 * 4 * 8, (unsigned long long)g.arena_size);
    CHECK(g.arena_size == 2 * 16 * 4 * 8);
    lw__graph_free(&g);
}

static void test_errors(void) {
    lw__graph g;
    CHECK(lw__graph_init(&g, NULL, 2, 1) == LW_OK);
    int32_t a = lw__graph_act(&g, "a", 4, LW_ROWS_TOKENS);
    int32_t b = lw__graph_act(&g, "b", 4, LW_ROWS_TOKENS);
    CHECK(lw__graph_act(&g, "c", 4, LW_ROWS_TOKENS) == -1); /* over capacity: sticky */
    CHECK(g.status == LW_ERR_TOO_LARGE);
    CHECK(lw__graph_plan(&g, 4, 1, 64) == LW_ERR_TOO_LARGE);
    lw__graph_free(&g);

    CHECK(lw__graph_init(&g, NULL, 4, 4) == LW_OK);
    a = lw__graph_act(&g, "a", 4, LW_ROWS_TOKENS);
    b = lw__graph_act(&g, "b", 4, LW_ROWS_TOKENS);
    lw__graph_node(&g, LW_OP_ADD, b, a, a, -1); /* a read before anything writes it */
    CHECK(lw__graph_plan(&g, 4, 1, 64) == LW_ERR_INVALID_ARG);
    CHECK(lw__graph_plan(&g, 0, 1, 64) == LW_ERR_INVALID_ARG);
    CHECK(lw__graph_plan(&g, 4, 1, 48) == LW_ERR_INVALID_ARG); /* alignment not a power of two */
    CHECK(lw__graph_node(&g, LW_OP_ADD, 17, a, -1, -1) == NULL); /* no such tensor */
    lw__graph_free(&g);

    CHECK(lw__graph_init(&g, NULL, 4, 4) == LW_OK);
    CHECK(lw__graph_weight(&g, "q", LW_TYPE_Q4_0, 30, 1, NULL) == -1); /* not whole blocks */
    CHECK(g.status == LW_ERR_BAD_DIMS);
    lw__graph_free(&g);
    CHECK(lw__graph_init(&g, NULL, 0, 4) == LW_ERR_INVALID_ARG);
}

int main(void) {
    test_random_graphs();
    test_chain_reuse();
    test_errors();
    return test_summary("test-engine-graph");
}
