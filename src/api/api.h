/*
 * api.h -- the top layer: the calls of pinpool.h (pool.c, owner.c, pin.c,
 * scope.c, stats.c) and the options from the environment (env.c).  It calls every layer below; nothing below calls it.
 */
#ifndef PP_API_H
#define PP_API_H

#include "reclaim/reclaim.h"

/* pin.c -- every pin path (fast, full, slow, after a load), unpin, their
 * batched forms, escaped access, prefetch. */
/* An unpin by thread t, tracked if the pool tracks pins. */
int pp__pin_unpin(pp_pool_t *pool, pp_ref_t ref, pp__thread_t *t);
/* The slow path of a pin, get or pin_many: the entry is not resident, or a
 * write pin met an eviction in progress.  Pins (pin true) or makes
 * resident (pin false), loading it if needed (load.c).  0 or an error, as
 * pp_pin documents. */
int pp__pin_slow(pp_pool_t *pool, pp__entry_t *e, pp_ref_t ref, unsigned flags,
                 bool pin, void **data);

/* env.c -- *eff gets opt, with the options it left at their default taken
 * from PINPOOL_MEMORY_LIMIT, PINPOOL_SWAP_DIR and PINPOOL_SWAP_DIRECT
 * (docs/api.md, "Environment"); *trace gets PINPOOL_TRACE, or NULL.  0,
 * or PP_EINVAL with a report line for a value that cannot be read.
 * PINPOOL_VERBOSE=1 reports each value taken. */
int pp__env_options(const pp_options_t *opt, pp_options_t *eff, const char **trace);

/* trace.c -- the timeline trace: pp_trace_start and pp_trace_stop of
 * pinpool.h, and their writer thread. */

/* pool.c */
/* pp_pool_create with the given swap device instead of the file device
 * (NULL: the file device); it takes dev over, closing it on failure.  The
 * tests give devices that fail or stop on purpose. */
int pp__pool_create_dev(const pp_options_t *opt, struct pp__swapdev *dev, pp_pool_t **out);
/* Every entry and every node's hot slots obey the invariants drawn in
 * entry.h and hot.c.  Only while no call runs (tests, destroy). */
bool pp__pool_is_valid(pp_pool_t *pool);
/* Every entry's state word obeys the invariants that hold at every instant
 * (each transition is one CAS): safe while other calls run (drain). */
bool pp__pool_words_valid(pp_pool_t *pool);

#endif /* PP_API_H */
