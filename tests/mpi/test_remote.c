/*
 * test_remote.c -- the remote side of the MPI layer in the orders that
 * random timing only makes likely: the layer's test points (layer.h) hold
 * a thread at a named place while the test makes the other side move, so
 * each race here happens on every run.  Also what a remote pin gets when
 * its home cannot give it the data.
 */
#include "world.h"

#include <fcntl.h>
#include <unistd.h>

#include "support/faultdev.h"

TestSuite(remote, .timeout = 60);

/* ---- a miss racing an install ------------------------------------------ */

/* At the pin's MISS point (once), on the pinning thread: ends the home's
 * write pin that holds the fetch back, then waits until that fetch is
 * installed and finished, so the pin takes req_mu only after the copy is
 * in the table and the request is gone. */
typedef struct miss_gate {
    world_t *W;
    pp_gref_t g;
    void *wd;                      /* the home's write pin */
    _Atomic int reached;
} miss_gate_t;

static void finish_fetch_at_miss(pp_mpi_t *m, enum pp__mpi_tp where, void *arg, void *ctx)
{
    (void)arg;
    miss_gate_t *gate = ctx;
    if (where != PP__MPI_TP_MISS || atomic_fetch_add(&gate->reached, 1) != 0)
        return;
    assert_rc(pp_mpi_unpin(gate->W->m[0], gate->g, PP_PIN_WRITE, gate->wd), 0);
    pthread_mutex_lock(&m->req_mu);
    while (m->reqs != NULL)
        pthread_cond_wait(&m->req_cv, &m->req_mu);   /* finish_req broadcasts */
    pthread_mutex_unlock(&m->req_mu);
}

Test(remote, miss_racing_an_install_takes_the_installed_copy)
{
    world_t W;
    world_up(&W, 2, 31, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    /* The home's write pin holds every serve of g back: the fetch below
     * parks at the home, so no copy can be here before the next pin looks. */
    miss_gate_t gate = { .W = &W, .g = g };
    assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &gate.wd, NULL), 0);
    /* a fetch without a waiter: the progress thread will install its copy */
    void *d = NULL;
    uint32_t got = 0;
    assert_rc(pp_mpi_pin(W.m[1], g, PP_PIN_NOWAIT, &d, &got), PP_EAGAIN);
    world_tp(W.m[1], finish_fetch_at_miss, &gate);
    /* misses (no copy yet); at its MISS point the fetch is let go and ends */
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, &got), 0);
    world_tp(W.m[1], NULL, NULL);
    cr_assert_eq(atomic_load(&gate.reached), 1, "the pin missed once");
    cr_assert(ct_check(d, 1, 4096));
    cr_assert_eq(got, 2u, "the version the write unpin published");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 1, "%llu fetches: the copy installed while the pin looked "
                 "was fetched again", (unsigned long long)st.misses);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

/* Whether rank 0's entry id is freed (waits up to TEST_WAIT_MS). */
static bool home_entry_freed(world_t *W, size_t id)
{
    return WAIT_UNTIL((test_drain(W->pool[0]), ct_frees(W->ct[0], id) == 1), TEST_WAIT_MS);
}

/* ---- weight returns past 2^32 messages --------------------------------- */

Test(remote, weight_returns_past_two_to_the_32_are_not_duplicates)
{
    enum { N = 4 };
    world_t W;
    world_up(&W, 2, 32, 3, 0);
    pp_gref_t g[N];
    for (int i = 0; i < N; i++) {
        g[i] = put_on(&W, 0, (size_t)i + 1, 256);
        give(&W, 0, 1, g[i]);
        assert_rc(pp_mpi_release(W.m[0], g[i]), 0);
    }
    /* By hand, before any return: rank 1 has sent 2^32 - 2 returns to
     * rank 0, and rank 0 has seen every one of them.  Each release below
     * is one return message (the next waits for the home's free), with
     * the sequence numbers 2^32 - 2, 2^32 - 1, 2^32 and 2^32 + 1.  The
     * queue of commands orders these stores before the progress threads
     * read them. */
    const uint64_t start = UINT32_MAX - 1u;
    W.m[1]->outbox[0].seq = start;
    assert_rc(pp__wset_add(&W.m[0]->seen_seq[1], (pp__wiv_t){ 0, start }), 0);
    for (int i = 0; i < N; i++) {
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
        cr_assert(home_entry_freed(&W, (size_t)i + 1),
                  "return %d (sequence number %#llx) never freed its entry: taken for a "
                  "duplicate", i, (unsigned long long)(start + (uint64_t)i));
    }
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[0], &st);
    cr_assert_eq(st.refused_returns, 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(report_cap_count(&W.rep[0]), 0, "no report at the home");
    world_free_ct(&W);
}

/* ---- a remote pin of an entry whose load fails at its home ------------- */

#define HOME_LIMIT (1u << 20)

typedef struct swap_home {
    char dir[64];
    faultdev_t *fd;                /* rank 0's swap device (the pool owns it) */
} swap_home_t;

/* world_up with rank r's pool made with opt[r] (reports captured), and
 * rank 0's on the fault device fd0 if it is not NULL. */
static void world_up_opts(world_t *W, uint64_t seed, const pp_options_t *opt, faultdev_t *fd0)
{
    memset(W, 0, sizeof *W);
    W->n = 2;
    pp__inproc_chaos_t chaos = { seed, 3, 0 };
    cr_assert_eq(pp__inproc_world_create(2, &chaos, &W->w), 0);
    for (int r = 0; r < 2; r++) {
        pp_options_t o = opt[r];
        report_cap_init(&W->rep[r]);
        report_cap_attach(&W->rep[r], &o);
        if (r == 0 && fd0 != NULL)
            cr_assert_eq(faultdev_pool_create(&o, fd0, &W->pool[0]), 0);
        else
            W->pool[r] = test_pool(&o);
        W->ct[r] = ct_new(4096);
        cr_assert_eq(pp__layer_create_on(pp__inproc_rank(W->w, r), false, W->pool[r], &W->m[r]),
                     0);
    }
}

/* world_up with rank 0's pool on a fault device: swap in a directory of
 * its own, HOME_LIMIT bytes in memory. */
static void world_up_swap_home(world_t *W, swap_home_t *sh, uint64_t seed)
{
    snprintf(sh->dir, sizeof sh->dir, "%s", "/tmp/pp-remote-XXXXXX");
    cr_assert_not_null(mkdtemp(sh->dir));
    pp_options_t opt[2] = { PP_OPTIONS_INIT, PP_OPTIONS_INIT };
    opt[0].mem_limit = HOME_LIMIT;
    opt[0].swap_dir = sh->dir;
    sh->fd = faultdev_new();
    cr_assert_not_null(sh->fd);
    world_up_opts(W, seed, opt, sh->fd);
}

static const pp_type_t squeeze_type = { .name = "squeeze", .flags = PP_TYPE_NOSWAP };

/* Makes rank 0's pool evict everything it can: a NOSWAP put of its whole
 * limit, released at once.  ref must then be on disk only. */
static void squeeze_home(world_t *W, pp_ref_t ref)
{
    pp_ref_t big;
    assert_rc(pp_put(W->pool[0], malloc(HOME_LIMIT), HOME_LIMIT, &squeeze_type, 0, &big), 0);
    assert_rc(pp_release(W->pool[0], big), 0);
    test_drain(W->pool[0]);
    pp_entry_info_t info;
    assert_rc(pp_stat(W->pool[0], ref, &info), 0);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING),
                 PP_STATE_SWAPPED, "the home's entry is on disk only (state 0x%x)", info.state);
}

/* Flips one byte of ref's swap copy in the home's swap file. */
static void flip_home_byte(world_t *W, pp_ref_t ref, uint64_t at)
{
    uint64_t off = 0, len = 0;
    assert_rc(pp__debug_swap_where(W->pool[0], ref, &off, &len), 0);
    cr_assert_lt(at, len);
    char path[4200];
    snprintf(path, sizeof path, "%s/node%u.swap", pp__swap_path(W->pool[0]), pp_ref_node(ref));
    int f = open(path, O_RDWR | O_CLOEXEC);
    cr_assert_geq(f, 0, "open %s", path);
    unsigned char b = 0;
    cr_assert_eq(pread(f, &b, 1, (off_t)(off + at)), 1);
    b ^= 0x40;
    cr_assert_eq(pwrite(f, &b, 1, (off_t)(off + at)), 1);
    close(f);
}

/* Plain bytes, freed with free(): a type the pool may swap. */
static const pp_type_t flat_type = { .name = "flat" };

/* A swappable home entry of rank 0 with id's pattern. */
static pp_gref_t put_flat_on_home(world_t *W, size_t id, size_t size)
{
    pp_gref_t g;
    assert_rc(pp_mpi_put(W->m[0], ct_buf(W->ct[0], id, size), size, &flat_type, 0, &g), 0);
    return g;
}

typedef struct pin_arg {
    pp_mpi_t *m;
    pp_gref_t g;
    void *d;
    int rc;
    _Atomic bool done;
} pin_arg_t;

static void *pin_main(void *arg)
{
    pin_arg_t *a = arg;
    a->rc = pp_mpi_pin(a->m, a->g, 0, &a->d, NULL);
    atomic_store(&a->done, true);
    return NULL;
}

/* A remote pin on its own thread: its result, or a failed test if it has
 * not returned within TEST_WAIT_MS. */
static int remote_pin_bounded(pp_mpi_t *m, pp_gref_t g, void **d, const char *what)
{
    pin_arg_t a = { .m = m, .g = g };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pin_main, &a), 0);
    cr_assert(WAIT_UNTIL(atomic_load(&a.done), TEST_WAIT_MS),
              "%s: the remote pin never returned", what);
    pthread_join(th, NULL);
    *d = a.d;
    return a.rc;
}

Test(remote, failed_load_at_home_reaches_the_remote_pin)
{
    world_t W;
    swap_home_t sh;
    world_up_swap_home(&W, &sh, 33);
    pp_gref_t g = put_flat_on_home(&W, 1, 8192);
    give(&W, 0, 1, g);
    void *d = NULL;
    /* the device fails every read: the pin gets the load's error */
    squeeze_home(&W, g.ref);
    atomic_store(&sh.fd->read_err, -EIO);
    assert_rc(remote_pin_bounded(W.m[1], g, &d, "read error"), PP_EIO);
    unsigned long fails = atomic_load(&sh.fd->read_fails);
    cr_assert(fails >= 1 && fails <= 2, "%lu failed reads for one remote pin", fails);
    /* the swap copy stayed: a later pin gets the bytes */
    atomic_store(&sh.fd->read_err, 0);
    assert_rc(remote_pin_bounded(W.m[1], g, &d, "after the read error"), 0);
    cr_assert(ct_check(d, 1, 8192), "the home's bytes");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    cr_assert_eq(atomic_load(&sh.fd->read_fails), fails, "no read failed since");
    /* a corrupt copy: PP_ECORRUPT, then the repaired copy loads.  The
     * cached copy must go first: a pin of version 2 needs the home. */
    assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[0], g, PP_PIN_WRITE, d), 0);
    pp_gref_t v2 = g;
    v2.version = 2;
    squeeze_home(&W, g.ref);
    flip_home_byte(&W, g.ref, 100);
    assert_rc(remote_pin_bounded(W.m[1], v2, &d, "corrupt copy"), PP_ECORRUPT);
    flip_home_byte(&W, g.ref, 100);
    assert_rc(remote_pin_bounded(W.m[1], v2, &d, "repaired copy"), 0);
    cr_assert(ct_check(d, 1, 8192), "the home's bytes");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
    cr_assert_eq(rmdir(sh.dir), 0, "the home's swap directory is left empty");
}

/* ---- an install that fails for the installing thread alone ------------- */

/* Rank 1's frees of gate entries wait at this gate, so its reclaimer
 * stops at the first and the backlog fills behind it. */
#define GSIZE 4000u
#define GBOUND (32u * (GSIZE + 64u))   /* the mark: 8 entries */

static test_sig_t g_gate_open;
static atomic_uint g_gate_entered;

static void gate_free(void *data, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    atomic_fetch_add(&g_gate_entered, 1);
    TCHECK(sig_wait(&g_gate_open, 1), "the gate stayed closed");
    free(data);
}

static const pp_type_t gate_type = { .name = "gate", .free = gate_free };

/* Puts and releases gate entries on rank 1's node 0 until its backlog is
 * at the mark (the reclaimer held at the gate by the first). */
static void fill_backlog_to_mark(pp_pool_t *pool)
{
    pp_stats_t st;
    test_stats(pool, &st);
    for (int i = 0; i < 1000; i++) {
        if (STAT_NODE(pool, 0, backlog_bytes) >= st.backlog_mark)
            break;
        pp_ref_t r;
        assert_rc(pp_put(pool, calloc(1, GSIZE), GSIZE, &gate_type, PP_ON_NODE(0), &r), 0);
        assert_rc(pp_release(pool, r), 0);
        if (i == 0)
            cr_assert(WAIT_UNTIL(atomic_load(&g_gate_entered) == 1, TEST_WAIT_MS));
    }
    cr_assert_geq(STAT_NODE(pool, 0, backlog_bytes), st.backlog_mark);
}

static _Thread_local bool tl_qsbr;   /* this is the QSBR pinner */

typedef struct qsbr_pinner {
    world_t *W;
    pp_gref_t g;
    pin_arg_t other;               /* the innocent waiter, started at INSTALL */
    pthread_t other_th;
    pp_ref_t held;                 /* a local entry of rank 1, to enter the section */
    _Atomic int installs;          /* INSTALL points reached */
    _Atomic bool qsbr_first;       /* the first was the QSBR thread's */
    int rc;                        /* the QSBR thread's pin */
} qsbr_pinner_t;

/* At the first INSTALL (the QSBR thread's): another thread joins the same
 * request and waits in it before the install goes on. */
static void join_at_install(pp_mpi_t *m, enum pp__mpi_tp where, void *arg, void *ctx)
{
    qsbr_pinner_t *q = ctx;
    if (where != PP__MPI_TP_INSTALL || atomic_fetch_add(&q->installs, 1) != 0)
        return;
    atomic_store(&q->qsbr_first, tl_qsbr);
    pp__req_t *req = arg;
    TCHECK(pthread_create(&q->other_th, NULL, pin_main, &q->other) == 0, "pthread_create");
    bool joined = WAIT_UNTIL(({
                                 pthread_mutex_lock(&m->req_mu);
                                 unsigned w = req->waiters;
                                 pthread_mutex_unlock(&m->req_mu);
                                 w == 2;
                             }),
                             TEST_WAIT_MS);
    TCHECK(joined, "the second pin never joined the request");
}

/* A QSBR thread inside its section (it called pp_stat after its last
 * pp_quiescent) pins a remote ref: it is the one to install the copy. */
static void *qsbr_pin_main(void *arg)
{
    qsbr_pinner_t *q = arg;
    tl_qsbr = true;
    pp_pool_t *pool = q->W->pool[1];
    pp_quiescent(pool);
    pp_entry_info_t info;
    TCHECK(pp_stat(pool, q->held, &info) == 0, "pp_stat");   /* enters the section */
    void *d = NULL;
    q->rc = pp_mpi_pin(q->W->m[1], q->g, 0, &d, NULL);
    if (q->rc == 0)
        TCHECK(pp_mpi_unpin(q->W->m[1], q->g, 0, d) == 0, "unpin");
    pp_quiescent(pool);
    return NULL;
}

Test(remote, installer_in_a_qsbr_section_keeps_the_copy_for_other_waiters)
{
    sig_init(&g_gate_open);
    atomic_store(&g_gate_entered, 0);
    world_t W;
    pp_options_t opt[2] = { PP_OPTIONS_INIT, PP_OPTIONS_INIT };
    opt[1].reclaim_backlog = GBOUND;
    world_up_opts(&W, 34, opt, NULL);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    qsbr_pinner_t q = { .W = &W, .g = g, .held = ct_put(W.pool[1], W.ct[1], 2, 64, 0) };
    fill_backlog_to_mark(W.pool[1]);
    q.other = (pin_arg_t){ .m = W.m[1], .g = g };
    world_tp(W.m[1], join_at_install, &q);
    pthread_t th;
    test_thread_start(&th, qsbr_pin_main, &q);
    test_thread_join(th);
    TCHECK_NONE();
    cr_assert(atomic_load(&q.qsbr_first), "the QSBR thread installed first");
    assert_rc(q.rc, PP_EDEADLK);   /* its own: it may not wait for the backlog */
    /* The other waiter is innocent: it installs the fetched copy itself,
     * waiting for the backlog like any put. */
    cr_assert(WAIT_UNTIL(atomic_load(&q.other.done) ||
                             STAT_NODE(W.pool[1], 0, backlog_waiting) == 1,
                         TEST_WAIT_MS));
    cr_assert(!atomic_load(&q.other.done), "the waiting thread got %s",
              pp_err_name(q.other.rc));
    sig_set(&g_gate_open, 1);
    pthread_join(q.other_th, NULL);
    world_tp(W.m[1], NULL, NULL);
    assert_rc(q.other.rc, 0);
    cr_assert(ct_check(q.other.d, 1, 4096), "the home's bytes");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, q.other.d), 0);
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 1, "the bytes fetched once were kept");
    assert_rc(pp_release(W.pool[1], q.held), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
    sig_destroy(&g_gate_open);
}

/* ---- typed copies whose load hands out one object twice ---------------- */

/* A type whose load returns one shared object (a contract breach: load
 * must allocate new data), on rank 1; rank 0 loads fresh memory. */
static unsigned char g_shared[64];

static int shared_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)ctx;
    return pp_write(w, data, size);
}

static int fresh_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)ctx;
    void *p = malloc(size);
    if (p == NULL || pp_read(r, p, size) != 0) {
        free(p);
        return -1;
    }
    *data = p;
    return 0;
}

static int shared_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)ctx;
    if (size > sizeof g_shared || pp_read(r, g_shared, size) != 0)
        return -1;
    *data = g_shared;
    return 0;
}

static void fresh_free(void *data, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (data != g_shared)
        free(data);
}

static const pp_type_t home_typed = { .name = "typed", .save = shared_save, .load = fresh_load,
                                      .free = fresh_free };
static const pp_type_t shared_typed = { .name = "shared", .save = shared_save,
                                        .load = shared_load, .free = fresh_free };

Test(remote, typed_load_handing_out_data_in_use_is_refused)
{
    world_t W;
    world_up(&W, 2, 35, 3, 0);
    assert_rc(pp_mpi_type_register(W.m[0], 7, &home_typed), 0);
    assert_rc(pp_mpi_type_register(W.m[1], 7, &shared_typed), 0);
    pp_gref_t g[2];
    for (int i = 0; i < 2; i++) {
        unsigned char *b = malloc(sizeof g_shared);
        memset(b, 0x10 + i, sizeof g_shared);
        assert_rc(pp_mpi_put(W.m[0], b, sizeof g_shared, &home_typed, 0, &g[i]), 0);
    }
    void *d0 = NULL, *d1 = NULL;
    assert_rc(pp_mpi_pin(W.m[1], g[0], 0, &d0, NULL), 0);
    cr_assert_eq(d0, (void *)g_shared);
    /* The second copy's load hands out the object the first copy holds:
     * two copies could not be told apart at their unpins. */
    int rc = pp_mpi_pin(W.m[1], g[1], 0, &d1, NULL);
    cr_assert_eq(rc, PP_EIO, "a second copy of the same object: %s", pp_err_name(rc));
    cr_assert(report_has(&W.rep[1], 0, "shared", "load", NULL), "reported on rank 1");
    assert_rc(pp_mpi_unpin(W.m[1], g[0], 0, d0), 0);
    /* the refused copy left nothing behind: a pin works once the first
     * copy (not owned here: it died at its unpin) is freed */
    test_drain(W.pool[1]);
    assert_rc(pp_mpi_pin(W.m[1], g[1], 0, &d1, NULL), 0);
    cr_assert_eq(((unsigned char *)d1)[0], 0x11, "the second entry's bytes");
    assert_rc(pp_mpi_unpin(W.m[1], g[1], 0, d1), 0);
    for (int i = 0; i < 2; i++)
        assert_rc(pp_mpi_release(W.m[0], g[i]), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

/* ---- version 0 ------------------------------------------------------------- */

/* Version 0 asks for any version, as 1 does: a cached copy answers it,
 * even after the home has published a newer one (pinpool_mpi.h); a pin
 * that needs the newer one names it. */
/* Pins g on m at version v, unpins; the version the pin got. */
static uint32_t pin_version(pp_mpi_t *m, pp_gref_t g, uint32_t v)
{
    void *d = NULL;
    uint32_t got = 0;
    g.version = v;
    assert_rc(pp_mpi_pin(m, g, 0, &d, &got), 0);
    assert_rc(pp_mpi_unpin(m, g, 0, d), 0);
    return got;
}

Test(remote, version_zero_takes_the_cached_copy_whatever_the_home_has)
{
    world_t W;
    world_up(&W, 2, 36, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, g);
    cr_assert_eq(pin_version(W.m[1], g, 0), 1u);
    void *d = NULL;
    assert_rc(pp_mpi_pin(W.m[0], g, PP_PIN_WRITE, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[0], g, PP_PIN_WRITE, d), 0);   /* the home has version 2 */
    cr_assert_eq(pin_version(W.m[1], g, 0), 1u, "version 0: the cached copy");
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[1], &st);
    cr_assert_eq(st.misses, 1, "a hit, no round trip");
    cr_assert_eq(pin_version(W.m[1], g, 2), 2u, "a pin that names version 2 gets it");
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

/* ---- weight merged with a duplicate ---------------------------------------- */

/* Rank 2 holds a token of its own and a forged copy of a token rank 1
 * holds too (the same weight under another identity: the claims of the
 * imports cannot see it): the two intervals are adjacent, so rank 2 holds
 * them merged.  Rank 1's return comes first;
 * rank 2's return is then half a duplicate: the other half, weight rank 2
 * owned, still comes home and the entry is freed. */
Test(remote, weight_merged_with_a_duplicate_still_comes_home)
{
    world_t W;
    world_up(&W, 3, 37, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 256);
    pp_mpi_token_t own, dup;
    pp_gref_t got;
    assert_rc(pp_mpi_export(W.m[0], g, &own), 0);
    assert_rc(pp_mpi_export(W.m[0], g, &dup), 0);
    cr_assert_eq(own.hi, dup.lo, "consecutive mints are adjacent");
    assert_rc(pp_mpi_import(W.m[2], &own, &got), 0);
    assert_rc(pp_mpi_import(W.m[1], &dup, &got), 0);
    dup.seq += 1000;                                    /* forged */
    assert_rc(pp_mpi_import(W.m[2], &dup, &got), 0);   /* the duplicate, merged */
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    cr_assert(WAIT_UNTIL(({
                             pp_mpi_stats_t st;
                             pp_mpi_stats(W.m[0], &st);
                             pp__home_t *h = NULL;
                             pthread_mutex_lock(&W.m[0]->own_mu);
                             h = pp__home_find(W.m[0], g.ref);
                             uint64_t out = h != NULL ? pp__wset_weight(&h->out) : 0;
                             pthread_mutex_unlock(&W.m[0]->own_mu);
                             out == own.hi - own.lo;
                         }),
                         TEST_WAIT_MS),
              "rank 1's return came home");
    assert_rc(pp_mpi_release(W.m[2], g), 0);
    assert_rc(pp_mpi_release(W.m[2], g), 0);
    cr_assert(home_entry_freed(&W, 1),
              "the weight rank 2 owned never came back: its return was refused whole");
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[0], &st);
    cr_assert_eq(st.refused_returns, 1, "the duplicate half is refused");
    cr_assert(report_has(&W.rep[0], 0, "not out", NULL, NULL), "and reported");
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

/* ---- export past unit weight -------------------------------------------- */

static void grow_fails(pp_mpi_t *m, enum pp__mpi_tp where, void *arg, void *ctx)
{
    (void)m;
    (void)ctx;
    if (where == PP__MPI_TP_EXPORT_GROW)
        *(bool *)arg = true;
}

/* Rank 1 holds one token and exports until it holds unit weight; the next
 * export asks the home for more, and keeping part of what comes back
 * fails for lack of memory: no weight may be lost (the entry is freed
 * once every token and owner is gone). */
Test(remote, export_that_cannot_keep_new_weight_loses_none)
{
    world_t W;
    world_up(&W, 2, 38, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 256);
    give(&W, 0, 1, g);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    pp_mpi_token_t t;
    int splits = 0;
    for (;; splits++) {
        pp__proxy_t *p = NULL;
        uint64_t v;
        pthread_mutex_lock(&W.m[1]->own_mu);
        cr_assert(pp__ht_get(&W.m[1]->proxies[0], g.ref, &v));
        p = (pp__proxy_t *)(uintptr_t)v;
        uint64_t held = pp__wset_weight(&p->held);
        pthread_mutex_unlock(&W.m[1]->own_mu);
        if (held == 1)
            break;
        assert_rc(pp_mpi_export(W.m[1], g, &t), 0);
        assert_rc(pp_mpi_token_drop(W.m[1], &t), 0);
    }
    cr_assert_eq(splits, 32, "unit weight after 32 splits");
    world_tp(W.m[1], grow_fails, NULL);
    int rc = pp_mpi_export(W.m[1], g, &t);   /* a round trip to the home */
    world_tp(W.m[1], NULL, NULL);
    if (rc == 0)
        assert_rc(pp_mpi_token_drop(W.m[1], &t), 0);
    else
        assert_rc(rc, PP_ENOMEM);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    cr_assert(home_entry_freed(&W, 1),
              "export %s: the weight its home minted never came back", pp_err_name(rc));
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[0], &st);
    cr_assert_eq(st.refused_returns, 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

/* ---- one token, two ranks ---------------------------------------------------- */

/* The same token bytes reach two ranks (an MPI_Bcast of a task descriptor
 * holding one token): the second import is refused, so no rank can hold
 * weight its home counts once, and the entry lives exactly as long as its
 * real owners. */
Test(remote, token_imported_on_two_ranks_is_refused_on_the_second)
{
    world_t W;
    world_up(&W, 3, 39, 3, 0);
    pp_gref_t g = put_on(&W, 0, 1, 256);
    pp_mpi_token_t t;
    pp_gref_t got;
    assert_rc(pp_mpi_export(W.m[0], g, &t), 0);
    assert_rc(pp_mpi_import(W.m[1], &t, &got), 0);
    int rc = pp_mpi_import(W.m[2], &t, &got);
    cr_assert_eq(rc, PP_EINVAL, "the second rank's import: %s", pp_err_name(rc));
    pp_mpi_stats_t st;
    pp_mpi_stats(W.m[2], &st);
    cr_assert_eq(st.refused_imports, 1);
    /* the same token at its home, and a token dropped, are refused too */
    assert_rc(pp_mpi_import(W.m[0], &t, &got), PP_EINVAL);
    pp_mpi_token_t d;
    assert_rc(pp_mpi_export(W.m[1], g, &d), 0);
    assert_rc(pp_mpi_token_drop(W.m[1], &d), 0);
    assert_rc(pp_mpi_import(W.m[2], &d, &got), PP_EINVAL);
    /* the real holder's weight keeps the entry; its release frees it */
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    void *p;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &p, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, p), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    cr_assert(home_entry_freed(&W, 1),
              "freed once its owners are gone");
    pp_mpi_stats(W.m[0], &st);
    cr_assert_eq(st.refused_returns, 0, "no weight came home twice");
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}
