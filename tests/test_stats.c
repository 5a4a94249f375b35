/* test_stats.c -- pp_stat, pp_pool_stats and pp_node_stats (src/api/stats.c). */
#include <pinpool_stats.h> /* first: it compiles on its own */

#include <limits.h>
#include <stddef.h>

#include "helpers.h"
#include "testing/testhooks.h" /* pp__pool_is_valid */

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
        cr_assert_eq(ns.f, want[k].f, "node %u " #f ": %" PRIu64 " != %" PRIu64, \
                     k, (uint64_t)ns.f, (uint64_t)want[k].f);                  \
        sum.f += ns.f;                                                         \
    } while (0)
    for (unsigned k = 0; k < nodes; k++) {
        pp_node_stats_t ns;
        test_node_stats(pool, k, &ns);
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
        cr_assert_eq(ns.reclaim_queue_depth, 0);
        cr_assert_eq(ns.swapped_bytes, 0);
        cr_assert_geq(ns.slots, ns.entries);
        sum.lag_count += ns.lag_count;
        sum.grace_polls += ns.grace_polls;
        sum.slots += ns.slots;
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
    pp_node_stats_t s;
    test_node_stats(pool, node, &s);
    cr_assert_eq(s.reclaim_queue_depth, 1);
    cr_assert_eq(s.queued, 1);
    cr_assert_eq(s.frees, 0);
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
    /* The library sets the size and version of the struct and of total. */
    cr_assert_eq(s.size, sizeof s);
    cr_assert_eq(s.version, PP_STATS_VERSION);
    cr_assert_eq(s.total.size, sizeof s.total);
    cr_assert_eq(s.total.version, PP_STATS_VERSION);
    test_destroy(pool);
}

/* ---- the size and version contract -------------------------------------- */

#define ST_FILL 0xA5 /* what a refused call must leave in every byte */

/* Each struct with room after it: a call must write nothing past size. */
typedef union stats_buf {
    pp_stats_t s;
    unsigned char b[sizeof(pp_stats_t) + 64];
} stats_buf_t;
typedef union node_buf {
    pp_node_stats_t s;
    unsigned char b[sizeof(pp_node_stats_t) + 64];
} node_buf_t;

/* True if every byte from `from` on is still ST_FILL. */
static bool all_fill(const unsigned char *b, size_t from, size_t len)
{
    for (size_t i = from; i < len; i++)
        if (b[i] != ST_FILL)
            return false;
    return true;
}

/* The caller's size and version, refused by both calls: PP_EINVAL, one
 * report line with the expected pair, nothing written past the two. */
static void check_refused(pp_pool_t *pool, report_cap_t *rep, size_t size,
                          size_t node_size, unsigned version)
{
    char want[96];
    stats_buf_t sb;
    memset(&sb, ST_FILL, sizeof sb);
    sb.s.size = size;
    sb.s.version = version;
    size_t from = report_cap_count(rep);
    assert_rc(pp_pool_stats(pool, &sb.s), PP_EINVAL);
    cr_assert(all_fill(sb.b, offsetof(pp_stats_t, version) + sizeof sb.s.version, sizeof sb.b),
              "pp_pool_stats wrote with size %zu version %u", size, version);
    cr_assert(sb.s.size == size && sb.s.version == version);
    cr_assert_eq(report_cap_count(rep), from + 1, "size %zu version %u", size, version);
    snprintf(want, sizeof want, "expected size %zu version %u", sizeof(pp_stats_t),
             PP_STATS_VERSION);
    cr_assert(report_has(rep, from, "pp_pool_stats", want, NULL), "no line with \"%s\"", want);

    node_buf_t nb;
    memset(&nb, ST_FILL, sizeof nb);
    nb.s.size = node_size;
    nb.s.version = version;
    from = report_cap_count(rep);
    assert_rc(pp_node_stats(pool, 0, &nb.s), PP_EINVAL);
    cr_assert(all_fill(nb.b, offsetof(pp_node_stats_t, version) + sizeof nb.s.version,
                       sizeof nb.b),
              "pp_node_stats wrote with size %zu version %u", node_size, version);
    cr_assert(nb.s.size == node_size && nb.s.version == version);
    cr_assert_eq(report_cap_count(rep), from + 1, "size %zu version %u", node_size, version);
    snprintf(want, sizeof want, "expected size %zu version %u", sizeof(pp_node_stats_t),
             PP_STATS_VERSION);
    cr_assert(report_has(rep, from, "pp_node_stats", want, NULL), "no line with \"%s\"", want);
}

Test(stats, size_and_version_are_checked, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    const size_t ss = sizeof(pp_stats_t), ns = sizeof(pp_node_stats_t);
    const unsigned v = PP_STATS_VERSION;

    check_refused(pool, &rep, 0, 0, v);                   /* size 0 */
    check_refused(pool, &rep, 0, 0, 0);                   /* never set */
    check_refused(pool, &rep, ss - 8, ns - 8, v);         /* an older, shorter struct */
    check_refused(pool, &rep, ss + 8, ns + 8, v);         /* a longer one */
    check_refused(pool, &rep, 16, 16, v);                 /* the two fields only */
    check_refused(pool, &rep, ns, ss, v);                 /* each the other's size */
    check_refused(pool, &rep, ss, ns, 0);                 /* no version */
    check_refused(pool, &rep, ss, ns, v + 1);             /* a later version */
    check_refused(pool, &rep, ss, ns, UINT_MAX);

    /* The initializers give the pair this library knows. */
    stats_buf_t sb;
    memset(&sb, ST_FILL, sizeof sb);
    sb.s = (pp_stats_t)PP_STATS_INIT;
    assert_rc(pp_pool_stats(pool, &sb.s), 0);
    cr_assert(all_fill(sb.b, sizeof sb.s, sizeof sb.b), "written past sizeof(pp_stats_t)");
    cr_assert(sb.s.size == ss && sb.s.version == v);
    cr_assert(sb.s.total.size == ns && sb.s.total.version == v);
    node_buf_t nb;
    memset(&nb, ST_FILL, sizeof nb);
    nb.s = (pp_node_stats_t)PP_NODE_STATS_INIT;
    assert_rc(pp_node_stats(pool, 0, &nb.s), 0);
    cr_assert(all_fill(nb.b, sizeof nb.s, sizeof nb.b), "written past sizeof(pp_node_stats_t)");
    cr_assert(nb.s.size == ns && nb.s.version == v);
    cr_assert_eq(report_cap_count(&rep), 9 * 2, "only the refused calls report");
    cr_assert_not(rep.newline_seen);
    test_destroy(pool);
    report_cap_free(&rep);
}

/* A program built against version 1 of pinpool_stats.h keeps working: the
 * pair (1, version 1's size) is filled up to that size and no further,
 * with the same figures as this version's call, and total says version
 * 1.  Version 1's sizes are the ones that header had on LP64 targets;
 * the layout check below keeps version 2 a pure extension of it. */
#define V1_STATS 648u
#define V1_NODE 448u

Test(stats, version_1_callers_get_their_part, .timeout = 30)
{
#if UINTPTR_MAX == UINT64_MAX
    cr_assert_eq(offsetof(pp_node_stats_t, swap_write_ns), V1_NODE);
    cr_assert_eq(offsetof(pp_stats_t, total) + V1_NODE, V1_STATS);
#endif
    const size_t v1_node = offsetof(pp_node_stats_t, swap_write_ns);
    const size_t v1_stats = offsetof(pp_stats_t, total) + v1_node;
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    ct_t *ct = ct_new(4);
    pp_ref_t r = ct_put(pool, ct, 0, 100, 0);
    assert_rc(pp_pin(pool, r, 0, NULL), 0);
    assert_rc(pp_unpin(pool, r), 0);

    stats_buf_t sb;
    memset(&sb, ST_FILL, sizeof sb);
    sb.s.size = v1_stats;
    sb.s.version = 1;
    assert_rc(pp_pool_stats(pool, &sb.s), 0);
    cr_assert(all_fill(sb.b, v1_stats, sizeof sb.b), "written past version 1's pp_stats_t");
    cr_assert(sb.s.size == v1_stats && sb.s.version == 1);
    cr_assert(sb.s.total.size == v1_node && sb.s.total.version == 1);
    pp_stats_t now;
    test_stats(pool, &now);
    cr_assert_eq(sb.s.total.puts, now.total.puts);
    cr_assert_eq(sb.s.total.pins, 1);
    cr_assert_eq(sb.s.total.resident_bytes, now.total.resident_bytes);
    cr_assert_eq(sb.s.nodes, now.nodes);
    cr_assert_eq(sb.s.total.mem_bound, now.total.mem_bound);

    node_buf_t nb;
    memset(&nb, ST_FILL, sizeof nb);
    nb.s.size = v1_node;
    nb.s.version = 1;
    assert_rc(pp_node_stats(pool, 0, &nb.s), 0);
    cr_assert(all_fill(nb.b, v1_node, sizeof nb.b), "written past version 1's pp_node_stats_t");
    cr_assert(nb.s.size == v1_node && nb.s.version == 1);
    cr_assert_gt(nb.s.reclaimer_tid, 0);
    cr_assert_eq(report_cap_count(&rep), 0);

    /* Each version with the other's size is refused. */
    check_refused(pool, &rep, v1_stats, v1_node, PP_STATS_VERSION);
    check_refused(pool, &rep, sizeof(pp_stats_t), sizeof(pp_node_stats_t), 1);
    assert_rc(pp_release(pool, r), 0);
    test_destroy(pool);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(stats, node_stats_errors, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = TEST_SYNTH4;
    pp_pool_t *pool = test_pool(&o);
    pp_node_stats_t s = PP_NODE_STATS_INIT;
    assert_rc(pp_node_stats(NULL, 0, &s), PP_EINVAL);
    assert_rc(pp_node_stats(pool, 0, NULL), PP_EINVAL);
    const unsigned bad[] = {4, 5, PP_MAX_NODES - 1, PP_MAX_NODES, UINT_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        node_buf_t nb;
        memset(&nb, ST_FILL, sizeof nb);
        nb.s.size = sizeof nb.s;
        nb.s.version = PP_STATS_VERSION;
        assert_rc(pp_node_stats(pool, bad[i], &nb.s), PP_EINVAL);
        cr_assert(all_fill(nb.b, offsetof(pp_node_stats_t, version) + sizeof nb.s.version,
                           sizeof nb.b), "node %u: written", bad[i]);
    }
    assert_rc(pp_node_stats(pool, 3, &s), 0);
    cr_assert_gt(s.reclaimer_tid, 0);
    test_destroy(pool);
}

/* Per node, on a synthetic topology of four nodes: each node's own puts,
 * pins and frees, as pp_node_stats gives them; and total is their sum. */
Test(stats, node_stats_per_node_and_sum, .timeout = 60)
{
    pp_pool_t *pool = test_pool_synth4();
    ct_t *ct = ct_new(64);
    pp_ref_t kept[4];
    size_t id = 0;
    for (unsigned n = 0; n < 4; n++) {
        /* Node n: 2 + 3n entries of 100 (n + 1) bytes, each pinned n + 1
         * times; all but the first released. */
        for (unsigned i = 0; i < 2 + 3 * n; i++, id++) {
            pp_ref_t r = ct_put(pool, ct, id, 100 * (n + 1), PP_ON_NODE(n));
            for (unsigned k = 0; k <= n; k++)
                assert_rc(pp_pin(pool, r, 0, NULL), 0);
            for (unsigned k = 0; k <= n; k++)
                assert_rc(pp_unpin(pool, r), 0);
            if (i == 0)
                kept[n] = r;
            else
                assert_rc(pp_release(pool, r), 0);
        }
    }
    test_drain(pool);

    pp_node_stats_t node[4];
    for (unsigned n = 0; n < 4; n++) {
        pp_node_stats_t *s = &node[n];
        test_node_stats(pool, n, s);
        uint64_t k = 2 + 3 * n;
        cr_assert(s->size == sizeof *s && s->version == PP_STATS_VERSION);
        cr_assert_eq(s->puts, k, "node %u", n);
        cr_assert_eq(s->pins, k * (n + 1), "node %u", n);
        cr_assert_eq(s->unpins, k * (n + 1), "node %u", n);
        cr_assert_eq(s->releases, k - 1, "node %u", n);
        cr_assert_eq(s->queued, k - 1, "node %u", n);
        cr_assert_eq(s->frees, k - 1, "node %u", n);
        cr_assert_eq(s->entries, 1, "node %u", n);
        cr_assert_eq(s->resident_bytes, 100 * (n + 1), "node %u", n);
        cr_assert_eq(s->reclaim_queue_depth, 0, "node %u", n);
        cr_assert_gt(s->reclaimer_tid, 0, "node %u", n);
    }
    pp_stats_t t;
    test_stats(pool, &t);
    cr_assert_eq(t.nodes, 4);
#define SUMS(f)                                                                \
    do {                                                                       \
        uint64_t sum_ = 0;                                                     \
        for (unsigned n = 0; n < 4; n++)                                       \
            sum_ += node[n].f;                                                 \
        cr_assert_eq(t.total.f, sum_, #f ": total %" PRIu64 ", nodes %" PRIu64, \
                     (uint64_t)t.total.f, sum_);                               \
    } while (0)
#define MAXES(f)                                                               \
    do {                                                                       \
        uint64_t max_ = 0;                                                     \
        for (unsigned n = 0; n < 4; n++)                                       \
            max_ = node[n].f > max_ ? node[n].f : max_;                        \
        cr_assert_eq(t.total.f, max_, #f);                                     \
    } while (0)
    SUMS(entries); SUMS(resident_bytes); SUMS(swapped_bytes); SUMS(puts);
    SUMS(retains); SUMS(releases); SUMS(gets); SUMS(pins); SUMS(unpins);
    SUMS(evictions_written); SUMS(evictions_clean); SUMS(evictions_advised);
    SUMS(evictions_abandoned); SUMS(drops); SUMS(loads); SUMS(load_waits);
    SUMS(swap_bytes_written); SUMS(swap_raw_written); SUMS(swap_bytes_read);
    SUMS(swap_used_bytes); SUMS(checksum_failures); SUMS(io_errors); SUMS(queued);
    SUMS(frees); SUMS(reclaim_queue_depth); SUMS(dead_in_io); SUMS(grace_polls);
    SUMS(backlog_bytes); SUMS(backlog_waiting); SUMS(backlog_waits);
    SUMS(backlog_wait_ns); SUMS(backlog_refused); SUMS(slots); SUMS(retired_slots);
    SUMS(hot_entries); SUMS(hot_promotions); SUMS(hot_demotions); SUMS(hot_full);
    SUMS(lag_count); SUMS(lag_total_ns); SUMS(io_requests); SUMS(io_submits);
    SUMS(io_inflight); SUMS(io_load_bytes); SUMS(io_load_recycled);
    MAXES(backlog_peak); MAXES(backlog_wait_max_ns); MAXES(io_inflight_peak);
    MAXES(io_load_bytes_peak); MAXES(lag_max_ns);
#undef SUMS
#undef MAXES
    cr_assert_eq(t.total.puts, 2 + 5 + 8 + 11);
    cr_assert_eq(t.total.entries, 4);

    for (unsigned n = 0; n < 4; n++)
        assert_rc(pp_release(pool, kept[n]), 0);
    test_drain(pool);
    for (unsigned n = 0; n < 4; n++)
        cr_assert_eq(test_node(pool, n).entries, 0, "node %u", n);
    test_destroy(pool);
    ct_delete(ct);
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
