/*
 * swapbench_io.c -- swapbench's io_uring baseline: what a program that
 * keeps D requests in flight gets from the same file system, the bound the
 * pool's io_uring engine at io_depth D is measured against.
 *
 * It moves what the pwrite/pread baseline moves (swapbench.c), as fio's
 * io_uring engine would with bs = the entry size and iodepth = D: one
 * request per entry at i * len in a new O_EXCL file in swap_dir, buffered
 * or O_DIRECT; a plain ring (no SQPOLL, no registered files or buffers:
 * fio's defaults, and what the pool does).  Whenever fewer than D are in
 * flight the next entries are queued, and they go to the kernel with the
 * call that waits for the next completion; completions are taken as they
 * come, in any order.
 *
 *   swap-out: every entry's buffer made and filled before the timer (as the
 *     pool's are before its puts); each freed as soon as its write
 *     completes, as an eviction frees it.  Timed from the first request to
 *     the last completion.
 *   swap-in: each read goes into a fresh buffer (malloc, or page-aligned
 *     with O_DIRECT), as a load makes fresh memory, held in a ring of
 *     swapin_keep() buffers, as the pool holds its resident entries: entry
 *     i's buffer replaces entry i - keep's, which is freed first.  A slot
 *     whose read is still in flight is not reused, so at most keep reads
 *     are in flight whatever D (the pool's loads are bounded by the same
 *     memory limit); with the defaults keep is 64.  An untimed pass that
 *     checks every entry against the round's pattern comes first, as for
 *     the other implementations: it checks what the writes left on disk,
 *     so the baseline cannot be faster by moving nothing, and both timed
 *     passes start with keep buffers in memory.
 *
 * A short read or write is carried on from where it stopped (a new request
 * for the rest, as the other implementations do); -EAGAIN and -EINTR are
 * retried; any other error ends the run.
 */
#define _GNU_SOURCE
#include "swapbench.h"

#include <errno.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* At most this many bytes per request: read and write return at most
 * about 2 GiB, and the length is 32 bits.  The rest is carried on. */
#define REQ_MAX ((size_t)1 << 30)

typedef struct uring_run {
    struct io_uring ring;
    unsigned depth;              /* requests in flight at most */
    unsigned inflight;           /* queued or in flight now */
    int fd;
    const char *path;            /* for messages */
    size_t len;                  /* bytes per entry on the file */
    size_t *done;                /* per entry: bytes moved so far */
} uring_run_t;

static _Noreturn void fail_res(int res, const char *call, const char *path)
{
    errno = -res;
    fail_sys(call, path);
}

int uring_probe(char *why, size_t n)
{
    struct io_uring ring;
    int rc = io_uring_queue_init(1, &ring, 0);
    if (rc < 0) {
        snprintf(why, n, "io_uring_queue_init: %s", strerror(-rc));
        return rc;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    struct io_uring_cqe *cqe;
    io_uring_prep_nop(sqe);
    rc = io_uring_submit_and_wait(&ring, 1);
    if (rc >= 0)
        rc = io_uring_peek_cqe(&ring, &cqe);
    if (rc >= 0) {
        rc = cqe->res < 0 ? cqe->res : 0;
        io_uring_cqe_seen(&ring, cqe);
    }
    if (rc < 0)
        snprintf(why, n, "a no-op through io_uring: %s", strerror(-rc));
    io_uring_queue_exit(&ring);
    return rc < 0 ? rc : 0;
}

/* Queues the rest of entry i's transfer, from or into buf; it goes to the
 * kernel with the next complete(). */
static void queue(uring_run_t *u, unsigned char *buf, size_t i, int write)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (sqe == NULL) {            /* not with inflight < depth <= the ring's size */
        fprintf(stderr, "swapbench: io_uring: submission queue full at %u in flight\n",
                u->inflight);
        exit(1);
    }
    size_t done = u->done[i], n = u->len - done;
    if (n > REQ_MAX)
        n = REQ_MAX;
    uint64_t off = (uint64_t)i * u->len + done;
    if (write)
        io_uring_prep_write(sqe, u->fd, buf + done, (unsigned)n, off);
    else
        io_uring_prep_read(sqe, u->fd, buf + done, (unsigned)n, off);
    io_uring_sqe_set_data64(sqe, i);
    u->inflight++;
}

/* Submits what is queued and returns an entry whose transfer is complete
 * (waiting for one if none is).  bufs[i % nb] is entry i's buffer, for the
 * rest of a short transfer. */
static size_t complete(uring_run_t *u, unsigned char **bufs, size_t nb, int write)
{
    const char *call = write ? "io_uring write" : "io_uring read";
    for (;;) {
        struct io_uring_cqe *cqe;
        /* No system call when a completion is there and nothing waits to
         * be submitted; else one that does both. */
        if (io_uring_sq_ready(&u->ring) != 0 || io_uring_peek_cqe(&u->ring, &cqe) != 0) {
            int rc = io_uring_submit_and_wait(&u->ring, 1);
            if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
                fail_res(rc, "io_uring_submit_and_wait", u->path);
            if (io_uring_peek_cqe(&u->ring, &cqe) != 0)
                continue;
        }
        size_t i = (size_t)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&u->ring, cqe);
        u->inflight--;
        if (res == -EAGAIN || res == -EINTR) {
            queue(u, bufs[i % nb], i, write);
            continue;
        }
        if (res < 0)
            fail_res(res, call, u->path);
        if (res == 0)                   /* no progress: a full disk, a short file */
            fail_res(write ? -EIO : -ENODATA, call, u->path);
        u->done[i] += (size_t)res;
        if (u->done[i] < u->len) {      /* short: carry on from there */
            queue(u, bufs[i % nb], i, write);
            continue;
        }
        return i;
    }
}

/* Reads every entry back into fresh buffers held in ring[0, keep) (entry
 * i in slot i % keep), at most depth reads in flight and never two in one
 * slot.  With verify, checks each one as it completes. */
static void read_back(uring_run_t *u, unsigned char **ring, size_t keep, int r, int verify,
                      int direct)
{
    unsigned char *busy = calloc(keep, 1);
    if (busy == NULL)
        fail_sys("calloc", "slot table");
    memset(u->done, 0, n_entries * sizeof *u->done);
    for (size_t next = 0, finished = 0; finished < n_entries; finished++) {
        while (next < n_entries && u->inflight < u->depth && !busy[next % keep]) {
            unsigned char **slot = &ring[next % keep];
            free(*slot);                /* the pool's clean drop */
            if ((*slot = entry_alloc(direct)) == NULL)   /* a load makes fresh memory */
                fail_sys("malloc", "entry buffer");
            busy[next % keep] = 1;
            queue(u, *slot, next, 0);
            next++;
        }
        size_t i = complete(u, ring, keep, 0);
        busy[i % keep] = 0;
        if (verify)
            check(ring[i % keep], i, r, direct ? "io_uring read O_DIRECT" : "io_uring read");
    }
    free(busy);
}

void run_uring(int r, int direct, unsigned depth, double secs[2])
{
    uring_run_t u = { .depth = depth, .len = direct ? padded() : entry_size };
    unsigned char **b = make_buffers(r, direct);
    char path[4096];
    char tag[32];
    snprintf(tag, sizeof tag, "uring%u", depth);
    u.fd = open_base(path, sizeof path, tag, r, direct);
    u.path = path;
    if ((u.done = calloc(n_entries, sizeof *u.done)) == NULL)
        fail_sys("calloc", "progress table");
    /* depth entries: the queue never holds more (the completion queue is
     * twice that, so completions never overflow it). */
    int rc = io_uring_queue_init(depth, &u.ring, 0);
    if (rc < 0)
        fail_res(rc, "io_uring_queue_init", path);

    settle();
    double t0 = now_s();
    for (size_t next = 0, finished = 0; finished < n_entries; finished++) {
        while (next < n_entries && u.inflight < depth) {
            queue(&u, b[next], next, 1);
            next++;
        }
        size_t i = complete(&u, b, n_entries, 1);
        free(b[i]);                     /* a swap-out releases the memory */
        b[i] = NULL;
    }
    double t1 = now_s();
    secs[0] = t1 - t0;

    /* The untimed checking pass, then the timed one; b[] is now the ring. */
    size_t keep = swapin_keep();
    read_back(&u, b, keep, r, 1, direct);
    if (keep_all)
        free_ring(b, keep);
    t0 = now_s();
    read_back(&u, b, keep, r, 0, direct);
    t1 = now_s();
    free_ring(b, keep);
    secs[1] = t1 - t0;

    io_uring_queue_exit(&u.ring);
    free(u.done);
    free(b);
    close_base(u.fd, path);
}
