/*
 * os.h -- the bottom layer: what pinpool asks of the system.  Its own
 * allocations (alloc.c), the error names and the abort (error.c;
 * pp__error_die is declared in checks.h), how threads sleep and wake
 * (wait.c), the swap
 * device (swapdev.h) and the io_uring ring (ring.h).  Nothing here knows
 * an entry or a pool's state.
 */
#ifndef PP_OS_H
#define PP_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ck_ec.h>

#include "os/atomics.h"
#include "os/checks.h"
#include "pinpool.h"

/* alloc.c -- pinpool's own allocations, counted (never the entries' data). */
void *pp__alloc_bytes(size_t size);
void *pp__alloc_zeroed(size_t n, size_t size);
void *pp__alloc_resize(void *p, size_t size);
void *pp__alloc_aligned(size_t align, size_t size);   /* zeroed */
void pp__alloc_free(void *p);
bool pp__alloc_note(void);        /* counts one made elsewhere; false: fail it */
/* Memory the swap store reads into or writes from, freed with free():
 * page-aligned and padded to pages if direct; from 2 MiB up aligned to
 * 2 MiB and advised MADV_HUGEPAGE. */
void *pp__alloc_io(size_t n, bool direct);

/* wait.c */
extern const struct ck_ec_mode pp__wait_ec_mode;   /* futex ops, many producers */
uint64_t pp__wait_now_ns(void);                    /* CLOCK_MONOTONIC, in ns */

#endif /* PP_OS_H */
