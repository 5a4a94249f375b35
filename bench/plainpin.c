/*
 * plainpin.c -- pins as a user first writes them: one main thread that
 * never registers, N entries each a 1-byte calloc buffer put with pp_put,
 * then random pp_pin(pool, refs[i], 0, &data) + pp_unpin, i drawn in the
 * loop; and tasks of 4 random inputs with pp_pin_many + pp_unpin_many.
 * Against the same loops over an array of {atomic counter, data pointer}
 * (the baseline: no validation, no ref, nothing but the count).
 *
 * Four variants of the pin+unpin loop, interleaved round by round in one
 * process, medians of ns per op reported with their ratio to the baseline:
 *   library   pp_pin and pp_unpin called in libpinpool (the functions)
 *   inline    the same calls with pinpool_inline.h (the inline fast path)
 *   floor     pinbench's cas-floor in this loop: refs of its own in an
 *             array, the same draws, 16-byte records {word, data} in huge
 *             pages, a generation-checked CAS each way -- what any
 *             validated handle costs here, where the ref itself is a
 *             random load before the record's
 *   array     the baseline
 * and the task loop with pp_pin_many against the array.
 * The draws come from the same xorshift stream in each variant, so each
 * touches the same entries in the same order.
 *
 *   plainpin [--parts] [--entries N] [--ops M] [--rounds R] [--csv FILE]
 *
 * --parts measures instead what the inlined pin+unpin adds to the floor in
 * this loop, step by step (parts_loop).
 *
 * docs/performance.md compares its pin+unpin with pinbench's uniform
 * scenario at 1 thread, run on the same machine.
 */
#define _GNU_SOURCE
#include <pinpool.h>
#include <pinpool_inline.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "machine.h"

#define TASK_INPUTS 4

typedef struct slot {
    _Alignas(16) uint64_t count;   /* atomic */
    void *data;
} slot_t;

static _Noreturn void die(const char *what, int rc)
{
    fprintf(stderr, "plainpin: %s: %s\n", what, rc != 0 ? pp_strerror(rc) : "failed");
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The draws: xorshift64, as a user's loop would make them. */
static inline uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uintptr_t g_sink;   /* data pointers summed: the loads are kept */

static double pairs_library(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t ops)
{
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < ops; k++) {
        pp_ref_t ref = refs[next(&x) % n];
        void *data;
        int rc = (pp_pin)(pool, ref, 0, &data);
        if (rc != 0)
            die("pp_pin", rc);
        sink += (uintptr_t)data;
        if ((rc = (pp_unpin)(pool, ref)) != 0)
            die("pp_unpin", rc);
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)ops;
}

static double pairs_inline(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t ops)
{
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < ops; k++) {
        pp_ref_t ref = refs[next(&x) % n];
        void *data;
        int rc = pp_pin(pool, ref, 0, &data);
        if (rc != 0)
            die("pp_pin", rc);
        sink += (uintptr_t)data;
        if ((rc = pp_unpin(pool, ref)) != 0)
            die("pp_unpin", rc);
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)ops;
}

static double pairs_array(slot_t *a, size_t n, size_t ops)
{
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < ops; k++) {
        slot_t *s = &a[next(&x) % n];
        /* acquire / release: what a pin and an unpin order (the pool's). */
        __atomic_fetch_add(&s->count, 1, __ATOMIC_ACQUIRE);
        sink += (uintptr_t)s->data;
        __atomic_fetch_sub(&s->count, 1, __ATOMIC_RELEASE);
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)ops;
}

#define FLOOR_LIVE ((uint64_t)1 << 20)

/* cas-floor's pin and unpin (bench/pinbench_floor.c) of the word *w of a
 * record of generation gen: a generation-checked CAS each way, acquire on
 * the pin and acq_rel on the unpin, as the pool's.  FLOOR_LIVE is the
 * pool's LIVE bit too, so the same calls run on the pool's records. */
static inline void floor_pin(uint64_t *w, uint32_t gen, const char *stale)
{
    uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    do {
        if ((uint32_t)(v >> 32) != gen || !(v & FLOOR_LIVE))
            die(stale, 0);
    } while (!__atomic_compare_exchange_n(w, &v, v + 1, 1, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
}

static inline void floor_unpin(uint64_t *w, uint32_t gen, const char *stale)
{
    uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
    do {
        if ((uint32_t)(v >> 32) != gen || !(v & FLOOR_LIVE))
            die(stale, 0);
    } while (!__atomic_compare_exchange_n(w, &v, v - 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
}
_Static_assert(FLOOR_LIVE == PP__INLINE_LIVE && PP__INLINE_GEN_SHIFT == 32,
               "the floor's word is drawn as the pool's");

/* cas-floor's pin and unpin (bench/pinbench_floor.c), on refs of its own:
 * slot << 32 | generation 1. */
static double pairs_floor(slot_t *rec, const uint64_t *frefs, size_t n, size_t ops)
{
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < ops; k++) {
        uint64_t ref = frefs[next(&x) % n];
        uint64_t i = ref >> 32;
        if (i >= n)
            die("floor: ref out of range", 0);
        slot_t *s = &rec[i];
        floor_pin(&s->count, (uint32_t)ref, "floor: stale");
        sink += (uintptr_t)s->data;
        floor_unpin(&s->count, (uint32_t)ref, "floor: stale");
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)ops;
}

/* --parts: what the inlined pin+unpin adds to the floor in this loop, one
 * step at a time, each on the pool's own records through the pool's refs
 * and the pool's code from pinpool_inline.h, the same draws:
 *   0 floor    cas-floor's CAS each way on the record the ref names
 *              (slot and generation from the ref, the LIVE bit), no other
 *              check -- the records, the refs and their misses alone
 *   1 bounds   + the slot checked against the node's committed slots
 *              (pp__inline_entry)
 *   2 thread   + the thread's registration with the pool (pp__inline_ready)
 *   3 state    + the pool's own pin and unpin of the word: every state
 *              check, one CAS each way (pp__inline_pin_word,
 *              pp__inline_unpin_ok and pp__inline_unpin_cas)
 *   4 lookup   + the unpin's own lookup of the ref, as a separate call
 *              makes it (pp__inline_find again)
 *   5 counts   + the thread's pin and unpin counters (pp__inline_count):
 *              what pp_pin and pp_unpin inline, short of the calls' code
 *   6 inline   pp_pin + pp_unpin with pinpool_inline.h (as "inline" above)
 * Each step's loop is compiled apart, with its step a constant. */
enum { PARTS = 7 };
static const char *const part_name[PARTS] = { "floor", "bounds", "thread", "state", "lookup",
                                              "counts", "inline" };

static inline __attribute__((always_inline)) double parts_loop(pp_pool_t *pool,
                                                               const pp_ref_t *refs, size_t n,
                                                               size_t ops, unsigned step)
{
    const pp__inline_pool_t *f = (const pp__inline_pool_t *)(const void *)pool;
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < ops; k++) {
        pp_ref_t ref = refs[next(&x) % n];
        pp__inline_thread_t *t = NULL;
        pp__inline_entry_t *e;
        if (step >= 2 && (t = pp__inline_ready(pool)) == NULL)
            die("parts: the thread's registration", 0);
        if (step >= 1) {
            if (!pp__inline_entry(pool, ref, &e))
                die("parts: slot not committed", 0);
        } else {
            e = (pp__inline_entry_t *)pp__inline_entry_addr(f, ref);
        }
        if (step >= 3) {
            void *data;
            if (pp__inline_pin_word(t, e, ref, 0, &data) != PP__INLINE_DONE)
                die("parts: pin", 0);
            if (step >= 5)
                pp__inline_count(t, ref, PP__INLINE_COUNT_PINS);
            sink += (uintptr_t)data;
            if (step >= 4 && !pp__inline_find(pool, ref, &t, &e))
                die("parts: second lookup", 0);
            uint64_t w = __atomic_load_n(&e->pw, __ATOMIC_RELAXED);
            if (!pp__inline_unpin_ok(w, ref) || !pp__inline_unpin_cas(e, w))
                die("parts: unpin", 0);
            if (step >= 5)
                pp__inline_count(t, ref, PP__INLINE_COUNT_UNPINS);
            continue;
        }
        /* cas-floor's pin and unpin (pairs_floor), on the pool's word. */
        floor_pin(&e->pw, pp_ref_gen(ref), "parts: stale");
        sink += (uintptr_t)e->data;
        floor_unpin(&e->pw, pp_ref_gen(ref), "parts: stale");
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)ops;
}

#define PARTS_STEP(k)                                                                              \
    static __attribute__((noinline)) double parts_##k(pp_pool_t *pool, const pp_ref_t *refs,       \
                                                      size_t n, size_t ops)                        \
    {                                                                                              \
        return parts_loop(pool, refs, n, ops, k);                                                  \
    }
PARTS_STEP(0)
PARTS_STEP(1)
PARTS_STEP(2)
PARTS_STEP(3)
PARTS_STEP(4)
PARTS_STEP(5)

/* Step k of --parts, one round. */
static double parts_run(unsigned k, pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t ops)
{
    switch (k) {
    case 0: return parts_0(pool, refs, n, ops);
    case 1: return parts_1(pool, refs, n, ops);
    case 2: return parts_2(pool, refs, n, ops);
    case 3: return parts_3(pool, refs, n, ops);
    case 4: return parts_4(pool, refs, n, ops);
    case 5: return parts_5(pool, refs, n, ops);
    default: return pairs_inline(pool, refs, n, ops);
    }
}

static double tasks_pool(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t tasks)
{
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < tasks; k++) {
        pp_ref_t in[TASK_INPUTS];
        void *data[TASK_INPUTS];
        for (unsigned j = 0; j < TASK_INPUTS; j++)
            in[j] = refs[next(&x) % n];
        int rc = pp_pin_many(pool, in, TASK_INPUTS, 0, data);
        if (rc != 0)
            die("pp_pin_many", rc);
        for (unsigned j = 0; j < TASK_INPUTS; j++)
            sink += *(volatile unsigned char *)data[j];
        if ((rc = pp_unpin_many(pool, in, TASK_INPUTS, NULL)) != 0)
            die("pp_unpin_many", rc);
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)tasks;
}

static double tasks_array(slot_t *a, size_t n, size_t tasks)
{
    uint64_t x = 88172645463325252u, t0 = now_ns();
    uintptr_t sink = 0;
    for (size_t k = 0; k < tasks; k++) {
        slot_t *s[TASK_INPUTS];
        for (unsigned j = 0; j < TASK_INPUTS; j++) {
            s[j] = &a[next(&x) % n];
            __atomic_fetch_add(&s[j]->count, 1, __ATOMIC_ACQUIRE);
        }
        for (unsigned j = 0; j < TASK_INPUTS; j++)
            sink += *(volatile unsigned char *)s[j]->data;
        for (unsigned j = 0; j < TASK_INPUTS; j++)
            __atomic_fetch_sub(&s[j]->count, 1, __ATOMIC_RELEASE);
    }
    g_sink += sink;
    return (double)(now_ns() - t0) / (double)tasks;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* --parts: the steps interleaved round by round, each round in another
 * order; medians, each step's cost over the one before it, and the
 * steps' ratios to the floor (step 0). */
static void parts_main(pp_pool_t *pool, const pp_ref_t *refs, size_t n, size_t ops,
                       unsigned rounds, const char *csv, const machine_t *machine)
{
    /* The thread's first pin goes through the library, as a user's does:
     * it registers the thread that the fast path then finds. */
    void *data;
    int rc = pp_pin(pool, refs[0], 0, &data);
    if (rc != 0 || (rc = pp_unpin(pool, refs[0])) != 0)
        die("parts: the first pin", rc);
    double t[PARTS][99], m[PARTS];
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned k = 0; k < PARTS; k++) {
            unsigned step = (k + r) % PARTS;
            t[step][r] = parts_run(step, pool, refs, n, ops);
        }
    for (unsigned k = 0; k < PARTS; k++)
        m[k] = median(t[k], rounds);
    printf("plainpin --parts: %zu entries, %zu random pin+unpin per round, %u rounds, medians, "
           "ns per op, on the pool's records:\n", n, ops, rounds);
    for (unsigned k = 0; k < PARTS; k++)
        printf("  %u %-7s %8.2f   %+7.2f over the step before   %.2fx the floor\n", k,
               part_name[k], m[k], k == 0 ? 0.0 : m[k] - m[k - 1], m[k] / m[0]);
    if (csv == NULL)
        return;
    FILE *f = fopen(csv, "w");
    if (f == NULL)
        die("fopen --csv", 0);
    machine_print(f, machine, "# ");
    fprintf(f, "step,part,ns_per_op\n");
    for (unsigned k = 0; k < PARTS; k++)
        fprintf(f, "%u,%s,%.3f\n", k, part_name[k], m[k]);
    if (fclose(f) != 0)
        die("fclose --csv", 0);
}

static void free_buf(void *data, size_t size, void *ctx)
{
    (void)size, (void)ctx;
    free(data);
}

int main(int argc, char **argv)
{
    size_t n = 1000000, ops = 4000000;
    unsigned rounds = 9;
    const char *csv = NULL;
    int parts = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            ops = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
            csv = argv[++i];
        else if (strcmp(argv[i], "--parts") == 0)
            parts = 1;
        else {
            fprintf(stderr, "usage: plainpin [--parts] [--entries N] [--ops M] [--rounds R] "
                            "[--csv FILE]\n");
            return 2;
        }
    }
    if (n == 0 || ops == 0 || rounds == 0 || rounds > 99) {
        fprintf(stderr, "plainpin: entries, ops and rounds (1..99) must be positive\n");
        return 2;
    }
    machine_t machine;
    machine_describe(&machine);
    machine_print(stdout, &machine, "machine: ");

    static const pp_type_t type = { .name = "plainpin", .free = free_buf };
    pp_pool_t *pool;
    int rc = pp_pool_create(NULL, &pool);
    if (rc != 0)
        die("pp_pool_create", rc);
    pp_ref_t *refs = malloc(n * sizeof *refs);
    uint64_t *frefs = malloc(n * sizeof *frefs);
    slot_t *array = aligned_alloc(64, (n * sizeof *array + 63) / 64 * 64);
    /* The floor's records: 2 MiB aligned, huge pages advised, as
     * cas-floor's (and the pool's hot records). */
    size_t fbytes = (n * sizeof(slot_t) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    slot_t *floor = aligned_alloc(2u << 20, fbytes);
    if (refs == NULL || frefs == NULL || array == NULL || floor == NULL)
        die("malloc", 0);
    (void)madvise(floor, fbytes, MADV_HUGEPAGE);   /* advice only */
    for (size_t i = 0; i < n; i++) {
        void *buf = calloc(1, 1);
        if (buf == NULL)
            die("calloc", 0);
        if ((rc = pp_put(pool, buf, 1, &type, 0, &refs[i])) != 0)
            die("pp_put", rc);
        array[i].count = 0;
        array[i].data = buf;   /* the same data pointer */
        floor[i].count = ((uint64_t)1 << 32) | FLOOR_LIVE;
        floor[i].data = buf;
        frefs[i] = ((uint64_t)i << 32) | 1u;
    }

    if (parts) {
        parts_main(pool, refs, n, ops, rounds, csv, &machine);
        goto out;
    }
    enum { V = 6 };
    double t[V][99];
    size_t tasks = ops / TASK_INPUTS;
    for (unsigned r = 0; r < rounds; r++) {
        /* Each round in another order, so none always runs first. */
        for (unsigned k = 0; k < V; k++) {
            switch ((k + r) % V) {
            case 0: t[0][r] = pairs_library(pool, refs, n, ops); break;
            case 1: t[1][r] = pairs_inline(pool, refs, n, ops); break;
            case 2: t[2][r] = pairs_array(array, n, ops); break;
            case 3: t[3][r] = tasks_pool(pool, refs, n, tasks); break;
            case 4: t[4][r] = tasks_array(array, n, tasks); break;
            case 5: t[5][r] = pairs_floor(floor, frefs, n, ops); break;
            }
        }
    }
    double m[V];
    for (unsigned k = 0; k < V; k++)
        m[k] = median(t[k], rounds);
    printf("plainpin: %zu entries of 1 byte, %zu random pin+unpin per round, %u rounds, "
           "medians, ns per op:\n", n, ops, rounds);
    printf("  pin+unpin  library %8.2f  inline %8.2f  floor %8.2f  array %8.2f\n", m[0], m[1],
           m[5], m[2]);
    printf("    library/floor %.2f  inline/floor %.2f  floor/array %.2f  library/array %.2f  "
           "inline/array %.2f\n", m[0] / m[5], m[1] / m[5], m[5] / m[2], m[0] / m[2],
           m[1] / m[2]);
    printf("  task of %d  pp_pin_many %8.2f  array %8.2f   ratio %.2f\n", TASK_INPUTS, m[3],
           m[4], m[3] / m[4]);
    if (csv != NULL) {
        FILE *f = fopen(csv, "w");
        if (f == NULL)
            die("fopen --csv", 0);
        machine_print(f, &machine, "# ");
        fprintf(f, "variant,ns_per_op\npairs_library,%.3f\npairs_inline,%.3f\npairs_floor,%.3f\n"
                   "pairs_array,%.3f\ntask_pool,%.3f\ntask_array,%.3f\n", m[0], m[1], m[5],
                m[2], m[3], m[4]);
        if (fclose(f) != 0)
            die("fclose --csv", 0);
    }

out:
    for (size_t i = 0; i < n; i++)
        if ((rc = pp_release(pool, refs[i])) != 0)
            die("pp_release", rc);
    if ((rc = pp_pool_destroy(pool)) != 0)
        die("pp_pool_destroy", rc);
    free(refs);
    free(frefs);
    free(array);
    free(floor);
    return g_sink == 1 ? 3 : 0;   /* (never 1: keeps the sum) */
}
