/* test_pool.c -- pool creation, options, memory limit, destroy (src/api/pool.c). */
#include "helpers.h"

#include "testing/testhooks.h" /* pp__pool_is_valid, pp__lookup, the state words */

/* A pool is usable: a put, a pin that sees the data, a release, a drain.
 * The counting types are deleted at the end of the test (after destroy):
 * see drain_happens_after_frees for why not right after the drain. */
static ct_t *g_ex[8];
static int g_nex;

static void exercise(pp_pool_t *pool)
{
    cr_assert_lt(g_nex, 8);
    ct_t *ct = g_ex[g_nex++] = ct_new(1);
    pp_ref_t ref = ct_put(pool, ct, 0, 256, 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, ref, 0, &p), 0);
    cr_assert(ct_check(p, 0, 256));
    assert_rc(pp_unpin(pool, ref), 0);
    assert_rc(pp_release(pool, ref), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    cr_assert_eq(atomic_load(&ct->bad), 0);
}

/* After the pools are destroyed. */
static void exercise_done(void)
{
    for (int i = 0; i < g_nex; i++)
        ct_delete(g_ex[i]);
    g_nex = 0;
}

Test(pool, create_destroy_null_options, .timeout = 30)
{
    pp_pool_t *pool = NULL;
    assert_rc(pp_pool_create(NULL, &pool), 0);
    cr_assert_not_null(pool);
    exercise(pool);
    test_destroy(pool);
    exercise_done();
}

Test(pool, create_destroy_test_pool_null, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    exercise(pool);
    test_destroy(pool);
    exercise_done();
}

Test(pool, create_destroy_options_init, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    pp_pool_t *pool = test_pool(&o);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert(s.nodes >= 1 && s.nodes <= PP_MAX_NODES, "nodes %u", s.nodes);
    cr_assert_eq(s.mem_limit, 0);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.resident_bytes, 0);
    exercise(pool);
    test_destroy(pool);
    exercise_done();
}

Test(pool, empty_pool_destroys_at_once, .timeout = 30)
{
    for (int i = 0; i < 4; i++) {
        pp_pool_t *pool = test_pool(NULL);
        test_destroy(pool);
    }
}

Test(pool, two_pools_at_once, .timeout = 30)
{
    pp_pool_t *a = test_pool(NULL), *b = test_pool(NULL);
    cr_assert_neq(a, b);
    exercise(a);
    exercise(b);
    test_destroy(a);
    exercise(b);
    test_destroy(b);
    exercise_done();
}

Test(pool, invalid_arguments, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    pp_pool_t *pool = NULL;
    assert_rc(pp_pool_create(NULL, NULL), PP_EINVAL);
    assert_rc(pp_pool_create(&o, NULL), PP_EINVAL);
    assert_rc(test_pool_create(&o, NULL), PP_EINVAL);

    static const unsigned bad_flags[] = {PP_SWAP_DIRECT << 1, 0x10u, 0x100u, 0x80000000u,
                                         PP_TRACK_PINS | 0x10u, ~0u};
    for (size_t i = 0; i < sizeof bad_flags / sizeof bad_flags[0]; i++) {
        o.flags = bad_flags[i];
        pool = NULL;
        assert_rc(test_pool_create(&o, &pool), PP_EINVAL);
    }
    assert_rc(pp_pool_destroy(NULL), PP_EINVAL);
}

Test(pool, swap_options_checked, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    pp_pool_t *pool = NULL;
    o.swap_dir = "/tmp";                 /* swap without a memory limit */
    assert_rc(test_pool_create(&o, &pool), PP_EINVAL);
    cr_assert_null(pool);
    o.swap_limit = 1u << 20;
    assert_rc(test_pool_create(&o, &pool), PP_EINVAL);
    o.mem_limit = 1u << 20;              /* a directory that does not exist */
    o.swap_dir = "/nonexistent/pinpool-test";
    assert_rc(test_pool_create(&o, &pool), PP_EIO);
    cr_assert_null(pool);
}

Test(pool, bad_topology, .timeout = 30)
{
    static const char *bad[] = {
        "this is not a topology",
        "numa:x pu:1",
        "pack:2 bogus:3",
        "/nonexistent/dir/topology.xml",
        "does-not-exist.xml",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_options_t o = PP_OPTIONS_INIT;
        o.topology = bad[i];
        pp_pool_t *pool = NULL;
        assert_rc(pp_pool_create(&o, &pool), PP_ETOPOLOGY);
    }

    /* A file that exists but is not hwloc XML. */
    char path[] = "/tmp/pinpool-badtopo-XXXXXX.xml";
    int fd = mkstemps(path, 4);
    cr_assert(fd >= 0);
    const char junk[] = "<not><hwloc/></not>\n";
    cr_assert_eq(write(fd, junk, sizeof junk - 1), (ssize_t)(sizeof junk - 1));
    close(fd);
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = path;
    pp_pool_t *pool = NULL;
    int rc = pp_pool_create(&o, &pool);
    unlink(path);
    assert_rc(rc, PP_ETOPOLOGY);
}

Test(pool, too_many_nodes_not_supported, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = "numa:65 pu:1";
    pp_pool_t *pool = NULL;
    assert_rc(pp_pool_create(&o, &pool), PP_ENOTSUP);

    /* Exactly PP_MAX_NODES is fine. */
    o.topology = "numa:64 pu:1";
    pool = test_pool(&o);
    cr_assert_eq(test_nodes(pool), PP_MAX_NODES);
    exercise(pool);
    test_destroy(pool);
    exercise_done();
}

#define LIMIT_SZ 4096u
#define LIMIT (16u * LIMIT_SZ)
#define MAX_PUTS 1000

Test(pool, mem_limit_is_a_hard_cap, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = LIMIT;
    pp_pool_t *pool = test_pool(&o);
    ct_t *ct = ct_new(MAX_PUTS + 2);
    pp_ref_t refs[MAX_PUTS];
    pp_stats_t s;

    test_stats(pool, &s);
    cr_assert_eq(s.mem_limit, (size_t)LIMIT);

    size_t n = 0;
    void *rejected = NULL;
    for (; n < MAX_PUTS; n++) {
        void *buf = ct_buf(ct, n, LIMIT_SZ);
        int rc = pp_put(pool, buf, LIMIT_SZ, &ct->type, 0, &refs[n]);
        if (rc != 0) {
            assert_rc(rc, PP_ENOMEM);
            rejected = buf;
            break;
        }
        test_stats(pool, &s);
        cr_assert_leq(s.total.resident_bytes, (uint64_t)LIMIT);
    }
    cr_assert_not_null(rejected, "no put failed under a %u-byte limit", LIMIT);
    /* The limit is neither passed nor refused early: the failed put would
     * have passed it. */
    test_stats(pool, &s);
    cr_assert_eq(s.total.entries, n);
    cr_assert_eq(s.total.resident_bytes, (uint64_t)n * LIMIT_SZ);
    cr_assert_gt(s.total.resident_bytes + LIMIT_SZ, (uint64_t)LIMIT,
                 "put refused at %" PRIu64 " resident bytes",
                 s.total.resident_bytes);
    /* The failed put left ownership with the caller: the buffer is intact
     * and never freed by the pool. */
    cr_assert(ct_check(rejected, n, LIMIT_SZ));
    cr_assert_eq(ct_frees(ct, n), 0);

    /* Another put still fails. */
    pp_ref_t r2 = PP_REF_NONE;
    assert_rc(pp_put(pool, rejected, LIMIT_SZ, &ct->type, 0, &r2), PP_ENOMEM);

    /* After a release and a drain, a put fits again. */
    assert_rc(pp_release(pool, refs[0]), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_stats(pool, &s);
    cr_assert_eq(s.total.resident_bytes, (uint64_t)(n - 1) * LIMIT_SZ);
    assert_rc(pp_put(pool, rejected, LIMIT_SZ, &ct->type, 0, &refs[0]), 0);
    test_stats(pool, &s);
    cr_assert_eq(s.total.resident_bytes, (uint64_t)n * LIMIT_SZ);
    cr_assert_leq(s.total.resident_bytes, (uint64_t)LIMIT);

    /* A buffer the pool refuses stays ours: free it ourselves. */
    void *extra = ct_buf(ct, n + 1, LIMIT_SZ);
    assert_rc(pp_put(pool, extra, LIMIT_SZ, &ct->type, 0, &r2), PP_ENOMEM);
    free(extra);

    for (size_t i = 0; i < n; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    test_stats(pool, &s);
    cr_assert_eq(s.total.resident_bytes, 0);
    cr_assert_eq(s.total.entries, 0);
    test_destroy(pool);
    for (size_t i = 0; i <= n; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    cr_assert_eq(ct_frees(ct, n + 1), 0);
    cr_assert_eq(atomic_load(&ct->total), n + 1); /* n + the first release */
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
}

Test(pool, destroy_with_pinned_entry_is_busy, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    ct_t *ct = ct_new(3);

    pp_ref_t pinned = ct_put(pool, ct, 0, 128, 0);
    pp_ref_t other = ct_put(pool, ct, 1, 128, 0);
    void *p = NULL;
    assert_rc(pp_pin(pool, pinned, 0, &p), 0);

    assert_rc(pp_pool_destroy(pool), PP_EBUSY);
    char hex[32];
    ref_hex(pinned, hex);
    char *dump = report_dump(&rep);
    cr_assert(report_has(&rep, 0, hex, NULL, NULL),
              "no report line names the pinned ref %s:%s", hex, dump);
    free(dump);
    cr_assert(!rep.newline_seen);

    /* The pool is intact and usable. */
    cr_assert_eq(atomic_load(&ct->total), 0);
    cr_assert(ct_check(p, 0, 128));
    pp_entry_info_t info = test_stat(pool, pinned);
    cr_assert_eq(info.pins, 1);
    cr_assert_eq(info.owners, 1);
    void *q = NULL;
    assert_rc(pp_pin(pool, other, 0, &q), 0);
    cr_assert(ct_check(q, 1, 128));
    assert_rc(pp_unpin(pool, other), 0);
    pp_ref_t third = ct_put(pool, ct, 2, 128, 0);
    assert_rc(pp_release(pool, third), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 2), 1);

    assert_rc(pp_unpin(pool, pinned), 0);
    test_destroy(pool);
    /* Entries still owned at destroy are freed exactly once. */
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %d", i);
    cr_assert_eq(atomic_load(&ct->bad), 0);
    ct_delete(ct);
    report_cap_free(&rep);
}

#define N_DESTROY 300

Test(pool, destroy_frees_every_entry_once, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(N_DESTROY);
    pp_ref_t refs[N_DESTROY];

    for (size_t i = 0; i < N_DESTROY; i++)
        refs[i] = ct_put(pool, ct, i, 64 + i, PP_ON_NODE(i % nodes));

    /* i % 3 == 0: released (dead, queued or freed before destroy);
     * i % 3 == 1: still owned once; i % 3 == 2: still owned twice. */
    size_t owned = 0;
    for (size_t i = 0; i < N_DESTROY; i++) {
        if (i % 3 == 0) {
            assert_rc(pp_release(pool, refs[i]), 0);
        } else {
            owned++;
            if (i % 3 == 2)
                assert_rc(pp_retain(pool, refs[i]), 0);
        }
    }
    int tids[PP_MAX_NODES];
    test_reclaimer_tids(pool, tids);

    test_destroy(pool);
    for (size_t i = 0; i < N_DESTROY; i++) {
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu freed %u times", i,
                     ct_frees(ct, i));
        /* ...on its home node's reclaimer, never on this thread. */
        cr_assert_neq(ct_tid(ct, i), (int)gettid(), "entry %zu", i);
        cr_assert_eq(ct_tid(ct, i), tids[pp_ref_node(refs[i])], "entry %zu", i);
    }
    cr_assert_eq(atomic_load(&ct->total), N_DESTROY);
    cr_assert_eq(atomic_load(&ct->bad), 0);

    /* The leaked owners are reported: their number, and refs of some. */
    char *dump = report_dump(&rep);
    char num[32];
    snprintf(num, sizeof num, " %zu ", owned);
    cr_assert(report_has(&rep, 0, num, NULL, NULL),
              "no report line gives the %zu leaked owners:%s", owned, dump);
    size_t named = 0;
    for (size_t i = 0; i < N_DESTROY; i++) {
        char hex[32];
        ref_hex(refs[i], hex);
        if (report_has(&rep, 0, hex, NULL, NULL)) {
            cr_assert_neq(i % 3, 0, "released entry %zu reported as leaked", i);
            named++;
        }
    }
    cr_assert_gt(named, 0, "no leaked ref named:%s", dump);
    cr_assert(!rep.newline_seen);
    free(dump);
    ct_delete(ct);
    report_cap_free(&rep);
}

Test(pool, destroy_without_leaks_reports_nothing, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    exercise(pool);
    test_destroy(pool);
    exercise_done();
    char *dump = report_dump(&rep);
    cr_assert_eq(report_cap_count(&rep), 0, "unexpected report:%s", dump);
    free(dump);
    report_cap_free(&rep);
}

/* pp_pool_drain returning 0 means the free functions of the entries it
 * waited for have run: what they wrote is visible to the caller, and
 * memory they used (the type's ctx) may be released right after.  The
 * writes below are plain on purpose: without a happens-before edge from
 * the free function to drain's return, ThreadSanitizer reports them. */
typedef struct drain_ctx {
    int freed;     /* plain int, written by the free function */
    size_t bytes;  /* plain */
} drain_ctx_t;

static void drain_free(void *data, size_t size, void *ctx)
{
    drain_ctx_t *d = ctx;
    d->freed++;
    d->bytes += size;
    free(data);
}

Test(pool, drain_happens_after_frees, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    drain_ctx_t *d = calloc(1, sizeof *d);
    pp_type_t *type = calloc(1, sizeof *type);
    type->name = "drain";
    type->free = drain_free;
    type->ctx = d;
    for (int i = 0; i < 10; i++) {
        pp_ref_t r;
        assert_rc(pp_put(pool, malloc(16), 16, type, 0, &r), 0);
        assert_rc(pp_release(pool, r), 0);
    }
    test_drain(pool);
    cr_assert_eq(d->freed, 10);
    cr_assert_eq(d->bytes, 160);
    /* The type and its ctx are no longer needed: no entry uses them. */
    free(type);
    free(d);
    test_destroy(pool);
}

/* Every call taking a pool: PP_EINVAL for a NULL pool, and no effect. */
Test(pool, null_pool_is_einval, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    void *p = NULL;
    pp_entry_info_t info;
    pp_stats_t s;
    void *buf = malloc(8);
    pp_ref_t out = PP_REF_NONE;

    assert_rc(pp_put(NULL, buf, 8, NULL, 0, &out), PP_EINVAL);
    assert_rc(pp_retain(NULL, r), PP_EINVAL);
    assert_rc(pp_release(NULL, r), PP_EINVAL);
    assert_rc(pp_pin(NULL, r, 0, &p), PP_EINVAL);
    assert_rc(pp_unpin(NULL, r), PP_EINVAL);
    assert_rc(pp_pin_many(NULL, &r, 1, 0, NULL), PP_EINVAL);
    assert_rc(pp_unpin_many(NULL, &r, 1, NULL), PP_EINVAL);
    assert_rc(pp_prefetch(NULL, r), PP_EINVAL);
    assert_rc(pp_get(NULL, r, &p), PP_EINVAL);
    assert_rc(pp_stat(NULL, r, &info), PP_EINVAL);
    assert_rc(pp_pool_stats(NULL, &s), PP_EINVAL);
    assert_rc(pp_thread_exit(NULL), PP_EINVAL);
    assert_rc(pp_pool_drain(NULL, 10), PP_EINVAL);
    assert_rc(pp_pool_destroy(NULL), PP_EINVAL);
    pp_quiescent(NULL); /* void: must simply return */

    /* Nothing happened to the entry or the pool. */
    info = test_stat(pool, r);
    cr_assert_eq(info.owners, 1);
    cr_assert_eq(info.pins, 0);
    cr_assert_eq(info.state, PP_STATE_RESIDENT);
    test_stats(pool, &s);
    cr_assert_eq(s.total.puts, 1);
    cr_assert_eq(s.total.entries, 1);
    cr_assert_eq(s.total.pins + s.total.unpins + s.total.retains +
                     s.total.releases + s.total.gets, 0);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    free(buf);
    ct_delete(ct);
}

/* ------------------------------------------------------------------------ */
/* The invariant checker sees the states that must never be                */
/* ------------------------------------------------------------------------ */

/* A dead entry with no pin and no I/O in flight that is not queued would
 * never be reclaimed (a leak that drain cannot wait for and destroy would
 * only find at the end): pp__pool_is_valid says so at once.  The words are
 * set by hand, then put back, so the entry is reclaimed as usual. */
Test(pool, checker_finds_a_dead_entry_never_queued, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert(pp__pool_is_valid(pool));
    pp__entry_t *e = pp__lookup(pool, r);
    cr_assert_not_null(e);
    uint64_t pw = atomic_load(&e->pw), ow = atomic_load(&pp__cold(e)->ow);
    atomic_store(&pp__cold(e)->ow, ow & ~PP__OWNERS_MASK);          /* owners 0 */
    atomic_store(&e->pw, pw | PP__F_DEAD);                /* dead, not queued */
    cr_assert_not(pp__pool_is_valid(pool));
    atomic_store(&e->pw, pw | PP__F_DEAD | 1u);           /* still pinned: legal */
    cr_assert(pp__pool_is_valid(pool));
    atomic_store(&e->pw, pw);
    atomic_store(&pp__cold(e)->ow, ow);
    cr_assert(pp__pool_is_valid(pool));
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    test_destroy(pool);
    ct_delete(ct);
}

/* A hot slot taken with no entry in it (a promotion's slot nobody holds)
 * or a demotion still registered while no call runs: invalid. */
Test(pool, checker_finds_hot_slots_out_of_step, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(pp__debug_hot(pool, r, 1), 1);
    cr_assert(pp__pool_is_valid(pool));
    pp__node_t *node = pool->nodes[pp_ref_node(r)];
    unsigned i = pp__hot_index(atomic_load(&pp__lookup(pool, r)->pw));
    uint64_t used = atomic_load(&node->hot.used);
    unsigned other = (unsigned)__builtin_ctzll(~used);
    atomic_store(&node->hot.used, used | ((uint64_t)1 << other));
    cr_assert_not(pp__pool_is_valid(pool));
    atomic_store(&node->hot.used, used);
    _Atomic uint32_t *dm = &node->hot.lines[(size_t)i * (pool->hot_shards + 1u)].demoters;
    atomic_store(dm, 1);
    cr_assert_not(pp__pool_is_valid(pool));
    atomic_store(dm, 0);
    cr_assert(pp__pool_is_valid(pool));
    cr_assert_eq(pp__debug_hot(pool, r, 0), 0);
    cr_assert(pp__pool_is_valid(pool));
    assert_rc(pp_release(pool, r), 0);
    test_drain(pool);
    test_destroy(pool);
    cr_assert_eq(ct_frees(ct, 0), 1);
    ct_delete(ct);
}

/* ---- frees that release other entries --------------------------------------- */

/* A parent entry's data holds the ref of its child; its free releases the
 * child.  The child's free counts itself.  One of the children (a "gate")
 * may wait in its free until the parent's release has returned. */
typedef struct family {
    pp_pool_t *pool;
    atomic_uint parent_frees, child_frees, gate_frees;
    atomic_int release_rc;               /* the parent's pp_release of its child */
    test_sig_t gate_in;                  /* the gate's free has started */
    test_sig_t released;                 /* the parent's release returned */
    bool use_gate;
} family_t;

static family_t g_fam;

static void parent_free(void *data, size_t size, void *ctx)
{
    family_t *f = ctx;
    (void)size;
    pp_ref_t child;
    memcpy(&child, data, sizeof child);
    if (f->use_gate)
        TCHECK(sig_wait(&f->gate_in, 1), "the gate's free never started");
    atomic_store(&f->release_rc, pp_release(f->pool, child));
    sig_set(&f->released, 1);
    free(data);
    atomic_fetch_add(&f->parent_frees, 1);
}

static void child_free(void *data, size_t size, void *ctx)
{
    family_t *f = ctx;
    (void)size;
    free(data);
    atomic_fetch_add(&f->child_frees, 1);
}

/* Holds its node's reclaimer (in destroy's sweep) until the parent's
 * release of the child has returned. */
static void gate_free(void *data, size_t size, void *ctx)
{
    family_t *f = ctx;
    (void)size;
    sig_set(&f->gate_in, 1);
    TCHECK(sig_wait(&f->released, 1), "the parent's release never returned");
    free(data);
    atomic_fetch_add(&f->gate_frees, 1);
}

static const pp_type_t parent_type = {.name = "parent", .free = parent_free, .ctx = &g_fam};
static const pp_type_t child_type = {.name = "child", .free = child_free, .ctx = &g_fam};
static const pp_type_t gate_type = {.name = "gate", .free = gate_free, .ctx = &g_fam};

static void family_init(pp_pool_t *pool, bool use_gate)
{
    g_fam.pool = pool;
    atomic_store(&g_fam.parent_frees, 0);
    atomic_store(&g_fam.child_frees, 0);
    atomic_store(&g_fam.gate_frees, 0);
    atomic_store(&g_fam.release_rc, 1);
    sig_init(&g_fam.gate_in);
    sig_init(&g_fam.released);
    g_fam.use_gate = use_gate;
}

static pp_ref_t put_typed(pp_pool_t *pool, const pp_type_t *type, unsigned node)
{
    void *p = calloc(1, 64);
    cr_assert_not_null(p);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, 64, type, PP_ON_NODE(node), &r), 0);
    return r;
}

/* The parent, put with its child's ref in its data. */
static pp_ref_t put_parent(pp_pool_t *pool, pp_ref_t child, unsigned node)
{
    void *p = calloc(1, 64);
    cr_assert_not_null(p);
    memcpy(p, &child, sizeof child);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, 64, &parent_type, PP_ON_NODE(node), &r), 0);
    return r;
}

/* After destroy: the parent, the gate (if used) and the child were each
 * freed once, the parent's release of the child returned 0, and the child
 * is no leak. */
static void family_check_destroyed(report_cap_t *rep, pp_ref_t child)
{
    cr_assert_eq(atomic_load(&g_fam.parent_frees), 1);
    cr_assert_eq(atomic_load(&g_fam.gate_frees), g_fam.use_gate ? 1u : 0u);
    cr_assert_eq(atomic_load(&g_fam.child_frees), 1);
    assert_rc(atomic_load(&g_fam.release_rc), 0, "the parent's release of its child");
    char hex[32];
    ref_hex(child, hex);
    cr_assert(!report_has(rep, 0, hex, NULL, NULL), "the child is reported as leaked");
    TCHECK_NONE();
    sig_destroy(&g_fam.gate_in);
    sig_destroy(&g_fam.released);
}

static pp_pool_t *synth4_pool(report_cap_t *rep)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = TEST_SYNTH4;
    if (rep != NULL)
        report_cap_attach(rep, &o);
    pp_pool_t *pool = test_pool(&o);
    cr_assert_eq(test_nodes(pool), 4);
    return pool;
}

/* While the pool runs: a parent's free releases its child, on its own node
 * and on another; each is freed once. */
Test(pool, a_free_releases_a_child_on_any_node, .timeout = 60)
{
    pp_pool_t *pool = synth4_pool(NULL);
    for (unsigned cnode = 0; cnode < 2; cnode++) {
        family_init(pool, false);
        pp_ref_t c = put_typed(pool, &child_type, cnode);
        pp_ref_t p = put_parent(pool, c, 0);
        assert_rc(pp_release(pool, p), 0);
        test_drain(pool);
        cr_assert_eq(atomic_load(&g_fam.parent_frees), 1);
        cr_assert_eq(atomic_load(&g_fam.child_frees), 1, "child on node %u", cnode);
        assert_rc(atomic_load(&g_fam.release_rc), 0);
        sig_destroy(&g_fam.gate_in);
        sig_destroy(&g_fam.released);
    }
    test_destroy(pool);
    TCHECK_NONE();
}

/* Destroy with the parent still owned: its free, in destroy's sweep,
 * releases the child put after it on the same node.  The child is freed
 * once, by its reclaimer, and is no leak. */
Test(pool, destroy_sweeps_a_child_released_by_a_free_on_the_same_node, .timeout = 60)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = synth4_pool(&rep);
    family_init(pool, false);
    pp_ref_t p = put_parent(pool, PP_REF_NONE, 0);   /* its slot comes first */
    pp_ref_t c = put_typed(pool, &child_type, 0);
    /* the child's ref into the parent's data: pinned for writing */
    void *d;
    assert_rc(pp_pin(pool, p, PP_PIN_WRITE, &d), 0);
    memcpy(d, &c, sizeof c);
    assert_rc(pp_unpin(pool, p), 0);
    assert_rc(pp_pool_destroy(pool), 0);
    family_check_destroyed(&rep, c);
    char hex[32];
    ref_hex(p, hex);
    cr_assert(report_has(&rep, 0, hex, NULL, NULL), "the parent is not reported as leaked");
    report_cap_free(&rep);
}

/* The same with the child on node 1, released while node 1's reclaimer is
 * in destroy's sweep: held there by the free of a gate entry, put before
 * the child, until the release has returned. */
Test(pool, destroy_sweeps_a_child_released_by_a_free_on_another_node, .timeout = 60)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_pool_t *pool = synth4_pool(&rep);
    family_init(pool, true);
    pp_ref_t g = put_typed(pool, &gate_type, 1);
    pp_ref_t c = put_typed(pool, &child_type, 1);
    pp_ref_t p = put_parent(pool, c, 0);
    assert_rc(pp_pool_destroy(pool), 0);
    family_check_destroyed(&rep, c);
    (void)g, (void)p;
    report_cap_free(&rep);
}
