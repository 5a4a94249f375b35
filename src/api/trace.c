/*
 * trace.c -- the timeline trace: pp_trace_start, pp_trace_stop and
 * PINPOOL_TRACE write what the pool does over time in the Chrome Trace
 * Event format, which the Perfetto UI and chrome://tracing load.
 *
 * Threads record events on slow paths into buffers of their own
 * (core/tevent.c): loads, write-outs, reclaim rounds, waits of a pin for
 * another's load and of a put or load for room, and loads queued for a
 * swap thread.  A writer thread of the pool takes them every 10 ms and
 * writes them out, with counters sampled then: so no pinning thread
 * formats or writes anything.  The file is one JSON object:
 *
 *   {"traceEvents":[
 *   {"name":"load","cat":"swap","ph":"X","ts":1234.567,"dur":89.012,...},
 *   ...],
 *   "displayTimeUnit":"ms","otherData":{"events_dropped":"0"}}
 *
 * ts and dur are microseconds since the trace started.  X events are
 * spans on the thread that ran them; the io_uring engine's write-outs
 * and loads overlap on their swap thread, so each goes on a track of the
 * engine job that ran it ("swap node 0, I/O job 3").  A load queued for
 * a swap thread (PP_PIN_NOWAIT, pp_prefetch, PP_ADVISE_WILLNEED) starts
 * a flow on the queueing thread that ends in its load.  C events are
 * counters per node, M events name the process and every track.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

typedef struct pp__trace pp__trace_t;

#define PP__TRACE_PERIOD_NS 10000000ull  /* the writer's round: 10 ms */
#define PP__LANE_TID 0x40000000          /* above any Linux thread id */

struct pp__trace {
    pp_pool_t *pool;
    FILE *f;
    char *path;
    uint64_t base;                       /* CLOCK_MONOTONIC ns at the start */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;                 /* stop, with CLOCK_MONOTONIC */
    bool stop;
    int pid;
    uint64_t dropped;
    /* Tracks named so far (their tids). */
    int *named;
    size_t nnamed, named_cap;
    /* The last sample of each node's swap bytes, for the rates. */
    uint64_t last_ns;
    uint64_t last_read[PP_MAX_NODES], last_written[PP_MAX_NODES];
};

/* Microseconds since the start, with nanoseconds. */
static void put_us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

/* Names track tid once: "name" for the thread, with the process id. */
static void name_track(pp__trace_t *tr, int tid, const char *name, unsigned sort)
{
    for (size_t i = 0; i < tr->nnamed; i++)
        if (tr->named[i] == tid)
            return;
    if (tr->nnamed == tr->named_cap) {
        size_t cap = tr->named_cap ? 2 * tr->named_cap : 64;
        int *named = pp__alloc_resize(tr->named, cap * sizeof *named);
        if (named == NULL)
            return;                      /* named again later: harmless */
        tr->named = named;
        tr->named_cap = cap;
    }
    tr->named[tr->nnamed++] = tid;
    fprintf(tr->f,
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"name\":\"%s\"}},\n"
            "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"sort_index\":%u}},\n",
            tr->pid, tid, name, tr->pid, tid, sort);
}

/* The track of an event: its thread, or its engine job's. */
static int event_track(pp__trace_t *tr, const pp__tev_t *ev, unsigned role, unsigned node)
{
    char name[80];
    if (ev->lane != 0) {
        int tid = PP__LANE_TID + (int)(ev->node * 4096u + ev->lane);
        snprintf(name, sizeof name, "pinpool swap node %u, I/O job %u", ev->node,
                 ev->lane - 1u);
        name_track(tr, tid, name, 2000 + ev->node * 4096u + ev->lane);
        return tid;
    }
    if (role == 1)
        snprintf(name, sizeof name, "pinpool swap node %u (tid %d)", node, ev->tid);
    else if (role == 2)
        snprintf(name, sizeof name, "pinpool reclaimer node %u (tid %d)", node, ev->tid);
    else
        snprintf(name, sizeof name, "user thread (tid %d)", ev->tid);
    name_track(tr, ev->tid, name, role == 0 ? 0u : 1000u + 10u * node + role);
    return ev->tid;
}

static const char *const kind_name[] = {
    [PP__TEV_LOAD] = "load",
    [PP__TEV_WRITE] = "write-back",
    [PP__TEV_RECLAIM] = "reclaim",
    [PP__TEV_LOAD_WAIT] = "wait for load",
    [PP__TEV_ROOM_WAIT] = "wait for room",
    [PP__TEV_QUEUE] = "load",
};

static void write_event(pp__trace_t *tr, const pp__tev_t *ev, unsigned role, unsigned node)
{
    if (ev->t0 < tr->base || ev->t1 < ev->t0 || ev->kind > PP__TEV_QUEUE)
        return;                          /* recorded before this trace began */
    FILE *f = tr->f;
    int tid = event_track(tr, ev, role, node);
    if (ev->kind == PP__TEV_QUEUE) {
        /* The start of the flow that the load's span ends. */
        fprintf(f, "{\"name\":\"load\",\"cat\":\"queued load\",\"ph\":\"s\",\"id\":\"0x%016"
                PRIx64 "\",\"pid\":%d,\"tid\":%d,\"ts\":", ev->ref, tr->pid, tid);
        put_us(f, ev->t0 - tr->base);
        fputs("},\n", f);
        return;
    }
    fprintf(f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
            kind_name[ev->kind], ev->kind == PP__TEV_RECLAIM ? "reclaim" : "swap", tr->pid, tid);
    put_us(f, ev->t0 - tr->base);
    fputs(",\"dur\":", f);
    put_us(f, ev->t1 - ev->t0);
    if (ev->kind == PP__TEV_RECLAIM)
        fprintf(f, ",\"args\":{\"node\":%u,\"entries\":%" PRIu32 "}},\n", ev->node,
                ev->count);
    else
        fprintf(f, ",\"args\":{\"ref\":\"0x%016" PRIx64 "\",\"node\":%u,\"bytes\":%" PRIu64
                ",\"result\":\"%s\"}},\n", ev->ref, ev->node, ev->bytes, pp_err_name(ev->rc));
    if (ev->kind == PP__TEV_LOAD && (role == 1 || ev->lane != 0)) {
        /* A swap thread's load was queued: its flow ends inside it. */
        fprintf(f, "{\"name\":\"load\",\"cat\":\"queued load\",\"ph\":\"f\",\"bp\":\"e\","
                "\"id\":\"0x%016" PRIx64 "\",\"pid\":%d,\"tid\":%d,\"ts\":", ev->ref, tr->pid, tid);
        put_us(f, ev->t0 + (ev->t1 - ev->t0) / 2 - tr->base);
        fputs("},\n", f);
    }
}

/* Takes and writes every thread's events. */
static void drain(pp__trace_t *tr)
{
    /* acquire: pairs with tbuf_new's release; a buffer is made before it
     * is read here. */
    for (pp__tbuf_t *b = pp__atomic_load_acquire(&tr->pool->tbufs); b != NULL;
         b = pp__tevent_next(b)) {
        unsigned role, node;
        pp__tevent_role(b, &role, &node);
        uint32_t n;
        uint64_t dropped;
        pp__tev_t *ev = pp__tevent_take(b, &n, &dropped);
        tr->dropped += dropped;
        for (uint32_t i = 0; i < n; i++)
            write_event(tr, &ev[i], role, node);
    }
}

/* One counter event: name of node n at ts, with its args. */
static void counter(pp__trace_t *tr, uint64_t ts, const char *name, unsigned n,
                    const char *args)
{
    fprintf(tr->f, "{\"name\":\"node %u %s\",\"ph\":\"C\",\"pid\":%d,\"ts\":", n, name, tr->pid);
    put_us(tr->f, ts);
    fprintf(tr->f, ",\"args\":{%s}},\n", args);
}

/* The counters of every node now. */
static void sample(pp__trace_t *tr)
{
    pp_pool_t *pool = tr->pool;
    uint64_t now = pp__wait_now_ns();
    uint64_t ts = now - tr->base;
    double dt = (double)(now - tr->last_ns) / 1e9;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp_node_stats_t s = PP_NODE_STATS_INIT;
        if (pp_node_stats(pool, n, &s) != 0)
            continue;
        char args[160];
        snprintf(args, sizeof args, "\"resident\":%.3f,\"backlog\":%.3f",
                 (double)s.resident_bytes / 1e6, (double)s.backlog_bytes / 1e6);
        counter(tr, ts, "memory MB", n, args);
        if (!pool->swap)
            continue;
        pp__node_t *node = pool->nodes[n];
        snprintf(args, sizeof args, "\"loads\":%.3f,\"write-outs\":%.3f",
                 (double)s.io_load_bytes / 1e6,
                 (double)pp__atomic_load_relaxed(&node->sw.io_write_bytes) / 1e6);
        counter(tr, ts, "in flight MB", n, args);
        snprintf(args, sizeof args, "\"requests\":%" PRIu64, s.io_inflight);
        counter(tr, ts, "I/O requests", n, args);
        double rd = dt > 0 ? (double)(s.swap_bytes_read - tr->last_read[n]) / 1e6 / dt : 0.0;
        double wr = dt > 0 ? (double)(s.swap_bytes_written - tr->last_written[n]) / 1e6 / dt
                           : 0.0;
        snprintf(args, sizeof args, "\"read\":%.1f,\"write\":%.1f", rd, wr);
        counter(tr, ts, "swap MB/s", n, args);
        tr->last_read[n] = s.swap_bytes_read;
        tr->last_written[n] = s.swap_bytes_written;
    }
    tr->last_ns = now;
}

static void *writer_main(void *arg)
{
    pp__trace_t *tr = arg;
    pthread_mutex_lock(&tr->lock);
    while (!tr->stop) {
        pthread_mutex_unlock(&tr->lock);
        PP__TEST_POINT(TRACE_ROUND, tr->pool);
        sample(tr);
        drain(tr);
        pthread_mutex_lock(&tr->lock);
        uint64_t at = pp__wait_now_ns() + PP__TRACE_PERIOD_NS;
        struct timespec ts = {.tv_sec = (time_t)(at / 1000000000u),
                              .tv_nsec = (long)(at % 1000000000u)};
        while (!tr->stop && pthread_cond_timedwait(&tr->cond, &tr->lock, &ts) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&tr->lock);
    sample(tr);
    drain(tr);
    return NULL;
}

static void trace_free(pp__trace_t *tr)
{
    pthread_cond_destroy(&tr->cond);
    pthread_mutex_destroy(&tr->lock);
    pp__alloc_free(tr->named);
    pp__alloc_free(tr->path);
    pp__alloc_free(tr);
}

/* Events left from an earlier trace, taken before this one begins. */
static void discard_old(pp_pool_t *pool)
{
    /* acquire: as in drain. */
    for (pp__tbuf_t *b = pp__atomic_load_acquire(&pool->tbufs); b != NULL;
         b = pp__tevent_next(b)) {
        uint32_t n;
        uint64_t dropped;
        (void)pp__tevent_take(b, &n, &dropped);
    }
}

static int trace_open(pp_pool_t *pool, const char *path, pp__trace_t **out)
{
    pp__trace_t *tr = pp__alloc_zeroed(1, sizeof *tr);
    if (tr == NULL)
        return PP_ENOMEM;
    pthread_condattr_t ca;
    bool cond = pthread_condattr_init(&ca) == 0 &&
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                pthread_cond_init(&tr->cond, &ca) == 0;
    if (!cond || pthread_mutex_init(&tr->lock, NULL) != 0) {
        if (cond)
            pthread_cond_destroy(&tr->cond);
        pp__alloc_free(tr);
        return PP_ENOMEM;
    }
    tr->pool = pool;
    tr->pid = (int)getpid();
    size_t len = strlen(path) + 1;
    tr->path = pp__alloc_bytes(len);
    if (tr->path == NULL) {
        trace_free(tr);
        return PP_ENOMEM;
    }
    memcpy(tr->path, path, len);
    tr->f = fopen(path, "w");
    if (tr->f == NULL) {
        pp__report(pool, "pinpool: trace: cannot open %s: %s", path, strerror(errno));
        trace_free(tr);
        return PP_EIO;
    }
    fprintf(tr->f, "{\"traceEvents\":[\n"
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"name\":\"pinpool (pool %" PRIu64 ", %u node%s)\"}},\n",
            tr->pid, pool->fast.serial, pool->nnodes, pool->nnodes == 1 ? "" : "s");
    *out = tr;
    return 0;
}

int pp_trace_start(pp_pool_t *pool, const char *path, unsigned flags)
{
    if (pool == NULL || path == NULL || path[0] == '\0' || flags != 0)
        return PP_EINVAL;
    pthread_mutex_lock(&pool->trace_lock);
    int rc = PP_EINUSE;
    if (pool->trace != NULL) {
        pp__report(pool, "pinpool: trace: one is running already, to %s (pp_trace_stop it "
                   "first)", pool->trace->path);
        goto out;
    }
    pp__trace_t *tr;
    if ((rc = trace_open(pool, path, &tr)) != 0)
        goto out;
    discard_old(pool);
    tr->base = tr->last_ns = pp__wait_now_ns();
    /* Counters start from now: the first rates are of this trace only. */
    for (unsigned n = 0; n < pool->nnodes && pool->swap; n++) {
        tr->last_read[n] = pp__atomic_load_relaxed(&pool->nodes[n]->sw.sw_read);
        tr->last_written[n] = pp__atomic_load_relaxed(&pool->nodes[n]->sw.sw_written);
    }
    pp__atomic_store_relaxed(&pool->trace_on, 1);
    if (pthread_create(&tr->thread, NULL, writer_main, tr) != 0) {
        pp__atomic_store_relaxed(&pool->trace_on, 0);
        fclose(tr->f);
        (void)remove(path);
        trace_free(tr);
        rc = PP_ENOMEM;
        goto out;
    }
    pool->trace = tr;
    rc = 0;
out:
    pthread_mutex_unlock(&pool->trace_lock);
    return rc;
}

int pp_trace_stop(pp_pool_t *pool)
{
    if (pool == NULL)
        return PP_EINVAL;
    pthread_mutex_lock(&pool->trace_lock);
    pp__trace_t *tr = pool->trace;
    if (tr == NULL) {
        pthread_mutex_unlock(&pool->trace_lock);
        return PP_EINVAL;
    }
    pp__atomic_store_relaxed(&pool->trace_on, 0);
    pthread_mutex_lock(&tr->lock);
    tr->stop = true;
    pthread_cond_signal(&tr->cond);
    pthread_mutex_unlock(&tr->lock);
    pthread_join(tr->thread, NULL);
    uint64_t lost = pp__atomic_load_relaxed(&pool->trace_lost);
    pp__atomic_store_relaxed(&pool->trace_lost, 0);
    uint64_t dropped = tr->dropped + lost;
    /* The last line: a metadata event, so that no comma dangles. */
    fprintf(tr->f, "{\"name\":\"trace_end\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"events_dropped\":%" PRIu64 "}}\n],\n"
            "\"displayTimeUnit\":\"ms\",\"otherData\":{\"events_dropped\":\"%" PRIu64 "\"}}\n",
            tr->pid, dropped, dropped);
    int rc = ferror(tr->f) ? PP_EIO : 0;
    if (fclose(tr->f) != 0)
        rc = PP_EIO;
    if (rc != 0)
        pp__report(pool, "pinpool: trace: writing %s failed", tr->path);
    if (dropped != 0)
        pp__report(pool, "pinpool: trace: %" PRIu64 " events dropped (the writer fell "
                   "behind); %s says so in otherData", dropped, tr->path);
    pool->trace = NULL;
    pthread_mutex_unlock(&pool->trace_lock);
    trace_free(tr);
    return rc;
}
