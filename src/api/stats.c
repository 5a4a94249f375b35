/*
 * stats.c -- pp_stat (one entry), pp_pool_stats (totals), pp_node_stats
 * (one node) and pp_pins_dump (the tracked pins, track.c).
 *
 * Counters live where they are written without contention: per thread and
 * node for the operations of users (pp__tcount_t, single writer each), per
 * node for what its reclaimer does.  pp_pool_stats adds them up under the
 * registry lock (so no record is added while it walks the list);
 * pp_node_stats reads one node's share only.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"

/* The sizes of version 1 (pinpool_stats.h): version 2 appended to
 * pp_node_stats_t, which ends pp_stats_t. */
#define V1_NODE_SIZE offsetof(pp_node_stats_t, swap_write_ns)
#define V1_STATS_SIZE (offsetof(pp_stats_t, total) + V1_NODE_SIZE)

/* The q-quantile as its bucket's upper bound, never above the largest lag
 * seen (max). */
static uint64_t lag_quantile(const uint64_t *hist, uint64_t count, double q,
                             uint64_t max)
{
    if (count == 0)
        return 0;
    uint64_t rank = (uint64_t)((double)count * q);
    if (rank >= count)
        rank = count - 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < PP__LAG_BUCKETS; b++) {
        seen += hist[b];
        if (seen > rank)
            return pp__reclaim_lag_top(b) < max ? pp__reclaim_lag_top(b) : max;
    }
    return max;
}

int pp_stat(pp_pool_t *pool, pp_ref_t ref, pp_entry_info_t *out)
{
    if (out == NULL)
        return PP_EINVAL;
    pp__entry_t *e;
    pp__thread_t *t;
    int rc = pp__begin(pool, ref, &e, &t);
    if (rc != 0)
        return rc;
    /* The section keeps the slot from being recycled while we read it. */
    pp__epoch_enter(t);
    /* acquire: pairs with the putter's release; size and type are set. */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    /* A queued entry is already retired: a section that begins after the
     * retirement does not hold its reclamation back, so its fields may be
     * changing.  Only entries not yet queued (alive, or dead but pinned --
     * their queueing comes after this check) are safe to describe. */
    if (pp__word_gen(pw) != pp_ref_gen(ref) || !(pw & PP__F_LIVE) || (pw & PP__F_QUEUED)) {
        rc = PP_ESTALE;
    } else {
        pp__cold_t *c = pp__cold(e);
        uint64_t ow = pp__atomic_load_relaxed(&c->ow);
        memset(out, 0, sizeof *out);
        out->size = c->size;
        out->type = c->type;
        out->node = pp_ref_node(ref);
        out->pins = pp__hot_pins(pool, pp_ref_node(ref), e, pw);
        /* A dropped entry is dead before its owners are taken (evict.c). */
        out->owners = pp__word_gen(ow) == pp_ref_gen(ref) && !(pw & PP__F_DEAD)
                          ? pp__ow_owners(ow) : 0;
        out->state = ((pw & PP__F_RESIDENT) ? PP_STATE_RESIDENT : 0) |
                     ((pw & PP__F_ESCAPED) ? PP_STATE_ESCAPED : 0) |
                     ((pw & PP__F_DIRTY) ? PP_STATE_DIRTY : 0) |
                     ((pw & PP__F_DEAD) ? PP_STATE_DEAD : 0) |
                     ((pw & PP__F_SWAPPED) ? PP_STATE_SWAPPED : 0) |
                     ((pw & PP__F_LOADING) ? PP_STATE_LOADING : 0) |
                     ((pw & PP__F_EVICTING) ? PP_STATE_EVICTING : 0);
    }
    pp__epoch_leave(t);
    return rc;
}

static void stats_add(pp_node_stats_t *to, const pp_node_stats_t *from)
{
    to->entries += from->entries;
    to->resident_bytes += from->resident_bytes;
    to->swapped_bytes += from->swapped_bytes;
    to->puts += from->puts;
    to->retains += from->retains;
    to->releases += from->releases;
    to->gets += from->gets;
    to->pins += from->pins;
    to->unpins += from->unpins;
    to->evictions_written += from->evictions_written;
    to->evictions_clean += from->evictions_clean;
    to->evictions_advised += from->evictions_advised;
    to->evictions_abandoned += from->evictions_abandoned;
    to->drops += from->drops;
    to->loads += from->loads;
    to->load_waits += from->load_waits;
    to->swap_bytes_written += from->swap_bytes_written;
    to->swap_raw_written += from->swap_raw_written;
    to->swap_bytes_read += from->swap_bytes_read;
    to->swap_used_bytes += from->swap_used_bytes;
    to->checksum_failures += from->checksum_failures;
    to->io_errors += from->io_errors;
    to->queued += from->queued;
    to->frees += from->frees;
    to->reclaim_queue_depth += from->reclaim_queue_depth;
    to->dead_in_io += from->dead_in_io;
    to->grace_polls += from->grace_polls;
    to->slots += from->slots;
    to->retired_slots += from->retired_slots;
    to->hot_entries += from->hot_entries;
    to->hot_promotions += from->hot_promotions;
    to->hot_demotions += from->hot_demotions;
    to->hot_full += from->hot_full;
    to->backlog_bytes += from->backlog_bytes;
    if (from->backlog_peak > to->backlog_peak)
        to->backlog_peak = from->backlog_peak;
    to->backlog_waiting += from->backlog_waiting;
    to->backlog_waits += from->backlog_waits;
    to->backlog_wait_ns += from->backlog_wait_ns;
    if (from->backlog_wait_max_ns > to->backlog_wait_max_ns)
        to->backlog_wait_max_ns = from->backlog_wait_max_ns;
    to->backlog_refused += from->backlog_refused;
    to->io_requests += from->io_requests;
    to->io_submits += from->io_submits;
    to->io_inflight += from->io_inflight;
    if (from->io_inflight_peak > to->io_inflight_peak)
        to->io_inflight_peak = from->io_inflight_peak;
    to->io_load_bytes += from->io_load_bytes;
    to->io_load_recycled += from->io_load_recycled;
    if (from->io_load_bytes_peak > to->io_load_bytes_peak)
        to->io_load_bytes_peak = from->io_load_bytes_peak;
    to->lag_count += from->lag_count;
    to->lag_total_ns += from->lag_total_ns;
    to->swap_write_ns += from->swap_write_ns;
    to->swap_read_ns += from->swap_read_ns;
    if (from->lag_max_ns > to->lag_max_ns)
        to->lag_max_ns = from->lag_max_ns;
}

/* Checks the caller's size and version: only a pair this library knows is
 * filled (want: this version's size, v1: version 1's).  Reports any other
 * through the pool's hook. */
static int stats_check(pp_pool_t *pool, const char *call, size_t size,
                       unsigned version, size_t want, size_t v1)
{
    if ((version == PP_STATS_VERSION && size == want) || (version == 1 && size == v1))
        return 0;
    pp__report(pool, "pinpool: %s: size %zu version %u not known; expected size %zu "
               "version %u (start from the header's initializer)",
               call, size, version, want, PP_STATS_VERSION);
    return PP_EINVAL;
}

/* The figures of node n that its own threads (reclaimer, swap thread) and
 * puts keep; hist gets its lag histogram.  s is zeroed before. */
static void node_read(pp_pool_t *pool, unsigned n, pp_node_stats_t *s, uint64_t *hist)
{
    pp__node_t *node = pool->nodes[n];
    /* acquire: pairs with the reclaimer's release; a caller that sees a
     * free counted also sees what the free function did. */
    s->frees = pp__atomic_load_acquire(&node->rc.frees);
    s->grace_polls = pp__atomic_load_relaxed(&node->rc.grace_polls);
    int64_t dio = pp__atomic_load_relaxed(&node->prod.dead_in_io);
    s->dead_in_io = dio > 0 ? (uint64_t)dio : 0;
    s->lag_count = pp__atomic_load_relaxed(&node->rc.lag_count);
    s->lag_total_ns = pp__atomic_load_relaxed(&node->rc.lag_total_ns);
    s->lag_max_ns = pp__atomic_load_relaxed(&node->rc.lag_max_ns);
    for (unsigned b = 0; b < PP__LAG_BUCKETS; b++)
        hist[b] = pp__atomic_load_relaxed(&node->rc.lag_hist[b]);
    s->lag_p50_ns = lag_quantile(hist, s->lag_count, 0.50, s->lag_max_ns);
    s->lag_p99_ns = lag_quantile(hist, s->lag_count, 0.99, s->lag_max_ns);
    s->resident_bytes = pp__atomic_load_relaxed(&node->put.resident_bytes);
    s->backlog_bytes = pp__atomic_load_relaxed(&node->put.backlog);
    s->backlog_peak = pp__atomic_load_relaxed(&node->put.backlog_peak);
    s->backlog_waiting = pp__atomic_load_relaxed(&node->bl.waiters);
    s->backlog_waits = pp__atomic_load_relaxed(&node->bl.waits);
    s->backlog_wait_ns = pp__atomic_load_relaxed(&node->bl.wait_ns);
    s->backlog_wait_max_ns = pp__atomic_load_relaxed(&node->bl.wait_max_ns);
    s->backlog_refused = pp__atomic_load_relaxed(&node->bl.refused);
    /* An entry that dies right after its eviction commits may be
     * subtracted by its reclaimer an instant before the swap thread adds
     * it: never show that transient as a huge number. */
    int64_t swapped = (int64_t)pp__atomic_load_relaxed(&node->sw.swapped_bytes);
    s->swapped_bytes = swapped > 0 ? (uint64_t)swapped : 0;
    s->evictions_written = pp__atomic_load_relaxed(&node->sw.ev_written);
    s->evictions_clean = pp__atomic_load_relaxed(&node->sw.ev_clean);
    s->evictions_advised = pp__atomic_load_relaxed(&node->sw.ev_advised);
    s->evictions_abandoned = pp__atomic_load_relaxed(&node->sw.ev_abandoned);
    s->drops = pp__atomic_load_relaxed(&node->sw.drops);
    s->loads = pp__atomic_load_relaxed(&node->sw.loads);
    s->load_waits = pp__atomic_load_relaxed(&node->sw.load_waits);
    s->swap_bytes_written = pp__atomic_load_relaxed(&node->sw.sw_written);
    s->swap_raw_written = pp__atomic_load_relaxed(&node->sw.sw_raw);
    s->swap_bytes_read = pp__atomic_load_relaxed(&node->sw.sw_read);
    s->swap_used_bytes = pp__atomic_load_relaxed(&node->sw.sw_used);
    s->checksum_failures = pp__atomic_load_relaxed(&node->sw.csum_fail);
    s->io_errors = pp__atomic_load_relaxed(&node->sw.io_errors);
    s->io_requests = pp__atomic_load_relaxed(&node->sw.io_requests);
    s->io_submits = pp__atomic_load_relaxed(&node->sw.io_submits);
    s->io_inflight = pp__atomic_load_relaxed(&node->sw.io_inflight);
    s->io_inflight_peak = pp__atomic_load_relaxed(&node->sw.io_inflight_peak);
    s->io_load_bytes = pp__atomic_load_relaxed(&node->sw.io_load_bytes);
    s->io_load_recycled = pp__atomic_load_relaxed(&node->sw.io_load_recycled);
    s->io_load_bytes_peak = pp__atomic_load_relaxed(&node->sw.io_load_bytes_peak);
    uint32_t slots = pp__atomic_load_relaxed(&node->put.next_slot);
    s->slots = slots < PP__MAX_SLOTS ? slots : PP__MAX_SLOTS;
    s->retired_slots = pp__atomic_load_relaxed(&node->rc.retired_slots);
    s->hot_entries = pp__hot_in_use(pool, n);
    s->hot_promotions = pp__atomic_load_relaxed(&node->hot.promotions);
    s->hot_demotions = pp__atomic_load_relaxed(&node->hot.demotions);
    s->hot_full = pp__atomic_load_relaxed(&node->hot.full);
    s->reclaimer_tid = pp__atomic_load_relaxed(&node->rc.tid);
    s->cpu_bound = pp__atomic_load_relaxed(&node->rc.cpu_bound);
    s->mem_bound = pp__atomic_load_relaxed(&node->mem_bound);
    if (pool->swap) {
        s->swap_write_ns = pp__busy_ns(node, true);
        s->swap_read_ns = pp__busy_ns(node, false);
    }
}

/* The counts that the threads keep for one node, summed. */
typedef struct pp__tsum {
    uint64_t puts, pins, unpins, retains, releases, gets, queued;
} pp__tsum_t;

/* Adds one thread's counts for a node.  The caller holds the registry lock
 * (so no record is added while it walks the list). */
static void tsum_add(pp__tsum_t *to, pp__tcount_t *c)
{
    to->puts += pp__atomic_load_relaxed(&c->puts);
    to->pins += pp__atomic_load_relaxed(&c->pins);
    to->unpins += pp__atomic_load_relaxed(&c->unpins);
    to->retains += pp__atomic_load_relaxed(&c->retains);
    to->releases += pp__atomic_load_relaxed(&c->releases);
    to->gets += pp__atomic_load_relaxed(&c->gets);
    to->queued += pp__atomic_load_relaxed(&c->queued);
}

/* Adds a node's thread counts to s, with the figures derived from them and
 * the node's frees (read before them). */
static void tsum_apply(pp_node_stats_t *s, const pp__tsum_t *t, uint64_t frees)
{
    s->puts += t->puts;
    s->pins += t->pins;
    s->unpins += t->unpins;
    s->retains += t->retains;
    s->releases += t->releases;
    s->gets += t->gets;
    s->queued += t->queued;
    s->entries += t->puts >= frees ? t->puts - frees : 0;
    s->reclaim_queue_depth += t->queued >= frees ? t->queued - frees : 0;
}

/* One node's figures, in the latest version. */
static void node_fill(pp_pool_t *pool, unsigned node, pp_node_stats_t *out)
{
    memset(out, 0, sizeof *out);
    /* Reclaimer-side figures first: a free counted here was queued (and
     * put) before, so reading it first never shows more frees than puts. */
    uint64_t hist[PP__LAG_BUCKETS];
    node_read(pool, node, out, hist);
    pp__tsum_t ts = {0};
    pthread_mutex_lock(&pool->reg_lock);
    for (pp__thread_t *t = pp__atomic_load_relaxed(&pool->threads); t != NULL; t = t->next)
        tsum_add(&ts, &t->count[node]);
    pthread_mutex_unlock(&pool->reg_lock);
    tsum_apply(out, &ts, out->frees);
}

/* The pool's figures, in the latest version. */
static void pool_fill(pp_pool_t *pool, pp_stats_t *out)
{
    memset(out, 0, sizeof *out);
    out->nodes = pool->nnodes;
    out->topology_is_this_system = pool->thissystem;
    out->mem_limit = pool->mem_limit;
    out->swap_limit = pool->swap_limit;
    out->swap = pool->swap;
    if (pool->swap) {
        out->io_engine = pool->io_engine;
        out->io_depth = pool->io_engine == PP_IO_ENGINE_URING ? pool->io_depth : 1;
        snprintf(out->io_engine_why, sizeof out->io_engine_why, "%s", pool->io_why);
    }
    out->resident_reserved = pp__atomic_load_relaxed(&pool->resident);
    out->resident_peak = pp__atomic_load_relaxed(&pool->resident_peak);
    out->room_waits = pp__atomic_load_relaxed(&pool->room_waits);
    out->room_enomem = pp__atomic_load_relaxed(&pool->room_enomem);
    out->reclaim_backlog = pool->backlog_bound;
    out->backlog_mark = pool->backlog_mark;

    /* The nodes' own figures go straight into total; only what entries
     * and the queue depth need later is kept per node. */
    uint64_t frees[PP_MAX_NODES];
    pp__tsum_t ts[PP_MAX_NODES];
    uint64_t total_hist[PP__LAG_BUCKETS] = {0};
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp_node_stats_t s;
        uint64_t hist[PP__LAG_BUCKETS];
        memset(&s, 0, sizeof s);
        /* Reclaimer-side figures first, as in pp_node_stats. */
        node_read(pool, n, &s, hist);
        frees[n] = s.frees;
        stats_add(&out->total, &s);
        for (unsigned b = 0; b < PP__LAG_BUCKETS; b++)
            total_hist[b] += hist[b];
    }

    memset(ts, 0, sizeof ts);
    pthread_mutex_lock(&pool->reg_lock);
    for (pp__thread_t *t = pp__atomic_load_relaxed(&pool->threads); t != NULL; t = t->next) {
        for (unsigned n = 0; n < pool->nnodes; n++)
            tsum_add(&ts[n], &t->count[n]);
    }
    out->threads = pp__thread_in_use(pool);
    pthread_mutex_unlock(&pool->reg_lock);

    for (unsigned n = 0; n < pool->nnodes; n++)
        tsum_apply(&out->total, &ts[n], frees[n]);
    out->total.lag_p50_ns = lag_quantile(total_hist, out->total.lag_count, 0.50,
                                         out->total.lag_max_ns);
    out->total.lag_p99_ns = lag_quantile(total_hist, out->total.lag_count, 0.99,
                                         out->total.lag_max_ns);
}

int pp_node_stats(pp_pool_t *pool, unsigned node, pp_node_stats_t *out)
{
    if (pool == NULL || out == NULL)
        return PP_EINVAL;
    size_t size = out->size;
    unsigned version = out->version;
    int rc = stats_check(pool, "pp_node_stats", size, version, sizeof *out, V1_NODE_SIZE);
    if (rc != 0)
        return rc;
    if (node >= pool->nnodes)
        return PP_EINVAL;
    pp_node_stats_t s;
    node_fill(pool, node, &s);
    s.size = size;
    s.version = version;
    memcpy(out, &s, size);               /* version 1: its part only */
    return 0;
}

int pp_pool_stats(pp_pool_t *pool, pp_stats_t *out)
{
    if (pool == NULL || out == NULL)
        return PP_EINVAL;
    size_t size = out->size;
    unsigned version = out->version;
    int rc = stats_check(pool, "pp_pool_stats", size, version, sizeof *out, V1_STATS_SIZE);
    if (rc != 0)
        return rc;
    pp_stats_t s;
    pool_fill(pool, &s);
    s.size = size;
    s.version = version;
    s.total.size = version == 1 ? V1_NODE_SIZE : sizeof s.total;
    s.total.version = version;
    memcpy(out, &s, size);               /* version 1: its part only */
    return 0;
}

int pp_pins_dump(pp_pool_t *pool, FILE *out)
{
    if (pool == NULL || out == NULL)
        return PP_EINVAL;
    if (!pool->fast.full)
        return PP_ENOTSUP;
    return pp__track_dump(pool, out);
}
