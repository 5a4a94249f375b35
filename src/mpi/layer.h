/*
 * layer.h -- the MPI layer's internals, shared by its files, listed from
 * the bottom up: each calls only files above it here (docs/mpi.md,
 * "Inside the layer"; the test layout.calls.mpi):
 *
 *   wire.c      messages as bytes (wire.h)
 *   wset.c      sets of weight intervals (wset.h)
 *   perthread.c each thread's hints and counters (perthread.h)
 *   transport_mpi.c the MPI transport (transport.h)
 *   ht.c        ck_ht with direct keys; the maps the tables retire
 *   common.c    reports, the clock, test points, the command queue and
 *               the progress thread's wake, sends
 *   typed.c     registered types; typed copies, packed and unpacked
 *   loader.c    the home's loads for serves, on a thread of their own
 *   home.c      the home side: records, write pins, versions, serving
 *   proxy.c     this rank's proxies of other ranks' refs
 *   remote.c    the remote side: the cache of copies, requests, remote pins
 *   owners.c    owners across ranks: home records' weight, proxies, tokens
 *   progress.c  the progress thread: messages in and out
 *   layer.c     create, destroy, put, stats, the pins' dispatch
 *
 * Who touches what (docs/mpi.md, "Inside the layer"):
 *  - the progress thread alone calls the transport;
 *  - application threads reach it through the command queue (a mutex and
 *    a list: only misses, returns and publications go through it, never a
 *    hit) and wake it with a futex word;
 *  - home records and the cache are found without a lock (ck_ht read
 *    lock-free by many, written by one at a time under a mutex); a home
 *    record's memory is never freed while the layer lives (records are
 *    recycled through a free list), so a reader that races with a
 *    record's death reads a record that is checked against its key
 *    afterwards, never freed memory;
 *  - everything about owners (home weight and owners, proxies) is under
 *    one mutex, own_mu: owners are not a hot path, and one lock keeps the
 *    returns, imports and releases of one ref in one order.
 */
#ifndef PP_MPI_LAYER_H
#define PP_MPI_LAYER_H

#include <ck_ht.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "os/atomics.h"
#include "perthread.h"
#include "pinpool_mpi.h"
#include "transport.h"
#include "wire.h"
#include "wset.h"

/* Message tags. */
enum {
    PP__TAG_REQ = 1,       /* remote pin: fetch a copy */
    PP__TAG_REPLY = 2,     /* the copy (or why not) */
    PP__TAG_RETURN = 3,    /* weight going home, batched */
    PP__TAG_MINT = 4,      /* a holder at unit weight asks its home for more */
    PP__TAG_MINTED = 5,    /* the home's answer */
    PP__TAG_FIN = 6,       /* destroy: this rank sends nothing more but replies */
    PP__TAG_CLAIM = 7,     /* an import asks the token's home to claim it */
    PP__TAG_CLAIMED = 8,   /* the home's answer */
};

/* A cached copy's data starts with this header.  A flat copy (an entry
 * without save/load at home) is this header, then the home's bytes: a
 * reply arrives as exactly this layout (the home sends its header, then
 * the entry), so the received buffer becomes the cached entry in place.
 * A typed copy (typed.c) is the header alone, and obj is what the type's
 * load made of the packed bytes: the data its pins give. */
#define PP__COPY_HDR 64u
#define PP__COPY_MAGIC 0x7070636f70793031ull   /* "ppcopy01" */
typedef struct pp__copy_hdr {
    uint64_t magic;
    uint64_t home_ref;
    /* this copy's ref in the local pool: stored (release) once the put
     * made it, the one field written after the put, which publishes the
     * others to every pin; read (acquire) by the unpin */
    _Atomic uint64_t local;
    uint64_t size;         /* flat: the home's bytes that follow; typed: the entry's size */
    uint32_t rank;         /* the home */
    uint32_t version;
    void *obj;             /* typed: the data load made (NULL until then) */
    struct pp__types *types;   /* typed: the registry its free goes back to */
    uint32_t type_id;      /* typed: the registered id; flat: 0 */
    uint32_t pad;
} pp__copy_hdr_t;
_Static_assert(sizeof(pp__copy_hdr_t) == PP__COPY_HDR, "copy header is 64 bytes");

struct pp__req;

/* ---- test points ------------------------------------------------------
 * Named places on the layer's cold paths where a test (tests/mpi) runs
 * code of its own on the thread that reaches them, to hold that thread
 * there and drive an interleaving deterministically.  m->tp, when set,
 * is called as tp(m, where, arg, m->tp_ctx).  Off, a point costs one
 * relaxed load and a branch; none sits on a hit or a read unpin (one on
 * a home write unpin, beside its read-modify-writes).  Only in the
 * testing variant (PP__TESTING=1, pinpool_mpi_testlib); in libpinpool_mpi
 * a point compiles to nothing and m has no tp. */
enum pp__mpi_tp {
    PP__MPI_TP_MISS,       /* remote.c: a pin's lock-free look found no
                              copy, before it takes req_mu (arg: NULL) */
    PP__MPI_TP_INSTALL,    /* remote.c: a pin claimed an arrived reply
                              (INSTALLING), before it makes the copy
                              (arg: the request; req_mu not held) */
    PP__MPI_TP_EXPORT_GROW, /* owners.c: an export got new weight from its
                              home and is about to keep part of it (arg:
                              bool *, which the hook sets to make that
                              allocation fail) */
    PP__MPI_TP_WRITER_GONE, /* home.c: a writer's place was given back,
                              before the parked requests are told (arg:
                              the record) */
    PP__MPI_TP_PARKED,     /* home.c: the progress thread parked a request
                              on a record (arg: the record) */
};
typedef void (*pp__mpi_tp_fn)(pp_mpi_t *m, enum pp__mpi_tp where, void *arg, void *ctx);
/* relaxed: a switch; a test sets tp_ctx before it stores tp (release) and
 * pp__common_tp_run loads tp again with acquire before it reads tp_ctx. */
#if PP__TESTING
#define PP__MPI_TP(m, where, arg)                                                   \
    do {                                                                            \
        if (__builtin_expect(pp__atomic_load_relaxed(&(m)->tp) != NULL, 0))         \
            pp__common_tp_run((m), PP__MPI_TP_##where, (arg));                         \
    } while (0)
#else
#define PP__MPI_TP(m, where, arg) do { (void)(m); (void)(arg); } while (0)
#endif

/* ---- commands: application threads -> the progress thread ------------ */
enum { PP__CMD_PUBLISH = 1, PP__CMD_RETURN, PP__CMD_KILL, PP__CMD_LOADED };
typedef struct pp__cmd {
    int kind;
    uint32_t rank;                 /* RETURN: the home */
    pp__wire_return_t rec;         /* RETURN */
    struct pp__home *home;         /* PUBLISH, KILL */
    struct pp__load *load;         /* LOADED (loader.c) */
    struct pp__cmd *next;
} pp__cmd_t;

/* A serve waiting for its entry's load on the loader thread (loader.c);
 * its cmd takes it back to the progress thread. */
typedef struct pp__load {
    int src;
    uint64_t id, ref;
    uint32_t need;
    int rc;                        /* the loader's pin: 0 (held) or its error */
    pp__cmd_t cmd;                 /* LOADED: the way back, never allocated */
    struct pp__load *next;
} pp__load_t;

/* ---- home records -------------------------------------------------- */

/* rw: writers in the high half, serves (sends in flight from the entry)
 * in the low half.  A serve starts only with no writer; a write pin only
 * with no serve: a remote copy is a consistent snapshot. */
#define PP__RW_WRITER 0x10000u
#define PP__RW_SERVES 0xffffu

typedef struct pp__parked pp__parked_t;

typedef struct pp__home {
    _Atomic uint64_t ref;          /* key; 0: free (on the free list) */
    _Atomic uint32_t version;      /* published */
    _Atomic uint32_t rw;
    uint64_t size;                 /* the entry's bytes (fixed at put) */
    /* the type has save/load: its registered id (typed.c), or
     * PP__TYPE_UNREGISTERED; 0: flat, served as its bytes */
    uint32_t type_id;
    /* under own_mu */
    uint32_t owners;               /* this rank's owners through the layer */
    uint64_t minted;               /* intervals minted so far */
    pp__wset_t out;                /* minted, not yet come back */
    /* progress thread only */
    pp__parked_t *parked;          /* requests waiting for a version or a writer */
    struct pp__home *next_free;
    /* commands about this record, never allocated: publish_queued says
     * the publish command is in the queue (a second one adds nothing);
     * only the progress thread clears it, when it takes the command, never
     * a reuse of the record (home.c, pp__home_add) */
    _Atomic bool publish_queued;
    pp__cmd_t publish_cmd, kill_cmd;
    /* progress thread only: killed while a serve was in flight (or a write
     * pin held): recycled when the last serve is done, never before */
    bool zombie;
    /* Whether a writer's release (home.c, release_writer) must tell
     * anyone: a request is parked here (set by the progress thread before
     * it parks, then it looks again), or a thread of this rank waits for a
     * version (counted around the wait; not reset at reuse: a waiter of an
     * earlier life counts itself out).  Without either, a write unpin
     * takes no lock. */
    _Atomic bool has_parked;
    _Atomic uint32_t local_waiters;
} pp__home_t;

/* ---- the remote side ------------------------------------------------- */

/* A rank's owners of a remote ref (under own_mu). */
typedef struct pp__proxy {
    uint32_t owners;
    pp__wset_t held;
} pp__proxy_t;

/* A fetch in progress (under req_mu). */
enum { PP__REQ_SENT, PP__REQ_ARRIVED, PP__REQ_INSTALLING, PP__REQ_DONE };
typedef struct pp__req {
    uint64_t id;
    uint32_t rank;
    uint64_t home_ref;
    uint32_t need;
    int state;
    int status;                    /* DONE: 0, or the error */
    void *buf;                     /* ARRIVED: header + bytes (the receiver's) */
    size_t len;
    uint32_t version;              /* ARRIVED/DONE: the version it carries */
    uint32_t type_id;              /* ARRIVED: the type the bytes are packed by, 0: flat */
    uint64_t size;                 /* ARRIVED: the entry's size at home */
    unsigned waiters;
    bool sent;                     /* the progress thread has sent it */
    struct pp__req *next;
} pp__req_t;

/* A MINT or CLAIM ask (under req_mu): one application thread waits for it. */
typedef struct pp__mint {
    uint64_t id;
    uint32_t rank;
    uint64_t home_ref;
    int status;
    bool done, sent;
    bool claim;                    /* CLAIM (from, seq), not MINT */
    uint32_t from;
    uint64_t seq;
    pp__wiv_t iv;
    struct pp__mint *next;
} pp__mint_t;

/* Weight waiting to go home (progress thread only). */
typedef struct pp__outbox {
    pp__wire_return_t *rec;
    size_t n, cap;
    uint64_t since_ns;             /* when the oldest record was queued */
    uint64_t seq;                  /* RETURN messages sent to this home */
} pp__outbox_t;

struct pp_mpi {
    pp_pool_t *pool;
    pp__transport_t *t;
    bool own_transport;            /* made by pp_mpi_create (MPI): destroy frees it */
    int rank, size;

    pthread_t thread;
    _Atomic int finishing;         /* destroy: send FIN, drain, stop */
    _Atomic uint32_t wake;         /* futex word: bumped by every command */
    _Atomic uint32_t sleeping;

    pthread_mutex_t cmd_mu;        /* the command queue */
    pp__cmd_t *cmd_head, *cmd_tail;

    pthread_mutex_t home_mu;       /* writers of the home table; the free list */
    ck_ht_t home;                  /* home ref -> pp__home_t * */
    pp__home_t *home_free;
    pp__home_t **home_blocks;      /* every record ever allocated (freed at destroy) */
    size_t home_nblocks;

    pthread_mutex_t own_mu;        /* owners: home weight, proxies */
    ck_ht_t *proxies;              /* [size]: home ref -> pp__proxy_t * */
    /* under own_mu: tokens exported toward each home ([home]: the last
     * token's seq), and, as a home, the tokens of each rank claimed here
     * by their import or drop ([from]: a set of seqs) */
    uint64_t *export_seq;
    pp__wset_t *claimed;

    pthread_mutex_t cache_mu;      /* writers of the cache tables */
    ck_ht_t *cache;                /* [size]: home ref -> local ref of the copy */

    pthread_mutex_t req_mu;
    pthread_cond_t req_cv;         /* a request or a mint changed state */
    pthread_cond_t pub_cv;         /* a home version was published (with req_mu) */
    pp__req_t *reqs;
    pp__mint_t *mints;
    uint64_t next_id;

    /* progress thread only */
    pp__outbox_t *outbox;          /* [size] */
    uint64_t *sent_to, *recv_from; /* [size] messages (not counting duplicates) */
    uint64_t *fin_from;            /* [size] FIN's count, UINT64_MAX: none yet */
    pp__wset_t *seen_seq;          /* [size] RETURN sequence numbers seen */
    unsigned unsent;               /* requests and mints not sent yet (req_mu) */
    int progress_err;              /* first transport failure */
    uint64_t awaiting;             /* requests and mints sent, not answered yet */

    struct pp__types *types;       /* typed.c: the registered types */

    /* loader.c: serves whose entry is not resident wait here for a load
     * on the loader thread (made at the first; joined at destroy) */
    pthread_mutex_t load_mu;
    pthread_cond_t load_cv;
    struct pp__load *load_q, *load_tail;   /* FIFO: first asked, first loaded */
    bool load_stop;
    bool loader_made;              /* progress thread, then destroy */
    pthread_t loader;

    /* Remote pins held (destroy refuses while > 0) and hits: the sums of
     * the threads' blocks (perthread.h), plus what was counted here by a
     * thread that had no memory for a block. */
    uint64_t id;                   /* unique in the process, never 0 (perthread.h) */
    pthread_mutex_t thr_mu;        /* the list of blocks */
    pp__thr_t *thr;
    _Atomic int64_t spill_pins;
    _Atomic uint64_t spill_hits;
    /* test points (above): set by tests only */
#if PP__TESTING
    _Atomic(pp__mpi_tp_fn) tp;
    void *tp_ctx;
#endif
    struct {
        _Atomic uint64_t misses, requests_served, bytes_fetched, bytes_served,
            weight_messages, refused_returns, refused_imports, weight_records;
    } st;
};

/* Counts hits and remote pins (pins < 0: unpins) for the calling thread:
 * on its own block, a relaxed load and store each (it is the block's only
 * writer: no read-modify-write, no shared line); the block is found
 * through the thread's cache keyed by m->id, or made once (perthread.c). */
static inline void pp__layer_thr_count(pp_mpi_t *m, uint64_t hits, int64_t pins)
{
    pp__tls_t *t = pp__perthread_tls;
    pp__thr_t *b = __builtin_expect(t != NULL && t->layer[0] == m->id, 1)
                       ? t->thr[0]
                       : pp__perthread_thr_slow(m);
    if (__builtin_expect(b == NULL, 0)) {
        /* no memory for a block: shared counters, off the hot path */
        pp__atomic_add_relaxed(&m->spill_hits, hits);
        pp__atomic_add_relaxed(&m->spill_pins, pins);
        return;
    }
    if (hits != 0)
        pp__atomic_store_relaxed(&b->hits, pp__atomic_load_relaxed(&b->hits) + hits);
    pp__atomic_store_relaxed(&b->pins, pp__atomic_load_relaxed(&b->pins) + pins);
}

/* The files' own calls, bottom up: each file calls only the files above
 * it in this list (cmake/pinpool_mpi.cmake, PINPOOL_MPI_SOURCES; the test
 * layout.calls.mpi).  wire.c, wset.c, perthread.c (perthread.h) and
 * transport_mpi.c come first and call none of the layer's files. */

/* ht.c: ck_ht with direct 64-bit keys and values */
bool pp__ht_init(ck_ht_t *ht);
bool pp__ht_get(ck_ht_t *ht, uint64_t key, uint64_t *val);
bool pp__ht_set(ck_ht_t *ht, uint64_t key, uint64_t val);
bool pp__ht_remove(ck_ht_t *ht, uint64_t key);
/* A user of the tables' retired maps (a layer, or the type registry that
 * may outlive it): they are freed when the last user is gone. */
void pp__ht_hold(void);
void pp__ht_unhold(void);

/* common.c */
void pp__common_report(pp_mpi_t *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
uint64_t pp__common_now_ns(void);
#if PP__TESTING
void pp__common_tp_run(pp_mpi_t *m, enum pp__mpi_tp where, void *arg);
#endif
void pp__common_wake(pp_mpi_t *m);
int pp__common_command(pp_mpi_t *m, int kind, uint32_t rank, const pp__wire_return_t *rec,
                       struct pp__home *home);
void pp__common_push(pp_mpi_t *m, pp__cmd_t *c);      /* a command the caller made */
int pp__common_send(pp_mpi_t *m, int dst, int tag, const void *hdr, size_t hlen,
                    const void *body, size_t blen, unsigned flags, pp__sent_fn done,
                    void *arg);                                          /* progress */

/* typed.c: types registered by id, typed entries packed and unpacked */
#define PP__TYPE_UNREGISTERED UINT32_MAX
int pp__typed_create(struct pp__types **out);
void pp__typed_unref(struct pp__types *ts);
/* The id of type, PP__TYPE_UNREGISTERED if it has none; 0: flat. */
uint32_t pp__typed_id_of(const struct pp__types *ts, const pp_type_t *type);
/* The type registered as id here, or NULL. */
const pp_type_t *pp__typed_get(const struct pp__types *ts, uint32_t id);
/* A copy's header for req's reply (all but local), before its put. */
void pp__typed_hdr_fill(pp__copy_hdr_t *h, const pp__req_t *req, uint64_t size);
/* Makes req's arrived packed bytes a pinned typed copy: *local, *hdr. */
int pp__typed_copy(pp_mpi_t *m, pp__req_t *req, unsigned put_flags, pp_ref_t *local,
                   pp__copy_hdr_t **hdr);
/* The header of the typed copy whose data a pin gave, or NULL. */
const pp__copy_hdr_t *pp__typed_find(pp_mpi_t *m, const void *data);

/* loader.c */
/* Queues a load of ref for the request (src, id), which is served when it
 * is done (pp__home_loaded): 0, PP_ENOMEM (nothing queued). */
int pp__loader_add(pp_mpi_t *m, int src, uint64_t id, uint64_t ref, uint32_t need); /* progress */
/* After pp__home_loaded: drops the loader's pin of l's entry, frees l. */
void pp__loader_done(pp_mpi_t *m, pp__load_t *l);                         /* progress */
void pp__loader_stop(pp_mpi_t *m);     /* destroy, after the progress thread */

/* home.c */
pp__home_t *pp__home_find(pp_mpi_t *m, pp_ref_t ref);
int pp__home_add(pp_mpi_t *m, pp_ref_t ref, size_t size, uint32_t type_id, pp__home_t **out);
void pp__home_kill(pp_mpi_t *m, pp__home_t *h);       /* own_mu held */
int pp__home_pin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, void **data, uint32_t *got);
/* publish: a write unpin publishes the next version; false: a rollback
 * drops the write pin of a call that failed (nothing was written). */
int pp__home_unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, bool publish);
void pp__home_serve(pp_mpi_t *m, int src, const void *buf, size_t len);   /* progress */
void pp__home_publish(pp_mpi_t *m, pp__home_t *h);                         /* progress */
void pp__home_killed(pp_mpi_t *m, pp__home_t *h);                          /* progress */
/* A serve's load on the loader thread ended with rc (0: the loader holds a
 * pin of ref, dropped after this): serves the request, or answers rc. */
void pp__home_loaded(pp_mpi_t *m, int src, uint64_t id, uint64_t ref, uint32_t need,
                     int rc);                                              /* progress */
void pp__home_finish(pp_mpi_t *m);                                         /* progress */
void pp__home_destroy(pp_mpi_t *m);

/* proxy.c: own_mu held */
pp__proxy_t *pp__proxy_find(pp_mpi_t *m, uint32_t rank, uint64_t ref);
void pp__proxy_remove(pp_mpi_t *m, uint32_t rank, uint64_t ref, pp__proxy_t *p);
bool pp__proxy_held(pp_mpi_t *m, uint32_t rank, uint64_t ref);

/* remote.c */
int pp__remote_pin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, void **data, uint32_t *got);
int pp__remote_unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, const void *data);
int pp__remote_prefetch(pp_mpi_t *m, pp_gref_t ref);
void pp__remote_reply(pp_mpi_t *m, int src, pp__msg_t *msg);              /* progress */
void pp__remote_minted(pp_mpi_t *m, int src, const void *buf, size_t len);  /* progress */
int pp__remote_send_new(pp_mpi_t *m);                                      /* progress */
int pp__remote_mint(pp_mpi_t *m, uint32_t rank, uint64_t ref, pp__wiv_t *iv);
/* Asks home rank to claim the token (from, seq) of ref: 0, PP_EINVAL (it
 * was claimed before: imported or dropped already), PP_ENOMEM, PP_EIO. */
int pp__remote_claim(pp_mpi_t *m, uint32_t rank, uint64_t ref, uint32_t from, uint64_t seq);
void pp__remote_claimed(pp_mpi_t *m, int src, const void *buf, size_t len); /* progress */
bool pp__remote_idle(pp_mpi_t *m);     /* no request or mint of this rank in flight */
void pp__remote_drop_copy(pp_mpi_t *m, uint32_t rank, uint64_t home_ref);
void pp__remote_destroy(pp_mpi_t *m);

/* owners.c */
void pp__owners_return_msg(pp_mpi_t *m, int src, const void *buf, size_t len); /* progress */
void pp__owners_mint_msg(pp_mpi_t *m, int src, const void *buf, size_t len);   /* progress */
void pp__owners_claim_msg(pp_mpi_t *m, int src, const void *buf, size_t len);  /* progress */
void pp__owners_return_local(pp_mpi_t *m, const pp__wire_return_t *rec, size_t n);
void pp__owners_finish(pp_mpi_t *m);   /* destroy, before FIN: report and return */
void pp__owners_destroy(pp_mpi_t *m);

/* progress.c */
void *pp__progress_main(void *arg);

/* layer.c: the internal constructor, the layer over any transport; the
 * tests use it with the in-process one.  pp_mpi_create is this over the
 * MPI transport. */
int pp__layer_create_on(pp__transport_t *t, bool own, pp_pool_t *pool, pp_mpi_t **out);

#endif /* PP_MPI_LAYER_H */
