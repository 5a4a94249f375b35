/*
 * ring.h -- io_uring under the swap device: requests handed to the kernel
 * many at a time, completions reaped by the thread that owns the ring.
 *
 * A ring belongs to one thread (a node's swap thread, xfer.c): queue and
 * reap are never called concurrently on one ring, so it takes no lock.
 * The device gives each stream's file descriptor (pp__swapdev.fd); a
 * device for tests may also see every request before it goes (and answer
 * it instead, as a failing disk would) and every result as it comes back
 * (pp__swapdev.submitting, .completed).
 */
#ifndef PP_RING_H
#define PP_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pp__swapdev;

/* One read or write, owned by the caller until it is reaped. */
typedef struct pp__ioreq {
    char *buf;
    size_t len;
    uint64_t off;
    unsigned stream;
    bool write;
} pp__ioreq_t;

typedef struct pp__ring pp__ring_t;

/* 0 if io_uring can be used here (a ring made, a no-op through it), else
 * -errno, and why in why[0, n) ("io_uring_queue_init: Operation not
 * permitted", ...). */
int pp__ring_probe(char *why, size_t n);

/* A ring for depth requests in flight on dev's streams.  0 or -errno. */
int pp__ring_new(unsigned depth, struct pp__swapdev *dev, pp__ring_t **out);
void pp__ring_free(pp__ring_t *r);

/* Queues rq; it goes to the kernel at the next reap.  Pre: fewer than
 * depth requests are queued or in flight (the caller counts them). */
void pp__ring_queue(pp__ring_t *r, pp__ioreq_t *rq);

/* Submits what is queued, then takes up to max completions: each request
 * into rq[i] with its result (bytes, or -errno) into res[i].  With wait,
 * blocks until at least one is there (there must be one queued or in
 * flight).  Returns how many were taken; *submits counts the calls that
 * handed requests to the kernel. */
unsigned pp__ring_reap(pp__ring_t *r, bool wait, pp__ioreq_t **rq, ssize_t *res, unsigned max,
                       uint64_t *submits);

#endif /* PP_RING_H */
