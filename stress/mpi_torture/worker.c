/*
 * worker.c -- the MPI torture's workers: random operations on the refs a
 * worker owns, every result checked (mpi_torture.c says what).
 *
 * Ownership model: a worker owns each ref in its list once (one layer
 * owner); only the worker that put an entry writes it, and only on its
 * home, and tokens go only to other ranks, so on its home an entry is
 * read and written by one thread and the layer alone keeps remote copies
 * consistent with the writes.
 */
#include "mpi_torture.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/content.h"   /* splitmix64 */

typedef struct owned {
    pp_gref_t g;
    uint64_t id, size;
    uint32_t known;              /* the newest version this worker saw */
    bool creator;
    bool typed;                  /* a box */
} owned_t;

typedef struct worker {
    rank_t *R;
    int index;
    uint64_t rng;
    owned_t own[MAX_OWNED];
    int n;
    uint64_t puts, pins, writes, sent, imported;
} worker_t;

static uint64_t rnd(worker_t *w) { return splitmix64(&w->rng); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void drop_at(worker_t *w, int i)
{
    w->own[i] = w->own[--w->n];
}

/* Whether this worker may read o: not an entry of this rank that another
 * worker writes (a token came back home to it), since on its home the
 * layer leaves local readers and writers to the program. */
static bool readable(const worker_t *w, const owned_t *o)
{
    return o->creator || o->g.rank != (uint32_t)w->R->rank;
}

/* Pins o (version o->known at least), checks every byte, unpins. */
static void pin_check(worker_t *w, owned_t *o, unsigned flags)
{
    rank_t *R = w->R;
    if (!readable(w, o))
        return;
    pp_gref_t g = o->g;
    g.version = o->known;
    void *d = NULL;
    uint32_t got = 0;
    int rc = pp_mpi_pin(R->m, g, flags, &d, &got);
    if (rc == PP_EAGAIN && (flags & PP_PIN_NOWAIT))
        rc = pp_mpi_pin(R->m, g, 0, &d, &got);
    rc = faults_pin_again(R, rc, g, flags, &d, &got);
    if (rc != 0) {
        failf(R->rank, "pin of owned ref %#llx (home %u, id %llu, v%u): %s",
              (unsigned long long)g.ref, g.rank, (unsigned long long)o->id, g.version,
              pp_err_name(rc));
        return;
    }
    const char *bad = got < o->known ? "an older version than asked"
                                     : content_check(ent_bytes(d, o->typed), o->size, g.rank,
                                                     o->id, got);
    if (bad != NULL)
        failf(R->rank, "pin of ref %#llx (home %u, id %llu, asked v%u, got v%u): %s",
              (unsigned long long)g.ref, g.rank, (unsigned long long)o->id, g.version, got, bad);
    o->known = got;
    rc = pp_mpi_unpin(R->m, g, 0, d);
    if (rc != 0)
        failf(R->rank, "unpin: %s", pp_err_name(rc));
    w->pins++;
}

static void op_put(worker_t *w)
{
    rank_t *R = w->R;
    uint64_t id = atomic_fetch_add(&R->put_ids, 1);
    if (id >= MAX_IDS)
        return;
    size_t size = sizeof(ent_hdr_t) + 8 * (1 + rnd(w) % (rnd(w) % 4 == 0 ? 16384 : 512));
    bool typed = rnd(w) % 4 == 0;
    void *buf = malloc(size);
    content_fill(buf, size, (uint32_t)R->rank, id, 1);
    void *data = buf;
    if (typed) {
        box_t *b = malloc(sizeof *b);
        *b = (box_t){ BOX_MAGIC, (uint32_t)R->rank, 0, id, size, buf };
        data = b;
    }
    pp_gref_t g;
    /* With swap, flat entries have no type (a type with its own free and
     * no save/load is never evicted); boxes always have theirs.  Frees are
     * then checked in sum (rank_final_checks): an eviction frees too. */
    const pp_type_t *type = typed ? &R->box_type : g_opt.swap ? NULL : &R->type;
    int rc = pp_mpi_put(R->m, data, size, type, 0, &g);
    if (rc != 0) {
        failf(R->rank, "put: %s", pp_err_name(rc));
        free(buf);
        if (typed)
            free(data);
        atomic_fetch_add(&R->frees[id], 1);   /* never in the pool: counts as its free */
        return;
    }
    w->own[w->n++] = (owned_t){ g, id, size, 1, true, typed };
    w->puts++;
}

static void op_write(worker_t *w, owned_t *o)
{
    rank_t *R = w->R;
    void *d;
    uint32_t got;
    int rc = pp_mpi_pin(R->m, o->g, PP_PIN_WRITE, &d, &got);
    rc = faults_pin_again(R, rc, o->g, PP_PIN_WRITE, &d, &got);
    if (rc != 0) {
        failf(R->rank, "write pin of id %llu: %s", (unsigned long long)o->id, pp_err_name(rc));
        return;
    }
    void *bytes = (void *)(uintptr_t)ent_bytes(d, o->typed);
    const char *bad = content_check(bytes, o->size, o->g.rank, o->id, got);
    if (bad != NULL)
        failf(R->rank, "write pin of id %llu (v%u): %s", (unsigned long long)o->id, got, bad);
    content_fill(bytes, o->size, o->g.rank, o->id, got + 1);
    rc = pp_mpi_unpin(R->m, o->g, PP_PIN_WRITE, d);
    if (rc != 0)
        failf(R->rank, "write unpin: %s", pp_err_name(rc));
    o->known = got + 1;
    w->writes++;
}

static void op_send(worker_t *w, int i)
{
    rank_t *R = w->R;
    if (R->size < 2)
        return;
    owned_t *o = &w->own[i];
    int dst = (int)(rnd(w) % (uint64_t)(R->size - 1));
    dst += dst >= R->rank;
    if (!chan_room(R->ch, dst))
        return;   /* dst's imports (a claim at the home each) are behind */
    pp_mpi_token_t t;
    int rc = pp_mpi_export(R->m, o->g, &t);
    if (rc != 0) {
        failf(R->rank, "export of id %llu: %s", (unsigned long long)o->id, pp_err_name(rc));
        return;
    }
    tmsg_t m = { TMSG_TOKEN, o->known, o->typed, 0, o->size, o->id, t };
    if (rnd(w) % 8 == 0) {
        /* a token that is never imported: dropped, its weight goes home */
        rc = pp_mpi_token_drop(R->m, &t);
        if (rc != 0)
            failf(R->rank, "token drop: %s", pp_err_name(rc));
        return;
    }
    if (chan_send(R->ch, R->rank, dst, &m) != 0)
        failf(R->rank, "the program's own send failed");
    w->sent++;
}

/* Imports what arrived (nothing if the list is full: it waits there). */
static void op_receive(worker_t *w)
{
    rank_t *R = w->R;
    tmsg_t m;
    int src;
    while (w->n < MAX_OWNED && chan_recv(R->ch, R->rank, &m, &src) == 1) {
        if (m.kind == TMSG_DONE) {
            atomic_fetch_add(&R->dones, 1);   /* rank src has stopped: counted for the end */
            continue;
        }
        pp_gref_t g;
        int rc = pp_mpi_import(R->m, &m.token, &g);
        if (rc != 0) {
            failf(R->rank, "import from rank %d: %s", src, pp_err_name(rc));
            continue;
        }
        if (rnd(w) % 16 == 0 && pp_mpi_import(R->m, &m.token, &g) != PP_EINVAL)
            failf(R->rank, "a token imported twice was not refused");
        owned_t o = { g, m.id, m.size, m.version, false, m.typed != 0 };
        /* the token's version, or older: a pin still gets at least it */
        w->own[w->n++] = o;
        w->imported++;
    }
}

static void op_pin_many(worker_t *w)
{
    rank_t *R = w->R;
    pp_gref_t g[3];
    void *d[3];
    uint32_t got[3];
    int want = (int)(1 + rnd(w) % 3), idx[3], k = 0;
    for (int j = 0; j < want; j++) {
        int i = (int)(rnd(w) % (uint64_t)w->n);
        if (!readable(w, &w->own[i]))
            continue;
        idx[k] = i;
        g[k] = w->own[i].g;
        g[k].version = w->own[i].known;
        k++;
    }
    if (k == 0)
        return;
    int rc = pp_mpi_pin_many(R->m, g, (size_t)k, 0, d, got);
    rc = faults_pin_many_again(R, rc, g, (size_t)k, 0, d, got);
    if (rc != 0) {
        failf(R->rank, "pin_many of %d owned refs: %s", k, pp_err_name(rc));
        return;
    }
    for (int j = 0; j < k; j++) {
        owned_t *o = &w->own[idx[j]];
        const char *bad =
            content_check(ent_bytes(d[j], o->typed), o->size, g[j].rank, o->id, got[j]);
        if (bad != NULL || got[j] < g[j].version)
            failf(R->rank, "pin_many id %llu v%u: %s", (unsigned long long)o->id, got[j],
                  bad ? bad : "older than asked");
    }
    for (int j = k; j-- > 0;)
        if (pp_mpi_unpin(R->m, g[j], 0, d[j]) != 0)
            failf(R->rank, "unpin after pin_many");
    w->pins += (uint64_t)k;
}

static void op_stale(worker_t *w)
{
    rank_t *R = w->R;
    pp_gref_t g = { (pp_ref_t)(rnd(w) | (1ull << 62)), (uint32_t)(rnd(w) % (uint64_t)R->size), 0 };
    void *d;
    int rc = pp_mpi_pin(R->m, g, 0, &d, NULL);
    if (rc != PP_ESTALE)
        failf(R->rank, "pin of a ref no rank has (home %u): %s, not PP_ESTALE", g.rank,
              pp_err_name(rc));
    g.rank = (uint32_t)R->size + 3;
    if (pp_mpi_pin(R->m, g, 0, &d, NULL) != PP_EINVAL)
        failf(R->rank, "pin of a ref with a garbage rank was not PP_EINVAL");
}

/* ---- --home-ops: write batches and deaths under pins --------------------- */

/* Whether this worker writes o: only the worker that put an entry does,
 * on its home. */
static bool writable(const worker_t *w, const owned_t *o)
{
    return o->creator && o->g.rank == (uint32_t)w->R->rank;
}

/* Whether the home has published version v of g (only its writer, this
 * worker, publishes: nothing races with the answer).  A home pin of v
 * with PP_PIN_NOWAIT, dropped at once. */
static bool home_published(worker_t *w, pp_gref_t g, uint32_t v)
{
    g.version = v;
    void *d;
    int rc = pp_mpi_pin(w->R->m, g, PP_PIN_NOWAIT, &d, NULL);
    if (rc == 0 && pp_mpi_unpin(w->R->m, g, 0, d) != 0)
        failf(w->R->rank, "unpin of a probe pin failed");
    else if (rc != 0 && rc != PP_EAGAIN)
        failf(w->R->rank, "probe pin of version %u: %s", v, pp_err_name(rc));
    return rc == 0;
}

/* Writes up to 3 of this worker's home entries in one pp_mpi_pin_many
 * (PP_PIN_WRITE | PP_PIN_NOWAIT).  One batch in two has a ref that must
 * fail put in it, a dead ref (PP_ESTALE) or a remote ref (PP_ENOTSUP), so
 * the write pins before it are rolled back; any batch may also fail with
 * PP_EAGAIN (a copy of one of its entries is being sent, or, with swap,
 * one is out; with --load-faults, counted as busy too: a load that failed).  A failed batch must publish no version: the next version
 * of each entry is looked for at once, and the content checks of every
 * later pin would catch a version whose bytes nobody wrote. */
static void op_write_many(worker_t *w)
{
    rank_t *R = w->R;
    pp_gref_t g[4];
    void *d[4];
    uint32_t got[4];
    int idx[4], k = 0;
    int want = (int)(1 + rnd(w) % 3);
    for (int j = 0; j < want; j++) {
        int i = (int)(rnd(w) % (uint64_t)w->n);
        bool dup = false;
        for (int q = 0; q < k; q++)
            dup |= idx[q] == i;
        if (dup || !writable(w, &w->own[i]))
            continue;
        idx[k] = i;
        g[k] = w->own[i].g;
        g[k].version = w->own[i].known;
        k++;
    }
    int bad = -1;                /* the position of the ref that must fail */
    int cause = (int)(rnd(w) % 4);   /* 0: a dead ref, 1: a remote ref, else none */
    pp_gref_t wrong = { 0, 0, 0 };
    if (cause == 0) {
        wrong = (pp_gref_t){ (pp_ref_t)(rnd(w) | (1ull << 62)), (uint32_t)R->rank, 0 };
    } else if (cause == 1) {
        int i = (int)(rnd(w) % (uint64_t)w->n);
        if (w->own[i].g.rank != (uint32_t)R->rank)
            wrong = w->own[i].g;
    }
    if (wrong.ref != 0) {
        bad = (int)(rnd(w) % (uint64_t)(k + 1));
        for (int q = k; q > bad; q--) {
            g[q] = g[q - 1];
            idx[q] = idx[q - 1];
        }
        g[bad] = wrong;
        idx[bad] = -1;
    }
    int n = k + (bad >= 0);
    if (k == 0)
        return;
    atomic_fetch_add(&R->hx.batches, 1);
    int rc = pp_mpi_pin_many(R->m, g, (size_t)n, PP_PIN_WRITE | PP_PIN_NOWAIT, d, got);
    if (rc != 0) {
        int expect = cause == 0 ? PP_ESTALE : PP_ENOTSUP;
        if (rc == PP_EAGAIN || faults_load_failed(R, rc, false)) {
            atomic_fetch_add(&R->hx.fail_busy, 1);
        } else if (bad >= 0 && rc == expect) {
            atomic_fetch_add(cause == 0 ? &R->hx.fail_stale : &R->hx.fail_remote, 1);
            atomic_fetch_add(&R->hx.rolled_back, (uint64_t)bad);
        } else {
            failf(R->rank, "a write batch of %d refs: %s", n, pp_err_name(rc));
            return;
        }
        for (int j = 0; j < n; j++) {
            if (idx[j] < 0)
                continue;
            owned_t *o = &w->own[idx[j]];
            if (home_published(w, o->g, o->known + 1))
                failf(R->rank, "a write batch that failed (%s) published version %u of id "
                               "%llu, which nobody wrote",
                      pp_err_name(rc), o->known + 1, (unsigned long long)o->id);
        }
        return;
    }
    if (bad >= 0)
        failf(R->rank, "a write batch with a %s ref in it succeeded",
              cause == 0 ? "dead" : "remote");
    for (int j = 0; j < n; j++) {
        owned_t *o = &w->own[idx[j]];
        void *bytes = (void *)(uintptr_t)ent_bytes(d[j], o->typed);
        const char *why = got[j] != o->known ? "not the version its only writer made last"
                                             : content_check(bytes, o->size, o->g.rank, o->id,
                                                             got[j]);
        if (why != NULL)
            failf(R->rank, "write batch, id %llu (knew v%u, got v%u): %s",
                  (unsigned long long)o->id, o->known, got[j], why);
        content_fill(bytes, o->size, o->g.rank, o->id, got[j] + 1);
    }
    for (int j = n; j-- > 0;) {
        owned_t *o = &w->own[idx[j]];
        if (pp_mpi_unpin(R->m, g[j], PP_PIN_WRITE, d[j]) != 0)
            failf(R->rank, "write unpin after a write batch");
        o->known = got[j] + 1;
    }
    atomic_fetch_add(&R->hx.written, (uint64_t)n);
    w->writes += (uint64_t)n;
}

/* Releases this worker's owner of own[i] while it holds a pin of it (a
 * write pin, for an entry it writes): the entry may die under the pin
 * (its home record with it), and the pin must still read (and write) its
 * bytes and drop without error; an entry dead at home takes no new pin. */
static void op_release_pinned(worker_t *w, int i)
{
    rank_t *R = w->R;
    owned_t o = w->own[i];
    if (!readable(w, &o))
        return;
    bool write = writable(w, &o) && rnd(w) % 2 == 0;
    unsigned flags = write ? PP_PIN_WRITE : 0;
    pp_gref_t g = o.g;
    g.version = o.known;
    void *d;
    uint32_t got;
    int rc = pp_mpi_pin(R->m, g, flags, &d, &got);
    rc = faults_pin_again(R, rc, g, flags, &d, &got);
    if (rc != 0) {
        failf(R->rank, "%s pin of owned id %llu: %s", write ? "write" : "read",
              (unsigned long long)o.id, pp_err_name(rc));
        return;
    }
    rc = pp_mpi_release(R->m, o.g);
    if (rc != 0)
        failf(R->rank, "release under a pin: %s", pp_err_name(rc));
    drop_at(w, i);
    if (o.g.rank == (uint32_t)R->rank) {
        /* at home: a pin now fails only if the record died */
        void *d2;
        pp_gref_t g0 = o.g;
        g0.version = 0;
        int prc = pp_mpi_pin(R->m, g0, PP_PIN_NOWAIT, &d2, NULL);
        if (prc == PP_ESTALE)
            atomic_fetch_add(&R->hx.died_pinned, 1);
        else if (prc == 0)
            (void)pp_mpi_unpin(R->m, g0, 0, d2);
        else if (prc != PP_EAGAIN && !faults_load_failed(R, prc, false))
            failf(R->rank, "pin of a released home ref: %s", pp_err_name(prc));
    }
    void *bytes = (void *)(uintptr_t)ent_bytes(d, o.typed);
    const char *why = got < o.known ? "an older version than asked"
                                    : content_check(bytes, o.size, o.g.rank, o.id, got);
    if (why != NULL)
        failf(R->rank, "id %llu v%u, pinned while its owner went: %s",
              (unsigned long long)o.id, got, why);
    if (write)
        content_fill(bytes, o.size, o.g.rank, o.id, got + 1);
    rc = pp_mpi_unpin(R->m, g, flags, d);
    if (rc != 0)
        failf(R->rank, "%s unpin after the owner went: %s", write ? "write" : "read",
              pp_err_name(rc));
    atomic_fetch_add(write ? &R->hx.write_pinned_release : &R->hx.pinned_release, 1);
}

static void one_op(worker_t *w)
{
    rank_t *R = w->R;
    op_receive(w);
    unsigned r = (unsigned)(rnd(w) % 100);
    if (w->n == 0 || (r < 10 && w->n < MAX_OWNED)) {
        op_put(w);
        return;
    }
    int i = (int)(rnd(w) % (uint64_t)w->n);
    owned_t *o = &w->own[i];
    if (r < 40) {
        pin_check(w, o, rnd(w) % 4 == 0 ? PP_PIN_NOWAIT : 0);
    } else if (r < 50) {
        if (o->creator && o->g.rank == (uint32_t)R->rank)
            op_write(w, o);
        else
            pin_check(w, o, 0);
    } else if (r < 65) {
        op_send(w, i);
    } else if (r < 72) {
        op_pin_many(w);
    } else if (r < 76) {
        pp_gref_t g = o->g;
        g.version = o->known;
        int rc = pp_mpi_prefetch(R->m, g);
        if (rc != 0)
            failf(R->rank, "prefetch: %s", pp_err_name(rc));
    } else if (r < 80) {
        if (pp_mpi_retain(R->m, o->g) != 0 || pp_mpi_release(R->m, o->g) != 0)
            failf(R->rank, "retain and release of an owned ref failed");
    } else if (r < 81) {
        op_stale(w);
    } else if (r < 95 || w->n == MAX_OWNED) {
        int rc = pp_mpi_release(R->m, o->g);
        if (rc != 0)
            failf(R->rank, "release of an owned ref: %s", pp_err_name(rc));
        drop_at(w, i);
    } else if (g_opt.home_ops && r < 98) {
        op_write_many(w);
    } else if (g_opt.home_ops) {
        op_release_pinned(w, i);
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    double end = now_s() + g_opt.seconds;
    while (now_s() < end && atomic_load(&g_failed) == 0)
        for (int k = 0; k < 16; k++)
            one_op(w);
    for (int i = 0; i < w->n; i++)
        if (pp_mpi_release(w->R->m, w->own[i].g) != 0)
            failf(w->R->rank, "final release failed");
    w->n = 0;
    return NULL;
}

void rank_run(rank_t *R)
{
    worker_t *w = calloc((size_t)g_opt.threads, sizeof *w);
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < g_opt.threads; t++) {
        w[t].R = R;
        w[t].index = t;
        w[t].rng = g_opt.seed * 0x100000001b3ull + (uint64_t)R->rank * 131 + (uint64_t)t + 1;
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    }
    for (int t = 0; t < g_opt.threads; t++) {
        pthread_join(th[t], NULL);
        R->n.puts += w[t].puts;
        R->n.pins += w[t].pins;
        R->n.writes += w[t].writes;
        R->n.sent += w[t].sent;
        R->n.imported += w[t].imported;
    }
    /* The end of the program's own messages: a DONE to every rank, then
     * every token still arriving is imported and released (it carries
     * weight that must go home) until each rank's DONE is in.  Per sender
     * the channel keeps order, so a DONE comes after its tokens. */
    tmsg_t done = { .kind = TMSG_DONE };
    for (int r = 0; r < R->size; r++)
        if (r != R->rank && chan_send(R->ch, R->rank, r, &done) != 0)
            failf(R->rank, "the program's own send failed");
    while (atomic_load(&R->dones) < R->size - 1) {
        tmsg_t m;
        int src;
        if (chan_recv(R->ch, R->rank, &m, &src) != 1) {
            sched_yield();
            continue;
        }
        if (m.kind == TMSG_DONE) {
            atomic_fetch_add(&R->dones, 1);
            continue;
        }
        pp_gref_t g;
        int rc = pp_mpi_import(R->m, &m.token, &g);
        if (rc != 0 || pp_mpi_release(R->m, g) != 0)
            failf(R->rank, "a late token from rank %d: %s", src, pp_err_name(rc));
        R->n.imported++;
    }
    free(w);
}
