/*
 * pool.c -- creating, draining, validating and destroying a pool.
 */
#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "os/swapdev.h"

#define PP__POOL_FLAGS (PP_TRACK_PINS | PP_SWAP_COMPRESS | PP_SWAP_DIRECT)

static _Atomic uint64_t next_serial = 1;

static pp__node_t *node_new(pp_pool_t *pool, unsigned n)
{
    bool bound;
    pp__node_t *node = pp__topology_node_alloc(pool, n, sizeof *node, &bound);
    if (node == NULL)
        return NULL;
    node->pool = pool;
    node->index = n;
    if (pp__table_init(pool, node) != 0) {
        pp__topology_node_free(pool, node, sizeof *node);
        return NULL;
    }
    if (pp__hot_init(pool, node) != 0) {
        pp__table_free(pool, node);
        pp__topology_node_free(pool, node, sizeof *node);
        return NULL;
    }
    if (!bound)
        pp__atomic_store_relaxed(&node->mem_bound, 0);
    return node;
}

/* Frees everything; stops the swap threads and reclaimers if running. */
static void pool_free(pp_pool_t *pool)
{
    pp__swapper_stop(pool);
    pp__reclaim_stop(pool);
    pp__xfer_close(pool);
    pp__swap_close(pool);
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL)
            continue;
        pp__hot_free(pool, node);
        pp__table_free(pool, node);
        pp__topology_node_free(pool, node, sizeof *node);
        pool->nodes[n] = NULL;
    }
    pp__tevent_free_all(pool);
    pp__thread_free_all(pool);
    pp__track_free(pool);
    pthread_mutex_destroy(&pool->trace_lock);
    sem_destroy(&pool->started);
    pp__topology_free(pool);
    pp__alloc_free(pool);
}

/* PINPOOL_TRACE=path: the process's first pool traces to path, each
 * later one to path.2, path.3 and so on, so that none overwrites
 * another's file. */
static int env_trace(pp_pool_t *pool, const char *path)
{
    static _Atomic unsigned traced;
    unsigned k = pp__atomic_add_relaxed(&traced, 1u);
    if (k == 0)
        return pp_trace_start(pool, path, 0);
    size_t len = strlen(path) + 12;
    char *p = pp__alloc_bytes(len);
    if (p == NULL)
        return PP_ENOMEM;
    snprintf(p, len, "%s.%u", path, k + 1);
    int rc = pp_trace_start(pool, p, 0);
    pp__alloc_free(p);
    return rc;
}

int pp_pool_create(const pp_options_t *opt, pp_pool_t **out)
{
    static const pp_options_t defaults = PP_OPTIONS_INIT;
    pp_options_t eff;                    /* opt, and the environment's options */
    const char *trace;                   /* PINPOOL_TRACE */
    int rc = pp__env_options(opt != NULL ? opt : &defaults, &eff, &trace);
    if (rc != 0)
        return rc;
    pp__swapdev_t *dev = NULL;
    if (eff.swap_dir != NULL && (dev = pp__swapdev_file_new()) == NULL)
        return PP_ENOMEM;
    rc = pp__pool_create_dev(&eff, dev, out);
    if (rc == 0 && trace != NULL && (rc = env_trace(*out, trace)) != 0) {
        /* Reported by pp_trace_start; the pool is not made. */
        (void)pp_pool_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int pp_pool_create_inline(const pp_options_t *opt, pp_pool_t **out, unsigned abi)
{
    if (abi != PP_INLINE_ABI) {
        pp__report_opt(opt,
                       "pinpool: pinpool_inline.h of fast-path layout %u, this library has %u: "
                       "rebuild against the headers of the library it runs with",
                       abi, PP_INLINE_ABI);
        if (out != NULL)
            *out = NULL;
        return PP_ENOTSUP;
    }
    return pp_pool_create(opt, out);
}

int pp__pool_create_dev(const pp_options_t *opt, pp__swapdev_t *dev, pp_pool_t **out)
{
    static const pp_options_t defaults = PP_OPTIONS_INIT;
    if (opt == NULL)
        opt = &defaults;
    bool swap = opt->swap_dir != NULL;
    if (out == NULL || (opt->flags & ~PP__POOL_FLAGS) != 0 || (swap && opt->mem_limit == 0) ||
        (swap && dev == NULL) || (!swap && dev != NULL) ||
        opt->io_engine > PP_IO_ENGINE_THREADS || opt->io_depth > PP_IO_DEPTH_MAX) {
        if (dev != NULL)
            dev->close(dev);
        return PP_EINVAL;
    }
    *out = NULL;

    pp_pool_t *pool = pp__alloc_aligned(PP__CACHELINE, sizeof *pool);
    if (pool == NULL) {
        if (dev != NULL)
            dev->close(dev);
        return PP_ENOMEM;
    }
    pool->fast.serial = pp__atomic_add_relaxed(&next_serial, 1);
    pool->fast.abi = PP_INLINE_ABI;
    pool->hot_after = 2;
    pool->mem_limit = opt->mem_limit;
    pool->swap = swap;
    pool->dev = dev;                     /* closed by pool_free from here on */
    pool->compress = swap && (opt->flags & PP_SWAP_COMPRESS) != 0;
    pool->swap_limit = opt->swap_limit;
    pool->high_wm = opt->mem_limit - opt->mem_limit / 16;
    pool->low_wm = opt->mem_limit - opt->mem_limit / 8;
    ck_ec32_init(&pool->room_ec, 0);
    pool->report = opt->report;
    pool->report_ctx = opt->report_ctx;
    pp__debug_yield_env();               /* PINPOOL_YIELD (debug builds) */
    const char *env = getenv("PINPOOL_TRACK_PINS");
    pool->fast.full = (opt->flags & PP_TRACK_PINS) != 0 ||
                      (env != NULL && strcmp(env, "1") == 0);

    /* Locks and semaphore first, so pool_free can always run. */
    if (pthread_mutex_init(&pool->track_lock, NULL) != 0) {
        if (dev != NULL)
            dev->close(dev);
        pp__alloc_free(pool);
        return PP_ENOMEM;
    }
    if (pthread_mutex_init(&pool->trace_lock, NULL) != 0) {
        pthread_mutex_destroy(&pool->track_lock);
        if (dev != NULL)
            dev->close(dev);
        pp__alloc_free(pool);
        return PP_ENOMEM;
    }
    if (pp__epoch_init(pool) != 0) {
        pthread_mutex_destroy(&pool->trace_lock);
        pthread_mutex_destroy(&pool->track_lock);
        if (dev != NULL)
            dev->close(dev);
        pp__alloc_free(pool);
        return PP_ENOMEM;
    }
    if (sem_init(&pool->started, 0, 0) != 0) {
        pp__thread_free_all(pool);
        pthread_mutex_destroy(&pool->trace_lock);
        pthread_mutex_destroy(&pool->track_lock);
        if (dev != NULL)
            dev->close(dev);
        pp__alloc_free(pool);
        return PP_ENOMEM;
    }

    int rc = pp__topology_load(pool, opt->topology);
    if (rc != 0) {
        pool_free(pool);
        return rc;
    }
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pool->nodes[n] = node_new(pool, n);
        if (pool->nodes[n] == NULL) {
            pool_free(pool);
            return PP_ENOMEM;
        }
    }
    if (swap) {
        rc = pp__swap_open(pool, opt, dev);
        if (rc == 0)
            rc = pp__xfer_open(pool, opt);   /* the I/O engine */
        if (rc != 0) {
            pool_free(pool);
            return rc;
        }
    }
    pp__backlog_init(pool, opt->reclaim_backlog);
    rc = pp__reclaim_start(pool);
    if (rc == 0)
        rc = pp__swapper_start(pool);
    if (rc != 0) {
        pool_free(pool);
        return rc;
    }
    pp__thread_registry_add(pool);
    *out = pool;
    return 0;
}

/* ------------------------------------------------------------------------ */

struct pp__pinned_scan {
    size_t pinned;
};

static void find_pinned(pp_pool_t *pool, unsigned n, pp__entry_t *e, void *arg)
{
    struct pp__pinned_scan *scan = arg;
    /* acquire: pairs with the putter's release (slot field initialised). */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    if (pw & PP__F_HOT) {
        /* No call runs: the hot counters go back to the word, exact. */
        pp__hot_demote(pool, n, e);
        /* acquire: as above. */
        pw = pp__atomic_load_acquire(&e->pw);
    }
    if (!(pw & PP__F_LIVE) || pp__pw_pins(pw) == 0)
        return;
    pp_ref_t ref = pp__ref_make(n, pp__cold(e)->slot, pp__word_gen(pw));
    scan->pinned++;
    if (!pool->fast.full || pp__track_report_ref(pool, ref) == 0)
        pp__report(pool,
                   "pinpool: destroy: ref 0x%016" PRIx64 " (node %u slot %" PRIu32
                   ") still holds %" PRIu32 " pin(s)%s",
                   ref, n, pp__cold(e)->slot, pp__pw_pins(pw),
                   pool->fast.full ? "" : " (enable PP_TRACK_PINS to see where)");
}

int pp_pool_destroy(pp_pool_t *pool)
{
    if (pool == NULL)
        return PP_EINVAL;
    if (pp__in_callback())
        return PP_EDEADLK;               /* it would wait for this very thread */

    /* Refuse while anything is pinned; the pool stays intact. */
    struct pp__pinned_scan scan = {0};
    for (unsigned n = 0; n < pool->nnodes; n++)
        pp__table_foreach(pool, n, find_pinned, &scan);
    if (scan.pinned != 0) {
        pp__report(pool, "pinpool: destroy refused: %zu entr%s still pinned",
                   scan.pinned, scan.pinned == 1 ? "y is" : "ies are");
        return PP_EBUSY;
    }
    if (pool->trace != NULL)
        (void)pp_trace_stop(pool);       /* a failure is reported there */

    pp__thread_registry_remove(pool);     /* exiting threads no longer touch it */
    pp__thread_tls_forget(pool);          /* nor does this one */

    /* From here on only callbacks call the pool; none queues a load after
     * the swap threads' last round (pp__load_start).  seq_cst: see there.
     * The wait is for a push in progress, a few instructions. */
    pp__atomic_store_seq_cst(&pool->io_closed, 1);
    /* acquire: pairs with the callbacks' release of the count. */
    while (pp__atomic_load_acquire(&pool->cb_loads) != 0)
        sched_yield();

    /* The swap threads end their I/O (queueing entries that died during
     * it), then each reclaimer drains its queue and frees what is still
     * owned, dropping swap copies. */
    pp__swapper_stop(pool);
    /* No call runs and no swap thread: everything must hold. */
    PP__EXPENSIVE(pp__pool_is_valid(pool));
    pp__reclaim_stop(pool);
    /* Every DISCARD entry was freed, by its reclaimer or the sweep. */
    PP__CHECK(pp__atomic_load_relaxed(&pool->discard_entries) == 0 &&
              pp__atomic_load_relaxed(&pool->discard_dying) == 0);
    uint64_t leaked = 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        /* Every queued entry was freed and subtracted its charge. */
        PP__CHECK(pp__atomic_load_relaxed(&node->put.backlog) == 0);
        uint64_t k = pp__atomic_load_relaxed(&node->rc.leaked_owned);
        leaked += k;
        for (uint64_t i = 0; i < k && i < 4; i++)
            pp__report(pool, "pinpool: destroy: ref 0x%016" PRIx64
                       " still had owners; freed", node->rc.leaked_first[i]);
    }
    if (leaked != 0)
        pp__report(pool, "pinpool: destroy: %" PRIu64 " entr%s still had owners (leaked owners); freed",
                   leaked, leaked == 1 ? "y" : "ies");
    pool_free(pool);
    return 0;
}

/* ------------------------------------------------------------------------ */

/* Drained: no eviction is between its commit and the end of its free, no
 * dead entry waits for its I/O to end, and none is queued.  The counts are
 * read first: an entry dead_in_io no longer counts was pushed before
 * (pp__ioend_finish), so the queue depth read next includes it. */
static bool drained(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        /* acquire: pairs with the eviction's release of its tail count
         * (its free and accounting happen before our return). */
        if (pp__atomic_load_acquire(&pool->nodes[n]->sw.evict_tail) != 0)
            return false;
        /* acquire: pairs with pp__ioend_finish's release of the decrement. */
        if (pp__atomic_load_acquire(&pool->nodes[n]->prod.dead_in_io) != 0)
            return false;
    }
    pp_stats_t st = PP_STATS_INIT;
    pp_pool_stats(pool, &st);
    return st.total.reclaim_queue_depth == 0;
}

int pp_pool_drain(pp_pool_t *pool, int timeout_ms)
{
    if (pool == NULL)
        return PP_EINVAL;
    if (pp__in_callback())
        return PP_EDEADLK;               /* the frees may wait for this thread */
    pp__thread_t *t = pp__thread_get(pool);
    if (t != NULL)
        pp__epoch_end(t);
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                       : pp__wait_now_ns() + (uint64_t)timeout_ms * 1000000u;
    /* Entries queued after this call started only make us wait longer;
     * every entry queued before it is freed when the depth reaches 0. */
    struct timespec nap = {0, 50000};
    while (!drained(pool)) {
        if (pp__wait_now_ns() >= deadline)
            return PP_EBUSY;
        nanosleep(&nap, NULL);
    }
    /* Other calls may run: the invariants of each word alone. */
    PP__EXPENSIVE(pp__pool_words_valid(pool));
    return 0;
}

/* ------------------------------------------------------------------------ */

struct pp__valid_scan {
    bool ok;
    bool quiescent;                          /* no call runs: check across words too */
    uint32_t hot_holders[PP__HOT_SLOTS];     /* HOT entries of the node per slot */
};

static void check_entry(pp_pool_t *pool, unsigned n, pp__entry_t *e, void *arg)
{
    (void)pool, (void)n;
    struct pp__valid_scan *v = arg;
    /* acquire: pairs with the last writer's release of each word, so a
     * validation run after the pool's users stopped sees their final state. */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    uint64_t ow = pp__atomic_load_acquire(&pp__cold(e)->ow);
    bool live = pw & PP__F_LIVE, dead = pw & PP__F_DEAD, queued = pw & PP__F_QUEUED;
    if (pw & PP__F_HOT) {
        /* HOT: alive, resident, no I/O, no write pin. */
        if (!live || dead || queued || !(pw & PP__F_RESIDENT) || (pw & PP__F_BUSY) ||
            (pw & PP__F_WPIN) || pp__hot_index(pw) >= PP__HOT_SLOTS)
            v->ok = false;
        else if (v->quiescent)
            v->hot_holders[pp__hot_index(pw)]++;   /* checked against the taken slots */
        return;
    }
    if (!live && (pw & ~((uint64_t)UINT32_MAX << PP__GEN_SHIFT)) != 0)
        v->ok = false;                      /* a free slot has no flags, no pins */
    if (queued && (!dead || pp__pw_pins(pw) != 0))
        v->ok = false;
    if (live && dead && !queued && pp__pw_pins(pw) == 0 && !(pw & PP__F_BUSY))
        v->ok = false;                      /* dead and free to go, yet never queued: a leak */
    if ((pw & PP__F_WPIN) && pp__pw_pins(pw) == 0)
        v->ok = false;                      /* WPIN goes with the last pin */
    if (v->quiescent && live && pp__word_gen(pw) == pp__word_gen(ow) &&
        dead != (pp__ow_owners(ow) == 0) && !(dead && (pw & PP__F_EVICTING)))
        v->ok = false;                      /* dead exactly when owners reached 0 (a
                                               release drops the owner, then kills;
                                               a drop in progress, which holds
                                               EVICTING, kills, then takes them) */
    if (live && pp__word_gen(pw) == 0)
        v->ok = false;
    bool resident = pw & PP__F_RESIDENT;
    if (live && pp__pw_pins(pw) != 0 && !resident)
        v->ok = false;                      /* pinned implies resident */
    if ((pw & PP__F_EVICTING) && !resident)
        v->ok = false;
    if ((pw & PP__F_LOADING) && resident)
        v->ok = false;
    if (live && !resident && !(pw & PP__F_SWAPPED))
        v->ok = false;                      /* the only copy is on disk */
    if (queued && (pw & PP__F_BUSY))
        v->ok = false;
    if (live && !resident && (pw & PP__F_DIRTY))
        v->ok = false;
}

bool pp__pool_is_valid(pp_pool_t *pool)
{
    struct pp__valid_scan v = {true, true, {0}};
    for (unsigned n = 0; n < pool->nnodes; n++) {
        memset(v.hot_holders, 0, sizeof v.hot_holders);
        pp__table_foreach(pool, n, check_entry, &v);
        /* Each hot slot taken is held by exactly one HOT entry (a retired
         * slot, whose tags ran out, by none), and no demotion is left
         * registered in any. */
        if (!pp__hot_slots_valid(pool, n, v.hot_holders))
            v.ok = false;
    }
    return v.ok;
}

bool pp__pool_words_valid(pp_pool_t *pool)
{
    struct pp__valid_scan v = {true, false, {0}};
    for (unsigned n = 0; n < pool->nnodes; n++)
        pp__table_foreach(pool, n, check_entry, &v);
    return v.ok;
}
