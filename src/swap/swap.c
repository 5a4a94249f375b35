/*
 * swap.c -- the swap store: where each swapped entry's copy is, the space
 * of each node's stream, checksums (XXH3) and compression (LZ4), and the
 * streams a type's save and load use (pp_write, pp_read).
 *
 * The bytes go to a swap device (swapdev.h).  Each node domain has its own
 * stream, written only by that node's swap thread, so space is handed out
 * without contention; the node's reclaimer gives space back when an entry
 * dies, under the node's space lock (never on a hot path).
 *
 * Space is handed out in whole pages.  Freed extents are merged with their
 * neighbours and reused best-fit; the device is told to drop their bytes
 * (the file device punches a hole), so disk usage follows the live copies.
 *
 * Flat entries (no save/load) are written straight from their memory, in
 * chunks of PP__WRITE_CHUNK, hashing each chunk just before writing it (it
 * is then in cache for the write); between chunks the writer checks that the
 * entry's word is still the one it claimed, so a pin that arrives during a
 * long write stops it within one chunk.  With compression, or with a
 * type's save, the stored bytes are first made in pool memory.
 *
 * Loads verify the checksum before anything uses the bytes: flat raw copies
 * are read straight into the entry's new memory and freed again on a
 * mismatch; compressed copies and those of types with a load are read
 * whole into pool memory, verified, then decompressed or handed to load.
 *
 * Direct I/O (PP_SWAP_DIRECT, a device whose align is above 1): every
 * buffer, length and offset the device sees is aligned.  Offsets are (space
 * comes in pages).  What the store allocates to read into or write from --
 * a loaded entry's memory, a compressed copy, a copy read whole -- is
 * page-aligned and padded to whole pages, so the bytes go straight between
 * it and the device.  Memory the store did not allocate (an entry the user
 * put, a type's saved stream) is written from its own memory where it is
 * aligned, and otherwise through the swap thread's bounce buffer
 * (PP__DIRECT_CHUNK, one per swap thread, made at its first direct write),
 * copied and hashed there in cache-sized steps.  The last block is padded
 * with zeros; checksums cover the copy's own bytes only.
 */
#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>   /* XXH3 with the widest SIMD this CPU has */
#endif

#include "swap/swap.h"
#include "os/swapdev.h"

#define PP__PAGE      4096u
/* Buffered writes and reads go in chunks that stay in the L2 cache between
 * the copy and the hash (the hash just before each write, just after each
 * read); a write's chunks are the unit in which a pin stops a write-out.
 * Direct writes and reads go in larger ones (the device is slower at
 * smaller requests, and what it moves is not in cache anyway).  Chosen
 * with swapbench (docs/performance.md). */
#define PP__WRITE_CHUNK  ((size_t)256 << 10)
#define PP__READ_CHUNK   ((size_t)256 << 10)
#define PP__DIRECT_CHUNK PP__SWAP_CHUNK   /* internal.h */

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

/* The record of a slot; created (swap thread only) when create is set. */
static pp__swaprec_t *rec_of(pp__node_t *node, uint32_t slot, bool create)
{
    uint32_t s = slot >> PP__SEG_SHIFT;
    /* acquire: pairs with the release-install below (zeroed segment). */
    pp__swaprec_t *seg = pp__atomic_load_acquire(&node->sw.sdir[s]);
    if (seg == NULL) {
        if (!create)
            return NULL;
        seg = pp__alloc_zeroed(PP__SEG_SLOTS, sizeof *seg);
        if (seg == NULL)
            return NULL;
        /* release: the zeroed segment before its pointer (only the swap
         * thread installs, so no CAS is needed). */
        pp__atomic_store_release(&node->sw.sdir[s], seg);
    }
    return &seg[slot & (PP__SEG_SLOTS - 1)];
}

bool pp__swap_type_ok(const pp_type_t *type)
{
    if (type == NULL)
        return true;
    if (type->flags & PP_TYPE_NOSWAP)
        return false;
    if (type->save != NULL && type->load != NULL)
        return true;
    /* Flat data the pool may reload into malloc'd memory: only if it is
     * freed with free(), which is what the pool would hand back. */
    return type->save == NULL && type->load == NULL && type->free == NULL;
}

/* ------------------------------------------------------------------------ */
/* Space                                                                     */
/* ------------------------------------------------------------------------ */

static uint64_t pages_up(uint64_t len) { return (len + PP__PAGE - 1) / PP__PAGE * PP__PAGE; }

/* Hands out cap bytes of node's stream (counted against swap_limit). */
static int space_alloc(pp_pool_t *pool, pp__node_t *node, uint64_t cap, uint64_t *off)
{
    if (cap == 0) {
        *off = 0;
        return 0;
    }
    uint64_t used = pp__atomic_load_relaxed(&pool->swap_used);
    do {
        if (pool->swap_limit != 0 && (cap > pool->swap_limit || used > pool->swap_limit - cap))
            return PP_ENOMEM;
        /* relaxed: a counter checked against a limit; it orders nothing. */
    } while (!pp__atomic_cas_weak_relaxed(&pool->swap_used, &used, used + cap));

    pthread_mutex_lock(&node->sw.space_lock);
    size_t best = node->sw.next;
    for (size_t i = 0; i < node->sw.next; i++) {
        if (node->sw.ext[i].len >= cap && (best == node->sw.next || node->sw.ext[i].len < node->sw.ext[best].len))
            best = i;
    }
    if (best < node->sw.next) {
        *off = node->sw.ext[best].off;
        node->sw.ext[best].off += cap;
        node->sw.ext[best].len -= cap;
        if (node->sw.ext[best].len == 0)
            node->sw.ext[best] = node->sw.ext[--node->sw.next];
    } else {
        *off = node->sw.end;
        node->sw.end += cap;
    }
    pthread_mutex_unlock(&node->sw.space_lock);
    pp__atomic_add_relaxed(&node->sw.sw_used, cap);
    return 0;
}

/* Gives back what space_alloc handed out, with its accounting. */
static void space_free(pp_pool_t *pool, pp__node_t *node, uint64_t off, uint64_t cap)
{
    if (cap == 0)
        return;
    pp__atomic_sub_relaxed(&pool->swap_used, cap);
    pp__atomic_sub_relaxed(&node->sw.sw_used, cap);
    (void)pool->dev->drop(pool->dev, node->index, off, cap);   /* space, never data */
    pthread_mutex_lock(&node->sw.space_lock);
    /* Merge with the neighbours, then with the end of the stream. */
    for (size_t i = 0; i < node->sw.next;) {
        pp__extent_t *x = &node->sw.ext[i];
        if (x->off + x->len == off || off + cap == x->off) {
            if (x->off < off)
                off = x->off;
            cap += x->len;
            *x = node->sw.ext[--node->sw.next];
            continue;
        }
        i++;
    }
    if (off + cap == node->sw.end) {
        node->sw.end = off;
    } else {
        if (node->sw.next == node->sw.ncap) {
            size_t ncap = node->sw.ncap ? node->sw.ncap * 2 : 64;
            pp__extent_t *grown = pp__alloc_resize(node->sw.ext, ncap * sizeof *grown);
            if (grown != NULL) {
                node->sw.ext = grown;
                node->sw.ncap = ncap;
            }
        }
        /* Without room to remember it, the extent is never reused: its
         * bytes were dropped, so that costs stream offsets, not disk. */
        if (node->sw.next < node->sw.ncap)
            node->sw.ext[node->sw.next++] = (pp__extent_t){off, cap};
    }
    pthread_mutex_unlock(&node->sw.space_lock);
}

static int reader_start(pp_pool_t *pool, pp__node_t *node);
static void reader_stop(pp__node_t *node);

/* ------------------------------------------------------------------------ */
/* Open, close                                                               */
/* ------------------------------------------------------------------------ */

int pp__swap_open(pp_pool_t *pool, const pp_options_t *opt, pp__swapdev_t *dev)
{
    pool->dev = dev;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        node->sw.sdir = pp__alloc_zeroed(PP__SEG_MAX, sizeof *node->sw.sdir);
        if (node->sw.sdir == NULL || pthread_mutex_init(&node->sw.space_lock, NULL) != 0) {
            pp__alloc_free((void *)node->sw.sdir);
            node->sw.sdir = NULL;
            return PP_ENOMEM;
        }
        if (pp__busy_init(node) != 0) {
            pthread_mutex_destroy(&node->sw.space_lock);
            pp__alloc_free((void *)node->sw.sdir);
            node->sw.sdir = NULL;
            return PP_ENOMEM;
        }
    }
    dev->direct = (opt->flags & PP_SWAP_DIRECT) != 0;
    int rc = dev->open(dev, opt->swap_dir, pool->nnodes);
    if (rc != 0 && dev->direct && (rc == -EINVAL || rc == -EOPNOTSUPP)) {
        pp__report(pool, "pinpool: swap: PP_SWAP_DIRECT: the file system under %s %s; "
                   "pool not created (without PP_SWAP_DIRECT it would use the page cache)",
                   opt->swap_dir, rc == -EINVAL ? "refuses O_DIRECT"
                   : "needs direct I/O aligned to more than 4096 bytes");
        return PP_ENOTSUP;
    }
    if (rc != 0) {
        pp__report(pool, "pinpool: swap: cannot make the swap store under %s: %s",
                   opt->swap_dir, strerror(-rc));
        return rc == -ENOMEM ? PP_ENOMEM : PP_EIO;
    }
    /* The device's alignment must divide the store's page (swapdev.h). */
    PP__CHECK(dev->align >= 1 && dev->align <= PP__PAGE && PP__PAGE % dev->align == 0 &&
              (dev->align > 1) == dev->direct);
    for (unsigned n = 0; n < pool->nnodes; n++) {
        if ((rc = reader_start(pool, pool->nodes[n])) != 0)
            return rc;
    }
    return 0;
}

void pp__swap_close(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || node->sw.sdir == NULL)
            continue;
        reader_stop(node);
        for (uint32_t s = 0; s < PP__SEG_MAX; s++)
            pp__alloc_free(pp__atomic_load_relaxed(&node->sw.sdir[s]));
        pp__alloc_free((void *)node->sw.sdir);
        node->sw.sdir = NULL;
        pp__alloc_free(node->sw.ext);
        node->sw.ext = NULL;
        pthread_mutex_destroy(&node->sw.space_lock);
        pp__busy_destroy(node);
    }
    if (pool->dev != NULL)
        pool->dev->close(pool->dev);
    pool->dev = NULL;
}

const pp__swaprec_t *pp__swap_rec_find(pp__node_t *node, uint32_t slot)
{
    return rec_of(node, slot, false);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

struct pp_writer {
    pp__entry_t *e;
    uint64_t claimed;                    /* the word the eviction claimed */
    char *buf;                           /* what save wrote so far */
    size_t len, cap;
    int err;                             /* first error, sticky */
};

/* A pin (or get, or release) since the claim: the eviction is lost. */
static bool claim_lost(pp__entry_t *e, uint64_t claimed)
{
    /* relaxed: only a hint to stop early; the commit CAS decides.  No
     * entry: pp_type_pack, which has no eviction to lose. */
    return e != NULL && pp__atomic_load_relaxed(&e->pw) != claimed;
}

int pp_write(pp_writer_t *w, const void *buf, size_t n)
{
    if (w == NULL || (buf == NULL && n > 0))
        return PP_EINVAL;
    PP__YIELD(EVICT);   /* between a type's chunks */
    if (w->err == 0 && claim_lost(w->e, w->claimed))
        w->err = PP_EAGAIN;
    if (w->err != 0)
        return w->err;
    if (n > SIZE_MAX - w->len) {
        w->err = PP_ENOMEM;
        return w->err;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 65536;
        while (cap < w->len + n)
            cap = cap > SIZE_MAX / 2 ? w->len + n : cap * 2;
        char *grown = pp__alloc_resize(w->buf, cap);
        if (grown == NULL) {
            w->err = PP_ENOMEM;
            return w->err;
        }
        w->buf = grown;
        w->cap = cap;
    }
    if (n > 0)
        memcpy(w->buf + w->len, buf, n);
    w->len += n;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Device I/O                                                                */
/* ------------------------------------------------------------------------ */

/* The device's alignment (1: buffered I/O). */
static size_t store_align(const pp_pool_t *pool)
{
    return pool->dev->align > 1 ? pool->dev->align : 1;
}

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static bool is_aligned(const void *p, size_t a)
{
    return (uintptr_t)p % a == 0;
}

/* Counts an I/O error of node and reports it (the 1st, 2nd, 4th, ...: no
 * flood). */
static void io_error(pp_pool_t *pool, pp__node_t *node, const char *what, size_t n,
                     uint64_t off, ssize_t r, const char *none, const char *kept)
{
    uint64_t k = pp__atomic_add_relaxed(&node->sw.io_errors, 1) + 1;
    if ((k & (k - 1)) == 0)
        pp__report(pool, "pinpool: swap: %s of %zu bytes at %llu on node %u failed: %s "
                   "(I/O error %llu on this node; %s)", what, n, (unsigned long long)off,
                   node->index, r < 0 ? strerror((int)-r) : none, (unsigned long long)k, kept);
}

/* Writes buf[0, n) at off, all of it.  A short write goes on where it
 * stopped: in direct mode (buf, n and off aligned) from the start of the
 * block it stopped in, which the device may have written in part.  0, or
 * PP_EIO (counted and reported): a failure, or a write that made no
 * progress. */
static int write_all(pp_pool_t *pool, pp__node_t *node, const char *buf, size_t n,
                     uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        pp__busy_mark(node, true, true);
        ssize_t r = pool->dev->write(pool->dev, node->index, buf + done, n - done, off + done);
        pp__busy_mark(node, true, false);
        pp__io_count_sync(node);
        size_t next = pp__swap_progress(pool, n, n, done, r);
        if (next == done) {
            pp__swap_io_failed(pool, node, true, n - done, off + done, r);
            return PP_EIO;
        }
        done = next;
    }
    return 0;
}

/* Reads the copy's need bytes at off into buf, asking for n >= need (in
 * direct mode n, buf and off are aligned, and the bytes past need are the
 * copy's padding).  A short read goes on where it stopped (in direct mode
 * from the start of the block it stopped in).  0, or PP_EIO (counted and
 * reported): a failure, or nothing there. */
static int read_all(pp_pool_t *pool, pp__node_t *node, char *buf, size_t n, size_t need,
                    uint64_t off)
{
    size_t got = 0;
    while (got < need) {
        pp__busy_mark(node, false, true);
        ssize_t r = pool->dev->read(pool->dev, node->index, buf + got, n - got, off + got);
        pp__busy_mark(node, false, false);
        pp__io_count_sync(node);
        size_t next = pp__swap_progress(pool, n, need, got, r);
        if (next == got) {
            pp__swap_io_failed(pool, node, false, need - got, off + got, r);
            return PP_EIO;
        }
        got = next;
    }
    return 0;
}

/* The calling swap thread's bounce buffer for direct writes
 * (PP__DIRECT_CHUNK bytes, page-aligned), made on first use and freed when
 * the thread exits; NULL if it cannot be made. */
static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static bool bounce_keyed;
static _Thread_local char *bounce_buf;

static void bounce_key_make(void)
{
    bounce_keyed = pthread_key_create(&bounce_key, free) == 0;
}

static char *bounce_get(void)
{
    if (bounce_buf != NULL)
        return bounce_buf;
    (void)pthread_once(&bounce_once, bounce_key_make);
    void *p = NULL;
    if (!bounce_keyed || !pp__alloc_note() ||
        posix_memalign(&p, PP__PAGE, PP__DIRECT_CHUNK) != 0)
        return NULL;
    if (pthread_setspecific(bounce_key, p) != 0) {
        free(p);
        return NULL;
    }
    bounce_buf = p;
    return bounce_buf;
}

/* Writes src[0, n) at off (aligned) in direct mode through the bounce
 * buffer (n <= PP__DIRECT_CHUNK), copying and hashing it in cache-sized
 * steps, the last block padded with zeros. */
static int write_bounced(pp_pool_t *pool, pp__node_t *node, char *bounce, XXH3_state_t *xs,
                         const char *src, size_t n, uint64_t off)
{
    for (size_t k = 0; k < n; k += PP__WRITE_CHUNK) {
        size_t m = n - k < PP__WRITE_CHUNK ? n - k : PP__WRITE_CHUNK;
        memcpy(bounce + k, src + k, m);
        (void)XXH3_64bits_update(xs, bounce + k, m);
    }
    size_t padded = align_up(n, store_align(pool));
    memset(bounce + n, 0, padded - n);
    return write_all(pool, node, bounce, padded, off);
}

/* Writes out[0, len) at off, hashing it into xs, in chunks that check for a
 * lost claim before each: buffered, each chunk hashed just before it is
 * written; direct, straight from memory while out is aligned and whole
 * blocks are left, the rest through the bounce buffer. */
static int write_copy(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed,
                      XXH3_state_t *xs, const char *out, size_t len, uint64_t off)
{
    size_t a = store_align(pool), chunk = a > 1 ? PP__DIRECT_CHUNK : PP__WRITE_CHUNK;
    char *bounce = NULL;
    for (size_t done = 0; done < len;) {
        PP__YIELD(EVICT);   /* between chunks of the write */
        if (claim_lost(e, claimed))
            return PP_EAGAIN;
        const char *p = out + done;
        size_t n = len - done > chunk ? chunk : len - done;
        int rc;
        if (a == 1 || (is_aligned(p, a) && n >= a)) {
            n = n / a * a;               /* direct: the tail goes next time round */
            (void)XXH3_64bits_update(xs, p, n);
            rc = write_all(pool, node, p, n, off + done);
        } else {
            if (bounce == NULL && (bounce = bounce_get()) == NULL)
                return PP_ENOMEM;
            rc = write_bounced(pool, node, bounce, xs, p, n, off + done);
        }
        if (rc != 0)
            return rc;
        done += n;
    }
    return 0;
}

/* Prepares the copy of src[0, len) into *w: compressed if asked and worth
 * it, its space handed out, its hash started.  0, or PP_ENOMEM (space or
 * memory) with nothing held. */
static int store_begin(pp_pool_t *pool, pp__node_t *node, const char *src, size_t len,
                       pp__wout_t *w)
{
    w->out = src;
    w->outlen = len;
    w->raw = len;
    w->padded = false;
    if (pool->compress && len >= 256 && len <= (size_t)LZ4_MAX_INPUT_SIZE) {
        int bound = LZ4_compressBound((int)len);
        w->cbuf = pp__alloc_io((size_t)bound, store_align(pool) > 1);
        if (w->cbuf != NULL) {
            int c = LZ4_compress_default(src, w->cbuf, (int)len, bound);
            if (c > 0 && (size_t)c <= len - len / 16) {
                w->out = w->cbuf;
                w->outlen = (size_t)c;
                /* Direct: written whole, padding included (zeros, not
                 * whatever the allocation held). */
                if (store_align(pool) > 1) {
                    memset(w->cbuf + w->outlen, 0, pages_up(w->outlen) - w->outlen);
                    w->padded = true;
                }
            }
        }
    }
    w->cap = pages_up(w->outlen);
    int rc = space_alloc(pool, node, w->cap, &w->off);
    if (rc != 0)
        return rc;
    w->xs = XXH3_createState();
    if (w->xs == NULL || XXH3_64bits_reset(w->xs) != XXH_OK) {
        space_free(pool, node, w->off, w->cap);
        return PP_ENOMEM;
    }
    return 0;
}

int pp__swap_save_begin(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed,
                        pp__wout_t *w)
{
    /* Pre (internal.h): claimed by this swap thread for a write -- EVICTING
     * with SWAPPED clear, the entry resident -- on its own node. */
    PP__ASSERT((claimed & (PP__F_LIVE | PP__F_RESIDENT | PP__F_EVICTING | PP__F_SWAPPED)) ==
               (PP__F_LIVE | PP__F_RESIDENT | PP__F_EVICTING));
    memset(w, 0, sizeof *w);
    pp__cold_t *c = pp__cold(e);
    PP__ASSERT(pool->nodes[node->index] == node && c->slot < PP__MAX_SLOTS);
    w->rec = rec_of(node, c->slot, true);
    if (w->rec == NULL)
        return PP_ENOMEM;
    const pp_type_t *type = c->type;
    int rc;
    if (type == NULL || type->save == NULL) {
        rc = store_begin(pool, node, e->data, c->size, w);
    } else {
        struct pp_writer sw = {.e = e, .claimed = claimed};
        pp__callback_enter();
        rc = type->save(e->data, c->size, &sw, type->ctx);
        pp__callback_leave();
        w->wbuf = sw.buf;
        if (rc == 0 && sw.err == 0)
            rc = store_begin(pool, node, sw.buf, sw.len, w);
        else
            rc = sw.err != 0 ? sw.err : PP_EIO;   /* save refused: a type error */
    }
    if (rc != 0) {
        XXH3_freeState(w->xs);
        free(w->cbuf);
        pp__alloc_free(w->wbuf);
        memset(w, 0, sizeof *w);
    }
    return rc;
}

void pp__swap_save_end(pp_pool_t *pool, pp__node_t *node, pp__wout_t *w, int rc)
{
    if (rc == 0) {
        w->rec->off = w->off;
        w->rec->cap = w->cap;
        w->rec->len = w->outlen;
        w->rec->raw = w->raw;
        w->rec->sum = XXH3_64bits_digest(w->xs);
        pp__atomic_add_relaxed(&node->sw.sw_written, w->outlen);
        pp__atomic_add_relaxed(&node->sw.sw_raw, w->raw);
    } else {
        space_free(pool, node, w->off, w->cap);
    }
    XXH3_freeState(w->xs);
    free(w->cbuf);
    pp__alloc_free(w->wbuf);
    memset(w, 0, sizeof *w);
}

int pp__swap_save(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed)
{
    pp__wout_t w;
    int rc = pp__swap_save_begin(pool, node, e, claimed, &w);
    if (rc != 0)
        return rc;
    if (w.padded) {
        /* All of it at once: the compressed copy is aligned and padded. */
        rc = claim_lost(e, claimed) ? PP_EAGAIN : 0;
        if (rc == 0) {
            (void)XXH3_64bits_update(w.xs, w.out, w.outlen);
            rc = write_all(pool, node, w.out, (size_t)w.cap, w.off);
        }
    } else {
        rc = write_copy(pool, node, e, claimed, w.xs, w.out, w.outlen, w.off);
    }
    pp__swap_save_end(pool, node, &w, rc);
    return rc;
}

ssize_t pp__swap_save_next(pp_pool_t *pool, pp__wout_t *w, char *bounce, const char **buf,
                           size_t *iolen)
{
    size_t a = store_align(pool);
    if (w->done >= w->outlen)
        return 0;
    if (w->padded) {
        /* The compressed copy: aligned and padded, all of it at once. */
        (void)XXH3_64bits_update(w->xs, w->out, w->outlen);
        *buf = w->out;
        *iolen = (size_t)w->cap;
        return (ssize_t)w->outlen;
    }
    const char *p = w->out + w->done;
    size_t n = w->outlen - w->done > PP__DIRECT_CHUNK ? PP__DIRECT_CHUNK : w->outlen - w->done;
    if (a == 1 || (is_aligned(p, a) && n >= a)) {
        n = n / a * a;                   /* direct: the tail goes next time round */
        (void)XXH3_64bits_update(w->xs, p, n);
        *buf = p;
        *iolen = n;
        return (ssize_t)n;
    }
    if (bounce == NULL)
        return PP_ENOMEM;
    for (size_t k = 0; k < n; k += PP__WRITE_CHUNK) {
        size_t m = n - k < PP__WRITE_CHUNK ? n - k : PP__WRITE_CHUNK;
        memcpy(bounce + k, p + k, m);
        (void)XXH3_64bits_update(w->xs, bounce + k, m);
    }
    *iolen = align_up(n, a);
    memset(bounce + n, 0, *iolen - n);
    *buf = bounce;
    return (ssize_t)n;
}

size_t pp__swap_progress(const pp_pool_t *pool, size_t iolen, size_t need, size_t k, ssize_t r)
{
    size_t a = store_align(pool);
    if (r <= 0 || (size_t)r > iolen - k)
        return k;                        /* failed, nothing there, or nonsense */
    if ((size_t)r == iolen - k || k + (size_t)r >= need)
        return iolen;
    return (k + (size_t)r) / a * a;      /* direct: from the block it stopped in */
}

void pp__swap_io_failed(pp_pool_t *pool, pp__node_t *node, bool write, size_t n, uint64_t off,
                        ssize_t r)
{
    if (write)
        io_error(pool, node, "write", n, off, r < 0 ? r : 0, "no progress",
                 "entry kept resident");
    else
        io_error(pool, node, "read", n, off, r < 0 ? r : 0, "copy shorter than written",
                 "copy kept");
}

void pp__swap_drop(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    pp__swaprec_t *rec = rec_of(node, pp__cold(e)->slot, false);
    PP__CHECK(rec != NULL);
    space_free(pool, node, rec->off, rec->cap);
    memset(rec, 0, sizeof *rec);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

struct pp_reader {
    const char *buf;
    size_t len, pos;
};

int pp_read(pp_reader_t *r, void *buf, size_t n)
{
    if (r == NULL || (buf == NULL && n > 0) || n > r->len - r->pos)
        return PP_EINVAL;
    if (n > 0)
        memcpy(buf, r->buf + r->pos, n);
    r->pos += n;
    return 0;
}

size_t pp_read_left(const pp_reader_t *r)
{
    return r == NULL ? 0 : r->len - r->pos;
}

/* ------------------------------------------------------------------------ */
/* A type's save and load outside swap (layers that move entries)            */
/* ------------------------------------------------------------------------ */

static bool type_packs(const pp_type_t *type)
{
    return type != NULL && type->save != NULL && type->load != NULL &&
           !(type->flags & PP_TYPE_DISCARD);
}

int pp_type_pack(const pp_type_t *type, const void *data, size_t size, void **buf, size_t *len)
{
    if (!type_packs(type) || buf == NULL || len == NULL)
        return PP_EINVAL;
    struct pp_writer w = {.e = NULL};
    pp__callback_enter();
    int rc = type->save(data, size, &w, type->ctx);
    pp__callback_leave();
    if (rc != 0 || w.err != 0) {
        pp__alloc_free(w.buf);
        return w.err == PP_ENOMEM ? PP_ENOMEM : PP_EIO;
    }
    *buf = w.buf;
    *len = w.len;
    return 0;
}

int pp_type_unpack(const pp_type_t *type, const void *buf, size_t len, size_t size, void **data)
{
    if (!type_packs(type) || (buf == NULL && len > 0) || data == NULL)
        return PP_EINVAL;
    pp_reader_t r = {buf, len, 0};
    void *d = NULL;
    pp__callback_enter();
    int rc = type->load(&d, size, &r, type->ctx);
    pp__callback_leave();
    if (rc != 0)
        return PP_EIO;
    *data = d;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The read helper                                                           */
/* ------------------------------------------------------------------------ */

/* Each node has a read helper thread, which reads the second half of a
 * large copy while the loading thread reads the first half and hashes it:
 * the two copies out of the page cache run on two CPUs at once, and the
 * loader hashes the second half once it is in.  Buffered I/O only: with
 * direct I/O the device is the limit, and two requests of 512 KiB in
 * flight were slower than one of 1 MiB (swapbench, docs/performance.md).  It serves one load at a time; a loader that finds it busy, or whose
 * request it has not taken by the time the loader's own half is done,
 * reads everything itself, so a helper that is slow to run (a busy
 * machine) never makes a load wait for it to start. */
enum { PP__RD_IDLE, PP__RD_POSTED, PP__RD_TAKEN, PP__RD_DONE };

typedef struct pp__reader {
    pthread_mutex_t lock;                /* everything below */
    pthread_cond_t cond;                 /* state changed */
    int state;                           /* PP__RD_* */
    bool stop;
    char *dst;                           /* the request: read_all's */
    size_t n, need;
    uint64_t off;
    int rc;                              /* its result, once DONE */
    pp_pool_t *pool;
    pp__node_t *node;
    pthread_t thread;
} pp__reader_t;

/* Copies from this size on are read in two halves at once. */
#define PP__SPLIT_MIN ((size_t)512 << 10)

static void *reader_main(void *arg)
{
    pp__reader_t *rd = arg;
    (void)pp__topology_bind(rd->pool, rd->node->index, false);
    pthread_mutex_lock(&rd->lock);
    for (;;) {
        while (rd->state != PP__RD_POSTED && !rd->stop)
            pthread_cond_wait(&rd->cond, &rd->lock);
        if (rd->stop)
            break;
        rd->state = PP__RD_TAKEN;
        pthread_mutex_unlock(&rd->lock);
        /* The loader does not touch dst[0, n) until DONE. */
        int rc = read_all(rd->pool, rd->node, rd->dst, rd->n, rd->need, rd->off);
        pthread_mutex_lock(&rd->lock);
        rd->rc = rc;
        rd->state = PP__RD_DONE;
        pthread_cond_broadcast(&rd->cond);
    }
    pthread_mutex_unlock(&rd->lock);
    return NULL;
}

static int reader_start(pp_pool_t *pool, pp__node_t *node)
{
    pp__reader_t *rd = pp__alloc_zeroed(1, sizeof *rd);
    if (rd == NULL)
        return PP_ENOMEM;
    rd->pool = pool;
    rd->node = node;
    if (pthread_mutex_init(&rd->lock, NULL) != 0) {
        pp__alloc_free(rd);
        return PP_ENOMEM;
    }
    if (pthread_cond_init(&rd->cond, NULL) != 0 ||
        pthread_create(&rd->thread, NULL, reader_main, rd) != 0) {
        pthread_cond_destroy(&rd->cond);     /* harmless if its init failed: never used */
        pthread_mutex_destroy(&rd->lock);
        pp__alloc_free(rd);
        return PP_ENOMEM;
    }
    node->sw.reader = rd;
    return 0;
}

static void reader_stop(pp__node_t *node)
{
    pp__reader_t *rd = node->sw.reader;
    if (rd == NULL)
        return;
    pthread_mutex_lock(&rd->lock);
    PP__CHECK(rd->state == PP__RD_IDLE);     /* no load runs at destroy */
    rd->stop = true;
    pthread_cond_broadcast(&rd->cond);
    pthread_mutex_unlock(&rd->lock);
    pthread_join(rd->thread, NULL);
    pthread_cond_destroy(&rd->cond);
    pthread_mutex_destroy(&rd->lock);
    pp__alloc_free(rd);
    node->sw.reader = NULL;
}

/* Hands the read of dst[0, n) (need bytes of copy) at off to the node's
 * helper; false if it is busy with another load. */
static bool reader_post(pp__reader_t *rd, char *dst, size_t n, size_t need, uint64_t off)
{
    if (rd == NULL)
        return false;
    pthread_mutex_lock(&rd->lock);
    bool posted = rd->state == PP__RD_IDLE && !rd->stop;
    if (posted) {
        rd->dst = dst;
        rd->n = n;
        rd->need = need;
        rd->off = off;
        rd->state = PP__RD_POSTED;
        pthread_cond_signal(&rd->cond);
    }
    pthread_mutex_unlock(&rd->lock);
    return posted;
}

/* Ends a posted read: its result if the helper took it (waiting for it to
 * finish), or 1 if it had not started (withdrawn: the caller reads it). */
static int reader_end(pp__reader_t *rd)
{
    pthread_mutex_lock(&rd->lock);
    int rc = 1;
    if (rd->state != PP__RD_POSTED) {
        while (rd->state != PP__RD_DONE)
            pthread_cond_wait(&rd->cond, &rd->lock);
        rc = rd->rc;
    }
    rd->state = PP__RD_IDLE;
    pthread_mutex_unlock(&rd->lock);
    return rc;
}

/* Reads dst[from, to) of the copy at off (from aligned), hashing each
 * chunk just after it is read, while it is still in cache. */
static int fetch_part(pp_pool_t *pool, pp__node_t *node, uint64_t off, char *dst, size_t from,
                      size_t to, XXH3_state_t *xs)
{
    size_t a = store_align(pool), chunk = a > 1 ? PP__DIRECT_CHUNK : PP__READ_CHUNK;
    for (size_t done = from; done < to;) {
        size_t want = to - done > chunk ? chunk : to - done;
        int rc = read_all(pool, node, dst + done, align_up(want, a), want, off + done);
        if (rc != 0)
            return rc;
        (void)XXH3_64bits_update(xs, dst + done, want);
        done += want;
    }
    return 0;
}

/* Reads the copy of len bytes at off into dst (from pp__alloc_io, of at
 * least len bytes, whole pages in direct mode), hashing it; a large copy
 * in two halves at once, the second by the node's read helper.  0,
 * PP_EIO or PP_ENOMEM. */
static int fetch(pp_pool_t *pool, pp__node_t *node, uint64_t off, char *dst, size_t len,
                 uint64_t *sum)
{
    XXH3_state_t *xs = XXH3_createState();
    if (xs == NULL || XXH3_64bits_reset(xs) != XXH_OK) {
        XXH3_freeState(xs);
        return PP_ENOMEM;
    }
    size_t a = store_align(pool), mid = len;
    if (a == 1 && len >= PP__SPLIT_MIN) {
        mid = len / 2 / PP__READ_CHUNK * PP__READ_CHUNK;
        if (!reader_post(node->sw.reader, dst + mid, align_up(len - mid, a), len - mid,
                         off + mid))
            mid = len;
    }
    int rc = fetch_part(pool, node, off, dst, 0, mid, xs);
    if (mid < len) {
        int hrc = reader_end(node->sw.reader);
        if (rc == 0 && hrc == 1)         /* withdrawn: not started */
            rc = fetch_part(pool, node, off, dst, mid, len, xs);
        else if (rc == 0 && (rc = hrc) == 0)
            (void)XXH3_64bits_update(xs, dst + mid, len - mid);
    }
    if (rc == 0)
        *sum = XXH3_64bits_digest(xs);
    XXH3_freeState(xs);
    return rc;
}

/* Counts a copy that failed its check, and reports it as io_error
 * reports I/O errors: the 1st, 2nd, 4th, 8th... of the node, so that a
 * copy pinned again and again (a remote rank's pins of it, say) cannot
 * flood the report hook; the count is in the line and in the stats. */
static int corrupt(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, const char *why)
{
    uint64_t k = pp__atomic_add_relaxed(&node->sw.csum_fail, 1) + 1;
    if ((k & (k - 1)) == 0)
        pp__report(pool, "pinpool: swap: the copy of node %u slot %u %s; not loaded "
                   "(checksum failure %llu on this node; copy kept)",
                   node->index, pp__cold(e)->slot, why, (unsigned long long)k);
    return PP_ECORRUPT;
}

int pp__swap_load_begin(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, pp__lin_t *l,
                        void *spare)
{
    /* Pre (internal.h): LOADING held on a swapped entry, not resident. */
    PP__ASSERT((pp__atomic_load_relaxed(&e->pw) &
                (PP__F_LOADING | PP__F_SWAPPED | PP__F_RESIDENT)) ==
               (PP__F_LOADING | PP__F_SWAPPED));
    memset(l, 0, sizeof *l);
    pp__cold_t *c = pp__cold(e);
    l->rec = rec_of(node, c->slot, false);
    PP__CHECK(l->rec != NULL);
    const pp_type_t *type = c->type;
    l->custom = type != NULL && type->load != NULL;
    PP__CHECK(spare == NULL || !l->custom);   /* spare: flat data only */
    l->len = l->rec->len;
    l->iolen = align_up(l->len, store_align(pool));
    l->off = l->rec->off;
    if (!l->custom) {
        if (l->rec->raw != c->size) {
            free(spare);
            return corrupt(pool, node, e, "has the wrong length");
        }
        l->mem = spare != NULL ? spare : pp__alloc_io(c->size, store_align(pool) > 1);
        if (l->mem == NULL)
            return PP_ENOMEM;
        if (l->rec->len == l->rec->raw) {
            l->dst = l->mem;             /* flat and raw: straight into it */
            return 0;
        }
    }
    l->stored = pp__alloc_io(l->len, store_align(pool) > 1);
    if (l->stored == NULL) {
        free(l->mem);
        l->mem = NULL;
        return PP_ENOMEM;
    }
    l->dst = l->stored;
    return 0;
}

int pp__swap_load_end(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, pp__lin_t *l, int rc,
                      const uint64_t *sum, void **data)
{
    const pp__swaprec_t *rec = l->rec;
    if (rc == 0) {
        pp__atomic_add_relaxed(&node->sw.sw_read, l->len);
        uint64_t got = sum != NULL ? *sum : XXH3_64bits(l->dst, l->len);
        if (got != rec->sum)
            rc = corrupt(pool, node, e, "failed its checksum");
    }
    const pp_type_t *type = pp__cold(e)->type;
    char *plain = NULL;
    if (rc == 0 && l->stored != NULL && rec->len < rec->raw) {
        plain = l->custom ? pp__alloc_bytes(rec->raw) : l->mem;
        if (plain == NULL)
            rc = PP_ENOMEM;
        else if (LZ4_decompress_safe(l->stored, plain, (int)rec->len, (int)rec->raw) !=
                 (int)rec->raw)
            rc = corrupt(pool, node, e, "does not decompress");
    }
    if (rc == 0 && l->custom) {
        pp_reader_t r = {plain != NULL ? plain : l->stored, rec->raw, 0};
        pp__callback_enter();
        int lrc = type->load(data, pp__cold(e)->size, &r, type->ctx);
        pp__callback_leave();
        if (lrc != 0) {
            pp__report(pool, "pinpool: swap: type %s: load failed for node %u slot %u",
                       type->name != NULL ? type->name : "(unnamed)", node->index,
                       pp__cold(e)->slot);
            rc = PP_EIO;
        }
    } else if (rc == 0) {
        *data = l->mem;
    }
    if (l->custom)
        pp__alloc_free(plain);
    free(l->stored);
    if (rc != 0)
        free(l->mem);
    memset(l, 0, sizeof *l);
    return rc;
}

int pp__swap_load(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, void **data)
{
    pp__lin_t l;
    int rc = pp__swap_load_begin(pool, node, e, &l, NULL);
    if (rc != 0)
        return rc;
    uint64_t sum = 0;
    rc = fetch(pool, node, l.off, l.dst, l.len, &sum);
    return pp__swap_load_end(pool, node, e, &l, rc, &sum, data);
}
