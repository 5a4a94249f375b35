/*
 * transport_inproc.c -- the in-process transport (transport_inproc.h):
 * ranks are threads of one process, each with a mailbox; a seeded
 * scheduler decides when, in which order and how many times each message
 * is handed out.
 *
 * This is test machinery, not a hot path: each mailbox is a mutex around
 * an array of pending messages.  Each mailbox draws from its own random
 * stream (seed and rank), under its mutex, so one rank's chaos does not
 * depend on how the other ranks' threads interleave with it.
 *
 * A send with a done callback is zero-copy the way MPI's may be: its body
 * is read when the receiver's poll hands the message out (a duplicate's
 * too, at that same moment), and done runs at the sender's first poll
 * after that.  So a caller that touches a body before its done is a data
 * race ThreadSanitizer reports, or a corrupt message the receiver sees,
 * not a silent success; and a send completes once its message has been
 * received, as a large MPI send does, not when it was queued.
 */
#include "transport_inproc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pinpool.h"

typedef struct mailbox mailbox_t;

/* A send with a done callback, from send to done.  Its copies (two when
 * duplicated) wait in the receiver's mailbox, whose mutex guards copies;
 * when the first is handed out the record moves to the sender's done
 * queue, under the sender's mutex. */
typedef struct zsend {
    struct zsend *next;        /* in the sender's done queue */
    mailbox_t *from;
    const void *body;
    size_t blen;
    unsigned copies;           /* copies in the receiver's mailbox */
    pp__sent_fn done;
    void *arg;
} zsend_t;

typedef struct pending {
    pp__msg_t m;               /* the header is in m.buf; the body too unless zs */
    uint64_t due;              /* the receiver's poll count it waits for */
    zsend_t *zs;               /* NULL: m.buf is complete */
} pending_t;

struct mailbox {
    pp__transport_t t;         /* first: a rank's transport is its mailbox */
    pp__inproc_world_t *w;
    pthread_mutex_t mu;
    pending_t *p;
    size_t n, cap;
    uint64_t polls;
    uint64_t rng;
    zsend_t *fin, **fin_tail;  /* sends whose done the next poll runs */
    size_t sends_pending;      /* the rank's own thread only: no lock */
};

struct pp__inproc_world {
    int n;
    pp__inproc_chaos_t chaos;
    atomic_size_t in_flight;
    mailbox_t *box;
};

static uint64_t next_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* What the header promises a receiver: aligned_alloc(PP__MSG_ALIGN, len
 * rounded up to a multiple of PP__MSG_ALIGN, at least PP__MSG_ALIGN), so
 * that free() of it is fine and a reply can be kept in place. */
static void *msg_alloc(size_t len)
{
    if (len > SIZE_MAX - PP__MSG_ALIGN)
        return NULL;
    size_t cap = len ? (len + PP__MSG_ALIGN - 1) & ~(size_t)(PP__MSG_ALIGN - 1) : PP__MSG_ALIGN;
    return aligned_alloc(PP__MSG_ALIGN, cap);
}

/* Queues one copy of the message in box (its mutex held): the header and,
 * without zs, the body are copied now; with zs the body is copied when
 * this copy is handed out. */
static int enqueue(mailbox_t *box, int src, int tag, const void *hdr, size_t hlen,
                   const void *body, size_t blen, zsend_t *zs)
{
    if (box->n == box->cap) {
        size_t cap = box->cap ? box->cap * 2 : 16;
        pending_t *p = realloc(box->p, cap * sizeof *p);
        if (p == NULL)
            return PP_ENOMEM;
        box->p = p;
        box->cap = cap;
    }
    unsigned char *copy = msg_alloc(hlen + blen);
    if (copy == NULL)
        return PP_ENOMEM;
    if (hlen)
        memcpy(copy, hdr, hlen);
    if (blen && zs == NULL)
        memcpy(copy + hlen, body, blen);
    unsigned delay = box->w->chaos.max_delay;
    uint64_t d = delay ? next_rand(&box->rng) % ((uint64_t)delay + 1) : 0;
    box->p[box->n++] = (pending_t){ { src, tag, hlen + blen, copy }, box->polls + d, zs };
    if (zs != NULL)
        zs->copies++;
    atomic_fetch_add_explicit(&box->w->in_flight, 1, memory_order_relaxed);
    return 0;
}

static int inproc_send(pp__transport_t *t, int dst, int tag, const void *hdr, size_t hlen,
                       const void *body, size_t blen, unsigned flags, pp__sent_fn done,
                       void *arg)
{
    mailbox_t *self = (mailbox_t *)t;
    pp__inproc_world_t *w = self->w;
    if (dst < 0 || dst >= w->n || tag < 0 || tag > PP__TAG_MAX ||
        (hlen != 0 && hdr == NULL) || (blen != 0 && body == NULL) || blen > SIZE_MAX - hlen)
        return PP_EINVAL;
    zsend_t *zs = NULL;
    if (done != NULL) {
        zs = malloc(sizeof *zs);
        if (zs == NULL)
            return PP_ENOMEM;
        *zs = (zsend_t){ NULL, self, body, blen, 0, done, arg };
    }
    mailbox_t *box = &w->box[dst];
    pthread_mutex_lock(&box->mu);
    int rc = enqueue(box, t->rank, tag, hdr, hlen, body, blen, zs);
    if (rc == 0 && (flags & PP__SEND_DUP_OK) && w->chaos.dup_per_mille != 0 &&
        next_rand(&box->rng) % 1000 < w->chaos.dup_per_mille)
        (void)enqueue(box, t->rank, tag, hdr, hlen, body, blen, zs); /* best effort */
    pthread_mutex_unlock(&box->mu);
    if (rc != 0) {
        free(zs);              /* not queued: nobody else has seen it */
        return rc;
    }
    if (zs != NULL)
        self->sends_pending++;
    return 0;
}

/* zs's message has been handed out: the sender's next poll runs its done
 * (the sender's mutex orders the receiver's reads of the body before
 * whatever the sender does with it once done has run). */
static void send_finished(zsend_t *zs)
{
    mailbox_t *from = zs->from;
    pthread_mutex_lock(&from->mu);
    zs->next = NULL;
    *from->fin_tail = zs;
    from->fin_tail = &zs->next;
    pthread_mutex_unlock(&from->mu);
}

/* Hands out one due message, at random among those due (box's mutex held).
 * A zero-copy send's duplicate still waiting gets its body now: once done
 * has run the body is the sender's again, and the duplicate must not keep
 * the send open (the receiver may never poll for it). */
static bool take_due(mailbox_t *box, pending_t *out)
{
    size_t due = 0;
    for (size_t i = 0; i < box->n; i++)
        due += box->p[i].due <= box->polls;
    if (due == 0)
        return false;
    size_t pick = (size_t)(next_rand(&box->rng) % due), i = 0;
    for (;; i++)
        if (box->p[i].due <= box->polls && pick-- == 0)
            break;
    *out = box->p[i];
    box->p[i] = box->p[--box->n];
    zsend_t *zs = out->zs;
    for (i = 0; zs != NULL && zs->copies > 1 && i < box->n; i++) {
        pp__msg_t *m = &box->p[i].m;
        if (box->p[i].zs != zs)
            continue;
        if (zs->blen)
            memcpy((unsigned char *)m->buf + (m->len - zs->blen), zs->body, zs->blen);
        box->p[i].zs = NULL;
        zs->copies--;
    }
    atomic_fetch_sub_explicit(&box->w->in_flight, 1, memory_order_relaxed);
    return true;
}

static int inproc_poll(pp__transport_t *t, pp__msg_t *out)
{
    mailbox_t *box = (mailbox_t *)t;
    pending_t p;
    pthread_mutex_lock(&box->mu);
    box->polls++;
    zsend_t *fin = box->fin;
    box->fin = NULL;
    box->fin_tail = &box->fin;
    bool got = take_due(box, &p);
    pthread_mutex_unlock(&box->mu);
    /* Out of the lock: a done callback may send, even to this rank. */
    while (fin != NULL) {
        zsend_t *next = fin->next;
        box->sends_pending--;
        fin->done(fin->arg, 0);
        free(fin);
        fin = next;
    }
    if (!got)
        return 0;
    if (p.zs != NULL) {
        /* Out of the lock too: the sender leaves the body alone until its
         * done, which cannot run before send_finished below. */
        if (p.zs->blen)
            memcpy((unsigned char *)p.m.buf + (p.m.len - p.zs->blen), p.zs->body, p.zs->blen);
        send_finished(p.zs);
    }
    *out = p.m;
    return 1;
}

static void inproc_msg_free(pp__transport_t *t, pp__msg_t *m)
{
    (void)t;
    free(m->buf);
    m->buf = NULL;
}

static size_t inproc_sends_pending(pp__transport_t *t)
{
    return ((mailbox_t *)t)->sends_pending;
}

/* The world owns its ranks: pp__inproc_world_destroy frees them. */
static void inproc_destroy(pp__transport_t *t)
{
    (void)t;
}

static const pp__transport_ops_t inproc_ops = {
    .send = inproc_send,
    .poll = inproc_poll,
    .msg_free = inproc_msg_free,
    .sends_pending = inproc_sends_pending,
    .destroy = inproc_destroy,
};

int pp__inproc_world_create(int n, const pp__inproc_chaos_t *chaos, pp__inproc_world_t **out)
{
    if (n <= 0 || out == NULL)
        return PP_EINVAL;
    pp__inproc_world_t *w = calloc(1, sizeof *w);
    mailbox_t *box = calloc((size_t)n, sizeof *box);
    if (w == NULL || box == NULL) {
        free(w);
        free(box);
        return PP_ENOMEM;
    }
    w->n = n;
    if (chaos != NULL)
        w->chaos = *chaos;
    atomic_init(&w->in_flight, 0);
    w->box = box;
    for (int r = 0; r < n; r++) {
        box[r].t = (pp__transport_t){ .ops = &inproc_ops, .rank = r, .size = n };
        box[r].w = w;
        pthread_mutex_init(&box[r].mu, NULL);
        box[r].rng = w->chaos.seed * 0x100000001b3ull + (uint64_t)r + 1;
        box[r].fin_tail = &box[r].fin;
    }
    *out = w;
    return 0;
}

pp__transport_t *pp__inproc_rank(pp__inproc_world_t *w, int rank)
{
    return rank >= 0 && rank < w->n ? &w->box[rank].t : NULL;
}

size_t pp__inproc_in_flight(pp__inproc_world_t *w)
{
    return atomic_load_explicit(&w->in_flight, memory_order_relaxed);
}

size_t pp__inproc_world_destroy(pp__inproc_world_t *w)
{
    size_t dropped = 0;
    for (int r = 0; r < w->n; r++) {
        mailbox_t *box = &w->box[r];
        for (size_t i = 0; i < box->n; i++) {
            free(box->p[i].m.buf);
            /* A zero-copy send dropped here never runs its done. */
            if (box->p[i].zs != NULL && --box->p[i].zs->copies == 0)
                free(box->p[i].zs);
        }
        dropped += box->n;
        free(box->p);
        while (box->fin != NULL) {
            zsend_t *next = box->fin->next;
            free(box->fin);
            box->fin = next;
        }
        pthread_mutex_destroy(&box->mu);
    }
    free(w->box);
    free(w);
    return dropped;
}
