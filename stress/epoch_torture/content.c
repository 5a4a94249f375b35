/*
 * stress/epoch_torture/content.c -- epoch_torture's entry contents: every
 * word of a block is a function of (seed, entry id, word index), behind a
 * header (magic, id, size); freed blocks are poison.  A read that finds
 * other bytes says whether they are poison: a free that came too early.
 */
#include "epoch_torture.h"

#include <string.h>

unsigned char g_poison[BLK_MAX];

/* Word w of entry k's block (sizes are multiples of 8): a header (magic,
 * id, size), then a sequence that starts at a value derived from the seed
 * and the id (cheap to check: the free function checks every byte too, and
 * it runs on the reclaimer, whose time is the pool's reclaim lag). */
#define WORD_STEP 0x9E3779B97F4A7C15ull
static inline uint64_t body_base(uint64_t k) { return mix3(g_seed, k, 0xB0D1ull); }

static inline uint64_t word_of(uint64_t k, size_t size, size_t w)
{
    switch (w) {
    case 0: return HDR_MAGIC;
    case 1: return k;
    case 2: return (uint64_t)size;
    default: return body_base(k) + (uint64_t)w * WORD_STEP;
    }
}

void fill(unsigned char *p, size_t size, uint64_t k)
{
    for (size_t w = 0; w < 3; w++) {
        uint64_t v = word_of(k, size, w);
        memcpy(p + 8 * w, &v, 8);
    }
    uint64_t v = body_base(k) + 3 * WORD_STEP;
    for (size_t w = 3; w < size / 8; w++, v += WORD_STEP)
        memcpy(p + 8 * w, &v, 8);
}

/* Offset of the first wrong byte of word w, or -1. */
static inline long check_word(const unsigned char *p, uint64_t k, size_t size, size_t w)
{
    uint64_t v = word_of(k, size, w);
    long j = bytes_mismatch(p + 8 * w, &v, 8);
    return j < 0 ? -1 : (long)(8 * w) + j;
}

/* Full check: offset of the first wrong byte, or -1. */
long verify(const unsigned char *p, size_t size, uint64_t k)
{
    for (size_t w = 0; w < 3; w++) {
        long off = check_word(p, k, size, w);
        if (off >= 0)
            return off;
    }
    uint64_t v = body_base(k) + 3 * WORD_STEP, got;
    for (size_t w = 3; w < size / 8; w++, v += WORD_STEP) {
        memcpy(&got, p + 8 * w, 8);
        if (got != v)
            return check_word(p, k, size, w);
    }
    return -1;
}

/* Offset of the first byte of a freed block that is not poison, or -1. */
long poison_intact(const unsigned char *p, size_t size)
{
    return bytes_mismatch(p, g_poison, size);
}

/* Quick check: the header and the last word. */
static long verify_quick(const unsigned char *p, size_t size, uint64_t k)
{
    long off;
    if ((off = check_word(p, k, size, 0)) >= 0 || (off = check_word(p, k, size, 1)) >= 0 ||
        (off = check_word(p, k, size, size / 8 - 1)) >= 0)
        return off;
    return -1;
}

/* A bad block: says whether it is poison, i.e. a free that came too early. */
static void bad_bytes(thr_t *t, const char *what, uint64_t k, const unsigned char *p, long off)
{
    rec_t *r = rec_get(k);
    size_t size = rec_size(r);
    size_t w = (size_t)off / 8;
    uint64_t want = word_of(k, size, w);
    int poison = 1;
    for (unsigned j = 0; j < 8; j++)
        poison = poison && p[8 * w + j] == POISON;
    atomic_fetch_add(poison ? &g_read_poison : &g_read_other, 1);
    failf(t, "%s: entry %" PRIu64 " (ref %#" PRIx64 ", node %u, %zu bytes) byte %ld is %#04x, "
          "expected %#04x%s; program: freed %u, owners %d, pins %d, QSBR holders %d, died in lag "
          "%u, lag open now %u", what, k, rec_ref(r), rec_node(r), size, off, p[off],
          ((const unsigned char *)&want)[off % 8],
          poison ? " -- POISON: the block was freed while this reader could still use it"
                 : " (not poison: freed and reused, or corrupted)",
          atomic_load(&r->frees), atomic_load(&r->owners), atomic_load(&r->pins),
          atomic_load(&r->qsbr), atomic_load(&r->lag), atomic_load(&g_lag_cur));
}

void check_full(thr_t *t, uint64_t k, const unsigned char *p, const char *what)
{
    long off = verify(p, rec_size(rec_get(k)), k);
    t->full_checks++;
    if (off >= 0)
        bad_bytes(t, what, k, p, off);
}

void check_quick(thr_t *t, uint64_t k, const unsigned char *p, const char *what)
{
    long off = verify_quick(p, rec_size(rec_get(k)), k);
    t->quick_checks++;
    if (off >= 0)
        bad_bytes(t, what, k, p, off);
}
