/* Header-only models (lw_model_params.no_weights, the WebGPU path's loader): the same tensors are bound as
 * by a full load, nothing is read, and every weight's file offset points at exactly the bytes the full load
 * read (fused tensors' slices included: a phi3-style synthetic model). */
#include "engine-synth.h"
#include "model/model.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

/* Compares one bound weight of a full and a header-only load: same presence, shape and type; the file bytes
 * at the header-only offset equal the full load's data. */
static void check_wt(lw_source *src, const lw__wt *full, const lw__wt *head, const char *what) {
    CHECK_MSG(!full->data == !head->data, "%s: present %d vs %d", what, !!full->data, !!head->data);
    if (!full->data || !head->data) return;
    CHECK_MSG(full->type == head->type && full->ne0 == head->ne0 && full->ne1 == head->ne1, "%s: shape", what);
    CHECK_MSG(full->file_off == head->file_off, "%s: file offsets %llu vs %llu", what,
              (unsigned long long)full->file_off, (unsigned long long)head->file_off);
    const lw_type_info *ti = lw_type_get(full->type);
    size_t bytes = (size_t)(full->ne0 / ti->block_size) * ti->type_size * (size_t)full->ne1;
    uint8_t *buf = malloc(bytes);
    CHECK(buf && lw_source_read(src, head->file_off, buf, bytes) == LW_OK);
    CHECK_MSG(buf && memcmp(buf, full->data, bytes) == 0, "%s: bytes at the file offset differ", what);
    free(buf);
}

static void check_model(const char *path) {
    lw_model *full = NULL, *head = NULL;
    lw_model_params hp = lw_model_default_params();
    hp.no_weights = 1;
    CHECK_MSG(lw_model_load_file(path, NULL, &full) == LW_OK, "%s: %s", path, lw_model_error(full));
    CHECK_MSG(lw_model_load_file(path, &hp, &head) == LW_OK, "%s: %s", path, lw_model_error(head));
    lw_source *src = NULL;
    char err[LW_ERRMSG_SIZE];
    CHECK(lw_source_open_file(path, NULL, &src, err, sizeof err) == LW_OK);
    if (full && head && src && full->layers && head->layers) {
        CHECK(head->weights == NULL && head->no_weights);
        CHECK(lw_model_n_vocab(full) == lw_model_n_vocab(head) && lw_model_n_layer(full) == lw_model_n_layer(head));
        check_wt(src, &full->tok_embd, &head->tok_embd, "token_embd");
        check_wt(src, &full->output, &head->output, "output");
        check_wt(src, &full->output_norm, &head->output_norm, "output_norm");
        CHECK((full->output.data == full->tok_embd.data) == (head->output.data == head->tok_embd.data));
        for (int32_t il = 0; il < lw_model_n_layer(full); il++) {
            const lw__layer *a = &full->layers[il], *b = &head->layers[il];
            const lw__wt *wa[] = {&a->attn_norm, &a->wq, &a->wk, &a->wv, &a->wo, &a->bq, &a->bk, &a->bv,
                                  &a->q_norm, &a->k_norm, &a->ffn_norm, &a->ffn_gate, &a->ffn_up, &a->ffn_down};
            const lw__wt *wb[] = {&b->attn_norm, &b->wq, &b->wk, &b->wv, &b->wo, &b->bq, &b->bk, &b->bv,
                                  &b->q_norm, &b->k_norm, &b->ffn_norm, &b->ffn_gate, &b->ffn_up, &b->ffn_down};
            for (size_t k = 0; k < sizeof wa / sizeof wa[0]; k++) {
                char what[64];
                snprintf(what, sizeof what, "blk.%d weight %zu", il, k);
                check_wt(src, wa[k], wb[k], what);
            }
        }
        /* a CPU context needs the bytes: refused, not crashed */
        lw_context *c = NULL;
        CHECK(lw_context_create(head, NULL, &c) != LW_OK);
        lw_context_free(c);
    }
    lw_source_close(src);
    lw_model_free(full);
    lw_model_free(head);
}

int main(void) {
    char path[512];
    synth_spec sp = {.n_vocab = 320, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 96,
                     .wtype = LW_TYPE_Q8_0, .tied = 1, .seed = 5, .arch = "phi3", .fused = 1};
    synth_path(path, sizeof path, "model-header-phi3.gguf");
    CHECK(synth_write(path, &sp) == 0);
    check_model(path);
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", test_shared_dir());
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        check_model(path);
    } else {
        printf("note: %s absent, checked the synthetic model only\n", path);
    }
    return test_summary("test-model-header");
}
