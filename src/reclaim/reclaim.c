/*
 * reclaim.c -- each node's reclaimer thread: the consumer side of the
 * reclaim queues (retire.c pushes onto them).
 *
 * The reclaimer takes each thread's queue for its node with one batch pop
 * (reclaim_collect), hands each round's lists to ck_epoch_call as one
 * batch (pp__rbatch_t) on its own epoch record, and polls the epoch.
 * Callbacks whose grace period has passed are collected (not run inside
 * libck), then each entry is freed -- the type's free function, exactly
 * once -- its bytes and lag accounted,
 * and its slot recycled (or retired when its generation is exhausted).
 * While callbacks are pending the reclaimer waits on the event count with
 * a short deadline that backs off from 20 µs to 1 ms; with nothing pending
 * it sleeps until woken.
 *
 * At destroy (pp__reclaim_stop) each reclaimer drains its queue, dispatches
 * what is pending without waiting for readers (destroy's contract: no other
 * call runs), then runs the rounds destroy asks for: in each, it frees what
 * is queued and kills every entry of its node still owned (leaked owners),
 * freeing each at once.  A free may release, put or unpin entries of any
 * node (docs/api.md, "Callbacks"); destroy asks for rounds until one in
 * which no reclaimer did anything.  Free functions run on the home
 * reclaimer even then.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "reclaim/reclaim.h"

/* destroy's rounds (pp__reclaim_stop): the round that asks the reclaimers
 * to leave. */
#define PP__ROUND_EXIT UINT32_MAX

/* One grace period for many entries: what the reclaimer collected in one
 * round, as the lists it popped from the threads' queues (each entry is
 * linked through q.link, never walked until it is freed).  One epoch
 * callback per batch, where one per entry cost three cache misses per
 * entry before its free (the pop's reversal, ck_epoch_call's store, the
 * dispatch), serialised along the lists.  The batches live on the
 * reclaimer's stack; when all are in flight, entries fall back to one
 * callback each. */
#define PP__RBATCHES      64
#define PP__RBATCH_LISTS  16

typedef struct pp__rbatch {
    ck_epoch_entry_t ee;
    struct pp__rbatch *next;             /* free list, or ready list */
    unsigned n;
    ck_stack_entry_t *list[PP__RBATCH_LISTS];
} pp__rbatch_t;

typedef struct pp__rstate {
    ck_epoch_record_t *rec;
    pp__rbatch_t *free;                  /* batches not in flight */
    pp__rbatch_t *cur;                   /* the batch this round fills */
    unsigned pending;                    /* epoch callbacks in flight */
    pp__rbatch_t all[PP__RBATCHES];
} pp__rstate_t;

static void epoch_cb(ck_epoch_entry_t *ee);
static void epoch_batch_cb(ck_epoch_entry_t *ee);

/* Hands the current batch to the epoch. */
static void rbatch_close(pp__rstate_t *rs)
{
    if (rs->cur == NULL)
        return;
    ck_epoch_call(rs->rec, &rs->cur->ee, epoch_batch_cb);
    rs->pending++;
    rs->cur = NULL;
}

/* Adds one list popped from a thread's queue to this round's batch, or, if
 * every batch is in flight, gives each of its entries a callback. */
static void rbatch_add(pp__rstate_t *rs, ck_stack_entry_t *list)
{
    if (rs->cur != NULL && rs->cur->n == PP__RBATCH_LISTS)
        rbatch_close(rs);
    if (rs->cur == NULL && rs->free != NULL) {
        rs->cur = rs->free;
        rs->free = rs->cur->next;
        rs->cur->n = 0;
    }
    if (rs->cur != NULL) {
        rs->cur->list[rs->cur->n++] = list;
        return;
    }
    while (list != NULL) {
        ck_stack_entry_t *next = list->next;
        ck_epoch_call(rs->rec, &pp__cold(pp__entry_of_link(list))->q.epoch, epoch_cb);
        rs->pending++;
        list = next;
    }
}

/* Takes every entry queued for node n, from every thread's queue, into
 * batches; true if there was any. */
static bool reclaim_collect(pp_pool_t *pool, unsigned n, pp__rstate_t *rs)
{
    bool any = false;
    /* acquire: pairs with the registration's release (the record's queues
     * are initialised). */
    for (pp__thread_t *t = pp__atomic_load_acquire(&pool->threads); t != NULL; t = t->next) {
        if (ck_pr_load_ptr(&t->rq[n].s.head) == NULL)
            continue;
        ck_stack_entry_t *list = ck_stack_batch_pop_upmc(&t->rq[n].s);
        if (list != NULL) {
            rbatch_add(rs, list);
            any = true;
        }
    }
    rbatch_close(rs);
    return any;
}

/* Whether any thread's queue for node n holds an entry. */
static bool reclaim_queued(pp_pool_t *pool, unsigned n)
{
    /* acquire: as in reclaim_collect. */
    for (pp__thread_t *t = pp__atomic_load_acquire(&pool->threads); t != NULL; t = t->next)
        if (ck_pr_load_ptr(&t->rq[n].s.head) != NULL)
            return true;
    return false;
}

/* The reclaimer waits until a push (or stop) moves `wake` past seen, or
 * the deadline (NULL: none) passes.  The wait is announced in `sleeping`:
 * the first push that sees it bumps `wake` (one futex wake per wait); the
 * pushes made while the reclaimer works pay one load. */
static void reclaimer_wait(pp_pool_t *pool, pp__node_t *node, uint32_t seen,
                           const struct timespec *deadline)
{
    pp__atomic_store_relaxed(&node->prod.sleeping, 1);
    /* seq_cst: see pp__retire_push. */
    pp__atomic_fence_seq_cst();
    if (!reclaim_queued(pool, node->index))
        ck_ec32_wait(&node->prod.wake, &pp__wait_ec_mode, seen, deadline);
    pp__atomic_store_relaxed(&node->prod.sleeping, 0);
}

/* ------------------------------------------------------------------------ */
/* The reclaimer                                                             */
/* ------------------------------------------------------------------------ */

/* Entries whose grace period has passed, collected by the epoch callback
 * (which only runs on the reclaimer thread, inside ck_epoch_poll or
 * ck_epoch_reclaim). */
static __thread ck_stack_t *ready_sink;
static __thread pp__rbatch_t *ready_batches;

static void epoch_cb(ck_epoch_entry_t *ee)
{
    pp__entry_t *e = pp__entry_of_epoch(ee);
    /* q.epoch is dead from here on; reuse q.link for the ready list. */
    pp__cold_t *c = pp__cold(e);
    c->q.link.next = ready_sink->head;
    ready_sink->head = &c->q.link;
}

static void epoch_batch_cb(ck_epoch_entry_t *ee)
{
    pp__rbatch_t *b = (pp__rbatch_t *)(void *)((char *)ee - offsetof(pp__rbatch_t, ee));
    b->next = ready_batches;
    ready_batches = b;
}

/* Lag histogram: buckets 0..3 hold 0..3 ns exactly; above, 4 buckets per
 * power of two (precision 25%). */
unsigned pp__reclaim_lag_bucket(uint64_t ns)
{
    if (ns < 4)
        return (unsigned)ns;
    unsigned k = 63u - (unsigned)__builtin_clzll(ns);      /* ns in [2^k, 2^(k+1)), k >= 2 */
    unsigned sub = (unsigned)(ns >> (k - 2)) & 3u;          /* which quarter of the octave */
    unsigned b = 4u * (k - 1u) + sub;
    return b < PP__LAG_BUCKETS ? b : PP__LAG_BUCKETS - 1;
}

uint64_t pp__reclaim_lag_top(unsigned b)
{
    if (b < 4)
        return b;
    unsigned k = b / 4u + 1u, sub = b % 4u;
    if (k >= 62)
        return UINT64_MAX;
    return (((uint64_t)4 + sub + 1) << (k - 2)) - 1;
}

static void lag_record(pp__node_t *node, uint64_t lag_ns)
{
    pp__counter_add(&node->rc.lag_count, 1);
    pp__counter_add(&node->rc.lag_total_ns, lag_ns);
    if (lag_ns > pp__atomic_load_relaxed(&node->rc.lag_max_ns))
        pp__atomic_store_relaxed(&node->rc.lag_max_ns, lag_ns);
    pp__counter_add(&node->rc.lag_hist[pp__reclaim_lag_bucket(lag_ns)], 1);
}

/* Calls the free function (if the data is in memory), drops the swap copy
 * (if any) and accounts for both -- except the node's resident_bytes, on
 * the putters' line, which the caller subtracts: the bytes returned.  pw
 * is the entry's word, not changed. */
static uint64_t entry_free_data(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e,
                                uint64_t pw)
{
    pp__cold_t *c = pp__cold(e);
    const pp_type_t *type = c->type;
    uint64_t resident = 0;
    if (pw & PP__F_RESIDENT) {
        if (type != NULL && type->free != NULL) {
            pp__callback_enter();
            type->free(e->data, c->size, type->ctx);
            pp__callback_leave();
        } else {
            free(e->data);
        }
        resident = c->size;
        pp__mem_unreserve(pool, c->size);
    } else {
        pp__atomic_sub_relaxed(&node->sw.swapped_bytes, c->size);
    }
    if (pw & PP__F_SWAPPED)
        pp__swap_drop(pool, node, e);
    return resident;
}

/* Counts n entries reclaimed, once everything about them is done (data
 * freed, bytes and lag accounted, slots recycled or retired).  release: all
 * of that happens before anything that acquires this count (pp_pool_stats,
 * hence pp_pool_drain, whose return thus also sees the slots' new state
 * and the retired_slots count). */
static void count_free(pp__node_t *node, uint64_t n)
{
    pp__atomic_store_release(&node->rc.frees, pp__atomic_load_relaxed(&node->rc.frees) + n);
}

/* What the reclaimer's frees take off the putters' line (resident_bytes,
 * the backlog), subtracted once per PP__FREED_CHUNK frees and at the end
 * of each round (freed_flush), not once per free: that line is the one
 * every put and every final unpin writes, and a subtraction per free made
 * it move between the reclaimer and them all the time.  The frees are
 * counted after, so a drain that sees them sees the counters down. */
#define PP__FREED_CHUNK 32u

typedef struct freed_tls {
    uint64_t n, resident, charge;
    uint64_t t0;                         /* tracing: when these frees began */
} pp__freed_t;

static __thread pp__freed_t freed_tls;

static void freed_flush(pp_pool_t *pool, pp__node_t *node)
{
    pp__freed_t *f = &freed_tls;
    if (f->n == 0)
        return;
    if (f->resident != 0)
        pp__atomic_sub_relaxed(&node->put.resident_bytes, f->resident);
    pp__backlog_sub(pool, node, f->charge);   /* may wake waiting puts */
    if (f->t0 != 0) {
        /* The trace's span of these frees, recorded before they are
         * counted: a drain that sees them finds it recorded. */
        uint64_t now = pp__wait_now_ns();
        if (pp__tevent_on(pool)) {
            pp__tev_t ev = {.t0 = f->t0, .t1 = now, .count = (uint32_t)f->n,
                            .kind = PP__TEV_RECLAIM, .node = (uint16_t)node->index};
            pp__tevent_add(pool, node->rc.rt, &ev);
        }
        f->t0 = now;
    }
    count_free(node, f->n);
    f->n = f->resident = f->charge = 0;
}

/* Makes the slot FREE (same generation: stale refs keep failing) and gives
 * it back for reuse, or retires it if its generation is exhausted. */
static void slot_recycle(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    uint32_t gen = pp__word_gen(pw);
    e->data = NULL;
    pp__cold_t *c = pp__cold(e);
    c->type = NULL;
    c->size = 0;
    pp__pw_reclaim(e, gen);
    if (gen == UINT32_MAX) {
        pp__counter_add(&node->rc.retired_slots, 1);   /* never reissue a ref */
        return;
    }
    pp__table_slot_free(pool, node->index, e);
}

static void reclaim_entry(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    /* TSan: every read section that could have seen e ended before now. */
    PP__TSAN_ACQUIRE(&pool->tsan_token);
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    PP__CHECK((pw & (PP__F_LIVE | PP__F_DEAD | PP__F_QUEUED | PP__F_BUSY)) ==
                  (PP__F_LIVE | PP__F_DEAD | PP__F_QUEUED) &&
              pp__pw_pins(pw) == 0);
    pp__cold_t *c = pp__cold(e);
    uint32_t now_us = c->queued_us != PP__LAG_NONE ? (uint32_t)(pp__wait_now_ns() / 1000u) : 0;
    size_t size = c->size;
    uint64_t charge = pp__backlog_charge(e, pw);
    bool discard = pp__droppable(pool, c->type, size);
    PP__YIELD(RECLAIM);
    uint64_t resident = entry_free_data(pool, node, e, pw);   /* unreserves its bytes */
    /* After the unreserve, then a wake: a waiter that still sees these
     * bytes dying is woken after they are free (room.c).  release: the
     * unreserve happens before a waiter's acquire that no longer counts
     * them (dying_wait). */
    if (discard) {
        pp__atomic_sub_release(&pool->discard_dying, size);
        pp__atomic_sub_relaxed(&pool->discard_entries, 1);
        pp__mem_discard_freed(pool);
    }
    if (pool->swap && (pw & PP__F_RESIDENT))
        pp__atomic_sub_release(&node->prod.dying_bytes, size);
    if ((discard || (pool->swap && (pw & PP__F_RESIDENT))) &&
        pp__atomic_load_relaxed(&pool->room_want) != 0)
        ck_ec32_inc(&pool->room_ec, &pp__wait_ec_mode);
    if (c->queued_us != PP__LAG_NONE)
        lag_record(node, (uint64_t)(uint32_t)(now_us - c->queued_us) * 1000u);
    PP__YIELD(RECLAIM);
    slot_recycle(pool, node, e);
    freed_tls.n++;
    freed_tls.resident += resident;
    freed_tls.charge += charge;
    if (freed_tls.n == PP__FREED_CHUNK)
        freed_flush(pool, node);
}

static void run_ready(pp_pool_t *pool, pp__node_t *node, ck_stack_t *ready,
                      pp__rstate_t *rs)
{
    freed_tls.t0 = pp__tevent_start(pool);
    ck_stack_entry_t *s = ready->head;
    ready->head = NULL;
    while (s != NULL) {
        ck_stack_entry_t *next = s->next;
        PP__YIELD(RECLAIM);   /* the entry's grace period has passed */
        reclaim_entry(pool, node, pp__entry_of_link(s));
        PP__CHECK(rs->pending > 0);
        rs->pending--;
        s = next;
    }
    pp__rbatch_t *b = ready_batches;
    ready_batches = NULL;
    while (b != NULL) {
        pp__rbatch_t *bnext = b->next;
        for (unsigned i = 0; i < b->n; i++) {
            for (s = b->list[i]; s != NULL;) {
                ck_stack_entry_t *next = s->next;
                /* The next entry's records come in while this one is
                 * freed: its cold record (next is in it) and its hot one. */
                if (next != NULL) {
                    __builtin_prefetch(next);
                    __builtin_prefetch(pp__entry_of_link(next));
                }
                PP__YIELD(RECLAIM);
                reclaim_entry(pool, node, pp__entry_of_link(s));
                s = next;
            }
        }
        PP__CHECK(rs->pending > 0);
        rs->pending--;
        b->next = rs->free;
        rs->free = b;
        b = bnext;
    }
    freed_flush(pool, node);
    freed_tls.t0 = 0;
}

/* ------------------------------------------------------------------------ */
/* Destroy: the last rounds                                                  */
/* ------------------------------------------------------------------------ */

/* Frees everything queued for node n now, without a grace period (destroy:
 * no reader remains), until its queues are empty: the frees may queue more
 * on any node.  True if it freed anything. */
static bool reclaim_drain_now(pp_pool_t *pool, pp__node_t *node, pp__rstate_t *rs,
                              ck_stack_t *ready)
{
    bool any = false;
    for (;;) {
        bool batch = reclaim_collect(pool, node->index, rs);
        if (rs->pending > 0) {
            ck_epoch_reclaim(rs->rec);   /* dispatches every callback pending */
            run_ready(pool, node, ready, rs);
        }
        PP__CHECK(rs->pending == 0);
        if (!batch)
            return any;
        any = true;
    }
}

struct pp__sweep {
    pp__rstate_t *rs;
    ck_stack_t *ready;
    bool work;                           /* an entry was killed */
};

/* Destroy's sweep of one slot: an entry still owned (a leaked owner) is
 * killed as its last release would kill it, queued on this reclaimer's
 * own queue, and freed at once -- so what its free releases on this node
 * is freed before the sweep goes on, and a release on another node lands
 * on a reclaimer that still runs rounds (pp__reclaim_stop). */
static void sweep_one(pp_pool_t *pool, unsigned n, pp__entry_t *e, void *arg)
{
    struct pp__sweep *sw = arg;
    pp__node_t *node = pool->nodes[n];
    /* acquire: pairs with the putter's release (data, size, type, slot);
     * the users' later writes are ordered by destroy's release of stop,
     * the callbacks' by the rounds (pp__reclaim_stop). */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    if ((pw & (PP__F_LIVE | PP__F_DEAD)) != PP__F_LIVE)
        return;                          /* free, or dead: queued or still pinned */
    uint32_t gen = pp__word_gen(pw);
    pp__cold_t *c = pp__cold(e);
    /* The owners left, taken as releases take them: a callback's release
     * that races with this takes the last one itself and queues the
     * entry, or finds none (PP_ESTALE).  acq_rel: as pp_release's. */
    uint64_t ow = pp__atomic_load_relaxed(&c->ow);
    do {
        if (pp__word_gen(ow) != gen || pp__ow_owners(ow) == 0)
            return;
    } while (!pp__atomic_cas_weak_acq_rel(&c->ow, &ow, ow & ~PP__OWNERS_MASK));
    uint64_t k = pp__atomic_load_relaxed(&node->rc.leaked_owned);
    if (k < 4)
        node->rc.leaked_first[k] = pp__ref_make(n, c->slot, gen);
    pp__counter_add(&node->rc.leaked_owned, 1);
    /* Queued on this thread's own record, unless a callback holds a pin:
     * then its unpin queues it. */
    pp__retire_kill(pool, n, e, gen, node->rc.rt);
    sw->work = true;
    (void)reclaim_drain_now(pool, node, sw->rs, sw->ready);
}

/* One of destroy's rounds on this node: frees what is queued, kills and
 * frees every entry still owned.  True if it did anything. */
static bool reclaim_round(pp_pool_t *pool, pp__node_t *node, pp__rstate_t *rs,
                          ck_stack_t *ready)
{
    struct pp__sweep sw = {rs, ready, false};
    bool work = reclaim_drain_now(pool, node, rs, ready);
    pp__table_foreach(pool, node->index, sweep_one, &sw);
    return work || sw.work;
}

/* After stop: runs the rounds destroy asks for (pp__reclaim_stop), each
 * answered on the pool's semaphore, until it asks this reclaimer to leave. */
static void reclaimer_rounds(pp_pool_t *pool, pp__node_t *node, pp__rstate_t *rs,
                             ck_stack_t *ready)
{
    uint32_t done = 0;
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->prod.wake);
        /* acquire: pairs with destroy's release of the round, after it
         * took every reclaimer's answer to the last one: their frees and
         * pushes happen before this round's look at the queues. */
        uint32_t round = pp__atomic_load_acquire(&pool->stop_round);
        if (round == PP__ROUND_EXIT)
            return;
        if (round == done) {
            ck_ec32_wait(&node->prod.wake, &pp__wait_ec_mode, seen, NULL);
            continue;
        }
        pp__atomic_store_relaxed(&node->rc.round_work, reclaim_round(pool, node, rs, ready));
        done = round;
        sem_post(&pool->started);        /* orders the round's work before destroy's wait */
    }
}

static void *reclaimer_main(void *arg)
{
    pp__node_t *node = arg;
    pp_pool_t *pool = node->pool;
    pp__rstate_t rs;
    ck_stack_t ready = CK_STACK_INITIALIZER;
    uint32_t backoff_ns = 20000;

    rs.rec = &node->rc.rt->rec;
    rs.free = NULL;
    rs.cur = NULL;
    rs.pending = 0;
    for (unsigned i = 0; i < PP__RBATCHES; i++) {
        rs.all[i].next = rs.free;
        rs.free = &rs.all[i];
    }
    pp__atomic_store_relaxed(&node->rc.tid, (int)gettid());
    pp__atomic_store_relaxed(&node->rc.rt->tid, (int)gettid());   /* the trace's track */
    /* One CPU of the node: bound to the whole node, the reclaimer was
     * pulled by the kernel onto the CPU of the thread that woke it, and
     * waited there behind that busy thread for a time slice (reclaim lag of
     * 1-2 ms instead of microseconds, pinbench). */
    pp__atomic_store_relaxed(&node->rc.cpu_bound, pp__topology_bind(pool, node->index, true));
    ready_sink = &ready;
    ready_batches = NULL;
    sem_post(&pool->started);

    for (;;) {
        /* Snapshot before looking at the queue: a push after this point
         * changes the value, so the wait below cannot miss it. */
        uint32_t seen = ck_ec32_value(&node->prod.wake);
        bool batch = reclaim_collect(pool, node->index, &rs);
        if (batch)
            PP__YIELD(RECLAIM);
        if (rs.pending > 0) {
            ck_epoch_poll(rs.rec);
            pp__counter_add(&node->rc.grace_polls, 1);
            run_ready(pool, node, &ready, &rs);
        }
        if (batch) {
            backoff_ns = 20000;
            continue;
        }
        /* acquire: pairs with the destroyer's release of stop, after which
         * no other thread calls into the pool. */
        if (pp__atomic_load_acquire(&node->rc.stop)) {
            if (rs.pending > 0) {
                ck_epoch_reclaim(rs.rec);   /* no readers remain: dispatch all */
                run_ready(pool, node, &ready, &rs);
            }
            PP__CHECK(rs.pending == 0);
            /* Pushes that happened before stop may have landed after the
             * pop above: go round again until the queue is empty. */
            if (!reclaim_queued(pool, node->index))
                break;
            continue;
        }
        if (rs.pending > 0) {
            struct timespec deadline;
            clock_gettime(CLOCK_MONOTONIC, &deadline);
            deadline.tv_nsec += backoff_ns;
            if (deadline.tv_nsec >= 1000000000) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000;
            }
            reclaimer_wait(pool, node, seen, &deadline);
            backoff_ns = backoff_ns >= 500000 ? 1000000 : backoff_ns * 2;
        } else {
            backoff_ns = 20000;
            reclaimer_wait(pool, node, seen, NULL);
        }
    }

    reclaimer_rounds(pool, node, &rs, &ready);
    ready_sink = NULL;
    return NULL;
}

int pp__reclaim_start(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        ck_ec32_init(&node->prod.wake, 0);
        node->rc.rt = pp__thread_new_reclaimer(pool);
        if (node->rc.rt == NULL)
            return PP_ENOMEM;
        if (pthread_create(&node->rc.thread, NULL, reclaimer_main, node) != 0)
            return PP_ENOMEM;
        node->rc.started = true;
    }
    for (unsigned n = 0; n < pool->nnodes; n++) {
        while (sem_wait(&pool->started) != 0 && errno == EINTR)
            ;
    }
    return 0;
}

/* Asks every started reclaimer for round r (or to leave) and wakes it. */
static void rounds_ask(pp_pool_t *pool, uint32_t r)
{
    /* release: the answers to the last round (their frees, their pushes
     * onto other nodes' queues), which this thread acquired from the
     * semaphore, happen before the next round's look at the queues. */
    pp__atomic_store_release(&pool->stop_round, r);
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node != NULL && node->rc.started)
            ck_ec32_inc(&node->prod.wake, &pp__wait_ec_mode);
    }
}

void pp__reclaim_stop(pp_pool_t *pool)
{
    unsigned started = 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->rc.started)
            continue;
        started++;
        /* release: everything the pool's users did happens before the
         * reclaimer's final drain and sweep. */
        pp__atomic_store_release(&node->rc.stop, 1);
        ck_ec32_inc(&node->prod.wake, &pp__wait_ec_mode);
    }
    /* Rounds until one in which no reclaimer freed or swept anything.  A
     * free may release, put or unpin entries of any node, so a round on
     * one node may give another more to do; only frees make work now (no
     * other call runs), so a round without a free anywhere leaves none.
     * Each round's answers are in before the next is asked for: a push
     * made in one round is seen by its reclaimer in the next. */
    for (uint32_t r = 1; started != 0; r++) {
        PP__CHECK(r != PP__ROUND_EXIT);
        rounds_ask(pool, r);
        bool work = false;
        for (unsigned i = 0; i < started; i++) {
            while (sem_wait(&pool->started) != 0 && errno == EINTR)
                ;
        }
        for (unsigned n = 0; n < pool->nnodes; n++) {
            pp__node_t *node = pool->nodes[n];
            if (node != NULL && node->rc.started)
                work |= pp__atomic_load_relaxed(&node->rc.round_work) != 0;
        }
        if (!work)
            break;
    }
    rounds_ask(pool, PP__ROUND_EXIT);
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->rc.started)
            continue;
        pthread_join(node->rc.thread, NULL);
        node->rc.started = false;
    }
}
