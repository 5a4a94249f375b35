/*
 * epoch.c -- epoch sections and QSBR.
 *
 * Each thread record (thread.c) holds a ck_epoch record.  What the epoch
 * protects: pins and owner counts do not need it, they are validated by
 * generation inside their own compare-and-swap (entry.h).  The
 * epoch protects readers that look at an entry WITHOUT holding a pin or an
 * owner -- pp_get, pp_stat -- against the slot being freed and recycled
 * under them.  The reclaimer frees an entry only after a ck_epoch grace
 * period that started after the entry was queued, so any such reader that
 * found the entry alive finishes first.
 *
 * Sections.  In the default mode a reader enters a ck_epoch section for the
 * duration of the call.  After its first pp_quiescent() a thread is in QSBR
 * mode: the section it enters on its next call stays open until its next
 * pp_quiescent(), so pointers from pp_get() stay valid between quiescent
 * points (the extended guarantee a scheduler worker gets for free by calling
 * pp_quiescent between tasks).
 *
 * TSan.  ck_epoch's grace period is computed inside libck, which TSan does
 * not see, so TSan cannot know that a free happens after every section that
 * could have seen the entry.  Leaving a section releases the pool's token
 * (__tsan_release) and every free acquires it first (__tsan_acquire), as
 * liburcu's annotate.h does; docs/design.md says why this is sound: a
 * reader still inside its section when a free runs has not released since
 * its accesses, so a grace period that is too short is still reported.
 */
#include "core/core.h"

int pp__epoch_init(pp_pool_t *pool)
{
    ck_epoch_init(&pool->epoch);
    if (pthread_mutex_init(&pool->reg_lock, NULL) != 0)
        return PP_ENOMEM;
    return 0;
}

void pp__epoch_enter(pp__thread_t *t)
{
    PP__ASSERT(t->in_use && !t->is_reclaimer);
    if (t->in_section)
        return;   /* QSBR: still inside since the last quiescent point */
    ck_epoch_begin(&t->rec, NULL);
    t->in_section = true;
}

void pp__epoch_end(pp__thread_t *t)
{
    if (!t->in_section)
        return;
    /* TSan: everything this reader did happens before any free that waited
     * for this section (see the comment at the top). */
    PP__TSAN_RELEASE(&t->pool->tsan_token);
    ck_epoch_end(&t->rec, NULL);
    t->in_section = false;
}

void pp__epoch_leave(pp__thread_t *t)
{
    if (!t->qsbr)
        pp__epoch_end(t);
}
