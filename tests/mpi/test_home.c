/*
 * test_home.c -- the home side of the MPI layer (src/mpi/home.c): write
 * pins, the versions they publish, and what waits on them.
 *
 * Each test drives one interleaving deterministically: a type whose save
 * stops at a gate holds a serve in flight (the home's progress thread is
 * inside it), the fault device's read gate holds a write pin inside its
 * load, and flags the layer sets when a request parks or a thread waits
 * say when the other side is in place.  Shown: a failed batch of write
 * pins publishes nothing; a write pin that fails still lets a request
 * parked behind it be answered; only the thread that took a write pin
 * drops it; a thread waiting for a version is woken when the entry dies;
 * a record's publish command is queued at most once across its deaths
 * and reuses, and the commands behind it all run, even when a late write
 * release of a dead life queued it just before the record's next life
 * publishes (the layer's test points hold both threads where they meet).
 */
#include "world.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "support/faultdev.h"
#include "support/vectype.h"

#define TID 9u
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

TestSuite(home, .timeout = 120);

/* ---- a type whose save stops at a gate ------------------------------------ */

/* vt_t's type, with a save that, while the gate is closed, says it has
 * entered (sig entered) and waits for the gate to open: the home's
 * progress thread stays inside a serve, with the serve counted. */
typedef struct gated {
    vt_t vt;
    test_sig_t entered, open;
    atomic_bool closed;
} gated_t;

static int gated_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    gated_t *g = ctx;
    if (atomic_load(&g->closed)) {
        sig_set(&g->entered, 1);
        (void)sig_wait(&g->open, 1);
    }
    return vec_save(data, size, w, &g->vt);
}

static int gated_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    gated_t *g = ctx;
    return vec_load(data, size, r, &g->vt);
}

static void gated_free(void *data, size_t size, void *ctx)
{
    gated_t *g = ctx;
    vec_free(data, size, &g->vt);
}

static void gated_init(gated_t *g)
{
    memset(g, 0, sizeof *g);
    vt_init(&g->vt, 4096);
    g->vt.type.save = gated_save;
    g->vt.type.load = gated_load;
    g->vt.type.free = gated_free;
    g->vt.type.ctx = g;
    sig_init(&g->entered);
    sig_init(&g->open);
}

/* ---- pins on other threads ------------------------------------------------- */

typedef struct pinner {
    pp_mpi_t *m;
    pp_gref_t g;
    unsigned flags;
    void *d;
    uint32_t got;
    atomic_int rc;          /* -99: still inside the pin */
} pinner_t;

static void *pinner_main(void *arg)
{
    pinner_t *p = arg;
    void *d = NULL;
    uint32_t got = 0;
    int rc = pp_mpi_pin(p->m, p->g, p->flags, &d, &got);
    p->d = d;
    p->got = got;
    atomic_store(&p->rc, rc);   /* seq_cst: d and got are read after it */
    return NULL;
}

static void pin_start(pinner_t *p, pthread_t *th, pp_mpi_t *m, pp_gref_t g, unsigned flags)
{
    *p = (pinner_t){ .m = m, .g = g, .flags = flags };
    atomic_store(&p->rc, -99);
    cr_assert_eq(pthread_create(th, NULL, pinner_main, p), 0);
}

/* pin_start of version v of g (a future: the pin waits until it is
 * published). */
static void pin_version_start(pinner_t *p, pthread_t *th, pp_mpi_t *m, pp_gref_t g, uint32_t v)
{
    g.version = v;
    pin_start(p, th, m, g, 0);
}

static bool pin_done(pinner_t *p) { return atomic_load(&p->rc) != -99; }

/* The home record of g (the test looks at its flags, never writes them). */
static pp__home_t *record_of(world_t *W, pp_gref_t g)
{
    pp__home_t *h = pp__home_find(W->m[g.rank], g.ref);
    cr_assert_not_null(h, "no home record for ref %#llx", (unsigned long long)g.ref);
    return h;
}

/* Whether h is the next record rank r's layer will hand out (it died
 * and was recycled). */
static bool record_is_next_free(world_t *W, int r, const pp__home_t *h)
{
    pthread_mutex_lock(&W->m[r]->home_mu);
    bool next = W->m[r]->home_free == h;
    pthread_mutex_unlock(&W->m[r]->home_mu);
    return next;
}

/* Whether the home's published version of g is at least v: a home pin of
 * version v with PP_PIN_NOWAIT, dropped at once. */
static bool published(world_t *W, pp_gref_t g, uint32_t v, uint32_t *got)
{
    pp_gref_t gv = g;
    gv.version = v;
    void *d = NULL;
    int rc = pp_mpi_pin(W->m[g.rank], gv, PP_PIN_NOWAIT, &d, got);
    if (rc == 0) {
        assert_rc(pp_mpi_unpin(W->m[g.rank], gv, 0, d), 0);
        return true;
    }
    cr_assert_eq(rc, PP_EAGAIN, "a pin of version %u: %s", v, pp_err_name(rc));
    return false;
}

/* A serve held in flight: a typed entry of rank 0 (its vector n bytes of
 * pattern seed) that rank 1 pins on thread p, whose save stops at the
 * gate.  Returns the entry once rank 0's progress thread is inside the
 * save (and serves nothing else until serve_end). */
static pp_gref_t serve_hold(world_t *W, gated_t *gt, size_t n, uint64_t seed, pinner_t *p,
                            pthread_t *th)
{
    vec_t *v = vec_new(n, seed);
    pp_gref_t b;
    assert_rc(pp_mpi_put(W->m[0], v, vec_size(n), &gt->vt.type, 0, &b), 0);
    atomic_store(&gt->closed, true);
    pin_start(p, th, W->m[1], b, 0);
    cr_assert(sig_wait(&gt->entered, 1), "the serve never reached its save");
    return b;
}

/* Opens the gate of serve_hold; the remote pin gets the vector. */
static void serve_end(world_t *W, gated_t *gt, pp_gref_t b, size_t n, uint64_t seed,
                      pinner_t *p, pthread_t th)
{
    atomic_store(&gt->closed, false);
    sig_set(&gt->open, 1);
    pthread_join(th, NULL);
    assert_rc(atomic_load(&p->rc), 0);
    cr_assert(vec_check(p->d, n, seed), "the copy holds the vector");
    assert_rc(pp_mpi_unpin(W->m[1], b, 0, p->d), 0);
}

/* ---- 1. a failed batch of write pins publishes nothing --------------------- */

/* Two ranks with the gated type registered as TID on both. */
static void gated_up(world_t *W, gated_t gt[2], uint64_t seed)
{
    world_up(W, 2, seed, 2, 0);
    for (int r = 0; r < 2; r++) {
        gated_init(&gt[r]);
        assert_rc(pp_mpi_type_register(W->m[r], TID, &gt[r].vt.type), 0);
    }
}

static void gated_down(world_t *W, gated_t gt[2])
{
    cr_assert_eq(world_down(W), 0);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(report_cap_count(&W->rep[r]), 0, "rank %d: a report", r);
        sig_destroy(&gt[r].entered);
        sig_destroy(&gt[r].open);
    }
    world_free_ct(W);
}

/* A write pin and unpin of a and b in one batch publishes one version
 * each: version 2 of a, not 3.  (It waits: a serve's end is counted at
 * the home after its copy has arrived.) */
static void batch_writes_once(world_t *W, pp_gref_t a, pp_gref_t b)
{
    void *d[2];
    uint32_t got = 0;
    assert_rc(pp_mpi_pin_many(W->m[0], (pp_gref_t[]){ a, b }, 2, PP_PIN_WRITE, d, NULL), 0);
    assert_rc(pp_mpi_unpin(W->m[0], a, PP_PIN_WRITE, d[0]), 0);
    assert_rc(pp_mpi_unpin(W->m[0], b, PP_PIN_WRITE, d[1]), 0);
    cr_assert(published(W, a, 2, &got) && got == 2, "version %u", got);
    cr_assert(!published(W, a, 3, &got), "version %u", got);
}

Test(home, write_pin_many_failing_on_a_dead_ref_publishes_no_version)
{
    world_t W;
    gated_t gt[2];
    gated_up(&W, gt, 31);
    pp_gref_t a = put_on(&W, 0, 1, 4096);
    pp_gref_t dead = put_on(&W, 0, 2, 64);
    assert_rc(pp_mpi_release(W.m[0], dead), 0);
    void *d[2];
    uint32_t got = 0;
    /* The pin of a, taken first, is dropped when the dead ref fails. */
    assert_rc(pp_mpi_pin_many(W.m[0], (pp_gref_t[]){ a, dead }, 2,
                              PP_PIN_WRITE | PP_PIN_NOWAIT, d, NULL),
              PP_ESTALE);
    cr_assert(!published(&W, a, 2, &got),
              "a pin_many that failed on a dead ref published version %u of a ref it "
              "only pinned on the way", got);
    pp_gref_t b = put_on(&W, 0, 3, 64);
    batch_writes_once(&W, a, b);
    assert_rc(pp_mpi_release(W.m[0], a), 0);
    assert_rc(pp_mpi_release(W.m[0], b), 0);
    gated_down(&W, gt);
}

Test(home, write_pin_many_failing_on_a_serve_in_flight_publishes_no_version)
{
    world_t W;
    gated_t gt[2];
    gated_up(&W, gt, 36);
    pp_gref_t a = put_on(&W, 0, 1, 4096);
    void *d[2];
    uint32_t got = 0;
    /* A serve of b is in flight (its save stopped at the gate): the batch
     * gets PP_EAGAIN, and the write pin of a, taken first, is dropped. */
    pinner_t p;
    pthread_t th;
    pp_gref_t b = serve_hold(&W, &gt[0], 1000, 5, &p, &th);
    assert_rc(pp_mpi_pin_many(W.m[0], (pp_gref_t[]){ a, b }, 2, PP_PIN_WRITE | PP_PIN_NOWAIT,
                              d, NULL),
              PP_EAGAIN);
    cr_assert(!published(&W, a, 2, &got),
              "a pin_many that failed on a serve in flight published version %u of a ref "
              "it only pinned on the way", got);
    serve_end(&W, &gt[0], b, 1000, 5, &p, th);
    batch_writes_once(&W, a, b);
    assert_rc(pp_mpi_release(W.m[0], a), 0);
    assert_rc(pp_mpi_release(W.m[0], b), 0);
    gated_down(&W, gt);
}

/* ---- 2. a failed write pin answers what parked behind it ------------------- */

/* Two ranks; rank 0's pool swaps to a fault device, with a 1 MiB limit. */
typedef struct swapworld {
    world_t W;
    faultdev_t *fd;
    char dir[64];
} swapworld_t;

static void swapworld_up(swapworld_t *s, uint64_t seed)
{
    world_t *W = &s->W;
    memset(s, 0, sizeof *s);
    W->n = 2;
    pp__inproc_chaos_t chaos = { seed, 2, 0 };
    cr_assert_eq(pp__inproc_world_create(2, &chaos, &W->w), 0);
    strcpy(s->dir, "/tmp/pp-hometest-XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir), "mkdtemp: %s", strerror(errno));
    for (int r = 0; r < 2; r++) {
        pp_options_t opt = PP_OPTIONS_INIT;
        report_cap_init(&W->rep[r]);
        report_cap_attach(&W->rep[r], &opt);
        if (r == 0) {
            opt.mem_limit = 1 * MiB;
            opt.swap_dir = s->dir;
            s->fd = faultdev_new();
            cr_assert_not_null(s->fd);
            assert_rc(faultdev_pool_create(&opt, s->fd, &W->pool[0]), 0);
        } else {
            W->pool[r] = test_pool(&opt);
        }
        W->ct[r] = ct_new(4096);
        cr_assert_eq(pp__layer_create_on(pp__inproc_rank(W->w, r), false, W->pool[r], &W->m[r]),
                     0);
    }
}

static void swapworld_down(swapworld_t *s)
{
    cr_assert_eq(world_down(&s->W), 0);
    world_free_ct(&s->W);
    cr_assert_eq(rmdir(s->dir), 0, "rmdir %s: %s", s->dir, strerror(errno));
}

static const pp_type_t squeeze_type = { .name = "squeeze", .flags = PP_TYPE_NOSWAP };

/* Every swappable entry of pool goes out: a NOSWAP entry of size bytes
 * fits only then (pp_put waits for the swap threads). */
static void squeeze(pp_pool_t *pool, size_t size)
{
    void *buf = malloc(size);            /* never touched: NOSWAP */
    cr_assert_not_null(buf);
    pp_ref_t ref;
    assert_rc(pp_put(pool, buf, size, &squeeze_type, 0, &ref), 0);
    assert_rc(pp_release(pool, ref), 0);
    test_drain(pool);
}

Test(home, failed_write_pin_still_answers_the_remote_pin_parked_behind_it)
{
    swapworld_t s;
    swapworld_up(&s, 32);
    world_t *W = &s.W;
    /* a flat entry freed with free(): the pool may swap it */
    void *buf = malloc(256 * KiB);
    cr_assert_not_null(buf);
    fill_pattern(buf, 256 * KiB, 11);
    pp_gref_t a;
    assert_rc(pp_mpi_put(W->m[0], buf, 256 * KiB, NULL, 0, &a), 0);
    pp_gref_t c = put_on(W, 0, 2, 64);
    squeeze(W->pool[0], 1 * MiB - 4 * KiB);   /* c, not swappable, stays */
    cr_assert_eq(test_stat(W->pool[0], a.ref).state & PP_STATE_RESIDENT, 0, "a is not out");
    pp__home_t *h = record_of(W, a);

    /* The write pin claims the writer's place, then loads a: its read
     * stops at the gate. */
    faultdev_gate_close(s.fd, true, false);
    pinner_t wp, rp;
    pthread_t wth, rth;
    pin_start(&wp, &wth, W->m[0], a, PP_PIN_WRITE);
    faultdev_wait_blocked(s.fd, 1);
    /* A remote pin of a arrives: its request parks behind the writer. */
    pin_start(&rp, &rth, W->m[1], a, 0);
    cr_assert(WAIT_UNTIL(atomic_load(&h->has_parked), TEST_WAIT_MS),
              "the remote request never reached the home");
    /* The home's progress thread set the flag while serving that request
     * and serves one request at a time: once a later request is answered,
     * the first one is parked. */
    void *dc;
    assert_rc(pp_mpi_pin(W->m[1], c, 0, &dc, NULL), 0);
    assert_rc(pp_mpi_unpin(W->m[1], c, 0, dc), 0);
    cr_assert(!pin_done(&rp), "the remote pin was served while a writer held the entry");
    /* The load fails: so does the write pin. */
    atomic_store(&s.fd->read_err, -EIO);
    faultdev_gate_open(s.fd);
    pthread_join(wth, NULL);
    assert_rc(atomic_load(&wp.rc), PP_EIO);
    atomic_store(&s.fd->read_err, 0);
    /* The parked request is answered: served (0), or PP_EIO if the serve's
     * own load met the fault, never left waiting. */
    cr_assert(WAIT_UNTIL(pin_done(&rp), TEST_WAIT_MS),
              "the remote pin parked behind the failed write pin was never answered");
    pthread_join(rth, NULL);
    int rc = atomic_load(&rp.rc);
    cr_assert(rc == 0 || rc == PP_EIO, "the remote pin: %s", pp_err_name(rc));
    if (rc == 0) {
        cr_assert(check_pattern(rp.d, 256 * KiB, 11), "the copy holds a's bytes");
        cr_assert_eq(rp.got, 1u, "version %u: the failed write pin published one", rp.got);
        assert_rc(pp_mpi_unpin(W->m[1], a, 0, rp.d), 0);
    }
    uint32_t got;
    cr_assert(!published(W, a, 2, &got), "the failed write pin published version %u", got);
    assert_rc(pp_mpi_release(W->m[0], a), 0);
    assert_rc(pp_mpi_release(W->m[0], c), 0);
    swapworld_down(&s);
}

/* ---- 6. only the thread that took a write pin drops it --------------------- */

typedef struct writer {
    pp_mpi_t *m;
    pp_gref_t g;
    test_sig_t pinned, go;
    void *d;
    int pin_rc, unpin_rc;
} writer_t;

static void *writer_main(void *arg)
{
    writer_t *w = arg;
    w->pin_rc = pp_mpi_pin(w->m, w->g, PP_PIN_WRITE, &w->d, NULL);
    sig_set(&w->pinned, 1);
    if (!sig_wait(&w->go, 1))
        return NULL;
    if (w->pin_rc == 0) {
        memset((char *)w->d + 64, 0x77, 64);
        w->unpin_rc = pp_mpi_unpin(w->m, w->g, PP_PIN_WRITE, w->d);
    }
    return NULL;
}

Test(home, write_unpin_of_a_read_pin_leaves_the_writer_its_pin)
{
    world_t W;
    world_up(&W, 2, 33, 2, 0);
    pp_gref_t a = put_on(&W, 0, 1, 4096);
    give(&W, 0, 1, a);
    pp__home_t *h = record_of(&W, a);
    writer_t w = { .m = W.m[0], .g = a, .unpin_rc = -99 };
    sig_init(&w.pinned);
    sig_init(&w.go);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, writer_main, &w), 0);
    cr_assert(sig_wait(&w.pinned, 1));
    assert_rc(w.pin_rc, 0);
    /* This thread holds a read pin, and drops it as if it were a write pin. */
    void *d;
    assert_rc(pp_mpi_pin(W.m[0], a, 0, &d, NULL), 0);
    int rc = pp_mpi_unpin(W.m[0], a, PP_PIN_WRITE, d);
    cr_assert_eq(rc, PP_ENOTPINNED,
                 "a write unpin of a read pin while another thread writes: %s, not "
                 "PP_ENOTPINNED", pp_err_name(rc));
    cr_assert_geq(atomic_load(&h->rw), PP__RW_WRITER, "the writer lost its place");
    uint32_t got;
    cr_assert(!published(&W, a, 2, &got), "version %u published under the writer", got);
    /* No copy is sent while the writer writes: a remote pin waits. */
    pinner_t rp;
    pthread_t rth;
    pin_start(&rp, &rth, W.m[1], a, 0);
    assert_rc(pp_mpi_unpin(W.m[0], a, 0, d), 0);
    sig_set(&w.go, 1);
    pthread_join(th, NULL);
    assert_rc(w.unpin_rc, 0, "the writer's own unpin");
    pthread_join(rth, NULL);
    assert_rc(atomic_load(&rp.rc), 0);
    const unsigned char *c = rp.d;
    cr_assert(rp.got == 2 && c[64] == 0x77 && c[127] == 0x77,
              "the copy is version %u, the writer's bytes %s", rp.got,
              c[64] == 0x77 ? "there" : "missing");
    assert_rc(pp_mpi_unpin(W.m[1], a, 0, rp.d), 0);
    cr_assert(published(&W, a, 2, &got) && got == 2);
    cr_assert(!published(&W, a, 3, &got), "version %u: one write, one version", got);
    /* A write unpin on a thread that holds no write pin of the ref changes
     * nothing, whatever other pins are held. */
    assert_rc(pp_mpi_pin(W.m[0], a, 0, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[0], a, PP_PIN_WRITE, d), PP_ENOTPINNED);
    assert_rc(pp_mpi_unpin(W.m[0], a, 0, d), 0);
    assert_rc(pp_mpi_unpin(W.m[0], a, PP_PIN_WRITE, d), PP_ENOTPINNED);
    sig_destroy(&w.pinned);
    sig_destroy(&w.go);
    assert_rc(pp_mpi_release(W.m[1], a), 0);
    assert_rc(pp_mpi_release(W.m[0], a), 0);
    cr_assert_eq(world_down(&W), 0, "destroy: every pin was dropped");
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    for (int r = 0; r < 2; r++)
        cr_assert_eq(report_cap_count(&W.rep[r]), 0, "rank %d: a report", r);
    world_free_ct(&W);
}

/* ---- 8b. a thread waiting for a version is woken when the entry dies ------- */

Test(home, home_pin_waiting_for_a_version_fails_when_the_entry_dies)
{
    world_t W;
    world_up(&W, 2, 34, 2, 0);
    pp_gref_t a = put_on(&W, 0, 1, 4096);
    pp__home_t *h = record_of(&W, a);
    pinner_t p;
    pthread_t th;
    pin_version_start(&p, &th, W.m[0], a, 2);
    cr_assert(WAIT_UNTIL(atomic_load(&h->local_waiters) == 1, TEST_WAIT_MS),
              "the pin never waited for version 2");
    assert_rc(pp_mpi_release(W.m[0], a), 0);   /* the last owner: the entry dies */
    cr_assert(WAIT_UNTIL(pin_done(&p), TEST_WAIT_MS),
              "a home pin waiting for version 2 was not woken when the entry died");
    pthread_join(th, NULL);
    assert_rc(atomic_load(&p.rc), PP_ESTALE);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(ct_frees(W.ct[0], 1), 1);
    world_free_ct(&W);
}

/* ---- 8a. a record's publish command, across its death and reuse ------------ */

Test(home, publish_queued_through_a_records_death_and_reuse_loses_no_command)
{
    /* Rank 0's progress thread is held inside a serve (gated save) while
     * a publish of a, then a's death, then a weight return of another
     * entry are queued behind it; once it goes on, a's record is reused
     * by the next put, whose write pin queues the same record's publish
     * again.  Every command runs: the parked request of a is answered, a
     * is freed, the returned weight frees its entry, and the parked
     * request of the new entry is served the new version. */
    world_t W;
    gated_t gt[2];
    gated_up(&W, gt, 35);
    pp_gref_t a = put_on(&W, 0, 1, 4096);
    pp_gref_t e = put_on(&W, 1, 2, 64);      /* rank 1's, owned by rank 0 */
    give(&W, 1, 0, e);
    assert_rc(pp_mpi_release(W.m[1], e), 0);
    pp__home_t *h = record_of(&W, a);
    pinner_t pa;
    pthread_t tha;
    pin_version_start(&pa, &tha, W.m[1], a, 2);
    cr_assert(WAIT_UNTIL(atomic_load(&h->has_parked), TEST_WAIT_MS));
    /* hold rank 0's progress thread in a serve */
    pinner_t pb;
    pthread_t thb;
    pp_gref_t b = serve_hold(&W, &gt[0], 100, 3, &pb, &thb);
    /* a publishes version 2 (queued), dies (queued), e's weight goes home */
    void *d;
    assert_rc(pp_mpi_pin(W.m[0], a, PP_PIN_WRITE, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[0], a, PP_PIN_WRITE, d), 0);
    cr_assert(atomic_load(&h->publish_queued));
    assert_rc(pp_mpi_release(W.m[0], a), 0);
    assert_rc(pp_mpi_release(W.m[0], e), 0);
    serve_end(&W, &gt[0], b, 100, 3, &pb, thb);
    pthread_join(tha, NULL);
    int rc = atomic_load(&pa.rc);
    cr_assert(rc == 0 || rc == PP_ESTALE, "the pin of a's version 2: %s", pp_err_name(rc));
    if (rc == 0) {
        cr_assert_eq(pa.got, 2u);
        assert_rc(pp_mpi_unpin(W.m[1], a, 0, pa.d), 0);
    }
    cr_assert(WAIT_UNTIL((test_drain(W.pool[0]), ct_frees(W.ct[0], 1) == 1), TEST_WAIT_MS),
              "a's death was lost");
    cr_assert(WAIT_UNTIL((test_drain(W.pool[1]), ct_frees(W.ct[1], 2) == 1), TEST_WAIT_MS),
              "e's weight return was lost");
    /* the record is reused, and queues its publish again */
    cr_assert(WAIT_UNTIL(record_is_next_free(&W, 0, h), TEST_WAIT_MS),
              "a's record was never recycled");
    pp_gref_t n = put_on(&W, 0, 3, 4096);
    cr_assert_eq(record_of(&W, n), h, "the next put reuses a's record");
    pin_version_start(&pa, &tha, W.m[1], n, 2);
    cr_assert(WAIT_UNTIL(atomic_load(&h->has_parked), TEST_WAIT_MS));
    assert_rc(pp_mpi_pin(W.m[0], n, PP_PIN_WRITE, &d, NULL), 0);
    memset((char *)d + 64, 0x33, 64);   /* past the counting type's header */
    assert_rc(pp_mpi_unpin(W.m[0], n, PP_PIN_WRITE, d), 0);
    pthread_join(tha, NULL);
    assert_rc(atomic_load(&pa.rc), 0);
    cr_assert_eq(pa.got, 2u);
    cr_assert_eq(((unsigned char *)pa.d)[127], 0x33);
    assert_rc(pp_mpi_unpin(W.m[1], n, 0, pa.d), 0);
    assert_rc(pp_mpi_release(W.m[0], n), 0);
    assert_rc(pp_mpi_release(W.m[0], b), 0);
    cr_assert(WAIT_UNTIL((test_drain(W.pool[0]), ct_frees(W.ct[0], 3) == 1), TEST_WAIT_MS),
              "the new entry's death was lost");
    gated_down(&W, gt);
}

/* A late write release (a writer of an entry that has since died) queues
 * the record's publish command after the record went back to the free
 * list: the progress thread has not taken it yet when the record is
 * reused and a request parks on its new life.  The new life's write
 * unpin must not queue the same command a second time: pushed while it is
 * still queued, the command would point at itself (or cut the commands
 * queued behind it).  Driven step by step: the layer's test points hold
 * the late writer just after it gave its place back (WRITER_GONE) and the
 * progress thread just after it parked the new request (PARKED); a gated
 * serve holds the progress thread between the late command and the
 * parking, so that both happen between two of its takes of the queue. */
typedef struct late {
    atomic_int mode;            /* 0: pass; 1: hold the writer; 2: hold at the park */
    test_sig_t held, go;        /* the writer */
    test_sig_t parked, resume;  /* the progress thread */
    pp__home_t *rec;
} late_t;

static void late_tp(pp_mpi_t *m, enum pp__mpi_tp where, void *arg, void *ctx)
{
    (void)m;
    late_t *l = ctx;
    if (where == PP__MPI_TP_WRITER_GONE && arg == l->rec && atomic_load(&l->mode) == 1) {
        atomic_store(&l->mode, 0);
        sig_set(&l->held, 1);
        (void)sig_wait(&l->go, 1);
    } else if (where == PP__MPI_TP_PARKED && arg == l->rec && atomic_load(&l->mode) == 2) {
        atomic_store(&l->mode, 0);
        sig_set(&l->parked, 1);
        (void)sig_wait(&l->resume, 1);
    }
}

typedef struct late_writer {
    pp_mpi_t *m;
    pp_gref_t g;
    int pin_rc, unpin_rc;
} late_writer_t;

static void *late_writer_main(void *arg)
{
    late_writer_t *w = arg;
    void *d;
    w->pin_rc = pp_mpi_pin(w->m, w->g, PP_PIN_WRITE, &d, NULL);
    if (w->pin_rc == 0)
        w->unpin_rc = pp_mpi_unpin(w->m, w->g, PP_PIN_WRITE, d);
    return NULL;
}

/* Whether the progress thread's command queue of m ends, walked from its
 * head: a command queued twice makes it loop. */
static bool commands_end(pp_mpi_t *m, size_t *n)
{
    pthread_mutex_lock(&m->cmd_mu);
    const pp__cmd_t *c = m->cmd_head;
    size_t k = 0;
    while (c != NULL && k <= 1000) {
        c = c->next;
        k++;
    }
    pthread_mutex_unlock(&m->cmd_mu);
    *n = k;
    return c == NULL;
}

Test(home, late_publish_of_a_dead_life_is_never_queued_twice_by_the_next_life)
{
    world_t W;
    gated_t gt[2];
    world_up(&W, 2, 37, 0, 0);   /* no delays: a message sent is due at the next poll */
    for (int r = 0; r < 2; r++) {
        gated_init(&gt[r]);
        assert_rc(pp_mpi_type_register(W.m[r], TID, &gt[r].vt.type), 0);
    }
    late_t l = { .rec = NULL };
    sig_init(&l.held);
    sig_init(&l.go);
    sig_init(&l.parked);
    sig_init(&l.resume);

    /* b, served later under the gate, is put first: a's record must be
     * the one on the free list when n is put. */
    vec_t *v = vec_new(100, 3);
    pp_gref_t b;
    assert_rc(pp_mpi_put(W.m[0], v, vec_size(100), &gt[0].vt.type, 0, &b), 0);
    /* a's first life: a remote pin of version 2 parks on its record. */
    pp_gref_t a = put_on(&W, 0, 1, 4096);
    pp__home_t *h = record_of(&W, a);
    l.rec = h;
    world_tp(W.m[0], late_tp, &l);
    pinner_t pa;
    pthread_t tha;
    pin_version_start(&pa, &tha, W.m[1], a, 2);
    cr_assert(WAIT_UNTIL(atomic_load(&h->has_parked), TEST_WAIT_MS));
    /* A writer publishes version 2 and stops once it has given its place
     * back, before it tells the parked request. */
    atomic_store(&l.mode, 1);
    late_writer_t lw = { .m = W.m[0], .g = a, .pin_rc = -99, .unpin_rc = -99 };
    pthread_t thw;
    cr_assert_eq(pthread_create(&thw, NULL, late_writer_main, &lw), 0);
    cr_assert(sig_wait(&l.held, 1), "the writer never gave its place back");
    /* a dies: the parked request is answered (version 2 or PP_ESTALE) and
     * the record goes back to the free list. */
    assert_rc(pp_mpi_release(W.m[0], a), 0);
    cr_assert(WAIT_UNTIL(pin_done(&pa), TEST_WAIT_MS), "the parked request was never answered");
    pthread_join(tha, NULL);
    int rc = atomic_load(&pa.rc);
    cr_assert(rc == 0 || rc == PP_ESTALE, "the pin of a's version 2: %s", pp_err_name(rc));
    if (rc == 0)
        assert_rc(pp_mpi_unpin(W.m[1], a, 0, pa.d), 0);
    cr_assert(WAIT_UNTIL(record_is_next_free(&W, 0, h), TEST_WAIT_MS),
              "a's record was never recycled");

    /* The progress thread is held inside a serve (after its last take of
     * the command queue).  The late writer goes on: the flag it sees is
     * a's, and it queues the record's publish command. */
    pinner_t pb;
    pthread_t thb;
    atomic_store(&gt[0].closed, true);
    pin_start(&pb, &thb, W.m[1], b, 0);
    cr_assert(sig_wait(&gt[0].entered, 1), "the serve never reached its save");
    sig_set(&l.go, 1);
    pthread_join(thw, NULL);
    assert_rc(lw.pin_rc, 0);
    assert_rc(lw.unpin_rc, 0);
    cr_assert(atomic_load(&h->publish_queued), "the late writer queued no publish command");

    /* The record's next life: n reuses it, and a remote pin of n's
     * version 2 is in rank 0's mailbox before the serve ends, so the
     * progress thread parks it before it takes the queue again. */
    pp_gref_t n = put_on(&W, 0, 3, 4096);
    cr_assert_eq(record_of(&W, n), h, "the next put reuses a's record");
    atomic_store(&l.mode, 2);
    pinner_t pn;
    pthread_t thn;
    pin_version_start(&pn, &thn, W.m[1], n, 2);
    cr_assert(WAIT_UNTIL(pp__inproc_in_flight(W.w) >= 1, TEST_WAIT_MS),
              "the request for n never left rank 1");
    atomic_store(&gt[0].closed, false);
    sig_set(&gt[0].open, 1);
    cr_assert(sig_wait(&l.parked, 1), "the request for n never parked");
    /* The progress thread is held just after parking it: n's write unpin
     * finds a request parked, and the command still queued. */
    void *d;
    assert_rc(pp_mpi_pin(W.m[0], n, PP_PIN_WRITE, &d, NULL), 0);
    memset((char *)d + 64, 0x44, 64);   /* past the counting type's header */
    assert_rc(pp_mpi_unpin(W.m[0], n, PP_PIN_WRITE, d), 0);
    size_t k;
    cr_assert(commands_end(W.m[0], &k),
              "the record's publish command was queued a second time while still queued: "
              "the command queue loops (%zu commands walked)", k);
    sig_set(&l.resume, 1);

    /* Every command runs: n's parked request gets version 2, with its bytes. */
    pthread_join(thn, NULL);
    assert_rc(atomic_load(&pn.rc), 0);
    cr_assert_eq(pn.got, 2u);
    cr_assert_eq(((unsigned char *)pn.d)[127], 0x44);
    assert_rc(pp_mpi_unpin(W.m[1], n, 0, pn.d), 0);
    pthread_join(thb, NULL);
    assert_rc(atomic_load(&pb.rc), 0);
    cr_assert(vec_check(pb.d, 100, 3), "the held serve's copy holds the vector");
    assert_rc(pp_mpi_unpin(W.m[1], b, 0, pb.d), 0);
    world_tp(W.m[0], NULL, NULL);
    assert_rc(pp_mpi_release(W.m[0], n), 0);
    assert_rc(pp_mpi_release(W.m[0], b), 0);
    cr_assert(WAIT_UNTIL((test_drain(W.pool[0]), ct_frees(W.ct[0], 3) == 1), TEST_WAIT_MS),
              "n was never freed");
    sig_destroy(&l.held);
    sig_destroy(&l.go);
    sig_destroy(&l.parked);
    sig_destroy(&l.resume);
    gated_down(&W, gt);
}
