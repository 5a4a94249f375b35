/* test_transport.c -- the in-process transport (src/mpi/transport_inproc.c):
 * every message arrives intact, at least once; at most twice and only if
 * it may be duplicated; in another order than it was sent when the chaos
 * says so; and the same seed replays the same deliveries. */
#include "helpers.h" /* first: Criterion under the sanitizers */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <pinpool.h>

#include "mpi/transport.h"

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

typedef struct rank_run {
    pp__inproc_world_t *w;
    int rank;
    unsigned flags;
    uint8_t seen[RANKS][PER_RANK];     /* deliveries of each message */
    unsigned out_of_order, bad;
} rank_run_t;

/* Rank r sends message seq of its own to (r + 1 + seq) % RANKS. */
static int dest_of(int r, uint32_t seq)
{
    return (int)((unsigned)r + 1u + seq) % RANKS;
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
    for (uint32_t q = 0; q < PER_RANK || got < want;) {
        if (q < PER_RANK) {
            body_t b = { rr->rank, q, check_of(rr->rank, q) };
            if (t->ops->send(t, dest_of(rr->rank, q), 7, &b, sizeof b, rr->flags) != 0)
                rr->bad++;
            q++;
        }
        pp__msg_t m;
        while (t->ops->poll(t, &m) == 1) {
            take(rr, &m, last);
            t->ops->msg_free(t, &m);
        }
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
            cr_assert_eq(t->ops->send(t, 0, 1, &q, sizeof q, 0), 0);
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

Test(transport, bad_arguments, .timeout = 30)
{
    pp__inproc_world_t *w;
    cr_assert_eq(pp__inproc_world_create(0, NULL, &w), PP_EINVAL);
    cr_assert_eq(pp__inproc_world_create(2, NULL, &w), 0);
    pp__transport_t *t = pp__inproc_rank(w, 1);
    cr_assert_not_null(t);
    cr_assert_null(pp__inproc_rank(w, 2));
    int x = 0;
    cr_assert_eq(t->ops->send(t, 2, 0, &x, sizeof x, 0), PP_EINVAL);
    cr_assert_eq(t->ops->send(t, -1, 0, &x, sizeof x, 0), PP_EINVAL);
    cr_assert_eq(t->ops->send(t, 0, -1, &x, sizeof x, 0), PP_EINVAL);
    cr_assert_eq(t->ops->send(t, 0, 0, NULL, 4, 0), PP_EINVAL);
    cr_assert_eq(t->ops->send(t, 0, 0, NULL, 0, 0), 0);
    cr_assert_eq(pp__inproc_in_flight(w), 1);
    cr_assert_eq(pp__inproc_world_destroy(w), 1, "the message never polled is dropped");
}
