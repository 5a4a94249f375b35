/*
 * stress/common/content.h -- the seeded numbers the stress programs derive
 * every choice and every byte from, and the byte comparisons their content
 * checks are made of.  Each program builds its own contents on these (the
 * torture: a function of seed, entry and version; epoch_torture: of seed and
 * entry, with poison for freed blocks).
 */
#ifndef PP_STRESS_CONTENT_H
#define PP_STRESS_CONTENT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* splitmix64: the next number of the sequence in *x. */
static inline uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One well-mixed number from three (seed, entry, version...). */
static inline uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t x = a ^ (b * 0xD6E8FEB86659FD93ull) ^ (c * 0xA0761D6478BD642Full);
    return splitmix64(&x);
}

/* A thread's draws: the next number of its sequence, and one below n. */
static inline uint64_t rng_next(uint64_t *rng) { return splitmix64(rng); }
static inline unsigned rng_below(uint64_t *rng, unsigned n)
{
    return (unsigned)(splitmix64(rng) % n);
}

/* The index of the first of the n bytes at p that differs from want, or -1. */
static inline long bytes_mismatch(const unsigned char *p, const void *want, size_t n)
{
    if (memcmp(p, want, n) == 0)
        return -1;
    for (size_t j = 0; j < n; j++)
        if (p[j] != ((const unsigned char *)want)[j])
            return (long)j;
    return -1;
}

#endif /* PP_STRESS_CONTENT_H */
