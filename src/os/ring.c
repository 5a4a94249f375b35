/*
 * ring.c -- io_uring under the swap device (ring.h).
 *
 * liburing does the ring itself.  What is here: requests a test device
 * answers before they go (kept in `instant` and handed back by the next
 * reap, as if the kernel had), results it changes as they come back, and
 * short counts left to the caller (xfer.c goes on from where a request
 * stopped, as the blocking engine does).
 */
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>

#include "os/os.h"
#include "os/ring.h"
#include "os/swapdev.h"

struct pp__ring {
    struct io_uring ring;
    struct pp__swapdev *dev;
    unsigned depth;
    unsigned queued;                     /* prepared, not submitted */
    unsigned ninstant;                   /* answered by the device */
    pp__ioreq_t **instant_rq;
    ssize_t *instant_res;
};

int pp__ring_probe(char *why, size_t n)
{
    struct io_uring ring;
    int rc = io_uring_queue_init(2, &ring, 0);
    if (rc < 0) {
        snprintf(why, n, "io_uring_queue_init: %s", strerror(-rc));
        return rc;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_nop(sqe);
    rc = io_uring_submit_and_wait(&ring, 1);
    struct io_uring_cqe *cqe = NULL;
    if (rc >= 0)
        rc = io_uring_peek_cqe(&ring, &cqe);
    if (rc >= 0 && cqe->res < 0)
        rc = cqe->res;
    io_uring_queue_exit(&ring);
    if (rc < 0) {
        snprintf(why, n, "io_uring no-op: %s", strerror(-rc));
        return rc;
    }
    snprintf(why, n, "io_uring");
    return 0;
}

int pp__ring_new(unsigned depth, struct pp__swapdev *dev, pp__ring_t **out)
{
    pp__ring_t *r = pp__alloc_zeroed(1, sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    r->instant_rq = pp__alloc_zeroed(depth, sizeof *r->instant_rq);
    r->instant_res = pp__alloc_zeroed(depth, sizeof *r->instant_res);
    int rc = r->instant_rq == NULL || r->instant_res == NULL ? -ENOMEM
             : io_uring_queue_init(depth, &r->ring, 0);
    if (rc < 0) {
        pp__alloc_free(r->instant_rq);
        pp__alloc_free(r->instant_res);
        pp__alloc_free(r);
        return rc;
    }
    r->dev = dev;
    r->depth = depth;
    *out = r;
    return 0;
}

void pp__ring_free(pp__ring_t *r)
{
    if (r == NULL)
        return;
    io_uring_queue_exit(&r->ring);
    pp__alloc_free(r->instant_rq);
    pp__alloc_free(r->instant_res);
    pp__alloc_free(r);
}

void pp__ring_queue(pp__ring_t *r, pp__ioreq_t *rq)
{
    struct pp__swapdev *d = r->dev;
    if (d->submitting != NULL) {
        ssize_t res = d->submitting(d, rq->stream, rq->write, &rq->len, rq->off);
        if (res != PP__DEV_GO) {
            PP__CHECK(r->ninstant < r->depth);
            r->instant_rq[r->ninstant] = rq;
            r->instant_res[r->ninstant++] = res;
            return;
        }
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (sqe == NULL) {
        /* The submission queue is full of prepared requests: hand them
         * over to make room (depth bounds what is in flight, so the
         * completion queue has room for them). */
        (void)io_uring_submit(&r->ring);
        r->queued = 0;
        sqe = io_uring_get_sqe(&r->ring);
        PP__CHECK(sqe != NULL);
    }
    int fd = d->fd(d, rq->stream);
    if (rq->write)
        io_uring_prep_write(sqe, fd, rq->buf, (unsigned)rq->len, rq->off);
    else
        io_uring_prep_read(sqe, fd, rq->buf, (unsigned)rq->len, rq->off);
    /* A buffered read that the page cache holds would be copied inline, on
     * the swap thread, one after the other; forced to the kernel's workers
     * the copies of a batch run on every core (swapbench, buffered swap-in
     * through queued loads: 6,931-7,281 MB/s against 3,627-4,782).  Direct
     * reads are the device's DMA and stay inline; buffered writes to one
     * file would only queue behind its inode lock there. */
    if (!rq->write && d->align <= 1)
        io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
    io_uring_sqe_set_data(sqe, rq);
    r->queued++;
}

unsigned pp__ring_reap(pp__ring_t *r, bool wait, pp__ioreq_t **rq, ssize_t *res, unsigned max,
                       uint64_t *submits)
{
    unsigned got = 0;
    while (r->ninstant > 0 && got < max) {
        r->ninstant--;
        rq[got] = r->instant_rq[r->ninstant];
        res[got++] = r->instant_res[r->ninstant];
    }
    if (got > 0)
        wait = false;                    /* something to hand back already */
    if (r->queued > 0) {
        int rc;
        do
            rc = wait ? io_uring_submit_and_wait(&r->ring, 1) : io_uring_submit(&r->ring);
        while (rc == -EINTR);
        PP__CHECK(rc >= 0);
        r->queued = 0;
        (*submits)++;
    }
    for (;;) {
        struct io_uring_cqe *cqe = NULL;
        int rc = got < max ? io_uring_peek_cqe(&r->ring, &cqe) : -EAGAIN;
        if (rc == -EAGAIN && wait && got == 0)
            rc = io_uring_wait_cqe(&r->ring, &cqe);
        if (rc == -EINTR)
            continue;
        if (rc < 0 || cqe == NULL)
            break;
        pp__ioreq_t *q = io_uring_cqe_get_data(cqe);
        ssize_t v = cqe->res;
        io_uring_cqe_seen(&r->ring, cqe);
        if (r->dev->completed != NULL)
            v = r->dev->completed(r->dev, q->stream, q->write, q->buf, q->len, v);
        rq[got] = q;
        res[got++] = v;
    }
    return got;
}
