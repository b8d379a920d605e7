/* Samplers: declared in include/llamaweb.h (public API). This header stays for the sources that include it. */
#ifndef LW_SAMPLE_H
#define LW_SAMPLE_H

#include "llamaweb.h"

#include <stdint.h>

/* The samplers' random generator (xoshiro256** seeded through splitmix64), for a sampler that draws
 * elsewhere (the GPU's): seeding state with seed then drawing gives the numbers lw_sampler_sample draws after
 * lw_sampler_reset(s, seed) (one per sampled token when the temperature is > 0). */
void lw__sampler_rng_seed(uint64_t state[4], uint64_t seed);
/* Uniform in [0, 1) with 53 random bits; advances state. */
double lw__sampler_rng_uniform(uint64_t state[4]);

#endif
