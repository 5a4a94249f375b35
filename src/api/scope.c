/*
 * scope.c -- scopes: a ledger of the pins a task holds (pinpool.h,
 * "Scopes").
 *
 * A scope is the caller's memory: an array of the refs pinned through it,
 * PP_SCOPE_INLINE of them inside the struct, more on the heap.  The pins
 * themselves are ordinary pins (pp_pin_loc, pp_pin_many_loc, pp_unpin,
 * pp_unpin_many): a scope adds no state to an entry and costs nothing to
 * pins taken without one.
 *
 * One call at a time: each call claims the scope's busy word with a
 * compare-and-swap and gives it back with a store, so a second call while
 * one runs sees it taken and returns PP_EINUSE, having touched nothing.
 * The ledger itself (n_, the refs) is then written by one thread at a
 * time, ordered by that claim: whoever claims next sees what the last
 * holder wrote, whichever thread it ran on.  The busy word is a plain
 * uint32_t (pinpool.h is also compiled as C++, which has no _Atomic), so
 * it goes through atomics.h's plain-word helpers.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* docs/scheduler.md gives the size (the header's fields, then the inline
 * ledger). */
_Static_assert(sizeof(pp_scope_t) == 48 + PP_SCOPE_INLINE * sizeof(pp_ref_t),
               "pp_scope_t is not the size the docs give");

#define PP__SCOPE_OPEN  0x53434f50u   /* "SCOP" */
#define PP__SCOPE_ENDED 0x444e4524u   /* "$END" */

/* Claims s for this call: 0, PP_EINVAL (not an open scope) or PP_EINUSE. */
static int scope_claim(pp_scope_t *s)
{
    if (PP__UNLIKELY(s == NULL))
        return PP_EINVAL;
    uint32_t free_ = 0;
    /* acquire: pairs with the release in scope_leave, so this call sees
     * the ledger as the previous call left it, on whatever thread it ran. */
    if (PP__UNLIKELY(!pp__atomic_plain_cas_strong_acquire(&s->busy_, &free_, 1u)))
        return PP_EINUSE;
    /* state_ and pool_ are written before the first claim (init) or under a
     * claim (end), so the acquire above orders their reads too. */
    if (PP__UNLIKELY(s->state_ != PP__SCOPE_OPEN || s->pool_ == NULL)) {
        pp__atomic_plain_store_relaxed(&s->busy_, 0u);   /* nothing written */
        return PP_EINVAL;
    }
    return 0;
}

static void scope_leave(pp_scope_t *s)
{
    /* release: publishes this call's writes to the ledger to the next
     * claim (scope_claim). */
    pp__atomic_plain_store_release(&s->busy_, 0u);
}

static inline pp_ref_t *scope_refs(pp_scope_t *s)
{
    return s->heap_ != NULL ? s->heap_ : s->inline_;
}

/* Room for k more refs: 0 or PP_ENOMEM (the ledger unchanged). */
static int scope_reserve(pp_scope_t *s, size_t k)
{
    size_t cap = s->heap_ != NULL ? s->cap_ : PP_SCOPE_INLINE;
    if (PP__LIKELY(k <= cap - s->n_))
        return 0;
    if (k > UINT32_MAX - s->n_)
        return PP_ENOMEM;
    size_t need = (size_t)s->n_ + k;
    while (cap < need)
        cap = cap * 2 > UINT32_MAX ? UINT32_MAX : cap * 2;
    pp_ref_t *heap = pp__alloc_resize(s->heap_, cap * sizeof *heap);
    if (heap == NULL)
        return PP_ENOMEM;
    if (s->heap_ == NULL)
        memcpy(heap, s->inline_, s->n_ * sizeof *heap);
    s->heap_ = heap;
    s->cap_ = (uint32_t)cap;
    return 0;
}

#undef pp_scope_init
void pp_scope_init(pp_scope_t *s, pp_pool_t *pool)
{
    pp_scope_init_loc(s, pool, NULL, 0);
}

void pp_scope_init_loc(pp_scope_t *s, pp_pool_t *pool, const char *file, int line)
{
    if (s == NULL)
        return;
    s->pool_ = pool;
    s->heap_ = NULL;
    s->n_ = s->cap_ = 0;
    s->state_ = PP__SCOPE_OPEN;
    s->file_ = file;
    s->line_ = line;
    /* release: a scope initialized on one thread and first used on another
     * is handed over by the scheduler; this orders the fields above before
     * any claim that sees the word, all the same. */
    pp__atomic_plain_store_release(&s->busy_, 0u);
}

int pp_scope_pin(pp_scope_t *s, pp_ref_t ref, unsigned flags, void **data)
{
    int rc = scope_claim(s);
    if (PP__UNLIKELY(rc != 0))
        return rc;
    rc = scope_reserve(s, 1);
    if (PP__LIKELY(rc == 0))
        rc = pp_pin_loc(s->pool_, ref, flags, data, s->file_, s->line_);
    if (PP__LIKELY(rc == 0))
        scope_refs(s)[s->n_++] = ref;
    scope_leave(s);
    return rc;
}

int pp_scope_pin_many(pp_scope_t *s, const pp_ref_t *refs, size_t n, unsigned flags,
                      void **data)
{
    int rc = scope_claim(s);
    if (PP__UNLIKELY(rc != 0))
        return rc;
    if (n != 0 && refs == NULL)
        rc = PP_EINVAL;
    else
        rc = scope_reserve(s, n);
    if (PP__LIKELY(rc == 0))
        rc = pp_pin_many_loc(s->pool_, refs, n, flags, data, s->file_, s->line_);
    if (PP__LIKELY(rc == 0) && n != 0) {
        memcpy(scope_refs(s) + s->n_, refs, n * sizeof *refs);
        s->n_ += (uint32_t)n;
    }
    scope_leave(s);
    return rc;
}

int pp_scope_unpin(pp_scope_t *s, pp_ref_t ref)
{
    int rc = scope_claim(s);
    if (PP__UNLIKELY(rc != 0))
        return rc;
    pp_ref_t *r = scope_refs(s);
    uint32_t i = s->n_;
    while (i > 0 && r[i - 1] != ref)
        i--;
    if (i == 0) {
        rc = PP_ENOTPINNED;
    } else if ((rc = pp_unpin(s->pool_, ref)) == 0) {
        r[i - 1] = r[--s->n_];   /* the order of the ledger does not matter */
    }
    scope_leave(s);
    return rc;
}

/* Takes the first k refs off the ledger (their pins are dropped). */
static void scope_forget(pp_scope_t *s, uint32_t k)
{
    pp_ref_t *r = scope_refs(s);
    memmove(r, r + k, (s->n_ - k) * sizeof *r);
    s->n_ -= k;
}

int pp_scope_end(pp_scope_t *s)
{
    int rc = scope_claim(s);
    if (PP__UNLIKELY(rc != 0))
        return rc;
    /* All at once (the usual end).  pp_unpin_many says how many leading
     * refs it is through with: those leave the ledger, so no pin is ever
     * dropped twice. */
    size_t done = 0;
    if (s->n_ != 0)
        rc = pp_unpin_many(s->pool_, scope_refs(s), s->n_, &done);
    scope_forget(s, (uint32_t)done);
    /* PP_ENOMEM: this thread could not register, nothing was dropped.  The
     * scope stays open with its pins, for a retry. */
    if (rc == PP_ENOMEM) {
        scope_leave(s);
        return rc;
    }
    /* A pin of the ledger was dropped behind the scope's back: one by one,
     * each pin still listed is dropped once, as far as it is there.  If
     * the batch's check refused it (done == 0), the first error is the
     * first of those unpins, as pp_unpin gives it. */
    if (done == 0)
        rc = 0;
    pp_ref_t *r = scope_refs(s);
    for (uint32_t i = 0; i < s->n_; i++) {
        int e = pp_unpin(s->pool_, r[i]);
        if (e != 0 && rc == 0)
            rc = e;
    }
    if (s->heap_ != NULL) {
        pp__alloc_free(s->heap_);
        s->heap_ = NULL;
    }
    s->n_ = s->cap_ = 0;
    s->state_ = PP__SCOPE_ENDED;
    scope_leave(s);
    return rc;
}

size_t pp_scope_count(const pp_scope_t *s)
{
    if (s == NULL || s->state_ != PP__SCOPE_OPEN)
        return 0;
    return s->n_;
}
