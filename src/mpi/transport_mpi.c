/*
 * transport_mpi.c -- the MPI transport (transport.h), the product's: the
 * layer's progress thread alone calls it, on a duplicate of the caller's
 * communicator whose error handler is MPI_ERRORS_RETURN, so that no MPI
 * failure here aborts the job: each is a PP_EIO with MPI_Error_string's
 * words in t->err.
 *
 * Without a done callback a send is one MPI_Isend of the header and body
 * copied into one buffer, freed when the send completes.  With one (a
 * zero-copy send), only the header is copied, and the body is sent where
 * it is; the caller gets it back when done runs, from the first poll that
 * sees the request complete (MPI_Testsome).  A zero-copy send with both a
 * header and a body is two messages: the header's copy on tag + SPLIT_HEAD,
 * then the body, contiguous, on tag + SPLIT_BODY, so that MPI moves the
 * body as plain bytes (on shared memory, one copy between the processes
 * from some size on; a datatype mixing the two would be packed through
 * fragments, and would cost a type's creation per send).  A receiver that
 * matches a SPLIT_HEAD message receives it, then its body (MPI keeps the
 * order of one sender's messages, and the body's tag is matched by no
 * other receive), into one buffer laid out as header then body: what it
 * delivers is the same message.  If MPI_TAG_UB is too small for those
 * tags, the body and the header's copy go as one message whose datatype
 * covers both by absolute address (MPI_Get_address, sent from
 * MPI_BOTTOM).  Every send waits in the table of requests until it is
 * complete, copied ones too: their buffers are freed there, and
 * sends_pending counts them.
 *
 * A poll first completes sends, then takes at most one message:
 * MPI_Improbe of any source and tag (a matched probe: the message it
 * sizes is the one MPI_Mrecv receives, whatever the application's threads
 * do with MPI meanwhile), a buffer of the probed size from aligned_alloc,
 * MPI_Mrecv.  No poll waits for a message to come, but MPI_Mrecv returns
 * only once the message's data is in, which for a large one takes as long
 * as the sender needs to push it: over TCP, 128 KiB fragments that move
 * as the sender calls into MPI (Open MPI 4.1 starts no progress thread
 * for them).  So a sender must keep polling, not sleep, while its
 * sends_pending is not 0, or its receivers wait on its sleeps.
 *
 * MPI-3.1 (section 8.3) raises errors of calls that name no communicator
 * (MPI_Type_*, MPI_Get_address) and of MPI_Comm_dup on the caller's
 * communicator through handlers this transport does not own
 * (MPI_COMM_WORLD's, the caller's): if the application left them fatal,
 * a failure there still aborts.  Their return codes are checked anyway.
 *
 * Threads: one thread at a time calls a transport (transport.h).  MPI may
 * be initialized with MPI_THREAD_MULTIPLE and the application may call MPI
 * meanwhile: nothing here is shared with it but the library itself; the
 * duplicated communicator keeps our messages and theirs apart.
 */
#include "transport.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "pinpool.h"

/* Tags of the two halves of a split send: the caller's tag plus these. */
#define SPLIT_HEAD (PP__TAG_MAX + 1)
#define SPLIT_BODY (2 * (PP__TAG_MAX + 1))
#define SPLIT_TAG_UB (3 * (PP__TAG_MAX + 1) - 1)

/* A send between its MPI_Isend and its completion. */
typedef struct sendrec {
    void *copy;                /* the header, or the whole message; or NULL */
    MPI_Datatype type;         /* header copy and body, or MPI_DATATYPE_NULL */
    pp__sent_fn done;          /* NULL: a copied send, nobody to tell */
    void *arg;
} sendrec_t;

typedef struct mpi_transport {
    pp__transport_t t;         /* first: the transport is this */
    MPI_Comm comm;             /* our duplicate */
    /* Sends in progress: req[i] with rec[i], n of them, in the order sent.
     * The rest are MPI_Testsome's output (idx, st) and the completed
     * sends whose callbacks a poll runs (fin), cap long each. */
    MPI_Request *req;
    sendrec_t *rec;
    int *idx;
    MPI_Status *st;
    sendrec_t *fin;
    int *fin_err;
    size_t n, cap;
    bool split;                /* MPI_TAG_UB allows split sends */
    /* A message matched by MPI_Improbe whose buffer could not be
     * allocated: it is MPI's no longer, so the next poll receives it.  Of
     * a split message, the header is in already (head, head_len) and
     * held_msg is the body. */
    bool held;
    MPI_Message held_msg;
    int held_src, held_tag, held_len;
    void *head;
    int head_len;
} mpi_transport_t;

/* What failed, in t->err, in MPI's words; PP_EIO. */
static int mpi_failed(pp__transport_t *t, const char *call, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error code %d", rc);
    snprintf(t->err, sizeof t->err, "%.32s: %.120s", call, msg);   /* truncated to fit */
    return PP_EIO;
}

/* Room for one more send in every table.  A table that did grow is kept
 * even when another one could not: cap counts what all of them hold. */
static int grow(mpi_transport_t *mt)
{
    size_t cap = mt->cap ? mt->cap * 2 : 16;
    if (cap > INT_MAX)         /* MPI_Testsome counts in ints */
        return PP_ENOMEM;
    MPI_Request *req = realloc(mt->req, cap * sizeof *req);
    if (req != NULL)
        mt->req = req;
    sendrec_t *rec = realloc(mt->rec, cap * sizeof *rec);
    if (rec != NULL)
        mt->rec = rec;
    int *idx = realloc(mt->idx, cap * sizeof *idx);
    if (idx != NULL)
        mt->idx = idx;
    MPI_Status *st = realloc(mt->st, cap * sizeof *st);
    if (st != NULL)
        mt->st = st;
    sendrec_t *fin = realloc(mt->fin, cap * sizeof *fin);
    if (fin != NULL)
        mt->fin = fin;
    int *fin_err = realloc(mt->fin_err, cap * sizeof *fin_err);
    if (fin_err != NULL)
        mt->fin_err = fin_err;
    if (req == NULL || rec == NULL || idx == NULL || st == NULL || fin == NULL ||
        fin_err == NULL)
        return PP_ENOMEM;
    mt->cap = cap;
    return 0;
}

/* The header and body copied into one buffer, sent from there. */
static int send_copy(mpi_transport_t *mt, sendrec_t *r, int dst, int tag, const void *hdr,
                     size_t hlen, const void *body, size_t blen, MPI_Request *req)
{
    unsigned char *copy = malloc(hlen + blen ? hlen + blen : 1);
    if (copy == NULL)
        return PP_ENOMEM;
    if (hlen)
        memcpy(copy, hdr, hlen);
    if (blen)
        memcpy(copy + hlen, body, blen);
    int rc = MPI_Isend(copy, (int)(hlen + blen), MPI_BYTE, dst, tag, mt->comm, req);
    if (rc != MPI_SUCCESS) {
        free(copy);
        return mpi_failed(&mt->t, "MPI_Isend", rc);
    }
    r->copy = copy;
    return 0;
}

/* The header copied, the body sent from where it is: one message whose
 * datatype covers both by absolute address (no header: the body alone,
 * no datatype needed). */
static int send_zero_copy(mpi_transport_t *mt, sendrec_t *r, int dst, int tag,
                          const void *hdr, size_t hlen, const void *body, size_t blen,
                          MPI_Request *req)
{
    int rc;
    if (hlen == 0) {
        rc = MPI_Isend(body, (int)blen, MPI_BYTE, dst, tag, mt->comm, req);
        return rc == MPI_SUCCESS ? 0 : mpi_failed(&mt->t, "MPI_Isend", rc);
    }
    void *copy = malloc(hlen);
    if (copy == NULL)
        return PP_ENOMEM;
    memcpy(copy, hdr, hlen);
    const char *call = "MPI_Get_address";
    MPI_Aint disp[2];
    int len[2] = { (int)hlen, (int)blen };
    MPI_Datatype type = MPI_DATATYPE_NULL;
    rc = MPI_Get_address(copy, &disp[0]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Get_address(body, &disp[1]);
    if (rc == MPI_SUCCESS) {
        call = "MPI_Type_create_hindexed";
        rc = MPI_Type_create_hindexed(2, len, disp, MPI_BYTE, &type);
    }
    if (rc == MPI_SUCCESS) {
        call = "MPI_Type_commit";
        rc = MPI_Type_commit(&type);
    }
    if (rc == MPI_SUCCESS) {
        call = "MPI_Isend";
        rc = MPI_Isend(MPI_BOTTOM, 1, type, dst, tag, mt->comm, req);
    }
    if (rc != MPI_SUCCESS) {
        int err = mpi_failed(&mt->t, call, rc);
        if (type != MPI_DATATYPE_NULL)
            (void)MPI_Type_free(&type);     /* the failure already reported is the one */
        free(copy);
        return err;
    }
    r->copy = copy;
    r->type = type;
    return 0;
}

/* A split send: the header's copy (a copied send of its own, no done),
 * then the body, zero-copy, with done: two entries of the table. */
static int send_split(mpi_transport_t *mt, int dst, int tag, const void *hdr, size_t hlen,
                      const void *body, size_t blen, pp__sent_fn done, void *arg)
{
    if (mt->n + 2 > mt->cap && grow(mt) != 0)
        return PP_ENOMEM;
    sendrec_t head = { NULL, MPI_DATATYPE_NULL, NULL, NULL };
    MPI_Request req;
    int rc = send_copy(mt, &head, dst, tag + SPLIT_HEAD, hdr, hlen, NULL, 0, &req);
    if (rc != 0)
        return rc;
    mt->req[mt->n] = req;
    mt->rec[mt->n] = head;
    mt->n++;
    rc = MPI_Isend(body, (int)blen, MPI_BYTE, dst, tag + SPLIT_BODY, mt->comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_failed(&mt->t, "MPI_Isend", rc);   /* the header goes; the
                                                          receiver waits for a body that
                                                          never comes: the job is broken */
    mt->req[mt->n] = req;
    mt->rec[mt->n] = (sendrec_t){ NULL, MPI_DATATYPE_NULL, done, arg };
    mt->n++;
    return 0;
}

static int mpi_send(pp__transport_t *t, int dst, int tag, const void *hdr, size_t hlen,
                    const void *body, size_t blen, unsigned flags, pp__sent_fn done, void *arg)
{
    mpi_transport_t *mt = (mpi_transport_t *)t;
    (void)flags;               /* PP__SEND_DUP_OK: MPI never duplicates */
    if (dst < 0 || dst >= t->size || tag < 0 || tag > PP__TAG_MAX ||
        (hlen != 0 && hdr == NULL) || (blen != 0 && body == NULL))
        return PP_EINVAL;
    /* MPI counts bytes in ints. */
    if (hlen > INT_MAX || blen > (size_t)INT_MAX - hlen)
        return PP_EINVAL;
    if (done != NULL && blen != 0 && hlen != 0 && mt->split)
        return send_split(mt, dst, tag, hdr, hlen, body, blen, done, arg);
    if (mt->n == mt->cap && grow(mt) != 0)
        return PP_ENOMEM;
    sendrec_t r = { NULL, MPI_DATATYPE_NULL, done, arg };
    MPI_Request req;
    int rc = done != NULL && blen != 0
                 ? send_zero_copy(mt, &r, dst, tag, hdr, hlen, body, blen, &req)
                 : send_copy(mt, &r, dst, tag, hdr, hlen, body, blen, &req);
    if (rc != 0)
        return rc;
    mt->req[mt->n] = req;
    mt->rec[mt->n] = r;
    mt->n++;
    return 0;
}

/* Completes the sends MPI has finished: their records leave the table and
 * are freed, then their done callbacks run (a callback may send, which
 * appends to the table; it must not poll). */
static int complete_sends(mpi_transport_t *mt)
{
    int out = 0;
    int rc = MPI_Testsome((int)mt->n, mt->req, &out, mt->idx, mt->st);
    bool per_send = false;
    if (rc != MPI_SUCCESS) {
        int cls;
        if (MPI_Error_class(rc, &cls) != MPI_SUCCESS || cls != MPI_ERR_IN_STATUS)
            return mpi_failed(&mt->t, "MPI_Testsome", rc);
        per_send = true;       /* each completed send's status says how it went */
    }
    if (out == MPI_UNDEFINED || out == 0)
        return 0;
    int result = 0;
    for (int k = 0; k < out; k++) {
        int i = mt->idx[k], e = per_send ? mt->st[k].MPI_ERROR : MPI_SUCCESS;
        mt->fin[k] = mt->rec[i];
        mt->fin_err[k] = e == MPI_SUCCESS ? 0 : mpi_failed(&mt->t, "MPI_Isend", e);
        /* MPI_Testsome sets a completed request to MPI_REQUEST_NULL, but
         * Open MPI 4.1 leaves a failed one allocated (req_test.c). */
        if (mt->req[i] != MPI_REQUEST_NULL && MPI_Request_free(&mt->req[i]) != MPI_SUCCESS)
            mt->req[i] = MPI_REQUEST_NULL;     /* leaked: it is finished with anyway */
    }
    size_t j = 0;
    for (size_t i = 0; i < mt->n; i++) {
        if (mt->req[i] == MPI_REQUEST_NULL)
            continue;
        mt->req[j] = mt->req[i];
        mt->rec[j] = mt->rec[i];
        j++;
    }
    mt->n = j;
    for (int k = 0; k < out; k++) {
        sendrec_t *r = &mt->fin[k];
        free(r->copy);
        if (r->type != MPI_DATATYPE_NULL && (rc = MPI_Type_free(&r->type)) != MPI_SUCCESS)
            result = mpi_failed(&mt->t, "MPI_Type_free", rc);
    }
    /* mt->fin is read afresh each time: a callback's send may move it. */
    for (int k = 0; k < out; k++)
        if (mt->fin[k].done != NULL)
            mt->fin[k].done(mt->fin[k].arg, mt->fin_err[k]);
    return result;
}

/* What the header promises a receiver: aligned_alloc(PP__MSG_ALIGN, len
 * rounded up to a multiple of PP__MSG_ALIGN, at least PP__MSG_ALIGN). */
static void *msg_alloc(size_t len)
{
    size_t cap = len ? (len + PP__MSG_ALIGN - 1) & ~(size_t)(PP__MSG_ALIGN - 1) : PP__MSG_ALIGN;
    return aligned_alloc(PP__MSG_ALIGN, cap);
}

/* Matches a message of src and tag (MPI_ANY_* allowed), without waiting:
 * 1 and it is held (held_msg, held_src, held_tag, held_len), or 0. */
static int match(mpi_transport_t *mt, int src, int tag)
{
    int flag = 0, len = 0;
    MPI_Status st;
    int rc = MPI_Improbe(src, tag, mt->comm, &flag, &mt->held_msg, &st);
    if (rc != MPI_SUCCESS)
        return mpi_failed(&mt->t, "MPI_Improbe", rc);
    if (!flag)
        return 0;
    rc = MPI_Get_count(&st, MPI_BYTE, &len);
    if (rc != MPI_SUCCESS || len == MPI_UNDEFINED) {
        /* Cannot happen: only this transport sends on the duplicate, in
         * bytes.  The matched message is received into nothing, which
         * drops it, so that it does not block the next poll. */
        (void)MPI_Mrecv(NULL, 0, MPI_BYTE, &mt->held_msg, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS)
            snprintf(mt->t.err, sizeof mt->t.err, "MPI_Get_count: a message of no size");
        return rc == MPI_SUCCESS ? PP_EIO : mpi_failed(&mt->t, "MPI_Get_count", rc);
    }
    mt->held = true;
    mt->held_src = st.MPI_SOURCE;
    mt->held_tag = st.MPI_TAG;
    mt->held_len = len;
    return 1;
}

/* The held message received at buf + at; it is held no longer. */
static int receive_held(mpi_transport_t *mt, unsigned char *buf, int at)
{
    mt->held = false;
    int rc = MPI_Mrecv(buf + at, mt->held_len, MPI_BYTE, &mt->held_msg, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? 0 : mpi_failed(&mt->t, "MPI_Mrecv", rc);
}

/* At most one message, never waiting for one to arrive.  A split
 * message's header is received as soon as it is matched; its body is
 * matched by a poll that finds it there (the next one, mostly: it was
 * sent right after), and then the two are delivered as one. */
static int receive(mpi_transport_t *mt, pp__msg_t *out)
{
    int rc;
    if (!mt->held) {
        rc = mt->head != NULL ? match(mt, mt->held_src, mt->held_tag + SPLIT_BODY)
                              : match(mt, MPI_ANY_SOURCE, MPI_ANY_TAG);
        if (rc <= 0)
            return rc;
    }
    if (mt->head == NULL && mt->held_tag >= SPLIT_HEAD && mt->held_tag < SPLIT_BODY) {
        mt->head = msg_alloc((size_t)mt->held_len);
        if (mt->head == NULL)
            return PP_ENOMEM;          /* still held: the next poll tries again */
        mt->head_len = mt->held_len;
        int src = mt->held_src, tag = mt->held_tag - SPLIT_HEAD;
        if ((rc = receive_held(mt, mt->head, 0)) != 0) {
            free(mt->head);
            mt->head = NULL;
            return rc;
        }
        mt->held_src = src;
        mt->held_tag = tag;
        if ((rc = match(mt, src, tag + SPLIT_BODY)) <= 0)
            return rc;                 /* the body comes to a later poll */
    }
    int at = mt->head != NULL ? mt->head_len : 0;
    if (mt->held_len > INT_MAX - at) {
        snprintf(mt->t.err, sizeof mt->t.err, "a split message of more than INT_MAX bytes");
        return PP_EIO;
    }
    unsigned char *buf = msg_alloc((size_t)(at + mt->held_len));
    if (buf == NULL)
        return PP_ENOMEM;      /* still held: the next poll tries again */
    int tag = mt->head != NULL ? mt->held_tag - SPLIT_BODY : mt->held_tag;
    int src = mt->held_src, len = at + mt->held_len;
    if ((rc = receive_held(mt, buf, at)) != 0) {
        free(buf);
        return rc;
    }
    if (mt->head != NULL) {
        memcpy(buf, mt->head, (size_t)at);
        free(mt->head);
        mt->head = NULL;
    }
    *out = (pp__msg_t){ src, tag, (size_t)len, buf };
    return 1;
}

static int mpi_poll(pp__transport_t *t, pp__msg_t *out)
{
    mpi_transport_t *mt = (mpi_transport_t *)t;
    if (mt->n != 0) {
        int rc = complete_sends(mt);
        if (rc != 0)
            return rc;
    }
    return receive(mt, out);
}

static void mpi_msg_free(pp__transport_t *t, pp__msg_t *m)
{
    (void)t;
    free(m->buf);
    m->buf = NULL;
}

static size_t mpi_sends_pending(pp__transport_t *t)
{
    return ((mpi_transport_t *)t)->n;
}

static void free_tables(mpi_transport_t *mt)
{
    free(mt->req);
    free(mt->rec);
    free(mt->idx);
    free(mt->st);
    free(mt->fin);
    free(mt->fin_err);
}

/* sends_pending must be 0.  If it is not, the requests are let go
 * (MPI_Request_free: they complete on their own) and their buffers are
 * leaked on purpose, since MPI may still read them; their done callbacks
 * never run.  destroy returns nothing, so its MPI failures have nowhere to
 * go: each call is still made, and the memory freed. */
static void mpi_destroy(pp__transport_t *t)
{
    mpi_transport_t *mt = (mpi_transport_t *)t;
    int finalized = 0;
    if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) {
        for (size_t i = 0; i < mt->n; i++)
            (void)MPI_Request_free(&mt->req[i]);
        if (mt->held)          /* matched, never received: dropped */
            (void)MPI_Mrecv(NULL, 0, MPI_BYTE, &mt->held_msg, MPI_STATUS_IGNORE);
        /* a split message whose body never came is dropped with its head */
        (void)MPI_Comm_free(&mt->comm);
    }
    free(mt->head);
    free_tables(mt);
    free(mt);
}

static const pp__transport_ops_t mpi_ops = {
    .send = mpi_send,
    .poll = mpi_poll,
    .msg_free = mpi_msg_free,
    .sends_pending = mpi_sends_pending,
    .destroy = mpi_destroy,
};

/* The duplicate, its error handler, rank, size, and a check that MPI's
 * tags reach PP__TAG_MAX (the standard promises 32767). */
static int setup(mpi_transport_t *mt, MPI_Comm comm)
{
    pp__transport_t *t = &mt->t;
    int inter = 0, rc = MPI_Comm_test_inter(comm, &inter);
    if (rc != MPI_SUCCESS)
        return mpi_failed(t, "MPI_Comm_test_inter", rc);
    if (inter) {
        snprintf(t->err, sizeof t->err, "an intercommunicator: its ranks are another group's");
        return PP_EINVAL;
    }
    if ((rc = MPI_Comm_dup(comm, &mt->comm)) != MPI_SUCCESS) {
        mt->comm = MPI_COMM_NULL;
        return mpi_failed(t, "MPI_Comm_dup", rc);
    }
    if ((rc = MPI_Comm_set_errhandler(mt->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
        return mpi_failed(t, "MPI_Comm_set_errhandler", rc);
    if ((rc = MPI_Comm_rank(mt->comm, &t->rank)) != MPI_SUCCESS)
        return mpi_failed(t, "MPI_Comm_rank", rc);
    if ((rc = MPI_Comm_size(mt->comm, &t->size)) != MPI_SUCCESS)
        return mpi_failed(t, "MPI_Comm_size", rc);
    /* MPI caches MPI_TAG_UB on MPI_COMM_WORLD only (a duplicate copies it,
     * a communicator from MPI_Comm_split has none): ask there. */
    int *ub = NULL, flag = 0;
    if ((rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag)) != MPI_SUCCESS)
        return mpi_failed(t, "MPI_Comm_get_attr(MPI_TAG_UB)", rc);
    if (!flag || ub == NULL || *ub < PP__TAG_MAX) {
        snprintf(t->err, sizeof t->err, "MPI_TAG_UB is %d, below PP__TAG_MAX",
                 flag && ub != NULL ? *ub : -1);
        return PP_EIO;
    }
    mt->split = *ub >= SPLIT_TAG_UB;   /* Open MPI's is 2^31 - 1 */
    return 0;
}

int pp__transport_mpi_create(MPI_Comm comm, pp__transport_t **out, char *err, size_t errlen)
{
    if (err != NULL && errlen != 0)
        err[0] = '\0';
    if (out == NULL || comm == MPI_COMM_NULL)
        return PP_EINVAL;
    *out = NULL;
    int init = 0, finalized = 0;
    if (MPI_Initialized(&init) != MPI_SUCCESS || MPI_Finalized(&finalized) != MPI_SUCCESS ||
        !init || finalized) {
        if (err != NULL && errlen != 0)
            snprintf(err, errlen, "MPI is not initialized, or already finalized");
        return PP_EIO;
    }
    mpi_transport_t *mt = calloc(1, sizeof *mt);
    if (mt == NULL)
        return PP_ENOMEM;
    mt->t.ops = &mpi_ops;
    mt->comm = MPI_COMM_NULL;
    int rc = setup(mt, comm);
    if (rc == 0)
        rc = grow(mt);         /* the first sends need no allocation */
    if (rc != 0) {
        if (err != NULL && errlen != 0)
            snprintf(err, errlen, "%s", mt->t.err[0] ? mt->t.err : pp_strerror(rc));
        if (mt->comm != MPI_COMM_NULL)
            (void)MPI_Comm_free(&mt->comm);    /* the failure reported is the first */
        free_tables(mt);
        free(mt);
        return rc;
    }
    *out = &mt->t;
    return 0;
}
