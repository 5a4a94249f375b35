/*
 * test_evict_support.c -- the evict suite's shared code (test_evict.h):
 * pools, contents, the swappable counting type, states, the call thread,
 * and the suite's fini, which removes a failed test's swap files.
 */
#define EV_SUPPORT 1
#include "test_evict.h"

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

/* The pool of the running test, until ev_finish destroys it.  A test that
 * fails leaves its pool behind (the process ends); the suite's fini then
 * removes its swap files, so failures do not litter the swap directory. */
static pp_pool_t *g_ev_pool;

static void ev_fini(void) { test_swap_dir_remove(g_ev_pool); }

TestSuite(evict, .fini = ev_fini);

/* A swapping pool on the fault device (PINPOOL_TEST_TOPOLOGY applied unless
 * topology is given); *fd is the device, valid until pp_pool_destroy. */
pp_pool_t *ev_pool(size_t limit, const char *topology, faultdev_t **fd)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = limit;
    o.swap_dir = test_swap_parent();
    o.topology = topology;
    faultdev_t *f = faultdev_new();
    cr_assert_not_null(f);
    pp_pool_t *pool = NULL;
    int rc = faultdev_pool_create(&o, f, &pool);
    cr_assert_eq(rc, 0, "faultdev_pool_create: %s", pp_err_name(rc));
    cr_assert_not_null(pool);
    if (fd != NULL)
        *fd = f;
    g_ev_pool = pool;
    return pool;
}

/* Every entry ever put has been freed (each free is counted after its
 * swap copy was dropped and its bytes unreserved). */
bool all_freed(pp_pool_t *pool)
{
    pp_stats_t *s = test_stats_new(pool);
    bool ok = s->total.frees == s->total.puts;
    free(s);
    return ok;
}

/* Releases refs, drains, checks that nothing is left
 * (test_release_and_check_empty), and destroys the pool. */
void ev_finish(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    test_release_and_check_empty(pool, refs, n);
    test_destroy(pool);
    g_ev_pool = NULL;
}

static bool fd_gate_closed(faultdev_t *f)
{
    pthread_mutex_lock(&f->lock);
    bool c = f->gate_closed;
    pthread_mutex_unlock(&f->lock);
    return c;
}

int my_tid(void) { return (int)syscall(SYS_gettid); }

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

/* An entry's bytes: ct_hdr_t (magic, id, size, seed) and a pattern from
 * seed.  A write under PP_PIN_WRITE changes the seed (a new version). */
void buf_fill(void *p, size_t id, size_t size, uint64_t seed)
{
    ct_hdr_t *h = p;
    h->magic = CT_MAGIC;
    h->id = id;
    h->size = size;
    h->seed = seed;
    fill_pattern(h + 1, size - sizeof *h, seed);
}

void *buf_new(size_t id, size_t size, uint64_t seed)
{
    cr_assert_geq(size, sizeof(ct_hdr_t));
    void *p = malloc(size);
    cr_assert_not_null(p);
    buf_fill(p, id, size, seed);
    return p;
}

bool buf_check(const void *p, size_t id, size_t size, uint64_t seed)
{
    const ct_hdr_t *h = p;
    return p != NULL && h->magic == CT_MAGIC && h->id == id && h->size == size &&
           h->seed == seed && check_pattern(h + 1, size - sizeof *h, seed);
}

/* A flat entry (type NULL: swapped as raw bytes, reloaded into malloc). */
pp_ref_t put_flat(pp_pool_t *pool, size_t id, size_t size, unsigned node, void **buf)
{
    void *p = buf_new(id, size, ct_seed(id));
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, p, size, NULL, PP_ON_NODE(node), &ref);
    cr_assert_eq(rc, 0, "pp_put(flat %zu): %s", id, pp_err_name(rc));
    if (buf != NULL)
        *buf = p;
    return ref;
}

/* ------------------------------------------------------------------------ */
/* A swappable counting type (save/load/free)                               */
/* ------------------------------------------------------------------------ */

static bool sw_hdr_ok(sw_t *sw, const void *data, size_t size)
{
    const ct_hdr_t *h = data;
    return h != NULL && size >= sizeof *h && h->magic == CT_MAGIC && h->id < sw->cap &&
           h->size == size;
}

static void sw_free_fn(void *data, size_t size, void *ctx)
{
    sw_t *sw = ctx;
    if (!sw_hdr_ok(sw, data, size)) {
        atomic_fetch_add(&sw->bad, 1);
    } else {
        size_t id = ((ct_hdr_t *)data)->id;
        unsigned f = atomic_fetch_add(&sw->frees[id], 1) + 1;
        if (f > atomic_load(&sw->allocs[id]))
            atomic_fetch_add(&sw->bad, 1);
    }
    memset(data, CT_POISON, size);
    free(data);
}

static int sw_save_fn(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    sw_t *sw = ctx;
    if (!sw_hdr_ok(sw, data, size)) {
        atomic_fetch_add(&sw->bad, 1);
        return 1;
    }
    size_t id = ((const ct_hdr_t *)data)->id;
    atomic_store(&sw->save_tid[id], my_tid());   /* before the count a test waits for */
    atomic_fetch_add(&sw->saves[id], 1);
    return pp_write(w, data, size) == 0 ? 0 : 1;
}

static int sw_load_fn(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    sw_t *sw = ctx;
    if (pp_read_left(r) != size) {
        atomic_fetch_add(&sw->bad, 1);
        return 1;
    }
    void *p = malloc(size);
    if (p == NULL)
        return 1;
    if (pp_read(r, p, size) != 0 || !sw_hdr_ok(sw, p, size)) {
        atomic_fetch_add(&sw->bad, 1);
        free(p);
        return 1;
    }
    size_t id = ((ct_hdr_t *)p)->id;
    atomic_fetch_add(&sw->allocs[id], 1);
    atomic_store(&sw->load_tid[id], my_tid());   /* before the count a test waits for */
    atomic_fetch_add(&sw->loads[id], 1);
    *data = p;
    return 0;
}

sw_t *sw_new(size_t cap)
{
    sw_t *sw = calloc(1, sizeof *sw);
    cr_assert_not_null(sw);
    sw->cap = cap;
    sw->allocs = calloc(cap, sizeof *sw->allocs);
    sw->frees = calloc(cap, sizeof *sw->frees);
    sw->saves = calloc(cap, sizeof *sw->saves);
    sw->loads = calloc(cap, sizeof *sw->loads);
    sw->save_tid = calloc(cap, sizeof *sw->save_tid);
    sw->load_tid = calloc(cap, sizeof *sw->load_tid);
    cr_assert(sw->allocs && sw->frees && sw->saves && sw->loads && sw->save_tid && sw->load_tid);
    sw->type.name = "swappable counted";
    sw->type.free = sw_free_fn;
    sw->type.save = sw_save_fn;
    sw->type.load = sw_load_fn;
    sw->type.ctx = sw;
    return sw;
}

/* After pp_pool_destroy: every buffer freed exactly once, nothing bad. */
void sw_check_delete(sw_t *sw, size_t n)
{
    cr_assert_eq(atomic_load(&sw->bad), 0, "the type saw %u bad calls", atomic_load(&sw->bad));
    for (size_t id = 0; id < n; id++) {
        cr_assert_eq(atomic_load(&sw->frees[id]), atomic_load(&sw->allocs[id]),
                     "entry %zu: %u buffers, %u frees", id, atomic_load(&sw->allocs[id]),
                     atomic_load(&sw->frees[id]));
    }
    free(sw->allocs);
    free(sw->frees);
    free(sw->saves);
    free(sw->loads);
    free(sw->save_tid);
    free(sw->load_tid);
    free(sw);
}

pp_ref_t put_sw(pp_pool_t *pool, sw_t *sw, size_t id, size_t size, unsigned node)
{
    cr_assert_lt(id, sw->cap);
    void *p = buf_new(id, size, ct_seed(id));
    atomic_fetch_add(&sw->allocs[id], 1);
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(pool, p, size, &sw->type, PP_ON_NODE(node), &ref);
    cr_assert_eq(rc, 0, "pp_put(sw %zu): %s", id, pp_err_name(rc));
    return ref;
}

/* ------------------------------------------------------------------------ */
/* States                                                                    */
/* ------------------------------------------------------------------------ */

unsigned state_of(pp_pool_t *pool, pp_ref_t ref) { return test_stat(pool, ref).state; }

bool is_swapped_out(pp_pool_t *pool, pp_ref_t ref)
{
    unsigned s = state_of(pool, ref);
    return (s & (PP_STATE_RESIDENT | PP_STATE_SWAPPED | PP_STATE_LOADING)) == PP_STATE_SWAPPED;
}

static bool all_swapped_out(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_swapped_out(pool, refs[i]))
            return false;
    }
    return true;
}

/* The one entry of refs in state `bit` (asserts there is exactly one). */
size_t find_one(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned bit)
{
    size_t found = n, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (state_of(pool, refs[i]) & bit) {
            found = i;
            count++;
        }
    }
    cr_assert_eq(count, 1, "%zu entries in state 0x%x, expected 1", count, bit);
    return found;
}

/*
 * Makes every entry of targets (unpinned, on `node`) swapped out: puts
 * one-page fillers on the node until none of targets is resident, then
 * releases the fillers and waits until they have been freed.
 *
 * Fillers are released as soon as they are swapped out, and the loop waits
 * for their reclamation, so their slots are reused and the node's slot
 * range stays small: the CLOCK hand then keeps coming round, also to
 * targets whose recency bit is set (it only comes round when it runs past
 * the last slot; see clock_evicts_entry_not_pinned_again).  Afterwards,
 * once a drain has also waited for the tail of each eviction (an evicted
 * entry's state reads swapped out from the commit on, before the swap
 * thread frees its bytes and returns their reservation), the swap threads
 * have nothing of ours in flight and the pool's resident bytes are what
 * it held besides targets and fillers.
 */
#define SWAP_OUT_MAX 1024
void swap_out(pp_pool_t *pool, unsigned node, const pp_ref_t *targets, size_t n)
{
    pp_ref_t *fill = calloc(SWAP_OUT_MAX, sizeof *fill);
    cr_assert_not_null(fill);
    pp_stats_t *s = test_stats_new(pool);
    uint64_t frees0 = s->total.frees;
    free(s);
    size_t nf = 0, released = 0;
    while (!all_swapped_out(pool, targets, n)) {
        cr_assert_lt(nf, SWAP_OUT_MAX, "targets still resident after %zu fillers", nf);
        fill[nf++] = put_flat(pool, FILL_ID, PAGE, node, NULL);
        size_t before = released;
        for (size_t i = 0; i < nf; i++) {
            if (fill[i] != PP_REF_NONE && is_swapped_out(pool, fill[i])) {
                assert_rc(pp_release(pool, fill[i]), 0);
                fill[i] = PP_REF_NONE;
                released++;
            }
        }
        if (released != before)
            cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) >= frees0 + released, TEST_WAIT_MS),
                      "fillers never freed");
    }
    for (size_t i = 0; i < nf; i++) {
        if (fill[i] != PP_REF_NONE)
            assert_rc(pp_release(pool, fill[i]), 0);
    }
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) >= frees0 + nf, TEST_WAIT_MS),
              "fillers never freed");
    test_drain(pool);                    /* the evictions' tails (above) */
    free(fill);
}

/* ------------------------------------------------------------------------ */
/* A helper thread for calls that may block                                  */
/* ------------------------------------------------------------------------ */

static void *call_main(void *arg)
{
    call_t *c = arg;
    switch (c->kind) {
    case CALL_PIN:
        c->rc = pp_pin(c->pool, c->ref, c->flags, &c->data);
        break;
    case CALL_PIN_MANY:
        c->rc = pp_pin_many(c->pool, &c->ref, 1, c->flags, &c->data);
        break;
    case CALL_GET:
        c->rc = pp_get(c->pool, c->ref, &c->data);
        break;
    }
    c->gate_closed_at_return = c->fd != NULL && fd_gate_closed(c->fd);
    sig_set(&c->done, 1);
    return NULL;
}

void call_start(call_t *c, pthread_t *th, pp_pool_t *pool, faultdev_t *fd, pp_ref_t ref,
                enum call_kind kind, unsigned flags)
{
    memset(c, 0, sizeof *c);
    c->pool = pool;
    c->fd = fd;
    c->ref = ref;
    c->kind = kind;
    c->flags = flags;
    sig_init(&c->done);
    test_thread_start(th, call_main, c);
}

bool call_returned(call_t *c)
{
    pthread_mutex_lock(&c->done.mu);
    bool r = c->done.value != 0;
    pthread_mutex_unlock(&c->done.mu);
    return r;
}

/* Freezes the eviction of one of 16 one-page flat entries on node 0 of a
 * SMALL_LIMIT pool: the write gate is closed before the 16th put crosses
 * the high watermark, and the swap thread's first write blocks.  Returns
 * the index of the EVICTING entry. */
size_t freeze_eviction(pp_pool_t *pool, faultdev_t *f, pp_ref_t refs[16], void *bufs[16])
{
    faultdev_gate_close(f, false, true);
    for (size_t i = 0; i < 16; i++)
        refs[i] = put_flat(pool, i, PAGE, 0, &bufs[i]);
    faultdev_wait_blocked(f, 1);
    return find_one(pool, refs, 16, PP_STATE_EVICTING);
}

