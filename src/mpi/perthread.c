/*
 * perthread.c -- each application thread's hints and counter blocks
 * (perthread.h): their slow paths, taken once per thread (the thread's
 * state) and once per thread and layer (its block), and the sums.
 */
#include "layer.h"

#include <stdlib.h>
#include <string.h>

__thread pp__tls_t *pp__perthread_tls __attribute__((tls_model("initial-exec")));

/* Serials: fetch_add gives each caller its own value, which is all they
 * are for (relaxed: they order nothing). */
static _Atomic uint64_t next_layer_id = 1, next_tid = 1;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_rc = -1;

uint64_t pp__perthread_layer_id(void)
{
    return pp__atomic_add_relaxed(&next_layer_id, 1);
}

/* At thread exit: the thread's state is its own, never a layer's (the
 * blocks it points to stay in their layers' lists until destroy). */
static void tls_free(void *p)
{
    if (pp__perthread_tls == p)
        pp__perthread_tls = NULL;
    free(((pp__tls_t *)p)->wpin);
    free(p);
}

static void tls_key_init(void)
{
    tls_key_rc = pthread_key_create(&tls_key, tls_free);
}

pp__tls_t *pp__perthread_tls_make(void)
{
    if (pp__perthread_tls != NULL)
        return pp__perthread_tls;
    pthread_once(&tls_once, tls_key_init);
    if (tls_key_rc != 0)
        return NULL;
    size_t sz = (sizeof(pp__tls_t) + 63) & ~(size_t)63;
    pp__tls_t *t = aligned_alloc(64, sz);
    if (t == NULL)
        return NULL;
    memset(t, 0, sz);
    if (pthread_setspecific(tls_key, t) != 0) {
        free(t);
        return NULL;
    }
    t->tid = pp__atomic_add_relaxed(&next_tid, 1);
    pp__perthread_tls = t;
    return t;
}

/* The calling thread's block in m, moved to the front of its cache: from
 * the cache, else from m's list (a thread that used more layers than the
 * cache holds), else a new one.  Blocks are matched by the thread's serial,
 * never by pthread_self: a new thread may get a dead one's pthread_t, and
 * its plain load and store on the dead thread's block would not be ordered
 * after that thread's last store.  So a layer keeps one block per thread
 * that ever pinned through it, until destroy. */
pp__thr_t *pp__perthread_thr_slow(pp_mpi_t *m)
{
    pp__tls_t *t = pp__perthread_tls_get();
    if (t == NULL)
        return NULL;
    unsigned i = 0;
    while (i < PP__THR_CACHED && t->layer[i] != m->id)
        i++;
    pp__thr_t *b = NULL;
    if (i < PP__THR_CACHED) {
        b = t->thr[i];
    } else {
        i = PP__THR_CACHED - 1;   /* the oldest goes */
        pthread_mutex_lock(&m->thr_mu);
        for (b = m->thr; b != NULL && b->tid != t->tid; b = b->next)
            ;
        if (b == NULL) {
            b = aligned_alloc(64, sizeof *b);
            if (b != NULL) {
                memset(b, 0, sizeof *b);
                b->tid = t->tid;
                b->next = m->thr;
                m->thr = b;   /* read under thr_mu only */
            }
        }
        pthread_mutex_unlock(&m->thr_mu);
        if (b == NULL)
            return NULL;
    }
    memmove(&t->layer[1], &t->layer[0], i * sizeof t->layer[0]);
    memmove(&t->thr[1], &t->thr[0], i * sizeof t->thr[0]);
    t->layer[0] = m->id;
    t->thr[0] = b;
    return b;
}

/* Relaxed loads: a count made by a thread that happens before the caller
 * (joined, or handed the pin over) is seen -- coherence follows
 * happens-before; a count racing with this call may or may not be. */
void pp__perthread_sum(pp_mpi_t *m, uint64_t *hits, int64_t *pins)
{
    uint64_t h = pp__atomic_load_relaxed(&m->spill_hits);
    int64_t p = pp__atomic_load_relaxed(&m->spill_pins);
    pthread_mutex_lock(&m->thr_mu);
    for (const pp__thr_t *b = m->thr; b != NULL; b = b->next) {
        h += pp__atomic_load_relaxed(&b->hits);
        p += pp__atomic_load_relaxed(&b->pins);
    }
    pthread_mutex_unlock(&m->thr_mu);
    *hits = h;
    *pins = p;
}

void pp__perthread_free(pp_mpi_t *m)
{
    for (pp__thr_t *b = m->thr, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    m->thr = NULL;
}

/* ---- home write pins ------------------------------------------------------ */

uint32_t *pp__perthread_wpin_find(uint64_t layer, uint64_t ref)
{
    pp__tls_t *t = pp__perthread_tls;
    if (t == NULL)
        return NULL;
    for (uint32_t i = 0; i < t->nwpin; i++) {
        pp__wpin_t *w = &t->wpin[i];
        if (w->n != 0 && w->layer == layer && w->ref == ref)
            return &w->n;
    }
    return NULL;
}

int pp__perthread_wpin_add(uint64_t layer, uint64_t ref)
{
    uint32_t *n = pp__perthread_wpin_find(layer, ref);
    if (n != NULL) {
        ++*n;
        return 0;
    }
    pp__tls_t *t = pp__perthread_tls_get();
    if (t == NULL)
        return PP_ENOMEM;
    uint32_t i = 0;
    while (i < t->nwpin && t->wpin[i].n != 0)
        i++;
    if (i == t->nwpin) {
        uint32_t cap = t->nwpin != 0 ? 2 * t->nwpin : 8;
        pp__wpin_t *w = realloc(t->wpin, cap * sizeof *w);
        if (w == NULL)
            return PP_ENOMEM;
        memset(w + t->nwpin, 0, (cap - t->nwpin) * sizeof *w);
        t->wpin = w;
        t->nwpin = cap;
    }
    t->wpin[i] = (pp__wpin_t){ layer, ref, 1 };
    return 0;
}
