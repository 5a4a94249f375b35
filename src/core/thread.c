/*
 * thread.c -- thread records and the registry of live pools.
 *
 * Every thread that calls into a pool gets a record (pp__thread_t) with a
 * ck_epoch record inside (epoch.c), registered on its first call and
 * released at thread exit or pp_thread_exit.  The thread finds its record
 * through a thread-local cache keyed by the pool's serial number (a
 * destroyed pool's serial is never reused, so a stale cache entry can never
 * match).  A global registry of live pools lets a thread's exit handler
 * tell whether the pools it registered with still exist.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

__thread pp__inline_thread_t *pp_inline_thread_last
    __attribute__((tls_model("initial-exec"), visibility("default")));
static __thread struct pp__tls_node *tls_head __attribute__((tls_model("initial-exec")));
__thread unsigned pp__thread_cb_depth __attribute__((tls_model("initial-exec")));

/* Global registry of live pools: lets a thread's exit handler tell whether
 * the pools it registered with still exist.  Lock order: live_lock,
 * then a pool's reg_lock. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pp_pool_t *live_head;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void thread_exit_handler(void *arg);

static void exit_key_init(void)
{
    PP__CHECK(pthread_key_create(&exit_key, thread_exit_handler) == 0);
}

void pp__thread_registry_add(pp_pool_t *pool)
{
    pthread_once(&exit_once, exit_key_init);
    pthread_mutex_lock(&live_lock);
    pool->next_live = live_head;
    live_head = pool;
    pthread_mutex_unlock(&live_lock);
}

void pp__thread_registry_remove(pp_pool_t *pool)
{
    pthread_mutex_lock(&live_lock);
    for (pp_pool_t **p = &live_head; *p != NULL; p = &(*p)->next_live) {
        if (*p == pool) {
            *p = pool->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

/* A new record (caller holds reg_lock or is single-threaded). */
static pp__thread_t *thread_alloc(pp_pool_t *pool)
{
    /* The record and its counters are written by their thread on every
     * call: each on lines of its own, two lines at a time (the adjacent-line
     * prefetcher pairs them), so no two threads' counters share one. */
    pp__thread_t *t = pp__alloc_aligned(PP__PAD, pp__pad(sizeof *t));
    if (t == NULL)
        return NULL;
    t->count = pp__alloc_aligned(PP__PAD, pp__pad(pool->nnodes * sizeof *t->count));
    t->mag = pp__alloc_zeroed(pool->nnodes, sizeof *t->mag);
    t->rq = pp__alloc_aligned(PP__PAD, pool->nnodes * sizeof *t->rq);
    if (t->count == NULL || t->mag == NULL || t->rq == NULL) {
        pp__alloc_free(t->rq);
        pp__alloc_free(t->count);
        pp__alloc_free(t->mag);
        pp__alloc_free(t);
        return NULL;
    }
    t->pool = pool;
    for (unsigned n = 0; n < pool->nnodes; n++)
        ck_stack_init(&t->rq[n].s);
    t->next = pp__atomic_load_relaxed(&pool->threads);
    /* release: the reclaimers walk the list without the lock: the record
     * (its queues) is initialised before they can see it. */
    pp__atomic_store_release(&pool->threads, t);
    ck_epoch_register(&pool->epoch, &t->rec, t);
    return t;
}

pp__thread_t *pp__thread_new_reclaimer(pp_pool_t *pool)
{
    pthread_mutex_lock(&pool->reg_lock);
    pp__thread_t *t = thread_alloc(pool);
    if (t != NULL) {
        t->is_reclaimer = true;
        t->in_use = true;
    }
    pthread_mutex_unlock(&pool->reg_lock);
    return t;
}

/* Registers the calling thread with pool. */
static pp__thread_t *thread_register(pp_pool_t *pool)
{
    struct pp__tls_node *tn = pp__alloc_bytes(sizeof *tn);
    if (tn == NULL)
        return NULL;

    pthread_mutex_lock(&pool->reg_lock);
    pp__thread_t *t = NULL;
    /* ck_epoch_recycle hands back a record some exited thread unregistered;
     * records of reclaimers are never unregistered, so never recycled. */
    ck_epoch_record_t *rec = ck_epoch_recycle(&pool->epoch, NULL);
    if (rec != NULL) {
        t = (pp__thread_t *)(void *)rec;
        PP__CHECK(t->pool == pool && !t->in_use && !t->is_reclaimer);
    } else {
        t = thread_alloc(pool);
    }
    if (t != NULL) {
        t->in_use = true;
        t->qsbr = false;
        t->in_section = false;
        /* Synthetic topologies: spread threads over the nodes. */
        t->node = pp__atomic_add_relaxed(&pool->next_rr, 1u) % pool->nnodes;
        /* Hot slots: threads take shards in turn (hot.c). */
        t->shard = pp__atomic_add_relaxed(&pool->next_shard, 1u);
        t->hc.e = NULL;                  /* its old shard's, if recycled */
        pp__atomic_store_relaxed(&t->tid, (int)gettid());
    }
    pthread_mutex_unlock(&pool->reg_lock);
    if (t == NULL) {
        pp__alloc_free(tn);
        return NULL;
    }

    tn->f.serial = pool->fast.serial;
    tn->f.thread = t;
    tn->f.count = (uint64_t *)(void *)t->count;
    tn->f.hot = &t->hc;
    tn->next = tls_head;
    tls_head = tn;
    pp_inline_thread_last = &tn->f;
    pthread_once(&exit_once, exit_key_init);
    pthread_setspecific(exit_key, tn);   /* non-NULL: the exit handler runs */
    return t;
}

pp__thread_t *pp__thread_get_slow(pp_pool_t *pool)
{
    for (struct pp__tls_node *n = tls_head; n != NULL; n = n->next) {
        if (n->f.serial == pool->fast.serial) {
            pp_inline_thread_last = &n->f;
            return (pp__thread_t *)n->f.thread;
        }
    }
    return thread_register(pool);
}

/* Releases a thread's record: ends its section, reports its leaked pins,
 * returns its cached slots and unregisters its epoch record.  Returns the
 * number of leaked pins reported. */
static size_t thread_release(pp_pool_t *pool, pp__thread_t *t)
{
    pp__epoch_end(t);
    size_t leaked = pool->fast.full ? pp__track_report_thread(pool, t) : 0;
    pp__table_magazine_return(pool, t);
    pthread_mutex_lock(&pool->reg_lock);
    t->in_use = false;
    t->qsbr = false;
    ck_epoch_unregister(&t->rec);
    pthread_mutex_unlock(&pool->reg_lock);
    return leaked;
}

static void tls_unlink(struct pp__tls_node *tn)
{
    for (struct pp__tls_node **p = &tls_head; *p != NULL; p = &(*p)->next) {
        if (*p == tn) {
            *p = tn->next;
            break;
        }
    }
    if (pp_inline_thread_last == &tn->f)
        pp_inline_thread_last = tls_head != NULL ? &tls_head->f : NULL;
    pp__alloc_free(tn);
}

int pp_thread_exit(pp_pool_t *pool)
{
    if (pool == NULL)
        return PP_EINVAL;
    for (struct pp__tls_node *tn = tls_head; tn != NULL; tn = tn->next) {
        if (tn->f.serial == pool->fast.serial) {
            size_t leaked = thread_release(pool, (pp__thread_t *)tn->f.thread);
            tls_unlink(tn);
            pthread_setspecific(exit_key, tls_head);
            return leaked ? PP_EBUSY : 0;
        }
    }
    return 0;   /* not registered: nothing to release */
}

/* Drops the calling thread's cache entry for a pool being destroyed (the
 * key exists: pp__thread_registry_add made it when the pool was created). */
void pp__thread_tls_forget(pp_pool_t *pool)
{
    for (struct pp__tls_node *tn = tls_head; tn != NULL; tn = tn->next) {
        if (tn->f.serial == pool->fast.serial) {
            pp__epoch_end((pp__thread_t *)tn->f.thread);
            tls_unlink(tn);
            pthread_setspecific(exit_key, tls_head);
            return;
        }
    }
}

static void thread_exit_handler(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&live_lock);
    while (tls_head != NULL) {
        struct pp__tls_node *tn = tls_head;
        for (pp_pool_t *p = live_head; p != NULL; p = p->next_live) {
            if (p->fast.serial == tn->f.serial) {
                (void)thread_release(p, (pp__thread_t *)tn->f.thread);
                break;
            }
        }
        tls_head = tn->next;
        pp__alloc_free(tn);
    }
    pp_inline_thread_last = NULL;
    pthread_mutex_unlock(&live_lock);
}

unsigned pp__thread_in_use(pp_pool_t *pool)
{
    unsigned n = 0;
    for (pp__thread_t *t = pp__atomic_load_relaxed(&pool->threads); t != NULL; t = t->next)
        n += t->in_use && !t->is_reclaimer;   /* under reg_lock */
    return n;
}

void pp__thread_free_all(pp_pool_t *pool)
{
    pp__thread_t *t = pp__atomic_load_relaxed(&pool->threads);
    while (t != NULL) {
        pp__thread_t *next = t->next;
        pp__alloc_free(t->rq);
        pp__alloc_free(t->count);
        pp__alloc_free(t->mag);
        pp__alloc_free(t);
        t = next;
    }
    pp__atomic_store_relaxed(&pool->threads, NULL);
    pthread_mutex_destroy(&pool->reg_lock);
}

void pp_quiescent(pp_pool_t *pool)
{
    /* In a callback: no effect.  A reclaimer's callback in QSBR mode would
     * hold back the grace period that reclaimer waits for. */
    if (pool == NULL || pp__in_callback())
        return;
    pp__thread_t *t = pp__thread_get(pool);
    if (t == NULL)
        return;   /* could not register: it holds no section either */
    t->qsbr = true;
    pp__epoch_end(t);
}
