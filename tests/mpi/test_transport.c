/* test_transport.c -- the in-process transport (tests/mpi/support/):
 * every message arrives intact, at least once; at most twice and only if
 * it may be duplicated; in another order than it was sent when the chaos
 * says so; and the same seed replays the same deliveries.  A send's header
 * is copied at once, its body too without a done callback; with one, the
 * body is read when the message is handed out and done runs exactly once,
 * from a later poll of the sender.  Received buffers are aligned and
 * free()-able. */
#include "helpers.h" /* first: Criterion under the sanitizers */

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <pinpool.h>

#include "transport_inproc.h"

#define RANKS 4
#define PER_RANK 500                   /* messages each rank sends */

typedef struct body {
    int src;
    uint32_t seq;
    uint64_t check;                    /* a function of src and seq */
} body_t;

static uint64_t check_of(int src, uint32_t seq)
{
    return ((uint64_t)src << 40) ^ ((uint64_t)seq * 0x9e3779b97f4a7c15ull);
}

/* Rank r sends message seq of its own to (r + 1 + seq) % RANKS. */
static int dest_of(int r, uint32_t seq)
{
    return (int)((unsigned)r + 1u + seq) % RANKS;
}

typedef struct rank_run rank_run_t;

/* A zero-copy send's body and what its done callback saw. */
typedef struct zc {
    rank_run_t *rr;
    uint64_t body;                     /* poisoned by done */
    unsigned calls;
} zc_t;

#define POISON 0xdbdbdbdbdbdbdbdbull

struct rank_run {
    pp__inproc_world_t *w;
    int rank;
    unsigned flags;
    uint8_t seen[RANKS][PER_RANK];     /* deliveries of each message */
    unsigned out_of_order, bad;
    zc_t zc[PER_RANK];                 /* the sends with a done callback */
    bool in_poll, in_send;
    unsigned zsent, zdone, done_misplaced, done_err, pending_wrong;
};

/* Every third message has a done callback: it must come from a poll of
 * the sending rank, never from within send, with no error; afterwards the
 * body is the caller's again (poisoned: a late read would be a bad
 * message). */
static void zc_done(void *arg, int err)
{
    zc_t *z = arg;
    z->calls++;
    z->rr->zdone++;
    if (!z->rr->in_poll || z->rr->in_send)
        z->rr->done_misplaced++;
    if (err != 0)
        z->rr->done_err++;
    z->body = POISON;
}

/* Message q of rr's rank, in one of three shapes: all header; header and a
 * copied body; header and a zero-copy body with a done callback.  What the
 * receiver sees is the same 16 bytes.  The caller's copies of header and
 * copied body are poisoned as soon as send returns. */
static int send_one(rank_run_t *rr, pp__transport_t *t, uint32_t q)
{
    body_t b = { rr->rank, q, check_of(rr->rank, q) };
    unsigned char hdr[sizeof b];
    memcpy(hdr, &b, sizeof b);
    uint64_t body = b.check;
    const size_t hsplit = offsetof(body_t, check);
    int rc;
    rr->in_send = true;
    switch (q % 3) {
    case 0:
        rc = t->ops->send(t, dest_of(rr->rank, q), 7, hdr, sizeof hdr, NULL, 0, rr->flags,
                          NULL, NULL);
        break;
    case 1:
        rc = t->ops->send(t, dest_of(rr->rank, q), 7, hdr, hsplit, &body, sizeof body,
                          rr->flags, NULL, NULL);
        break;
    default:
        rr->zc[q] = (zc_t){ rr, b.check, 0 };
        rc = t->ops->send(t, dest_of(rr->rank, q), 7, hdr, hsplit, &rr->zc[q].body,
                          sizeof rr->zc[q].body, rr->flags, zc_done, &rr->zc[q]);
        rr->zsent += rc == 0;
        break;
    }
    rr->in_send = false;
    memset(hdr, 0xdb, sizeof hdr);
    body = POISON;
    __asm__ volatile("" : : "r"(hdr), "r"(&body) : "memory"); /* the stores happen */
    return rc;
}

static unsigned expected_from(int src, int dst)
{
    unsigned n = 0;
    for (uint32_t q = 0; q < PER_RANK; q++)
        n += dest_of(src, q) == dst;
    return n;
}

static void take(rank_run_t *rr, const pp__msg_t *m, uint32_t *last)
{
    body_t b;
    if (m->len != sizeof b || m->tag != 7) {
        rr->bad++;
        return;
    }
    memcpy(&b, m->buf, sizeof b);
    if (b.src != m->src || b.src < 0 || b.src >= RANKS || b.seq >= PER_RANK ||
        b.check != check_of(b.src, b.seq)) {
        rr->bad++;
        return;
    }
    if (rr->seen[b.src][b.seq]++ == 0 && b.seq < last[b.src])
        rr->out_of_order++;
    if (b.seq > last[b.src] || last[b.src] == UINT32_MAX)
        last[b.src] = b.seq;
}

static void *run_rank(void *arg)
{
    rank_run_t *rr = arg;
    pp__transport_t *t = pp__inproc_rank(rr->w, rr->rank);
    uint32_t last[RANKS];
    for (int i = 0; i < RANKS; i++)
        last[i] = UINT32_MAX;
    unsigned want = 0, got = 0;
    for (int s = 0; s < RANKS; s++)
        want += expected_from(s, rr->rank);
    for (uint32_t q = 0; q < PER_RANK || got < want || t->ops->sends_pending(t) != 0;) {
        if (q < PER_RANK) {
            if (send_one(rr, t, q) != 0)
                rr->bad++;
            q++;
        }
        pp__msg_t m;
        for (;;) {
            rr->in_poll = true;
            int rc = t->ops->poll(t, &m);
            rr->in_poll = false;
            if (rc != 1)
                break;
            take(rr, &m, last);
            t->ops->msg_free(t, &m);
        }
        rr->pending_wrong += t->ops->sends_pending(t) != rr->zsent - rr->zdone;
        got = 0;
        for (int s = 0; s < RANKS; s++)
            for (uint32_t k = 0; k < PER_RANK; k++)
                got += rr->seen[s][k] != 0;
    }
    return NULL;
}

static void run_world(const pp__inproc_chaos_t *chaos, unsigned flags, rank_run_t *rr)
{
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(RANKS, chaos, &w), 0);
    pthread_t th[RANKS];
    for (int r = 0; r < RANKS; r++) {
        memset(&rr[r], 0, sizeof rr[r]);
        rr[r].w = w;
        rr[r].rank = r;
        rr[r].flags = flags;
        cr_assert_eq(pthread_create(&th[r], NULL, run_rank, &rr[r]), 0);
    }
    for (int r = 0; r < RANKS; r++)
        pthread_join(th[r], NULL);
    pp__inproc_world_destroy(w);
}

Test(transport, every_message_arrives_intact_reordered_and_duplicated_only_if_allowed,
     .timeout = 60)
{
    static rank_run_t rr[RANKS];
    pp__inproc_chaos_t chaos = { .seed = 42, .max_delay = 8, .dup_per_mille = 100 };
    for (int pass = 0; pass < 2; pass++) {
        unsigned flags = pass == 0 ? PP__SEND_DUP_OK : 0;
        run_world(&chaos, flags, rr);
        unsigned dups = 0, reordered = 0;
        for (int r = 0; r < RANKS; r++) {
            cr_assert_eq(rr[r].bad, 0, "rank %d received %u bad messages", r, rr[r].bad);
            cr_assert_eq(rr[r].done_misplaced, 0, "rank %d: done outside its poll", r);
            cr_assert_eq(rr[r].done_err, 0, "rank %d: done with an error", r);
            cr_assert_eq(rr[r].pending_wrong, 0, "rank %d: sends_pending wrong", r);
            for (uint32_t q = 2; q < PER_RANK; q += 3)
                cr_assert_eq(rr[r].zc[q].calls, 1, "rank %d send %u: done ran %u times", r,
                             q, rr[r].zc[q].calls);
            reordered += rr[r].out_of_order;
            for (int s = 0; s < RANKS; s++)
                for (uint32_t q = 0; q < PER_RANK; q++) {
                    unsigned want = dest_of(s, q) == r;
                    if (!want) {
                        cr_assert_eq(rr[r].seen[s][q], 0, "misdelivered");
                        continue;
                    }
                    cr_assert(rr[r].seen[s][q] >= 1, "%d's message %u to %d lost", s, q, r);
                    cr_assert(rr[r].seen[s][q] <= (flags ? 2 : 1),
                              "%d's message %u to %d delivered %u times", s, q, r,
                              rr[r].seen[s][q]);
                    dups += rr[r].seen[s][q] - 1;
                }
        }
        cr_assert(reordered > 0, "the chaos reordered nothing");
        if (flags)
            cr_assert(dups > 0, "the chaos duplicated nothing");
    }
}

/* One rank sending to itself, polled on one thread: the same seed gives
 * the same deliveries, another seed other ones. */
static void deliveries(uint64_t seed, uint32_t *order, size_t n)
{
    pp__inproc_chaos_t chaos = { .seed = seed, .max_delay = 5, .dup_per_mille = 0 };
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(1, &chaos, &w), 0);
    pp__transport_t *t = pp__inproc_rank(w, 0);
    size_t got = 0;
    for (uint32_t q = 0; got < n;) {
        if (q < n) {
            cr_assert_eq(t->ops->send(t, 0, 1, &q, sizeof q, NULL, 0, 0, NULL, NULL), 0);
            q++;
        }
        pp__msg_t m;
        while (t->ops->poll(t, &m) == 1) {
            memcpy(&order[got++], m.buf, sizeof *order);
            t->ops->msg_free(t, &m);
        }
    }
    cr_assert_eq(pp__inproc_in_flight(w), 0);
    cr_assert_eq(pp__inproc_world_destroy(w), 0);
}

Test(transport, a_seed_replays_its_deliveries, .timeout = 30)
{
    enum { N = 300 };
    static uint32_t a[N], b[N], c[N];
    deliveries(7, a, N);
    deliveries(7, b, N);
    deliveries(8, c, N);
    cr_assert(memcmp(a, b, sizeof a) == 0, "seed 7 delivered differently twice");
    cr_assert(memcmp(a, c, sizeof a) != 0, "seeds 7 and 8 delivered alike");
}

static void count_done(void *arg, int err)
{
    unsigned *calls = arg;
    (*calls) += err == 0 ? 1 : 1000;
}

Test(transport, bad_arguments, .timeout = 30)
{
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(0, NULL, &w), PP_EINVAL);
    cr_assert_eq(pp__inproc_world_create(2, NULL, &w), 0);
    pp__transport_t *t = pp__inproc_rank(w, 1);
    cr_assert_not_null(t);
    cr_assert_null(pp__inproc_rank(w, 2));
    cr_assert_eq(t->rank, 1);
    cr_assert_eq(t->size, 2);
    int x = 0;
    unsigned calls = 0;
    const struct {
        int dst, tag;
        const void *hdr;
        size_t hlen;
        const void *body;
        size_t blen;
    } bad[] = {
        { 2, 0, &x, sizeof x, NULL, 0 },
        { -1, 0, &x, sizeof x, NULL, 0 },
        { 0, -1, &x, sizeof x, NULL, 0 },
        { 0, PP__TAG_MAX + 1, &x, sizeof x, NULL, 0 },
        { 0, 0, NULL, 4, NULL, 0 },
        { 0, 0, &x, sizeof x, NULL, 4 },
        { 0, 0, &x, SIZE_MAX, &x, 2 },             /* hlen + blen overflows */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(t->ops->send(t, bad[i].dst, bad[i].tag, bad[i].hdr, bad[i].hlen,
                                  bad[i].body, bad[i].blen, 0, NULL, NULL),
                     PP_EINVAL, "case %zu", i);
        cr_assert_eq(t->ops->send(t, bad[i].dst, bad[i].tag, bad[i].hdr, bad[i].hlen,
                                  bad[i].body, bad[i].blen, 0, count_done, &calls),
                     PP_EINVAL, "case %zu, with done", i);
    }
    cr_assert_eq(t->ops->sends_pending(t), 0, "a refused send is not pending");
    cr_assert_eq(t->ops->send(t, 0, PP__TAG_MAX, NULL, 0, NULL, 0, 0, NULL, NULL), 0);
    cr_assert_eq(pp__inproc_in_flight(w), 1);
    pp__msg_t m;
    for (int i = 0; i < 10; i++)
        cr_assert_eq(t->ops->poll(t, &m), 0);
    cr_assert_eq(calls, 0, "done of a refused send ran");
    t->ops->destroy(t);                /* a no-op: the world owns its ranks */
    cr_assert_eq(pp__inproc_world_destroy(w), 1, "the message never polled is dropped");
}

/* Polls t until it hands out a message (bounded). */
static void poll_one(pp__transport_t *t, pp__msg_t *m)
{
    for (int i = 0; i < 1000; i++)
        if (t->ops->poll(t, m) == 1)
            return;
    cr_assert_fail("no message in 1000 polls");
}

Test(transport, done_runs_once_from_a_later_poll_of_the_sender, .timeout = 30)
{
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(2, NULL, &w), 0);
    pp__transport_t *a = pp__inproc_rank(w, 0), *b = pp__inproc_rank(w, 1);
    char hdr[3] = "hd", body[5] = "body";
    unsigned calls = 0;
    cr_assert_eq(a->ops->send(a, 1, 3, hdr, 2, body, 4, 0, count_done, &calls), 0);
    cr_assert_eq(calls, 0, "done ran within send");
    cr_assert_eq(a->ops->sends_pending(a), 1);
    pp__msg_t m;
    /* The inproc transport completes a send when its message is handed
     * out, as MPI does for a message too large to buffer. */
    for (int i = 0; i < 5; i++)
        cr_assert_eq(a->ops->poll(a, &m), 0);
    cr_assert_eq(calls, 0, "done ran before the message was received");
    poll_one(b, &m);
    cr_assert_eq(m.len, 6);
    cr_assert(memcmp(m.buf, "hdbody", 6) == 0);
    b->ops->msg_free(b, &m);
    cr_assert_eq(calls, 0, "done ran from the receiver's poll");
    cr_assert_eq(a->ops->poll(a, &m), 0);
    cr_assert_eq(calls, 1, "done did not run at the sender's next poll");
    cr_assert_eq(a->ops->sends_pending(a), 0);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(a->ops->poll(a, &m), 0);
    cr_assert_eq(calls, 1, "done ran again");

    /* To itself: the poll that hands the message out is not the later one. */
    cr_assert_eq(a->ops->send(a, 0, 3, NULL, 0, body, 4, 0, count_done, &calls), 0);
    poll_one(a, &m);
    cr_assert_eq(calls, 1, "done ran in the poll that handed the message out");
    a->ops->msg_free(a, &m);
    cr_assert_eq(a->ops->poll(a, &m), 0);
    cr_assert_eq(calls, 2);
    cr_assert_eq(pp__inproc_world_destroy(w), 0);
}

/* What the caller does to its buffers right after send, or to a zero-copy
 * body right after done, never reaches the receiver; what it does to a
 * zero-copy body before done may (the chaos shows a protocol that breaks
 * the rule). */
Test(transport, buffers_are_the_callers_again_when_send_or_done_returns, .timeout = 30)
{
    pp__inproc_chaos_t chaos = { .seed = 3, .max_delay = 0, .dup_per_mille = 1000 };
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(2, &chaos, &w), 0);
    pp__transport_t *a = pp__inproc_rank(w, 0), *b = pp__inproc_rank(w, 1);
    char hdr[4] = "HDR", body[5] = "BODY";
    cr_assert_eq(a->ops->send(a, 1, 1, hdr, 3, body, 4, 0, NULL, NULL), 0);
    memset(hdr, 'x', sizeof hdr);
    memset(body, 'x', sizeof body);
    pp__msg_t m;
    poll_one(b, &m);
    cr_assert(m.len == 7 && memcmp(m.buf, "HDRBODY", 7) == 0, "copied send changed");
    b->ops->msg_free(b, &m);

    /* Zero-copy, duplicated (dup_per_mille 1000): the header is copied at
     * once, the body read at the first hand-out, for both copies; the
     * second copy is never polled for, yet done runs. */
    memcpy(hdr, "HDR", 4);
    memcpy(body, "BODY", 5);
    unsigned calls = 0;
    cr_assert_eq(a->ops->send(a, 1, 2, hdr, 3, body, 4, PP__SEND_DUP_OK, count_done, &calls), 0);
    memset(hdr, 'x', sizeof hdr);
    memcpy(body, "LATE", 4);           /* before done: the receiver may see it */
    poll_one(b, &m);
    cr_assert(m.len == 7 && memcmp(m.buf, "HDRLATE", 7) == 0,
              "a zero-copy body was read before the message was handed out");
    b->ops->msg_free(b, &m);
    cr_assert_eq(a->ops->poll(a, &m), 0);
    cr_assert_eq(calls, 1, "the duplicate kept the send open");
    memset(body, 'x', sizeof body);    /* after done: the caller's again */
    poll_one(b, &m);
    cr_assert(m.len == 7 && memcmp(m.buf, "HDRLATE", 7) == 0, "the duplicate changed");
    b->ops->msg_free(b, &m);
    cr_assert_eq(a->ops->poll(a, &m), 0);
    cr_assert_eq(calls, 1);
    cr_assert_eq(pp__inproc_world_destroy(w), 0);
}

/* Every received buffer is aligned to PP__MSG_ALIGN, holds len rounded up
 * to a multiple of it (at least one), and may be kept and freed with
 * free() (ASan checks both: the whole capacity is written). */
Test(transport, received_buffers_are_aligned_and_freed_with_free, .timeout = 30)
{
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(1, NULL, &w), 0);
    pp__transport_t *t = pp__inproc_rank(w, 0);
    static const size_t lens[] = { 0, 1, 63, 64, 65, 4096, 100001 };
    static unsigned char src[100001];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    enum { N = sizeof lens / sizeof lens[0] };
    void *kept[2 * N];
    unsigned calls = 0;
    for (size_t k = 0; k < 2 * N; k++) {
        size_t len = lens[k % N], h = len / 3;
        cr_assert_eq(t->ops->send(t, 0, (int)k, src, h, src + h, len - h, 0,
                                  k < N ? NULL : count_done, &calls), 0);
        pp__msg_t m;
        poll_one(t, &m);
        size_t cap = len ? (len + PP__MSG_ALIGN - 1) / PP__MSG_ALIGN * PP__MSG_ALIGN
                         : PP__MSG_ALIGN;
        cr_assert_eq(m.tag, (int)k);
        cr_assert_eq(m.len, len);
        cr_assert_not_null(m.buf);
        cr_assert_eq((uintptr_t)m.buf % PP__MSG_ALIGN, 0, "len %zu: buffer %p", len, m.buf);
        cr_assert_geq(malloc_usable_size(m.buf), cap, "len %zu", len);
        cr_assert(memcmp(m.buf, src, len) == 0, "len %zu: content", len);
        memset(m.buf, 0x5a, cap);
        kept[k] = m.buf;               /* kept: no msg_free */
    }
    pp__msg_t m;
    cr_assert_eq(t->ops->poll(t, &m), 0);
    cr_assert_eq(calls, N);
    for (size_t k = 0; k < 2 * N; k++)
        free(kept[k]);
    cr_assert_eq(pp__inproc_world_destroy(w), 0);
}
