/*
 * wset.h -- sets of weight intervals, for owners counted across ranks
 * (docs/mpi.md, "Owners across ranks, by weight").
 *
 * Weight is a set of disjoint half-open intervals [lo, hi) within
 * [0, UINT64_MAX).  The home of an entry keeps the intervals it minted and that
 * have not come back; a holder keeps the intervals it holds.  Adding an
 * interval that overlaps the set, or removing one that is not wholly in
 * it, is refused and changes nothing: that is how a token imported twice,
 * or a weight returned twice, is detected instead of counted.
 *
 * Not thread-safe: each set belongs to one thread (the progress thread,
 * or a proxy record under its owner's lock).
 */
#ifndef PP_MPI_WSET_H
#define PP_MPI_WSET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pp__wiv {
    uint64_t lo, hi;          /* [lo, hi), lo < hi */
} pp__wiv_t;

typedef struct pp__wset {
    pp__wiv_t *iv;            /* sorted by lo, disjoint, none adjacent */
    uint32_t n, cap;
} pp__wset_t;

#define PP__WSET_INIT { 0, 0, 0 }

/* Adds iv: 0; PP_EINVAL (empty or overlapping the set: nothing changes);
 * PP_ENOMEM.  Adjacent intervals merge. */
int pp__wset_add(pp__wset_t *s, pp__wiv_t iv);
/* Removes iv, which must lie wholly within one interval of the set: 0, or
 * PP_EINVAL (nothing changes); PP_ENOMEM if removing it splits an
 * interval in two and there is no room. */
int pp__wset_remove(pp__wset_t *s, pp__wiv_t iv);
/* Removes every part of iv that is in the set: *gone, the weight removed
 * (0: none of it was there).  0, PP_EINVAL (iv empty), PP_ENOMEM (iv lies
 * strictly inside one interval, whose split needs room: nothing changes). */
int pp__wset_remove_overlap(pp__wset_t *s, pp__wiv_t iv, uint64_t *gone);
/* Takes weight to give away: the upper half of the widest interval, or
 * that whole interval if it is 1 wide and the set holds another.  0 and
 * *out (a split shrinks an interval in place: it never allocates);
 * PP_EAGAIN if the set is empty or holds a single interval 1 wide (ask
 * the home to mint more). */
int pp__wset_split(pp__wset_t *s, pp__wiv_t *out);
bool pp__wset_empty(const pp__wset_t *s);
/* Sum of the widths (saturating at UINT64_MAX). */
uint64_t pp__wset_weight(const pp__wset_t *s);
void pp__wset_free(pp__wset_t *s);

#endif /* PP_MPI_WSET_H */
