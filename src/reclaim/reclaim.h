/*
 * reclaim.h -- the reclaim layer: each node's reclaimer thread, which waits
 * out the grace period of what retire.c queued and frees it.  It calls
 * swap/ (to drop a freed entry's copy and give its room back) and below.
 */
#ifndef PP_RECLAIM_H
#define PP_RECLAIM_H

#include "swap/swap.h"

/* reclaim.c */
int pp__reclaim_start(pp_pool_t *pool);
void pp__reclaim_stop(pp_pool_t *pool);
/* The lag histogram: the bucket of a lag of ns, and the top of bucket b. */
unsigned pp__reclaim_lag_bucket(uint64_t ns);
uint64_t pp__reclaim_lag_top(unsigned b);

#endif /* PP_RECLAIM_H */
