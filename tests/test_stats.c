/* test_stats.c -- pp_stat and pp_pool_stats (src/stats.c). */
#include "helpers.h"
#include "testhooks.h" /* pp__pool_is_valid */

/* ---- exact counts after a multi-threaded run ---------------------------- */

#define ST_THREADS 4
#define ST_ITERS 600
#define ST_KEEP_EVERY 10 /* every 10th entry is kept (not released) */

static size_t st_size(size_t id) { return 40 + (id % 13) * 8; }

typedef struct st_arg {
    pp_pool_t *pool;
    ct_t *ct;
    unsigned nodes;
    int k;
    pthread_barrier_t *bar;
} st_arg_t;

static void *st_worker(void *arg)
{
    st_arg_t *a = arg;
    pthread_barrier_wait(a->bar);
    for (size_t i = 0; i < ST_ITERS; i++) {
        size_t id = (size_t)a->k * ST_ITERS + i;
        size_t sz = st_size(id);
        void *buf = ct_buf(a->ct, id, sz);
        pp_ref_t r;
        int rc = pp_put(a->pool, buf, sz, &a->ct->type,
                        PP_ON_NODE(id % a->nodes), &r);
        TCHECK(rc == 0, "put: %s", pp_err_name(rc));
        if (rc != 0) {
            free(buf);
            continue;
        }
        void *p = NULL;
        TCHECK(pp_pin(a->pool, r, 0, &p) == 0, "pin");            /* pins 1 */
        TCHECK(pp_pin(a->pool, r, PP_PIN_WRITE, NULL) == 0, "pin"); /* pins 2 */
        TCHECK(ct_check(p, id, sz), "data %zu", id);
        TCHECK(pp_retain(a->pool, r) == 0, "retain");              /* retains 1 */
        TCHECK(pp_get(a->pool, r, &p) == 0, "get");                /* gets 1 */
        TCHECK(pp_unpin(a->pool, r) == 0, "unpin");                /* unpins 1 */
        TCHECK(pp_release(a->pool, r) == 0, "release");            /* releases 1 */
        TCHECK(pp_unpin(a->pool, r) == 0, "unpin");                /* unpins 2 */
        if (id % ST_KEEP_EVERY != 0)
            TCHECK(pp_release(a->pool, r) == 0, "final release");  /* releases 2 */
    }
    return NULL;
}

Test(stats, exact_counts_after_threads, .timeout = 120)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    size_t n = ST_THREADS * ST_ITERS;
    ct_t *ct = ct_new(n);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, ST_THREADS);
    st_arg_t a[ST_THREADS];
    pthread_t th[ST_THREADS];
    for (int k = 0; k < ST_THREADS; k++) {
        a[k] = (st_arg_t){pool, ct, nodes, k, &bar};
        test_thread_start(&th[k], st_worker, &a[k]);
    }
    for (int k = 0; k < ST_THREADS; k++)
        test_thread_join(th[k]);
    pthread_barrier_destroy(&bar);
    TCHECK_NONE();
    test_drain(pool);

    /* Expected figures, per node and in total. */
    pp_node_stats_t want[PP_MAX_NODES];
    memset(want, 0, sizeof want);
    for (size_t id = 0; id < n; id++) {
        pp_node_stats_t *w = &want[id % nodes];
        bool kept = id % ST_KEEP_EVERY == 0;
        w->puts++;
        w->pins += 2;
        w->unpins += 2;
        w->retains++;
        w->gets++;
        w->releases += kept ? 1 : 2;
        w->frees += kept ? 0 : 1;
        w->queued += kept ? 0 : 1;
        w->entries += kept ? 1 : 0;
        w->resident_bytes += kept ? st_size(id) : 0;
    }
    pp_stats_t s;
    test_stats(pool, &s);
    pp_node_stats_t sum;
    memset(&sum, 0, sizeof sum);
#define CHECK_FIELD(f)                                                         \
    do {                                                                       \
        cr_assert_eq(s.node[k].f, want[k].f, "node %u " #f ": %" PRIu64        \
                     " != %" PRIu64, k, (uint64_t)s.node[k].f,                 \
                     (uint64_t)want[k].f);                                     \
        sum.f += s.node[k].f;                                                  \
    } while (0)
    for (unsigned k = 0; k < nodes; k++) {
        CHECK_FIELD(puts);
        CHECK_FIELD(pins);
        CHECK_FIELD(unpins);
        CHECK_FIELD(retains);
        CHECK_FIELD(gets);
        CHECK_FIELD(releases);
        CHECK_FIELD(frees);
        CHECK_FIELD(queued);
        CHECK_FIELD(entries);
        CHECK_FIELD(resident_bytes);
        cr_assert_eq(s.node[k].reclaim_queue_depth, 0);
        cr_assert_eq(s.node[k].swapped_bytes, 0);
        cr_assert_geq(s.node[k].slots, s.node[k].entries);
        sum.lag_count += s.node[k].lag_count;
        sum.grace_polls += s.node[k].grace_polls;
        sum.slots += s.node[k].slots;
    }
#undef CHECK_FIELD
    /* Totals are the per-node sums, and the known totals. */
    uint64_t kept = (n + ST_KEEP_EVERY - 1) / ST_KEEP_EVERY;
    cr_assert_eq(s.total.puts, sum.puts);
    cr_assert_eq(s.total.puts, n);
    cr_assert_eq(s.total.pins, sum.pins);
    cr_assert_eq(s.total.pins, 2 * n);
    cr_assert_eq(s.total.unpins, sum.unpins);
    cr_assert_eq(s.total.unpins, 2 * n);
    cr_assert_eq(s.total.retains, sum.retains);
    cr_assert_eq(s.total.retains, n);
    cr_assert_eq(s.total.gets, sum.gets);
    cr_assert_eq(s.total.gets, n);
    cr_assert_eq(s.total.releases, sum.releases);
    cr_assert_eq(s.total.releases, 2 * n - kept);
    cr_assert_eq(s.total.frees, sum.frees);
    cr_assert_eq(s.total.frees, n - kept);
    cr_assert_eq(s.total.queued, sum.queued);
    cr_assert_eq(s.total.entries, sum.entries);
    cr_assert_eq(s.total.entries, kept);
    cr_assert_eq(s.total.resident_bytes, sum.resident_bytes);
    cr_assert_eq(s.total.lag_count, sum.lag_count);
    cr_assert_eq(s.total.grace_polls, sum.grace_polls);
    cr_assert_eq(s.total.slots, sum.slots);
    cr_assert_eq(s.total.reclaim_queue_depth, 0);
    cr_assert_eq(s.total.reclaimer_tid, 0);
    cr_assert_eq(s.total.cpu_bound, 0);
    cr_assert_eq(s.total.mem_bound, 0);
    cr_assert_eq(s.nodes, nodes);

    /* Every slot obeys entry.h's invariants (some entries still live). */
    cr_assert(pp__pool_is_valid(pool));

    /* And the counting type agrees. */
    for (size_t id = 0; id < n; id++)
        cr_assert_eq(ct_frees(ct, id), id % ST_KEEP_EVERY == 0 ? 0u : 1u,
                     "entry %zu", id);
    test_destroy(pool);
    for (size_t id = 0; id < n; id++)
        cr_assert_eq(ct_frees(ct, id), 1, "entry %zu", id);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

/* ---- pp_stat fields ------------------------------------------------------ */

typedef struct holder {
    pp_pool_t *pool;
    pp_ref_t other;
    test_sig_t in, out;
} holder_t;

/* A QSBR thread inside an epoch section: holds every reclamation back. */
static void *section_holder(void *arg)
{
    holder_t *h = arg;
    pp_quiescent(h->pool);
    void *p = NULL;
    int rc = pp_get(h->pool, h->other, &p);
    TCHECK(rc == 0, "get: %s", pp_err_name(rc));
    sig_set(&h->in, 1);
    TCHECK(sig_wait(&h->out, 1), "holder: no signal");
    pp_quiescent(h->pool);
    return NULL;
}

Test(stats, entry_info_fields, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(2);
    unsigned node = nodes - 1;
    pp_ref_t r = ct_put(pool, ct, 0, 300, PP_ON_NODE(node));
    pp_ref_t other = ct_put(pool, ct, 1, 64, 0);

    pp_entry_info_t info = test_stat(pool, r);
    cr_assert_eq(info.size, 300);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.node, node);
    cr_assert_eq(info.type, &ct->type);
    cr_assert_eq(info.state, PP_STATE_RESIDENT);

    assert_rc(pp_retain(pool, r), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    info = test_stat(pool, r);
    cr_assert_eq(info.pins, 2);
    cr_assert_eq(info.owners, 2);
    cr_assert_eq(info.state, PP_STATE_RESIDENT);

    /* Dead but pinned: described, with DEAD. */
    assert_rc(pp_release(pool, r), 0);
    assert_rc(pp_release(pool, r), 0);
    info = test_stat(pool, r);
    cr_assert_eq(info.owners, 0);
    cr_assert_eq(info.pins, 2);
    cr_assert_eq(info.size, 300);
    cr_assert_eq(info.node, node);
    cr_assert_eq(info.state, PP_STATE_RESIDENT | PP_STATE_DEAD);

    /* Dead, unpinned, waiting for its reclaimer (a reader in an epoch
     * section keeps it queued): no longer described. */
    holder_t h;
    memset(&h, 0, sizeof h);
    h.pool = pool;
    h.other = other;
    sig_init(&h.in);
    sig_init(&h.out);
    pthread_t t;
    test_thread_start(&t, section_holder, &h);
    cr_assert(sig_wait(&h.in, 1));
    assert_rc(pp_unpin(pool, r), 0);
    assert_rc(pp_unpin(pool, r), 0);
    pp_entry_info_t x;
    assert_rc(pp_stat(pool, r, &x), PP_ESTALE);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.node[node].reclaim_queue_depth, 1);
    cr_assert_eq(s.node[node].queued, 1);
    cr_assert_eq(s.node[node].frees, 0);
    cr_assert_eq(ct_frees(ct, 0), 0);

    sig_set(&h.out, 1);
    test_thread_join(t);
    TCHECK_NONE();
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    assert_rc(pp_stat(pool, r, &x), PP_ESTALE);

    /* Escaped and dirty. */
    assert_rc(pp_pin(pool, other, PP_PIN_WRITE, NULL), 0);
    assert_rc(pp_unpin(pool, other), 0);
    void *p;
    assert_rc(pp_get(pool, other, &p), 0);
    info = test_stat(pool, other);
    cr_assert_eq(info.state, PP_STATE_RESIDENT | PP_STATE_DIRTY | PP_STATE_ESCAPED);
    cr_assert_eq(info.size, 64);

    assert_rc(pp_stat(pool, other, NULL), PP_EINVAL);
    assert_rc(pp_stat(NULL, other, &x), PP_EINVAL);
    test_destroy(pool);
    ct_delete(ct);
    sig_destroy(&h.in);
    sig_destroy(&h.out);
}

Test(stats, pool_stats_errors_and_basics, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = 12345;
    pp_pool_t *pool = test_pool(&o);
    pp_stats_t s;
    assert_rc(pp_pool_stats(NULL, &s), PP_EINVAL);
    assert_rc(pp_pool_stats(pool, NULL), PP_EINVAL);
    assert_rc(pp_pool_stats(NULL, NULL), PP_EINVAL);
    test_stats(pool, &s);
    cr_assert_eq(s.mem_limit, 12345);
    cr_assert(s.nodes >= 1 && s.nodes <= PP_MAX_NODES);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.puts, 0);
    cr_assert_eq(s.total.frees, 0);
    /* Nodes past the last are zero. */
    for (unsigned k = s.nodes; k < PP_MAX_NODES; k++) {
        cr_assert_eq(s.node[k].reclaimer_tid, 0);
        cr_assert_eq(s.node[k].puts, 0);
    }
    test_destroy(pool);
}

Test(stats, resident_bytes_follow_puts_and_frees, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(10);
    pp_ref_t r[10];
    uint64_t bytes = 0;
    pp_stats_t s;
    for (size_t i = 0; i < 10; i++) {
        r[i] = ct_put(pool, ct, i, 100 * (i + 1), 0);
        bytes += 100 * (i + 1);
        test_stats(pool, &s);
        cr_assert_eq(s.total.resident_bytes, bytes);
        cr_assert_eq(s.total.entries, i + 1);
    }
    for (size_t i = 0; i < 10; i += 2) {
        assert_rc(pp_release(pool, r[i]), 0);
        bytes -= 100 * (i + 1);
    }
    test_drain(pool);
    test_stats(pool, &s);
    cr_assert_eq(s.total.resident_bytes, bytes);
    cr_assert_eq(s.total.entries, 5);
    cr_assert_eq(s.total.frees, 5);
    test_destroy(pool);
    ct_delete(ct);
}

/* ---- pp_stat racing with reclamation ------------------------------------ */

/* A dead entry is described while it is pinned; its last unpin queues it,
 * and from then on pp_stat says PP_ESTALE.  A stat racing with that unpin
 * (and with the reclaimer freeing the entry) must either fail with
 * PP_ESTALE or describe the entry as it was -- its size and type, DEAD --
 * never a half-recycled slot.  Under ThreadSanitizer a stat that reads the
 * entry while the reclaimer recycles it is reported as a race. */
#define SR_N 20000
#define SR_STATTERS 2

typedef struct sr {
    pp_pool_t *pool;
    const pp_type_t *type;
    pp_ref_t *refs;
    atomic_size_t unpinned; /* refs[0..unpinned) had their last unpin */
    atomic_bool done;
    atomic_uint_fast64_t described, stale;
} sr_t;

static size_t sr_size(size_t i) { return 64 + (i % 7) * 8; }

static void *sr_statter(void *arg)
{
    sr_t *s = arg;
    uint64_t described = 0, stale = 0;
    while (!atomic_load(&s->done)) {
        size_t lo = atomic_load(&s->unpinned);
        size_t from = lo > 32 ? lo - 32 : 0;
        size_t to = lo + 32 < SR_N ? lo + 32 : SR_N;
        for (size_t i = from; i < to; i++) {
            pp_entry_info_t info;
            memset(&info, 0xAB, sizeof info);
            int rc = pp_stat(s->pool, s->refs[i], &info);
            if (rc == PP_ESTALE) {
                stale++;
                continue;
            }
            TCHECK(rc == 0, "stat %zu: %s", i, pp_err_name(rc));
            TCHECK(i >= lo, "entry %zu described after its last unpin", i);
            if (rc != 0)
                continue;
            TCHECK(info.size == sr_size(i), "entry %zu: size %zu, put with %zu",
                   i, info.size, sr_size(i));
            TCHECK(info.type == s->type, "entry %zu: type %p", i,
                   (const void *)info.type);
            TCHECK(info.state == (PP_STATE_RESIDENT | PP_STATE_DEAD),
                   "entry %zu: state 0x%x", i, info.state);
            TCHECK(info.owners == 0, "entry %zu: owners %u", i, info.owners);
            described++;
        }
    }
    atomic_fetch_add(&s->described, described);
    atomic_fetch_add(&s->stale, stale);
    return NULL;
}

Test(stats, stat_during_reclaim_is_consistent, .timeout = 120)
{
    sr_t s;
    memset(&s, 0, sizeof s);
    s.pool = test_pool(NULL);
    ct_t *ct = ct_new(SR_N);
    s.type = &ct->type;
    s.refs = calloc(SR_N, sizeof *s.refs);
    for (size_t i = 0; i < SR_N; i++) {
        s.refs[i] = ct_put(s.pool, ct, i, sr_size(i), 0);
        assert_rc(pp_pin(s.pool, s.refs[i], 0, NULL), 0);
        assert_rc(pp_release(s.pool, s.refs[i]), 0); /* dead, pinned */
    }
    pthread_t th[SR_STATTERS];
    for (int k = 0; k < SR_STATTERS; k++)
        test_thread_start(&th[k], sr_statter, &s);
    for (size_t i = 0; i < SR_N; i++) {
        assert_rc(pp_unpin(s.pool, s.refs[i]), 0);
        pp_entry_info_t info;
        assert_rc(pp_stat(s.pool, s.refs[i], &info), PP_ESTALE);
        atomic_store(&s.unpinned, i + 1);
        if (i % 16 == 0)
            sched_yield();
    }
    test_drain(s.pool);
    atomic_store(&s.done, true);
    for (int k = 0; k < SR_STATTERS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    cr_assert_gt(atomic_load(&s.described) + atomic_load(&s.stale), 0);
    for (size_t i = 0; i < SR_N; i++)
        cr_assert_eq(ct_frees(ct, i), 1);
    test_destroy(s.pool);
    free(s.refs);
    ct_delete(ct);
}
