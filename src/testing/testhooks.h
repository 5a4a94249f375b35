/*
 * testhooks.h -- what the tests, the stress programs and the fuzz target use
 * to look inside the pool and to steer it: counted and failed allocations,
 * random yields and test points switched on, states set by hand, a pool on
 * a swap device of the test's own (pp__pool_create_dev, internal.h).  No
 * production file needs it: only those that define a hook include it
 * (alloc.c, yield.c, testhooks.c).
 *
 * Everything declared here exists only in the testing variant of the
 * library: the static library pinpool_testing, compiled with PP__TESTING=1
 * (checks.h), which the tests link.  The product (libpinpool.so,
 * libpinpool.a) has none of it, and the test api.no_test_symbols checks
 * that (cmake/check_exports.cmake).  A file that includes this header
 * without PP__TESTING would link against the product and fail: it stops
 * here instead.
 */
#ifndef PP_TESTHOOKS_H
#define PP_TESTHOOKS_H

#include "internal.h"

#if !PP__TESTING
#error "testhooks.h: the test hooks exist only with PP__TESTING=1 (link pinpool_testing)"
#endif

/* Allocations (alloc.c). */
uint32_t pp__table_seg_slots(void);   /* slots per table segment (entry.h) */
uint64_t pp__alloc_count(void);   /* pinpool's own allocations so far, all pools */
/* The allocation n allocations from now fails (0: the next); n < 0: none
 * does. */
void pp__alloc_fail_after(int64_t n);
/* Fault injection (the torture's --faults): while set, every allocation
 * above -- and the flat loads' data (swap.c) -- asks fail(size, ctx) first
 * and fails if it returns true.  NULL removes it.  Set it while no pool
 * call runs, or make fail() itself safe to call from any thread (it is
 * called from the pool's swap threads too). */
typedef bool (*pp__alloc_fault_fn)(size_t size, void *ctx);
void pp__alloc_fault_hook(pp__alloc_fault_fn fail, void *ctx);

/* Random yields (yield.c, checks.h).  mask: classes to enable (0: none);
 * one_in: yield with probability 1/one_in (0 is taken as 1).  Outside
 * debug builds nothing, and available() is false. */
void pp__debug_yield_set(unsigned mask, unsigned one_in);
bool pp__debug_yield_available(void);

/* Test points (testhooks.c, checks.h): fn runs at every point reached,
 * on the thread that reaches it; NULL removes it. */
void pp__test_point_hook(pp__test_point_fn fn, void *ctx);

/* States set by hand and looks inside (testhooks.c). */
int pp__debug_set_owners(pp_pool_t *pool, pp_ref_t ref, uint32_t owners);
/* Gives a live, unpinned entry generation gen; its new ref in *out.
 * Single-threaded use only (no other call may touch the entry). */
int pp__debug_set_gen(pp_pool_t *pool, pp_ref_t ref, uint32_t gen, pp_ref_t *out);
/* The swap copy of a live entry: its stream offset and stored length.
 * PP_ESTALE, or PP_EAGAIN if it has no copy.  Tests only. */
int pp__debug_swap_where(pp_pool_t *pool, pp_ref_t ref, uint64_t *off, uint64_t *len);
/* op > 0: tries to make ref's entry HOT (only while it holds no pin);
 * op == 0: ends its HOT mode; op < 0: only asks.  Returns 1 if it is HOT
 * now, 0 if not, PP_ESTALE.  Tests only. */
int pp__debug_hot(pp_pool_t *pool, pp_ref_t ref, int op);
/* Failed CASes in one pin before it tries to promote (0: never; default 2). */
void pp__debug_hot_after(pp_pool_t *pool, unsigned fails);
/* The pool's private swap directory ("" without swap). */
const char *pp__swap_path(pp_pool_t *pool);

#endif /* PP_TESTHOOKS_H */
