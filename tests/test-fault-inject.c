/* Fault injection through every layer, on small synthetic models of several architectures (the committed
 * fuzz seeds tests/fuzz/seeds/model, written by scripts/fuzz-seeds.sh):
 *   1. the allocator fails at call N, for every N, over model load + tokenizing + context creation + a
 *      sampler + a prompt and 10 sampled decode steps on the CPU engine;
 *   2. the WebGPU plan over a fake HAL (tests/gpu-fault-hal.h): buffer creation failing at every N, pipeline
 *      compilation and bind group creation failing at every N, the allocator failing at every N of the
 *      GPU model's creation, each followed by 10 decode steps; and the device lost at every submit of
 *      creation + 10 steps, after which a GPU model made again on a fresh device works;
 *   3. the byte source: a read error (LW_ERR_IO) or a short read (LW_ERR_TRUNCATED) at every read index of
 *      a load, the file shrinking under an open source (pread returns less) at every tensor boundary;
 *   4. truncated files at every tensor boundary (the prefix up to each tensor's first byte and up to its
 *      last), served from memory.
 * Every fault must give a clean error status with a message, leak no allocator block (and, under ASAN,
 * nothing LSAN sees) and leave no GPU buffer alive. Each loop prints how many faults it injected.
 * Quick form (CI): 4 architectures, the GPU allocator loop at the first 64 calls and every 16th after
 * (LW_TEST_SANITIZED=1, the ASAN suite: every 64th, and the read-short and pipeline/bind-group loops on
 * llama only); LW_TEST_SLOW=1 runs all 9 models, every call of every loop, and the GPU loops again with a
 * 2-token step. */
#include "llamaweb.h"
#include "model/model.h"
#include "test.h"
#include "webgpu/gpu-model.h"

#include "alloc-counter.h"
#include "gpu-fault-hal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The statuses a read fault may give: the injected one passed on (a short read may also be found as data
 * that stops early: LW_ERR_TRUNCATED). */
static int read_status(lw_status st, lw_status injected) {
    return st == injected || st == LW_ERR_TRUNCATED || st == LW_ERR_IO;
}

static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * 1. CPU engine: allocation failure at every N
 * ------------------------------------------------------------------------------------------------------- */

/* Load, tokenize, context, sampler, prompt, 10 sampled steps. Returns the first failing status. */
static lw_status cpu_session(lw_source *src, const lw_allocator *a, char *why, size_t why_cap) {
    lw_model_params mp = lw_model_default_params();
    mp.alloc = a;
    lw_model *m = NULL;
    lw_context *c = NULL;
    lw_sampler *s = NULL;
    lw_status st = lw_model_load_source(src, &mp, &m);
    snprintf(why, why_cap, "%s", lw_model_error(m));
    if (st != LW_OK) goto done;
    int32_t ids[64];
    size_t n = 0;
    st = lw_model_tokenize(m, "Once upon a time, \xe6\x97\xa5", 20, 1, 0, ids, 64, &n);
    snprintf(why, why_cap, "tokenize: %s", lw_status_str(st));
    if (st != LW_OK) goto done;
    lw_context_params cp = lw_context_default_params();
    cp.n_ctx = 48;
    cp.n_batch = 8; /* the prompt takes several steps */
    cp.n_threads = 1;
    st = lw_context_create(m, &cp, &c);
    snprintf(why, why_cap, "%s", lw_context_error(c));
    if (st != LW_OK) goto done;
    lw_sampler_params sp = lw_sampler_default_params();
    sp.seed = 7;
    sp.penalty_repeat = 1.1f;
    st = lw_sampler_create(lw_model_n_vocab(m), &sp, a, &s);
    snprintf(why, why_cap, "sampler: %s", lw_status_str(st));
    if (st != LW_OK) goto done;
    st = lw_decode(c, ids, (int32_t)n, 0);
    for (int i = 0; st == LW_OK && i < 10; i++) {
        int32_t t = lw_sample(c, s, -1);
        st = t < 0 ? LW_ERR_INVALID_ARG : lw_decode(c, &t, 1, 0);
    }
    snprintf(why, why_cap, "%s", lw_context_error(c));
done:
    lw_sampler_free(s);
    lw_context_free(c);
    lw_model_free(m);
    return st;
}

/* A host byte source over a file's bytes whose N-th read fails (loop 3), or none (loop 1). */
typedef struct faulty {
    const uint8_t *data; /* the file's bytes                      */
    long reads;          /* read calls so far                     */
    long fail_at;        /* 1-based read that fails; 0: none      */
    lw_status how;       /* what that read returns                */
    int failed;          /* 1 once it did                         */
} faulty;

static lw_status faulty_read(void *u, uint64_t off, void *dst, size_t n) {
    faulty *f = u;
    if (++f->reads == f->fail_at) {
        f->failed = 1;
        if (f->how == LW_ERR_TRUNCATED) memcpy(dst, f->data + off, n / 2); /* half of it came */
        return f->how;
    }
    memcpy(dst, f->data + off, n);
    return LW_OK;
}

/* Loop 1 (how == LW_ERR_NOMEM: the allocator fails its N-th call) and loop 3 (how: what the byte source's
 * N-th read returns), for every N until a run meets no fault. */
static void cpu_fault_loop(const char *path, const void *bytes, size_t size, lw_status how) {
    const int alloc = how == LW_ERR_NOMEM;
    long injected = 0, n;
    for (n = 1;; n++) {
        alloc_counter cnt = {0};
        cnt.fail_at = alloc ? n : 0;
        faulty f = {bytes, 0, alloc ? 0 : n, how, 0};
        lw_allocator a = alloc_counter_hooks(&cnt);
        lw_source *src = NULL;
        CHECK(lw_source_from_callbacks(size, faulty_read, NULL, &f, NULL, &src) == LW_OK);
        char why[LW_ERRMSG_SIZE];
        const lw_status st = cpu_session(src, &a, why, sizeof why);
        lw_source_close(src);
        CHECK_MSG(cnt.live == 0, "%s: %s %ld failing: %ld blocks leaked", path, alloc ? "allocation" : "read",
                  n, cnt.live);
        if (!(alloc ? cnt.failed : f.failed)) {
            CHECK_MSG(st == LW_OK, "%s: no fault, yet %s: %s", path, lw_status_str(st), why);
            break; /* past the last allocation or read */
        }
        injected++;
        CHECK_MSG((alloc ? st == LW_ERR_NOMEM : read_status(st, how)) && why[0],
                  "%s: %s %ld failing with %s gave %s (%s)", path, alloc ? "allocation" : "read", n,
                  lw_status_str(how), lw_status_str(st), why);
        if (n > 100000) break;
    }
    if (alloc)
        printf("%s: CPU engine, allocator failing at each of %ld calls of load + context + 10 steps: %ld "
               "faults, "
               "all clean\n",
               path, n - 1, injected);
    else
        printf("%s: byte source returning %s at each of %ld reads of a load: %ld faults, all clean\n", path,
               lw_status_str(how), n - 1, injected);
}

/* ---------------------------------------------------------------------------------------------------------
 * 2. WebGPU plan over the fake HAL
 * ------------------------------------------------------------------------------------------------------- */

typedef enum gpu_fault { FAULT_BUFFER, FAULT_PIPELINE, FAULT_GROUP, FAULT_ALLOC, FAULT_LOST } gpu_fault;
static const char *const fault_names[] = {"buffer creation", "pipeline compilation", "bind group creation",
                                          "allocator", "device lost at submit"};

static fault_hal fh; /* large: not on the stack */

/* A GPU model of m on a fresh fake, 10 decode steps (a 2-token prompt first when two_tokens). */
static lw_status gpu_session(lw_model *m, int two_tokens, char *why, size_t why_cap) {
    lw__gpu_model_params p = lw__gpu_model_default_params();
    p.n_ctx = 32;
    p.n_batch = 4;
    p.submit_every = 16;
    p.host_source = 1;
    lw__gpu_model *g = NULL;
    lw_gpu gpu = {&fault_hal_ops, &fh};
    lw_status st = lw__gpu_model_create(gpu, m, &p, &g);
    why[0] = 0;
    if (st != LW_OK) {
        snprintf(why, why_cap, "%s", lw__gpu_model_error(g));
    } else if (fh.err) { /* asynchronous errors surface through the HAL, as the JS glue checks after settling
                          */
        st = LW_ERR_IO;
        snprintf(why, why_cap, "%s", fh.err);
    }
    if (st == LW_OK && two_tokens) {
        int32_t t2[2] = {1, 2};
        st = lw__gpu_model_decode(g, t2, 2, LW_GPU_OUT_ARGMAX);
        if (st == LW_OK && fh.err) st = LW_ERR_IO;
        if (st != LW_OK) snprintf(why, why_cap, "%s", fh.err ? fh.err : lw__gpu_model_error(g));
    }
    for (int i = 0; st == LW_OK && i < 10; i++) {
        int32_t t = 3 + i;
        st = lw__gpu_model_decode(g, &t, 1, i & 1 ? LW_GPU_OUT_SAMPLE : LW_GPU_OUT_ARGMAX);
        if (st == LW_OK && fh.err) st = LW_ERR_IO; /* what settle() reports */
        if (st != LW_OK) snprintf(why, why_cap, "%s", fh.err ? fh.err : lw__gpu_model_error(g));
    }
    lw__gpu_model_free(g);
    return st;
}

static void gpu_fault_loop(const char *path, gpu_fault kind, int two_tokens, long stride) {
    alloc_counter cnt = {0};
    lw_allocator a = alloc_counter_hooks(&cnt);
    lw_model_params mp = lw_model_default_params();
    mp.alloc = &a;
    mp.no_weights = 1;
    mp.no_vocab = 1;
    lw_model *m = NULL;
    CHECK_MSG(lw_model_load_file(path, &mp, &m) == LW_OK, "%s: %s", path, lw_model_error(m));
    if (!m) return;
    char why[LW_ERRMSG_SIZE];
    /* the unfaulted run: how many objects and calls there are to fail */
    fault_hal_init(&fh);
    const long base = cnt.calls;
    lw_status st = gpu_session(m, two_tokens, why, sizeof why);
    if (st ==
        LW_ERR_UNSUPPORTED) { /* an architecture the WebGPU runner refuses (it runs on the CPU engine) */
        if (kind == FAULT_BUFFER) printf("%s: not on WebGPU (%s): no GPU fault loops\n", path, why);
        lw_model_free(m);
        return;
    }
    CHECK_MSG(st == LW_OK, "%s: the fake HAL without faults: %s (%s)", path, lw_status_str(st), why);
    const uint32_t n_buf = fh.n_buf, n_pipe = fh.n_pipe, n_group = fh.n_group, n_submit = fh.submits;
    const long n_alloc = cnt.calls - base;
    const long total = kind == FAULT_BUFFER     ? n_buf
                       : kind == FAULT_PIPELINE ? n_pipe
                       : kind == FAULT_GROUP    ? n_group
                       : kind == FAULT_ALLOC    ? n_alloc
                                                : n_submit;
    long injected = 0, absorbed = 0;
    for (long n = 1; n <= total;
         n += n < 64 ? 1 : stride) { /* every one of the first 64, then every stride-th */
        fault_hal_init(&fh);
        if (kind == FAULT_BUFFER) fh.fail_buffer_at = (uint32_t)n;
        if (kind == FAULT_PIPELINE) fh.fail_pipeline_at = (uint32_t)n;
        if (kind == FAULT_GROUP) fh.fail_group_at = (uint32_t)n;
        if (kind == FAULT_LOST) fh.lose_at_submit = (uint32_t)n;
        cnt.fail_at = kind == FAULT_ALLOC ? cnt.calls + n : 0;
        const long live0 = cnt.live;
        st = gpu_session(m, two_tokens, why, sizeof why);
        cnt.fail_at = 0;
        injected++;
        /* A fault the plan works around is clean too: e.g. a fused kernel that cannot be made (its pipeline,
         * or memory for its WGSL) leaves the node to the separate kernels, and all 10 steps ran. */
        if (st == LW_OK && kind != FAULT_LOST) {
            absorbed++;
            continue;
        }
        const int want = kind == FAULT_ALLOC ? st == LW_ERR_NOMEM : st != LW_OK;
        CHECK_MSG(want && why[0], "%s: %s failing at %ld of %ld gave %s (%s)", path, fault_names[kind], n,
                  total, lw_status_str(st), why);
        CHECK_MSG(fh.live_buf == 0, "%s: %s failing at %ld: %u GPU buffers left alive", path,
                  fault_names[kind], n, fh.live_buf);
        CHECK_MSG(fh.bad == 0, "%s: %s failing at %ld: %llu WebGPU rule violations", path, fault_names[kind],
                  n, (unsigned long long)fh.bad);
        CHECK_MSG(cnt.live == live0, "%s: %s failing at %ld: %ld blocks leaked", path, fault_names[kind], n,
                  cnt.live - live0);
        if (kind == FAULT_LOST) {
            /* the model is reusable: a GPU model made again (a new device) decodes */
            fault_hal_init(&fh);
            st = gpu_session(m, two_tokens, why, sizeof why);
            CHECK_MSG(st == LW_OK, "%s: after losing the device at submit %ld, again on a new one: %s (%s)",
                      path, n, lw_status_str(st), why);
        }
    }
    lw_model_free(m);
    CHECK_MSG(cnt.live == 0, "%s: %ld blocks leaked", path, cnt.live);
    printf(
        "%s: WebGPU plan (fake HAL)%s, %s failing at %ld of %ld: %ld faults, all clean (%ld worked around; "
        "%u buffers, %u pipelines, %u bind groups, %u submits, %ld allocations)\n",
        path, two_tokens ? " with a 2-token step" : "", fault_names[kind], injected, total, injected,
        absorbed, n_buf, n_pipe, n_group, n_submit, n_alloc);
}

/* ---------------------------------------------------------------------------------------------------------
 * 3. Byte-source faults
 * ------------------------------------------------------------------------------------------------------- */

/* The prefix lengths that end at a tensor boundary: each tensor's first byte and its last, the data
 * section's start, and one byte short of the whole file. Returns the count (at most cap). */
static size_t boundaries(const void *bytes, size_t size, uint64_t *out, size_t cap) {
    lw_source *src = NULL;
    lw_gguf *g = NULL;
    size_t k = 0;
    if (lw_source_from_memory(bytes, size, NULL, &src) != LW_OK) return 0;
    if (lw_gguf_open(src, NULL, &g) == LW_OK) {
        out[k++] = lw_gguf_data_offset(g);
        for (int64_t i = 0; i < lw_gguf_n_tensors(g) && k + 2 <= cap; i++) {
            const lw_gguf_tensor *t = lw_gguf_tensor_at(g, i);
            out[k++] = t->file_offset;
            out[k++] = t->file_offset + t->n_bytes - 1;
        }
        if (k < cap) out[k++] = size - 1;
    }
    lw_gguf_close(g);
    lw_source_close(src);
    return k;
}

/* 4. Truncated copies in memory, and 3b. the file shrinking under an open source (short preads). */
static void truncation_loop(const char *path, const void *bytes, size_t size) {
    uint64_t cut[1024];
    const size_t n_cut = boundaries(bytes, size, cut, 1024);
    CHECK_MSG(n_cut > 3, "%s: no tensors", path);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/fault-inject-%d.gguf", test_tmp_dir(), (int)getpid());
    long shrunk = 0;
    for (size_t i = 0; i < n_cut; i++) {
        alloc_counter cnt = {0};
        lw_allocator a = alloc_counter_hooks(&cnt);
        lw_source *src = NULL;
        char why[LW_ERRMSG_SIZE];
        CHECK(lw_source_from_memory(bytes, (size_t)cut[i], NULL, &src) == LW_OK);
        lw_status st = cpu_session(src, &a, why, sizeof why);
        lw_source_close(src);
        CHECK_MSG(st != LW_OK && why[0], "%s: cut at %llu of %zu gave %s (%s)", path,
                  (unsigned long long)cut[i], size, lw_status_str(st), why);
        CHECK_MSG(cnt.live == 0, "%s: cut at %llu: %ld blocks leaked", path, (unsigned long long)cut[i],
                  cnt.live);
        /* the whole file, opened, then cut under the open descriptor: the source's size is stale */
        FILE *f = fopen(tmp, "wb");
        CHECK(f && fwrite(bytes, 1, size, f) == size);
        if (f) fclose(f);
        CHECK(lw_source_open_file(tmp, NULL, &src, why, sizeof why) == LW_OK);
        if (!src) continue;
        CHECK(truncate(tmp, (off_t)cut[i]) == 0);
        st = cpu_session(src, &a, why, sizeof why);
        lw_source_close(src);
        shrunk++;
        CHECK_MSG(read_status(st, LW_ERR_TRUNCATED) && why[0],
                  "%s: file shrunk to %llu under its source gave %s (%s)", path, (unsigned long long)cut[i],
                  lw_status_str(st), why);
        CHECK_MSG(cnt.live == 0, "%s: shrunk to %llu: %ld blocks leaked", path, (unsigned long long)cut[i],
                  cnt.live);
    }
    remove(tmp);
    printf("%s: cut at %zu tensor boundaries (in memory) and shrunk at %ld under an open file: all clean\n",
           path, n_cut, shrunk);
}

/* ---------------------------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------------------------- */

static void *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

int main(void) {
    static const char *const models[] = {"tiny-q8_0",        "tiny-gemma4-q8_0", "tiny-qwen3moe-q8_0",
                                         "tiny-gemma3-q8_0", "tiny-phi3-q8_0",   "tiny-gemma2-q8_0",
                                         "tiny-qwen2-q8_0",  "tiny-qwen3-q8_0",  "tiny-f16"};
    const int slow = env_on("LW_TEST_SLOW"), sanitized = env_on("LW_TEST_SANITIZED");
    /* quick: 4 architectures (llama, gemma4's shared-KV blocks and qwen3moe's experts on the CPU engine only,
     * gemma3's sliding blocks and post norms) */
    const size_t n_models = slow ? sizeof models / sizeof models[0] : 4;
    if (!slow)
        printf("fault-inject: 4 of %zu models (LW_TEST_SLOW=1: all)\n", sizeof models / sizeof models[0]);
    int found = 0;
    for (size_t i = 0; i < n_models; i++) {
        char path[512];
        snprintf(path, sizeof path, "tests/fuzz/seeds/model/%s.gguf", models[i]);
        size_t size = 0;
        void *bytes = read_all(path, &size);
        if (!bytes) {
            printf("fault-inject: no %s (scripts/fuzz-seeds.sh writes it)\n", path);
            continue;
        }
        found++;
        const int heavy = !sanitized || i == 0; /* the ASAN suite: every loop on the llama model only */
        cpu_fault_loop(path, bytes, size, LW_ERR_NOMEM);
        cpu_fault_loop(path, bytes, size, LW_ERR_IO);
        if (heavy) cpu_fault_loop(path, bytes, size, LW_ERR_TRUNCATED);
        truncation_loop(path, bytes, size);
        /* the allocator loop over a GPU model's creation is long (~1300 calls, each a new plan with its
         * WGSL): every call with LW_TEST_SLOW=1, else the first 64 and then every 16th (64th under the
         * sanitizers) */
        const long stride = slow ? 1 : sanitized ? 64 : 16;
        for (int k = FAULT_BUFFER; k <= FAULT_LOST; k++)
            if (heavy || k == FAULT_BUFFER || k == FAULT_LOST) gpu_fault_loop(path, (gpu_fault)k, 0, stride);
        if (slow)
            for (int k = FAULT_BUFFER; k <= FAULT_LOST; k++) gpu_fault_loop(path, (gpu_fault)k, 1, 1);
        free(bytes);
    }
    if (!found) test_skip("no seed models under tests/fuzz/seeds/model");
    return test_summary("test-fault-inject");
}
