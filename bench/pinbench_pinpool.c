/*
 * pinbench_pinpool.c -- the product: pinpool with default options.
 *
 *   pinpool       keys are refs; an op is pp_pin + pp_unpin, a task is
 *                 pp_pin_many of its 4 inputs + the reads + pp_unpin_many,
 *                 churn is pp_put of a malloc'd buffer + pp_pin + pp_unpin +
 *                 pp_release (the pool's reclaimer then frees the buffer)
 *   pinpool-qsbr  the same, and pp_quiescent after every op, as a scheduler
 *                 in QSBR mode calls it between tasks
 *   pinpool-scope the task scenario only: a task is a scope (pp_scope_init)
 *                 that pins its 4 inputs with pp_scope_pin_many, reads them,
 *                 and pp_scope_end; against pinpool's task, the ledger's cost
 *
 * A worker registers with the pool before the start barrier (a thread's
 * first call registers it: one allocation, kept out of the timed region).
 *
 * bench/CMakeLists.txt compiles this file a second time with PB_INLINE=1:
 * that copy includes pinpool_inline.h, so its pp_pin, pp_unpin,
 * pp_pin_many and pp_unpin_many are the inline fast paths, and defines
 * pinpool-inline.
 *
 * bench/sidebyside compiles this file a second time with PB_OLD=1, against
 * an older library's public header, with -Dpp_put=old_pp_put and so on for
 * every function that header declares (bench/CMakeLists.txt), and links
 * that library with its symbols renamed: that copy defines pinpool-old and
 * pinpool-qsbr-old, the same code calling the older library.
 */
#include "pinbench.h"

#include <pinpool.h>
#if PB_INLINE
#include <pinpool_inline.h>
#endif

#include <stdlib.h>

#if PB_INLINE
#define PB_IMPL_POOL pb_impl_pinpool_inline
#define PB_NAME_SUFFIX "-inline"
#define PB_WHAT_POOL "the same, with pinpool_inline.h: pins and batches inlined"
#elif PB_OLD
#define PB_IMPL_POOL pb_impl_pinpool_old
#define PB_IMPL_QSBR pb_impl_pinpool_qsbr_old
#define PB_NAME_SUFFIX "-old"
#define PB_WHAT_POOL "pinpool, the older library linked beside it (bench/sidebyside)"
#define PB_WHAT_QSBR "pinpool-qsbr, the older library linked beside it"
#else
#define PB_IMPL_POOL pb_impl_pinpool
#define PB_IMPL_QSBR pb_impl_pinpool_qsbr
#define PB_NAME_SUFFIX ""
#define PB_WHAT_POOL "the library, default options (pp_pin/pp_unpin, pp_pin_many for a task)"
#define PB_WHAT_QSBR "the same, each worker calling pp_quiescent after every op"
#endif

typedef struct pool_table {
    pp_pool_t *pool;
    pp_ref_t *refs;             /* entry i's ref */
    size_t n;
    unsigned char *data;        /* entries' data, n * PB_DATA_BYTES; NULL: shared */
} pool_table_t;

static void no_free(void *data, size_t size, void *ctx)
{
    (void)data, (void)size, (void)ctx;
}

/* The table's entries point into one array (as the baselines' do, so that
 * every implementation reads its data from the same layout), or all at one
 * shared buffer (the metadata measurement): nothing to free per entry. */
static const pp_type_t slab_type = { .name = "pinbench-slab", .free = no_free };

static void *pool_create(size_t n, void *shared)
{
    pool_table_t *t = pb_calloc(1, sizeof *t);
    /* Default options: NULL, never a pp_options_t.  This keeps the PB_OLD
     * copy independent of that struct's layout, which changes between
     * versions (reclaim_backlog was added to it), should it ever be built
     * against a newer header than its library's.  The only structure this
     * file hands the library is pp_type_t (slab_type), and refs. */
    int rc = pp_pool_create(NULL, &t->pool);
    if (rc != 0)
        pb_die_pp("pp_pool_create", rc);
    t->n = n;
    t->refs = pb_zalloc(n * sizeof *t->refs);
    t->data = shared != NULL ? NULL : pb_zalloc(n * PB_DATA_BYTES);
    for (size_t i = 0; i < n; i++) {
        void *data = shared != NULL ? shared : t->data + i * PB_DATA_BYTES;
        rc = pp_put(t->pool, data, shared != NULL ? 0 : PB_DATA_BYTES, &slab_type, 0,
                    &t->refs[i]);
        if (rc != 0)
            pb_die_pp("pp_put", rc);
    }
    return t;
}

static void pool_destroy(void *table)
{
    pool_table_t *t = table;
    int rc;
    for (size_t i = 0; i < t->n; i++)
        if ((rc = pp_release(t->pool, t->refs[i])) != 0)
            pb_die_pp("pp_release", rc);
    if ((rc = pp_pool_destroy(t->pool)) != 0)
        pb_die_pp("pp_pool_destroy", rc);
    free(t->refs);
    free(t->data);
    free(t);
}

static uint64_t pool_key(void *table, size_t index)
{
    return ((pool_table_t *)table)->refs[index];
}

static void pool_thread_init(pb_worker_t *w)
{
    pool_table_t *t = w->table;
    int rc;
    if ((rc = pp_pin(t->pool, t->refs[0], 0, NULL)) != 0)
        pb_die_pp("pp_pin (registration)", rc);
    if ((rc = pp_unpin(t->pool, t->refs[0])) != 0)
        pb_die_pp("pp_unpin (registration)", rc);
}

#if !PB_INLINE
static void qsbr_thread_init(pb_worker_t *w)
{
    pool_thread_init(w);
    pp_quiescent(((pool_table_t *)w->table)->pool);     /* QSBR mode from now on */
}

#endif

static void pool_thread_exit(pb_worker_t *w)
{
    int rc = pp_thread_exit(((pool_table_t *)w->table)->pool);
    if (rc != 0)
        pb_die_pp("pp_thread_exit", rc);
}

/* Frees of churned entries would otherwise run during the next run. */
static void pool_settle(void *table)
{
    int rc = pp_pool_drain(((pool_table_t *)table)->pool, 60000);
    if (rc != 0)
        pb_die_pp("pp_pool_drain", rc);
}

/* The loops, written once; qsbr is a constant at each call site, so the
 * compiler makes two copies without the test. */
static inline void pairs_loop(pb_worker_t *w, const uint64_t *keys, unsigned n, int qsbr)
{
    pp_pool_t *pool = ((pool_table_t *)w->table)->pool;
    for (unsigned i = 0; i < n; i++) {
        void *data;
        int rc = pp_pin(pool, keys[i], 0, &data);
        if (rc != 0)
            pb_die_pp("pp_pin", rc);
        if ((rc = pp_unpin(pool, keys[i])) != 0)
            pb_die_pp("pp_unpin", rc);
        if (qsbr)
            pp_quiescent(pool);
    }
}

static inline void tasks_loop(pb_worker_t *w, const uint64_t *keys, unsigned n, int qsbr)
{
    pp_pool_t *pool = ((pool_table_t *)w->table)->pool;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        const pp_ref_t *in = &keys[i * PB_TASK_INPUTS];
        void *data[PB_TASK_INPUTS];
        int rc = pp_pin_many(pool, in, PB_TASK_INPUTS, 0, data);
        if (rc != 0)
            pb_die_pp("pp_pin_many", rc);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(data[k]);
        if ((rc = pp_unpin_many(pool, in, PB_TASK_INPUTS, NULL)) != 0)
            pb_die_pp("pp_unpin_many", rc);
        if (qsbr)
            pp_quiescent(pool);
    }
    w->sink += sink;
}

static inline void churn_loop(pb_worker_t *w, unsigned n, int qsbr)
{
    pp_pool_t *pool = ((pool_table_t *)w->table)->pool;
    for (unsigned i = 0; i < n; i++) {
        uint64_t *buf = pb_malloc(PB_DATA_BYTES);
        buf[0] = w->next_key++;
        pp_ref_t ref;
        void *data;
        int rc = pp_put(pool, buf, PB_DATA_BYTES, NULL, 0, &ref);
        if (rc != 0)
            pb_die_pp("pp_put", rc);
        if ((rc = pp_pin(pool, ref, 0, &data)) != 0)
            pb_die_pp("pp_pin", rc);
        if ((rc = pp_unpin(pool, ref)) != 0)
            pb_die_pp("pp_unpin", rc);
        if ((rc = pp_release(pool, ref)) != 0)
            pb_die_pp("pp_release", rc);
        if (qsbr)
            pp_quiescent(pool);
    }
}

static void pool_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    pairs_loop(w, keys, n, 0);
}

static void pool_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    tasks_loop(w, keys, n, 0);
}

static void pool_churn(pb_worker_t *w, unsigned n)
{
    churn_loop(w, n, 0);
}

#if !PB_INLINE
static void qsbr_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    pairs_loop(w, keys, n, 1);
}

static void qsbr_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    tasks_loop(w, keys, n, 1);
}

static void qsbr_churn(pb_worker_t *w, unsigned n)
{
    churn_loop(w, n, 1);
}
#endif

const pb_impl_t PB_IMPL_POOL = {
    .name = "pinpool" PB_NAME_SUFFIX,
    .what = PB_WHAT_POOL,
    .create = pool_create,
    .destroy = pool_destroy,
    .key = pool_key,
    .thread_init = pool_thread_init,
    .thread_exit = pool_thread_exit,
    .settle = pool_settle,
    .pairs = pool_pairs,
    .tasks = pool_tasks,
    .churn = pool_churn,
};

#if !PB_INLINE
const pb_impl_t PB_IMPL_QSBR = {
    .name = "pinpool-qsbr" PB_NAME_SUFFIX,
    .what = PB_WHAT_QSBR,
    .create = pool_create,
    .destroy = pool_destroy,
    .key = pool_key,
    .thread_init = qsbr_thread_init,
    .thread_exit = pool_thread_exit,
    .settle = pool_settle,
    .pairs = qsbr_pairs,
    .tasks = qsbr_tasks,
    .churn = qsbr_churn,
};

#endif

#if !PB_OLD && !PB_INLINE
/* A task through a scope: what the ledger costs against pp_pin_many and
 * pp_unpin_many (the older library of bench/sidebyside may have no scopes,
 * so only this build has it). */
static void scope_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    pp_pool_t *pool = ((pool_table_t *)w->table)->pool;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        pp_scope_t s;
        pp_scope_init(&s, pool);
        void *data[PB_TASK_INPUTS];
        int rc = pp_scope_pin_many(&s, &keys[i * PB_TASK_INPUTS], PB_TASK_INPUTS, 0, data);
        if (rc != 0)
            pb_die_pp("pp_scope_pin_many", rc);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(data[k]);
        if ((rc = pp_scope_end(&s)) != 0)
            pb_die_pp("pp_scope_end", rc);
    }
    w->sink += sink;
}

const pb_impl_t pb_impl_pinpool_scope = {
    .name = "pinpool-scope",
    .what = "the task scenario through a scope: pp_scope_pin_many, pp_scope_end",
    .create = pool_create,
    .destroy = pool_destroy,
    .key = pool_key,
    .thread_init = pool_thread_init,
    .thread_exit = pool_thread_exit,
    .settle = pool_settle,
    .tasks = scope_tasks,
};
#endif
