/*
 * transport.h -- how the MPI layer's progress thread talks to other ranks.
 *
 * Two implementations: MPI (transport_mpi.c, the product: the progress
 * thread alone calls MPI, on a duplicated communicator with
 * MPI_ERRORS_RETURN) and, for the tests only, the in-process transport
 * (tests/mpi/support/transport_inproc.h), whose ranks are threads of one
 * process and whose seeded scheduler reorders, delays and (for messages
 * sent with PP__SEND_DUP_OK) duplicates what it carries, so that the
 * protocol's race tests run without mpiexec, under TSan, and replay from
 * a seed.
 *
 * A message is a header and a body, sent as one message of hlen + blen
 * bytes with a tag.  send copies the header before it returns.  The body
 * is copied too when done is NULL; otherwise it is sent from the caller's
 * memory (no copy: a remote pin's reply goes out of the pinned entry) and
 * the caller must leave it alone until done(arg, err) is called, which
 * happens from a later poll on the same transport, never from send (done
 * may send; it must not poll).
 * poll hands out one received message or nothing, never blocking, and
 * runs the done callbacks of sends that completed.  A received buffer
 * comes from aligned_alloc(PP__MSG_ALIGN, ...): the receiver frees it with
 * msg_free, or keeps it (a reply becomes a cached copy in place) and
 * frees it with free().  Messages between two ranks may arrive in any
 * order: the protocol must not depend on MPI's non-overtaking rule.
 * Every call on one rank's transport comes from one thread at a time.
 */
#ifndef PP_MPI_TRANSPORT_H
#define PP_MPI_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define PP__SEND_DUP_OK 0x1u   /* the protocol drops duplicates of this one */
#define PP__MSG_ALIGN   64u    /* alignment of a received buffer */
#define PP__TAG_MAX     0x7fff /* tags are 0..PP__TAG_MAX (MPI guarantees 32767) */

typedef struct pp__msg {
    int src;
    int tag;
    size_t len;
    void *buf;                 /* len bytes, aligned to PP__MSG_ALIGN */
} pp__msg_t;

typedef struct pp__transport pp__transport_t;
typedef void (*pp__sent_fn)(void *arg, int err);

typedef struct pp__transport_ops pp__transport_ops_t;
struct pp__transport_ops {
    /* 0, PP_EINVAL (bad dst or tag, a NULL buffer with a length, more than
     * INT_MAX bytes for MPI, whose counts are ints), PP_ENOMEM, PP_EIO (the
     * engine failed: the message is not sent, done is not called; t->err
     * says why). */
    int (*send)(pp__transport_t *t, int dst, int tag, const void *hdr, size_t hlen,
                const void *body, size_t blen, unsigned flags, pp__sent_fn done,
                void *arg);
    /* 1 and *out: a message; 0: none now; < 0: PP_EIO (t->err says why),
     * or PP_ENOMEM (MPI: a message has come whose buffer could not be
     * allocated; the next poll tries again). */
    int (*poll)(pp__transport_t *t, pp__msg_t *out);
    void (*msg_free)(pp__transport_t *t, pp__msg_t *m);
    /* Sends not finished: with a done callback, until it has run; without,
     * until the engine is done with the transport's copy (MPI: until a
     * poll sees the request complete; in-process: at once). */
    size_t (*sends_pending)(pp__transport_t *t);
    /* Frees the transport (sends_pending must be 0: poll until it is).
     * MPI: collective, as create is. */
    void (*destroy)(pp__transport_t *t);
};

struct pp__transport {
    const pp__transport_ops_t *ops;
    int rank, size;
    char err[160];             /* the last engine failure, for reports */
};

/* The MPI transport (transport_mpi.c): MPI_Comm_dup of comm with
 * MPI_ERRORS_RETURN.  Collective; call from one thread, the same one as
 * destroy.  0, PP_EINVAL (out NULL, comm MPI_COMM_NULL or an
 * intercommunicator), PP_EIO (MPI not initialized, or an MPI call failed:
 * err, if not NULL, says why), PP_ENOMEM. */
#ifdef PP__WITH_MPI
#include <mpi.h>
int pp__transport_mpi_create(MPI_Comm comm, pp__transport_t **out, char *err, size_t errlen);
#endif

#endif /* PP_MPI_TRANSPORT_H */
