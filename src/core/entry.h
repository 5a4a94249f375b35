/*
 * entry.h -- one entry of the pool, its two state words, their legal
 * transitions and the word-level helpers every part uses for them.  The
 * files that change an entry's state: owner.c (put), retire.c (last
 * release), pin.c (pins, unpins, escape), load.c (load claim), evict.c
 * (claim, second chance, drop), ioend.c (the commits and abandons that end
 * an I/O), hot.c (promote, demote), reclaim.c (reclaim, slot recycling),
 * and testhooks.c for a test.  Each goes through the functions at the end
 * of this file, one for each row of the transition table.
 */
#ifndef PP_ENTRY_H
#define PP_ENTRY_H

#include <ck_epoch.h>
#include <ck_stack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "os/atomics.h"
#include "os/checks.h"
#include "pinpool.h"

/* The fast path users may inline (include/pinpool_inline.h) is the
 * library's own: pin.c calls it, with its test builds' yield points.  (A
 * test program that included it first keeps the users' form.) */
#ifndef PINPOOL_INLINE_H
#define PP__INLINE_LIBRARY 1
#define PP__INLINE_YIELD_ON(what) PP__YIELD_ON(what)
#define PP__INLINE_POINT(where, arg) PP__TEST_POINT(where, arg)
#define PP__INLINE_YIELD(what) PP__YIELD(what)
#endif
#include "pinpool_inline.h"

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
 * Transitions of `pw` (gen g; pins p; BUSY = EVICTING | LOADING), each made
 * by the function named in its row (below), the only code that writes `pw`
 * -- but for the fast path of the pin and unpin rows, which is
 * pp__inline_pin_at and pp__inline_unpin_at in include/pinpool_inline.h (the
 * same transitions, the same orders, for the library and for the programs
 * that inline them):
 *
 *   from                         | function (event)           | to                                | by, order
 *   -----------------------------|----------------------------|-----------------------------------|---------------------------
 *   FREE (g, no flags)           | pp__pw_put                 | LIVE|RESIDENT (g+1), p = 0        | putter, store-release
 *   LIVE|RESIDENT, !DEAD, p<MAX  | pp__pw_try_pin             | p+1, |REF (|DIRTY|WPIN with WRITE)| any thread, CAS-acquire
 *   LIVE, !DEAD, p > 0           | pp__pw_try_unpin           | p - 1 (-WPIN when p reaches 0)    | any thread, CAS-acq_rel
 *   LIVE|DEAD, p > 0             | pp__pw_try_unpin_dead      | p - 1; at p = 0, |QUEUED -> push  | any thread (the final one
 *                                |                            |   unless BUSY                     |   pushes), CAS-acq_rel
 *   LIVE|RESIDENT, p > 0 (the    | pp__pw_mark_dirty          | |DIRTY                            | pp_pin_many's caller,
 *     caller's own pins)         |   (batch write pin)        |                                   |   fetch_or-relaxed
 *   LIVE, !DEAD, owners -> 0     | pp__pw_kill (last release) | |DEAD (|QUEUED if p = 0, !BUSY)   | last releaser, CAS-acq_rel
 *   LIVE|RESIDENT, !DEAD         | pp__pw_escape (get)        | |ESCAPED                          | any thread, CAS-acquire
 *   LIVE|RESIDENT, p = 0, !DEAD, | pp__pw_claim_evict         | |EVICTING, -DIRTY -REF (-SWAPPED  | node's swap thread,
 *     !ESCAPED, !BUSY, !REF      |                            |   if a write is needed)           |   CAS-acquire
 *   as for claim, but REF        | pp__pw_second_chance       | -REF                              | swap thread, CAS-relaxed
 *   the claimed word, unchanged  | pp__pw_commit_evict        | -EVICTING -RESIDENT, |SWAPPED      | swap thread, CAS-acq_rel
 *   EVICTING, anything changed   | pp__pw_abandon_evict       | -EVICTING (|SWAPPED if written),  | swap thread, CAS-acq_rel
 *                                |                            |   |QUEUED if DEAD and p = 0       |
 *   the claimed word, unchanged, | pp__pw_drop_kill           | |DEAD (EVICTING kept)             | the hand (swap thread, or
 *     of a DISCARD type          |   (drop: death)            |                                   |   a putter), CAS-acquire
 *   DEAD|EVICTING of a drop      | pp__pw_drop_end            | -EVICTING |QUEUED -> push         | the dropper, CAS-acq_rel
 *   LIVE|SWAPPED, !RESIDENT,     | pp__pw_claim_load          | |LOADING                          | pinner or swap thread,
 *     !DEAD, !LOADING            |                            |                                   |   CAS-acquire
 *   LOADING                      | pp__pw_commit_load         | -LOADING |RESIDENT |REF (p+1 and  | the loader, CAS-acq_rel
 *                                |                            |   |DIRTY for a pinning loader)    |
 *   LOADING                      | pp__pw_fail_load           | -LOADING (|QUEUED if DEAD, p = 0) | the loader, CAS-acq_rel
 *   LIVE|DEAD|QUEUED, p = 0      | pp__pw_reclaim             | FREE (g), or retired if g = max   | home reclaimer, store-release
 *   LIVE|RESIDENT, !DEAD, !BUSY, | pp__pw_promote             | |HOT, bits 0..18 = hot slot index | a contended pinner,
 *     !HOT, !WPIN; the slot has  |                            |   (the p pins go to the slot)     |   CAS-acq_rel
 *     no demoter in flight       |                            |                                   |
 *   HOT                          | pp__pw_demote              | -HOT, p = sum of the hot counters | anyone, CAS-acq_rel
 *   LIVE, !DEAD, p = 0 (tests)   | pp__pw_test_set_gen        | generation set, the rest kept     | pp__debug_set_gen only,
 *                                |                            |                                   |   store-release
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
 * One entry is two records in its node's table, indexed by the same slot:
 *
 *   the hot record (pp__entry_t, 16 bytes): the pins word and the data
 *     pointer, all that a pin or an unpin touches.  Four to a cache line,
 *     so a million entries' hot state is 16 MB and stays in a large L3;
 *   the cold record (pp__cold_t, 48 bytes): the owners word, size, type,
 *     queue links, slot and lag stamp, read and written by puts, retains,
 *     releases, the reclaimer and the swap thread, never by a pin.
 *
 * A table (table.c) is one range of address space, PP__TABLE_BYTES aligned
 * to its size: the hot records of all its slots, one after the other,
 * then their cold records.  A ref's entry is its node's base plus the slot
 * times 16 (pp__lookup: no load on the way), and either record finds the
 * other by address arithmetic alone (pp__cold, pp__entry_of_cold): 64
 * bytes an entry, and no pointer between them.  The hot records of a
 * million entries are 16 MB in one piece, as dense in the caches and the
 * TLB as an array of them would be.
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
/* The layout pinpool_inline.h reads (PP_INLINE_ABI): change both, and the
 * version, together. */
_Static_assert(sizeof(pp__inline_entry_t) == sizeof(pp__entry_t) &&
                   offsetof(pp__inline_entry_t, pw) == offsetof(pp__entry_t, pw) &&
                   offsetof(pp__inline_entry_t, data) == offsetof(pp__entry_t, data),
               "pinpool_inline.h's entry is the hot record");
_Static_assert(PP__INLINE_PINS == PP__PINS_MASK && PP__INLINE_WPIN == PP__F_WPIN &&
                   PP__INLINE_LIVE == PP__F_LIVE && PP__INLINE_RESIDENT == PP__F_RESIDENT &&
                   PP__INLINE_DEAD == PP__F_DEAD && PP__INLINE_DIRTY == PP__F_DIRTY &&
                   PP__INLINE_EVICTING == PP__F_EVICTING && PP__INLINE_REF == PP__F_REF &&
                   PP__INLINE_HOT == PP__F_HOT && PP__INLINE_GEN_SHIFT == PP__GEN_SHIFT,
               "pinpool_inline.h's pins word is entry.h's");
_Static_assert(sizeof(pp__cold_t) == 48, "an entry costs 64 bytes of metadata");

/* A node's table: its hot records (1 GiB of address space for the 2^26
 * slots a ref can name), then their cold records (3 GiB); reserved whole,
 * committed a segment at a time (table.c). */
#define PP__TABLE_SLOT_BITS 26u
#define PP__TABLE_HOT_BYTES ((uintptr_t)sizeof(pp__entry_t) << PP__TABLE_SLOT_BITS)
#define PP__TABLE_BYTES \
    ((uintptr_t)(sizeof(pp__entry_t) + sizeof(pp__cold_t)) << PP__TABLE_SLOT_BITS)
/* A segment: 2^15 slots, the unit of a table's commits -- 512 KiB of hot
 * records and 1.5 MiB of cold ones. */
#define PP__SEG_SHIFT      15u
#define PP__SEG_SLOTS      ((uint32_t)1 << PP__SEG_SHIFT)
#define PP__SEG_HOT_BYTES  ((size_t)PP__SEG_SLOTS * sizeof(pp__entry_t))
#define PP__SEG_COLD_BYTES ((size_t)PP__SEG_SLOTS * sizeof(pp__cold_t))

_Static_assert((PP__TABLE_BYTES & (PP__TABLE_BYTES - 1)) == 0, "tables align to their size");
_Static_assert(sizeof(pp__entry_t) == sizeof(pp__inline_entry_t),
               "pinpool_inline.h indexes the hot records as the table does");

static inline uintptr_t pp__table_base(const void *p)
{
    return (uintptr_t)p & ~(PP__TABLE_BYTES - 1);
}

/* The cold record of the entry whose hot record is e. */
static inline pp__cold_t *pp__cold(const pp__entry_t *e)
{
    uintptr_t base = pp__table_base(e);
    size_t i = ((uintptr_t)e - base) / sizeof(pp__entry_t);
    return (pp__cold_t *)(base + PP__TABLE_HOT_BYTES) + i;
}

/* The hot record of the entry whose cold record is c. */
static inline pp__entry_t *pp__entry_of_cold(const pp__cold_t *c)
{
    uintptr_t base = pp__table_base(c);
    size_t i = ((uintptr_t)c - base - PP__TABLE_HOT_BYTES) / sizeof(pp__cold_t);
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

/*
 * The transitions of `pw`, one function for each row of the table at the
 * top, and the only code that writes the word (cmake/check_layout.cmake
 * checks that no other file does).  The caller checks the row's "from" on
 * the word it read, *pw; the function makes the row's "to" from it and
 * writes it with the row's order.  A CAS returns whether the word was
 * still *pw; if not, *pw holds the word found, as the CAS left it, and
 * the caller decides again.  Where the caller needs the word made, *next
 * holds it.
 */

/* Always inlined, early: a transition then leaves its callers' code as it
 * was with the CAS written in place.  Left to the inliner, the calls
 * changed GCC's inlining and branch layout in the callers (unpin_any
 * put its successful CAS out of line). */
#define PP__PW_INLINE static inline __attribute__((always_inline))

/* put: the slot's next entry, generation gen, no pin (noswap: 0 or
 * PP__F_NOSWAP).  release: data, size, type and ow are visible to any
 * thread whose acquire of pw sees this generation (pin, get, stat). */
PP__PW_INLINE void pp__pw_put(pp__entry_t *e, uint32_t gen, uint64_t noswap)
{
    pp__atomic_store_release(&e->pw, ((uint64_t)gen << PP__GEN_SHIFT) |
                                         PP__F_LIVE | PP__F_RESIDENT | noswap);
}

/* pin: one pin more, REF and bits (pp__pin_bits) set (pp__pin_word).
 * acquire: pairs with the putter's release, the last load's release and
 * every earlier unpin's release, so the data and all writes made to it
 * under earlier pins are visible to the caller.  The changed word (count,
 * REF) also makes any eviction in progress fail its commit: a pin always
 * wins. */
PP__PW_INLINE bool pp__pw_try_pin(pp__entry_t *e, uint64_t *pw, uint64_t bits)
{
    return pp__atomic_cas_weak_acquire(&e->pw, pw, pp__pin_word(*pw, bits));
}

/* unpin of a live entry: one pin less (pp__unpin_word).  acq_rel: release
 * publishes the caller's writes to the data to the next pinner, to the
 * eviction's claim and to the last owner's kill (which pushes the entry to
 * its reclaimer); acquire, as before, takes the earlier unpinners' writes
 * along. */
PP__PW_INLINE bool pp__pw_try_unpin(pp__entry_t *e, uint64_t *pw)
{
    return pp__atomic_cas_weak_acq_rel(&e->pw, pw, pp__unpin_word(*pw));
}

/* unpin of a dead entry: one pin less; the last one queues the entry
 * unless an I/O is in flight (whoever ends it queues it).  *next: QUEUED
 * says the caller pushes it.  acq_rel: as in pp__pw_try_unpin; the final
 * unpinner carries every earlier unpinner's writes on to the reclaimer
 * (its push). */
PP__PW_INLINE bool pp__pw_try_unpin_dead(pp__entry_t *e, uint64_t *pw, uint64_t *next)
{
    *next = pp__unpin_word(*pw);
    if (pp__pw_pins(*next) == 0 && !(*pw & PP__F_BUSY))
        *next |= PP__F_QUEUED;
    return pp__atomic_cas_weak_acq_rel(&e->pw, pw, *next);
}

/* batch write pin: DIRTY, on an entry the caller pinned with WPIN
 * (pp_pin_many); returns the word before.  relaxed: a flag for the pool's
 * own bookkeeping; the caller's pin keeps the generation, so the OR cannot
 * touch a recycled slot, and it already made any eviction in progress
 * fail its commit. */
PP__PW_INLINE uint64_t pp__pw_mark_dirty(pp__entry_t *e)
{
    return pp__atomic_or_relaxed(&e->pw, PP__F_DIRTY);
}

/* last release: DEAD, and QUEUED if no pin and no I/O is in flight (with
 * one, whoever ends it queues the entry); *next: QUEUED says the caller
 * pushes it.  acq_rel: release hands the releaser's writes to the
 * reclaimer (through the push) or to the final unpinner; acquire takes the
 * unpinners' writes so the push carries them on. */
PP__PW_INLINE bool pp__pw_kill(pp__entry_t *e, uint64_t *pw, uint64_t *next)
{
    *next = *pw | PP__F_DEAD;
    if (pp__pw_pins(*pw) == 0 && !(*pw & PP__F_BUSY))
        *next |= PP__F_QUEUED;
    return pp__atomic_cas_weak_acq_rel(&e->pw, pw, *next);
}

/* get: ESCAPED.  acquire: as for a pin, the data and earlier writes are
 * visible.  ESCAPED also makes any eviction in progress fail its commit. */
PP__PW_INLINE bool pp__pw_escape(pp__entry_t *e, uint64_t *pw)
{
    return pp__atomic_cas_weak_acquire(&e->pw, pw, *pw | PP__F_ESCAPED);
}

/* evict: claim; write: the copy must be written (SWAPPED goes until it
 * is); *next: the claimed word.  The claim clears REF as well as DIRTY:
 * every pin sets REF, so a pin taken during the write-out changes the word
 * for good, even once it is dropped again, and the commit fails (the
 * entry was in use: it stays).  Were REF left set (a third sweep takes
 * entries with it), a read pin and its unpin would restore the claimed
 * word exactly.  acquire: pairs with the putter's release (data, size,
 * type) and with every unpin's release, so the bytes written are the last
 * ones written under a pin. */
PP__PW_INLINE bool pp__pw_claim_evict(pp__entry_t *e, uint64_t *pw, bool write, uint64_t *next)
{
    *next = (*pw | PP__F_EVICTING) &
            ~(PP__F_DIRTY | PP__F_REF | (write ? PP__F_SWAPPED : 0));
    return pp__atomic_cas_weak_acquire(&e->pw, pw, *next);
}

/* evict: second chance, REF cleared.  relaxed: the recency bit is a hint
 * for the hand.  A failed CAS rereads and decides again. */
PP__PW_INLINE bool pp__pw_second_chance(pp__entry_t *e, uint64_t *pw)
{
    return pp__atomic_cas_weak_relaxed(&e->pw, pw, *pw & ~PP__F_REF);
}

/* evict: commit, *pw the claimed word; *next: swapped out.  Strong: a
 * failure means the word changed (a pin, a get, a release won).
 * acq_rel: release publishes the record to the next loader's acquire;
 * acquire takes the release of every unpin made since the claim read the
 * word (a pin and its unpin in between leave REF set, which fails this
 * CAS; acquire orders them before the free all the same, should the word
 * ever come back unchanged). */
PP__PW_INLINE bool pp__pw_commit_evict(pp__entry_t *e, uint64_t *pw, uint64_t *next)
{
    *next = (*pw & ~(PP__F_EVICTING | PP__F_RESIDENT)) | PP__F_SWAPPED;
    return pp__atomic_cas_strong_acq_rel(&e->pw, pw, *next);
}

/* The end of an I/O that leaves the entry not resident, for
 * pp__pw_abandon_evict, pp__pw_drop_end and pp__pw_fail_load: the bits of
 * clear (its BUSY bit) go, those of set come, and QUEUED if the entry died
 * meanwhile and holds no pin.
 * acq_rel: release orders the swap thread's reads of the data before a
 * waiting write pinner's acquire of the cleared EVICTING, and publishes
 * the record with SWAPPED; acquire takes the pins, unpins and releases
 * made meanwhile, so that when this CAS queues the entry, the push carries
 * them on to the reclaimer's free (as a final unpin's acq_rel does). */
PP__PW_INLINE bool pp__pw_end_io(pp__entry_t *e, uint64_t *pw, uint64_t clear, uint64_t set,
                                 uint64_t *next)
{
    *next = (*pw & ~clear) | set;
    if ((*next & PP__F_DEAD) && pp__pw_pins(*next) == 0)
        *next |= PP__F_QUEUED;
    return pp__atomic_cas_weak_acq_rel(&e->pw, pw, *next);
}

/* evict: abandon, EVICTING cleared; kept: the record holds a written copy
 * (SWAPPED).  acq_rel: see pp__pw_end_io. */
PP__PW_INLINE bool pp__pw_abandon_evict(pp__entry_t *e, uint64_t *pw, bool kept, uint64_t *next)
{
    return pp__pw_end_io(e, pw, PP__F_EVICTING, kept ? PP__F_SWAPPED : 0, next);
}

/* drop: death, *pw the claimed word; EVICTING kept, so the slot stays the
 * dropper's until pp__pw_drop_end.  Strong: a failure means a pin, get or
 * release won.  acquire: as the eviction's commit, it takes the release of
 * every unpin since the claim read the word (a pin and its unpin leave REF
 * set, which fails this CAS), so the push at the drop's end carries them
 * on to the reclaimer's free. */
PP__PW_INLINE bool pp__pw_drop_kill(pp__entry_t *e, uint64_t *pw)
{
    return pp__atomic_cas_strong_acquire(&e->pw, pw, *pw | PP__F_DEAD);
}

/* drop: end, EVICTING cleared on the dead entry, which no pin can reach:
 * QUEUED.  acq_rel: see pp__pw_end_io. */
PP__PW_INLINE bool pp__pw_drop_end(pp__entry_t *e, uint64_t *pw, uint64_t *next)
{
    return pp__pw_end_io(e, pw, PP__F_EVICTING, 0, next);
}

/* load: claim.  acquire: pairs with the eviction commit's release (the
 * record). */
PP__PW_INLINE bool pp__pw_claim_load(pp__entry_t *e, uint64_t *pw)
{
    return pp__atomic_cas_weak_acquire(&e->pw, pw, *pw | PP__F_LOADING);
}

/* load: commit, LOADING cleared, RESIDENT and REF set; pin: the loader
 * pins the entry in the same CAS (bits: pp__pin_bits), unless it died
 * meanwhile; QUEUED if it died and holds no pin.  acq_rel: release orders
 * e->data and the loaded bytes before every later pin's acquire of
 * RESIDENT; acquire takes the release of an owner who let go meanwhile, so
 * a push carries it on to the reclaimer's free. */
PP__PW_INLINE bool pp__pw_commit_load(pp__entry_t *e, uint64_t *pw, bool pin, uint64_t bits,
                                      uint64_t *next)
{
    *next = (*pw & ~PP__F_LOADING) | PP__F_RESIDENT | PP__F_REF;
    if (pin && !(*pw & PP__F_DEAD))
        *next = pp__pin_word(*next, bits);
    if ((*next & PP__F_DEAD) && pp__pw_pins(*next) == 0)
        *next |= PP__F_QUEUED;
    return pp__atomic_cas_weak_acq_rel(&e->pw, pw, *next);
}

/* load: fail, LOADING cleared, the entry left swapped.  acq_rel: see
 * pp__pw_end_io (acquire as for the commit). */
PP__PW_INLINE bool pp__pw_fail_load(pp__entry_t *e, uint64_t *pw, uint64_t *next)
{
    return pp__pw_end_io(e, pw, PP__F_LOADING, 0, next);
}

/* reclaim: FREE, of the same generation gen, so stale refs keep failing
 * (the caller retires the slot if gen is the last).  release: the free and
 * the slot's resets happen before anything that later acquires this word
 * (debug scans); a later putter gets the slot through the free-slot stack,
 * whose push orders them as well. */
PP__PW_INLINE void pp__pw_reclaim(pp__entry_t *e, uint32_t gen)
{
    pp__atomic_store_release(&e->pw, (uint64_t)gen << PP__GEN_SHIFT);
}

/* promote: HOT, the p pins moved to hot slot i.  acq_rel: release
 * publishes the counters' words stored before to every pinner that sees
 * HOT; acquire takes the unpins released on the word, so the demotion
 * carries them on with the rest. */
PP__PW_INLINE bool pp__pw_promote(pp__entry_t *e, uint64_t *pw, unsigned i)
{
    return pp__atomic_cas_weak_acq_rel(&e->pw, pw, (*pw & ~PP__PINS_MASK) | PP__F_HOT | i);
}

/* demote: HOT cleared, the count the sum of the hot counters; *next: the
 * word made.  Strong: a failure means the word changed.  acq_rel: release
 * hands the counters' unpins on with the sum to the next change of the
 * word (a final unpin, an eviction's claim); acquire (also on failure) as
 * for any change of pw. */
PP__PW_INLINE bool pp__pw_demote(pp__entry_t *e, uint64_t *pw, uint64_t sum, uint64_t *next)
{
    *next = (*pw & ~(PP__F_HOT | PP__PINS_MASK)) | sum;
    return pp__atomic_cas_strong_acq_rel(&e->pw, pw, *next);
}

/* For tests only (pp__debug_set_gen): pw, the entry's word, with its
 * generation set to gen.  release: as in pp__pw_put, the new generation
 * publishes the entry. */
PP__PW_INLINE void pp__pw_test_set_gen(pp__entry_t *e, uint64_t pw, uint32_t gen)
{
    uint64_t low = ((uint64_t)1 << PP__GEN_SHIFT) - 1;
    pp__atomic_store_release(&e->pw, (pw & low) | ((uint64_t)gen << PP__GEN_SHIFT));
}

#endif /* PP_ENTRY_H */
