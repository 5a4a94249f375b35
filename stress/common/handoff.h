/*
 * stress/common/handoff.h -- how the stress programs hand owners and pins
 * between threads.
 *
 *  - An OWNER is held either privately by one thread (its own list) or by
 *    a shared SLOT.  A slot is one atomic word: (k + 1) << 32 | borrowers.
 *    A thread BORROWS a slot's owner by incrementing the borrower count
 *    (CAS, only while the slot is non-empty) and may then pin, get, stat,
 *    prefetch or retain the entry; the slot's owner can only be TAKEN (CAS
 *    from exactly (k + 1) << 32 to 0) while nobody borrows it, so a
 *    borrowed entry always has at least one owner.  PUBLISH moves a
 *    private owner into an empty slot, TAKE moves a slot's owner to the
 *    taker's list.
 *  - A MAILBOX is one atomic word, 0 when empty: a thread hands over what
 *    it holds (a pin, or an owner that the taker is to release) by putting
 *    a nonzero word into an empty box; the taker exchanges it out.
 * The publisher's and the sender's release pair with the borrower's and
 * the taker's acquire: the record, the contents and what the sender did
 * are visible to whoever gets the owner or the pin.
 */
#ifndef PP_STRESS_HANDOFF_H
#define PP_STRESS_HANDOFF_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct slots {
    _Atomic uint64_t *w;
    unsigned n;
    /* The take's CAS also releases (acq_rel; the torture's, as it always
     * was); otherwise it only acquires (epoch_torture's). */
    int take_releases;
} slots_t;

/* Borrows slot s's owner: its k, or -1 if the slot is empty. */
int64_t slots_borrow(slots_t *sl, unsigned s);

/* Ends a borrow of slot s. */
void slots_unborrow(slots_t *sl, unsigned s);

/* Publishes the owner of k into an empty slot, trying 4 slots drawn from
 * *rng; 1 if it was published (the caller no longer holds it). */
int slots_publish(slots_t *sl, uint64_t k, uint64_t *rng);

/* Takes slot s's owner if nobody borrows it: its k, or -1. */
int64_t slots_take(slots_t *sl, unsigned s);

/* At the end, with every thread stopped: empties slot s; its owner's k
 * (the caller releases it) or -1, and *borrowed if a borrow was left. */
int64_t slots_clear(slots_t *sl, unsigned s, int *borrowed);

typedef struct mbox {
    _Atomic uint64_t *w;
    unsigned n;          /* boxes in use (drawn from) */
} mbox_t;

/* Puts v (nonzero) into an empty box, trying `tries` boxes drawn from
 * *rng; 1 if it was put (handed over). */
int mbox_put(mbox_t *mb, uint64_t v, int tries, uint64_t *rng);

/* Takes the word of a box drawn from *rng: 0 if it was empty. */
uint64_t mbox_take(mbox_t *mb, uint64_t *rng);

/* At the end: empties box i, which may be beyond the boxes in use; its
 * word or 0. */
uint64_t mbox_clear(mbox_t *mb, unsigned i);

#endif /* PP_STRESS_HANDOFF_H */
