/*
 * progress.c -- the MPI layer's progress thread: the only thread that
 * calls the transport (so the only one that calls MPI).
 *
 * Each turn it takes the application threads' commands (weight to return,
 * publications, records to recycle, serves whose load ended on the
 * loader thread), sends new requests, handles what arrived, and sends the
 * weight returns that are due: one message per home holds every record
 * queued for it, sent once 256 are queued or the oldest has waited
 * RETURN_DELAY_NS.  It never blocks on anything but its own idle sleep:
 * while there is work, while its sends are in flight or answers to its
 * requests are due (MPI moves a large message only while both ends call
 * into it), and for SPIN_NS after the last work, it polls, yielding the
 * CPU between polls; then it sleeps on a futex word with a
 * timeout that doubles from 1 us to 1 ms, and a command wakes it at once.
 * A message from another rank can only be seen by polling, so the first
 * request that reaches an idle home waits up to 1 ms.
 *
 * Destroy (pp_mpi_destroy sets finishing): once this rank has no request
 * of its own in flight and its returns are sent, it sends every rank a
 * FIN carrying how many messages it sent that rank before; it goes on
 * serving until it has every rank's FIN and as many messages from each
 * as the FIN said, and its own sends are complete.  No rank leaves while
 * another still needs an answer from it, whatever the order messages
 * arrive in.
 */
#include "layer.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS          200000ull   /* poll for 200 us after the last work */
#define SLEEP_MAX_NS     1000000ull  /* idle sleeps back off to 1 ms */
#define RETURN_DELAY_NS  200000ull   /* the longest a weight return waits for company */
#define RETURN_BATCH     256u

/* Queues weight for its home, sent by flush_returns. */
static void queue_return(pp_mpi_t *m, uint32_t rank, const pp__wire_return_t *rec)
{
    pp__outbox_t *o = &m->outbox[rank];
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 64;
        pp__wire_return_t *r = realloc(o->rec, cap * sizeof *r);
        if (r == NULL) {
            pp__common_report(m, "no memory to queue weight of ref %#llx for rank %u: its home "
                                 "keeps it until destroy",
                              (unsigned long long)rec->ref, rank);
            return;
        }
        o->rec = r;
        o->cap = cap;
    }
    if (o->n == 0)
        o->since_ns = pp__common_now_ns();
    o->rec[o->n++] = *rec;
}

/* Sends the returns that are due (all of them when finishing). */
static int flush_returns(pp_mpi_t *m, bool all)
{
    int did = 0;
    uint64_t now = 0;
    for (int r = 0; r < m->size; r++) {
        pp__outbox_t *o = &m->outbox[r];
        if (o->n == 0)
            continue;
        if (!all && o->n < RETURN_BATCH) {
            if (now == 0)
                now = pp__common_now_ns();
            if (now - o->since_ns < RETURN_DELAY_NS)
                continue;
        }
        if (r == m->rank) {
            /* weight of our own entries (a dropped token): no message */
            pp__owners_return_local(m, o->rec, o->n);
            o->n = 0;
            continue;
        }
        size_t len = pp__wire_return_size(o->n);
        unsigned char *buf = malloc(len);
        if (buf == NULL)
            continue;   /* try again next turn */
        pp__wire_return_pack(buf, o->seq, o->rec, o->n);
        /* A duplicate is harmless: the home drops a sequence number it saw. */
        if (pp__common_send(m, r, PP__TAG_RETURN, buf, len, NULL, 0, PP__SEND_DUP_OK, NULL,
                              NULL) == 0) {
            o->seq++;
            pp__atomic_add_relaxed(&m->st.weight_messages, 1);
            pp__atomic_add_relaxed(&m->st.weight_records, o->n);
            o->n = 0;
        }
        free(buf);
        did++;
    }
    return did;
}

static bool commands_empty(pp_mpi_t *m)
{
    pthread_mutex_lock(&m->cmd_mu);
    bool empty = m->cmd_head == NULL;
    pthread_mutex_unlock(&m->cmd_mu);
    return empty;
}

static int take_commands(pp_mpi_t *m)
{
    pthread_mutex_lock(&m->cmd_mu);
    pp__cmd_t *c = m->cmd_head;
    m->cmd_head = m->cmd_tail = NULL;
    pthread_mutex_unlock(&m->cmd_mu);
    int did = 0;
    while (c != NULL) {
        pp__cmd_t *next = c->next;
        switch (c->kind) {
        case PP__CMD_RETURN:
            queue_return(m, c->rank, &c->rec);
            free(c);
            break;
        case PP__CMD_PUBLISH:
            pp__home_publish(m, c->home);
            break;
        case PP__CMD_KILL:
            pp__home_killed(m, c->home);
            break;
        case PP__CMD_LOADED: {
            /* served (or answered) first, then the loader's pin is dropped */
            pp__load_t *l = c->load;
            pp__home_loaded(m, l->src, l->id, l->ref, l->need, l->rc);
            pp__loader_done(m, l);
            break;
        }
        }
        c = next;
        did++;
    }
    return did;
}

static void handle(pp_mpi_t *m, pp__msg_t *msg)
{
    int src = msg->src;
    if (src < 0 || src >= m->size) {
        m->t->ops->msg_free(m->t, msg);
        return;
    }
    int kind = pp__wire_kind(msg->buf, msg->len);
    if (kind == PP__WIRE_RETURN) {
        /* RETURN may arrive twice (transport duplicates): count it once.
         * The sequence number is 64-bit: seq + 1 cannot wrap (2^64
         * messages from one rank). */
        size_t n;
        uint64_t seq;
        if (pp__wire_return_check(msg->buf, msg->len, &n, &seq) == 0 &&
            pp__wset_add(&m->seen_seq[src], (pp__wiv_t){ seq, seq + 1 }) != 0) {
            m->t->ops->msg_free(m->t, msg);
            return;
        }
    }
    if (kind != PP__WIRE_FIN)
        m->recv_from[src]++;
    switch (kind) {
    case PP__WIRE_REQ:
        pp__home_serve(m, src, msg->buf, msg->len);
        break;
    case PP__WIRE_REPLY:
        pp__remote_reply(m, src, msg);   /* keeps or frees msg's buffer */
        return;
    case PP__WIRE_RETURN:
        pp__owners_return_msg(m, src, msg->buf, msg->len);
        break;
    case PP__WIRE_MINT:
        pp__owners_mint_msg(m, src, msg->buf, msg->len);
        break;
    case PP__WIRE_MINTED:
        pp__remote_minted(m, src, msg->buf, msg->len);
        break;
    case PP__WIRE_CLAIM:
        pp__owners_claim_msg(m, src, msg->buf, msg->len);
        break;
    case PP__WIRE_CLAIMED:
        pp__remote_claimed(m, src, msg->buf, msg->len);
        break;
    case PP__WIRE_FIN: {
        uint64_t f[PP__WIRE_FIN_N];
        if (pp__wire_fixed_check(msg->buf, msg->len, PP__WIRE_FIN, f, PP__WIRE_FIN_N) == 0)
            m->fin_from[src] = f[0];
        else
            pp__common_report(m, "a FIN from rank %d is garbage: ignored", src);
        break;
    }
    default:
        pp__common_report(m, "a message from rank %d (tag %d, %zu bytes) is garbage: ignored",
                          src, msg->tag, msg->len);
        break;
    }
    m->t->ops->msg_free(m->t, msg);
}

static void send_fin(pp_mpi_t *m)
{
    for (int r = 0; r < m->size; r++) {
        if (r == m->rank)
            continue;
        uint64_t f[PP__WIRE_FIN_N] = { m->sent_to[r] };
        unsigned char msg[PP__WIRE_FIXED_SIZE(PP__WIRE_FIN_N)];
        pp__wire_fixed_pack(msg, PP__WIRE_FIN, f, PP__WIRE_FIN_N);
        (void)m->t->ops->send(m->t, r, PP__TAG_FIN, msg, sizeof msg, NULL, 0, 0, NULL, NULL);
    }
}

static bool all_done(pp_mpi_t *m)
{
    for (int r = 0; r < m->size; r++)
        if (r != m->rank && (m->fin_from[r] == UINT64_MAX || m->recv_from[r] < m->fin_from[r]))
            return false;
    return m->t->ops->sends_pending(m->t) == 0;
}

static void idle_sleep(pp_mpi_t *m, uint32_t seen, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    /* seq_cst store and load: the store-load pair (sleeping, then wake)
     * against pp__common_wake's (the bump of wake, then its load of
     * sleeping): a bump after our load of wake is either seen by
     * FUTEX_WAIT's compare or wakes us */
    pp__atomic_store_seq_cst(&m->sleeping, 1);
    if (pp__atomic_load_seq_cst(&m->wake) == seen)
        syscall(SYS_futex, &m->wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
    /* relaxed: a waker that still reads 1 only makes a needless
     * FUTEX_WAKE.  It cannot hide the next sleep's store of 1: that store
     * is seq_cst and comes after this one, so a seq_cst load of sleeping
     * that follows it in the total order reads it or a later value. */
    pp__atomic_store_relaxed(&m->sleeping, 0);
}

void *pp__progress_main(void *arg)
{
    pp_mpi_t *m = arg;
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);   /* idle sleeps of 1 us mean 1 us */
    uint64_t last_work = pp__common_now_ns(), sleep_ns = 1000;
    bool fin_sent = false;
    for (;;) {
        /* acquire, not seq_cst: pairs with pp__common_wake's bump, so a
         * value that includes a bump shows what its waker did before it
         * (the finishing flag; commands and requests are under their
         * mutexes anyway).  This load is in no store-load pair: the
         * handshake that decides the sleep is idle_sleep's. */
        uint32_t seen = pp__atomic_load_acquire(&m->wake);
        int did = take_commands(m);
        did += pp__remote_send_new(m);
        for (int k = 0; k < 64; k++) {
            pp__msg_t msg;
            int rc = m->t->ops->poll(m->t, &msg);
            if (rc < 0) {
                if (m->progress_err == 0)
                    pp__common_report(m, "the transport failed: %s", m->t->err);
                m->progress_err = PP_EIO;
                break;
            }
            if (rc == 0)
                break;
            handle(m, &msg);
            did++;
        }
        /* acquire: pairs with pp_mpi_destroy's release store: the owners it
         * gave back before are in the command queue we read next turn */
        bool finishing = pp__atomic_load_acquire(&m->finishing) != 0;
        did += flush_returns(m, finishing);
        if (finishing) {
            if (!fin_sent && commands_empty(m) && pp__remote_idle(m)) {
                (void)take_commands(m);
                (void)flush_returns(m, true);
                pp__home_finish(m);
                send_fin(m);
                fin_sent = true;
            }
            if (fin_sent && all_done(m))
                break;
        }
        /* Busy, not idle, while our sends are in flight or answers are
         * due: without asynchronous progress in MPI, a large message moves
         * only while both ends call into it, so neither end may sleep. */
        bool waiting = m->awaiting != 0 || m->t->ops->sends_pending(m->t) != 0;
        uint64_t now = pp__common_now_ns();
        if (waiting && did == 0) {
            sched_yield();
            last_work = now;
            sleep_ns = 1000;
            continue;
        }
        if (did != 0) {
            last_work = now;
            sleep_ns = 1000;
            continue;
        }
        if (now - last_work < SPIN_NS) {
            sched_yield();
            continue;
        }
        idle_sleep(m, seen, sleep_ns);
        if (sleep_ns < SLEEP_MAX_NS)
            sleep_ns *= 2;
    }
    (void)pp_thread_exit(m->pool);
    return NULL;
}
