/*
 * faultdev.h -- a swap device for tests: the real file device underneath,
 * with faults and gates the test switches on and off while the pool runs.
 *
 *   faultdev_t *fd = faultdev_new();
 *   faultdev_pool_create(&opt, fd, &pool);        // pp__pool_create_dev
 *   fd->write_err = -EIO;                         // every write fails
 *   fd->write_short = 1;                          // writes stop half-way
 *   fd->read_err = -EIO;                          // every read fails
 *   faultdev_gate_close(fd, true, false);         // reads block...
 *   faultdev_wait_blocked(fd, 1);                 // ...until one is stuck
 *   faultdev_gate_open(fd);                       // ...and go on
 *   faultdev_random(fd, 50, seed);                // 1 call in 50 goes wrong
 *
 * Random faults (the torture's --faults): each write, read and sync goes
 * wrong with probability 1/one_in, decided by a hash of the seed and a
 * call counter.  A write that goes wrong fails with -EIO or -ENOSPC, or is
 * short (writes half and returns that count, and the caller must go on).
 * A read that goes wrong fails with -EIO, finds nothing (returns 0), or
 * returns the bytes with one bit flipped (a transient corruption: the
 * stored copy is intact, so a later read of it is good).  A sync fails with
 * -EIO.  Each kind is counted in inj_*.
 *
 * Direct I/O (PP_SWAP_DIRECT): the inner device opens O_DIRECT and the
 * wrapper takes on its alignment.  Short writes then stay aligned (half,
 * rounded down to a whole block; a write of one block cannot be halved and
 * fails with -ENOSPC like a write of one byte), because O_DIRECT refuses
 * anything else.  open_err makes the open fail before anything is made
 * (-EINVAL: as a file system that refuses O_DIRECT).  write_odd and
 * read_odd make every call do only half (whole blocks; all of a request
 * that cannot be halved) and report one byte less than it did while that
 * still counts a whole block done: a count that stops inside a block, from
 * which the caller must go on (the block it stopped in again, in direct
 * mode).
 *
 * Under the io_uring engine the same faults hold: the device's
 * submitting and completed hooks (swapdev.h) apply them as each request
 * is handed to the kernel and as it comes back, and the gate blocks the
 * swap thread as it hands a request over.
 *
 * Faults and counters are atomics: the swap threads and loaders read them
 * concurrently with the test thread.  The pool owns the device (closing it
 * closes the inner file device and frees the wrapper); the test keeps its
 * pointer only until pp_pool_destroy.
 */
#ifndef PP_TEST_FAULTDEV_H
#define PP_TEST_FAULTDEV_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "testing/testhooks.h"
#include "os/swapdev.h"

typedef struct faultdev {
    pp__swapdev_t dev;                   /* first: the pool sees this */
    pp__swapdev_t *inner;                /* the real file device */
    /* Faults (0: none). */
    _Atomic int open_err;                /* -errno for the open */
    _Atomic int write_err;               /* -errno for every write */
    _Atomic int write_short;             /* writes write half, then fail with -ENOSPC */
    _Atomic int write_odd, read_odd;     /* calls do half, report a count inside a block */
    _Atomic int read_err;                /* -errno for every read */
    _Atomic int read_zero;               /* reads return 0 (copy missing) */
    _Atomic int sync_err;                /* -errno for every sync */
    /* Counters. */
    _Atomic unsigned long writes, write_bytes, reads, read_bytes, drops, syncs;
    _Atomic unsigned long write_fails, read_fails;
    /* Random faults (faultdev_random). */
    _Atomic unsigned rand_one_in;        /* 0: off */
    _Atomic uint64_t rand_seed;
    _Atomic unsigned long rand_calls;
    _Atomic unsigned long inj_write_eio, inj_write_enospc, inj_write_short;
    _Atomic unsigned long inj_read_eio, inj_read_missing, inj_read_corrupt, inj_sync;
    /* Gate: while closed, reads (gate_reads) and writes (gate_writes)
     * block in the device. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool gate_closed, gate_reads, gate_writes;
    int blocked;                         /* calls waiting at the gate */
} faultdev_t;

static inline faultdev_t *faultdev_of(pp__swapdev_t *d)
{
    return (faultdev_t *)(void *)d;
}

static inline void faultdev_gate(faultdev_t *f, bool is_write)
{
    pthread_mutex_lock(&f->lock);
    while (f->gate_closed && (is_write ? f->gate_writes : f->gate_reads)) {
        f->blocked++;
        pthread_cond_broadcast(&f->cond);
        pthread_cond_wait(&f->cond, &f->lock);
        f->blocked--;
    }
    pthread_mutex_unlock(&f->lock);
}

/* Random faults: 0 if this call goes right, else a kind 1..3 (and *x a
 * random word for the details). */
static inline unsigned faultdev_roll(faultdev_t *f, uint64_t *x)
{
    unsigned one_in = atomic_load_explicit(&f->rand_one_in, memory_order_relaxed);
    if (one_in == 0)
        return 0;
    uint64_t z = atomic_load_explicit(&f->rand_seed, memory_order_relaxed) + 0x9E3779B97F4A7C15ull *
                 (atomic_fetch_add_explicit(&f->rand_calls, 1, memory_order_relaxed) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    *x = z >> 8;
    if (z % one_in != 0)
        return 0;
    return 1 + (unsigned)((z >> 40) % 3);
}

static int faultdev_open_(pp__swapdev_t *d, const char *parent, unsigned n)
{
    faultdev_t *f = faultdev_of(d);
    int err = atomic_load(&f->open_err);
    if (err != 0)
        return err;
    f->inner->direct = d->direct;
    int rc = f->inner->open(f->inner, parent, n);
    memcpy(d->path, f->inner->path, sizeof d->path);
    d->align = f->inner->align;
    return rc;
}

/* Half of n, kept to whole blocks of the device's alignment; 0 if n
 * cannot be halved so. */
static inline size_t faultdev_half(const pp__swapdev_t *d, size_t n)
{
    size_t a = d->align > 1 ? d->align : 1;
    return n / 2 / a * a;
}

/* write_odd, read_odd: what to do of n, and what to report of r done. */
static inline size_t faultdev_odd_len(const pp__swapdev_t *d, size_t n)
{
    size_t k = faultdev_half(d, n);
    return k > 0 ? k : n;
}

static inline ssize_t faultdev_odd_count(const pp__swapdev_t *d, ssize_t r)
{
    size_t a = d->align > 1 ? d->align : 1;
    return r > (ssize_t)a ? r - 1 : r;
}

static ssize_t faultdev_write_(pp__swapdev_t *d, unsigned s, const void *buf, size_t n,
                               uint64_t off)
{
    faultdev_t *f = faultdev_of(d);
    faultdev_gate(f, true);
    atomic_fetch_add(&f->writes, 1);
    int err = atomic_load(&f->write_err);
    if (err != 0) {
        atomic_fetch_add(&f->write_fails, 1);
        return err;
    }
    if (atomic_load(&f->write_short)) {
        if (faultdev_half(d, n) == 0) {
            atomic_fetch_add(&f->write_fails, 1);
            return -ENOSPC;
        }
        n = faultdev_half(d, n);         /* the next call (the rest) fails */
    }
    uint64_t x = 0;
    switch (faultdev_roll(f, &x)) {
    case 1:
        atomic_fetch_add(&f->inj_write_eio, 1);
        atomic_fetch_add(&f->write_fails, 1);
        return -EIO;
    case 2:
        atomic_fetch_add(&f->inj_write_enospc, 1);
        atomic_fetch_add(&f->write_fails, 1);
        return -ENOSPC;
    case 3:
        if (faultdev_half(d, n) > 0) {
            atomic_fetch_add(&f->inj_write_short, 1);
            n = faultdev_half(d, n);     /* short, not failed: the caller goes on */
        }
        break;
    default:
        break;
    }
    bool odd = atomic_load(&f->write_odd) != 0;
    if (odd)
        n = faultdev_odd_len(d, n);
    ssize_t r = f->inner->write(f->inner, s, buf, n, off);
    if (odd)
        r = faultdev_odd_count(d, r);
    if (r > 0)
        atomic_fetch_add(&f->write_bytes, (unsigned long)r);
    return r;
}

static ssize_t faultdev_read_(pp__swapdev_t *d, unsigned s, void *buf, size_t n, uint64_t off)
{
    faultdev_t *f = faultdev_of(d);
    faultdev_gate(f, false);
    atomic_fetch_add(&f->reads, 1);
    int err = atomic_load(&f->read_err);
    if (err != 0) {
        atomic_fetch_add(&f->read_fails, 1);
        return err;
    }
    if (atomic_load(&f->read_zero)) {
        atomic_fetch_add(&f->read_fails, 1);
        return 0;
    }
    uint64_t x = 0;
    unsigned kind = faultdev_roll(f, &x);
    if (kind == 1) {
        atomic_fetch_add(&f->inj_read_eio, 1);
        atomic_fetch_add(&f->read_fails, 1);
        return -EIO;
    }
    if (kind == 2) {
        atomic_fetch_add(&f->inj_read_missing, 1);
        atomic_fetch_add(&f->read_fails, 1);
        return 0;
    }
    bool odd = atomic_load(&f->read_odd) != 0;
    if (odd)
        n = faultdev_odd_len(d, n);
    ssize_t r = f->inner->read(f->inner, s, buf, n, off);
    if (odd)
        r = faultdev_odd_count(d, r);
    if (r > 0)
        atomic_fetch_add(&f->read_bytes, (unsigned long)r);
    if (kind == 3 && r > 0) {
        ((unsigned char *)buf)[x % (uint64_t)r] ^= (unsigned char)(1u << ((x >> 32) & 7));
        atomic_fetch_add(&f->inj_read_corrupt, 1);
    }
    return r;
}

/* The io_uring engine (ring.h) hands requests to the kernel itself: the
 * same faults, decided as each request is handed over (submitting: the
 * gate, errors, short and odd lengths, the answer instead of the kernel's)
 * and as its result comes back (completed: odd counts, the bytes counted,
 * a read's random bit flip, rolled there). */
static int faultdev_fd_(pp__swapdev_t *d, unsigned s)
{
    faultdev_t *f = faultdev_of(d);
    return f->inner->fd(f->inner, s);
}

static ssize_t faultdev_submitting_(pp__swapdev_t *d, unsigned s, bool write, size_t *n,
                                    uint64_t off)
{
    (void)s;
    (void)off;
    faultdev_t *f = faultdev_of(d);
    faultdev_gate(f, write);
    uint64_t x = 0;
    if (write) {
        atomic_fetch_add(&f->writes, 1);
        int err = atomic_load(&f->write_err);
        if (err != 0) {
            atomic_fetch_add(&f->write_fails, 1);
            return err;
        }
        if (atomic_load(&f->write_short)) {
            if (faultdev_half(d, *n) == 0) {
                atomic_fetch_add(&f->write_fails, 1);
                return -ENOSPC;
            }
            *n = faultdev_half(d, *n);
        }
        switch (faultdev_roll(f, &x)) {
        case 1:
            atomic_fetch_add(&f->inj_write_eio, 1);
            atomic_fetch_add(&f->write_fails, 1);
            return -EIO;
        case 2:
            atomic_fetch_add(&f->inj_write_enospc, 1);
            atomic_fetch_add(&f->write_fails, 1);
            return -ENOSPC;
        case 3:
            if (faultdev_half(d, *n) > 0) {
                atomic_fetch_add(&f->inj_write_short, 1);
                *n = faultdev_half(d, *n);
            }
            break;
        default:
            break;
        }
        if (atomic_load(&f->write_odd))
            *n = faultdev_odd_len(d, *n);
        return PP__DEV_GO;
    }
    atomic_fetch_add(&f->reads, 1);
    int err = atomic_load(&f->read_err);
    if (err != 0) {
        atomic_fetch_add(&f->read_fails, 1);
        return err;
    }
    if (atomic_load(&f->read_zero)) {
        atomic_fetch_add(&f->read_fails, 1);
        return 0;
    }
    switch (faultdev_roll(f, &x)) {
    case 1:
        atomic_fetch_add(&f->inj_read_eio, 1);
        atomic_fetch_add(&f->read_fails, 1);
        return -EIO;
    case 2:
        atomic_fetch_add(&f->inj_read_missing, 1);
        atomic_fetch_add(&f->read_fails, 1);
        return 0;
    default:
        break;                           /* a flip is rolled on completion */
    }
    if (atomic_load(&f->read_odd))
        *n = faultdev_odd_len(d, *n);
    return PP__DEV_GO;
}

static ssize_t faultdev_completed_(pp__swapdev_t *d, unsigned s, bool write, void *buf,
                                   size_t n, ssize_t r)
{
    (void)s;
    (void)n;
    faultdev_t *f = faultdev_of(d);
    if (atomic_load(write ? &f->write_odd : &f->read_odd))
        r = faultdev_odd_count(d, r);
    if (r > 0)
        atomic_fetch_add(write ? &f->write_bytes : &f->read_bytes, (unsigned long)r);
    uint64_t x = 0;
    if (!write && r > 0 && faultdev_roll(f, &x) == 3) {
        ((unsigned char *)buf)[x % (uint64_t)r] ^= (unsigned char)(1u << ((x >> 32) & 7));
        atomic_fetch_add(&f->inj_read_corrupt, 1);
    }
    return r;
}

static int faultdev_drop_(pp__swapdev_t *d, unsigned s, uint64_t off, uint64_t len)
{
    faultdev_t *f = faultdev_of(d);
    atomic_fetch_add(&f->drops, 1);
    return f->inner->drop(f->inner, s, off, len);
}

static int faultdev_sync_(pp__swapdev_t *d, unsigned s)
{
    faultdev_t *f = faultdev_of(d);
    atomic_fetch_add(&f->syncs, 1);
    int err = atomic_load(&f->sync_err);
    uint64_t x = 0;
    if (err == 0 && faultdev_roll(f, &x) != 0) {
        atomic_fetch_add(&f->inj_sync, 1);
        err = -EIO;
    }
    return err != 0 ? err : f->inner->sync(f->inner, s);
}

static void faultdev_close_(pp__swapdev_t *d)
{
    faultdev_t *f = faultdev_of(d);
    f->inner->close(f->inner);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    free(f);
}

static inline faultdev_t *faultdev_new(void)
{
    faultdev_t *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->inner = pp__swapdev_file_new();
    if (f->inner == NULL) {
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->dev.open = faultdev_open_;
    f->dev.write = faultdev_write_;
    f->dev.read = faultdev_read_;
    f->dev.drop = faultdev_drop_;
    f->dev.sync = faultdev_sync_;
    f->dev.fd = faultdev_fd_;
    f->dev.submitting = faultdev_submitting_;
    f->dev.completed = faultdev_completed_;
    f->dev.close = faultdev_close_;
    return f;
}

/* Random faults from now on: one call in one_in goes wrong (0: off). */
static inline void faultdev_random(faultdev_t *f, unsigned one_in, uint64_t seed)
{
    atomic_store(&f->rand_seed, seed);
    atomic_store(&f->rand_one_in, one_in);
}

/* Random faults injected so far (f may be NULL: 0). */
static inline unsigned long faultdev_injected(faultdev_t *f)
{
    if (f == NULL)
        return 0;
    return atomic_load(&f->inj_write_eio) + atomic_load(&f->inj_write_enospc) +
           atomic_load(&f->inj_write_short) + atomic_load(&f->inj_read_eio) +
           atomic_load(&f->inj_read_missing) + atomic_load(&f->inj_read_corrupt) +
           atomic_load(&f->inj_sync);
}

/* Closes the gate for reads and/or writes: such calls block until it opens. */
static inline void faultdev_gate_close(faultdev_t *f, bool reads, bool writes)
{
    pthread_mutex_lock(&f->lock);
    f->gate_closed = true;
    f->gate_reads = reads;
    f->gate_writes = writes;
    pthread_mutex_unlock(&f->lock);
}

static inline void faultdev_gate_open(faultdev_t *f)
{
    pthread_mutex_lock(&f->lock);
    f->gate_closed = false;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

/* The calls blocked at the gate now. */
static inline int faultdev_blocked(faultdev_t *f)
{
    pthread_mutex_lock(&f->lock);
    int k = f->blocked;
    pthread_mutex_unlock(&f->lock);
    return k;
}

/* Waits (on the device's condition variable: no sleep) until at least k
 * calls are blocked at the gate. */
static inline void faultdev_wait_blocked(faultdev_t *f, int k)
{
    pthread_mutex_lock(&f->lock);
    while (f->blocked < k)
        pthread_cond_wait(&f->cond, &f->lock);
    pthread_mutex_unlock(&f->lock);
}

/* pp_pool_create with f as the swap device (PINPOOL_TEST_TOPOLOGY and
 * PP_TEST_POOL_FLAGS applied, like test_pool_create).  The pool owns f from here on, also on failure. */
static inline int faultdev_pool_create(const pp_options_t *opt, faultdev_t *f, pp_pool_t **out)
{
    pp_options_t o = *opt;
    if (o.topology == NULL) {
        const char *t = getenv("PINPOOL_TEST_TOPOLOGY");
        if (t != NULL && *t != '\0')
            o.topology = t;
    }
#ifdef PP_TEST_POOL_FLAGS
    o.flags |= PP_TEST_POOL_FLAGS;       /* as test_pool_create */
#endif
    return pp__pool_create_dev(&o, &f->dev, out);
}

#endif /* PP_TEST_FAULTDEV_H */
