/*
 * stress_common.h -- what the stress programs (torture.c, epoch_torture.c)
 * share: the seeded random numbers every choice and every byte is derived
 * from, a monotonic clock, and command-line helpers.  Each program defines
 * STRESS_PROG (its name, for messages) before including this.
 */
#ifndef PP_STRESS_COMMON_H
#define PP_STRESS_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef STRESS_PROG
#error "define STRESS_PROG (the program's name) before including stress_common.h"
#endif

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

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void oom(void)
{
    fprintf(stderr, STRESS_PROG ": out of memory\n");
    exit(2);
}

/* An unsigned number (decimal, 0x hex or 0 octal) for option opt; exits 2
 * with a message if s is not one. */
static inline uint64_t parse_u64(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, STRESS_PROG ": bad value for %s: '%s'\n", opt, s);
        exit(2);
    }
    return (uint64_t)v;
}

/* "--name=value": *a becomes "--name" (in name[size]) and *v "value";
 * otherwise both are left as they are (*v NULL: the value, if the option
 * takes one, is the next argument). */
static inline void stress_opt_split(const char **a, const char **v, char *name, size_t size)
{
    const char *eq = strchr(*a, '=');
    if (strncmp(*a, "--", 2) == 0 && eq != NULL && (size_t)(eq - *a) < size) {
        memcpy(name, *a, (size_t)(eq - *a));
        name[eq - *a] = '\0';
        *v = eq + 1;
        *a = name;
    }
}

/* Inside the option loop (int i, argc, argv, const char *a, *v): the
 * option's value, from "--name=value" or the next argument. */
#define STRESS_ARG()                                                           \
    (v ? v : (i + 1 < argc ? argv[++i]                                         \
                           : (fprintf(stderr, STRESS_PROG ": %s needs a value\n", a), \
                              exit(2), "")))

#endif /* PP_STRESS_COMMON_H */
