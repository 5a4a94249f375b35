/*
 * core.h -- the core layer: the pool's nodes (topology.c), its tables of
 * entries (table.c), thread records and epoch sections (thread.c,
 * epoch.c), sharded pin counts (hot.c), pin tracking (track.c), reports
 * (report.c), and an entry's death and hand-over to its reclaimer
 * (retire.c, backlog.c).  It calls only os/.  The structures are core/'s
 * too (types.h, and entry.h with the state machine): every layer above
 * reads them.
 */
#ifndef PP_CORE_H
#define PP_CORE_H

#include "os/os.h"
#include "core/entry.h"
#include "core/types.h"

/* report.c */
void pp__report(pp_pool_t *pool, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same before there is a pool: the options' report callback (or
 * stderr; opt may be NULL). */
void pp__report_opt(const pp_options_t *opt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* tevent.c -- the events of the timeline trace (api/trace.c writes them):
 * what each thread did that took time, recorded on slow paths only (I/O,
 * waits, reclaim rounds), never on a pin or unpin that finds its entry
 * resident.  Each thread appends to a buffer of its own under the
 * buffer's lock, which only the trace's writer takes besides; a full
 * buffer drops the event and counts it. */
enum pp__tev_kind {
    PP__TEV_LOAD,                        /* a load from swap: t0 its claim */
    PP__TEV_WRITE,                       /* an eviction's write-out */
    PP__TEV_RECLAIM,                     /* a reclaimer's frees (count) */
    PP__TEV_LOAD_WAIT,                   /* a pin waiting for another's load */
    PP__TEV_ROOM_WAIT,                   /* a put or load waiting for room */
    PP__TEV_QUEUE,                       /* a load queued for the swap thread
                                            (an instant: the start of a flow) */
};
typedef struct pp__tev {
    uint64_t t0, t1;                     /* CLOCK_MONOTONIC ns */
    uint64_t ref;                        /* the entry, or 0 */
    uint64_t bytes;                      /* the entry's, or a round's */
    uint32_t count;                      /* a round's entries */
    int32_t tid;                         /* set by pp__tevent_add */
    int32_t rc;                          /* 0, or how it failed */
    uint16_t kind, node;
    uint16_t lane;                       /* 0: the thread; k + 1: job k of
                                            the node's io_uring engine */
} pp__tev_t;
/* Events a thread may record between two takes of the writer (every
 * 10 ms): 200,000 a second.  More are dropped, and counted. */
#define PP__TBUF_EVENTS 2048u
/* Whether events are recorded now: one relaxed load, for slow paths. */
static inline bool pp__tevent_on(pp_pool_t *pool)
{
    return PP__UNLIKELY(pp__atomic_load_relaxed(&pool->trace_on) != 0);
}
/* The start of a span: the time now if tracing, else 0 (no event). */
static inline uint64_t pp__tevent_start(pp_pool_t *pool)
{
    return pp__tevent_on(pool) ? pp__wait_now_ns() : 0;
}
/* Appends ev to t's buffer (made at t's first event), its tid set. */
void pp__tevent_add(pp_pool_t *pool, pp__thread_t *t, pp__tev_t *ev);
/* A span that began at t0 (pp__tevent_start; 0: none) and ends now. */
void pp__tevent_span(pp_pool_t *pool, pp__thread_t *t, unsigned kind, uint64_t t0,
                     pp_ref_t ref, uint64_t bytes, unsigned node, unsigned lane, int rc);
/* The writer's side: takes every event of b into *out (n of them; the
 * array is the writer's until its next take) and the drops since the
 * last take.  Buffers are never removed from pool->tbufs before destroy. */
typedef struct pp__tbuf pp__tbuf_t;
pp__tev_t *pp__tevent_take(pp__tbuf_t *b, uint32_t *n, uint64_t *dropped);
/* What made the buffer: 0 a user thread, 1 a swap thread, 2 a reclaimer;
 * and its node (pool threads). */
void pp__tevent_role(const pp__tbuf_t *b, unsigned *role, unsigned *node);
pp__tbuf_t *pp__tevent_next(const pp__tbuf_t *b);
void pp__tevent_free_all(pp_pool_t *pool);

/* topology.c -- pre: pool zeroed; post: nnodes >= 1, cpusets filled. */
int pp__topology_load(pp_pool_t *pool, const char *spec);
void pp__topology_free(pp_pool_t *pool);
/* Memory for node n: bound to the node where the OS allows (*bound says),
 * else ordinary pages.  Zeroed.  NULL on failure. */
void *pp__topology_node_alloc(pp_pool_t *pool, unsigned n, size_t len, bool *bound);
void pp__topology_node_free(pp_pool_t *pool, void *p, size_t len);
/* A node's table (entry.h, table.c): PP__TABLE_BYTES aligned to its size,
 * reserved without access or memory; NULL on failure.
 * pp__topology_table_release unmaps it. */
char *pp__topology_table_reserve(void);
void pp__topology_table_release(char *base);
/* Commits len bytes at p in node n's table (page aligned): readable,
 * writable and zero, huge pages advised if huge, bound to the node where
 * the OS allows (*bound says).  false on failure, the range still reserved. */
bool pp__topology_table_commit(pp_pool_t *pool, unsigned n, char *p, size_t len, bool huge,
                               bool *bound);
/* Binds the calling thread to node n's CPUs, or (one_cpu) to the last of
 * them this process may run on; false where impossible. */
bool pp__topology_bind(pp_pool_t *pool, unsigned n, bool one_cpu);
/* Node of the calling thread (real topology: the CPU it runs on). */
unsigned pp__topology_current_node(pp_pool_t *pool, pp__thread_t *t);

/* table.c */
int pp__table_init(pp_pool_t *pool, pp__node_t *node);
void pp__table_free(pp_pool_t *pool, pp__node_t *node);
/* Entry named by ref, or NULL if the ref cannot name a slot (the caller
 * still validates the generation).  Lock-free, no allocation. */
static inline pp__entry_t *pp__lookup(pp_pool_t *pool, pp_ref_t ref)
{
    unsigned n = pp_ref_node(ref);     /* < PP_MAX_NODES: 6 bits */
    uint32_t slot = pp_ref_slot(ref);
    /* acquire: pairs with the release that publishes a commit (table.c),
     * so the zeroed segment is seen before any state word in it.  The
     * address does not wait for this load: it is the table's base plus
     * the slot times 16. */
    if (PP__UNLIKELY(slot >= pp__atomic_plain_load_acquire(&pool->fast.lim[n]) ||
                     pp_ref_gen(ref) == 0))
        return NULL;
    return (pp__entry_t *)(void *)pool->fast.base[n] + slot;
}
/* The hot records of segment s of node n, PP__SEG_SLOTS of them, if the
 * segment is committed; NULL if not (yet).  For the walks over a table:
 * the swap thread's and pp__table_foreach. */
static inline pp__entry_t *pp__table_segment(pp_pool_t *pool, unsigned n, uint32_t s)
{
    /* acquire: as in pp__lookup (the commit's one release). */
    if (s >= pp__atomic_plain_load_acquire(&pool->fast.lim[n]) >> PP__SEG_SHIFT)
        return NULL;
    return (pp__entry_t *)(void *)pool->fast.base[n] + ((size_t)s << PP__SEG_SHIFT);
}
pp__entry_t *pp__table_slot_alloc(pp_pool_t *pool, unsigned n, pp__thread_t *t);
void pp__table_slot_free(pp_pool_t *pool, unsigned n, pp__entry_t *e);
void pp__table_magazine_return(pp_pool_t *pool, pp__thread_t *t);
/* Calls fn on every slot ever handed out on node n (single-threaded use). */
void pp__table_foreach(pp_pool_t *pool, unsigned n,
                       void (*fn)(pp_pool_t *, unsigned, pp__entry_t *, void *),
                       void *arg);

/* epoch.c */
/* pp_inline_thread_last (pinpool_inline.h), the registration the thread used
 * last, with any pool, points to the start of its pp__tls_node: f.thread
 * is the pp__thread_t, f.count its counters. */
struct pp__tls_node {
    pp__inline_thread_t f;               /* first: pp_inline_thread_last points here */
    struct pp__tls_node *next;
};
pp__thread_t *pp__thread_get_slow(pp_pool_t *pool);
/* The type callbacks (free, save, load) running on the calling thread, of
 * any pool.  Inside one, no pool call waits (docs/api.md, "Callbacks"): a
 * put never waits for the backlog and fails with PP_EAGAIN where it would
 * wait for room, a pin is PP_PIN_NOWAIT.  The callback may run on a pool
 * thread that the wait would be for. */
extern __thread unsigned pp__thread_cb_depth __attribute__((tls_model("initial-exec")));
static inline bool pp__in_callback(void) { return PP__UNLIKELY(pp__thread_cb_depth != 0); }
static inline void pp__callback_enter(void) { pp__thread_cb_depth++; }
static inline void pp__callback_leave(void) { pp__thread_cb_depth--; }
/* The calling thread's record for pool, registering it on first use.
 * NULL only if that one-time registration could not allocate. */
static inline pp__thread_t *pp__thread_get(pp_pool_t *pool)
{
    pp__inline_thread_t *n = pp_inline_thread_last;
    if (PP__LIKELY(n != NULL && n->serial == pool->fast.serial))
        return (pp__thread_t *)n->thread;
    return pp__thread_get_slow(pool);
}
/* The prologue of every call that takes a ref: the entry the ref names and
 * the calling thread's record.  0, PP_EINVAL, PP_ESTALE or PP_ENOMEM. */
static inline int pp__begin(pp_pool_t *pool, pp_ref_t ref, pp__entry_t **e,
                            pp__thread_t **t)
{
    if (PP__UNLIKELY(pool == NULL))
        return PP_EINVAL;
    *e = pp__lookup(pool, ref);
    if (PP__UNLIKELY(*e == NULL))
        return PP_ESTALE;
    *t = pp__thread_get(pool);
    if (PP__UNLIKELY(*t == NULL))
        return PP_ENOMEM;
    return 0;
}
int pp__epoch_init(pp_pool_t *pool);
pp__thread_t *pp__thread_new_reclaimer(pp_pool_t *pool);
void pp__epoch_enter(pp__thread_t *t);
void pp__epoch_leave(pp__thread_t *t);
void pp__epoch_end(pp__thread_t *t);   /* ends it even in QSBR mode */
void pp__thread_registry_add(pp_pool_t *pool);
void pp__thread_registry_remove(pp_pool_t *pool);
void pp__thread_tls_forget(pp_pool_t *pool);
void pp__thread_free_all(pp_pool_t *pool);
unsigned pp__thread_in_use(pp_pool_t *pool);

/* backlog.c -- the bound on the reclaim backlog (docs/api.md, "Overload").
 * What one dead entry counts: its bytes in memory plus its slot.  pw is
 * its word once QUEUED (RESIDENT no longer changes). */
#define PP__BACKLOG_SLOT_BYTES 64u
/* An entry counts at most 2^36 bytes (64 GiB): 2^26 slots per node of that
 * cannot overflow the node's 64-bit count, whatever sizes callers claim
 * (up to PTRDIFF_MAX); so large an entry is far over any bound anyway. */
#define PP__BACKLOG_MAX_CHARGE ((uint64_t)1 << 36)
static inline uint64_t pp__backlog_charge(const pp__entry_t *e, uint64_t pw)
{
    uint64_t size = (pw & PP__F_RESIDENT) ? (uint64_t)pp__cold(e)->size : 0;
    return (size < PP__BACKLOG_MAX_CHARGE ? size : PP__BACKLOG_MAX_CHARGE) + PP__BACKLOG_SLOT_BYTES;
}
void pp__backlog_init(pp_pool_t *pool, size_t bound);
/* A push adds the entry's charge (before the push: the reclaimer's
 * subtraction comes after it); the reclaimer subtracts it once the entry
 * is freed, and wakes waiting puts when the backlog falls below the mark. */
void pp__backlog_add(pp__node_t *node, uint64_t charge);
void pp__backlog_sub(pp_pool_t *pool, pp__node_t *node, uint64_t charge);
/* A put's wait for node n's backlog to fall below the mark (the caller saw
 * it at or above): 0, PP_EAGAIN (PP_PUT_NOWAIT) or PP_EDEADLK (t is a QSBR
 * thread inside its section). */
int pp__backlog_wait(pp_pool_t *pool, unsigned n, pp__thread_t *t, unsigned flags);

/* track.c */
int pp__track_pin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref,
                  const char *file, int line);
void pp__track_unpin(pp_pool_t *pool, pp__thread_t *t, pp_ref_t ref);
size_t pp__track_report_thread(pp_pool_t *pool, pp__thread_t *t);
size_t pp__track_report_ref(pp_pool_t *pool, pp_ref_t ref);
/* pp_pins_dump of a tracking pool: 0, PP_ENOMEM or PP_EIO. */
int pp__track_dump(pp_pool_t *pool, FILE *out);
void pp__track_free(pp_pool_t *pool);

/* Whether the pool drops entries of this type and size when it needs room
 * (pinpool.h, PP_TYPE_DISCARD): a DISCARD type without PP_TYPE_NOSWAP, in a
 * pool with a limit, and bytes to free.  The same for an entry's whole
 * life (size and type do not change): put, push and reclaimer agree. */
static inline bool pp__droppable(const pp_pool_t *pool, const pp_type_t *type, size_t size)
{
    return pool->mem_limit != 0 && size != 0 && type != NULL &&
           (type->flags & (PP_TYPE_DISCARD | PP_TYPE_NOSWAP)) == PP_TYPE_DISCARD;
}
/* A final release or unpin that finds an I/O in flight (BUSY) leaves the
 * entry to whoever ends the I/O (pp__ioend_finish).  It counts the entry in its
 * node's dead_in_io before its CAS (defer: the CAS about to be tried
 * defers), so the count never lags behind the queueing and a drain that
 * starts after the release returned waits for it.  *held says the count is
 * taken; a retry that no longer defers gives it back.  Relaxed: the count
 * only has to be coherent with the caller's own later calls (drain), and
 * the ender's decrement orders its push (pp__ioend_finish). */
static inline void pp__dead_in_io_note(pp_pool_t *pool, unsigned n, bool defer, bool *held)
{
    if (PP__UNLIKELY(defer != *held)) {
        pp__atomic_add_relaxed(&pool->nodes[n]->prod.dead_in_io, defer ? 1 : -1);
        *held = defer;
    }
}


/* retire.c -- an entry's death and its push onto its reclaimer's queue. */
/* The last release's transition to DEAD (QUEUED too, and pushed, if the
 * entry holds no pin and no I/O); pin.c's unpin of a dead entry is its
 * other half. */
void pp__retire_kill(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                     pp__thread_t *t);
/* Queues a dead, unpinned entry (the caller made it QUEUED) and returns at
 * once.  Never blocks; wakes the reclaimer only if it sleeps. */
void pp__retire_push(pp_pool_t *pool, unsigned n, pp__entry_t *e, pp__thread_t *t);


/* hot.c -- see there.  Internal results besides 0 and PP_E*: */
#define PP__SLOW  1   /* pin: not resident, or a write pin meets an eviction */
#define PP__HOT   2   /* pin/unpin: the entry is HOT: pp__hot_pin/unpin */
#define PP__RETRY 3   /* hot pin/unpin: no longer HOT, do it on the word */
static inline unsigned pp__hot_index(uint64_t pw) { return (unsigned)(pw & PP__PINS_MASK); }
/* The fast path of a hot pin (inc 1) or unpin (inc -1): one CAS on the
 * caller's shard, if e's word is still the one the thread last saw (so the
 * cached counter and tag are that promotion's: a later promotion has a
 * larger tag, and the CAS checks it).  false: nothing done, take
 * pp__hot_pin or pp__hot_unpin.  pinpool_inline.h's code: the inlined fast
 * paths take the same step. */
static inline bool pp__hot_cached(pp__thread_t *t, pp__entry_t *e, uint64_t pw, int inc)
{
    return pp__inline_hot_step(&t->hc, (const pp__inline_entry_t *)(const void *)e, pw, inc);
}
int pp__hot_init(pp_pool_t *pool, pp__node_t *node);
void pp__hot_free(pp_pool_t *pool, pp__node_t *node);
/* Tries to make e HOT (a pin met contention); does nothing if it cannot. */
void pp__hot_promote(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen);
/* Ends the HOT mode of e, helping anyone else at it. */
void pp__hot_demote(pp_pool_t *pool, unsigned n, pp__entry_t *e);
/* Pin and unpin of a HOT entry: 0, PP_ESTALE, or PP__RETRY (not HOT: do
 * it on the word).  A write pin demotes and returns PP__RETRY. */
int pp__hot_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                unsigned flags, pp__thread_t *t, void **data);
int pp__hot_unpin(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                  pp__thread_t *t);
/* The pins e holds: the word's count, or a snapshot of its hot counters. */
uint32_t pp__hot_pins(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t pw);
/* Hot slots taken on node n. */
unsigned pp__hot_in_use(pp_pool_t *pool, unsigned n);
/* With no call running: each taken slot of node n has holders[i] == 1 (or
 * 0 if retired), each free one 0, and none has a demoter registered. */
bool pp__hot_slots_valid(pp_pool_t *pool, unsigned n, const uint32_t *holders);

#endif /* PP_CORE_H */
