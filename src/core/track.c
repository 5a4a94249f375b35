/*
 * track.c -- pin-leak tracking (PP_TRACK_PINS, or env PINPOOL_TRACK_PINS=1).
 *
 * Each outstanding pin remembers its ref, the thread that took it and the
 * call site (file:line through the pp_pin macros of pinpool.h).  When a
 * thread exits or calls pp_thread_exit, and when the pool is destroyed,
 * outstanding pins are reported with ref and call site -- as PostgreSQL
 * reports buffer refcount leaks at transaction end.
 *
 * pp_pins_dump lists the outstanding pins with their age, and the entries
 * held from eviction the longest (pp__track_dump).
 *
 * This is a debugging mode: it takes a lock, reads the clock and may
 * allocate on every pin and unpin.  Without it, pin and unpin never come
 * here.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- pp_pins_dump --------------------------------------------------------- */

/* The ref's fields as each dump line prints them. */
#define REF_FMT "ref 0x%016" PRIx64 " node %u slot %" PRIu32 " gen %" PRIu32
#define REF_ARGS(r) (r), pp_ref_node(r), pp_ref_slot(r), pp_ref_gen(r)

/* Entries listed as held the longest; the rest are only counted. */
#define HELD_LISTED 10

/* One pinned entry: its pins and when the oldest of them was taken. */
typedef struct pp__held {
    pp_ref_t ref;
    size_t pins;
    uint64_t since;
} pp__held_t;
/* The held part of pp__track_dump's block follows the records, aligned. */
_Static_assert(sizeof(pp__pinrec_t) % _Alignof(pp__held_t) == 0, "held after records");

static int cmp_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* Oldest pin first; then by ref and thread, so the order is stable. */
static int rec_by_age(const void *a, const void *b)
{
    const pp__pinrec_t *x = a, *y = b;
    if (x->since != y->since)
        return cmp_u64(x->since, y->since);
    if (x->ref != y->ref)
        return cmp_u64(x->ref, y->ref);
    return (x->tid > y->tid) - (x->tid < y->tid);
}

/* The pins of one ref next to each other. */
static int rec_by_ref(const void *a, const void *b)
{
    const pp__pinrec_t *x = a, *y = b;
    return x->ref != y->ref ? cmp_u64(x->ref, y->ref) : cmp_u64(x->since, y->since);
}

/* The entry whose oldest pin is oldest first. */
static int held_by_age(const void *a, const void *b)
{
    const pp__held_t *x = a, *y = b;
    return x->since != y->since ? cmp_u64(x->since, y->since) : cmp_u64(x->ref, y->ref);
}

/* Groups the n records by ref into held, oldest first; returns how many
 * entries there are.  Reorders recs. */
static size_t group_by_ref(pp__pinrec_t *recs, size_t n, pp__held_t *held)
{
    qsort(recs, n, sizeof *recs, rec_by_ref);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && held[m - 1].ref == recs[i].ref) {
            held[m - 1].pins++;
            continue;
        }
        /* The first of its ref is its oldest: the sort put it there. */
        held[m++] = (pp__held_t){.ref = recs[i].ref, .pins = 1, .since = recs[i].since};
    }
    qsort(held, m, sizeof *held, held_by_age);
    return m;
}

/* An age in ms with three decimals, e.g. "12.345". */
static void age_text(char buf[32], uint64_t now, uint64_t since)
{
    uint64_t ns = now > since ? now - since : 0;
    snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, ns / 1000000u, ns / 1000u % 1000u);
}

static void dump_write(FILE *out, pp__pinrec_t *recs, size_t n, pp__held_t *held,
                       size_t m, uint64_t now)
{
    char age[32];
    fprintf(out, "pinpool: %zu pins on %zu entries\n", n, m);
    for (size_t i = 0; i < n; i++) {
        const pp__pinrec_t *r = &recs[i];
        age_text(age, now, r->since);
        if (r->file != NULL)
            fprintf(out, "pin " REF_FMT " tid %d age %s ms at %s:%d\n",
                    REF_ARGS(r->ref), r->tid, age, r->file, r->line);
        else
            fprintf(out, "pin " REF_FMT " tid %d age %s ms at (pp_pin without call site)\n",
                    REF_ARGS(r->ref), r->tid, age);
    }
    if (m == 0)
        return;
    fprintf(out, "longest held, oldest pin first:\n");
    for (size_t i = 0; i < m && i < HELD_LISTED; i++) {
        age_text(age, now, held[i].since);
        fprintf(out, "held " REF_FMT " pins %zu age %s ms\n", REF_ARGS(held[i].ref),
                held[i].pins, age);
    }
    if (m > HELD_LISTED)
        fprintf(out, "and %zu more entries\n", m - HELD_LISTED);
}

/* Copies the records under the lock, then sorts and writes them without
 * it: out may be a stream of the user's own (fopencookie). */
int pp__track_dump(pp_pool_t *pool, FILE *out)
{
    pp__pinrec_t *recs = NULL;
    pthread_mutex_lock(&pool->track_lock);
    size_t n = pool->track_n;
    /* One block: the records, then room for one pp__held_t each. */
    if (n > 0)
        recs = pp__alloc_bytes(n * (sizeof *recs + sizeof(pp__held_t)));
    if (recs != NULL)
        memcpy(recs, pool->track_recs, n * sizeof *recs);
    pthread_mutex_unlock(&pool->track_lock);
    if (n > 0 && recs == NULL)
        return PP_ENOMEM;
    /* Read after the copy: no pin in it is younger than now. */
    uint64_t now = pp__wait_now_ns();
    pp__held_t *held = NULL;
    size_t m = 0;
    if (n > 0) {
        held = (pp__held_t *)(void *)(recs + n);
        m = group_by_ref(recs, n, held);
        qsort(recs, n, sizeof *recs, rec_by_age);
    }
    dump_write(out, recs, n, held, m, now);
    pp__alloc_free(recs);
    if (fflush(out) != 0 || ferror(out))
        return PP_EIO;
    return 0;
}

void pp__track_free(pp_pool_t *pool)
{
    pp__alloc_free(pool->track_recs);
    pool->track_recs = NULL;
    pool->track_n = pool->track_cap = 0;
    pthread_mutex_destroy(&pool->track_lock);
}
