/*
 * transport_inproc.c -- the in-process transport (transport.h): ranks are
 * threads of one process, each with a mailbox; a seeded scheduler decides
 * when, in which order and how many times each message is handed out.
 *
 * This is test machinery, not a hot path: each mailbox is a mutex around
 * an array of pending messages.  Each mailbox draws from its own random
 * stream (seed and rank), under its mutex, so one rank's chaos does not
 * depend on how the other ranks' threads interleave with it.
 */
#include "transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pinpool.h"

typedef struct pending {
    pp__msg_t m;
    uint64_t due;              /* the receiver's poll count it waits for */
} pending_t;

typedef struct mailbox {
    pp__transport_t t;         /* first: a rank's transport is its mailbox */
    pp__inproc_world_t *w;
    pthread_mutex_t mu;
    pending_t *p;
    size_t n, cap;
    uint64_t polls;
    uint64_t rng;
} mailbox_t;

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

/* Queues one copy of the message in box (its mutex held). */
static int enqueue(mailbox_t *box, int src, int tag, const void *buf, size_t len)
{
    if (box->n == box->cap) {
        size_t cap = box->cap ? box->cap * 2 : 16;
        pending_t *p = realloc(box->p, cap * sizeof *p);
        if (p == NULL)
            return PP_ENOMEM;
        box->p = p;
        box->cap = cap;
    }
    void *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return PP_ENOMEM;
    if (len)
        memcpy(copy, buf, len);
    unsigned delay = box->w->chaos.max_delay;
    uint64_t d = delay ? next_rand(&box->rng) % ((uint64_t)delay + 1) : 0;
    box->p[box->n++] = (pending_t){ { src, tag, len, copy }, box->polls + d };
    atomic_fetch_add_explicit(&box->w->in_flight, 1, memory_order_relaxed);
    return 0;
}

static int inproc_send(pp__transport_t *t, int dst, int tag, const void *buf, size_t len,
                       unsigned flags)
{
    mailbox_t *self = (mailbox_t *)t;
    pp__inproc_world_t *w = self->w;
    if (dst < 0 || dst >= w->n || tag < 0 || (len != 0 && buf == NULL))
        return PP_EINVAL;
    mailbox_t *box = &w->box[dst];
    pthread_mutex_lock(&box->mu);
    int rc = enqueue(box, t->rank, tag, buf, len);
    if (rc == 0 && (flags & PP__SEND_DUP_OK) && w->chaos.dup_per_mille != 0 &&
        next_rand(&box->rng) % 1000 < w->chaos.dup_per_mille)
        (void)enqueue(box, t->rank, tag, buf, len);   /* the duplicate: best effort */
    pthread_mutex_unlock(&box->mu);
    return rc;
}

static int inproc_poll(pp__transport_t *t, pp__msg_t *out)
{
    mailbox_t *box = (mailbox_t *)t;
    pthread_mutex_lock(&box->mu);
    box->polls++;
    size_t due = 0;
    for (size_t i = 0; i < box->n; i++)
        due += box->p[i].due <= box->polls;
    int got = 0;
    if (due != 0) {
        size_t pick = (size_t)(next_rand(&box->rng) % due);
        for (size_t i = 0; i < box->n; i++) {
            if (box->p[i].due > box->polls || pick-- != 0)
                continue;
            *out = box->p[i].m;
            box->p[i] = box->p[--box->n];
            got = 1;
            break;
        }
        atomic_fetch_sub_explicit(&box->w->in_flight, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&box->mu);
    return got;
}

static void inproc_msg_free(pp__transport_t *t, pp__msg_t *m)
{
    (void)t;
    free(m->buf);
    m->buf = NULL;
}

static const pp__transport_ops_t inproc_ops = {
    .send = inproc_send,
    .poll = inproc_poll,
    .msg_free = inproc_msg_free,
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
        box[r].t = (pp__transport_t){ &inproc_ops, r, n };
        box[r].w = w;
        pthread_mutex_init(&box[r].mu, NULL);
        box[r].rng = w->chaos.seed * 0x100000001b3ull + (uint64_t)r + 1;
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
        for (size_t i = 0; i < w->box[r].n; i++)
            free(w->box[r].p[i].m.buf);
        dropped += w->box[r].n;
        free(w->box[r].p);
        pthread_mutex_destroy(&w->box[r].mu);
    }
    free(w->box);
    free(w);
    return dropped;
}
