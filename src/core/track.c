/*
 * track.c -- pin-leak tracking (PP_TRACK_PINS, or env PINPOOL_TRACK_PINS=1).
 *
 * Each outstanding pin remembers its ref, the thread that took it and the
 * call site (file:line through the pp_pin macros of pinpool.h).  When a
 * thread exits or calls pp_thread_exit, and when the pool is destroyed,
 * outstanding pins are reported with ref and call site -- as PostgreSQL
 * reports buffer refcount leaks at transaction end.
 *
 * This is a debugging mode: it takes a lock, reads the clock and may
 * allocate on every pin and unpin.  Without it, pin and unpin never come
 * here.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "core/core.h"

struct pp__pinrec {
    pp_ref_t ref;
    const pp__thread_t *t;    /* the record of the pinning thread */
    int tid;                  /* its OS thread id at the time */
    const char *file;         /* NULL if pinned through pp_pin() itself */
    int line;
    uint64_t since;           /* when the pin was taken, CLOCK_MONOTONIC ns */
};

int pp__track_pin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref,
                  const char *file, int line)
{
    int rc = 0;
    uint64_t now = pp__wait_now_ns();
    pthread_mutex_lock(&pool->track_lock);
    if (pool->track_n == pool->track_cap) {
        size_t cap = pool->track_cap ? pool->track_cap * 2 : 64;
        pp__pinrec_t *recs = pp__alloc_resize(pool->track_recs, cap * sizeof *recs);
        if (recs == NULL) {
            rc = PP_ENOMEM;
            goto out;
        }
        pool->track_recs = recs;
        pool->track_cap = cap;
    }
    pool->track_recs[pool->track_n++] = (pp__pinrec_t){
        .ref = ref, .t = t, .tid = pp__atomic_load_relaxed(&t->tid),
        .file = file, .line = line, .since = now,
    };
out:
    pthread_mutex_unlock(&pool->track_lock);
    return rc;
}

/* Forgets one pin of ref: the newest taken by this thread, else the newest
 * taken by any thread (pins may be dropped on another thread). */
void pp__track_unpin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref)
{
    pthread_mutex_lock(&pool->track_lock);
    size_t found = SIZE_MAX;
    for (size_t i = pool->track_n; i-- > 0;) {
        if (pool->track_recs[i].ref != ref)
            continue;
        if (found == SIZE_MAX)
            found = i;
        if (pool->track_recs[i].t == t) {
            found = i;
            break;
        }
    }
    if (found != SIZE_MAX)
        pool->track_recs[found] = pool->track_recs[--pool->track_n];
    pthread_mutex_unlock(&pool->track_lock);
}

static void track_line(pp_pool_t *pool, const char *why, const pp__pinrec_t *r)
{
    pp__report(pool,
               "pinpool: %s: ref 0x%016" PRIx64 " (node %u slot %" PRIu32 " gen %" PRIu32
               ") pinned by thread %d at %s:%d",
               why, r->ref, pp_ref_node(r->ref), pp_ref_slot(r->ref), pp_ref_gen(r->ref),
               r->tid, r->file != NULL ? r->file : "(pp_pin without call site)",
               r->line);
}

size_t pp__track_report_thread(pp_pool_t *pool, pp__thread_t *t)
{
    size_t n = 0;
    pthread_mutex_lock(&pool->track_lock);
    for (size_t i = 0; i < pool->track_n; i++) {
        if (pool->track_recs[i].t == t) {
            track_line(pool, "pin still held at thread exit", &pool->track_recs[i]);
            pool->track_recs[i].t = NULL;   /* reported once; the record may be reused */
            n++;
        }
    }
    pthread_mutex_unlock(&pool->track_lock);
    return n;
}

size_t pp__track_report_ref(pp_pool_t *pool, pp_ref_t ref)
{
    size_t n = 0;
    pthread_mutex_lock(&pool->track_lock);
    for (size_t i = 0; i < pool->track_n; i++) {
        if (pool->track_recs[i].ref == ref) {
            track_line(pool, "pin still held at destroy", &pool->track_recs[i]);
            n++;
        }
    }
    pthread_mutex_unlock(&pool->track_lock);
    return n;
}

void pp__track_free(pp_pool_t *pool)
{
    pp__alloc_free(pool->track_recs);
    pool->track_recs = NULL;
    pool->track_n = pool->track_cap = 0;
    pthread_mutex_destroy(&pool->track_lock);
}
