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
        cr_assert(WAIT_UNTIL((test_drain(W.pool[0]), ct_frees(W.ct[0], (size_t)i + 1) == 1),
                             TEST_WAIT_MS),
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

/* world_up with rank 0's pool on a fault device: swap in a directory of
 * its own, HOME_LIMIT bytes in memory. */
static void world_up_swap_home(world_t *W, swap_home_t *sh, uint64_t seed)
{
    memset(W, 0, sizeof *W);
    W->n = 2;
    pp__inproc_chaos_t chaos = { seed, 3, 0 };
    cr_assert_eq(pp__inproc_world_create(2, &chaos, &W->w), 0);
    snprintf(sh->dir, sizeof sh->dir, "%s", "/tmp/pp-remote-XXXXXX");
    cr_assert_not_null(mkdtemp(sh->dir));
    for (int r = 0; r < 2; r++) {
        pp_options_t opt = PP_OPTIONS_INIT;
        report_cap_init(&W->rep[r]);
        report_cap_attach(&W->rep[r], &opt);
        if (r == 0) {
            opt.mem_limit = HOME_LIMIT;
            opt.swap_dir = sh->dir;
            sh->fd = faultdev_new();
            cr_assert_not_null(sh->fd);
            cr_assert_eq(faultdev_pool_create(&opt, sh->fd, &W->pool[0]), 0);
        } else {
            W->pool[r] = test_pool(&opt);
        }
        W->ct[r] = ct_new(4096);
        cr_assert_eq(pp__mpi_create_on(pp__inproc_rank(W->w, r), false, W->pool[r], &W->m[r]),
                     0);
    }
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
