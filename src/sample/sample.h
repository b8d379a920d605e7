/* Token samplers: a fixed chain configured by one params struct, in llama.cpp's default order:
 *     penalties (repetition, frequency, presence over the last N accepted tokens)
 *     -> top-k -> top-p -> min-p -> temperature -> draw from the softmax with a seeded RNG.
 * A temperature <= 0 means greedy (argmax after penalties). Buffers are allocated at creation: sampling
 * allocates nothing.
 *
 *     lw_sampler_params sp = lw_sampler_default_params(); sp.seed = 42;
 *     lw_sampler *s; lw_sampler_create(n_vocab, &sp, NULL, &s);
 *     int32_t id = lw_sampler_sample(s, logits); lw_sampler_accept(s, id);
 */
#ifndef LW_SAMPLE_H
#define LW_SAMPLE_H

#include "llamaweb.h"

typedef struct lw_sampler lw_sampler;

typedef struct lw_sampler_params {
    float temp;             /* softmax temperature; <= 0: greedy (default 0.8)                           */
    int32_t top_k;          /* keep the k most likely; <= 0: off (default 40)                            */
    float top_p;            /* keep the smallest set with probability >= top_p; >= 1: off (default 0.95)*/
    float min_p;            /* keep tokens with p >= min_p * p_max; <= 0: off (default 0.05)             */
    int32_t penalty_last_n; /* accepted tokens the penalties look at; 0: off (default 64)                */
    float penalty_repeat;   /* logit / r if > 0 else logit * r, for seen tokens; 1: off (default 1)      */
    float penalty_freq;     /* minus count * f (default 0)                                               */
    float penalty_present;  /* minus p once a token was seen (default 0)                                 */
    uint64_t seed;          /* RNG seed (default 0x5eed)                                                 */
} lw_sampler_params;

lw_sampler_params lw_sampler_default_params(void);

lw_status lw_sampler_create(int32_t n_vocab, const lw_sampler_params *params, const lw_allocator *alloc,
                            lw_sampler **out);
void lw_sampler_free(lw_sampler *s);
/* Picks a token from n_vocab logits (not modified). Does not record it: call lw_sampler_accept. */
int32_t lw_sampler_sample(lw_sampler *s, const float *logits);
/* Records a token (generated or from the prompt) for the penalties. */
void lw_sampler_accept(lw_sampler *s, int32_t token);
/* Forgets accepted tokens and reseeds the RNG with seed. */
void lw_sampler_reset(lw_sampler *s, uint64_t seed);

#endif
