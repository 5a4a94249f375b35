/*
 * no_grace -- the proof that the sanitizer builds catch a reclamation bug.
 *
 * A QSBR reader takes escaped access (pp_get) and stays inside its epoch
 * section; the main thread releases the entry's last owner, then waits
 * until the entry's reclaimer has either freed it or polled the epoch a few
 * times.  Then the reader reads the data and only afterwards quiesces.
 *
 *  - Correct library: the free waits for the reader's quiescent point, so
 *    the read is valid and the program exits 0 (also checked: the free
 *    happened afterwards, exactly once).
 *  - Linked to the no_grace copy (tests/seeded/no_grace.patch): the reclaimer frees at
 *    once, the reader reads freed memory, and ASan (heap-use-after-free) or
 *    TSan (race with free) must report it.  The test suite runs this
 *    program against that build and expects the report.
 */
#include <pinpool.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIZE 4096

static pp_pool_t *pool;
static pp_ref_t ref;
static _Atomic int stage;          /* 0 start, 1 reader inside, 2 read now, 3 done */
static _Atomic int frees;
static _Atomic long checksum;

static void count_free(void *data, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    free(data);
    atomic_fetch_add_explicit(&frees, 1, memory_order_release);
}

static const pp_type_t type = {.name = "seeded", .free = count_free};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void wait_stage(int want)
{
    double deadline = now_s() + 30.0;
    while (atomic_load_explicit(&stage, memory_order_acquire) != want) {
        if (now_s() > deadline) {
            fprintf(stderr, "no_grace: timed out waiting for stage %d\n", want);
            exit(3);
        }
        sched_yield();
    }
}

static void *reader(void *arg)
{
    (void)arg;
    unsigned char *data;
    pp_quiescent(pool);                        /* QSBR mode */
    if (pp_get(pool, ref, (void **)&data) != 0) {
        fprintf(stderr, "no_grace: pp_get failed\n");
        exit(3);
    }
    atomic_store_explicit(&stage, 1, memory_order_release);
    wait_stage(2);
    long sum = 0;
    for (size_t i = 0; i < SIZE; i++)          /* the read the grace period protects */
        sum += data[i];
    atomic_store_explicit(&checksum, sum, memory_order_relaxed);
    pp_quiescent(pool);                        /* now the free may happen */
    return NULL;
}

int main(void)
{
    pp_options_t opt = PP_OPTIONS_INIT;
    if (pp_pool_create(&opt, &pool) != 0)
        return 3;
    unsigned char *buf = malloc(SIZE);
    if (buf == NULL)
        return 3;
    memset(buf, 7, SIZE);
    if (pp_put(pool, buf, SIZE, &type, PP_ON_NODE(0), &ref) != 0)
        return 3;

    pthread_t th;
    pthread_create(&th, NULL, reader, NULL);
    wait_stage(1);
    if (pp_release(pool, ref) != 0)
        return 3;

    /* Wait for the reclaimer to free it (seeded bug) or to poll the epoch
     * several times while the reader holds it back (correct library). */
    pp_node_stats_t st = PP_NODE_STATS_INIT;
    pp_node_stats(pool, 0, &st);
    uint64_t polls0 = st.grace_polls;
    double deadline = now_s() + 30.0;
    for (;;) {
        pp_node_stats(pool, 0, &st);
        if (atomic_load_explicit(&frees, memory_order_acquire) > 0 ||
            st.grace_polls >= polls0 + 3)
            break;
        if (now_s() > deadline) {
            fprintf(stderr, "no_grace: reclaimer neither freed nor polled\n");
            return 3;
        }
        sched_yield();
    }
    int freed_early = atomic_load_explicit(&frees, memory_order_acquire);
    atomic_store_explicit(&stage, 2, memory_order_release);
    pthread_join(th, NULL);

    if (pp_pool_drain(pool, 10000) != 0 || atomic_load(&frees) != 1) {
        fprintf(stderr, "no_grace: entry not freed exactly once\n");
        return 1;
    }
    pp_pool_destroy(pool);
    if (freed_early) {
        fprintf(stderr, "no_grace: the entry was freed while a reader was inside its section\n");
        return 1;
    }
    if (atomic_load(&checksum) != 7L * SIZE) {
        fprintf(stderr, "no_grace: reader saw wrong bytes\n");
        return 1;
    }
    printf("no_grace: reader held reclamation back; freed once, afterwards\n");
    return 0;
}
