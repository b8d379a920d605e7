/* Writes the seed corpus of fuzz-model (tests/fuzz/seeds/model): one small synthetic model per architecture
 * the engine builds (the tiny presets of src/synth shrunk to width 32, one or two blocks, the built-in byte
 * vocabulary, tied head), in q8_0 (and f16 for llama), 10-20 KiB each, so mutations start from files the
 * loader accepts and reach the hyper-parameter and shape checks. Random weights, no model data. Built and run
 * by `scripts/fuzz-seeds.sh` (not a CMake target: the seeds are committed). gen-model-seeds OUT_DIR */
#include "llamaweb.h"
#include "synth/synth.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen-model-seeds OUT_DIR\n");
        return 2;
    }
    static const char *const presets[] = {"tiny",        "tiny-qwen2", "tiny-qwen3",    "tiny-gemma2",
                                          "tiny-gemma3", "tiny-phi3",  "tiny-qwen3moe", "tiny-gemma4"};
    static const char *const types[] = {"q8_0", "f16"}; /* f16 for the llama preset only */
    int failed = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const lw__synth_preset *base = lw__synth_preset_find(presets[i]);
        if (!base) {
            fprintf(stderr, "no preset %s\n", presets[i]);
            return 1;
        }
        lw__synth_preset p = *base;
        /* width 32, one head pair, tied head: a few KiB of weights; gemma4 keeps its block pattern (3 blocks:
         * two sliding, one global; the last shares KV) with smaller heads */
        const int gemma4 = strcmp(p.arch, "gemma4") == 0;
        p.n_embd = 32;
        p.n_ff = 32;
        p.n_head = 2;
        p.n_head_kv = 1;
        p.tied = 1;
        p.head_dim = p.head_dim ? (gemma4 ? 32 : 16) : 0;
        p.head_dim_swa = p.head_dim_swa ? 16 : 0;
        p.n_embd_per_layer = p.n_embd_per_layer ? 8 : 0;
        p.n_kv_shared = p.n_kv_shared ? 1 : 0;
        p.n_ff_exp = p.n_expert ? 16 : 0;
        p.n_expert = p.n_expert ? 4 : 0;
        p.n_expert_used = p.n_expert ? 2 : 0;
        p.sliding_window = p.sliding_window ? 4 : 0;
        for (size_t t = 0; t < (i == 0 ? 2u : 1u); t++) {
            lw__synth_params sp = {0};
            sp.custom = &p;
            sp.preset = p.name;
            sp.type = types[t];
            sp.vocab_path = "builtin";
            sp.seed = 1 + i;
            sp.pure = 1;
            sp.n_layer = gemma4                             ? 3
                         : strncmp(p.arch, "gemma", 5) == 0 ? 2
                                                            : 1; /* a sliding and a global block */
            char path[1024], err[LW_ERRMSG_SIZE];
            snprintf(path, sizeof path, "%s/%s-%s.gguf", argv[1], presets[i], types[t]);
            lw__synth_result r;
            if (lw__synth_write(&sp, path, NULL, &r, err) != LW_OK) {
                fprintf(stderr, "%s %s: %s\n", presets[i], types[t], err);
                failed = 1;
                continue;
            }
            printf("%s: %llu tensors, %llu bytes of data\n", path, (unsigned long long)r.n_tensors,
                   (unsigned long long)r.n_bytes);
        }
    }
    return failed;
}
