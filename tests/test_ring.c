/*
 * test_ring.c -- io_uring under the swap device (src/os/ring.c): the probe,
 * requests that go to the kernel together and come back with their
 * results, reads of what was written, and a device that sees each request
 * before it goes (answering some itself, shortening others) and each
 * result as it comes back.
 */
#include "helpers.h"
#include "support/swaptest.h"

#include "os/ring.h"
#include "os/swapdev.h"

#define BLK 4096u
#define NREQ 8u

TestSuite(ring);

static pp__swapdev_t *open_dev(void)
{
    pp__swapdev_t *d = pp__swapdev_file_new();
    cr_assert_not_null(d);
    int rc = d->open(d, test_swap_parent(), 1);
    cr_assert_eq(rc, 0, "open: %s", strerror(-rc));
    return d;
}

static pp__ring_t *new_ring(pp__swapdev_t *d, unsigned depth)
{
    char why[96];
    int rc = pp__ring_probe(why, sizeof why);
    cr_assert_eq(rc, 0, "io_uring is not usable here: %s", why);
    cr_assert_str_eq(why, "io_uring");
    pp__ring_t *r = NULL;
    rc = pp__ring_new(depth, d, &r);
    cr_assert_eq(rc, 0, "pp__ring_new: %s", strerror(-rc));
    return r;
}

/* Reaps until n requests are back, each result into res[] by its index
 * in base. */
static void reap_all(pp__ring_t *r, pp__ioreq_t *base, unsigned n, ssize_t *res,
                     uint64_t *submits)
{
    pp__ioreq_t *rq[NREQ];
    ssize_t got[NREQ];
    unsigned back = 0;
    while (back < n) {
        unsigned k = pp__ring_reap(r, true, rq, got, NREQ, submits);
        cr_assert_gt(k, 0, "a waiting reap came back empty");
        for (unsigned i = 0; i < k; i++) {
            ptrdiff_t idx = rq[i] - base;
            cr_assert(idx >= 0 && idx < (ptrdiff_t)n, "a request nobody queued");
            res[idx] = got[i];
        }
        back += k;
    }
}

Test(ring, requests_go_together_and_come_back_with_their_bytes)
{
    pp__swapdev_t *d = open_dev();
    pp__ring_t *r = new_ring(d, NREQ);
    char *out = malloc(NREQ * BLK), *in = calloc(NREQ, BLK);
    cr_assert(out != NULL && in != NULL);
    fill_pattern(out, NREQ * BLK, 42);
    pp__ioreq_t w[NREQ], rd[NREQ];
    ssize_t res[NREQ];
    for (unsigned i = 0; i < NREQ; i++) {
        w[i] = (pp__ioreq_t){.buf = out + i * BLK, .len = BLK, .off = (uint64_t)i * BLK,
                             .write = true};
        pp__ring_queue(r, &w[i]);
    }
    uint64_t submits = 0;
    reap_all(r, w, NREQ, res, &submits);
    cr_assert_eq(submits, 1, "%" PRIu64 " submits for requests queued together", submits);
    for (unsigned i = 0; i < NREQ; i++)
        cr_assert_eq(res[i], (ssize_t)BLK, "write %u: %zd", i, res[i]);
    for (unsigned i = 0; i < NREQ; i++) {
        rd[i] = (pp__ioreq_t){.buf = in + i * BLK, .len = BLK, .off = (uint64_t)i * BLK};
        pp__ring_queue(r, &rd[i]);
    }
    reap_all(r, rd, NREQ, res, &submits);
    for (unsigned i = 0; i < NREQ; i++)
        cr_assert_eq(res[i], (ssize_t)BLK, "read %u: %zd", i, res[i]);
    cr_assert(memcmp(in, out, NREQ * BLK) == 0, "read back other bytes than were written");
    /* Past the end of what was written: nothing there. */
    pp__ioreq_t past = {.buf = in, .len = BLK, .off = (uint64_t)NREQ * BLK};
    pp__ring_queue(r, &past);
    reap_all(r, &past, 1, res, &submits);
    cr_assert_eq(res[0], 0);
    pp__ring_free(r);
    d->close(d);
    free(out);
    free(in);
}

/* A device in a test: refuses the request at block 1, halves the one at
 * block 2, and reports one byte less of the one at block 3 as it comes
 * back (a count inside a block). */
static _Atomic unsigned g_seen_submit, g_seen_complete;

static ssize_t dev_submitting(pp__swapdev_t *d, unsigned s, bool write, size_t *n, uint64_t off)
{
    (void)d;
    (void)s;
    (void)write;
    atomic_fetch_add(&g_seen_submit, 1);
    if (off == 1 * BLK)
        return -EIO;
    if (off == 2 * BLK)
        *n /= 2;
    return PP__DEV_GO;
}

static ssize_t dev_completed(pp__swapdev_t *d, unsigned s, bool write, void *buf, size_t n,
                             ssize_t res)
{
    (void)d;
    (void)s;
    (void)write;
    (void)buf;
    (void)n;
    atomic_fetch_add(&g_seen_complete, 1);
    return res == (ssize_t)BLK && n == BLK && buf != NULL && ((char *)buf)[0] == 3 ? res - 1
           : res;
}

Test(ring, the_device_sees_each_request_and_each_result)
{
    pp__swapdev_t *d = open_dev();
    d->submitting = dev_submitting;
    d->completed = dev_completed;
    pp__ring_t *r = new_ring(d, NREQ);
    char *out = malloc(4 * BLK);
    cr_assert_not_null(out);
    for (unsigned i = 0; i < 4; i++)
        memset(out + i * BLK, (int)i, BLK);
    pp__ioreq_t w[4];
    ssize_t res[4];
    for (unsigned i = 0; i < 4; i++) {
        w[i] = (pp__ioreq_t){.buf = out + i * BLK, .len = BLK, .off = (uint64_t)i * BLK,
                             .write = true};
        pp__ring_queue(r, &w[i]);
    }
    uint64_t submits = 0;
    reap_all(r, w, 4, res, &submits);
    cr_assert_eq(res[0], (ssize_t)BLK);
    cr_assert_eq(res[1], -EIO, "the device's answer: %zd", res[1]);
    cr_assert_eq(res[2], (ssize_t)BLK / 2, "the shortened request: %zd", res[2]);
    cr_assert_eq(w[2].len, BLK / 2, "the request carries its new length");
    cr_assert_eq(res[3], (ssize_t)BLK - 1, "the result the device reports: %zd", res[3]);
    cr_assert_eq(atomic_load(&g_seen_submit), 4);
    cr_assert_eq(atomic_load(&g_seen_complete), 3, "the device's own answer is not the "
                 "kernel's result: it is not seen again");
    pp__ring_free(r);
    d->close(d);
    free(out);
}
