/*
 * checks.h -- what every part of pinpool uses to check itself and to be
 * tested: assertions in tiers, branch hints and inlining, the padding rule,
 * random yields and test points.
 *
 * The library's sources are compiled twice.  The product (libpinpool.so,
 * libpinpool.a) has PP__TESTING 0: test points and yields compile to
 * nothing, and alloc.c neither counts nor fails allocations.  The testing
 * variant (the static library pinpool_testing, which the tests, the stress
 * programs and the fuzz target link) has PP__TESTING=1: they are compiled
 * in, and so are yield.c and testhooks.c.  The switches that tests turn
 * (pp__debug_yield_set, pp__test_point_hook) are declared in testhooks.h,
 * which only the testing variant may include.
 */
#ifndef PP_CHECKS_H
#define PP_CHECKS_H

#include <stdbool.h>
#include <stddef.h>

#include "os/atomics.h"

#ifndef PINPOOL_DEBUG
#define PINPOOL_DEBUG 0
#endif
#ifndef PP__TESTING
#define PP__TESTING 0
#endif

/* Debug checks are compiled in every build and removed as dead code when
 * off (jemalloc's config_debug), so they never rot.  Three tiers, each
 * aborting with file and line (pp__error_die) -- a caller's misuse is an error
 * code, never one of these:
 *   PP__CHECK(c)    always on: cheap, guards an internal invariant whose
 *                   violation would corrupt memory;
 *   PP__ASSERT(c)   debug builds: the pre- and postconditions the internal
 *                   API states (internal.h), and cheap invariants on the
 *                   way;
 *   PP__EXPENSIVE(c) debug builds: whole-structure walks
 *                   (pp__pool_is_valid, pp__pool_words_valid), at drain and
 *                   destroy. */
static const bool pp__config_debug = PINPOOL_DEBUG != 0;

_Noreturn void pp__error_die(const char *file, int line, const char *what);
#define PP__CHECK(cond)                                                        \
    do { if (__builtin_expect(!(cond), 0)) pp__error_die(__FILE__, __LINE__, #cond); } while (0)
#define PP__ASSERT(cond)                                                       \
    do { if (pp__config_debug && !(cond)) pp__error_die(__FILE__, __LINE__, #cond); } while (0)
#define PP__EXPENSIVE(cond)                                                    \
    do { if (pp__config_debug && !(cond)) pp__error_die(__FILE__, __LINE__, #cond); } while (0)

#define PP__LIKELY(x)   __builtin_expect(!!(x), 1)
#define PP__UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Out of line and cold: rarely run, kept away from the hot code.  Out of
 * line only: kept out of its callers' bodies (their registers), but
 * optimised as ordinary code. */
#define PP__COLD     __attribute__((noinline, cold))
#define PP__NOINLINE __attribute__((noinline))
#define PP__CACHELINE   64
/* Data written by one thread and never by another is kept PP__PAD bytes
 * apart: CPUs prefetch cache lines in adjacent pairs, so two threads
 * writing neighbouring lines still contend. */
#define PP__PAD         128
static inline size_t pp__pad(size_t n) { return (n + PP__PAD - 1) & ~(size_t)(PP__PAD - 1); }

/*
 * Random yields (liburcu's DEBUG_YIELD), debug builds of the testing
 * variant only.  PP__YIELD(X) marks a point of class PP__YIELD_X where a
 * race window is worth widening; when that class is enabled the calling
 * thread calls sched_yield() there with probability 1/one_in (a
 * thread-local PRNG).  Off until enabled by pp__debug_yield_set() or by
 * the environment:
 *
 *   PINPOOL_YIELD=CLASSES[:ONE_IN]   read at the first pp_pool_create of
 *                                    the process, unless
 *                                    pp__debug_yield_set was called first
 *
 * CLASSES is "all", a list of class names separated by ',' or '+' (pin,
 * unpin, owner, reclaim, evict, load) or a mask (0x3f); ONE_IN defaults to
 * 8 (1: yield every time).  E.g. PINPOOL_YIELD=all:4,
 * PINPOOL_YIELD=evict,load:2.  In other builds PP__YIELD compiles to
 * nothing (the hot paths stay free of calls).  In the testing variant's
 * other builds pp__debug_yield_set does nothing and
 * pp__debug_yield_available() is false; the product never reads
 * PINPOOL_YIELD.  yield.c.
 */
#define PP__YIELD_PIN     (1u << 0)  /* pin, get, pin_many: before the pin's CAS */
#define PP__YIELD_UNPIN   (1u << 1)  /* unpin: before its CAS; a final unpin before its push */
#define PP__YIELD_OWNER   (1u << 2)  /* release and the transition to DEAD, before the push */
#define PP__YIELD_RECLAIM (1u << 3)  /* reclaimer: after the pop, after a grace period,
                                        before the free, before the slot's recycling */
#define PP__YIELD_EVICT   (1u << 4)  /* eviction: before and after the claim, between
                                        chunks of the write, before and after the commit */
#define PP__YIELD_LOAD    (1u << 5)  /* load: after the claim, before the commit */
#define PP__YIELD_ALL     0x3fu

/* pp_pool_create: applies PINPOOL_YIELD (first call of the process only). */
#if PP__TESTING
void pp__debug_yield_env(void);
#else
#define pp__debug_yield_env() ((void)0)   /* a macro: no symbol, even at -O0 */
#endif

#if PINPOOL_DEBUG && PP__TESTING
extern _Atomic unsigned pp__yield_mask;
void pp__yield_maybe(void);
/* relaxed: an on/off switch; no data is published through it. */
#define PP__YIELD(cls)                                                         \
    do {                                                                       \
        if (PP__UNLIKELY(pp__atomic_load_relaxed(&pp__yield_mask) & PP__YIELD_##cls)) \
            pp__yield_maybe();                                                 \
    } while (0)
/* Whether class cls yields: the fast paths, which have no yield points,
 * step aside for the paths that do. */
#define PP__YIELD_ON(cls) ((pp__atomic_load_relaxed(&pp__yield_mask) & PP__YIELD_##cls) != 0)
#else
#define PP__YIELD(cls) do { } while (0)
#define PP__YIELD_ON(cls) 0
#endif

/*
 * Test points (the testing variant): named places on cold paths where a
 * test can run code of its own on the thread that reaches them -- to stop
 * that thread there and drive an interleaving deterministically, which
 * random yields only make likely.  pp__test_point_hook(fn, ctx) installs
 * fn (NULL removes it); PP__TEST_POINT(X, arg) calls fn(PP__TP_X, arg, ctx)
 * when one is installed.  Off, a point costs one relaxed load and a
 * branch, and none sits on a hot path (pin, unpin, lookup).  In the
 * product a point compiles to nothing.  testhooks.c.
 */
enum pp__test_point {
    PP__TP_HOT_INSTALL,   /* hot.c, demote: the counters are closed and summed,
                             just before the CAS that installs the sum (arg: entry) */
    PP__TP_DROP_CLAIMED,  /* evict.c, drop of a PP_TYPE_DISCARD entry: claimed,
                             just before the CAS that kills it (arg: entry) */
    PP__TP_DROP_DEAD,     /* evict.c, drop: dead, just before its owners are
                             taken (arg: entry) */
    PP__TP_UNPIN_MANY_CHECKED, /* pin.c, pp_unpin_many, and its fast path
                             (pinpool_inline.h, in the library's code): the
                             batch passed its check, no pin dropped yet
                             (arg: the refs) */
    PP__TP_SWAP_IDLE,     /* swapper.c, a swap thread about to wait for work:
                             nothing in flight or held (arg: its node) */
    PP__TP_PASS,          /* swapper.c, a swap thread about to run a pass:
                             nothing of it read yet (arg: its node) */
    PP__TP_TRACE_ROUND,   /* trace.c, the trace's writer before a round:
                             nothing taken yet (arg: the pool) */
    PP__TP_HAND_WRAP,     /* evict.c, a pass's hand back at slot 0, before it
                             counts the slots of its new turn (arg: the node;
                             node->sw.hand is where the last turn ended) */
    PP__TP_PIN_MANY_UNDO, /* pin.c, pp_inline_pin_many_slow: the fast path
                             left pins to drop, none dropped yet (arg: the
                             refs) */
    PP__TP_SEG_PUBLISH,   /* table.c, a put committing a segment of its node's
                             table: committed, its slots not yet under the
                             lookups' bound (lim), the node's seg_lock held
                             (arg: the node) */
    PP__TP_SEG_LOCK,      /* table.c, a put whose slots lie in a segment it
                             does not see published, about to take the node's
                             seg_lock (arg: the node) */
    PP__TP_FAST_MISS,     /* pin.c, pp_inline_pin_slow and pp_inline_unpin_slow:
                             a pin or unpin the fast path left to the library
                             (arg: the ref) */
};
typedef void (*pp__test_point_fn)(enum pp__test_point where, void *arg, void *ctx);
#if PP__TESTING
void pp__test_point_run(enum pp__test_point where, void *arg);
extern _Atomic(pp__test_point_fn) pp__test_point_fn_;
/* relaxed: a switch; pp__test_point_run acquires the hook and its context. */
#define PP__TEST_POINT(where, arg)                                             \
    do {                                                                       \
        if (PP__UNLIKELY(pp__atomic_load_relaxed(&pp__test_point_fn_) != NULL)) \
            pp__test_point_run(PP__TP_##where, (arg));                         \
    } while (0)
#else
#define PP__TEST_POINT(where, arg) do { (void)(arg); } while (0)
#endif

#endif /* PP_CHECKS_H */
