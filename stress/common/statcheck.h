/*
 * stress/common/statcheck.h -- the exact checks of pp_pool_stats against
 * the program's own counts.
 *
 * Each thread counts, per home node, the calls of the pool that succeeded
 * (cnt_t); at the end (of the run, or of a round) the sums over threads
 * must equal the pool's figures exactly, per node and in total, and the
 * total must be the sum of the nodes.  The torture and epoch_torture name
 * a figure differently in their messages: statloc_t.topo set gives the
 * torture's "pp_pool_stats node 1.pins = 5, expected 6 (topology ...)",
 * NULL epoch_torture's "pp_pool_stats node 1: pins = 5, expected 6".
 * The per-node figures come from pp_node_stats (stat_read).
 */
#ifndef PP_STRESS_STATCHECK_H
#define PP_STRESS_STATCHECK_H

#include <pinpool.h>

#include <stdint.h>

/* Calls that succeeded, on one node. */
typedef struct cnt {
    uint64_t puts, pins, unpins, retains, releases, gets;
} cnt_t;

void cnt_add(cnt_t *to, const cnt_t *c);

/* The program's own counts agree with each other: every pin was unpinned,
 * every owner (put or retained) released.  who: as for fail_at. */
void cnt_check_balanced(const char *who, const cnt_t *tot);

/* Where a figure is checked. */
typedef struct statloc {
    const char *who;      /* the checking thread, as for fail_at */
    char where[32];       /* "node 2", "total" */
    const char *topo;     /* the torture's message style: the topology; NULL: epoch_torture's */
} statloc_t;

/* l->where: "node N" for node < nnodes, else "total". */
void statloc_at(statloc_t *l, unsigned node, unsigned nnodes);

void stat_eq(const statloc_t *l, const char *field, uint64_t got, uint64_t want);

/* got >= want: the program saw want of them (the torture's style). */
void stat_ge(const statloc_t *l, const char *field, uint64_t got, uint64_t want, const char *what);

#define STAT_EQ(l, s, field, want) stat_eq((l), #field, (uint64_t)(s)->field, (uint64_t)(want))
#define STAT_GE(l, s, field, want, what)                                       \
    stat_ge((l), #field, (uint64_t)(s)->field, (uint64_t)(want), (what))

/* The reclaim lag is timed on a sample, at least one in PP__LAG_SAMPLE of
 * each thread's queued entries per node: never more than the frees. */
int stat_lag_count_ok(uint64_t lag_count, uint64_t frees);

/* pp_pool_stats into st, then pp_node_stats of each node into node[0 ..
 * st->nodes), with their sizes and versions set here: 0 or the first
 * error.  The two reads agree when the pool is quiet. */
int stat_read(pp_pool_t *pool, pp_stats_t *st, pp_node_stats_t *node);

/* pp_pool_stats total is the sum of its nodes, field by field (the
 * backlog's peak and longest wait: the largest node's). */
void stat_check_sums(const char *who, const pp_stats_t *st, const pp_node_stats_t *node,
                     unsigned nnodes);

#endif /* PP_STRESS_STATCHECK_H */
