/*
 * test_evict.c -- eviction and loading (src/evict.c): the memory limit,
 * pinned entries under eviction, pins and gets racing an eviction, loads
 * (shared, PP_PIN_NOWAIT, pp_prefetch, pp_pin_many), PP_ENOMEM instead of
 * a deadlock, CLOCK's second chance, eviction ahead of need, entries that
 * die during I/O, and per-node swap threads.
 *
 * Every pool here swaps through the fault-injecting device
 * (tests/support/faultdev.h).  Its gates freeze an eviction inside its
 * device write, or a load inside its device read, so each race is set up
 * by state -- "one write is blocked, this entry is EVICTING" -- and never
 * by sleeping.  Polls that wait for the swap threads use WAIT_UNTIL
 * (sched_yield between polls, bounded only to turn a hang into a failure).
 *
 * Most tests put their entries on node 0 (PP_ON_NODE(0)): one swap thread
 * then owns every eviction, which makes the order of evictions (CLOCK from
 * slot 0, puts do not set the recency bit) and the level they stop at
 * deterministic on both topologies the suite runs on.
 */
#include "helpers.h"
#include "support/swaptest.h"
#include "support/faultdev.h" /* faultdev_*; testhooks.h: pp__pool_is_valid */

#include <dirent.h>
#include <sys/syscall.h>

#define PAGE 4096u
#define SMALL_LIMIT (16u * PAGE)                  /* 16 one-page entries */
#define HIGH_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 16)
#define LOW_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 8)
#define FILL_ID 0xF111u                           /* content id of fillers */

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
static pp_pool_t *ev_pool(size_t limit, const char *topology, faultdev_t **fd)
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
static bool all_freed(pp_pool_t *pool)
{
    pp_stats_t *s = test_stats_new(pool);
    bool ok = s->total.frees == s->total.puts;
    free(s);
    return ok;
}

/* Releases refs, drains, checks that nothing is left
 * (test_release_and_check_empty), and destroys the pool. */
static void ev_finish(pp_pool_t *pool, const pp_ref_t *refs, size_t n)
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

static int my_tid(void) { return (int)syscall(SYS_gettid); }

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

/* An entry's bytes: ct_hdr_t (magic, id, size, seed) and a pattern from
 * seed.  A write under PP_PIN_WRITE changes the seed (a new version). */
static void buf_fill(void *p, size_t id, size_t size, uint64_t seed)
{
    ct_hdr_t *h = p;
    h->magic = CT_MAGIC;
    h->id = id;
    h->size = size;
    h->seed = seed;
    fill_pattern(h + 1, size - sizeof *h, seed);
}

static void *buf_new(size_t id, size_t size, uint64_t seed)
{
    cr_assert_geq(size, sizeof(ct_hdr_t));
    void *p = malloc(size);
    cr_assert_not_null(p);
    buf_fill(p, id, size, seed);
    return p;
}

static bool buf_check(const void *p, size_t id, size_t size, uint64_t seed)
{
    const ct_hdr_t *h = p;
    return p != NULL && h->magic == CT_MAGIC && h->id == id && h->size == size &&
           h->seed == seed && check_pattern(h + 1, size - sizeof *h, seed);
}

/* A flat entry (type NULL: swapped as raw bytes, reloaded into malloc). */
static pp_ref_t put_flat(pp_pool_t *pool, size_t id, size_t size, unsigned node, void **buf)
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

/*
 * ct_t (helpers.h) has no save/load, so the pool never evicts its entries.
 * sw_t does: save writes the bytes, load reads them into malloc'd memory.
 * It counts, per entry id, the buffers that exist (allocs: the put's and
 * each load's) and the free calls (an eviction frees the data too), so
 * frees == allocs at the end means every buffer was freed exactly once,
 * and frees > allocs at any moment is a double free.  It also records the
 * thread that ran the last save and load.
 */
typedef struct sw {
    pp_type_t type;                      /* type.ctx == this */
    size_t cap;
    atomic_uint *allocs, *frees, *saves, *loads;
    atomic_int *save_tid, *load_tid;
    atomic_uint bad;                     /* bad header, size, id; double free */
} sw_t;

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

static sw_t *sw_new(size_t cap)
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
static void sw_check_delete(sw_t *sw, size_t n)
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

static pp_ref_t put_sw(pp_pool_t *pool, sw_t *sw, size_t id, size_t size, unsigned node)
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

static unsigned state_of(pp_pool_t *pool, pp_ref_t ref) { return test_stat(pool, ref).state; }

static bool is_swapped_out(pp_pool_t *pool, pp_ref_t ref)
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
static size_t find_one(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned bit)
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
static void swap_out(pp_pool_t *pool, unsigned node, const pp_ref_t *targets, size_t n)
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

enum call_kind { CALL_PIN, CALL_PIN_MANY, CALL_GET };

typedef struct call {
    pp_pool_t *pool;
    faultdev_t *fd;
    pp_ref_t ref;
    enum call_kind kind;
    unsigned flags;
    int rc;
    void *data;
    bool gate_closed_at_return;          /* the device gate was still closed */
    test_sig_t done;                     /* 1 once the call returned */
} call_t;

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

static void call_start(call_t *c, pthread_t *th, pp_pool_t *pool, faultdev_t *fd, pp_ref_t ref,
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

static bool call_returned(call_t *c)
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
static size_t freeze_eviction(pp_pool_t *pool, faultdev_t *f, pp_ref_t refs[16], void *bufs[16])
{
    faultdev_gate_close(f, false, true);
    for (size_t i = 0; i < 16; i++)
        refs[i] = put_flat(pool, i, PAGE, 0, &bufs[i]);
    faultdev_wait_blocked(f, 1);
    return find_one(pool, refs, 16, PP_STATE_EVICTING);
}

/* ======================================================================== */
/* 1. The limit is held                                                      */
/* ======================================================================== */

#define LIM_LIMIT (32u * PAGE)
#define LIM_MAX_SIZE (2u * PAGE)
#define LIM_ENTRIES 56                   /* ~6x the limit */
#define LIM_THREADS 4
#define LIM_OPS 4000

static size_t lim_size(size_t id) { return 1024 + (id * 1237) % (LIM_MAX_SIZE - 1024 + 1); }

typedef struct lim {
    pp_pool_t *pool;
    const pp_ref_t *refs;
    int k;
    atomic_int *running;
    uint64_t samples;
} lim_t;

static void *lim_worker(void *arg)
{
    lim_t *a = arg;
    uint64_t rng = 0x1234567ull + (uint64_t)a->k;
    for (int op = 0; op < LIM_OPS; op++) {
        size_t id = splitmix64(&rng) % LIM_ENTRIES;
        bool nowait = (op % 4) == 0;
        void *d = NULL;
        int rc = pp_pin(a->pool, a->refs[id], nowait ? PP_PIN_NOWAIT : 0, &d);
        if (nowait && rc == PP_EAGAIN)
            rc = pp_pin(a->pool, a->refs[id], 0, &d);   /* waits for that load */
        TCHECK(rc == 0, "pin %zu: %s", id, pp_err_name(rc));
        if (rc != 0)
            continue;
        TCHECK(buf_check(d, id, lim_size(id), ct_seed(id)), "entry %zu: wrong bytes", id);
        rc = pp_unpin(a->pool, a->refs[id]);
        TCHECK(rc == 0, "unpin %zu: %s", id, pp_err_name(rc));
    }
    atomic_fetch_sub(a->running, 1);
    return NULL;
}

static void *lim_sampler(void *arg)
{
    lim_t *a = arg;
    pp_stats_t *s = malloc(sizeof *s);
    TCHECK(s != NULL, "malloc");
    if (s == NULL)
        return NULL;
    do {
        int rc = pp_pool_stats(a->pool, s);
        TCHECK(rc == 0, "pp_pool_stats: %s", pp_err_name(rc));
        TCHECK(s->resident_reserved <= s->mem_limit, "reserved %" PRIu64 " > limit %zu",
               s->resident_reserved, s->mem_limit);
        for (unsigned n = 0; n < s->nodes; n++)
            TCHECK(s->node[n].resident_bytes <= s->mem_limit + LIM_MAX_SIZE,
                   "node %u resident %" PRIu64 " > limit + max entry", n,
                   s->node[n].resident_bytes);
        /* The sum of the nodes' counters is one snapshot only on one node
         * (each node's counter is read at a different moment). */
        if (s->nodes == 1)
            TCHECK(s->total.resident_bytes <= s->mem_limit + LIM_MAX_SIZE,
                   "resident %" PRIu64 " > limit + max entry", s->total.resident_bytes);
        a->samples++;
    } while (atomic_load(a->running) > 0);
    free(s);
    return NULL;
}

Test(evict, limit_held_under_concurrent_pins, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(LIM_LIMIT, NULL, NULL);
    unsigned nodes = test_nodes(pool);
    sw_t *sw = sw_new(LIM_ENTRIES);
    pp_ref_t refs[LIM_ENTRIES];
    /* Half flat, half with save/load; spread over every node, so every
     * swap thread evicts against the one limit. */
    for (size_t id = 0; id < LIM_ENTRIES; id++) {
        if (id % 2)
            refs[id] = put_sw(pool, sw, id, lim_size(id), (unsigned)(id % nodes));
        else
            refs[id] = put_flat(pool, id, lim_size(id), (unsigned)(id % nodes), NULL);
    }
    atomic_int running = LIM_THREADS;
    lim_t a[LIM_THREADS + 1];
    pthread_t th[LIM_THREADS + 1];
    for (int k = 0; k <= LIM_THREADS; k++) {
        a[k] = (lim_t){pool, refs, k, &running, 0};
        test_thread_start(&th[k], k < LIM_THREADS ? lim_worker : lim_sampler, &a[k]);
    }
    for (int k = 0; k <= LIM_THREADS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    cr_assert_gt(a[LIM_THREADS].samples, 0);

    pp_stats_t *s = test_stats_new(pool);
    cr_assert_leq(s->resident_peak, LIM_LIMIT, "peak %" PRIu64, s->resident_peak);
    cr_assert_leq(s->resident_reserved, LIM_LIMIT);
    cr_assert_leq(s->total.resident_bytes, LIM_LIMIT);
    /* The workload did press on the limit. */
    cr_assert_gt(s->resident_peak, HIGH_WM(LIM_LIMIT));
    cr_assert_gt(s->total.evictions_written, 0);
    cr_assert_gt(s->total.loads, 0);
    free(s);
    ev_finish(pool, refs, LIM_ENTRIES);
    sw_check_delete(sw, LIM_ENTRIES);
}

/* ======================================================================== */
/* 2. A pinned entry is never evicted                                        */
/* ======================================================================== */

#define PE_LIMIT (48u * PAGE)
#define PE_THREADS 8
#define PE_HELD 4
#define PE_SHARED 120                    /* read by every worker */
#define PE_OWNED 10                      /* per worker: read and written by it alone */
#define PE_ENTRIES (PE_HELD + PE_SHARED + PE_THREADS * PE_OWNED)   /* ~4.3x the limit */
#define PE_OPS 2500
#define PE_CANARY_OFF 512
#define PE_CANARY_LEN 256

static uint64_t pe_seed(size_t id, uint64_t version) { return ct_seed(id) + version * 0x9e37ull; }

typedef struct pe {
    pp_pool_t *pool;
    const pp_ref_t *refs;
    int k;
    atomic_int *running;
    uint64_t writes;
} pe_t;

static void *pe_worker(void *arg)
{
    pe_t *a = arg;
    uint64_t rng = 0xabcdefull * (uint64_t)(a->k + 1);
    uint64_t version[PE_OWNED] = {0};
    size_t own0 = PE_HELD + PE_SHARED + (size_t)a->k * PE_OWNED;
    for (int op = 0; op < PE_OPS; op++) {
        uint64_t r = splitmix64(&rng);
        size_t id, j = 0;
        bool write = false;
        if (r & 1) {
            id = PE_HELD + (size_t)((r >> 8) % PE_SHARED);
        } else {
            j = (size_t)((r >> 8) % PE_OWNED);
            id = own0 + j;
            write = (r & 6) == 0;
        }
        bool shared = id < own0;
        uint64_t seed = shared ? ct_seed(id) : pe_seed(id, version[j]);
        void *d = NULL;
        int rc = pp_pin(a->pool, a->refs[id], write ? PP_PIN_WRITE : 0, &d);
        TCHECK(rc == 0, "pin %zu: %s", id, pp_err_name(rc));
        if (rc != 0)
            continue;
        TCHECK(buf_check(d, id, PAGE, seed), "entry %zu: wrong bytes (version %" PRIu64 ")", id,
               shared ? 0 : version[j]);
        if (write) {
            version[j]++;
            buf_fill(d, id, PAGE, pe_seed(id, version[j]));
            a->writes++;
        }
        rc = pp_unpin(a->pool, a->refs[id]);
        TCHECK(rc == 0, "unpin %zu: %s", id, pp_err_name(rc));
    }
    /* The last version of each owned entry survives eviction and reload. */
    for (size_t j = 0; j < PE_OWNED; j++) {
        void *d = NULL;
        int rc = pp_pin(a->pool, a->refs[own0 + j], 0, &d);
        TCHECK(rc == 0, "final pin: %s", pp_err_name(rc));
        if (rc == 0) {
            TCHECK(buf_check(d, own0 + j, PAGE, pe_seed(own0 + j, version[j])),
                   "entry %zu lost its last write", own0 + j);
            TCHECK(pp_unpin(a->pool, a->refs[own0 + j]) == 0, "unpin");
        }
    }
    atomic_fetch_sub(a->running, 1);
    return NULL;
}

static void pe_canary(void *d, unsigned char *out)
{
    memcpy(out, (char *)d + PE_CANARY_OFF, PE_CANARY_LEN);
}

Test(evict, pinned_entries_never_evicted, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(PE_LIMIT, NULL, NULL);
    unsigned nodes = test_nodes(pool);
    sw_t *sw = sw_new(PE_ENTRIES);
    pp_ref_t refs[PE_ENTRIES];
    void *held[PE_HELD];
    unsigned char canary[PE_CANARY_LEN];
    for (size_t i = 0; i < PE_CANARY_LEN; i++)
        canary[i] = (unsigned char)(0xC5 ^ i);

    /* Held entries: put first (nothing is evicted under the watermark),
     * pinned for write, and a canary written over part of their bytes. */
    for (size_t id = 0; id < PE_HELD; id++) {
        refs[id] = id % 2 ? put_sw(pool, sw, id, PAGE, (unsigned)(id % nodes))
                          : put_flat(pool, id, PAGE, (unsigned)(id % nodes), NULL);
        assert_rc(pp_pin(pool, refs[id], PP_PIN_WRITE, &held[id]), 0);
        memcpy((char *)held[id] + PE_CANARY_OFF, canary, PE_CANARY_LEN);
    }
    for (size_t id = PE_HELD; id < PE_ENTRIES; id++) {
        refs[id] = id % 2 ? put_sw(pool, sw, id, PAGE, (unsigned)(id % nodes))
                          : put_flat(pool, id, PAGE, (unsigned)(id % nodes), NULL);
    }

    atomic_int running = PE_THREADS;
    pe_t a[PE_THREADS];
    pthread_t th[PE_THREADS];
    for (int k = 0; k < PE_THREADS; k++) {
        a[k] = (pe_t){pool, refs, k, &running, 0};
        test_thread_start(&th[k], pe_worker, &a[k]);
    }
    /* While the workers force evictions: the held entries stay resident,
     * never claimed or written, at the same address. */
    uint64_t rounds = 0;
    while (atomic_load(&running) > 0) {
        for (size_t id = 0; id < PE_HELD; id++) {
            pp_entry_info_t info = test_stat(pool, refs[id]);
            cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_EVICTING | PP_STATE_SWAPPED),
                         PP_STATE_RESIDENT, "held entry %zu: state 0x%x", id, info.state);
            cr_assert_geq(info.pins, 1);
            void *d = NULL;
            assert_rc(pp_pin(pool, refs[id], 0, &d), 0);
            cr_assert_eq(d, held[id], "held entry %zu moved", id);
            assert_rc(pp_unpin(pool, refs[id]), 0);
        }
        rounds++;
        sched_yield();
    }
    for (int k = 0; k < PE_THREADS; k++)
        test_thread_join(th[k]);
    TCHECK_NONE();
    cr_assert_gt(rounds, 0);

    pp_stats_t *s = test_stats_new(pool);
    cr_assert_gt(s->total.evictions_written, 0, "the workload evicted nothing");
    cr_assert_gt(s->total.loads, 0);
    free(s);
    for (size_t id = 0; id < PE_HELD; id++) {
        pp_entry_info_t info = test_stat(pool, refs[id]);
        cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_SWAPPED), PP_STATE_RESIDENT);
        cr_assert_eq(info.pins, 1);
        unsigned char now[PE_CANARY_LEN];
        pe_canary(held[id], now);
        cr_assert_arr_eq(now, canary, PE_CANARY_LEN, "held entry %zu: canary changed", id);
        /* Put the original bytes back over the canary: the rest is intact. */
        ct_hdr_t *h = held[id];
        cr_assert(h->magic == CT_MAGIC && h->id == id && h->size == PAGE);
        unsigned char *orig = buf_new(id, PAGE, ct_seed(id));
        memcpy((char *)held[id] + PE_CANARY_OFF, orig + PE_CANARY_OFF, PE_CANARY_LEN);
        free(orig);
        cr_assert(buf_check(held[id], id, PAGE, ct_seed(id)), "held entry %zu damaged", id);
        assert_rc(pp_unpin(pool, refs[id]), 0);
    }
    ev_finish(pool, refs, PE_ENTRIES);
    sw_check_delete(sw, PE_ENTRIES);
}

/* ======================================================================== */
/* 3. A pin always wins                                                      */
/* ======================================================================== */

/* A read pin of an entry whose write-out is frozen returns at once; the
 * eviction is abandoned and the entry stays where it was. */
Test(evict, pin_wins_over_eviction_in_progress, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    void *d = NULL;
    assert_rc(pp_pin(pool, refs[x], 0, &d), 0);   /* on this thread: it did not wait */
    cr_assert_eq(d, bufs[x]);
    cr_assert_eq(faultdev_blocked(f), 1, "the write is no longer blocked");
    pp_entry_info_t info = test_stat(pool, refs[x]);
    cr_assert_eq(info.pins, 1);
    cr_assert(info.state & PP_STATE_EVICTING);

    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[x]) & PP_STATE_EVICTING), TEST_WAIT_MS));
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);
    info = test_stat(pool, refs[x]);
    cr_assert(info.state & PP_STATE_RESIDENT, "state 0x%x", info.state);
    cr_assert_eq(info.pins, 1);
    void *d2 = NULL;
    assert_rc(pp_pin(pool, refs[x], PP_PIN_NOWAIT, &d2), 0);
    cr_assert_eq(d2, bufs[x], "the pinned entry moved");
    cr_assert(buf_check(d2, x, PAGE, ct_seed(x)));
    assert_rc(pp_unpin(pool, refs[x]), 0);
    assert_rc(pp_unpin(pool, refs[x]), 0);
    ev_finish(pool, refs, 16);
}

/* A read pin taken and dropped again while the write-out is frozen still
 * wins: the entry was used, so the eviction is abandoned and the data
 * stays where it is (the claim clears the recency bit; the pin sets it). */
Test(evict, pin_and_unpin_during_eviction_keeps_entry, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    void *d = NULL;
    assert_rc(pp_pin(pool, refs[x], 0, &d), 0);
    cr_assert_eq(d, bufs[x]);
    cr_assert(buf_check(d, x, PAGE, ct_seed(x)));
    assert_rc(pp_unpin(pool, refs[x]), 0);
    pp_entry_info_t info = test_stat(pool, refs[x]);
    cr_assert_eq(info.pins, 0);
    cr_assert(info.state & PP_STATE_EVICTING, "state 0x%x", info.state);

    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[x]) & PP_STATE_EVICTING), TEST_WAIT_MS));
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);
    info = test_stat(pool, refs[x]);
    cr_assert(info.state & PP_STATE_RESIDENT, "state 0x%x", info.state);
    void *d2 = NULL;
    assert_rc(pp_pin(pool, refs[x], PP_PIN_NOWAIT, &d2), 0);
    cr_assert_eq(d2, bufs[x], "the entry was evicted though it was pinned during its write-out");
    cr_assert(buf_check(d2, x, PAGE, ct_seed(x)));
    assert_rc(pp_unpin(pool, refs[x]), 0);
    ev_finish(pool, refs, 16);
}

/* A write pin of an entry whose write-out is frozen is counted at once but
 * returns only once the swap thread has stopped reading the bytes; then
 * the entry is dirty, and what is written under that pin is what a later
 * eviction writes out. */
Test(evict, write_pin_waits_for_writer_then_wins, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, refs[x], CALL_PIN, PP_PIN_WRITE);
    /* The pin is taken (counted, dirty) while the write is still blocked... */
    cr_assert(WAIT_UNTIL(test_stat(pool, refs[x]).pins == 1, TEST_WAIT_MS),
              "the write pin was never counted");
    pp_entry_info_t info = test_stat(pool, refs[x]);
    cr_assert(info.state & PP_STATE_EVICTING);
    /* ...but the call has not returned: the swap thread still reads. */
    cr_assert_not(call_returned(&c), "the write pin returned while the bytes were being written");
    cr_assert_eq(faultdev_blocked(f), 1);

    faultdev_gate_open(f);
    test_thread_join(th);
    assert_rc(c.rc, 0);
    cr_assert_not(c.gate_closed_at_return, "returned while the write was blocked");
    cr_assert_eq(c.data, bufs[x]);
    info = test_stat(pool, refs[x]);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_DIRTY | PP_STATE_EVICTING),
                 PP_STATE_RESIDENT | PP_STATE_DIRTY, "state 0x%x", info.state);
    cr_assert_eq(info.pins, 1);
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);
    cr_assert(buf_check(c.data, x, PAGE, ct_seed(x)));

    /* Write a new version under the pin; evicted again and reloaded, the
     * entry has it (the abandoned write's copy was not taken as valid). */
    buf_fill(c.data, x, PAGE, ct_seed(x) + 1);
    assert_rc(pp_unpin(pool, refs[x]), 0);
    swap_out(pool, 0, &refs[x], 1);
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[x], 0, &d), 0);
    cr_assert(buf_check(d, x, PAGE, ct_seed(x) + 1), "the write made under the pin was lost");
    assert_rc(pp_unpin(pool, refs[x]), 0);
    sig_destroy(&c.done);
    ev_finish(pool, refs, 16);
}

/* PP_PIN_NOWAIT never waits -- not even a write pin for an eviction's
 * device write.  (It may fail with PP_EAGAIN and no pin; it must not block,
 * and it must not pin for write while the swap thread reads the bytes.) */
static void nowait_write_never_waits(enum call_kind kind)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);

    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, refs[x], kind, PP_PIN_WRITE | PP_PIN_NOWAIT);
    bool returned = sig_wait(&c.done, 1);      /* bounded: a hang fails */
    pp_entry_info_t info = test_stat(pool, refs[x]);
    faultdev_gate_open(f);
    test_thread_join(th);
    cr_assert(returned, "%s(PP_PIN_WRITE|PP_PIN_NOWAIT) blocked until the eviction's write "
                        "ended (%s once the gate opened)",
              kind == CALL_PIN ? "pp_pin" : "pp_pin_many", pp_err_name(c.rc));
    cr_assert_neq(c.rc, 0, "PP_PIN_WRITE|PP_PIN_NOWAIT pinned for write while the swap "
                           "thread read the bytes (pins %u, state 0x%x)", info.pins, info.state);
    assert_rc(c.rc, PP_EAGAIN);
    cr_assert_eq(info.pins, 0, "the failed NOWAIT pin left a pin");
    sig_destroy(&c.done);
    ev_finish(pool, refs, 16);
}

Test(evict, nowait_write_pin_never_waits_for_eviction, .timeout = 60)
{
    nowait_write_never_waits(CALL_PIN);
}

Test(evict, nowait_write_pin_many_never_waits_for_eviction, .timeout = 60)
{
    nowait_write_never_waits(CALL_PIN_MANY);
}

/* A pin that arrives during a long write-out stops it within one chunk
 * (1 MiB): the rest of the entry is never written, no copy is kept. */
#define LW_CHUNK ((size_t)1 << 20)
#define LW_LIMIT (4 * LW_CHUNK)

Test(evict, pin_stops_long_write_within_one_chunk, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(LW_LIMIT, NULL, &f);
    pp_ref_t refs[2];
    void *big = NULL;
    faultdev_gate_close(f, false, true);
    refs[0] = put_flat(pool, 0, 3 * LW_CHUNK, 0, &big);      /* under 15/16 */
    refs[1] = put_flat(pool, 1, LW_CHUNK, 0, NULL);          /* crosses it, fits */
    faultdev_wait_blocked(f, 1);
    cr_assert(state_of(pool, refs[0]) & PP_STATE_EVICTING, "CLOCK from slot 0: the big one first");
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[0], 0, &d), 0);
    cr_assert_eq(d, big);
    faultdev_gate_open(f);

    /* The swap thread gives the big entry up and evicts the other one. */
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[0]) & PP_STATE_EVICTING) &&
                             test_reserved(pool) <= LOW_WM(LW_LIMIT),
                         TEST_WAIT_MS));
    unsigned st = state_of(pool, refs[0]);
    cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_SWAPPED), PP_STATE_RESIDENT,
                 "state 0x%x: a copy was kept of a write that was stopped", st);
    unsigned long written = atomic_load(&f->write_bytes);
    cr_assert_leq(written, 2 * LW_CHUNK, "%lu bytes written: the big entry's write went on "
                                         "after its pin", written);
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_geq(s->total.evictions_abandoned, 1);
    cr_assert_eq(s->total.swap_used_bytes, LW_CHUNK, "the stopped write's space was kept");
    free(s);
    cr_assert(buf_check(d, 0, 3 * LW_CHUNK, ct_seed(0)));
    assert_rc(pp_unpin(pool, refs[0]), 0);
    ev_finish(pool, refs, 2);
}

/* pp_get during an eviction wins too: the entry is escaped, stays where it
 * was, and is never evicted afterwards. */
Test(evict, get_during_eviction_escapes_for_good, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    pp_ref_t refs[16 + 64];
    void *bufs[16];
    size_t x = freeze_eviction(pool, f, refs, bufs);
    uint64_t abandoned0 = STAT_TOTAL(pool, evictions_abandoned);

    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, refs[x], CALL_GET, 0);
    cr_assert(WAIT_UNTIL(state_of(pool, refs[x]) & PP_STATE_ESCAPED, TEST_WAIT_MS),
              "pp_get never marked the entry escaped");
    faultdev_gate_open(f);
    test_thread_join(th);
    assert_rc(c.rc, 0);
    cr_assert_eq(c.data, bufs[x]);
    cr_assert(WAIT_UNTIL(!(state_of(pool, refs[x]) & PP_STATE_EVICTING), TEST_WAIT_MS));
    cr_assert_gt(STAT_TOTAL(pool, evictions_abandoned), abandoned0);

    /* Four limits' worth of new entries, each released once swapped out
     * (so the CLOCK hand keeps coming round): the escaped one is never
     * claimed again, never moves. */
    uint64_t ev0 = STAT_TOTAL(pool, evictions_written);
    for (size_t i = 16; i < 16 + 64; i++) {
        refs[i] = put_flat(pool, i, PAGE, 0, NULL);
        for (size_t j = 0; j <= i; j++) {
            if (j != x && refs[j] != PP_REF_NONE && is_swapped_out(pool, refs[j])) {
                assert_rc(pp_release(pool, refs[j]), 0);
                refs[j] = PP_REF_NONE;
            }
        }
        unsigned st = state_of(pool, refs[x]);
        cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_EVICTING | PP_STATE_ESCAPED),
                     PP_STATE_RESIDENT | PP_STATE_ESCAPED, "state 0x%x after put %zu", st, i);
    }
    cr_assert_geq(STAT_TOTAL(pool, evictions_written), ev0 + 48);
    void *d = NULL;
    assert_rc(pp_get(pool, refs[x], &d), 0);
    cr_assert_eq(d, bufs[x]);
    cr_assert(buf_check(d, x, PAGE, ct_seed(x)));
    sig_destroy(&c.done);
    ev_finish(pool, refs, 16 + 64);
}

/* ======================================================================== */
/* 4. Loading                                                                */
/* ======================================================================== */

/* A pin of a swapped entry loads it, on the pinning thread, with its
 * bytes; flat and save/load entries, sizes not a multiple of a page. */
Test(evict, pin_loads_swapped_entry, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    sw_t *sw = sw_new(4);
    const size_t size[4] = {sizeof(ct_hdr_t), 1000, PAGE + 17, 3 * PAGE - 5};
    pp_ref_t refs[4];
    for (size_t id = 0; id < 4; id++)
        refs[id] = id % 2 ? put_sw(pool, sw, id, size[id], 0)
                          : put_flat(pool, id, size[id], 0, NULL);
    swap_out(pool, 0, refs, 4);
    cr_assert_eq(test_reserved(pool), 0, "nothing is resident after swap_out");
    uint64_t loads0 = STAT_TOTAL(pool, loads);
    for (size_t id = 0; id < 4; id++) {
        void *d = NULL;
        assert_rc(pp_pin(pool, refs[id], 0, &d), 0);
        cr_assert(buf_check(d, id, size[id], ct_seed(id)), "entry %zu: wrong bytes", id);
        pp_entry_info_t info = test_stat(pool, refs[id]);
        cr_assert(info.state & PP_STATE_RESIDENT);
        cr_assert_eq(info.pins, 1);
    }
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0 + 4);
    cr_assert_eq(test_reserved(pool), size[0] + size[1] + size[2] + size[3]);
    for (size_t id = 1; id < 4; id += 2) {
        cr_assert_eq(atomic_load(&sw->loads[id]), 1);
        cr_assert_eq(atomic_load(&sw->load_tid[id]), my_tid(), "not loaded on the pinning thread");
    }
    for (size_t id = 0; id < 4; id++)
        assert_rc(pp_unpin(pool, refs[id]), 0);
    ev_finish(pool, refs, 4);
    sw_check_delete(sw, 4);
}

#define SL_PINNERS 4

/* Several threads pin the same swapped entry while its load is frozen in
 * the device read: one load, the others wait for it, all get its bytes. */
Test(evict, concurrent_pins_share_one_load, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, 2 * PAGE, 0);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s0 = test_stats_new(pool);

    faultdev_gate_close(f, true, false);
    call_t c[SL_PINNERS];
    pthread_t th[SL_PINNERS];
    for (int k = 0; k < SL_PINNERS; k++)
        call_start(&c[k], &th[k], pool, f, x, CALL_PIN, 0);
    faultdev_wait_blocked(f, 1);            /* the first pinner's load */
    cr_assert(state_of(pool, x) & PP_STATE_LOADING);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, load_waits) >= s0->total.load_waits + SL_PINNERS - 1,
                         TEST_WAIT_MS),
              "the other pinners never waited for the load");
    cr_assert_eq(faultdev_blocked(f), 1, "more than one load of the entry");
    faultdev_gate_open(f);
    for (int k = 0; k < SL_PINNERS; k++) {
        test_thread_join(th[k]);
        assert_rc(c[k].rc, 0);
        cr_assert_eq(c[k].data, c[0].data, "pinners got different pointers");
        sig_destroy(&c[k].done);
    }
    cr_assert(buf_check(c[0].data, 0, 2 * PAGE, ct_seed(0)));
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.loads, s0->total.loads + 1, "loads %" PRIu64 " -> %" PRIu64,
                 s0->total.loads, s1->total.loads);
    cr_assert_geq(s1->total.load_waits, s0->total.load_waits + SL_PINNERS - 1);
    cr_assert_eq(atomic_load(&sw->loads[0]), 1);
    cr_assert_eq(test_stat(pool, x).pins, SL_PINNERS);
    free(s0);
    free(s1);
    for (int k = 0; k < SL_PINNERS; k++)
        assert_rc(pp_unpin(pool, x), 0);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

/* ======================================================================== */
/* 5. PP_PIN_NOWAIT, pp_prefetch and pp_pin_many never block                 */
/* ======================================================================== */

Test(evict, nowait_pin_starts_load_and_never_blocks, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    uint64_t loads0 = STAT_TOTAL(pool, loads);

    /* With reads frozen no load can finish: every call below returns only
     * because it does not wait. */
    faultdev_gate_close(f, true, false);
    void *d = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), PP_EAGAIN);
    faultdev_wait_blocked(f, 1);            /* the load runs, not on this thread */
    pp_entry_info_t info = test_stat(pool, x);
    cr_assert_eq(info.state & (PP_STATE_RESIDENT | PP_STATE_LOADING), PP_STATE_LOADING);
    cr_assert_eq(info.pins, 0);
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), PP_EAGAIN);
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT | PP_PIN_WRITE, &d), PP_EAGAIN);
    assert_rc(pp_prefetch(pool, x), 0);
    cr_assert_eq(test_stat(pool, x).pins, 0);
    cr_assert_eq(faultdev_blocked(f), 1, "a second load of the entry started");

    faultdev_gate_open(f);
    /* A waiting pin: it waits for the load in progress, never starts its own. */
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0)));
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0 + 1);
    cr_assert_eq(atomic_load(&sw->loads[0]), 1);
    cr_assert_neq(atomic_load(&sw->load_tid[0]), my_tid(), "a NOWAIT load ran on the caller");
    /* Resident now: NOWAIT pins succeed. */
    void *d2 = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d2), 0);
    cr_assert_eq(d2, d);
    assert_rc(pp_unpin(pool, x), 0);
    assert_rc(pp_unpin(pool, x), 0);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

Test(evict, prefetch_never_blocks_and_loads, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s0 = test_stats_new(pool);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_prefetch(pool, x), 0);
    faultdev_wait_blocked(f, 1);
    cr_assert(state_of(pool, x) & PP_STATE_LOADING);
    assert_rc(pp_prefetch(pool, x), 0);     /* already loading: nothing more */
    cr_assert_eq(faultdev_blocked(f), 1);
    faultdev_gate_open(f);

    /* The swap thread finishes the load by itself: no pin waits for it. */
    cr_assert(WAIT_UNTIL(state_of(pool, x) & PP_STATE_RESIDENT, TEST_WAIT_MS),
              "the prefetched entry never became resident");
    void *d = NULL;
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0)));
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.loads, s0->total.loads + 1);
    cr_assert_eq(s1->total.load_waits, s0->total.load_waits);
    cr_assert_neq(atomic_load(&sw->load_tid[0]), my_tid());
    assert_rc(pp_prefetch(pool, x), 0);     /* resident: nothing to do */
    free(s0);
    free(s1);
    assert_rc(pp_unpin(pool, x), 0);
    /* Dead: stale. */
    assert_rc(pp_release(pool, x), 0);
    assert_rc(pp_prefetch(pool, x), PP_ESTALE);
    ev_finish(pool, NULL, 0);
    sw_check_delete(sw, 1);
}

/* pp_pin_many: with NOWAIT and a swapped entry among resident ones, all or
 * none -- PP_EAGAIN and no pin held; without NOWAIT, all pinned. */
Test(evict, pin_many_nowait_all_or_none, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(4);
    pp_ref_t refs[4];
    refs[1] = put_sw(pool, sw, 1, PAGE, 0);
    refs[3] = put_flat(pool, 3, PAGE, 0, NULL);
    pp_ref_t swapped[2] = {refs[1], refs[3]};
    swap_out(pool, 0, swapped, 2);
    refs[0] = put_sw(pool, sw, 0, PAGE, 0);
    refs[2] = put_flat(pool, 2, PAGE, 0, NULL);
    cr_assert(state_of(pool, refs[0]) & PP_STATE_RESIDENT);
    cr_assert(state_of(pool, refs[2]) & PP_STATE_RESIDENT);
    uint64_t loads0 = STAT_TOTAL(pool, loads);

    faultdev_gate_close(f, true, false);
    void *d[4] = {NULL};
    assert_rc(pp_pin_many(pool, refs, 4, PP_PIN_NOWAIT, d), PP_EAGAIN);
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(test_stat(pool, refs[i]).pins, 0, "entry %zu kept a pin", i);
    faultdev_wait_blocked(f, 1);            /* a load was started */
    assert_rc(pp_pin_many(pool, refs, 4, PP_PIN_NOWAIT | PP_PIN_WRITE, d), PP_EAGAIN);
    for (size_t i = 0; i < 4; i++) {
        pp_entry_info_t info = test_stat(pool, refs[i]);
        cr_assert_eq(info.pins, 0, "entry %zu kept a pin", i);
        cr_assert_not(info.state & PP_STATE_DIRTY, "a failed pin_many marked %zu dirty", i);
    }
    faultdev_gate_open(f);

    assert_rc(pp_pin_many(pool, refs, 4, 0, d), 0);
    for (size_t i = 0; i < 4; i++) {
        cr_assert(buf_check(d[i], i, PAGE, ct_seed(i)), "entry %zu: wrong bytes", i);
        cr_assert_eq(test_stat(pool, refs[i]).pins, 1);
    }
    cr_assert_eq(STAT_TOTAL(pool, loads), loads0 + 2);
    assert_rc(pp_unpin_many(pool, refs, 4, NULL), 0);
    ev_finish(pool, refs, 4);
    sw_check_delete(sw, 4);
}

/* ======================================================================== */
/* 6. PP_ENOMEM instead of a deadlock                                        */
/* ======================================================================== */

#define NM_ENTRIES 20

/* Fills the limit with one-page entries 0..15 made unevictable by a pin
 * or a get, loading those that were swapped out.  Returns 16. */
static size_t nm_fill(pp_pool_t *pool, const pp_ref_t *refs, bool by_get)
{
    size_t k = SMALL_LIMIT / PAGE;
    for (size_t i = 0; i < k; i++) {
        void *d = NULL;
        int rc = by_get ? pp_get(pool, refs[i], &d) : pp_pin(pool, refs[i], 0, &d);
        cr_assert_eq(rc, 0, "%s %zu: %s", by_get ? "get" : "pin", i, pp_err_name(rc));
        cr_assert(buf_check(d, i, PAGE, ct_seed(i)));
    }
    cr_assert_eq(test_reserved(pool), SMALL_LIMIT);
    return k;
}

static void nm_expect_enomem(pp_pool_t *pool, pp_ref_t swapped)
{
    cr_assert(is_swapped_out(pool, swapped));
    void *d = NULL;
    assert_rc(pp_pin(pool, swapped, 0, &d), PP_ENOMEM);
    pp_entry_info_t info = test_stat(pool, swapped);
    cr_assert_eq(info.pins, 0);
    cr_assert(is_swapped_out(pool, swapped), "the failed pin changed the entry");
    assert_rc(pp_get(pool, swapped, &d), PP_ENOMEM);
    cr_assert(is_swapped_out(pool, swapped), "the failed get changed the entry");
    void *buf = buf_new(99, PAGE, 1);
    pp_ref_t r = PP_REF_NONE;
    assert_rc(pp_put(pool, buf, PAGE, NULL, PP_ON_NODE(0), &r), PP_ENOMEM);
    cr_assert_eq(r, PP_REF_NONE);
    free(buf);                              /* a failed put leaves it ours */
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->resident_reserved, SMALL_LIMIT);
    cr_assert_geq(s->room_enomem, 3, "room_enomem %" PRIu64, s->room_enomem);
    free(s);
}

Test(evict, enomem_when_every_resident_byte_is_pinned, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    pp_ref_t refs[NM_ENTRIES + 1];
    for (size_t i = 0; i < NM_ENTRIES; i++)
        refs[i] = put_flat(pool, i, PAGE, 0, NULL);
    size_t k = nm_fill(pool, refs, false);
    nm_expect_enomem(pool, refs[NM_ENTRIES - 1]);

    /* Unpinned, the same calls succeed (the pool evicts for them). */
    for (size_t i = 0; i < k; i++)
        assert_rc(pp_unpin(pool, refs[i]), 0);
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[NM_ENTRIES - 1], 0, &d), 0);
    cr_assert(buf_check(d, NM_ENTRIES - 1, PAGE, ct_seed(NM_ENTRIES - 1)));
    assert_rc(pp_unpin(pool, refs[NM_ENTRIES - 1]), 0);
    refs[NM_ENTRIES] = put_flat(pool, NM_ENTRIES, PAGE, 0, NULL);
    ev_finish(pool, refs, NM_ENTRIES + 1);
}

Test(evict, enomem_when_every_resident_byte_is_escaped, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    pp_ref_t refs[NM_ENTRIES + 1];
    for (size_t i = 0; i < NM_ENTRIES; i++)
        refs[i] = put_flat(pool, i, PAGE, 0, NULL);
    size_t k = nm_fill(pool, refs, true);
    nm_expect_enomem(pool, refs[NM_ENTRIES - 1]);

    /* Escaped entries leave memory only when they die. */
    for (size_t i = 0; i < k; i++) {
        assert_rc(pp_release(pool, refs[i]), 0);
        refs[i] = PP_REF_NONE;
    }
    test_drain(pool);
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[NM_ENTRIES - 1], 0, &d), 0);
    cr_assert(buf_check(d, NM_ENTRIES - 1, PAGE, ct_seed(NM_ENTRIES - 1)));
    assert_rc(pp_unpin(pool, refs[NM_ENTRIES - 1]), 0);
    refs[NM_ENTRIES] = put_flat(pool, NM_ENTRIES, PAGE, 0, NULL);
    ev_finish(pool, refs, NM_ENTRIES + 1);
}

/* An entry larger than the limit can never fit: PP_ENOMEM, and the failed
 * put has no effect -- it does not evict the pool for nothing. */
Test(evict, put_larger_than_limit_fails_without_evicting, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    pp_ref_t refs[8];
    for (size_t i = 0; i < 8; i++)
        refs[i] = put_flat(pool, i, PAGE, 0, NULL);   /* half the limit: no eviction */
    size_t big = SMALL_LIMIT + 1;
    void *buf = buf_new(100, big, 1);
    pp_ref_t r = PP_REF_NONE;
    assert_rc(pp_put(pool, buf, big, NULL, PP_ON_NODE(0), &r), PP_ENOMEM);
    free(buf);
    pp_stats_t *s = test_stats_new(pool);
    uint64_t evicted = s->total.evictions_written + s->total.evictions_clean;
    free(s);
    size_t resident = 0;
    for (size_t i = 0; i < 8; i++)
        resident += (state_of(pool, refs[i]) & PP_STATE_RESIDENT) != 0;
    cr_assert_eq(evicted, 0, "a put that could never fit evicted %" PRIu64 " entries "
                             "(%zu of 8 still resident)", evicted, resident);
    cr_assert_eq(resident, 8);
    ev_finish(pool, refs, 8);
}

/* ======================================================================== */
/* 7. CLOCK: a second chance for recently pinned entries                     */
/* ======================================================================== */

/*
 * One thread, entries on node 0, SMALL_LIMIT (16 pages; eviction from 15
 * down to 14, or 13 while a put waits).  Four hot entries are pinned before
 * every put of a new (cold, never pinned) entry; cold entries, once
 * evicted, are released, so their slots are reused and the hand keeps
 * coming round to the hot entries.
 *
 * Why no hot entry can be evicted with a second chance: between two pins
 * of a hot entry the pool gains one page, and the swap thread stops at 13
 * pages, so it evicts at most 4 entries there.  Evicting the hot entry
 * takes two visits of the hand with no pin in between (the first clears
 * its recency bit): a full turn, past every resident cold entry -- at least
 * 9, each without a recency bit, each evicted when passed.  Without the
 * second chance, the very first pass (hand at slot 0, the hot entries)
 * evicts them.
 */
#define CL_HOT 4
#define CL_STEPS 120

Test(evict, clock_second_chance_keeps_hot_entries, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    pp_ref_t hot[CL_HOT];
    pp_ref_t *cold = calloc(CL_STEPS, sizeof *cold);
    cr_assert_not_null(cold);
    for (size_t i = 0; i < CL_HOT; i++)
        hot[i] = put_flat(pool, i, PAGE, 0, NULL);
    size_t cold_evicted = 0;
    for (size_t step = 0; step < CL_STEPS; step++) {
        for (size_t i = 0; i < CL_HOT; i++) {
            void *d = NULL;
            assert_rc(pp_pin(pool, hot[i], 0, &d), 0);
            assert_rc(pp_unpin(pool, hot[i]), 0);
        }
        cold[step] = put_flat(pool, CL_HOT + step, PAGE, 0, NULL);
        for (size_t j = 0; j <= step; j++) {
            if (cold[j] != PP_REF_NONE && !(state_of(pool, cold[j]) & PP_STATE_RESIDENT)) {
                assert_rc(pp_release(pool, cold[j]), 0);
                cold[j] = PP_REF_NONE;
                cold_evicted++;
            }
        }
    }
    for (size_t i = 0; i < CL_HOT; i++) {
        unsigned st = state_of(pool, hot[i]);
        cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_SWAPPED), PP_STATE_RESIDENT,
                     "hot entry %zu was evicted (state 0x%x)", i, st);
    }
    cr_assert_geq(cold_evicted, CL_STEPS - 16, "only %zu cold entries evicted", cold_evicted);
    for (size_t i = 0; i < CL_HOT; i++)
        assert_rc(pp_release(pool, hot[i]), 0);
    ev_finish(pool, cold, CL_STEPS);
    free(cold);
}

/* The second chance is one chance: an entry pinned once and never again
 * loses its recency bit when the hand passes, and is evicted when the hand
 * comes round -- also while new entries keep arriving and staying alive
 * (a scheduler producing data).  The hand turns over table slots, and a
 * turn covers the slots that existed when it began (the first chunk of
 * PP__SLOT_CHUNK here): new entries, however fast they come, wait for the
 * next turn, so the hand is back at slot 0 after at most one chunk's worth
 * of evictions plus the resident entries -- well within three chunks of
 * puts.  (A hand that chased the end of a growing table never came back.) */
#define CL2_PUTS (3u * PP__SLOT_CHUNK)

Test(evict, clock_evicts_entry_not_pinned_again, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    pp_ref_t refs[1 + CL2_PUTS];
    size_t n = 0;
    refs[n++] = put_flat(pool, 0, PAGE, 0, NULL);
    void *d = NULL;
    assert_rc(pp_pin(pool, refs[0], 0, &d), 0);      /* its recency bit */
    assert_rc(pp_unpin(pool, refs[0]), 0);
    while (n < 1 + CL2_PUTS && !is_swapped_out(pool, refs[0])) {
        refs[n] = put_flat(pool, n, PAGE, 0, NULL);
        n++;
    }
    uint64_t evicted = STAT_TOTAL(pool, evictions_written);
    cr_assert(is_swapped_out(pool, refs[0]),
              "an entry pinned once is still resident after %zu newer entries were put "
              "(%" PRIu64 " of them evicted)", n - 1, evicted);
    ev_finish(pool, refs, n);
}

/* ======================================================================== */
/* 8. Eviction runs ahead of need                                            */
/* ======================================================================== */

/* Puts that cross the high watermark but fit wake the swap threads, which
 * bring the pool down to the low watermark while nobody waits. */
Test(evict, eviction_runs_ahead_of_need, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, NULL);
    pp_ref_t refs[16];
    for (size_t i = 0; i < 16; i++)
        refs[i] = put_flat(pool, i, PAGE, 0, NULL);   /* the 16th crosses 15/16 and fits */
    cr_assert(WAIT_UNTIL(test_reserved(pool) <= LOW_WM(SMALL_LIMIT), TEST_WAIT_MS),
              "the swap thread never reached the low watermark");
    pp_stats_t *s = test_stats_new(pool);
    cr_assert_eq(s->room_waits, 0, "a put waited for room");
    cr_assert_eq(s->total.load_waits, 0);
    /* Down to the low watermark, not further: one swap thread, whole pages. */
    cr_assert_eq(s->resident_reserved, LOW_WM(SMALL_LIMIT), "reserved %" PRIu64,
                 s->resident_reserved);
    cr_assert_eq(s->total.evictions_written, 2);
    free(s);
    for (size_t i = 0; i < 2; i++)
        cr_assert(is_swapped_out(pool, refs[i]), "CLOCK from slot 0: entry %zu first", i);
    ev_finish(pool, refs, 16);
}

/* ======================================================================== */
/* 9. Entries that die during I/O                                            */
/* ======================================================================== */

/* The last owner goes while the entry's write-out is frozen: once the
 * write ends the entry is reclaimed exactly once (its data freed once,
 * its copy dropped). */
Test(evict, dead_during_eviction_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(16);
    pp_ref_t refs[16];
    faultdev_gate_close(f, false, true);
    for (size_t i = 0; i < 16; i++)
        refs[i] = put_sw(pool, sw, i, PAGE, 0);
    faultdev_wait_blocked(f, 1);
    size_t x = find_one(pool, refs, 16, PP_STATE_EVICTING);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    assert_rc(pp_release(pool, refs[x]), 0);
    pp_entry_info_t info = test_stat(pool, refs[x]);   /* dead, not yet queued */
    cr_assert_eq(info.state & (PP_STATE_DEAD | PP_STATE_EVICTING | PP_STATE_RESIDENT),
                 PP_STATE_DEAD | PP_STATE_EVICTING | PP_STATE_RESIDENT, "state 0x%x", info.state);
    cr_assert_eq(STAT_TOTAL(pool, queued), 0, "queued during its eviction");
    cr_assert_eq(STAT_TOTAL(pool, dead_in_io), 1);
    assert_rc(pp_pin(pool, refs[x], 0, NULL), PP_ESTALE);
    /* The write cannot end while the gate is closed: drain must wait for
     * the entry, and so times out. */
    assert_rc(pp_pool_drain(pool, 20), PP_EBUSY);
    faultdev_gate_open(f);

    /* Drain waits for the write to end and the entry to be freed. */
    test_drain(pool);
    cr_assert_eq(STAT_TOTAL(pool, frees), frees0 + 1,
                 "drain returned before the entry that died during its eviction was freed");
    cr_assert_eq(STAT_TOTAL(pool, dead_in_io), 0);
    cr_assert_eq(atomic_load(&sw->frees[x]), 1);
    assert_rc(pp_stat(pool, refs[x], &info), PP_ESTALE);
    refs[x] = PP_REF_NONE;
    ev_finish(pool, refs, 16);
    cr_assert_eq(atomic_load(&sw->allocs[x]), 1);
    cr_assert_eq(atomic_load(&sw->frees[x]), 1, "freed %u times", atomic_load(&sw->frees[x]));
    sw_check_delete(sw, 16);
}

/* The last owner goes while a pin's load of the entry is frozen: the pin
 * fails (or wins and unpins), and the loaded data is freed exactly once. */
Test(evict, dead_during_load_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    faultdev_gate_close(f, true, false);
    call_t c;
    pthread_t th;
    call_start(&c, &th, pool, f, x, CALL_PIN, 0);
    faultdev_wait_blocked(f, 1);
    assert_rc(pp_release(pool, x), 0);
    pp_entry_info_t info = test_stat(pool, x);
    cr_assert_eq(info.state & (PP_STATE_DEAD | PP_STATE_LOADING | PP_STATE_RESIDENT),
                 PP_STATE_DEAD | PP_STATE_LOADING, "state 0x%x", info.state);
    cr_assert_eq(STAT_TOTAL(pool, dead_in_io), 1);
    assert_rc(pp_pool_drain(pool, 20), PP_EBUSY);   /* the load cannot end */
    faultdev_gate_open(f);
    test_thread_join(th);
    if (c.rc == 0) {
        cr_assert(buf_check(c.data, 0, PAGE, ct_seed(0)));
        assert_rc(pp_unpin(pool, x), 0);
    } else {
        assert_rc(c.rc, PP_ESTALE);
    }
    sig_destroy(&c.done);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) == frees0 + 1, TEST_WAIT_MS),
              "the entry that died during its load was never freed");
    ev_finish(pool, NULL, 0);
    cr_assert_eq(atomic_load(&sw->loads[0]), 1);
    cr_assert_eq(atomic_load(&sw->allocs[0]), 2);   /* the put's, the load's */
    cr_assert_eq(atomic_load(&sw->frees[0]), 2);    /* at the eviction, at the reclaim */
    sw_check_delete(sw, 1);
}

/* The same for a load the swap thread runs (PP_PIN_NOWAIT). */
Test(evict, dead_during_async_load_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_pin(pool, x, PP_PIN_NOWAIT, NULL), PP_EAGAIN);
    faultdev_wait_blocked(f, 1);
    assert_rc(pp_release(pool, x), 0);
    cr_assert_eq(state_of(pool, x) & (PP_STATE_DEAD | PP_STATE_LOADING),
                 PP_STATE_DEAD | PP_STATE_LOADING);
    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) == frees0 + 1, TEST_WAIT_MS),
              "the entry that died during its load was never freed");
    ev_finish(pool, NULL, 0);
    cr_assert_eq(atomic_load(&sw->allocs[0]), 2);
    cr_assert_eq(atomic_load(&sw->frees[0]), 2);
    sw_check_delete(sw, 1);
}

/* The last owner goes while the entry waits in its swap thread's load
 * queue (the thread is busy with another load): the load is never run,
 * and the entry is reclaimed once, without a free call (no data in
 * memory). */
Test(evict, dead_while_queued_for_load_reclaimed_once, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(2);
    pp_ref_t refs[2];
    refs[0] = put_sw(pool, sw, 0, PAGE, 0);
    refs[1] = put_sw(pool, sw, 1, PAGE, 0);
    swap_out(pool, 0, refs, 2);
    uint64_t frees0 = STAT_TOTAL(pool, frees);

    faultdev_gate_close(f, true, false);
    assert_rc(pp_prefetch(pool, refs[0]), 0);
    faultdev_wait_blocked(f, 1);            /* the swap thread is in entry 0's read */
    assert_rc(pp_prefetch(pool, refs[1]), 0);   /* queued behind it */
    assert_rc(pp_release(pool, refs[1]), 0);
    cr_assert_eq(state_of(pool, refs[1]) & (PP_STATE_DEAD | PP_STATE_LOADING),
                 PP_STATE_DEAD | PP_STATE_LOADING);
    faultdev_gate_open(f);
    cr_assert(WAIT_UNTIL(STAT_TOTAL(pool, frees) == frees0 + 1, TEST_WAIT_MS),
              "the entry that died in the load queue was never freed");
    cr_assert(WAIT_UNTIL(state_of(pool, refs[0]) & PP_STATE_RESIDENT, TEST_WAIT_MS));
    cr_assert_eq(atomic_load(&sw->loads[1]), 0, "a dead entry was loaded");
    cr_assert_eq(atomic_load(&sw->frees[1]), 1);   /* only at its eviction */
    refs[1] = PP_REF_NONE;
    ev_finish(pool, refs, 2);
    sw_check_delete(sw, 2);
}

/* ======================================================================== */
/* Re-eviction: clean entries are dropped, dirty ones written                */
/* ======================================================================== */

Test(evict, clean_entry_dropped_dirty_entry_rewritten, .timeout = 60)
{
    faultdev_t *f;
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, NULL, &f);
    sw_t *sw = sw_new(1);
    pp_ref_t x = put_sw(pool, sw, 0, PAGE, 0);
    swap_out(pool, 0, &x, 1);
    cr_assert_eq(atomic_load(&sw->saves[0]), 1);

    /* Loaded and only read: its copy is still valid, evicted without a write. */
    void *d = NULL;
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    assert_rc(pp_unpin(pool, x), 0);
    cr_assert_not(state_of(pool, x) & PP_STATE_DIRTY);
    pp_stats_t *s0 = test_stats_new(pool);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s1 = test_stats_new(pool);
    cr_assert_eq(s1->total.evictions_clean, s0->total.evictions_clean + 1);
    cr_assert_eq(atomic_load(&sw->saves[0]), 1, "a clean entry was saved again");

    /* Loaded and written: dirty, written out again with the new bytes. */
    assert_rc(pp_pin(pool, x, PP_PIN_WRITE, &d), 0);
    cr_assert(state_of(pool, x) & PP_STATE_DIRTY);
    buf_fill(d, 0, PAGE, ct_seed(0) + 7);
    assert_rc(pp_unpin(pool, x), 0);
    swap_out(pool, 0, &x, 1);
    pp_stats_t *s2 = test_stats_new(pool);
    cr_assert_eq(s2->total.evictions_clean, s1->total.evictions_clean, "a dirty entry was dropped");
    cr_assert_eq(atomic_load(&sw->saves[0]), 2);
    /* Pinned for write while swapped: loaded dirty, written out again. */
    assert_rc(pp_pin(pool, x, PP_PIN_WRITE, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0) + 7), "the write was lost");
    cr_assert(state_of(pool, x) & PP_STATE_DIRTY, "loaded for write but not dirty");
    buf_fill(d, 0, PAGE, ct_seed(0) + 8);
    assert_rc(pp_unpin(pool, x), 0);
    swap_out(pool, 0, &x, 1);
    cr_assert_eq(atomic_load(&sw->saves[0]), 3);
    assert_rc(pp_pin(pool, x, 0, &d), 0);
    cr_assert(buf_check(d, 0, PAGE, ct_seed(0) + 8), "the write after a load was lost");
    assert_rc(pp_unpin(pool, x), 0);
    free(s0);
    free(s1);
    free(s2);
    ev_finish(pool, &x, 1);
    sw_check_delete(sw, 1);
}

/* ======================================================================== */
/* 10. Per-node swap threads                                                 */
/* ======================================================================== */

#define MN_PER_NODE 16                   /* the 16th crosses the high watermark */

/* Entries of node n are evicted by node n's swap thread (counted on n) and
 * their loads are counted on n; nothing happens on the other nodes. */
Test(evict, each_node_swaps_its_own_entries, .timeout = 60)
{
    pp_pool_t *pool = ev_pool(SMALL_LIMIT, TEST_SYNTH4, NULL);
    cr_assert_eq(test_nodes(pool), 4);
    const unsigned use[2] = {1, 3};
    sw_t *sw = sw_new(2 * MN_PER_NODE);
    int swap_tid[2] = {0, 0};
    for (int p = 0; p < 2; p++) {
        unsigned n = use[p];
        pp_stats_t *s0 = test_stats_new(pool);
        pp_ref_t refs[MN_PER_NODE];
        size_t base = (size_t)p * MN_PER_NODE;
        for (size_t i = 0; i < MN_PER_NODE; i++) {
            refs[i] = put_sw(pool, sw, base + i, PAGE, n);
            cr_assert_eq(pp_ref_node(refs[i]), n);
        }
        /* One node's entries: its swap thread alone evicts, down to 7/8
         * (two entries), and then stops. */
        cr_assert(WAIT_UNTIL(test_reserved(pool) <= LOW_WM(SMALL_LIMIT), TEST_WAIT_MS));
        cr_assert_eq(test_reserved(pool), LOW_WM(SMALL_LIMIT));
        size_t swapped = 0, victim = MN_PER_NODE, victim2 = MN_PER_NODE;
        for (size_t i = 0; i < MN_PER_NODE; i++) {
            if (!is_swapped_out(pool, refs[i]))
                continue;
            swapped++;
            if (victim == MN_PER_NODE)
                victim = i;
            else if (victim2 == MN_PER_NODE)
                victim2 = i;
            int tid = atomic_load(&sw->save_tid[base + i]);
            if (swap_tid[p] == 0)
                swap_tid[p] = tid;
            cr_assert_eq(tid, swap_tid[p], "node %u's entries saved by two threads", n);
        }
        cr_assert_eq(swapped, 2);
        cr_assert_neq(swap_tid[p], my_tid());

        pp_stats_t *s1 = test_stats_new(pool);
        for (unsigned m = 0; m < 4; m++) {
            uint64_t ev = s1->node[m].evictions_written - s0->node[m].evictions_written;
            if (m == n) {
                cr_assert_eq(ev, swapped, "node %u counted %" PRIu64 " evictions", m, ev);
                cr_assert_gt(s1->node[m].swap_used_bytes, 0);
                cr_assert_eq(s1->node[m].swapped_bytes, swapped * PAGE);
            } else {
                cr_assert_eq(ev, 0, "node %u counted evictions of node %u's entries", m, n);
                cr_assert_eq(s1->node[m].swap_used_bytes, 0);
                cr_assert_eq(s1->node[m].swap_bytes_written, s0->node[m].swap_bytes_written);
            }
        }

        /* A pin's load (on this thread) and a NOWAIT load (on node n's swap
         * thread) are both counted on node n. */
        void *d = NULL;
        assert_rc(pp_pin(pool, refs[victim], 0, &d), 0);
        cr_assert(buf_check(d, base + victim, PAGE, ct_seed(base + victim)));
        cr_assert_eq(atomic_load(&sw->load_tid[base + victim]), my_tid());
        assert_rc(pp_unpin(pool, refs[victim]), 0);
        assert_rc(pp_pin(pool, refs[victim2], PP_PIN_NOWAIT, &d), PP_EAGAIN);
        cr_assert(WAIT_UNTIL(atomic_load(&sw->loads[base + victim2]) == 1, TEST_WAIT_MS));
        cr_assert_eq(atomic_load(&sw->load_tid[base + victim2]), swap_tid[p],
                     "node %u's NOWAIT load ran on another thread (%d) than its swap thread "
                     "(%d; main %d; loads %u; state 0x%x)", n,
                     atomic_load(&sw->load_tid[base + victim2]), swap_tid[p], my_tid(),
                     atomic_load(&sw->loads[base + victim2]), state_of(pool, refs[victim2]));
        cr_assert(WAIT_UNTIL(STAT_NODE(pool, n, loads) == s1->node[n].loads + 2, TEST_WAIT_MS));
        pp_stats_t *s2 = test_stats_new(pool);
        for (unsigned m = 0; m < 4; m++) {
            if (m != n)
                cr_assert_eq(s2->node[m].loads, s0->node[m].loads, "node %u counted a load", m);
        }
        free(s0);
        free(s1);
        free(s2);
        for (size_t i = 0; i < MN_PER_NODE; i++)
            assert_rc(pp_release(pool, refs[i]), 0);
        cr_assert(WAIT_UNTIL(all_freed(pool), TEST_WAIT_MS));
    }
    cr_assert_neq(swap_tid[0], swap_tid[1], "nodes 1 and 3 share a swap thread");
    ev_finish(pool, NULL, 0);
    sw_check_delete(sw, 2 * MN_PER_NODE);
}

/* ------------------------------------------------------------------------ */
/* A free that puts, on the swap thread                                      */
/* ------------------------------------------------------------------------ */

typedef struct evput {
    pp_pool_t *pool;
    size_t size;                         /* of the entry the first free puts */
    atomic_uint calls;                   /* frees that returned */
    atomic_int rc;                       /* the first free's pp_put */
    _Atomic pp_ref_t ref;
    atomic_int tid;                      /* the thread of the first free */
} evput_t;

static evput_t g_evput;

static int evput_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)ctx;
    return pp_write(w, data, size) == 0 ? 0 : 1;
}

static int evput_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)ctx;
    void *p = malloc(size);
    if (p == NULL || pp_read(r, p, size) != 0) {
        free(p);
        return 1;
    }
    *data = p;
    return 0;
}

static void evput_free(void *data, size_t size, void *ctx)
{
    evput_t *ep = ctx;
    (void)size;
    if (atomic_load(&ep->calls) == 0) {
        atomic_store(&ep->tid, my_tid());
        void *p = malloc(ep->size);
        pp_ref_t ref = PP_REF_NONE;
        int rc = p != NULL ? pp_put(ep->pool, p, ep->size, NULL, PP_ON_NODE(0), &ref)
                           : PP_ENOMEM;
        if (rc != 0)
            free(p);
        atomic_store(&ep->ref, ref);
        atomic_store(&ep->rc, rc);
    }
    free(data);
    atomic_fetch_add(&ep->calls, 1);
}

static const pp_type_t evput_type = {.name = "evput", .free = evput_free,
                                     .save = evput_save, .load = evput_load,
                                     .ctx = &g_evput};

/* An entry of size bytes (each set to fill) of type on node 0. */
static pp_ref_t put_node0(pp_pool_t *pool, size_t size, const pp_type_t *type, int fill)
{
    void *p = malloc(size);
    cr_assert_not_null(p);
    memset(p, fill, size);
    pp_ref_t r;
    assert_rc(pp_put(pool, p, size, type, PP_ON_NODE(0), &r), 0);
    return r;
}

/* Two entries past the high watermark: node 0's swap thread evicts one and
 * calls its free, which puts an entry that needs room.  That put must not
 * wait for a pass of the swap thread it runs on: PP_EAGAIN. */
Test(evict, a_free_after_an_eviction_that_puts_never_waits_for_its_own_pass, .timeout = 60)
{
    const size_t limit = 1u << 20;
    pp_pool_t *pool = ev_pool(limit, NULL, NULL);
    g_evput.pool = pool;
    g_evput.size = limit;                /* fits only in an empty pool */
    atomic_store(&g_evput.calls, 0);
    atomic_store(&g_evput.rc, 1);
    atomic_store(&g_evput.tid, 0);
    pp_ref_t r[2];
    const size_t sizes[2] = {500u << 10, 480u << 10};   /* past 15/16 together */
    for (int i = 0; i < 2; i++)
        r[i] = put_node0(pool, sizes[i], &evput_type, i + 1);
    cr_assert(WAIT_UNTIL(atomic_load(&g_evput.calls) >= 1, TEST_WAIT_MS),
              "the free's pp_put never returned: it waits for a pass of the swap "
              "thread it runs on");
    cr_assert_neq(atomic_load(&g_evput.tid), my_tid(), "the free ran on the swap thread");
    assert_rc(atomic_load(&g_evput.rc), PP_EAGAIN, "a put from a callback that needs room");
    ev_finish(pool, r, 2);
}

/* A free after an eviction that pins a swapped entry: the load would have
 * to wait for room that only a pass of this same swap thread makes.  The
 * pin returns PP_EAGAIN instead (a load is queued for later). */
typedef struct evpin {
    atomic_uint calls;                   /* frees that returned */
    _Atomic pp_ref_t target;             /* what the second free pins */
    pp_pool_t *pool;
    atomic_int rc;
} evpin_t;

static evpin_t g_evpin;

static void evpin_free(void *data, size_t size, void *ctx)
{
    evpin_t *ep = ctx;
    (void)size;
    if (atomic_load(&ep->calls) == 1) {
        pp_ref_t t = atomic_load(&ep->target);
        int rc = pp_pin(ep->pool, t, 0, NULL);
        if (rc == 0)
            rc = pp_unpin(ep->pool, t) == 0 ? 0 : -100;
        atomic_store(&ep->rc, rc);
    }
    free(data);
    atomic_fetch_add(&ep->calls, 1);
}

static const pp_type_t evpin_type = {.name = "evpin", .free = evpin_free,
                                     .save = evput_save, .load = evput_load,
                                     .ctx = &g_evpin};

Test(evict, a_free_after_an_eviction_that_pins_a_swapped_entry_never_waits, .timeout = 60)
{
    const size_t limit = 1u << 20;
    pp_pool_t *pool = ev_pool(limit, NULL, NULL);
    g_evpin.pool = pool;
    atomic_store(&g_evpin.calls, 0);
    atomic_store(&g_evpin.rc, 1);
    const size_t sizes[3] = {500u << 10, 480u << 10, 500u << 10};
    pp_ref_t r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = put_node0(pool, sizes[i], &evpin_type, i + 1);
        if (i == 0)
            atomic_store(&g_evpin.target, r[0]);
        if (i == 1) {
            /* Past 15/16: the swap thread evicts r[0] (slot 0 comes first). */
            cr_assert(WAIT_UNTIL(atomic_load(&g_evpin.calls) == 1, TEST_WAIT_MS),
                      "the first eviction did not happen");
            cr_assert(WAIT_UNTIL(!(test_stat(pool, r[0]).state & PP_STATE_RESIDENT),
                                 TEST_WAIT_MS));
        }
    }
    /* Past 15/16 again: r[1] is evicted, and its free pins r[0]. */
    /* (r[2] may be evicted too, and r[0] loaded again, meanwhile.) */
    cr_assert(WAIT_UNTIL(atomic_load(&g_evpin.calls) >= 2, TEST_WAIT_MS),
              "the free's pp_pin never returned: its load waits for a pass of the swap "
              "thread it runs on");
    assert_rc(atomic_load(&g_evpin.rc), PP_EAGAIN, "a pin from a callback that needs a load");
    ev_finish(pool, r, 3);
}
