/*
 * stress/common/handoff.c -- slots and mailboxes (handoff.h).
 */
#include "common/handoff.h"
#include "common/content.h"

int64_t slots_borrow(slots_t *sl, unsigned s)
{
    uint64_t w = atomic_load_explicit(&sl->w[s], memory_order_relaxed);
    for (;;) {
        if ((w >> 32) == 0)
            return -1;
        /* acquire: pairs with the publisher's release (record and contents) */
        if (atomic_compare_exchange_weak_explicit(&sl->w[s], &w, w + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return (int64_t)((w >> 32) - 1);
    }
}

void slots_unborrow(slots_t *sl, unsigned s)
{
    /* release: everything done under the borrow precedes a later take */
    atomic_fetch_sub_explicit(&sl->w[s], 1, memory_order_release);
}

int slots_publish(slots_t *sl, uint64_t k, uint64_t *rng)
{
    for (int tries = 0; tries < 4; tries++) {
        uint64_t exp = 0;
        unsigned s = rng_below(rng, sl->n);
        /* release: the record, contents and owner are handed over */
        if (atomic_compare_exchange_strong_explicit(&sl->w[s], &exp, (k + 1) << 32,
                                                    memory_order_release,
                                                    memory_order_relaxed))
            return 1;
    }
    return 0;
}

int64_t slots_take(slots_t *sl, unsigned s)
{
    uint64_t w = atomic_load_explicit(&sl->w[s], memory_order_relaxed);
    if ((w >> 32) == 0 || (w & 0xFFFFFFFFu) != 0)
        return -1;
    /* acquire: the borrowers' and publisher's work happens before ours */
    int ok = sl->take_releases
                 ? atomic_compare_exchange_strong_explicit(&sl->w[s], &w, 0,
                                                           memory_order_acq_rel,
                                                           memory_order_relaxed)
                 : atomic_compare_exchange_strong_explicit(&sl->w[s], &w, 0,
                                                           memory_order_acquire,
                                                           memory_order_relaxed);
    return ok ? (int64_t)((w >> 32) - 1) : -1;
}

int64_t slots_clear(slots_t *sl, unsigned s, int *borrowed)
{
    uint64_t w = atomic_exchange_explicit(&sl->w[s], 0, memory_order_acquire);
    *borrowed = (w & 0xFFFFFFFFu) != 0;
    return (w >> 32) ? (int64_t)((w >> 32) - 1) : -1;
}

int mbox_put(mbox_t *mb, uint64_t v, int tries, uint64_t *rng)
{
    for (int i = 0; i < tries; i++) {
        uint64_t exp = 0;
        /* release: the pin or owner, and what we did, are handed over */
        if (atomic_compare_exchange_strong_explicit(&mb->w[rng_below(rng, mb->n)], &exp, v,
                                                    memory_order_release,
                                                    memory_order_relaxed))
            return 1;
    }
    return 0;
}

uint64_t mbox_take(mbox_t *mb, uint64_t *rng)
{
    /* acquire: pairs with mbox_put */
    return atomic_exchange_explicit(&mb->w[rng_below(rng, mb->n)], 0, memory_order_acquire);
}

uint64_t mbox_clear(mbox_t *mb, unsigned i)
{
    return atomic_exchange_explicit(&mb->w[i], 0, memory_order_acquire);
}
