/*
 * pinbench_atomic.c -- the two bare-counter baselines.
 *
 *   atomic-limit  a pin is one atomic add (acquire) on a cache line private
 *                 to the thread and an unpin one atomic sub (release): no
 *                 lookup, no sharing.  Nothing counted can cost less, so
 *                 pinpool / atomic-limit is what pinpool's bookkeeping costs.
 *                 Its task reads the same 64 bytes per input from buffers
 *                 private to the thread.  No churn (nothing to create).
 *   naive-array   entry i's pin count is counts[i] in an array of atomic
 *                 counters (8 to a cache line), its data at data + 64 i; no
 *                 check that i is valid or alive, no way to reclaim, no
 *                 churn.  What pinning costs when done unsafely; every
 *                 thread of the hot scenario hits the same counter.
 */
#include "pinbench.h"

#include <stdlib.h>

/* ---- atomic-limit ------------------------------------------------------- */

static void *limit_create(size_t n, void *shared)
{
    (void)n, (void)shared;
    return pb_calloc(1, 1);           /* no table: a distinct non-NULL handle */
}

static void limit_destroy(void *table)
{
    free(table);
}

/* Acquire on the add and release on the sub, as a pin count needs: what
 * the holder reads and writes stays between them.  Same in naive-array. */
static void limit_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    (void)keys;
    for (unsigned i = 0; i < n; i++) {
        atomic_fetch_add_explicit(&w->line, 1, memory_order_acquire);
        atomic_fetch_sub_explicit(&w->line, 1, memory_order_release);
    }
}

static void limit_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    (void)keys;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            atomic_fetch_add_explicit(&w->line, 1, memory_order_acquire);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(w->priv[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            atomic_fetch_sub_explicit(&w->line, 1, memory_order_release);
    }
    w->sink += sink;
}

const pb_impl_t pb_impl_atomic_limit = {
    .name = "atomic-limit",
    .what = "atomic add + sub on a thread-private line, no lookup (the limit)",
    .create = limit_create,
    .destroy = limit_destroy,
    .pairs = limit_pairs,
    .tasks = limit_tasks,
};

/* ---- naive-array -------------------------------------------------------- */

typedef struct naive_table {
    _Atomic uint64_t *counts;
    unsigned char *data;        /* n * PB_DATA_BYTES, or NULL: every entry at shared */
    void *shared;
} naive_table_t;

static void *naive_create(size_t n, void *shared)
{
    naive_table_t *t = pb_calloc(1, sizeof *t);
    t->counts = pb_zalloc(n * sizeof *t->counts);
    t->shared = shared;
    if (shared == NULL)
        t->data = pb_zalloc(n * PB_DATA_BYTES);
    return t;
}

static void naive_destroy(void *table)
{
    naive_table_t *t = table;
    free(t->counts);
    free(t->data);
    free(t);
}

static inline const void *naive_pin(naive_table_t *t, uint64_t i)
{
    atomic_fetch_add_explicit(&t->counts[i], 1, memory_order_acquire);
    return t->data != NULL ? t->data + i * PB_DATA_BYTES : t->shared;
}

static inline void naive_unpin(naive_table_t *t, uint64_t i)
{
    atomic_fetch_sub_explicit(&t->counts[i], 1, memory_order_release);
}

static void naive_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    naive_table_t *t = w->table;
    for (unsigned i = 0; i < n; i++) {
        naive_pin(t, keys[i]);
        naive_unpin(t, keys[i]);
    }
}

static void naive_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    naive_table_t *t = w->table;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t *in = &keys[i * PB_TASK_INPUTS];
        const void *data[PB_TASK_INPUTS];
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            data[k] = naive_pin(t, in[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(data[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            naive_unpin(t, in[k]);
    }
    w->sink += sink;
}

const pb_impl_t pb_impl_naive_array = {
    .name = "naive-array",
    .what = "atomic counters indexed by entry: no validation, no reclamation",
    .create = naive_create,
    .destroy = naive_destroy,
    .pairs = naive_pairs,
    .tasks = naive_tasks,
};
