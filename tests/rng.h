/* The tests' small deterministic generator (splitmix64): rng_state is the seed, rng_u64 the next 64 bits,
 * rng_f a float uniform in [-1, 1). One copy per test executable (static). */
#ifndef LW_TEST_RNG_H
#define LW_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state = 1; /* the generator's state: set it to seed a sequence */

static inline uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float rng_f(void) {
    return (float)((double)(rng_u64() >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

#endif
