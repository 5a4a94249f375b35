/*
 * pinpair -- a first look at the cost of pp_pin + pp_unpin of a resident
 * entry on one thread, against one bare atomic add + sub on a private
 * counter, measured in the same process, interleaved round by round
 * (A B A B ...), medians reported (see ../shared/BENCH.md: ratios, never a
 * lone absolute time).  The full benchmark (pinbench) is its own program.
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
    if (bare == NULL || pin == NULL)
        return 1;
    run_bare(iters / 10);          /* warm up both */
    run_pin(pool, refs[0], iters / 10);
    for (int r = 0; r < rounds; r++) {
        bare[r] = run_bare(iters);
        pin[r] = run_pin(pool, refs[r % nentries], iters);
    }
    qsort(bare, (size_t)rounds, sizeof *bare, cmp_double);
    qsort(pin, (size_t)rounds, sizeof *pin, cmp_double);
    double mb = bare[rounds / 2], mp = pin[rounds / 2];

    printf("pinpair: %d interleaved rounds x %ld pairs, 1 thread, %d entries in turn;"
           " ns per pair: median [min, max]\n", rounds, iters, nentries);
    printf("  %-34s %8.2f  [%.2f, %.2f]\n", "atomic add+sub (private line)", mb,
           bare[0], bare[rounds - 1]);
    printf("  %-34s %8.2f  [%.2f, %.2f]\n", "pp_pin+pp_unpin (resident entry)", mp,
           pin[0], pin[rounds - 1]);
    printf("  ratio of medians, pin+unpin / atomic add+sub:  %.2f\n", mp / mb);

    free(bare);
    free(pin);
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
