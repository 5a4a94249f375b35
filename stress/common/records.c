/*
 * stress/common/records.c -- the records of the entries a stress program
 * puts (records.h).
 */
#include "common/records.h"
#include "common/fail.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void rec_check_free_holders(uint64_t k, pp_ref_t ref, int32_t o, int32_t p, int32_t q,
                            const char *qsbr_note)
{
    if (o != 0)
        fail_at(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d "
                "owner(s)", k, ref, o);
    if (p != 0)
        fail_at(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while the program holds %d "
                "pin(s)", k, ref, p);
    if (q != 0)
        fail_at(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed while %d QSBR thread(s) still "
                "use its pp_get pointer (before their pp_quiescent)%s", k, ref, q, qsbr_note);
}

static unsigned char *chunk_new(const rectab_t *t)
{
    unsigned char *c = calloc(REC_CHUNK, t->elem);
    if (c == NULL)
        oom();
    return c;
}

void rectab_init(rectab_t *t, size_t elem, uint64_t max, int eager)
{
    t->elem = elem;
    t->max = max;
    t->nchunks = (size_t)((max + REC_CHUNK - 1) >> REC_CHUNK_BITS);
    t->chunks = calloc(t->nchunks, sizeof *t->chunks);
    if (t->chunks == NULL)
        oom();
    atomic_init(&t->nids, 0);
    for (size_t i = 0; eager && i < t->nchunks; i++)
        atomic_init(&t->chunks[i], chunk_new(t));
}

void *rectab_new(rectab_t *t, uint64_t *kout)
{
    uint64_t k = atomic_fetch_add_explicit(&t->nids, 1, memory_order_relaxed);
    *kout = k;
    if (k >= t->max)
        return NULL;
    size_t ci = (size_t)(k >> REC_CHUNK_BITS);
    unsigned char *c = atomic_load_explicit(&t->chunks[ci], memory_order_acquire);
    if (c == NULL) {
        unsigned char *n = chunk_new(t);
        unsigned char *exp = NULL;
        /* release: the zeroed records are visible to whoever loads it */
        if (atomic_compare_exchange_strong_explicit(&t->chunks[ci], &exp, n,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            c = n;
        else {
            free(n);
            c = exp;
        }
    }
    return c + (size_t)(k & (REC_CHUNK - 1)) * t->elem;
}

void rectab_reset(rectab_t *t)
{
    for (size_t i = 0; i < t->nchunks; i++) {
        unsigned char *c = atomic_load(&t->chunks[i]);
        if (c != NULL)
            memset(c, 0, (size_t)REC_CHUNK * t->elem);
    }
    atomic_store(&t->nids, 0);
}

void rectab_free(rectab_t *t)
{
    for (size_t i = 0; i < t->nchunks; i++)
        free(atomic_load(&t->chunks[i]));
    free(t->chunks);
    t->chunks = NULL;
}
