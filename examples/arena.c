/*
 * pinpool-arena -- data kept in a separately managed arena, swapped through
 * host memory.
 *
 *   pinpool-arena [SWAP_DIR]       (default: $TMPDIR, else /tmp)
 *
 * The pattern: a type whose payload does not live in the host heap (a GPU
 * array, a buffer in a device or a remote arena).  The pool only ever sees
 * a small host-side handle (tile_dev_t) and the payload's size; the bytes
 * live in the "device", reachable only through copy calls.
 *
 *  - The device here is a stand-in: one 64 MiB mmap'd region with its own
 *    allocator and a mutex, and a CUDA-like API (arena_alloc, arena_free,
 *    arena_copy_to_host, arena_copy_from_host).  Host code never
 *    dereferences arena memory except inside those calls.
 *  - save cannot hand device memory to pp_write (a device pointer is not a
 *    host pointer), so it stages the block through a fixed host buffer,
 *    chunk by chunk: copy_to_host, then pp_write.  load does the reverse
 *    into a freshly allocated block: pp_read, then copy_from_host.  A real
 *    GPU type would use a page-locked staging buffer per thread or stream.
 *  - Which thread runs what: save runs on a node's swap thread; load runs
 *    on the thread whose pp_pin finds the entry swapped out (or on the swap
 *    thread after pp_prefetch); free runs on the swap thread after an
 *    eviction and on the reclaimer thread when the entry dies -- never on
 *    the application thread that dropped the last pin or owner.  Several of
 *    them run at once, hence the arena's mutex and per-thread staging.  The
 *    program counts which threads ran which callback and prints it.
 *  - save, load and free may call the pool for entries other than their
 *    own (put, release, pin...), as docs/api.md's "Callbacks" says, and no
 *    call made inside them waits: a pin of an entry not in memory, or a
 *    put short of room, returns PP_EAGAIN.  They must not wait for a
 *    thread that may be waiting in the pool, which may be waiting for the
 *    pool thread they run on: the arena's mutex is never held across a
 *    pool call.  These ones need only pp_write, pp_read and pp_read_left.
 *
 * Main puts 32 tiles of 256 KiB under a 2 MiB memory limit, so most of them
 * live in swap; worker threads pin random tiles, check every byte, and
 * sometimes rewrite a tile with a new version.  Exit status 0 only if every
 * check holds, including: swapping happened, and the arena ends with no
 * live block (each incarnation of each tile was freed exactly once).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pinpool.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTILES      32
#define TILE_BYTES  ((size_t)256 << 10)
#define MEM_LIMIT   ((size_t)2 << 20)
#define NTHREADS    4
#define NTASKS      300                   /* per worker */
#define STAGE_BYTES ((size_t)64 << 10)    /* host staging buffer */
#define CHUNK(len, off) ((len) - (off) < STAGE_BYTES ? (len) - (off) : STAGE_BYTES)
#define U(x) ((unsigned long long)(x))

static atomic_int g_failed;               /* failed checks so far */

/* One line per failed check, printed in one call (threads may race). */
__attribute__((format(printf, 1, 2))) static void FAIL(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&g_failed, 1);
    printf("check failed: %s\n", line);
    fflush(stdout);
}

/* ---- the "device": an arena of fixed-size blocks ------------------------- */

#define ARENA_BYTES  ((size_t)64 << 20)
#define ARENA_BLOCK  ((size_t)256 << 10)  /* largest allocation */
#define ARENA_BLOCKS (ARENA_BYTES / ARENA_BLOCK)

typedef uint64_t arena_ptr_t;             /* a device address; 0 is none */

static struct {
    pthread_mutex_t lock;                 /* several pool threads call in at once */
    unsigned char *base;                  /* touched only by the copy calls */
    size_t len[ARENA_BLOCKS];             /* bytes of each live block; 0: free */
    uint32_t free_list[ARENA_BLOCKS], nfree;
    uint64_t live_blocks, live_bytes, peak_bytes, allocs, frees, bad_calls;
} g_arena = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int arena_init(void)
{
    void *p = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    g_arena.base = p;
    for (uint32_t b = 0; b < ARENA_BLOCKS; b++)     /* block 0 on top */
        g_arena.free_list[g_arena.nfree++] = (uint32_t)ARENA_BLOCKS - 1 - b;
    return 0;
}

static arena_ptr_t arena_alloc(size_t size)
{
    arena_ptr_t addr = 0;
    pthread_mutex_lock(&g_arena.lock);
    if (size > 0 && size <= ARENA_BLOCK && g_arena.nfree > 0) {
        uint32_t b = g_arena.free_list[--g_arena.nfree];
        g_arena.len[b] = size;
        g_arena.live_blocks++;
        g_arena.allocs++;
        if ((g_arena.live_bytes += size) > g_arena.peak_bytes)
            g_arena.peak_bytes = g_arena.live_bytes;
        addr = (arena_ptr_t)(b + 1) * ARENA_BLOCK;  /* never 0 */
    }
    pthread_mutex_unlock(&g_arena.lock);
    return addr;
}

/* The block index, or -1 (counted, reported) if addr is not a live block or
 * [off, off+n) is outside it.  Called with the lock held. */
static long arena_check(arena_ptr_t addr, size_t off, size_t n, const char *what)
{
    uint64_t b = addr / ARENA_BLOCK - 1;
    if (addr % ARENA_BLOCK == 0 && addr != 0 && b < ARENA_BLOCKS && g_arena.len[b] != 0 &&
        off <= g_arena.len[b] && n <= g_arena.len[b] - off)
        return (long)b;
    g_arena.bad_calls++;
    printf("arena: %s of a dead or unknown block %#" PRIx64 "\n", what, addr);
    return -1;
}

static void arena_free(arena_ptr_t addr)
{
    pthread_mutex_lock(&g_arena.lock);
    long b = arena_check(addr, 0, 0, "arena_free");
    if (b >= 0) {
        memset(g_arena.base + (size_t)b * ARENA_BLOCK, 0xDD, ARENA_BLOCK);   /* poison */
        g_arena.live_bytes -= g_arena.len[b];
        g_arena.len[b] = 0;
        g_arena.free_list[g_arena.nfree++] = (uint32_t)b;
        g_arena.live_blocks--;
        g_arena.frees++;
    }
    pthread_mutex_unlock(&g_arena.lock);
}

/* The "DMA engine": validates under the lock, copies without it (the caller
 * owns the block: it holds a pin, or runs as the type's save/load). */
static int arena_copy(void *host, arena_ptr_t addr, size_t off, size_t n, int to_host)
{
    pthread_mutex_lock(&g_arena.lock);
    long b = arena_check(addr, off, n, to_host ? "copy_to_host" : "copy_from_host");
    pthread_mutex_unlock(&g_arena.lock);
    if (b < 0)
        return -1;
    unsigned char *dev = g_arena.base + (size_t)b * ARENA_BLOCK + off;
    memcpy(to_host ? host : dev, to_host ? dev : host, n);
    return 0;
}

static int arena_copy_to_host(void *dst, arena_ptr_t src, size_t off, size_t n)
{
    return arena_copy(dst, src, off, n, 1);
}

static int arena_copy_from_host(arena_ptr_t dst, size_t off, const void *src, size_t n)
{
    return arena_copy((void *)src, dst, off, n, 0);
}

/* ---- the pool type: a host handle to an arena block ---------------------- */

typedef struct tile_dev {                 /* the entry's data pointer */
    arena_ptr_t block;
    size_t len;
} tile_dev_t;

/* The type's ctx: which thread ran which callback, one row per thread. */
enum { SAVE_OK, SAVE_FAILED, LOAD_OK, LOAD_FAILED, FREE, NCALLS };
typedef struct ledger {
    pthread_mutex_t lock;
    int rows;
    struct { int tid, app; unsigned long calls[NCALLS]; } row[64];
} ledger_t;

static ledger_t g_ledger = { .lock = PTHREAD_MUTEX_INITIALIZER };
static _Thread_local int tl_app_thread;   /* set by main and the workers */
static _Thread_local unsigned char tl_stage[STAGE_BYTES];   /* save/load staging */

static void ledger_add(ledger_t *l, int call)
{
    int tid = (int)syscall(SYS_gettid), i;
    pthread_mutex_lock(&l->lock);
    for (i = 0; i < l->rows && l->row[i].tid != tid; i++)
        ;
    if (i == 64) {
        i = 63;                           /* full: the last row takes the rest */
    } else if (i == l->rows) {
        l->rows++;
        l->row[i].tid = tid;
        l->row[i].app = tl_app_thread;
    }
    l->row[i].calls[call]++;
    pthread_mutex_unlock(&l->lock);
}

static void tile_free(void *data, size_t size, void *ctx)
{
    tile_dev_t *h = data;
    (void)size;
    arena_free(h->block);
    free(h);
    ledger_add(ctx, FREE);
}

static int tile_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    const tile_dev_t *h = data;
    int rc = h->len == size ? 0 : -1;
    for (size_t off = 0; rc == 0 && off < size; off += STAGE_BYTES) {
        rc = arena_copy_to_host(tl_stage, h->block, off, CHUNK(size, off));
        if (rc == 0)                      /* PP_EAGAIN: pinned meanwhile, stop */
            rc = pp_write(w, tl_stage, CHUNK(size, off));
    }
    ledger_add(ctx, rc == 0 ? SAVE_OK : SAVE_FAILED);
    return rc;                            /* nonzero: the eviction is abandoned */
}

static int tile_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    if (pp_read_left(r) != size) {        /* save wrote exactly the payload */
        printf("tile_load: %zu bytes stored, %zu expected\n", pp_read_left(r), size);
        ledger_add(ctx, LOAD_FAILED);
        return -1;
    }
    tile_dev_t *h = malloc(sizeof *h);
    arena_ptr_t block = h ? arena_alloc(size) : 0;
    int rc = block ? 0 : -1;
    for (size_t off = 0; rc == 0 && off < size; off += STAGE_BYTES) {
        rc = pp_read(r, tl_stage, CHUNK(size, off));
        if (rc == 0)
            rc = arena_copy_from_host(block, off, tl_stage, CHUNK(size, off));
    }
    if (rc != 0) {                        /* free what we took; the pool keeps its copy */
        if (block)
            arena_free(block);
        free(h);
        ledger_add(ctx, LOAD_FAILED);
        return rc;
    }
    *h = (tile_dev_t){ block, size };
    *data = h;
    ledger_add(ctx, LOAD_OK);
    return 0;
}

static const pp_type_t tile_type = { "arena-tile", tile_free, tile_save, tile_load,
                                     &g_ledger, 0u };

/* ---- tile contents: word i of version v of tile t ------------------------ */

static uint64_t pattern(unsigned t, uint32_t v, size_t i)
{
    uint64_t x = (t + 1) * 0x9E3779B97F4A7C15ull ^ v * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)i;
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;                    /* splitmix64 */
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Writes (stamp) or checks version v of tile t in its block, through the
 * host buffer buf (STAGE_BYTES).  A wrong byte is a failed check.  0: ok. */
static int tile_rw(const tile_dev_t *h, unsigned t, uint32_t v, uint64_t *buf, int stamp)
{
    if (h->len != TILE_BYTES) {
        FAIL("tile %u: handle says %zu bytes, expected %zu", t, h->len, TILE_BYTES);
        return -1;
    }
    for (size_t off = 0; off < h->len; off += STAGE_BYTES) {
        size_t n = CHUNK(h->len, off);
        if (stamp) {
            for (size_t i = 0; i < n / 8; i++)
                buf[i] = pattern(t, v, off / 8 + i);
            if (arena_copy_from_host(h->block, off, buf, n) != 0)
                return -1;
            continue;
        }
        if (arena_copy_to_host(buf, h->block, off, n) != 0)
            return -1;
        for (size_t i = 0; i < n / 8; i++)
            if (buf[i] != pattern(t, v, off / 8 + i)) {
                FAIL("tile %u: byte %zu does not hold version %" PRIu32, t, off + i * 8, v);
                return -1;
            }
    }
    return 0;
}

/* ---- the application ----------------------------------------------------- */

static pp_pool_t *g_pool;
static pp_ref_t g_refs[NTILES];
static uint32_t g_version[NTILES];            /* under g_tile_lock[t] */
static pthread_rwlock_t g_tile_lock[NTILES];  /* readers share, a writer is alone */
static atomic_ulong g_writes, g_pins;
static int g_reclaimer_tid[PP_MAX_NODES];    /* each node's, read before the pool's end */

static void *worker_main(void *arg)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * ((uint64_t)(uintptr_t)arg + 1);
    uint64_t *buf = malloc(STAGE_BYTES);
    tl_app_thread = 1;
    unsigned next = (unsigned)(x % NTILES);
    for (int task = 0; buf && task < NTASKS; task++) {
        unsigned t = next;
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;                     /* xorshift64 */
        int write = x % 4 == 0;
        next = (unsigned)((x >> 8) % NTILES);
        pp_prefetch(g_pool, g_refs[next]);    /* may load it on a swap thread */

        (write ? pthread_rwlock_wrlock : pthread_rwlock_rdlock)(&g_tile_lock[t]);
        void *data = NULL;
        int rc = pp_pin(g_pool, g_refs[t], write ? PP_PIN_WRITE : 0u, &data);
        if (rc != 0) {
            FAIL("pp_pin(tile %u): %s (%s)", t, pp_err_name(rc), pp_strerror(rc));
        } else {
            atomic_fetch_add(&g_pins, 1);
            if (tile_rw(data, t, g_version[t], buf, 0) == 0 && write) {
                if (tile_rw(data, t, ++g_version[t], buf, 1) != 0)
                    FAIL("tile %u: could not stamp version %" PRIu32, t, g_version[t]);
                atomic_fetch_add(&g_writes, 1);
            }
            if ((rc = pp_unpin(g_pool, g_refs[t])) != 0)
                FAIL("pp_unpin(tile %u): %s", t, pp_err_name(rc));
        }
        pthread_rwlock_unlock(&g_tile_lock[t]);
    }
    if (!buf)
        FAIL("worker: out of memory");
    free(buf);
    return NULL;
}

/* Put the tiles: each a fresh arena block holding version 0.  Over the
 * limit, pp_put waits for the swap threads to evict older tiles.  The
 * tiles put, or -1 if out of memory. */
static long put_tiles(uint64_t *buf, const char *swap_dir)
{
    unsigned long nput = 0;
    for (unsigned t = 0; t < NTILES; t++) {
        tile_dev_t *h = malloc(sizeof *h);
        arena_ptr_t block = h ? arena_alloc(TILE_BYTES) : 0;
        if (!block) {
            printf("pinpool-arena: out of host or arena memory\n");
            return -1;
        }
        *h = (tile_dev_t){ block, TILE_BYTES };
        tile_rw(h, t, 0, buf, 1);
        int rc;
        if ((rc = pp_put(g_pool, h, TILE_BYTES, &tile_type, 0, &g_refs[t])) == 0) {
            nput++;
            continue;
        }
        FAIL("pp_put(tile %u): %s (%s)", t, pp_err_name(rc), pp_strerror(rc));
        arena_free(block);                /* on failure the data is still ours */
        free(h);
    }
    printf("put %lu tiles of %zu KiB in arena blocks; mem_limit %zu KiB, swap under %s\n",
           nput, TILE_BYTES >> 10, MEM_LIMIT >> 10, swap_dir);
    return (long)nput;
}

/* Every tile once more; the versions must add up to the writes. */
static void check_versions(uint64_t *buf, unsigned long writes)
{
    unsigned long version_sum = 0;
    int rc;
    for (unsigned t = 0; t < NTILES; t++) {
        void *data = NULL;
        version_sum += g_version[t];
        if ((rc = pp_pin(g_pool, g_refs[t], 0, &data)) != 0) {
            FAIL("final pp_pin(tile %u): %s (%s)", t, pp_err_name(rc), pp_strerror(rc));
            continue;
        }
        tile_rw(data, t, g_version[t], buf, 0);
        if ((rc = pp_unpin(g_pool, g_refs[t])) != 0)
            FAIL("final pp_unpin(tile %u): %s", t, pp_err_name(rc));
    }
    if (version_sum != writes)
        FAIL("tile versions add up to %lu, but %lu writes were made", version_sum, writes);
}

/* Release every owner and drain: the reclaimers free what is resident.
 * Then the pool's figures (in *st), and its end. */
static void release_all(pp_stats_t *st, unsigned long writes)
{
    int rc;
    for (unsigned t = 0; t < NTILES; t++)
        if ((rc = pp_release(g_pool, g_refs[t])) != 0)
            FAIL("pp_release(tile %u): %s", t, pp_err_name(rc));
    if ((rc = pp_pool_drain(g_pool, 30000)) != 0)
        FAIL("pp_pool_drain: %s", pp_err_name(rc));
    *st = (pp_stats_t)PP_STATS_INIT;
    if ((rc = pp_pool_stats(g_pool, st)) != 0)
        FAIL("pp_pool_stats: %s", pp_err_name(rc));
    for (unsigned n = 0; n < st->nodes && n < PP_MAX_NODES; n++) {
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
        if ((rc = pp_node_stats(g_pool, n, &ns)) != 0)
            FAIL("pp_node_stats(%u): %s", n, pp_err_name(rc));
        g_reclaimer_tid[n] = ns.reclaimer_tid;
    }
    const pp_node_stats_t *s = &st->total;
    printf("%d workers: %lu pins, %lu writes\n", NTHREADS, atomic_load(&g_pins), writes);
    printf("pool: %u node(s), resident peak %llu of %zu bytes; evictions written %llu, "
           "clean %llu, abandoned %llu; loads %llu (waits %llu)\n", st->nodes,
           U(st->resident_peak), st->mem_limit, U(s->evictions_written), U(s->evictions_clean),
           U(s->evictions_abandoned), U(s->loads), U(s->load_waits));
    printf("pool: swap bytes written %llu, read %llu; io errors %llu, checksum failures %llu; "
           "frees %llu\n", U(s->swap_bytes_written), U(s->swap_bytes_read), U(s->io_errors),
           U(s->checksum_failures), U(s->frees));
    if ((rc = pp_pool_destroy(g_pool)) != 0)
        FAIL("pp_pool_destroy: %s", pp_err_name(rc));
}

/* Every free is done now: the type's books, by thread role, and what they
 * must show (nput tiles were put). */
static void check_books(const pp_stats_t *st, unsigned long nput)
{
    const pp_node_stats_t *s = &st->total;
    enum { APP, SWAP, RECLAIMER };
    unsigned long by[3][NCALLS] = { { 0 } }, all[NCALLS] = { 0 };
    for (int i = 0; i < g_ledger.rows; i++) {
        int role = g_ledger.row[i].app ? APP : SWAP;
        for (unsigned n = 0; n < st->nodes && n < PP_MAX_NODES; n++)
            if (g_ledger.row[i].tid == g_reclaimer_tid[n])
                role = RECLAIMER;
        for (int k = 0; k < NCALLS; k++) {
            by[role][k] += g_ledger.row[i].calls[k];
            all[k] += g_ledger.row[i].calls[k];
        }
    }
    static const char *const role_name[3] = { "app threads", "swap threads", "reclaimers" };
    printf("type callbacks    saves  failed   loads  failed   frees\n");
    for (int r = 0; r < 3; r++)
        printf("  %-13s %7lu %7lu %7lu %7lu %7lu\n", role_name[r], by[r][SAVE_OK],
               by[r][SAVE_FAILED], by[r][LOAD_OK], by[r][LOAD_FAILED], by[r][FREE]);
    printf("arena: %llu allocs, %llu frees, %llu live blocks (%llu bytes), peak %llu bytes, "
           "%llu bad calls\n", U(g_arena.allocs), U(g_arena.frees), U(g_arena.live_blocks),
           U(g_arena.live_bytes), U(g_arena.peak_bytes), U(g_arena.bad_calls));

    unsigned long frees = all[FREE], loads = all[LOAD_OK];
    uint64_t evictions = s->evictions_written + s->evictions_clean;
    if (s->evictions_written == 0 || s->loads == 0)
        FAIL("swapping did not happen: %llu evictions written, %llu loads",
             U(s->evictions_written), U(s->loads));
    if (s->loads != loads)
        FAIL("the pool counted %llu loads, the type's load succeeded %lu times", U(s->loads),
             loads);
    if (all[SAVE_OK] < s->evictions_written)
        FAIL("%llu evictions written, but save succeeded only %lu times",
             U(s->evictions_written), all[SAVE_OK]);
    if (st->resident_peak > MEM_LIMIT)
        FAIL("resident peak %llu over mem_limit %zu", U(st->resident_peak), MEM_LIMIT);
    if (s->entries != 0 || s->resident_bytes != 0)
        FAIL("after drain: %llu entries, %llu resident bytes left", U(s->entries),
             U(s->resident_bytes));
    if (frees != nput + loads)            /* one free per incarnation: put or loaded */
        FAIL("type freed %lu times, but %lu tiles were put and %lu loaded", frees, nput, loads);
    if (by[APP][FREE] != 0)
        FAIL("%lu frees ran on application threads", by[APP][FREE]);
    if (by[SWAP][FREE] != evictions || by[RECLAIMER][FREE] > nput)
        FAIL("frees: %lu on swap threads for %llu evictions, %lu on reclaimers for %lu tiles",
             by[SWAP][FREE], U(evictions), by[RECLAIMER][FREE], nput);
    if (g_arena.live_blocks != 0 || g_arena.live_bytes != 0)
        FAIL("the arena still holds %llu blocks (%llu bytes)", U(g_arena.live_blocks),
             U(g_arena.live_bytes));
    if (g_arena.allocs != g_arena.frees || g_arena.bad_calls != 0)
        FAIL("arena: %llu allocs, %llu frees, %llu bad calls", U(g_arena.allocs),
             U(g_arena.frees), U(g_arena.bad_calls));
}

int main(int argc, char **argv)
{
    const char *swap_dir = argc > 1 ? argv[1] : getenv("TMPDIR");
    if (swap_dir == NULL || *swap_dir == '\0')
        swap_dir = "/tmp";
    tl_app_thread = 1;
    uint64_t *buf = malloc(STAGE_BYTES);
    if (buf == NULL || arena_init() != 0) {
        printf("pinpool-arena: no memory for the staging buffer or the arena\n");
        return 1;
    }
    for (int t = 0; t < NTILES; t++)
        pthread_rwlock_init(&g_tile_lock[t], NULL);

    pp_options_t opt = PP_OPTIONS_INIT;
    opt.mem_limit = MEM_LIMIT;
    opt.swap_dir = swap_dir;
    int rc = pp_pool_create(&opt, &g_pool);
    if (rc != 0) {
        printf("pinpool-arena: pp_pool_create(swap_dir %s, mem_limit %zu): %s (%s)\n",
               swap_dir, MEM_LIMIT, pp_strerror(rc), pp_err_name(rc));
        return 1;
    }

    long nput = put_tiles(buf, swap_dir);
    if (nput < 0)
        return 1;

    pthread_t th[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        if (pthread_create(&th[i], NULL, worker_main, (void *)i) != 0) {
            printf("pinpool-arena: pthread_create failed\n");
            return 1;
        }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);

    unsigned long writes = atomic_load(&g_writes);
    check_versions(buf, writes);
    pp_stats_t st;
    release_all(&st, writes);
    check_books(&st, (unsigned long)nput);

    int failed = atomic_load(&g_failed);
    printf("%s: %d failed check(s)\n", failed ? "FAIL" : "OK", failed);
    for (int t = 0; t < NTILES; t++)
        pthread_rwlock_destroy(&g_tile_lock[t]);
    munmap(g_arena.base, ARENA_BYTES);
    free(buf);
    return failed ? 1 : 0;
}
