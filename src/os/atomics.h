/*
 * atomics.h -- the only way pinpool's own code touches shared words.
 *
 * Every operation names its memory order (as mimalloc's mi_atomic_*), so
 * `grep -n 'acquire\|release\|acq_rel\|seq_cst' src/` finds every
 * synchronising access.  The comment at each acquire/release use says what
 * it orders.  Concurrency Kit's own structures (ck_stack, ck_ec, ck_epoch)
 * and its fences (ck_pr_fence_*) are used through ck's API, not through
 * these; no other file of src/ calls <stdatomic.h> itself.
 */
#ifndef PP_ATOMICS_H
#define PP_ATOMICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define pp__atomic_load_relaxed(p)  atomic_load_explicit((p), memory_order_relaxed)
#define pp__atomic_load_acquire(p)  atomic_load_explicit((p), memory_order_acquire)
#define pp__atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define pp__atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
/* seq_cst: only where a store must be ordered before a later load of
 * another word (store-buffering, Dekker's pattern): hot.c's demoters,
 * the backlog's waiters, the MPI layer's wake word and version waits. */
#define pp__atomic_load_seq_cst(p)  atomic_load_explicit((p), memory_order_seq_cst)
#define pp__atomic_store_seq_cst(p, v) atomic_store_explicit((p), (v), memory_order_seq_cst)
#define pp__atomic_add_seq_cst(p, v) atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define pp__atomic_sub_seq_cst(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_seq_cst)

#define pp__atomic_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define pp__atomic_sub_relaxed(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define pp__atomic_add_release(p, v) atomic_fetch_add_explicit((p), (v), memory_order_release)
#define pp__atomic_sub_release(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_release)
#define pp__atomic_sub_acq_rel(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define pp__atomic_or_relaxed(p, v)  atomic_fetch_or_explicit((p), (v), memory_order_relaxed)
#define pp__atomic_and_release(p, v) atomic_fetch_and_explicit((p), (v), memory_order_release)
#define pp__atomic_and_relaxed(p, v) atomic_fetch_and_explicit((p), (v), memory_order_relaxed)
#define pp__atomic_exchange_relaxed(p, v) atomic_exchange_explicit((p), (v), memory_order_relaxed)
#define pp__atomic_exchange_acquire(p, v) atomic_exchange_explicit((p), (v), memory_order_acquire)
/* A fence that orders everything before it against everything after it. */
#define pp__atomic_fence_seq_cst() atomic_thread_fence(memory_order_seq_cst)
/* A fence that makes the loads before it acquire loads: what follows it
 * stays after them. */
#define pp__atomic_fence_acquire() atomic_thread_fence(memory_order_acquire)

/* Compare-and-swap; on failure *expected is reloaded (relaxed/acquire). */
#define pp__atomic_cas_weak_relaxed(p, expected, desired)                     \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired),          \
        memory_order_relaxed, memory_order_relaxed)
#define pp__atomic_cas_weak_acquire(p, expected, desired)                     \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired),          \
        memory_order_acquire, memory_order_relaxed)
#define pp__atomic_cas_weak_release(p, expected, desired)                     \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired),          \
        memory_order_release, memory_order_relaxed)
#define pp__atomic_cas_weak_acq_rel(p, expected, desired)                     \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired),          \
        memory_order_acq_rel, memory_order_relaxed)
#define pp__atomic_cas_strong_relaxed(p, expected, desired)                   \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired),        \
        memory_order_relaxed, memory_order_relaxed)
#define pp__atomic_cas_strong_acquire(p, expected, desired)                   \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired),        \
        memory_order_acquire, memory_order_relaxed)
#define pp__atomic_cas_strong_release(p, expected, desired)                   \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired),        \
        memory_order_release, memory_order_relaxed)
#define pp__atomic_cas_strong_acq_rel(p, expected, desired)                   \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired),        \
        memory_order_acq_rel, memory_order_acquire)

/*
 * Plain words: a field of a public struct (pinpool.h) is a plain integer,
 * since that header is also compiled as C++, which has no _Atomic.  Such
 * a word is only ever touched through these, the compiler's __atomic
 * builtins on an ordinary pointer: pp_scope_t's busy word.
 */
#define pp__atomic_plain_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define pp__atomic_plain_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define pp__atomic_plain_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define pp__atomic_plain_cas_strong_acquire(p, expected, desired)             \
    __atomic_compare_exchange_n((p), (expected), (desired), false,             \
        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)

/*
 * A counter with a single writer (its owning thread) and any number of
 * concurrent readers (statistics).  No read-modify-write instruction is
 * needed: a relaxed load and a relaxed store of the owner's own value.
 */
static inline void pp__counter_add(_Atomic uint64_t *c, uint64_t v)
{
    pp__atomic_store_relaxed(c, pp__atomic_load_relaxed(c) + v);
}

/* ThreadSanitizer annotations (only in TSan builds), see TSAN notes in
 * epoch.c: ck_epoch's grace period is invisible to TSan, so the end of a
 * read section releases a per-pool token and every deferred free acquires
 * it. */
#if defined(__SANITIZE_THREAD__)
#define PP__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PP__TSAN 1
#endif
#endif

#ifdef PP__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define PP__TSAN_ACQUIRE(addr) __tsan_acquire((void *)(addr))
#define PP__TSAN_RELEASE(addr) __tsan_release((void *)(addr))
#else
#define PP__TSAN_ACQUIRE(addr) ((void)(addr))
#define PP__TSAN_RELEASE(addr) ((void)(addr))
#endif

#endif /* PP_ATOMICS_H */
