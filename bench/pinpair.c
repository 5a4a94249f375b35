/*
 * pinpair -- the cost of pp_pin + pp_unpin of a resident entry on one
 * thread, against one bare atomic add + sub on a private counter and
 * against the floor of any validated pin (a generation-checked CAS each
 * way through a call, below), measured in the same process, interleaved
 * round by round (A B C A B C ...), medians reported (see
 * docs/performance.md: ratios, never a lone absolute time).  The full
 * benchmark against other structures is pinbench.
 *
 * The cost of a pin depends measurably on where the entry sits (its slot's
 * address), so round r pins entry r mod E of E entries put first, and the
 * range over rounds is printed next to the median.
 *
 *   pinpair [--rounds R] [--iters N] [--entries E] [--topology STR]
 */
#include <pinpool.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A counter alone on its cache line, as a pin count would be. */
static _Alignas(64) _Atomic uint64_t bare_counter;

static double run_bare(long iters)
{
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        atomic_fetch_add_explicit(&bare_counter, 1, memory_order_acquire);
        atomic_fetch_sub_explicit(&bare_counter, 1, memory_order_release);
    }
    return (now_s() - t0) / (double)iters * 1e9;
}

/*
 * The floor of a validated pin: what any pin that checks a ref's generation
 * in the same atomic word as the count must do at least -- decode the ref,
 * find its slot (one 64-byte slot per entry), load the word, check the
 * generation and that the entry is live, and compare-and-swap the count --
 * through a call, with nothing counted and no other state.  pinpool's pin
 * is this plus its flags, statistics and the ways out to slow paths.
 */
typedef struct floor_slot {
    _Atomic uint64_t w;                  /* gen:32 | live:1 (bit 31) | count */
} __attribute__((aligned(64))) floor_slot_t;

static floor_slot_t floor_table[16];

__attribute__((noinline)) static int floor_pin(floor_slot_t *table, uint64_t ref)
{
    _Atomic uint64_t *w = &table[(ref >> 32) & 15].w;
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    do {
        if ((uint32_t)(v >> 32) != (uint32_t)ref || !(v & (1u << 31)))
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(w, &v, v + 1, memory_order_acquire,
                                                    memory_order_relaxed));
    return 0;
}

__attribute__((noinline)) static int floor_unpin(floor_slot_t *table, uint64_t ref)
{
    _Atomic uint64_t *w = &table[(ref >> 32) & 15].w;
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    do {
        if ((uint32_t)(v >> 32) != (uint32_t)ref || (v & 0x7fffffffu) == 0)
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(w, &v, v - 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return 0;
}

static double run_floor(long iters, unsigned slot)
{
    uint64_t ref = ((uint64_t)slot << 32) | 7u;
    atomic_store_explicit(&floor_table[slot].w, ((uint64_t)7 << 32) | (1u << 31),
                          memory_order_relaxed);
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        if (floor_pin(floor_table, ref) != 0 || floor_unpin(floor_table, ref) != 0) {
            fprintf(stderr, "pinpair: floor pin/unpin failed\n");
            exit(1);
        }
    }
    return (now_s() - t0) / (double)iters * 1e9;
}

static double run_pin(pp_pool_t *pool, pp_ref_t ref, long iters)
{
    void *data;
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
        if (pp_pin(pool, ref, 0, &data) != 0 || pp_unpin(pool, ref) != 0) {
            fprintf(stderr, "pinpair: pin/unpin failed\n");
            exit(1);
        }
    }
    return (now_s() - t0) / (double)iters * 1e9;
}

int main(int argc, char **argv)
{
    int rounds = 32;
    int nentries = 16;
    long iters = 2000000;
    const char *topology = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atol(argv[++i]);
        else if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc)
            nentries = atoi(argv[++i]);
        else if (strcmp(argv[i], "--topology") == 0 && i + 1 < argc)
            topology = argv[++i];
        else {
            fprintf(stderr, "usage: pinpair [--rounds R] [--iters N] [--entries E] [--topology STR]\n");
            return 2;
        }
    }
    if (rounds < 1 || iters < 1 || nentries < 1) {
        fprintf(stderr, "pinpair: rounds, iters and entries must be positive\n");
        return 2;
    }

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.topology = topology;
    pp_pool_t *pool;
    int rc = pp_pool_create(&opt, &pool);
    if (rc != 0) {
        fprintf(stderr, "pinpair: pp_pool_create: %s\n", pp_strerror(rc));
        return 1;
    }
    pp_ref_t *refs = calloc((size_t)nentries, sizeof *refs);
    if (refs == NULL)
        return 1;
    for (int i = 0; i < nentries; i++) {
        void *buf = calloc(1, 4096);
        if (buf == NULL || (rc = pp_put(pool, buf, 4096, NULL, 0, &refs[i])) != 0) {
            fprintf(stderr, "pinpair: pp_put: %s\n", pp_strerror(rc));
            return 1;
        }
    }

    double *bare = calloc((size_t)rounds, sizeof *bare);
    double *pin = calloc((size_t)rounds, sizeof *pin);
    double *flo = calloc((size_t)rounds, sizeof *flo);
    if (bare == NULL || pin == NULL || flo == NULL)
        return 1;
    run_bare(iters / 10);          /* warm up all three */
    run_floor(iters / 10, 0);
    run_pin(pool, refs[0], iters / 10);
    for (int r = 0; r < rounds; r++) {
        bare[r] = run_bare(iters);
        flo[r] = run_floor(iters, (unsigned)r % 16u);
        pin[r] = run_pin(pool, refs[r % nentries], iters);
    }
    qsort(bare, (size_t)rounds, sizeof *bare, cmp_double);
    qsort(pin, (size_t)rounds, sizeof *pin, cmp_double);
    qsort(flo, (size_t)rounds, sizeof *flo, cmp_double);
    double mb = bare[rounds / 2], mp = pin[rounds / 2], mf = flo[rounds / 2];

    printf("pinpair: %d interleaved rounds x %ld pairs, 1 thread, %d entries in turn;"
           " ns per pair: median [min, max]\n", rounds, iters, nentries);
    printf("  %-34s %8.2f  [%.2f, %.2f]\n", "atomic add+sub (private line)", mb,
           bare[0], bare[rounds - 1]);
    printf("  %-34s %8.2f  [%.2f, %.2f]\n", "validated CAS pin+unpin (floor)", mf,
           flo[0], flo[rounds - 1]);
    printf("  %-34s %8.2f  [%.2f, %.2f]\n", "pp_pin+pp_unpin (resident entry)", mp,
           pin[0], pin[rounds - 1]);
    printf("  ratio of medians, pin+unpin / atomic add+sub:  %.2f\n", mp / mb);
    printf("  ratio of medians, floor / atomic add+sub:      %.2f\n", mf / mb);
    printf("  ratio of medians, pin+unpin / floor:           %.2f\n", mp / mf);

    free(bare);
    free(pin);
    free(flo);
    for (int i = 0; i < nentries; i++) {
        if ((rc = pp_release(pool, refs[i])) != 0) {
            fprintf(stderr, "pinpair: pp_release: %s\n", pp_strerror(rc));
            return 1;
        }
    }
    free(refs);
    if ((rc = pp_pool_destroy(pool)) != 0) {
        fprintf(stderr, "pinpair: pp_pool_destroy: %s\n", pp_strerror(rc));
        return 1;
    }
    return 0;
}
