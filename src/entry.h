/*
 * entry.h -- one entry of the pool, its two state words, their legal
 * transitions and the word-level helpers every part uses for them.  The
 * files that change an entry's state: owner.c (put, last release), pin.c
 * (pins, unpins, escape), load.c (load claim and commit), evict.c (claim,
 * second chance, commit, abandon, drop), hot.c (promote, demote) and
 * reclaim.c (reclaim, slot recycling).
 */
#ifndef PP_ENTRY_H
#define PP_ENTRY_H

#include <ck_epoch.h>
#include <ck_stack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomics.h"
#include "pinpool.h"

/*
 * The pins word `pw` (64 bits):
 *
 *    63                 32 31                      19 18      0
 *   +---------------------+---------------------------+--------+
 *   |     generation      |     flags (WPIN = bit 19)      |  pins  |
 *   +---------------------+---------------------------+--------+
 *
 * The owners word `ow` (64 bits):
 *
 *    63                 32 31                                 0
 *   +---------------------+-----------------------------------+
 *   |     generation      |              owners               |
 *   +---------------------+-----------------------------------+
 *
 * Each word carries the generation of the entry the slot holds, so every
 * change is validated against the caller's ref in the same compare-and-swap
 * that makes it: a pin can never land on a recycled slot, whatever the
 * timing, and needs no epoch section.  Generation 0 is never used by an
 * entry (a zeroed slot never matches a ref), and a slot whose generation
 * would wrap is retired instead of reused, so no ref is ever reissued.
 *
 * Transitions of `pw` (gen g; pins p; BUSY = EVICTING | LOADING):
 *
 *   from                         | event          | to                                | by, order
 *   -----------------------------|----------------|-----------------------------------|---------------------------
 *   FREE (g, no flags)           | put            | LIVE|RESIDENT (g+1), p = 0        | putter, store-release
 *   LIVE|RESIDENT, !DEAD, p<MAX  | pin            | p+1, |REF (|DIRTY|WPIN with WRITE)| any thread, CAS-acquire
 *   LIVE, p > 0                  | unpin          | p - 1 (-WPIN when p reaches 0)    | any thread, CAS-acq_rel
 *   LIVE|DEAD, p = 1, !BUSY      | unpin          | p = 0, |QUEUED -> push            | final unpinner, CAS-acq_rel
 *   LIVE, !DEAD, owners -> 0     | last release   | |DEAD (|QUEUED if p = 0, !BUSY)   | last releaser, CAS-acq_rel
 *   LIVE|RESIDENT, !DEAD         | get            | |ESCAPED                          | any thread, CAS-acquire
 *   LIVE|RESIDENT, p = 0, !DEAD, | evict: claim   | |EVICTING, -DIRTY (-SWAPPED if a  | node's swap thread,
 *     !ESCAPED, !BUSY, !REF      |                |   write is needed)                |   CAS-acquire
 *   as for claim, but REF       | evict: chance  | -REF (second chance)              | swap thread, CAS-relaxed
 *   the claimed word, unchanged  | evict: commit  | -EVICTING -RESIDENT, |SWAPPED      | swap thread, CAS-release
 *   EVICTING, anything changed   | evict: abandon | -EVICTING (|SWAPPED if written),  | swap thread, CAS-acq_rel
 *                                |                |   |QUEUED if DEAD and p = 0       |
 *   the claimed word, unchanged, | drop: death    | |DEAD (EVICTING kept)             | the hand (swap thread, or
 *     of a DISCARD type          |                |                                   |   a putter), CAS-acquire
 *   DEAD|EVICTING of a drop      | drop: end      | -EVICTING |QUEUED -> push         | the dropper, CAS-acq_rel
 *   LIVE|SWAPPED, !RESIDENT,     | load: claim    | |LOADING                          | pinner or swap thread,
 *     !DEAD, !LOADING            |                |                                   |   CAS-acquire
 *   LOADING                      | load: commit   | -LOADING |RESIDENT |REF (p+1 and  | the loader, CAS-acq_rel
 *                                |                |   |DIRTY for a pinning loader)    |
 *   LOADING                      | load: fail     | -LOADING (|QUEUED if DEAD, p = 0) | the loader, CAS-acq_rel
 *   LIVE|DEAD|QUEUED, p = 0      | reclaim        | FREE (g), or retired if g = max   | home reclaimer, store-release
 *   LIVE|RESIDENT, !DEAD, !BUSY, | promote        | |HOT, bits 0..18 = hot slot index | a contended pinner,
 *     !HOT, !WPIN; the slot has  |                |   (the p pins go to the slot)     |   CAS-acq_rel
 *     no demoter in flight       |                |                                   |
 *   HOT                          | demote         | -HOT, p = sum of the hot counters | anyone, CAS-acq_rel
 *
 * Transitions of `ow`: put stores (g+1, 1); retain (g, o >= 1) -> o + 1;
 * release (g, o >= 1) -> o - 1; a drop, after its death, (g, o) -> (g, 0)
 * (retains and releases check `pw` too, so they fail from the death on).
 * An entry whose owners reached 0 is dead and `ow` never changes again
 * until the slot is reused.
 *
 * While HOT, pins and unpins change the entry's hot counters, not the word
 * (hot.c); HOT implies LIVE, RESIDENT, !DEAD and !BUSY: the last release,
 * the eviction hand and a write pin demote the entry before their CAS.
 *
 * Invariants (checked by pp__pool_is_valid):
 *  - QUEUED implies DEAD, LIVE, p = 0 and !BUSY; DEAD implies owners = 0,
 *    except while a drop holds the entry (DEAD|EVICTING) and takes them.
 *  - A pinned entry (p > 0) is LIVE and RESIDENT; it is never freed, never
 *    evicted (an eviction's commit needs the word it claimed, with p = 0),
 *    and its data pointer never changes.
 *  - EVICTING implies RESIDENT; LOADING implies !RESIDENT; never both.
 *  - LIVE and !RESIDENT implies SWAPPED (the only copy is on disk); SWAPPED
 *    means the node's swap record for the slot holds an extent, valid
 *    unless DIRTY (DIRTY is only ever set on a resident entry).
 *  - Exactly one thread makes the transition to QUEUED, so exactly one push
 *    and exactly one reclamation happen per entry; an entry with an I/O in
 *    flight (BUSY) is queued by whoever ends that I/O.
 *  - A FREE slot is never referenced by a queue; a QUEUED slot is in exactly
 *    one reclaim queue or in its reclaimer's epoch-pending list.
 */
#define PP__PINS_MASK   ((uint64_t)PP_MAX_PINS)         /* bits 0..18 */
#define PP__F_WPIN      ((uint64_t)1 << 19)  /* a write pin may be held: set by write pins,
                                                cleared when the count reaches 0 */
#define PP__F_LIVE      ((uint64_t)1 << 20)  /* the slot holds an entry */
#define PP__F_RESIDENT  ((uint64_t)1 << 21)  /* data in memory */
#define PP__F_DEAD      ((uint64_t)1 << 22)  /* last owner released */
#define PP__F_QUEUED    ((uint64_t)1 << 23)  /* pushed for reclamation */
#define PP__F_ESCAPED   ((uint64_t)1 << 24)  /* pp_get was called */
#define PP__F_DIRTY     ((uint64_t)1 << 25)  /* pinned for write since the last write-out */
#define PP__F_SWAPPED   ((uint64_t)1 << 26)  /* the swap record holds an extent */
#define PP__F_EVICTING  ((uint64_t)1 << 27)  /* claimed by the swap thread */
#define PP__F_LOADING   ((uint64_t)1 << 28)  /* claimed by a loader */
#define PP__F_REF       ((uint64_t)1 << 29)  /* recency bit: pinned since the hand passed */
#define PP__F_NOSWAP    ((uint64_t)1 << 30)  /* never evicted: type or size 0 (set by put) */
#define PP__F_HOT       ((uint64_t)1 << 31)  /* pins counted in hot slot (bits 0..18), hot.c */
#define PP__F_BUSY      (PP__F_EVICTING | PP__F_LOADING)
#define PP__GEN_SHIFT   32
#define PP__OWNERS_MASK ((uint64_t)0xFFFFFFFFu)

#define PP__PIN_WPIN 0x100u  /* pin flag (internal): set WPIN, not DIRTY (pp_pin_many) */

static inline uint32_t pp__word_gen(uint64_t w) { return (uint32_t)(w >> PP__GEN_SHIFT); }
static inline uint32_t pp__pw_pins(uint64_t pw) { return (uint32_t)(pw & PP__PINS_MASK); }
static inline uint32_t pp__ow_owners(uint64_t ow) { return (uint32_t)(ow & PP__OWNERS_MASK); }

/* The word names the entry of generation gen, alive and not dead: what a
 * pin, a get, a prefetch or a load claim needs first. */
static inline bool pp__pw_alive(uint64_t pw, uint32_t gen)
{
    return pp__word_gen(pw) == gen && (pw & (PP__F_LIVE | PP__F_DEAD)) == PP__F_LIVE;
}

/* The flags a pin with these pin flags sets besides REF: DIRTY and WPIN
 * for PP_PIN_WRITE, WPIN alone for PP__PIN_WPIN. */
static inline uint64_t pp__pin_bits(unsigned flags)
{
    return (flags & PP_PIN_WRITE) ? PP__F_DIRTY | PP__F_WPIN :
           (flags & PP__PIN_WPIN) ? PP__F_WPIN : 0;
}

/* The word after one pin (the pin transition, every pin path's): the count
 * up by one, REF (the recency bit) and bits (pp__pin_bits) set.  The caller
 * has checked the word (alive, resident, count below PP_MAX_PINS, not HOT). */
static inline uint64_t pp__pin_word(uint64_t pw, uint64_t bits)
{
    return (pw + 1u) | bits | PP__F_REF;
}

/* The word after one unpin: WPIN goes with the last pin. */
static inline uint64_t pp__unpin_word(uint64_t pw)
{
    uint64_t next = pw - 1u;
    return (next & PP__PINS_MASK) == 0 ? next & ~PP__F_WPIN : next;
}

/*
 * One entry is two records in its table segment, indexed by the same slot:
 *
 *   the hot record (pp__entry_t, 16 bytes): the pins word and the data
 *     pointer, all that a pin or an unpin touches.  Four to a cache line,
 *     so a million entries' hot state is 16 MB and stays in a large L3;
 *   the cold record (pp__cold_t, 48 bytes): the owners word, size, type,
 *     queue links, slot and lag stamp, read and written by puts, retains,
 *     releases, the reclaimer and the swap thread, never by a pin.
 *
 * A segment (table.c) is PP__SEG_SLOTS hot records followed by as many
 * cold ones, PP__SEG_BYTES in all and aligned to that size, so either
 * record finds the other by address arithmetic alone (pp__cold,
 * pp__entry_of_cold): 64 bytes an entry, and no pointer between them.
 * Hot records of neighbouring slots share a cache line; a pin's CAS on one
 * makes a concurrent pin of a neighbour retry its line, never its logic
 * (every word is validated on its own), and an entry that every thread
 * pins is made HOT (hot.c) whatever its neighbours do.
 *
 * data and the cold size and type are written by the putter before its
 * store-release of `pw` and never change while the entry lives, except
 * data, which a load commit sets before its release; readers load them
 * after an acquire of `pw` that validated the generation, while holding a
 * pin, an owner or an epoch section (which keeps the slot from being
 * recycled).
 */
typedef struct pp__entry {
    _Atomic uint64_t pw;                 /* pins word, see above */
    void *data;
} __attribute__((aligned(16))) pp__entry_t;

typedef struct pp__cold {
    _Atomic uint64_t ow;                 /* owners word, see above */
    size_t size;
    const pp_type_t *type;
    union {
        ck_stack_entry_t link;           /* reclaim queue / free-slot stack / magazine /
                                            load queue (while LOADING) */
        ck_epoch_entry_t epoch;          /* while waiting for a grace period */
    } q;
    uint32_t slot;                       /* index in its node's table */
    uint32_t queued_us;                  /* when it was queued (CLOCK_MONOTONIC, µs, mod 2^32),
                                            or PP__LAG_NONE if not sampled */
} pp__cold_t;

_Static_assert(sizeof(pp__entry_t) == 16, "a pin touches 16 bytes");
_Static_assert(sizeof(pp__cold_t) == 48, "an entry costs 64 bytes of metadata");

/* A table segment: 2^15 entries, 2 MiB (one huge page), aligned to its size. */
#define PP__SEG_SHIFT     15u
#define PP__SEG_SLOTS     ((uint32_t)1 << PP__SEG_SHIFT)
#define PP__SEG_HOT_BYTES ((size_t)PP__SEG_SLOTS * sizeof(pp__entry_t))
#define PP__SEG_BYTES     ((size_t)PP__SEG_SLOTS * (sizeof(pp__entry_t) + sizeof(pp__cold_t)))

_Static_assert((PP__SEG_BYTES & (PP__SEG_BYTES - 1)) == 0, "segments align to their size");

static inline uintptr_t pp__seg_base(const void *p)
{
    return (uintptr_t)p & ~(uintptr_t)(PP__SEG_BYTES - 1);
}

/* The cold record of the entry whose hot record is e. */
static inline pp__cold_t *pp__cold(const pp__entry_t *e)
{
    uintptr_t base = pp__seg_base(e);
    size_t i = ((uintptr_t)e - base) / sizeof(pp__entry_t);
    return (pp__cold_t *)(base + PP__SEG_HOT_BYTES) + i;
}

/* The hot record of the entry whose cold record is c. */
static inline pp__entry_t *pp__entry_of_cold(const pp__cold_t *c)
{
    uintptr_t base = pp__seg_base(c);
    size_t i = ((uintptr_t)c - base - PP__SEG_HOT_BYTES) / sizeof(pp__cold_t);
    return (pp__entry_t *)base + i;
}

static inline pp__entry_t *pp__entry_of_link(ck_stack_entry_t *s)
{
    return pp__entry_of_cold((pp__cold_t *)(void *)((char *)s - offsetof(pp__cold_t, q.link)));
}

static inline pp__entry_t *pp__entry_of_epoch(ck_epoch_entry_t *s)
{
    return pp__entry_of_cold((pp__cold_t *)(void *)((char *)s - offsetof(pp__cold_t, q.epoch)));
}

#endif /* PP_ENTRY_H */
