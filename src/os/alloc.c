/*
 * alloc.c -- every allocation pinpool makes for itself goes through here
 * (the entries' own data is the caller's, freed by its type).
 *
 * One place to count allocations -- so tests can show that the lock-free
 * calls allocate nothing -- and to make them fail on purpose, so tests can
 * show that every allocation failure is a clean PP_ENOMEM.  Node memory
 * (tables, segments) goes through pp__topology_node_alloc (topology.c), which counts
 * and fails here too.  The counter and the hooks exist in the testing
 * variant only (PP__TESTING, checks.h): in the product each call is the
 * allocator's, and fails only when the allocator does.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "os/os.h"
#include "os/swapdev.h"   /* PP__SWAP_ALIGN: what direct I/O needs */

#if PP__TESTING
#include "testing/testhooks.h"   /* the allocation hooks, defined here */

static _Atomic uint64_t test_allocs;
static _Atomic int64_t test_fail_countdown = -1;   /* < 0: never fail */
static _Atomic(pp__alloc_fault_fn) fault_fn;
static void *_Atomic test_fault_ctx;

void pp__alloc_fault_hook(pp__alloc_fault_fn fail, void *ctx)
{
    pp__atomic_store_relaxed(&test_fault_ctx, ctx);
    /* release: the context is stored before the hook that reads it. */
    pp__atomic_store_release(&fault_fn, fail);
}

/* Counts one allocation of size bytes; false if it must fail (injected). */
static bool alloc_ok_size(size_t size)
{
    pp__atomic_add_relaxed(&test_allocs, 1);
    /* acquire: pairs with the hook's release (its context). */
    pp__alloc_fault_fn fail = pp__atomic_load_acquire(&fault_fn);
    if (PP__UNLIKELY(fail != NULL) && fail(size, pp__atomic_load_relaxed(&test_fault_ctx)))
        return false;
    int64_t left = pp__atomic_load_relaxed(&test_fail_countdown);
    while (left >= 0) {
        if (pp__atomic_cas_weak_relaxed(&test_fail_countdown, &left, left - 1))
            return left != 0;
    }
    return true;
}

static bool alloc_ok(void)
{
    return alloc_ok_size(0);
}

void pp__alloc_fail_after(int64_t n)
{
    pp__atomic_store_relaxed(&test_fail_countdown, n);
}

bool pp__alloc_note(void)
{
    return alloc_ok();
}

uint64_t pp__alloc_count(void)
{
    return pp__atomic_load_relaxed(&test_allocs);
}

#else /* !PP__TESTING: nothing counted, nothing failed on purpose */

static inline bool alloc_ok_size(size_t size)
{
    (void)size;
    return true;
}

bool pp__alloc_note(void)
{
    return true;
}

#endif

void *pp__alloc_bytes(size_t size)
{
    return alloc_ok_size(size) ? malloc(size) : NULL;
}

void *pp__alloc_zeroed(size_t n, size_t size)
{
    return alloc_ok_size(n * size) ? calloc(n, size) : NULL;
}

void *pp__alloc_resize(void *p, size_t size)
{
    return alloc_ok_size(size) ? realloc(p, size) : NULL;
}

void *pp__alloc_aligned(size_t align, size_t size)
{
    void *p;
    if (!alloc_ok_size(size) || posix_memalign(&p, align, size) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

#define PP__HUGE (2u << 20)   /* a transparent huge page (x86-64; arm64 with 4 KiB pages) */

/* Page-aligned and padded to whole pages for direct I/O (so the device
 * moves it straight), plain malloc otherwise (glibc reuses the chunks
 * evictions just freed, where aligned requests of 1 MiB grow and trim the
 * heap, a brk and ~50 page faults, on every load).  From PP__HUGE bytes
 * up, in either mode, aligned to PP__HUGE and advised MADV_HUGEPAGE (a
 * hint; EINVAL without THP): memory a load reads into is fresh as often
 * as not, and its first touch costs a page fault per 4 KiB page, where a
 * huge page costs one (on the VM of docs/performance.md, 2.7 ms against
 * 0.55 ms to read and check 2 MiB). */
void *pp__alloc_io(size_t n, bool direct)
{
    n = n > 0 ? n : 1;
    if (n < PP__HUGE && !direct)
        return pp__alloc_bytes(n);
    void *p;
    if (!alloc_ok_size(n) ||
        posix_memalign(&p, n < PP__HUGE ? PP__SWAP_ALIGN : PP__HUGE,
                       (n + PP__SWAP_ALIGN - 1) / PP__SWAP_ALIGN * PP__SWAP_ALIGN) != 0)
        return NULL;
    if (n >= PP__HUGE)
        (void)madvise(p, n / PP__HUGE * PP__HUGE, MADV_HUGEPAGE);
    return p;
}

void pp__alloc_free(void *p)
{
    free(p);
}
