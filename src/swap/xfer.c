/*
 * xfer.c -- the io_uring engine: each node's swap thread keeps many
 * write-outs and queued loads in flight at once on the node's ring
 * (ring.h), where the thread engine does one blocking request at a time.
 *
 * Only the swap thread touches its node's engine, so nothing here takes a
 * lock: the hand (evict.c) hands each victim it claims to pp__xfer_write
 * and goes on to the next; the swap thread's loop hands queued loads
 * (pp_prefetch, PP_ADVISE_WILLNEED, PP_PIN_NOWAIT) to pp__xfer_loads; and
 * pp__xfer_reap takes completions and carries each job on.  A pin that
 * misses still loads on its own thread, blocking (load.c): it waits for
 * its own bytes only, never behind a queue.
 *
 * Write-outs.  One request of a victim is in flight at a time (1 MiB;
 * hashed as it is handed over), so a pin that arrives during the
 * write-out stops it within one request, as in the thread engine: before
 * each request the job looks at the entry's word and gives up once a pin
 * changed it.  When the last request ends, the job records the copy and
 * commits or abandons the eviction (pp__ioend_evict) on its own, whatever
 * the other victims do.  A failed or short write is carried on, or
 * counted and abandoned, exactly as the blocking engine does
 * (pp__swap_progress): the entry stays resident with nothing lost.
 * Write-outs take at most three quarters of the depth, so queued loads
 * always find a request free.
 *
 * Queued loads.  Each is read in requests of 1 MiB, all in flight at once
 * (as far as the depth allows), into memory reserved against the limit
 * before it is made; the copy is checked when the last request ends, on
 * this thread, and the entry committed resident (ioend.c).  The bytes of
 * queued loads in flight are bounded (a sixteenth of the limit, or one
 * entry): prefetches never push out what is in use faster than the device
 * brings it back.  A queued load that finds no room has the hand evict
 * for it first, as the thread engine does.
 *
 * Memory for loads.  The memory of a flat entry that the swap thread
 * evicts is not freed but kept (pp__xfer_keep: at most
 * PP__SPARES buffers, within the room the limit has), and the next queued
 * load of that size reads into it: its pages are already mapped, where
 * fresh memory from malloc costs a page fault per page on first touch
 * (and on a virtual machine far more: on the 2-core VM of
 * docs/performance.md the faults, not the disk, bounded swap-in).  The
 * room it held was given back to the limit when the entry was evicted,
 * as a freed buffer's is.  What no load takes stays kept while the swap
 * thread idles between bursts of loads (a scheduler prefetches a few
 * tasks ahead, so the next burst is rarely far), and is freed once the
 * thread has idled a second (swapper.c), or as soon as the resident bytes
 * and the kept ones together pass the limit (pp__xfer_spares_trim, each
 * round).  Freeing them at every idle moment made most loads of the
 * demo read into fresh memory: 1,069 fresh allocations for 1,335 loads.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swap/swap.h"
#include "os/ring.h"
#include "os/swapdev.h"

typedef struct pp__xjob pp__xjob_t;

#define PP__SPARES 16                    /* evicted buffers kept for loads, at most */

/* One request in flight. */
typedef struct pp__xreq {
    pp__ioreq_t io;                      /* what the ring sees (may shorten len) */
    pp__xjob_t *job;
    char *buf;                           /* the request as made: */
    size_t len, need;                    /* bytes asked, bytes that must come */
    uint64_t off;
    size_t k;                            /* bytes of it done (a short count) */
    size_t covers;                       /* a write's bytes of the copy */
    struct pp__xreq *next_free;
} pp__xreq_t;

/* A write-out or a queued load. */
struct pp__xjob {
    bool write;
    pp__entry_t *e;
    uint32_t slot;
    uint64_t claimed;                    /* a write-out's claimed word */
    size_t size;                         /* the entry's bytes */
    pp__wout_t w;
    pp__lin_t l;
    size_t next;                         /* a load's bytes asked so far */
    unsigned parts;                      /* its requests in flight */
    int rc;                              /* the first failure */
    uint64_t t0;                         /* its start, when tracing */
    char *bounce;                        /* direct I/O copy of unaligned memory, kept */
    pp__xjob_t *next_free;
};

struct pp__xfer {
    pp__ring_t *ring;
    unsigned depth;
    unsigned inflight;                   /* requests queued or in flight */
    unsigned writes, max_writes;         /* write-outs in flight, their bound */
    uint64_t freed;                      /* bytes freed by write-outs, for the pass */
    uint64_t load_bytes, load_budget;    /* queued loads in flight, their bound */
    pp__xreq_t *reqs, *free_req;
    pp__xjob_t *jobs, *free_job;
    pp__ioreq_t **rq;                    /* a reap's completions */
    ssize_t *res;
    ck_stack_entry_t *held, **held_tail; /* queued loads not started yet, in order */
    void *spare[PP__SPARES];             /* evicted memory kept for loads (pp__xfer_keep) */
    size_t spare_size[PP__SPARES];
    unsigned nspare;
    uint64_t spare_bytes;
};

static void xfer_load_step(pp_pool_t *pool, pp__node_t *node, pp__xjob_t *job);
static void xfer_write_step(pp_pool_t *pool, pp__node_t *node, pp__xjob_t *job);

/* ------------------------------------------------------------------------ */
/* Open, close                                                               */
/* ------------------------------------------------------------------------ */

static void xfer_free(pp__xfer_t *xf)
{
    if (xf == NULL)
        return;
    pp__ring_free(xf->ring);
    for (unsigned i = 0; i < xf->nspare; i++)
        free(xf->spare[i]);
    for (unsigned i = 0; xf->jobs != NULL && i < xf->depth; i++)
        free(xf->jobs[i].bounce);
    pp__alloc_free(xf->jobs);
    pp__alloc_free(xf->reqs);
    pp__alloc_free(xf->rq);
    pp__alloc_free(xf->res);
    pp__alloc_free(xf);
}

static int xfer_new(pp_pool_t *pool, unsigned depth, pp__xfer_t **out)
{
    pp__xfer_t *xf = pp__alloc_zeroed(1, sizeof *xf);
    if (xf == NULL)
        return -ENOMEM;
    xf->depth = depth;
    xf->max_writes = depth > 1 ? depth - depth / 4 : 1;
    xf->load_budget = pool->mem_limit / 16;
    xf->reqs = pp__alloc_zeroed(depth, sizeof *xf->reqs);
    xf->jobs = pp__alloc_zeroed(depth, sizeof *xf->jobs);
    xf->rq = pp__alloc_zeroed(depth, sizeof *xf->rq);
    xf->res = pp__alloc_zeroed(depth, sizeof *xf->res);
    int rc = xf->reqs == NULL || xf->jobs == NULL || xf->rq == NULL || xf->res == NULL
             ? -ENOMEM : pp__ring_new(depth, pool->dev, &xf->ring);
    if (rc != 0) {
        xfer_free(xf);
        return rc;
    }
    for (unsigned i = depth; i-- > 0;) {
        xf->reqs[i].next_free = xf->free_req;
        xf->free_req = &xf->reqs[i];
        xf->jobs[i].next_free = xf->free_job;
        xf->free_job = &xf->jobs[i];
    }
    xf->held_tail = &xf->held;
    *out = xf;
    return 0;
}

int pp__xfer_open(pp_pool_t *pool, const pp_options_t *opt)
{
    unsigned engine = opt->io_engine;
    const char *env = getenv("PINPOOL_IO_ENGINE");
    if (engine == PP_IO_ENGINE_AUTO && env != NULL && env[0] != '\0') {
        /* The caller left the choice to the pool: the environment's. */
        if (strcmp(env, "uring") == 0) {
            engine = PP_IO_ENGINE_URING;
        } else if (strcmp(env, "threads") == 0) {
            engine = PP_IO_ENGINE_THREADS;
        } else if (strcmp(env, "auto") != 0) {
            pp__report(pool, "pinpool: swap: PINPOOL_IO_ENGINE=%s: not uring, threads or auto; "
                       "pool not created", env);
            return PP_EINVAL;
        }
    }
    pool->io_depth = opt->io_depth != 0 ? opt->io_depth : PP_IO_DEPTH_DEFAULT;
    pool->io_engine = PP_IO_ENGINE_THREADS;
    if (engine == PP_IO_ENGINE_THREADS) {
        snprintf(pool->io_why, sizeof pool->io_why, "asked for%s",
                 opt->io_engine == PP_IO_ENGINE_AUTO ? " (PINPOOL_IO_ENGINE)" : "");
        return 0;
    }
    int rc = pool->dev->fd == NULL ? -EOPNOTSUPP : 0;
    if (rc != 0)
        snprintf(pool->io_why, sizeof pool->io_why, "the swap device has no file descriptor");
    else
        rc = pp__ring_probe(pool->io_why, sizeof pool->io_why);
    for (unsigned n = 0; rc == 0 && n < pool->nnodes; n++) {
        rc = xfer_new(pool, pool->io_depth, &pool->nodes[n]->sw.xf);
        if (rc != 0)
            snprintf(pool->io_why, sizeof pool->io_why, "io_uring_queue_init(%u): %s",
                     pool->io_depth, strerror(-rc));
    }
    if (rc == 0) {
        pool->io_engine = PP_IO_ENGINE_URING;
        return 0;
    }
    pp__xfer_close(pool);
    if (rc == -ENOMEM)
        return PP_ENOMEM;
    if (engine == PP_IO_ENGINE_URING) {
        pp__report(pool, "pinpool: swap: PP_IO_ENGINE_URING: io_uring cannot be used here (%s); "
                   "pool not created", pool->io_why);
        return PP_ENOTSUP;
    }
    return 0;                            /* AUTO: the thread engine, and why */
}

void pp__xfer_close(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || node->sw.xf == NULL)
            continue;
        /* The swap thread drained it before it ended (pp__xfer_stop). */
        PP__CHECK(node->sw.xf->inflight == 0 && node->sw.xf->held == NULL);
        xfer_free(node->sw.xf);
        node->sw.xf = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static bool xfer_can_queue(const pp__xfer_t *xf) { return xf->free_req != NULL; }

static void xfer_queue(pp__node_t *node, pp__xjob_t *job, bool write, char *buf, size_t len,
                       size_t need, uint64_t off, size_t covers)
{
    pp__xfer_t *xf = node->sw.xf;
    pp__xreq_t *q = xf->free_req;
    PP__CHECK(q != NULL);
    xf->free_req = q->next_free;
    q->job = job;
    q->buf = buf;
    q->len = len;
    q->need = need;
    q->off = off;
    q->k = 0;
    q->covers = covers;
    q->io = (pp__ioreq_t){.buf = buf, .len = len, .off = off, .stream = node->index,
                          .write = write};
    pp__busy_mark(node, write, true);
    pp__ring_queue(xf->ring, &q->io);
    xf->inflight++;
    pp__atomic_add_relaxed(&node->sw.io_requests, 1);
    pp__atomic_store_relaxed(&node->sw.io_inflight, xf->inflight);
    if (xf->inflight > pp__atomic_load_relaxed(&node->sw.io_inflight_peak))
        pp__atomic_store_relaxed(&node->sw.io_inflight_peak, xf->inflight);
}

/* A request came back with r: goes on from where a short count stopped,
 * or ends its part of the job (a failure counted and reported). */
static void xfer_done(pp_pool_t *pool, pp__node_t *node, pp__xreq_t *q, ssize_t r)
{
    pp__xfer_t *xf = node->sw.xf;
    pp__xjob_t *job = q->job;
    xf->inflight--;
    pp__busy_mark(node, q->io.write, false);
    pp__atomic_store_relaxed(&node->sw.io_inflight, xf->inflight);
    size_t k = pp__swap_progress(pool, q->len, q->need, q->k, r);
    if (k == q->k) {
        pp__swap_io_failed(pool, node, q->io.write, q->need - q->k, q->off + q->k, r);
        if (job->rc == 0)
            job->rc = PP_EIO;
    } else if (k < q->len) {
        q->k = k;                        /* short: the rest, as a new request */
        q->io = (pp__ioreq_t){.buf = q->buf + k, .len = q->len - k, .off = q->off + k,
                              .stream = node->index, .write = q->io.write};
        pp__busy_mark(node, q->io.write, true);
        pp__ring_queue(xf->ring, &q->io);
        xf->inflight++;
        pp__atomic_add_relaxed(&node->sw.io_requests, 1);
        pp__atomic_store_relaxed(&node->sw.io_inflight, xf->inflight);
        return;
    } else if (job->write) {
        job->w.done += q->covers;
    }
    q->next_free = xf->free_req;
    xf->free_req = q;
    if (job->write) {
        xfer_write_step(pool, node, job);
    } else {
        job->parts--;
        xfer_load_step(pool, node, job);
    }
}

void pp__xfer_reap(pp_pool_t *pool, pp__node_t *node, bool wait)
{
    pp__xfer_t *xf = node->sw.xf;
    if (xf->inflight == 0)
        return;
    uint64_t submits = 0;
    unsigned got = pp__ring_reap(xf->ring, wait, xf->rq, xf->res, xf->depth, &submits);
    if (submits > 0)
        pp__atomic_add_relaxed(&node->sw.io_submits, submits);
    /* The request is the first member of its pp__xreq_t. */
    for (unsigned i = 0; i < got; i++)
        xfer_done(pool, node, (pp__xreq_t *)(void *)xf->rq[i], xf->res[i]);
}

uint64_t pp__xfer_freed(pp__node_t *node)
{
    uint64_t freed = node->sw.xf->freed;
    node->sw.xf->freed = 0;
    return freed;
}

/* ------------------------------------------------------------------------ */
/* Write-outs                                                                */
/* ------------------------------------------------------------------------ */

bool pp__xfer_writes_full(const pp__node_t *node)
{
    const pp__xfer_t *xf = node->sw.xf;
    return xf->writes >= xf->max_writes || !xfer_can_queue(xf);
}

unsigned pp__xfer_writes(const pp__node_t *node)
{
    return node->sw.xf->writes;
}

static pp__xjob_t *xfer_job(pp__xfer_t *xf)
{
    pp__xjob_t *job = xf->free_job;
    PP__CHECK(job != NULL);              /* a job has a request in flight: at most depth */
    xf->free_job = job->next_free;
    char *bounce = job->bounce;
    memset(job, 0, sizeof *job);
    job->bounce = bounce;
    return job;
}

static void xfer_job_free(pp__xfer_t *xf, pp__xjob_t *job)
{
    job->next_free = xf->free_job;
    xf->free_job = job;
}

/* Hands the next request of a write-out to the ring, or ends it: the copy
 * written (or failed, or its claim lost), recorded, and the eviction
 * committed or abandoned. */
static void xfer_write_step(pp_pool_t *pool, pp__node_t *node, pp__xjob_t *job)
{
    pp__xfer_t *xf = node->sw.xf;
    if (job->rc == 0 && job->w.done < job->w.outlen) {
        PP__YIELD(EVICT);   /* between requests of the write-out */
        /* relaxed: only a hint to stop early; the commit CAS decides. */
        if (pp__atomic_load_relaxed(&job->e->pw) != job->claimed) {
            job->rc = PP_EAGAIN;
        } else {
            if (job->bounce == NULL && pool->dev->align > 1 && pp__alloc_note() &&
                posix_memalign((void **)&job->bounce, PP__SWAP_ALIGN, PP__SWAP_CHUNK) != 0)
                job->bounce = NULL;
            const char *buf;
            size_t iolen;
            ssize_t c = pp__swap_save_next(pool, &job->w, job->bounce, &buf, &iolen);
            if (c > 0) {
                xfer_queue(node, job, true, (char *)buf, iolen, iolen, job->w.off + job->w.done,
                           (size_t)c);
                return;
            }
            job->rc = (int)c;            /* 0: all written */
        }
    }
    pp__swap_save_end(pool, node, &job->w, job->rc);
    /* Before the commit, as every span of an I/O. */
    pp__tevent_span(pool, node->sw.st, PP__TEV_WRITE, job->t0,
                    pp__ref_make(node->index, job->slot, pp__word_gen(job->claimed)), job->size,
                    node->index, (unsigned)(job - xf->jobs) + 1u, job->rc);
    uint64_t got = pp__ioend_evict(pool, node, job->e, job->slot, job->claimed, true, job->rc,
                                   node->sw.st, pp__xfer_keep);
    pp__atomic_sub_relaxed(&pool->evict_inflight, job->size);
    pp__atomic_sub_relaxed(&node->sw.io_write_bytes, job->size);
    xf->freed += got;
    xf->writes--;
    xfer_job_free(xf, job);
}

int pp__xfer_write(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint32_t slot,
                   uint64_t claimed)
{
    pp__xfer_t *xf = node->sw.xf;
    PP__CHECK(!pp__xfer_writes_full(node));
    pp__xjob_t *job = xfer_job(xf);
    int rc = pp__swap_save_begin(pool, node, e, claimed, &job->w);
    if (rc != 0) {
        xfer_job_free(xf, job);
        return rc;
    }
    job->write = true;
    job->e = e;
    job->slot = slot;
    job->claimed = claimed;
    job->size = pp__cold(e)->size;
    job->t0 = pp__tevent_start(pool);
    xf->writes++;
    pp__atomic_add_relaxed(&pool->evict_inflight, job->size);
    pp__atomic_add_relaxed(&node->sw.io_write_bytes, job->size);
    xfer_write_step(pool, node, job);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Queued loads                                                              */
/* ------------------------------------------------------------------------ */

static void xfer_load_bytes(pp__node_t *node, pp__xfer_t *xf, int64_t delta)
{
    xf->load_bytes += (uint64_t)delta;
    pp__atomic_store_relaxed(&node->sw.io_load_bytes, xf->load_bytes);
    if (xf->load_bytes > pp__atomic_load_relaxed(&node->sw.io_load_bytes_peak))
        pp__atomic_store_relaxed(&node->sw.io_load_bytes_peak, xf->load_bytes);
}

/* The ref of e, a loading entry of node (its generation cannot change
 * while it is LOADING): for the trace. */
static pp_ref_t load_ref(pp__node_t *node, pp__entry_t *e)
{
    return pp__ref_make(node->index, pp__cold(e)->slot,
                        pp__word_gen(pp__atomic_load_relaxed(&e->pw)));
}

/* Hands a load's next requests to the ring (all there is room for), or
 * ends it once the last is back: checked, and committed resident or left
 * swapped (ioend.c). */
static void xfer_load_step(pp_pool_t *pool, pp__node_t *node, pp__xjob_t *job)
{
    pp__xfer_t *xf = node->sw.xf;
    while (job->rc == 0 && job->next < job->l.iolen && xfer_can_queue(xf)) {
        size_t n = job->l.iolen - job->next > PP__SWAP_CHUNK ? PP__SWAP_CHUNK
                   : job->l.iolen - job->next;
        size_t need = job->l.len - job->next < n ? job->l.len - job->next : n;
        xfer_queue(node, job, false, job->l.dst + job->next, n, need, job->l.off + job->next,
                   0);
        job->next += n;
        job->parts++;
    }
    if (job->parts > 0)
        return;
    /* Never cut short: a request was free (one of the job's just ended,
     * or pp__xfer_loads saw one). */
    PP__CHECK(job->rc != 0 || job->next >= job->l.iolen);
    /* Every request started is back: a load always has one in flight
     * until it ends, so it is stepped again (none is ever stranded). */
    void *data = NULL;
    int rc = pp__swap_load_end(pool, node, job->e, &job->l, job->rc, NULL, &data);
    if (rc != 0)
        pp__mem_unreserve(pool, job->size);
    xfer_load_bytes(node, xf, -(int64_t)job->size);
    pp__entry_t *e = job->e;
    uint64_t t0 = job->t0;
    size_t size = job->size;
    unsigned lane = (unsigned)(job - xf->jobs) + 1u;
    pp_ref_t ref = t0 == 0 ? 0 : load_ref(node, e);
    xfer_job_free(xf, job);
    pp__tevent_span(pool, node->sw.st, PP__TEV_LOAD, t0, ref, size, node->index, lane, rc);
    (void)pp__ioend_load_only(pool, node->index, e, rc, data, node->sw.st);
}

bool pp__xfer_keep(pp_pool_t *pool, pp__node_t *node, const pp__thread_t *t, void *data,
                   size_t size)
{
    pp__xfer_t *xf = pp__xfer_of(node, t);
    /* Only within the limit: resident still counts this buffer (the
     * eviction gives its room back after this call), so the resident
     * bytes and the kept ones together stay within mem_limit unless puts
     * and pins on other threads take that room before the loads do (the
     * next round trims them then).  Whether loads wait does not matter:
     * a scheduler's next burst of prefetches is rarely far. */
    if (xf == NULL || xf->nspare == PP__SPARES ||
        pp__atomic_load_relaxed(&pool->resident) + xf->spare_bytes > pool->mem_limit)
        return false;
    /* A load reads whole pages in direct mode, into page-aligned memory. */
    size_t a = pool->dev->align > 1 ? pool->dev->align : 1;
    if ((uintptr_t)data % a != 0 || malloc_usable_size(data) < (size + a - 1) / a * a)
        return false;
    xf->spare[xf->nspare] = data;
    xf->spare_size[xf->nspare++] = size;
    xf->spare_bytes += size;
    return true;
}

/* A kept buffer of size bytes, or NULL. */
static void *xfer_take(pp__xfer_t *xf, size_t size)
{
    for (unsigned i = 0; i < xf->nspare; i++) {
        if (xf->spare_size[i] != size)
            continue;
        void *p = xf->spare[i];
        xf->nspare--;
        xf->spare[i] = xf->spare[xf->nspare];
        xf->spare_size[i] = xf->spare_size[xf->nspare];
        xf->spare_bytes -= size;
        return p;
    }
    return NULL;
}

void pp__xfer_spares_free(pp__node_t *node)
{
    pp__xfer_t *xf = node->sw.xf;
    while (xf->nspare > 0)
        free(xf->spare[--xf->nspare]);
    xf->spare_bytes = 0;
}

void pp__xfer_spares_trim(pp_pool_t *pool, pp__node_t *node)
{
    pp__xfer_t *xf = node->sw.xf;
    /* Puts and pins on other threads took room since the buffers were
     * kept: the process would hold more than the limit for them. */
    while (xf->nspare > 0 &&
           pp__atomic_load_relaxed(&pool->resident) + xf->spare_bytes > pool->mem_limit) {
        xf->nspare--;
        xf->spare_bytes -= xf->spare_size[xf->nspare];
        free(xf->spare[xf->nspare]);
    }
}

uint64_t pp__xfer_spare_bytes(const pp__node_t *node)
{
    return node->sw.xf != NULL ? node->sw.xf->spare_bytes : 0;
}

/* Starts the load of e (claimed LOADING): room reserved by room (the
 * swap thread's: the hand evicts for it if need be, as for pp__load_only),
 * memory made, its requests handed over.  A load that cannot start ends at
 * once with its error. */
static void xfer_load(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, pp__room_fn room)
{
    pp__xfer_t *xf = node->sw.xf;
    size_t size = pp__cold(e)->size;
    uint64_t t0 = pp__tevent_start(pool);
    int rc = room(pool, node, size);
    if (rc != 0) {
        pp__tevent_span(pool, node->sw.st, PP__TEV_LOAD, t0, t0 == 0 ? 0 : load_ref(node, e),
                        size, node->index, 0, rc);
        (void)pp__ioend_load_only(pool, node->index, e, rc, NULL, node->sw.st);
        return;
    }
    pp__xjob_t *job = xfer_job(xf);
    const pp_type_t *type = pp__cold(e)->type;
    void *spare = type == NULL || type->load == NULL ? xfer_take(xf, size) : NULL;
    pp__atomic_add_relaxed(&node->sw.io_load_recycled, spare != NULL);
    rc = pp__swap_load_begin(pool, node, e, &job->l, spare);
    if (rc != 0) {
        xfer_job_free(xf, job);
        pp__mem_unreserve(pool, size);
        pp__tevent_span(pool, node->sw.st, PP__TEV_LOAD, t0, t0 == 0 ? 0 : load_ref(node, e),
                        size, node->index, 0, rc);
        (void)pp__ioend_load_only(pool, node->index, e, rc, NULL, node->sw.st);
        return;
    }
    job->e = e;
    job->size = size;
    job->t0 = t0;
    xfer_load_bytes(node, xf, (int64_t)size);
    xfer_load_step(pool, node, job);
}

bool pp__xfer_loads(pp_pool_t *pool, pp__node_t *node, bool stop, pp__room_fn room)
{
    pp__xfer_t *xf = node->sw.xf;
    /* The queue is a stack: turned round, the oldest first. */
    ck_stack_entry_t *batch = ck_stack_batch_pop_upmc(&node->sw.load_q), *rev = NULL;
    while (batch != NULL) {
        ck_stack_entry_t *next = batch->next;
        batch->next = rev;
        rev = batch;
        batch = next;
    }
    bool took = rev != NULL;
    *xf->held_tail = rev;
    while (*xf->held_tail != NULL)
        xf->held_tail = &(*xf->held_tail)->next;
    while (xf->held != NULL) {
        pp__entry_t *e = pp__entry_of_link(xf->held);
        bool cancel = stop || (pp__atomic_load_relaxed(&e->pw) & PP__F_DEAD);
        /* Over the budget with loads in flight, or no request free: wait
         * for one to end (the first one in flight always starts). */
        if (!cancel && (!xfer_can_queue(xf) ||
                        (xf->load_bytes > 0 && xf->load_bytes + pp__cold(e)->size > xf->load_budget)))
            break;
        xf->held = xf->held->next;
        if (xf->held == NULL)
            xf->held_tail = &xf->held;
        if (cancel)
            pp__ioend_cancel_load(pool, node, e);
        else
            xfer_load(pool, node, e, room);
    }
    return took;
}

bool pp__xfer_busy(const pp__node_t *node)
{
    return node->sw.xf->inflight > 0 || node->sw.xf->held != NULL;
}

void pp__xfer_stop(pp_pool_t *pool, pp__node_t *node)
{
    (void)pp__xfer_loads(pool, node, true, NULL);   /* cancels those not started */
    while (node->sw.xf->inflight > 0)
        pp__xfer_reap(pool, node, true);
    pp__xfer_spares_free(node);
}
