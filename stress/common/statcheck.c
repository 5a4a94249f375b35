/*
 * stress/common/statcheck.c -- the exact checks of pp_pool_stats
 * (statcheck.h).
 */
#include "common/statcheck.h"
#include "common/fail.h"

#include "testing/testhooks.h"   /* PP__LAG_SAMPLE */

#include <inttypes.h>
#include <stdio.h>

void cnt_add(cnt_t *to, const cnt_t *c)
{
    to->puts += c->puts;
    to->pins += c->pins;
    to->unpins += c->unpins;
    to->retains += c->retains;
    to->releases += c->releases;
    to->gets += c->gets;
}

void cnt_check_balanced(const char *who, const cnt_t *tot)
{
    if (tot->pins != tot->unpins)
        fail_at(who, "internal: program pins %" PRIu64 " != unpins %" PRIu64, tot->pins,
                tot->unpins);
    if (tot->puts + tot->retains != tot->releases)
        fail_at(who, "internal: puts %" PRIu64 " + retains %" PRIu64 " != releases %" PRIu64,
                tot->puts, tot->retains, tot->releases);
}

void statloc_at(statloc_t *l, unsigned node, unsigned nnodes)
{
    if (node < nnodes)
        snprintf(l->where, sizeof l->where, "node %u", node);
    else
        snprintf(l->where, sizeof l->where, "total");
}

void stat_eq(const statloc_t *l, const char *field, uint64_t got, uint64_t want)
{
    if (got == want)
        return;
    if (l->topo != NULL)
        fail_at(l->who, "pp_pool_stats %s.%s = %" PRIu64 ", expected %" PRIu64 " (topology %s)",
                l->where, field, got, want, l->topo);
    else
        fail_at(l->who, "pp_pool_stats %s: %s = %" PRIu64 ", expected %" PRIu64, l->where, field,
                got, want);
}

void stat_ge(const statloc_t *l, const char *field, uint64_t got, uint64_t want, const char *what)
{
    if (got < want)
        fail_at(l->who, "pp_pool_stats %s.%s = %" PRIu64 ", but the program saw %" PRIu64
                " %s (topology %s)", l->where, field, got, want, what,
                l->topo ? l->topo : "?");
}

int stat_lag_count_ok(uint64_t lag_count, uint64_t frees)
{
    return !(lag_count > frees || lag_count < frees / PP__LAG_SAMPLE);
}

#define NODE_FIELDS(X) \
    X(entries) X(resident_bytes) X(swapped_bytes) X(puts) X(retains) X(releases) \
    X(gets) X(pins) X(unpins) X(evictions_written) X(evictions_clean) \
    X(evictions_abandoned) X(drops) X(loads) X(load_waits) X(swap_bytes_written) \
    X(swap_raw_written) X(swap_bytes_read) X(swap_used_bytes) X(checksum_failures) \
    X(io_errors) X(queued) X(frees) X(reclaim_queue_depth) X(dead_in_io) X(grace_polls) X(slots) \
    X(lag_count) X(lag_total_ns) X(backlog_bytes) X(backlog_waits) X(backlog_wait_ns) \
    X(backlog_refused)

/* Peaks and maxima: the total is the largest node's. */
#define NODE_MAXIMA(X) X(backlog_peak) X(backlog_wait_max_ns)

int stat_read(pp_pool_t *pool, pp_stats_t *st, pp_node_stats_t *node)
{
    *st = (pp_stats_t)PP_STATS_INIT;
    int rc = pp_pool_stats(pool, st);
    for (unsigned n = 0; rc == 0 && n < st->nodes; n++) {
        node[n] = (pp_node_stats_t)PP_NODE_STATS_INIT;
        rc = pp_node_stats(pool, n, &node[n]);
    }
    return rc;
}

void stat_check_sums(const char *who, const pp_stats_t *st, const pp_node_stats_t *node,
                     unsigned nnodes)
{
#define SUMCHECK(f)                                                                      \
    do {                                                                                 \
        uint64_t sum__ = 0;                                                              \
        for (unsigned n = 0; n < nnodes; n++)                                            \
            sum__ += node[n].f;                                                          \
        if (sum__ != st->total.f)                                                        \
            fail_at(who, "pp_pool_stats total.%s = %" PRIu64 " but the nodes sum to %" PRIu64, \
                    #f, (uint64_t)st->total.f, sum__);                                   \
    } while (0);
    NODE_FIELDS(SUMCHECK)
#undef SUMCHECK
#define MAXCHECK(f)                                                                      \
    do {                                                                                 \
        uint64_t max__ = 0;                                                              \
        for (unsigned n = 0; n < nnodes; n++)                                            \
            if (node[n].f > max__)                                                       \
                max__ = node[n].f;                                                       \
        if (max__ != st->total.f)                                                        \
            fail_at(who, "pp_pool_stats total.%s = %" PRIu64 " but the largest node's is %" \
                    PRIu64, #f, (uint64_t)st->total.f, max__);                           \
    } while (0);
    NODE_MAXIMA(MAXCHECK)
#undef MAXCHECK
}
