/*
 * stress/torture/content.c -- the torture's entry contents: a function of
 * (seed, k, version), with sizes and (in swap mode) compressible styles
 * drawn from the seed; the data blocks with their hidden header; and the
 * checks of the contents under a pin or a pp_get pointer.
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>

/* Without swap: uniform in [min, max].  With swap: log-uniform (a uniform
 * power-of-two octave, then uniform inside it), so that most entries are
 * small and a few are large. */
size_t entry_size(uint64_t k)
{
    uint64_t h = mix3(g_seed, k, 0x5157u);
    if (!g_swap || g_size_min == g_size_max)
        return g_size_min + (size_t)(h % (g_size_max - g_size_min + 1));
    unsigned octaves = 0;
    while (octaves < 40 && (g_size_min << (octaves + 1)) <= g_size_max)
        octaves++;
    unsigned e = (unsigned)(h % (octaves + 1));
    size_t lo = g_size_min << e;
    size_t hi = e == octaves ? g_size_max : (g_size_min << (e + 1)) - 1;
    return lo + (size_t)(mix3(g_seed, k, 0x5158u) % (hi - lo + 1));
}

/* Content style of an entry.  0: random words.  With swap also 1: each
 * random word repeated 16 times, 2: one random word in 8, zeros between
 * (both compress well with LZ4). */
static inline unsigned style_of(uint64_t k)
{
    return g_swap ? (unsigned)(mix3(g_seed, k, 0xC0u) % 3) : 0u;
}

/* The body word w (w >= 1: bytes 8w .. 8w+7) of a stream. */
static inline uint64_t body_word(unsigned style, uint64_t *x, uint64_t *cur, size_t w)
{
    switch (style) {
    case 1:
        if ((w - 1) % 16 == 0)
            *cur = splitmix64(x);
        return *cur;
    case 2:
        return w % 8 == 0 ? splitmix64(x) : 0;
    default:
        return splitmix64(x);
    }
}

/* Writes bytes [8, size) of version ver (writers never touch bytes 0..7). */
void fill_body(unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    uint64_t x = mix3(g_seed, k, 0x1000000ull + ver), cur = 0;
    unsigned style = style_of(k);
    for (size_t i = 8; i < size; i += 8) {
        uint64_t v = body_word(style, &x, &cur, i / 8);
        size_t n = size - i < 8 ? size - i : 8;
        memcpy(p + i, &v, n);
    }
}

void fill(unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    memcpy(p, &k, 8);
    fill_body(p, size, k, ver);
}

/* Returns the offset of the first wrong byte, or -1. */
long verify(const unsigned char *p, size_t size, uint64_t k, uint32_t ver)
{
    long j = bytes_mismatch(p, &k, 8);
    if (j >= 0)
        return j;
    uint64_t x = mix3(g_seed, k, 0x1000000ull + ver), cur = 0;
    unsigned style = style_of(k);
    for (size_t i = 8; i < size; i += 8) {
        uint64_t v = body_word(style, &x, &cur, i / 8);
        size_t n = size - i < 8 ? size - i : 8;
        if ((j = bytes_mismatch(p + i, &v, n)) >= 0)
            return (long)i + j;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Data blocks (KIND_FREE and KIND_SWAP)                                     */
/* ------------------------------------------------------------------------ */

/* A new block for entry k (header set, bytes not). */
unsigned char *blk_new(uint64_t k, size_t size, uint32_t ver, uint32_t loaded)
{
    char *m = malloc(BLK_HDR + size);
    if (m == NULL)
        oom();
    blk_t *b = (blk_t *)(void *)m;
    memset(b, 0, BLK_HDR);
    b->magic = BLK_LIVE;
    b->k = k;
    atomic_init(&b->version, ver);
    atomic_init(&b->pins, 0);
    atomic_init(&b->escaped, 0);
    b->loaded = loaded;
    return (unsigned char *)m + BLK_HDR;
}

void blk_del(void *data, size_t size)
{
    blk_t *b = blk_of(data);
    b->magic = BLK_DEAD;
    memset(data, 0xDD, size);
    free(b);
}

/* ------------------------------------------------------------------------ */
/* Content checks                                                            */
/* ------------------------------------------------------------------------ */

/* Full check: the caller holds a read token (or the write token). */
void check_contents(thr_t *t, uint64_t k, const void *ptr, const char *where)
{
    rec_t *r = rec_get(k);
    if (ptr == NULL) {
        failf(t, "%s: NULL data pointer for entry %" PRIu64, where, k);
        return;
    }
    size_t size = rec_size(r);
    uint32_t ver = atomic_load_explicit(&r->version, memory_order_relaxed);
    if (has_blk(r)) {
        const blk_t *b = blk_of(ptr);
        uint32_t bver = atomic_load_explicit(&b->version, memory_order_relaxed);
        if (b->magic != BLK_LIVE || b->k != k || bver != ver) {
            failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 "): pointer %p is not a live block "
                  "of it (magic %#" PRIx64 "%s, k %" PRIu64 ", block version %u, entry version "
                  "%u)", where, k, rec_ref(r), ptr, b->magic,
                  b->magic == BLK_DEAD ? ": freed" : "", b->k, bver, ver);
            return;
        }
    }
    long off = verify(ptr, size, k, ver);
    if (off >= 0)
        failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 ", size %zu, version %u) corrupted: "
              "byte %ld is %#x%s", where, k, rec_ref(r), size, ver, off,
              ((const unsigned char *)ptr)[off],
              ((const unsigned char *)ptr)[off] == 0xDD ? " (poisoned: freed)" : "");
}

/* Blind check: only the bytes no writer touches. */
void check_header(thr_t *t, uint64_t k, const void *ptr, const char *where)
{
    uint64_t h;
    if (ptr == NULL) {
        failf(t, "%s: NULL data pointer for entry %" PRIu64, where, k);
        return;
    }
    memcpy(&h, ptr, 8);
    if (h != k)
        failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 "): first 8 bytes hold %#" PRIx64,
              where, k, rec_ref(rec_get(k)), h);
}

void check_pin(thr_t *t, const hpin_t *h, const char *where)
{
    if (h->checked)
        check_contents(t, h->k, h->ptr, where);
    else
        check_header(t, h->k, h->ptr, where);
}
