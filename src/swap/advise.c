/*
 * advise.c -- eviction advice, as pp_advise sets it (pin.c) and the hand
 * reads it (evict.c).  The transitions of the entry's words are untouched:
 * advice lives beside the table (types.h, pp__advseg_t), one word per slot tagged with
 * the entry's generation, so it is a hint the hand reads and never a state
 * any invariant depends on.  A pin always wins over it: the eviction path
 * is the one of entry.h, whose claim needs an unpinned entry.
 *
 *   WONTNEED  the entry's bit is set in its segment's wontneed bitmap; the
 *             swap thread evicts such entries before it turns the CLOCK
 *             hand (evict.c, evict_advised): clean ones first, then
 *             dirty ones, highest slot first, and the hand gives them no
 *             second chance.  An eviction consumes the advice.
 *   WILLNEED  starts the load of a swapped entry (as pp_prefetch) and asks
 *             the hand to pass the entry over once more than its recency
 *             bit would: the hand consumes the advice when it first meets
 *             the entry.
 *   NORMAL    drops either.
 *
 * Why the highest slot first among WONTNEED entries: a scheduler that
 * marks each input after its last use in a sweep, and sweeps the same data
 * again later (a Cholesky's panels read the factored columns once per
 * panel), is served best by keeping a fixed part of that data resident
 * across sweeps; evicting in the order of the advice would evict exactly
 * what the next sweep reads first (the LRU failure on a loop larger than
 * memory).  Slot order is fixed, so the same entries stay.
 */
#include "swap/swap.h"

static inline pp__advseg_t *advseg(const pp__node_t *node, uint32_t slot)
{
    /* acquire: pairs with the segment's release-install (table.c). */
    return pp__atomic_load_acquire(&node->adv[slot >> PP__SEG_SHIFT]);
}

unsigned pp__advise_of(const pp__node_t *node, uint32_t slot, uint64_t pw)
{
    if (node->adv == NULL)
        return PP_ADVISE_NORMAL;
    const pp__advseg_t *seg = advseg(node, slot);
    if (seg == NULL)
        return PP_ADVISE_NORMAL;
    /* relaxed: a hint, validated by its generation. */
    uint64_t w = pp__atomic_load_relaxed(&seg->word[slot & (PP__SEG_SLOTS - 1)]);
    return (uint32_t)(w >> 32) == pp__word_gen(pw) ? (unsigned)(w & 0xffu) : PP_ADVISE_NORMAL;
}

/* Sets or clears slot's wontneed bit, keeping node->sw.advised in step
 * with the bits (each bit changes under one atomic RMW, so exactly one
 * thread counts each change). */
static void wontneed_bit(pp__node_t *node, pp__advseg_t *seg, uint32_t slot, bool set)
{
    uint32_t i = slot & (PP__SEG_SLOTS - 1);
    uint64_t bit = (uint64_t)1 << (i & 63);
    /* relaxed: the bits and their count are hints for the swap thread,
     * which validates every entry it takes through the entry's word. */
    if (set) {
        if (!(pp__atomic_or_relaxed(&seg->wontneed[i >> 6], bit) & bit))
            pp__atomic_add_relaxed(&node->sw.advised, 1);
    } else {
        if (pp__atomic_and_relaxed(&seg->wontneed[i >> 6], ~bit) & bit)
            pp__atomic_sub_relaxed(&node->sw.advised, 1);
    }
}

void pp__advise_consume(pp__node_t *node, uint32_t slot, uint64_t pw, unsigned advice)
{
    if (node->adv == NULL)
        return;
    pp__advseg_t *seg = advseg(node, slot);
    if (seg == NULL)
        return;
    uint64_t expect = ((uint64_t)pp__word_gen(pw) << 32) | advice;
    /* relaxed: a hint; a newer advice (the CAS fails) is kept. */
    (void)pp__atomic_cas_strong_relaxed(&seg->word[slot & (PP__SEG_SLOTS - 1)], &expect,
                                        (uint64_t)pp__word_gen(pw) << 32);
    if (advice == PP_ADVISE_WONTNEED)
        wontneed_bit(node, seg, slot, false);
}

void pp__advise_forget(pp__node_t *node, uint32_t slot)
{
    pp__advseg_t *seg = node->adv != NULL ? advseg(node, slot) : NULL;
    if (seg != NULL)
        wontneed_bit(node, seg, slot, false);
}

bool pp__advise_next_wontneed(pp__node_t *node, uint32_t *slot)
{
    /* From *slot (exclusive) down to 0: the next slot whose wontneed bit
     * is set.  *slot == UINT32_MAX starts at the top of the table. */
    uint32_t end = pp__atomic_load_relaxed(&node->put.next_slot);
    if (end > PP__MAX_SLOTS)
        end = PP__MAX_SLOTS;
    uint32_t s = *slot == UINT32_MAX || *slot > end ? end : *slot;
    while (s > 0) {
        uint32_t top = s - 1;            /* the highest slot still to look at */
        const pp__advseg_t *seg = advseg(node, top);
        if (seg == NULL) {
            s = top & ~(PP__SEG_SLOTS - 1);
            continue;
        }
        uint32_t i = top & (PP__SEG_SLOTS - 1);
        /* relaxed: see wontneed_bit. */
        uint64_t bits = pp__atomic_load_relaxed(&seg->wontneed[i >> 6]);
        unsigned shift = 63 - (i & 63);
        bits = (bits << shift) >> shift; /* bits 0..(i & 63) */
        if (bits != 0) {
            *slot = (top & ~(uint32_t)63) + (uint32_t)(63 - __builtin_clzll(bits));
            return true;
        }
        s = top & ~(uint32_t)63;
    }
    return false;
}

void pp__advise_set(pp__node_t *node, uint32_t slot, uint32_t gen, unsigned advice)
{
    pp__advseg_t *seg = advseg(node, slot);
    PP__CHECK(seg != NULL);              /* installed before the entry's segment */
    /* relaxed: a hint for the swap thread, tagged with the generation. */
    pp__atomic_store_relaxed(&seg->word[slot & (PP__SEG_SLOTS - 1)],
                             ((uint64_t)gen << 32) | advice);
    wontneed_bit(node, seg, slot, advice == PP_ADVISE_WONTNEED);
}
