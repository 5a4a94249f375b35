/*
 * transport_inproc.h -- the in-process transport of the MPI layer's tests
 * (transport_inproc.c): an implementation of src/mpi/transport.h whose
 * ranks are threads of one process.  Test machinery, not part of the
 * product: it is built into pinpool_mpi_testlib (cmake/pinpool_mpi.cmake),
 * which the MPI tests (tests/mpi/) and mpi_torture link.
 */
#ifndef PP_MPI_TRANSPORT_INPROC_H
#define PP_MPI_TRANSPORT_INPROC_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

/* A world of n ranks; each rank's transport is used by one thread at a
 * time (its progress thread).  Chaos, from the seed: each message is held back for a random
 * number of the receiver's polls (0..max_delay), handed out in random
 * order among those due, and, with PP__SEND_DUP_OK, delivered a second
 * time with probability dup_per_mille / 1000.  A send with a done
 * callback is zero-copy: its body is read when the message is handed out
 * (its duplicate's at the same time), and done runs at the sender's first
 * poll after that, so such a send completes only once it is received, as
 * a large MPI send does.  destroy of a rank does nothing: the world owns
 * its ranks. */
typedef struct pp__inproc_world pp__inproc_world_t;
typedef struct pp__inproc_chaos {
    uint64_t seed;
    unsigned max_delay;        /* polls */
    unsigned dup_per_mille;
} pp__inproc_chaos_t;

int pp__inproc_world_create(int n, const pp__inproc_chaos_t *chaos, pp__inproc_world_t **out);
pp__transport_t *pp__inproc_rank(pp__inproc_world_t *w, int rank);
/* Messages sent and not yet handed out, in the whole world. */
size_t pp__inproc_in_flight(pp__inproc_world_t *w);
/* Frees the world; messages still in flight are dropped (and counted:
 * the return value). */
size_t pp__inproc_world_destroy(pp__inproc_world_t *w);

#endif /* PP_MPI_TRANSPORT_INPROC_H */
