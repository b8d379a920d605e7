/* gemma4 runs on the CPU engine only: the WebGPU model runner (src/webgpu/gpu-model.c) refuses a gemma4 file
 * at planning, before it asks the device for any buffer or pipeline, with a message that names the
 * architecture and the CPU engine (not the first op it has no kernel for). The device is a fake HAL with
 * lavapipe's limits (tests/gpu-fake.h) that counts what it is asked for and refuses it. */
#include "engine-synth.h" /* synth_path */
#include "gpu-fake.h"
#include "model/model.h"
#include "synth/synth.h"
#include "test.h"
#include "webgpu/gpu-model.h"

/* What the device was asked for. */
typedef struct asked {
    int objects;   /* buffers and pipelines asked for */
    int destroyed; /* destroy() calls                 */
} asked;

static lw_status a_info(void *ctx, lw_gpu_info *o) {
    (void)ctx;
    *o = lavapipe_info();
    return LW_OK;
}
static lw_status a_buffer(void *ctx, uint64_t size, uint32_t usage, const char *label, lw_gpu_buffer *out) {
    (void)size, (void)usage, (void)label, (void)out;
    ((asked *)ctx)->objects++;
    return LW_ERR_UNSUPPORTED;
}
static lw_status a_pipeline(void *ctx, const char *wgsl, const char *entry, const lw_gpu_binding_kind *kinds,
                            uint32_t n, const char *label, lw_gpu_pipeline *out) {
    (void)wgsl, (void)entry, (void)kinds, (void)n, (void)label, (void)out;
    ((asked *)ctx)->objects++;
    return LW_ERR_UNSUPPORTED;
}
static void a_destroy(void *ctx) {
    ((asked *)ctx)->destroyed++;
}

static const lw_gpu_ops asked_ops = {
    .info = a_info, .buffer_create = a_buffer, .pipeline_create = a_pipeline, .destroy = a_destroy};

int main(void) {
    char path[1024], err[LW_ERRMSG_SIZE];
    synth_path(path, sizeof path, "gpu-refusal-gemma4.gguf");
    lw__synth_params sp = {
        .preset = "tiny-gemma4", .type = "f16", .vocab_path = "builtin", .seed = 5, .n_vocab = 300};
    CHECK_MSG(lw__synth_write(&sp, path, NULL, NULL, err) == LW_OK, "synth: %s", err);
    lw_model_params mp = lw_model_default_params();
    mp.no_weights = 1; /* as the browser's GPU path loads it */
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s", lw_model_error(m));
    if (test_failures) {
        lw_model_free(m);
        return test_summary("test-gemma4-gpu-refusal");
    }
    asked a = {0};
    lw__gpu_model *g = NULL;
    lw__gpu_model_params gp = lw__gpu_model_default_params();
    gp.n_ctx = 64;
    const lw_status st = lw__gpu_model_create((lw_gpu){&asked_ops, &a}, m, &gp, &g);
    const char *msg = lw__gpu_model_error(g);
    printf("tiny-gemma4 on WebGPU: %s (%s); %d GPU objects asked for\n", lw_status_str(st), msg, a.objects);
    CHECK(st == LW_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(msg, "gemma4") && strstr(msg, "CPU engine"), "message: %s", msg);
    CHECK_MSG(a.objects == 0, "%d GPU objects asked for before the refusal", a.objects);
    lw__gpu_model_free(g);
    CHECK(a.destroyed == 1); /* the runner owns the device and releases it */
    lw_model_free(m);
    return test_summary("test-gemma4-gpu-refusal");
}
