/*
 * mpi_transport_check.c -- the MPI transport (src/mpi/transport_mpi.c)
 * under mpiexec, as the layer will use it: MPI_THREAD_MULTIPLE, one thread
 * (the "progress thread") calling the transport while the main thread
 * runs collectives on MPI_COMM_WORLD.
 *
 * Each rank sends MSGS messages to every rank, itself included: 0 B, 1 B,
 * 4 KiB, 64 KiB, 1 MiB and 4 MiB, each with and without a done callback,
 * then small ones of varied sizes; headers of 0, 1, 16, 100 and 200000
 * bytes (the rest is body).  Every byte is a function of (src, dst, seq, offset);
 * the tag names seq (the last message uses PP__TAG_MAX).  Checked: every
 * message arrives exactly once, intact, in a buffer aligned to
 * PP__MSG_ALIGN holding its length rounded up to that, which free() takes
 * (a third of them are kept and freed so); done runs exactly once per
 * send that has one, from a poll, never from send, without error; the
 * caller's header (and a copied body) is poisoned and freed as soon as
 * send returns, a zero-copy body as soon as done runs, so a transport
 * that reads either too late delivers poison (or ASan reports it);
 * sends_pending follows.  Then bad arguments (PP_EINVAL, no done), and a
 * second transport on a communicator of reversed ranks, used at the same
 * time as the first, which sees none of its messages.
 *
 * Plain C, no Criterion: under mpiexec each rank prints why it failed,
 * and the job exits nonzero.
 */
#define _GNU_SOURCE 1

#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#include <pinpool.h>

#include "mpi/transport.h"

/* ------------------------------------------------------------------------ */
/* LeakSanitizer and Open MPI (ASan builds)                                  */
/* ------------------------------------------------------------------------ */

#if defined(__SANITIZE_ADDRESS__)
#define CHECK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_ASAN 1
#endif
#endif

#ifdef CHECK_ASAN
#include <dlfcn.h>
#include <link.h>
#include <sanitizer/lsan_interface.h>

/* Open MPI leaves memory allocated at MPI_Finalize, from code that is not
 * instrumented: LeakSanitizer's fast unwinder stops at its first frame,
 * and MPI_Finalize unloads the components (and PMIx) that frame is in, so
 * the report names no module a suppression could match.  So: what MPI
 * allocates in MPI_Init and MPI_Finalize on this thread is not checked
 * (__lsan_disable), every object loaded once MPI_Init is done stays loaded
 * (RTLD_NODELETE) so that what MPI's own threads leak is named by its
 * library, and lsan_mpi.supp names Open MPI's libraries.  Everything the
 * transport and this program allocate is still checked. */
static int keep_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0')
        (void)dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}
#define MPI_UNCHECKED(call)                                                    \
    do { __lsan_disable(); call; __lsan_enable(); } while (0)
#define KEEP_LOADED() dl_iterate_phdr(keep_loaded, NULL)
#else
#define MPI_UNCHECKED(call) do { call; } while (0)
#define KEEP_LOADED() ((void)0)
#endif

#define MSGS 200               /* messages each rank sends each rank */
#define WINDOW 32              /* sends a rank keeps pending at most */
#define DEADLINE_S 40          /* for the exchange; ctest's timeout is later */

static const size_t big[] = { 0, 1, 4096, 65536, 1u << 20, 4u << 20 };
enum { NBIG = sizeof big / sizeof big[0] };
static const size_t hlens[] = { 0, 1, 16, 100 };

static int me, nranks;
static unsigned failures;

static void fail(const char *fmt, ...)
{
    if (failures++ >= 10)      /* the first ten are enough to go on */
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: FAIL: ", me);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* What cannot be carried on from: the job stops, nonzero. */
static _Noreturn void fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: FATAL: ", me);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 2);
    abort();
}

/* Message seq: the six big sizes, each copied and then zero-copy, then
 * small ones; which of them have a done callback; how much is header. */
static size_t size_of(int seq)
{
    if (seq < 2 * NBIG)
        return big[seq % NBIG];
    return (size_t)((seq * 2654435761u) >> 7) % 300;
}

static bool has_done(int seq)
{
    return seq < 2 * NBIG ? seq >= NBIG : seq % 2 == 1;
}

/* The 4 MiB zero-copy message has a header larger than what Open MPI
 * sends with a large message's first fragment (32 KiB over shared memory,
 * 64 KiB over TCP): a transport that sent the caller's header rather than
 * a copy would read it after it was freed. */
static size_t hlen_of(int seq)
{
    if (seq == 2 * NBIG - 1)
        return 200000;
    size_t h = hlens[seq % 4], len = size_of(seq);
    return h < len ? h : len;
}

static int tag_of(int seq)
{
    return seq == MSGS - 1 ? PP__TAG_MAX : seq;
}

static int seq_of(int tag)
{
    return tag == PP__TAG_MAX ? MSGS - 1 : tag < MSGS - 1 ? tag : -1;
}

static size_t cap_of(size_t len)
{
    return len ? (len + PP__MSG_ALIGN - 1) / PP__MSG_ALIGN * PP__MSG_ALIGN : PP__MSG_ALIGN;
}

static uint8_t seed_of(int src, int dst, int seq)
{
    uint64_t z = ((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ (uint64_t)seq;
    z *= 0x9e3779b97f4a7c15ull;
    return (uint8_t)(z >> 56);
}

static uint8_t byte_at(uint8_t seed, size_t i)
{
    return (uint8_t)(seed + i * 131u + (i >> 8) * 7u);
}

static void fill(unsigned char *p, size_t n, uint8_t seed, size_t from)
{
    for (size_t i = 0; i < n; i++)
        p[i] = byte_at(seed, from + i);
}

/* The first offset where p is not the pattern, or n. */
static size_t first_wrong(const unsigned char *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte_at(seed, i))
            return i;
    return n;
}

/* ------------------------------------------------------------------------ */
/* The exchange, on the progress thread                                      */
/* ------------------------------------------------------------------------ */

typedef struct zsend {         /* a send with a done callback */
    unsigned char *body;
    size_t blen;
    unsigned calls;
} zsend_t;

typedef struct run {
    pp__transport_t *t;
    zsend_t *z;                /* [dst * MSGS + seq] */
    uint8_t *seen;             /* [src * MSGS + seq] */
    void **kept;               /* received buffers kept, freed with free() */
    size_t nkept;
    size_t zsent, zdone, received, bytes;
    bool in_poll, in_send;
    atomic_int finished;       /* read by the main thread's collectives */
} run_t;

static run_t run;

static void on_done(void *arg, int err)
{
    zsend_t *z = arg;
    if (z->calls++ != 0)
        fail("done ran twice for one send");
    if (!run.in_poll || run.in_send)
        fail("done ran %s", run.in_send ? "from within send" : "outside poll");
    if (err != 0)
        fail("done with error %d (%s)", err, run.t->err);
    run.zdone++;
    memset(z->body, 0xdb, z->blen);   /* a late read delivers this */
    free(z->body);
    z->body = NULL;
}

/* Sends message seq to dst: header and body from fresh buffers, the
 * header (and a copied body) poisoned and freed as soon as send returns. */
static void send_one(pp__transport_t *t, int dst, int seq)
{
    size_t len = size_of(seq), hlen = hlen_of(seq), blen = len - hlen;
    uint8_t seed = seed_of(t->rank, dst, seq);
    unsigned char *hdr = malloc(hlen ? hlen : 1), *body = malloc(blen ? blen : 1);
    if (hdr == NULL || body == NULL)
        fatal("out of memory");
    fill(hdr, hlen, seed, 0);
    fill(body, blen, seed, hlen);
    zsend_t *z = has_done(seq) ? &run.z[dst * MSGS + seq] : NULL;
    if (z != NULL)
        *z = (zsend_t){ body, blen, 0 };
    run.in_send = true;
    int rc = t->ops->send(t, dst, tag_of(seq), hlen ? hdr : NULL, hlen, blen ? body : NULL,
                          blen, 0, z != NULL ? on_done : NULL, z);
    run.in_send = false;
    if (rc != 0)
        fatal("send of %zu bytes (seq %d) to %d: %d (%s)", len, seq, dst, rc, t->err);
    memset(hdr, 0xdb, hlen ? hlen : 1);
    free(hdr);
    if (z == NULL) {
        memset(body, 0xdb, blen ? blen : 1);
        free(body);
    } else {
        run.zsent++;
    }
}

static void take(pp__transport_t *t, pp__msg_t *m)
{
    int seq = seq_of(m->tag);
    if (m->src < 0 || m->src >= nranks || seq < 0) {
        fail("message from %d with tag %d: no such message", m->src, m->tag);
        t->ops->msg_free(t, m);
        return;
    }
    size_t len = size_of(seq), at;
    unsigned before = failures;
    if (run.seen[m->src * MSGS + seq]++ != 0)
        fail("message %d from %d received twice", seq, m->src);
    else if (m->len != len)
        fail("message %d from %d: %zu bytes, not %zu", seq, m->src, m->len, len);
    else if (m->buf == NULL || (uintptr_t)m->buf % PP__MSG_ALIGN != 0)
        fail("message %d from %d: buffer %p not aligned", seq, m->src, m->buf);
    else if (malloc_usable_size(m->buf) < cap_of(len))
        fail("message %d from %d: buffer of %zu bytes, under %zu", seq, m->src,
             malloc_usable_size(m->buf), cap_of(len));
    else if ((at = first_wrong(m->buf, len, seed_of(m->src, me, seq))) != len)
        fail("message %d from %d (%zu bytes): byte %zu is 0x%02x, not 0x%02x", seq, m->src,
             len, at, ((unsigned char *)m->buf)[at], byte_at(seed_of(m->src, me, seq), at));
    run.received++;
    run.bytes += m->len;
    if (seq % 3 == 0 && failures == before) {
        memset(m->buf, 0x5a, cap_of(m->len));  /* the whole capacity is ours */
        run.kept[run.nkept++] = m->buf;
        m->buf = NULL;
    } else {
        t->ops->msg_free(t, m);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Polls until nothing comes, taking every message handed out; fatal on
 * PP_EIO.  Whether anything came. */
static bool poll_all(pp__transport_t *t)
{
    bool any = false;
    for (;; any = true) {
        pp__msg_t m;
        run.in_poll = true;
        int rc = t->ops->poll(t, &m);
        run.in_poll = false;
        if (rc == 0)
            break;
        if (rc != 1)
            fatal("poll: %d (%s)", rc, t->err);
        take(t, &m);
    }
    /* Copied sends count until MPI is done with their buffers, so at least
     * the zero-copy ones whose done has not run. */
    if (t->ops->sends_pending(t) < run.zsent - run.zdone)
        fail("sends_pending %zu, but %zu sends with done are not done",
             t->ops->sends_pending(t), run.zsent - run.zdone);
    return any;
}

/* An idle loop backs off as the layer's progress thread will: it spins
 * (yielding, since there are more ranks than CPUs) while it has sends
 * pending, which MPI moves on only when this rank calls it (TCP pushes a
 * large message a socket buffer at a time), and sleeps when it has
 * nothing to do but wait for messages. */
static void backoff(pp__transport_t *t, unsigned *idle)
{
    if (t->ops->sends_pending(t) != 0 || ++*idle < 64)
        sched_yield();
    else
        usleep(*idle < 256 ? 10 : 200);
}

static void *exchange(void *arg)
{
    pp__transport_t *t = arg;
    size_t expected = (size_t)nranks * MSGS;
    int seq = 0, dst = 0;
    double deadline = now_s() + DEADLINE_S;
    unsigned idle = 0;
    while (seq < MSGS || run.received < expected || t->ops->sends_pending(t) != 0) {
        if (now_s() > deadline)
            fatal("exchange not finished in %d s: sent %d of %d rounds, received %zu of %zu, "
                  "%zu sends pending", DEADLINE_S, seq, MSGS, run.received, expected,
                  t->ops->sends_pending(t));
        bool busy = false;
        while (seq < MSGS && t->ops->sends_pending(t) < WINDOW) {
            send_one(t, dst, seq);
            busy = true;
            if (++dst == nranks) {
                dst = 0;
                seq++;
            }
        }
        if (poll_all(t) || busy)
            idle = 0;
        else
            backoff(t, &idle);
    }
    for (int i = 0; i < 100; i++)
        poll_all(t);           /* a duplicate would show as received twice */
    if (run.received != expected)
        fail("received %zu messages, not %zu", run.received, expected);
    for (int d = 0; d < nranks; d++)
        for (int q = 0; q < MSGS; q++)
            if (has_done(q) && run.z[d * MSGS + q].calls != 1)
                fail("send %d to %d: done ran %u times", q, d, run.z[d * MSGS + q].calls);
    /* Only a flag: pthread_join orders what this thread wrote before the
     * main thread reads it. */
    atomic_store_explicit(&run.finished, 1, memory_order_relaxed);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The rest, on the main thread                                              */
/* ------------------------------------------------------------------------ */

static unsigned bad_calls;

static void bad_done(void *arg, int err)
{
    (void)arg;
    (void)err;
    bad_calls++;
}

static void bad_arguments(pp__transport_t *t)
{
    char x[4] = "bad";
    const struct { int dst, tag; const void *hdr; size_t hlen; const void *body; size_t blen; }
        bad[] = {
            { -1, 0, x, 4, NULL, 0 },
            { nranks, 0, x, 4, NULL, 0 },
            { 0, -1, x, 4, NULL, 0 },
            { 0, PP__TAG_MAX + 1, x, 4, NULL, 0 },
            { 0, 0, NULL, 4, NULL, 0 },
            { 0, 0, x, 4, NULL, 4 },
            { 0, 0, x, (size_t)INT_MAX + 1, NULL, 0 },   /* over MPI's int count */
            { 0, 0, x, 4, x, (size_t)INT_MAX },
        };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int with_done = 0; with_done < 2; with_done++) {
            int rc = t->ops->send(t, bad[i].dst, bad[i].tag, bad[i].hdr, bad[i].hlen,
                                  bad[i].body, bad[i].blen, 0, with_done ? bad_done : NULL, x);
            if (rc != PP_EINVAL)
                fail("bad send %zu (done %d): %d, not PP_EINVAL", i, with_done, rc);
        }
    if (t->ops->sends_pending(t) != 0)
        fail("a refused send is pending");
    for (int i = 0; i < 10; i++) {
        pp__msg_t m;
        if (t->ops->poll(t, &m) != 0)
            fail("a message after the exchange (tag %d from %d)", m.tag, m.src);
    }
    if (bad_calls != 0)
        fail("done of a refused send ran");
    pp__transport_t *u = NULL;
    char err[128];
    if (pp__transport_mpi_create(MPI_COMM_NULL, &u, err, sizeof err) != PP_EINVAL)
        fail("create on MPI_COMM_NULL: not PP_EINVAL");
    if (pp__transport_mpi_create(MPI_COMM_WORLD, NULL, err, sizeof err) != PP_EINVAL)
        fail("create with no out: not PP_EINVAL");
}

/* A second transport, on the ranks reversed, used between sends of the
 * first: each sees its own messages only, numbered by its communicator. */
static void two_transports(pp__transport_t *a)
{
    MPI_Comm rev;
    if (MPI_Comm_split(MPI_COMM_WORLD, 0, nranks - me, &rev) != MPI_SUCCESS)
        fatal("MPI_Comm_split");
    pp__transport_t *b = NULL;
    char err[160];
    int rc = pp__transport_mpi_create(rev, &b, err, sizeof err);
    if (rc != 0)
        fatal("create on the reversed communicator: %d (%s)", rc, err);
    if (b->rank != nranks - 1 - me || b->size != nranks)
        fail("reversed transport: rank %d of %d", b->rank, b->size);
    for (int d = 0; d < nranks; d++) {
        int wa[2] = { 'a', me }, wb[2] = { 'b', b->rank };
        if (a->ops->send(a, d, 1, wa, sizeof wa, NULL, 0, 0, NULL, NULL) != 0 ||
            b->ops->send(b, d, 2, NULL, 0, wb, sizeof wb, 0, NULL, NULL) != 0)
            fatal("two transports: send to %d failed (%s / %s)", d, a->err, b->err);
    }
    int got[2] = { 0, 0 };
    double deadline = now_s() + DEADLINE_S;
    while (got[0] < nranks || got[1] < nranks || a->ops->sends_pending(a) != 0 ||
           b->ops->sends_pending(b) != 0) {
        if (now_s() > deadline)
            fatal("two transports: %d and %d of %d messages", got[0], got[1], nranks);
        for (int k = 0; k < 2; k++) {
            pp__transport_t *t = k ? b : a;
            pp__msg_t m;
            rc = t->ops->poll(t, &m);
            if (rc < 0)
                fatal("two transports: poll %d (%s)", rc, t->err);
            if (rc == 0)
                continue;
            int w[2] = { 0, -1 };
            if (m.len == sizeof w)
                memcpy(w, m.buf, sizeof w);
            if (m.len != sizeof w || m.tag != 1 + k || w[0] != 'a' + k || w[1] != m.src)
                fail("two transports: %c got %zu bytes, tag %d, from %d saying %c %d", 'a' + k,
                     m.len, m.tag, m.src, w[0], w[1]);
            got[k]++;
            t->ops->msg_free(t, &m);
        }
    }
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        fatal("MPI_Barrier");
    b->ops->destroy(b);
    MPI_Comm_free(&rev);
}

int main(int argc, char **argv)
{
    double t_start = now_s();
    int provided, rc;
    MPI_UNCHECKED(rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    if (rc != MPI_SUCCESS)
        return 2;
    KEEP_LOADED();
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (provided != MPI_THREAD_MULTIPLE)
        fatal("MPI_THREAD_MULTIPLE asked, %d provided", provided);
    double t0 = now_s();
    pp__transport_t *t = NULL;
    char err[160];
    rc = pp__transport_mpi_create(MPI_COMM_WORLD, &t, err, sizeof err);
    if (rc != 0)
        fatal("pp__transport_mpi_create: %d (%s)", rc, err);
    if (t->rank != me || t->size != nranks)
        fail("transport says rank %d of %d", t->rank, t->size);
    run.t = t;
    run.z = calloc((size_t)nranks * MSGS, sizeof *run.z);
    run.seen = calloc((size_t)nranks * MSGS, sizeof *run.seen);
    run.kept = calloc((size_t)nranks * MSGS, sizeof *run.kept);
    if (run.z == NULL || run.seen == NULL || run.kept == NULL)
        fatal("out of memory");

    /* The application's own MPI meanwhile: a collective per round until
     * every rank's exchange has finished (the same count on every rank),
     * tested with sleeps rather than waited for in a spin. */
    pthread_t th;
    if (pthread_create(&th, NULL, exchange, t) != 0)
        fatal("pthread_create");
    int all = 0, rounds = 0;
    while (!all) {
        int mine = atomic_load_explicit(&run.finished, memory_order_relaxed), done = 0;
        MPI_Request req;
        if (MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) !=
            MPI_SUCCESS)
            fatal("MPI_Iallreduce");
        while (!done) {
            usleep(1000);
            if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                fatal("MPI_Test");
        }
        rounds++;
    }
    pthread_join(th, NULL);
    double t1 = now_s();

    bad_arguments(t);
    two_transports(t);
    for (size_t i = 0; i < run.nkept; i++)
        free(run.kept[i]);
    if (t->ops->sends_pending(t) != 0)
        fail("%zu sends pending at the end", t->ops->sends_pending(t));
    t->ops->destroy(t);

    unsigned total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0)
        printf("mpi_transport_check: %d ranks, each received %zu messages (%zu bytes) in "
               "%.2f s beside %d collectives (MPI_Init %.2f s, the rest %.2f s); "
               "%u failures: %s\n",
               nranks, run.received, run.bytes, t1 - t0, rounds, t0 - t_start,
               now_s() - t1, total, total ? "FAILED" : "ok");
    free(run.z);
    free(run.seen);
    free(run.kept);
    MPI_UNCHECKED(MPI_Finalize());
    return total != 0;
}
