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
 */
#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>   /* XXH3 with the widest SIMD this CPU has */
#endif

#include "internal.h"
#include "swapdev.h"

#define PP__PAGE      4096u
/* Writes go in chunks that stay in the L2 cache between their hash and
 * their copy into the page cache, and are the unit in which a pin stops a
 * write-out; reads go in larger chunks (fewer calls; the hash follows the
 * read).  Chosen with swapbench: 256 KiB writes beat 1 MiB ones, 1 MiB
 * reads beat 256 KiB ones. */
#define PP__WRITE_CHUNK ((size_t)256 << 10)
#define PP__READ_CHUNK  ((size_t)1 << 20)

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

/* The record of a slot; created (swap thread only) when create is set. */
static pp__swaprec_t *pp__rec(pp__node_t *node, uint32_t slot, bool create)
{
    uint32_t s = slot >> PP__SEG_SHIFT;
    /* acquire: pairs with the release-install below (zeroed segment). */
    pp__swaprec_t *seg = pp__atomic_load_acquire(&node->sw.sdir[s]);
    if (seg == NULL) {
        if (!create)
            return NULL;
        seg = pp__calloc(PP__SEG_SLOTS, sizeof *seg);
        if (seg == NULL)
            return NULL;
        /* release: the zeroed segment before its pointer (only the swap
         * thread installs, so no CAS is needed). */
        pp__atomic_store_release(&node->sw.sdir[s], seg);
    }
    return &seg[slot & (PP__SEG_SLOTS - 1)];
}

bool pp__type_swappable(const pp_type_t *type)
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

static uint64_t pp__pages(uint64_t len)
{
    return (len + PP__PAGE - 1) / PP__PAGE * PP__PAGE;
}

/* Hands out cap bytes of node's stream (counted against swap_limit). */
static int pp__space_alloc(pp_pool_t *pool, pp__node_t *node, uint64_t cap, uint64_t *off)
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

/* Gives back what pp__space_alloc handed out, with its accounting. */
static void pp__space_free(pp_pool_t *pool, pp__node_t *node, uint64_t off, uint64_t cap)
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
            pp__extent_t *grown = pp__realloc(node->sw.ext, ncap * sizeof *grown);
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

/* ------------------------------------------------------------------------ */
/* Open, close                                                               */
/* ------------------------------------------------------------------------ */

int pp__swap_open(pp_pool_t *pool, const pp_options_t *opt, pp__swapdev_t *dev)
{
    pool->dev = dev;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        node->sw.sdir = pp__calloc(PP__SEG_MAX, sizeof *node->sw.sdir);
        if (node->sw.sdir == NULL || pthread_mutex_init(&node->sw.space_lock, NULL) != 0) {
            pp__free((void *)node->sw.sdir);
            node->sw.sdir = NULL;
            return PP_ENOMEM;
        }
    }
    int rc = dev->open(dev, opt->swap_dir, pool->nnodes);
    if (rc != 0) {
        pp__report(pool, "pinpool: swap: cannot make the swap store under %s: %s",
                   opt->swap_dir, strerror(-rc));
        return rc == -ENOMEM ? PP_ENOMEM : PP_EIO;
    }
    return 0;
}

void pp__swap_close(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || node->sw.sdir == NULL)
            continue;
        for (uint32_t s = 0; s < PP__SEG_MAX; s++)
            pp__free(pp__atomic_load_relaxed(&node->sw.sdir[s]));
        pp__free((void *)node->sw.sdir);
        node->sw.sdir = NULL;
        pp__free(node->sw.ext);
        node->sw.ext = NULL;
        pthread_mutex_destroy(&node->sw.space_lock);
    }
    if (pool->dev != NULL)
        pool->dev->close(pool->dev);
    pool->dev = NULL;
}

const pp__swaprec_t *pp__swap_rec_find(pp__node_t *node, uint32_t slot)
{
    return pp__rec(node, slot, false);
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
static bool pp__claim_lost(pp__entry_t *e, uint64_t claimed)
{
    /* relaxed: only a hint to stop early; the commit CAS decides. */
    return pp__atomic_load_relaxed(&e->pw) != claimed;
}

int pp_write(pp_writer_t *w, const void *buf, size_t n)
{
    if (w == NULL || (buf == NULL && n > 0))
        return PP_EINVAL;
    PP__YIELD(EVICT);   /* between a type's chunks */
    if (w->err == 0 && pp__claim_lost(w->e, w->claimed))
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
        char *grown = pp__realloc(w->buf, cap);
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

/* Writes src[0, len) as the entry's copy: compressed if asked and worth it,
 * hashed chunk by chunk, in chunks that check for a lost claim. */
static int pp__store(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed,
                     pp__swaprec_t *rec, const char *src, size_t len)
{
    char *cbuf = NULL;
    const char *out = src;
    size_t outlen = len;
    if (pool->compress && len >= 256 && len <= (size_t)LZ4_MAX_INPUT_SIZE) {
        int bound = LZ4_compressBound((int)len);
        cbuf = pp__malloc((size_t)bound);
        if (cbuf != NULL) {
            int c = LZ4_compress_default(src, cbuf, (int)len, bound);
            if (c > 0 && (size_t)c <= len - len / 16) {
                out = cbuf;
                outlen = (size_t)c;
            }
        }
    }
    uint64_t cap = pp__pages(outlen), off;
    int rc = pp__space_alloc(pool, node, cap, &off);
    if (rc != 0) {
        pp__free(cbuf);
        return rc;
    }
    XXH3_state_t *xs = XXH3_createState();
    if (xs == NULL || XXH3_64bits_reset(xs) != XXH_OK) {
        XXH3_freeState(xs);
        pp__free(cbuf);
        pp__space_free(pool, node, off, cap);
        return PP_ENOMEM;
    }
    size_t done = 0, chunk_end = 0;
    while (done < outlen) {
        if (done == chunk_end) {
            PP__YIELD(EVICT);   /* between chunks of the write */
            if (pp__claim_lost(e, claimed)) {
                rc = PP_EAGAIN;
                break;
            }
            chunk_end = outlen - done > PP__WRITE_CHUNK ? done + PP__WRITE_CHUNK : outlen;
            (void)XXH3_64bits_update(xs, out + done, chunk_end - done);
        }
        ssize_t r = pool->dev->write(pool->dev, node->index, out + done, chunk_end - done,
                                     off + done);
        if (r <= 0) {
            uint64_t k = pp__atomic_add_relaxed(&node->sw.io_errors, 1) + 1;
            if ((k & (k - 1)) == 0)      /* 1st, 2nd, 4th, ...: no flood */
                pp__report(pool, "pinpool: swap: write of %zu bytes at %llu on node %u "
                           "failed: %s (I/O error %llu on this node; entry kept resident)",
                           chunk_end - done, (unsigned long long)(off + done), node->index,
                           r < 0 ? strerror((int)-r) : "no progress", (unsigned long long)k);
            rc = PP_EIO;
            break;
        }
        done += (size_t)r;
    }
    if (rc == 0) {
        rec->off = off;
        rec->cap = cap;
        rec->len = outlen;
        rec->raw = len;
        rec->sum = XXH3_64bits_digest(xs);
        pp__atomic_add_relaxed(&node->sw.sw_written, outlen);
        pp__atomic_add_relaxed(&node->sw.sw_raw, len);
    } else {
        pp__space_free(pool, node, off, cap);
    }
    XXH3_freeState(xs);
    pp__free(cbuf);
    return rc;
}

int pp__swap_save(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, uint64_t claimed)
{
    /* Pre (internal.h): claimed by this swap thread for a write -- EVICTING
     * with SWAPPED clear, the entry resident -- on its own node. */
    PP__ASSERT((claimed & (PP__F_LIVE | PP__F_RESIDENT | PP__F_EVICTING | PP__F_SWAPPED)) ==
               (PP__F_LIVE | PP__F_RESIDENT | PP__F_EVICTING));
    PP__ASSERT(pool->nodes[node->index] == node && e->slot < PP__MAX_SLOTS);
    pp__swaprec_t *rec = pp__rec(node, e->slot, true);
    if (rec == NULL)
        return PP_ENOMEM;
    const pp_type_t *type = e->type;
    if (type == NULL || type->save == NULL)
        return pp__store(pool, node, e, claimed, rec, e->data, e->size);
    struct pp_writer w = {.e = e, .claimed = claimed};
    int rc = type->save(e->data, e->size, &w, type->ctx);
    if (rc == 0 && w.err == 0)
        rc = pp__store(pool, node, e, claimed, rec, w.buf, w.len);
    else
        rc = w.err != 0 ? w.err : PP_EIO;   /* save refused: a type error */
    pp__free(w.buf);
    return rc;
}

void pp__swap_drop(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e)
{
    pp__swaprec_t *rec = pp__rec(node, e->slot, false);
    PP__CHECK(rec != NULL);
    pp__space_free(pool, node, rec->off, rec->cap);
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

/* Reads len bytes at off into dst, hashing them; 0 or PP_EIO. */
static int pp__fetch(pp_pool_t *pool, pp__node_t *node, uint64_t off, char *dst, size_t len,
                     uint64_t *sum)
{
    XXH3_state_t *xs = XXH3_createState();
    if (xs == NULL || XXH3_64bits_reset(xs) != XXH_OK) {
        XXH3_freeState(xs);
        return PP_ENOMEM;
    }
    size_t done = 0;
    int rc = 0;
    while (done < len) {
        size_t want = len - done > PP__READ_CHUNK ? PP__READ_CHUNK : len - done;
        size_t got = 0;
        while (got < want) {
            ssize_t r = pool->dev->read(pool->dev, node->index, dst + done + got, want - got,
                                        off + done + got);
            if (r <= 0) {
                uint64_t k = pp__atomic_add_relaxed(&node->sw.io_errors, 1) + 1;
                if ((k & (k - 1)) == 0)
                    pp__report(pool, "pinpool: swap: read of %zu bytes at %llu on node %u "
                               "failed: %s (I/O error %llu on this node; copy kept)",
                               want - got, (unsigned long long)(off + done + got), node->index,
                               r < 0 ? strerror((int)-r) : "copy shorter than written",
                               (unsigned long long)k);
                rc = PP_EIO;
                goto out;
            }
            got += (size_t)r;
        }
        (void)XXH3_64bits_update(xs, dst + done, want);
        done += want;
    }
    *sum = XXH3_64bits_digest(xs);
    pp__atomic_add_relaxed(&node->sw.sw_read, len);
out:
    XXH3_freeState(xs);
    return rc;
}

static int pp__corrupt(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, const char *why)
{
    pp__atomic_add_relaxed(&node->sw.csum_fail, 1);
    pp__report(pool, "pinpool: swap: the copy of node %u slot %u %s; not loaded",
               node->index, e->slot, why);
    return PP_ECORRUPT;
}

int pp__swap_load(pp_pool_t *pool, pp__node_t *node, pp__entry_t *e, void **data)
{
    /* Pre (internal.h): the caller holds LOADING on a swapped entry that is
     * not resident. */
    PP__ASSERT((pp__atomic_load_relaxed(&e->pw) &
                (PP__F_LOADING | PP__F_SWAPPED | PP__F_RESIDENT)) ==
               (PP__F_LOADING | PP__F_SWAPPED));
    const pp__swaprec_t *rec = pp__rec(node, e->slot, false);
    PP__CHECK(rec != NULL);
    const pp_type_t *type = e->type;
    bool custom = type != NULL && type->load != NULL;
    uint64_t sum = 0;
    int rc;
    void *mem = NULL;
    if (!custom) {
        /* malloc, not posix_memalign: glibc reuses the chunks evictions
         * just freed for malloc, while aligned requests of 1 MiB grow and
         * trim the heap (a brk and ~50 page faults) on every load. */
        mem = pp__malloc(e->size > 0 ? e->size : 1);
        if (mem == NULL)
            return PP_ENOMEM;
        if (rec->raw != e->size) {
            free(mem);
            return pp__corrupt(pool, node, e, "has the wrong length");
        }
    }
    if (!custom && rec->len == rec->raw) {
        /* Flat and raw: straight into the entry's new memory. */
        rc = pp__fetch(pool, node, rec->off, mem, rec->len, &sum);
        if (rc == 0 && sum != rec->sum)
            rc = pp__corrupt(pool, node, e, "failed its checksum");
        if (rc != 0) {
            free(mem);
            return rc;
        }
        *data = mem;
        return 0;
    }
    char *stored = pp__malloc(rec->len > 0 ? rec->len : 1);
    char *plain = NULL;
    if (stored == NULL) {
        free(mem);
        return PP_ENOMEM;
    }
    rc = pp__fetch(pool, node, rec->off, stored, rec->len, &sum);
    if (rc == 0 && sum != rec->sum)
        rc = pp__corrupt(pool, node, e, "failed its checksum");
    if (rc == 0 && rec->len < rec->raw) {
        plain = custom ? pp__malloc(rec->raw) : mem;
        if (plain == NULL)
            rc = PP_ENOMEM;
        else if (LZ4_decompress_safe(stored, plain, (int)rec->len, (int)rec->raw) != (int)rec->raw)
            rc = pp__corrupt(pool, node, e, "does not decompress");
    }
    if (rc == 0 && custom) {
        pp_reader_t r = {plain != NULL ? plain : stored, rec->raw, 0};
        if (type->load(data, e->size, &r, type->ctx) != 0) {
            pp__report(pool, "pinpool: swap: type %s: load failed for node %u slot %u",
                       type->name != NULL ? type->name : "(unnamed)", node->index, e->slot);
            rc = PP_EIO;
        }
    } else if (rc == 0) {
        *data = mem;
    }
    if (custom)
        pp__free(plain);
    pp__free(stored);
    if (rc != 0 && !custom)
        free(mem);
    return rc;
}

