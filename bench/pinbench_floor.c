/*
 * pinbench_floor.c -- cas-floor: the floor of any validated pin that hands
 * back a data pointer, laid out as the pool lays out its hot state.
 *
 *   cas-floor  entry i is a 16-byte record { w, data } in one table,
 *              16-byte aligned, in a region aligned to 2 MiB with
 *              transparent huge pages advised (the pool's segments are
 *              2 MiB, THP advised, each holding the hot records of 32768
 *              entries).  w is generation (bits 32..63) | LIVE (bit 20) |
 *              count (bits 0..18), as the pool's word is.  The key is a
 *              ref shaped like pinpool's (slot in bits 32..57, generation
 *              in bits 0..31); a pin decodes it, checks the slot against
 *              the table's size, loads w, checks the generation, LIVE and
 *              room in the count, CASes the count up and returns data.
 *              An unpin checks the same and CASes it down.  No flags
 *              beyond LIVE, no statistics, no slow paths, no reclamation,
 *              no churn.
 *
 * What it separates: cas-floor / naive-array is what validation and a data
 * pointer cost in themselves -- a validated pin must load its record
 * before it can CAS it, and a task must load the record before it knows
 * where the data is (two dependent misses, where naive-array computes the
 * data's address from the index) -- and pinpool / cas-floor is what
 * pinpool adds above that.  Like naive-array the pin and unpin are inlined
 * into the loops: the floor pays for no call, pinpool's pp_pin does.
 * (bench/pinpair's floor is the same CAS on one of 16 slots, through a
 * call.)
 */
#define _GNU_SOURCE               /* MADV_HUGEPAGE */
#include "pinbench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FLOOR_LIVE      ((uint64_t)1 << 20)
#define FLOOR_COUNT     ((uint64_t)0x7FFFF)          /* bits 0..18 */
#define FLOOR_GEN_SHIFT 32
#define FLOOR_GEN       1u                           /* every record's */
#define FLOOR_SLOT_MAX  ((uint64_t)1 << 26)          /* a ref's 26 slot bits */
#define FLOOR_ALIGN     ((size_t)2 << 20)            /* 2 MiB: one huge page */

typedef struct floor_rec {
    _Alignas(16) _Atomic uint64_t w;
    void *data;                 /* written once at create, read after the pin */
} floor_rec_t;

_Static_assert(sizeof(floor_rec_t) == 16, "a record is 16 bytes, as the pool's");

typedef struct floor_table {
    floor_rec_t *recs;          /* n records, at a 2 MiB boundary in map */
    size_t n;
    void *map;                  /* the whole mapping, for munmap */
    size_t map_bytes;
    unsigned char *data;        /* n * PB_DATA_BYTES, or NULL: every record at shared */
} floor_table_t;

/* The records' region.  Mapped 2 MiB larger than needed and used from its
 * first 2 MiB boundary: the slack around it is never touched, so it costs
 * address space only, and one munmap of the whole mapping frees it all. */
static void floor_map(floor_table_t *t, size_t n)
{
    size_t bytes = (n * sizeof *t->recs + FLOOR_ALIGN - 1) & ~(FLOOR_ALIGN - 1);
    t->map_bytes = bytes + FLOOR_ALIGN;
    t->map = mmap(NULL, t->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                  -1, 0);
    if (t->map == MAP_FAILED)
        pb_die("cas-floor: mmap of %zu bytes: %s", t->map_bytes, strerror(errno));
    uintptr_t a = ((uintptr_t)t->map + FLOOR_ALIGN - 1) & ~(uintptr_t)(FLOOR_ALIGN - 1);
    t->recs = (floor_rec_t *)a;
    /* Advice only: with THP off or not built in (EINVAL), the records sit
     * in small pages and the run goes on, as the pool's would. */
    (void)madvise(t->recs, bytes, MADV_HUGEPAGE);
    /* Every page faulted in now (huge ones where granted), not in a timed
     * access; as pb_zalloc does for the other tables. */
    memset(t->recs, 0, bytes);
}

static void *floor_create(size_t n, void *shared)
{
    if (n == 0 || n > FLOOR_SLOT_MAX)
        pb_die("cas-floor: %zu entries (1 .. %llu)", n, (unsigned long long)FLOOR_SLOT_MAX);
    floor_table_t *t = pb_calloc(1, sizeof *t);
    t->n = n;
    floor_map(t, n);
    if (shared == NULL)
        t->data = pb_zalloc(n * PB_DATA_BYTES);
    uint64_t w = ((uint64_t)FLOOR_GEN << FLOOR_GEN_SHIFT) | FLOOR_LIVE;
    for (size_t i = 0; i < n; i++) {
        atomic_init(&t->recs[i].w, w);
        t->recs[i].data = shared != NULL ? shared : t->data + i * PB_DATA_BYTES;
    }
    return t;
}

static void floor_destroy(void *table)
{
    floor_table_t *t = table;
    if (munmap(t->map, t->map_bytes) != 0)
        pb_die_errno("cas-floor: munmap", errno);
    free(t->data);
    free(t);
}

/* Entry i's ref: slot i above the generation, as pinpool's ref puts its
 * node:6 | slot:26 above gen:32 (node 0 here). */
static uint64_t floor_key(void *table, size_t index)
{
    (void)table;
    return ((uint64_t)index << FLOOR_GEN_SHIFT) | FLOOR_GEN;
}

/* Never reached in a run (every key is valid and every count balanced):
 * out of line, so that the checks cost a compare and a branch each. */
__attribute__((cold, noinline)) static _Noreturn void floor_bad(const char *op, uint64_t key,
                                                                uint64_t w)
{
    pb_die("cas-floor: %s of key %#llx refused (word %#llx)", op, (unsigned long long)key,
           (unsigned long long)w);
}

/* The key's record, after the bounds check any ref from outside needs.
 * The loops pass the table's fields as locals: an atomic operation is a
 * compiler barrier, and through t they would be loaded again each time. */
static inline floor_rec_t *floor_rec(floor_rec_t *recs, size_t n, uint64_t key)
{
    uint64_t i = key >> FLOOR_GEN_SHIFT;
    if (i >= n)
        floor_bad("lookup", key, 0);
    return &recs[i];
}

static inline int floor_valid(uint64_t w, uint64_t key)
{
    return (uint32_t)(w >> FLOOR_GEN_SHIFT) == (uint32_t)key && (w & FLOOR_LIVE) != 0;
}

/* Acquire on the pin's CAS, acq_rel on the unpin's: what the holder reads
 * stays between them, as in pinpool (and naive-array's add and sub).  The
 * checks are made again on every retry: the word may have changed. */
static inline void *floor_pin(floor_rec_t *r, uint64_t key)
{
    uint64_t w = atomic_load_explicit(&r->w, memory_order_relaxed);
    do {
        if (!floor_valid(w, key) || (w & FLOOR_COUNT) >= FLOOR_COUNT)
            floor_bad("pin", key, w);
    } while (!atomic_compare_exchange_weak_explicit(&r->w, &w, w + 1, memory_order_acquire,
                                                    memory_order_relaxed));
    return r->data;
}

static inline void floor_unpin(floor_rec_t *r, uint64_t key)
{
    uint64_t w = atomic_load_explicit(&r->w, memory_order_relaxed);
    do {
        if (!floor_valid(w, key) || (w & FLOOR_COUNT) == 0)
            floor_bad("unpin", key, w);
    } while (!atomic_compare_exchange_weak_explicit(&r->w, &w, w - 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
}

/* The data pointer is kept (summed into sink): a pin hands it back, as
 * pp_pin stores it, and unused its load would be optimised away. */
static void floor_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    const floor_table_t *t = w->table;
    floor_rec_t *recs = t->recs;
    size_t entries = t->n;
    uintptr_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        floor_rec_t *r = floor_rec(recs, entries, keys[i]);
        sink += (uintptr_t)floor_pin(r, keys[i]);
        floor_unpin(r, keys[i]);
    }
    w->sink += sink;
}

/* The best pp_pin_many / pp_unpin_many can do: every input's record is
 * prefetched (for writing: the CAS will own the line) before the first is
 * pinned, so the four records' misses overlap; only then are the data
 * addresses known and read. */
static void floor_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    const floor_table_t *t = w->table;
    floor_rec_t *recs = t->recs;
    size_t entries = t->n;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t *in = &keys[i * PB_TASK_INPUTS];
        floor_rec_t *rec[PB_TASK_INPUTS];
        const void *data[PB_TASK_INPUTS];
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++) {
            rec[k] = floor_rec(recs, entries, in[k]);
            __builtin_prefetch(rec[k], 1, 3);
        }
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            data[k] = floor_pin(rec[k], in[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(data[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            floor_unpin(rec[k], in[k]);
    }
    w->sink += sink;
}

const pb_impl_t pb_impl_cas_floor = {
    .name = "cas-floor",
    .what = "validated CAS on 16-byte records {word, data}, huge pages, no stats/reclaim"
            " (the floor)",
    .create = floor_create,
    .destroy = floor_destroy,
    .key = floor_key,
    .pairs = floor_pairs,
    .tasks = floor_tasks,
};
