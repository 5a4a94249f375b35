/*
 * stress/torture/types.c -- the callbacks of the torture's two types (they
 * run on pool threads): the free function, which checks the free-once
 * invariant of every data block (main.c), and the swappable type's save
 * and load, which check that no write is lost and that the copy comes
 * back as it was written.
 */
#include "torture.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The entry a buffer names (its first 8 bytes), or NULL. */
static rec_t *rec_of_data(const void *data, uint64_t *kout)
{
    uint64_t k;
    memcpy(&k, data, 8);
    *kout = k;
    return k < atomic_load(&g_recs.nids) ? rec_get(k) : NULL;
}

static void stress_free(void *data, size_t size, void *ctx)
{
    if (ctx != (void *)&g_recs.nids)
        failf(NULL, "free function got ctx %p, expected %p", ctx, (void *)&g_recs.nids);
    if (tl_user)
        failf(NULL, "free function called on a user thread (it runs on pool threads only)");
    if (data == NULL || size < 16) {
        failf(NULL, "free function called with data %p size %zu", data, size);
        return;
    }
    re_on_free();                        /* --reentrant: may call the pool */
    uint64_t k;
    rec_t *r = rec_of_data(data, &k);
    blk_t *b = blk_of(data);
    if (r == NULL || b->magic != BLK_LIVE || b->k != k) {
        failf(NULL, "free function: buffer %p (size %zu) names no live block (header %#" PRIx64
              ", block magic %#" PRIx64 " k %" PRIu64 ")", data, size, k, b->magic, b->k);
        return;
    }
    unsigned kind = rec_kind(r);
    uint32_t f = atomic_fetch_add_explicit(&r->frees, 1, memory_order_acq_rel) + 1;
    uint32_t made = atomic_load(&r->blocks);
    if (kind == KIND_FLAT)
        failf(NULL, "entry %" PRIu64 " of type NULL freed with the free function of a type", k);
    if (f > made) {
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 "): free function called %u times for "
              "%u block(s) made", k, rec_ref(r), f, made);
        return;
    }
    /* Relaxed, as every decrement of the program's pin counts: only the
     * pool's unpin (release) and reclaim (acquire) may order a pinner's
     * uses before this free, so that TSan sees a pool that fails to
     * (seeded.relaxed_unpin) rather than the program's own ordering. */
    int32_t bp = atomic_load_explicit(&b->pins, memory_order_relaxed);
    if (bp != 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 "): block %p freed while the program "
              "holds %d pin(s) that returned it", k, rec_ref(r), data, bp);
    if (size != rec_size(r))
        failf(NULL, "entry %" PRIu64 " freed with size %zu, put with %zu", k, size, rec_size(r));
    else {
        uint32_t ver = atomic_load(&b->version);
        long off = verify(data, size, k, ver);
        if (off >= 0)
            failf(NULL, "entry %" PRIu64 " corrupted when freed: byte %ld of %zu is %#x "
                  "(version %u)", k, off, size, ((unsigned char *)data)[off], ver);
    }
    int tid = (int)syscall(SYS_gettid);
    unsigned node = rec_node(r);
    int reclaim = node < g_nnodes && tid == g_rtid[node];
    for (unsigned n = 0; n < g_nnodes && !reclaim; n++)
        if (tid == g_rtid[n])
            failf(NULL, "entry %" PRIu64 " of node %u freed on node %u's reclaimer", k, node, n);
    if (reclaim) {
        uint32_t z = 0;
        /* release: pairs with find_stale's acquire (the entry is gone) */
        if (!atomic_compare_exchange_strong_explicit(&r->reclaimed, &z, 1, memory_order_acq_rel,
                                                     memory_order_relaxed))
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") reclaimed twice", k, rec_ref(r));
        if (atomic_load(&r->state) != REC_LIVE)
            failf(NULL, "entry %" PRIu64 " reclaimed but its pp_put never returned success", k);
        int32_t o = atomic_load(&r->owners), p = atomic_load_explicit(&r->pins, memory_order_relaxed);
        int32_t q = atomic_load(&r->qsbr);
        rec_check_free_holders(k, rec_ref(r), o, p, q, "");
        atomic_store(&r->free_tid, tid);
        if (atomic_load(&r->forever))
            budget_put(&g_forever_bytes, (int64_t)size);
        atomic_fetch_add(&g_frees_node[node], 1);
        atomic_fetch_add(&g_frees_total, 1);
    } else {
        /* An eviction: only on the entry's swap thread, never for data the
         * pool must keep resident. */
        if (!g_swap)
            failf(NULL, "entry %" PRIu64 " of node %u freed on thread %d, not on the node's "
                  "reclaimer %d, in a pool without swap", k, node, tid,
                  node < g_nnodes ? g_rtid[node] : -1);
        else if (kind != KIND_SWAP)
            failf(NULL, "entry %" PRIu64 " of a type that is never evicted (no save/load) "
                  "freed outside its reclaimer (thread %d)", k, tid);
        if (atomic_load(&b->escaped))
            failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 "): block %p returned by pp_get "
                  "(escaped: never evicted) freed by an eviction", k, rec_ref(r), data);
        atomic_fetch_add(&r->evict_frees, 1);
        atomic_fetch_add(&g_evict_frees, 1);
    }
    blk_del(data, size);
}

#define TRAILER_MAGIC 0x7A11E5u
typedef struct trailer { uint64_t k; uint32_t version; uint32_t magic; } trailer_t;

/* Writes the entry in chunks of random sizes, then a trailer naming the
 * version: the copy's length is not the entry's size. */
int stress_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    atomic_fetch_add(&g_saves, 1);
    if (ctx != (void *)&g_recs.nids)
        failf(NULL, "save got ctx %p, expected %p", ctx, (void *)&g_recs.nids);
    if (tl_user)
        failf(NULL, "save called on a user thread (evictions run on the swap threads)");
    if (data == NULL || size < 16) {
        failf(NULL, "save called with data %p size %zu", data, size);
        return 1;
    }
    uint64_t k;
    rec_t *r = rec_of_data(data, &k);
    const blk_t *b = blk_of(data);
    if (r == NULL || b->magic != BLK_LIVE || b->k != k || rec_kind(r) != KIND_SWAP ||
        size != rec_size(r)) {
        failf(NULL, "save: buffer %p (size %zu) names no live block of a swappable entry "
              "(header %#" PRIx64 ")", data, size, k);
        return 1;
    }
    /* No pin is held: the bytes are the entry's last version. */
    uint32_t ver = atomic_load(&r->version);
    uint32_t bver = atomic_load(&b->version);
    long off = verify(data, size, k, ver);
    if (bver != ver || off >= 0) {
        failf(NULL, "save of entry %" PRIu64 " (ref %#" PRIx64 "): block version %u, entry "
              "version %u, first wrong byte %ld (a write under a pin lost, or the data changed "
              "while unpinned)", k, rec_ref(r), bver, ver, off);
        return 1;
    }
    uint64_t x = mix3(k, ver, atomic_load(&g_saves));
    size_t done = 0;
    int rc = 0;
    while (done < size && rc == 0) {
        size_t n = 1 + (size_t)(splitmix64(&x) % (size / 3 + 1));
        if (n > size - done)
            n = size - done;
        rc = pp_write(w, (const char *)data + done, n);
        done += n;
        if (rc == 0 && (splitmix64(&x) & 15) == 0)
            rc = pp_write(w, NULL, 0);
    }
    trailer_t tr = { k, ver, TRAILER_MAGIC };
    if (rc == 0)
        rc = pp_write(w, &tr, sizeof tr);
    if (rc == PP_EAGAIN) {               /* pinned meanwhile: abandon */
        atomic_fetch_add(&g_saves_lost, 1);
        return 1;
    }
    if (rc != 0) {
        if (!(rc == PP_EIO && g_swap_limit != 0) && !(g_faults && rc == PP_ENOMEM))
            failf(NULL, "pp_write in save of entry %" PRIu64 ": %s", k, pp_err_name(rc));
        return 1;
    }
    atomic_fetch_add(&g_saves_ok, 1);
    return 0;
}

static int stress_load(void **data, size_t size, pp_reader_t *rd, void *ctx)
{
    atomic_fetch_add(&g_load_calls, 1);
    if (ctx != (void *)&g_recs.nids)
        failf(NULL, "load got ctx %p, expected %p", ctx, (void *)&g_recs.nids);
    size_t left = pp_read_left(rd);
    if (data == NULL || size < 16 || left != size + sizeof(trailer_t)) {
        failf(NULL, "load called with data %p size %zu and %zu bytes to read (save wrote %zu)",
              (void *)data, size, left, size + sizeof(trailer_t));
        return 1;
    }
    unsigned char *d = blk_new(0, size, 0, 1);
    uint64_t x = mix3(size, left, 0x10ADu);
    size_t done = 0;
    while (done < size) {
        size_t n = 1 + (size_t)(splitmix64(&x) % (size / 2 + 1));
        if (n > size - done)
            n = size - done;
        int rc = pp_read(rd, d + done, n);
        if (rc != 0) {
            failf(NULL, "pp_read of %zu bytes at %zu of %zu: %s", n, done, size, pp_err_name(rc));
            blk_del(d, size);
            return 1;
        }
        done += n;
    }
    trailer_t tr;
    unsigned char extra;
    int rc = pp_read(rd, &tr, sizeof tr);
    int rc2 = pp_read(rd, &extra, 1);
    if (rc != 0 || rc2 != PP_EINVAL || pp_read_left(rd) != 0) {
        failf(NULL, "load: trailer pp_read %s, read past the end %s (expected PP_EINVAL), "
              "%zu left", pp_err_name(rc), pp_err_name(rc2), pp_read_left(rd));
        blk_del(d, size);
        return 1;
    }
    uint64_t k;
    rec_t *r = rec_of_data(d, &k);
    if (r == NULL || rec_kind(r) != KIND_SWAP || rec_size(r) != size) {
        failf(NULL, "load: the copy names entry %" PRIu64 " (size %zu), not a swappable entry "
              "of that size", k, size);
        blk_del(d, size);
        return 1;
    }
    /* The entry is not resident, so nobody can be writing it: the copy
     * must be of its last version (a lost write shows here). */
    uint32_t ver = atomic_load(&r->version);
    long off = verify(d, size, k, ver);
    if (tr.k != k || tr.version != ver || tr.magic != TRAILER_MAGIC || off >= 0)
        failf(NULL, "load of entry %" PRIu64 " (ref %#" PRIx64 "): copy of version %u "
              "(trailer k %" PRIu64 " magic %#x), entry is at version %u, first wrong byte %ld",
              k, rec_ref(r), tr.version, tr.k, tr.magic, ver, off);
    blk_t *b = blk_of(d);
    b->k = k;
    atomic_store_explicit(&b->version, ver, memory_order_relaxed);
    /* Counted before the pool can see the block (and free it). */
    atomic_fetch_add(&r->blocks, 1);
    atomic_fetch_add(&r->loads, 1);
    *data = d;
    return 0;
}

const pp_type_t g_type = {
    "stress", stress_free, NULL, NULL, (void *)&g_recs.nids, 0u
};

const pp_type_t g_swap_type = {
    "stress-swap", stress_free, stress_save, stress_load, (void *)&g_recs.nids, 0u
};
