/*
 * transport.h -- how the MPI layer's progress thread talks to other ranks.
 *
 * Two implementations: MPI (the product: the progress thread alone calls
 * MPI, on a duplicated communicator) and the in-process transport of
 * transport_inproc.c, whose ranks are threads of one process and whose
 * seeded scheduler reorders, delays and (for messages sent with
 * PP__SEND_DUP_OK) duplicates what it carries, so that the protocol's
 * race tests run without mpiexec, under TSan, and replay from a seed.
 *
 * A message is bytes with a tag.  send copies the bytes (the caller may
 * reuse its buffer at once); poll hands out one received message or
 * nothing, never blocking; the receiver frees what poll gave it with
 * msg_free.  Messages between two ranks may arrive in any order: the
 * protocol must not depend on MPI's non-overtaking rule.
 */
#ifndef PP_MPI_TRANSPORT_H
#define PP_MPI_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define PP__SEND_DUP_OK 0x1u   /* the protocol drops duplicates of this one */

typedef struct pp__msg {
    int src;
    int tag;
    size_t len;
    void *buf;                 /* len bytes, the transport's */
} pp__msg_t;

typedef struct pp__transport pp__transport_t;

typedef struct pp__transport_ops {
    /* 0, PP_EINVAL (bad dst or tag), PP_ENOMEM, PP_EIO (the engine failed:
     * the message is not sent). */
    int (*send)(pp__transport_t *t, int dst, int tag, const void *buf, size_t len,
                unsigned flags);
    /* 1 and *out: a message; 0: none now; < 0: PP_EIO. */
    int (*poll)(pp__transport_t *t, pp__msg_t *out);
    void (*msg_free)(pp__transport_t *t, pp__msg_t *m);
} pp__transport_ops_t;

struct pp__transport {
    const pp__transport_ops_t *ops;
    int rank, size;
};

/* The in-process transport (transport_inproc.c).  A world of n ranks;
 * each rank's transport is used by one thread at a time (its progress
 * thread).  Chaos, from the seed: each message is held back for a random
 * number of the receiver's polls (0..max_delay), handed out in random
 * order among those due, and, with PP__SEND_DUP_OK, delivered a second
 * time with probability dup_per_mille / 1000. */
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

#endif /* PP_MPI_TRANSPORT_H */
