/*
 * stress/torture/reentrant.c -- --reentrant PCT: free functions that call
 * back into the pool (docs/api.md, "Callbacks").
 *
 * PCT percent of the free function's calls (stress_free, on reclaimers and
 * swap threads) and of the children's own frees call back: each puts a
 * child entry on a random node, and either releases it at once or leaves
 * it in a stash slot, from which a later callback -- on any thread, for
 * any node -- pins it, checks it, unpins it and releases it.  So frees put,
 * pin, unpin and release entries of every node while their reclaimers and
 * swap threads run.  A put or pin that would wait returns PP_EAGAIN there
 * (counted); a put may fail with PP_ENOMEM under --faults or a limit.
 *
 * Children are their own type (a free function, no save/load: never
 * evicted), counted per node apart from the program's entries; their
 * puts, pins, unpins and releases go into the exact stats checks.  At the
 * end (re_finish) the callbacks stop making children, the pool is drained
 * and the stash emptied, so every child is released before the final
 * drain, and pp_pool_destroy finds nothing left.
 */
#include "torture.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

unsigned g_reentrant;

#define RE_STASH    64
#define RE_MAGIC    0x43484c44u          /* "CHLD" */
#define RE_DEPTH    2                    /* a child's free calls back, a grandchild's does not */

typedef struct child {
    uint32_t magic;
    uint32_t node;
    uint64_t size;
} child_t;

static _Atomic pp_ref_t re_stash[RE_STASH];
static _Atomic int re_closed;
static _Atomic uint64_t re_frees_node[PP_MAX_NODES];
static _Atomic uint64_t re_cnt[PP_MAX_NODES][4];   /* puts, pins, unpins, releases */
static _Atomic uint64_t re_calls, re_put_eagain, re_put_enomem, re_pin_eagain;
static __thread uint64_t re_rng;
static __thread unsigned re_depth;

enum { RE_PUTS, RE_PINS, RE_UNPINS, RE_RELEASES };

static uint64_t re_next(void)
{
    if (re_rng == 0)
        re_rng = mix3(g_seed, (uint64_t)syscall(SYS_gettid), 0x4EE17u) | 1u;
    return splitmix64(&re_rng);
}

static void re_count(pp_ref_t ref, int what)
{
    unsigned n = pp_ref_node(ref);
    if (n < PP_MAX_NODES)
        atomic_fetch_add(&re_cnt[n][what], 1);
}

/* Releases a child, retrying while the calling thread cannot register
 * (--faults): a child is never lost. */
static void re_release(pp_ref_t ref)
{
    re_count(ref, RE_RELEASES);
    int rc;
    for (int i = 0; (rc = pp_release(g_pool, ref)) == PP_ENOMEM && i < 1000000; i++)
        ;
    if (rc != 0) {
        atomic_fetch_sub(&re_cnt[pp_ref_node(ref)][RE_RELEASES], 1);
        failf(NULL, "--reentrant: pp_release of a child (ref %#" PRIx64 ") in a callback: %s",
              ref, pp_err_name(rc));
    }
}

/* Pins a child from the stash, checks it, unpins it; then releases it. */
static void re_use(pp_ref_t ref)
{
    void *d = NULL;
    int rc = pp_pin(g_pool, ref, (re_next() & 1) ? PP_PIN_WRITE : 0u, &d);
    if (rc == 0) {
        re_count(ref, RE_PINS);
        const child_t *c = d;
        if (c->magic != RE_MAGIC || c->node != pp_ref_node(ref))
            failf(NULL, "--reentrant: child %#" PRIx64 " pinned in a callback holds magic %#x "
                  "node %u", ref, c->magic, c->node);
        re_count(ref, RE_UNPINS);
        if ((rc = pp_unpin(g_pool, ref)) != 0) {
            atomic_fetch_sub(&re_cnt[pp_ref_node(ref)][RE_UNPINS], 1);
            failf(NULL, "--reentrant: pp_unpin of a child in a callback: %s", pp_err_name(rc));
        }
    } else if (rc == PP_EAGAIN) {
        atomic_fetch_add(&re_pin_eagain, 1);
    } else if (rc != PP_ENOMEM) {
        failf(NULL, "--reentrant: pp_pin of a child (ref %#" PRIx64 ") in a callback: %s", ref,
              pp_err_name(rc));
    }
    re_release(ref);
}

/* What a callback does, PCT percent of the time. */
static void re_call(void)
{
    if (g_reentrant == 0 || re_depth >= RE_DEPTH || atomic_load(&re_closed) ||
        re_next() % 100 >= g_reentrant)
        return;
    re_depth++;
    atomic_fetch_add(&re_calls, 1);
    unsigned n = (unsigned)(re_next() % g_nnodes);
    size_t size = sizeof(child_t) + (size_t)(re_next() % 240);
    child_t *c = malloc(size);
    if (c == NULL)
        abort();
    c->magic = RE_MAGIC;
    c->node = n;
    c->size = size;
    pp_ref_t ref = PP_REF_NONE;
    int rc = pp_put(g_pool, c, size, &g_child_type, PP_ON_NODE(n), &ref);
    if (rc != 0) {
        free(c);
        if (rc == PP_EAGAIN)
            atomic_fetch_add(&re_put_eagain, 1);
        else if (rc == PP_ENOMEM)
            atomic_fetch_add(&re_put_enomem, 1);
        else
            failf(NULL, "--reentrant: pp_put in a callback: %s", pp_err_name(rc));
    } else {
        re_count(ref, RE_PUTS);
        if (re_next() & 1) {
            re_release(ref);
        } else {
            pp_ref_t old = atomic_exchange(&re_stash[re_next() % RE_STASH], ref);
            if (old != PP_REF_NONE)
                re_use(old);
        }
    }
    if ((re_next() & 3) == 0) {
        pp_ref_t old = atomic_exchange(&re_stash[re_next() % RE_STASH], PP_REF_NONE);
        if (old != PP_REF_NONE)
            re_use(old);
    }
    re_depth--;
}

void re_on_free(void)
{
    re_call();
}

static void child_free(void *data, size_t size, void *ctx)
{
    child_t *c = data;
    (void)ctx;
    if (c == NULL || size < sizeof *c || c->magic != RE_MAGIC || c->size != size ||
        c->node >= g_nnodes) {
        failf(NULL, "--reentrant: child free of %p (size %zu): not a live child", data, size);
        return;
    }
    unsigned n = c->node;
    re_call();
    c->magic = 0;
    free(c);
    atomic_fetch_add(&re_frees_node[n], 1);
}

const pp_type_t g_child_type = {"stress-child", child_free, NULL, NULL, NULL, 0u};

void re_finish(thr_t *m)
{
    if (g_reentrant == 0)
        return;
    atomic_store(&re_closed, 1);
    /* Callbacks that started before the store may still stash: once the
     * drain has returned, every free queued before it has returned. */
    int rc = pp_pool_drain(g_pool, 30000);
    if (rc != 0)
        failf(m, "--reentrant: pp_pool_drain before emptying the stash: %s", pp_err_name(rc));
    for (unsigned i = 0; i < RE_STASH; i++) {
        pp_ref_t ref = atomic_exchange(&re_stash[i], PP_REF_NONE);
        if (ref != PP_REF_NONE) {
            re_count(ref, RE_RELEASES);
            if ((rc = pp_release(g_pool, ref)) != 0)
                failf(m, "--reentrant: pp_release of a stashed child: %s", pp_err_name(rc));
        }
    }
}

void re_add_counts(cnt_t *exp, unsigned nnodes, uint64_t *frees)
{
    for (unsigned n = 0; n < nnodes; n++) {
        exp[n].puts += atomic_load(&re_cnt[n][RE_PUTS]);
        exp[n].pins += atomic_load(&re_cnt[n][RE_PINS]);
        exp[n].unpins += atomic_load(&re_cnt[n][RE_UNPINS]);
        exp[n].releases += atomic_load(&re_cnt[n][RE_RELEASES]);
        frees[n] = atomic_load(&re_frees_node[n]);
    }
}

uint64_t re_frees_total(void)
{
    uint64_t f = 0;
    for (unsigned n = 0; n < PP_MAX_NODES; n++)
        f += atomic_load(&re_frees_node[n]);
    return f;
}

void re_print(void)
{
    if (g_reentrant == 0)
        return;
    uint64_t puts = 0;
    for (unsigned n = 0; n < PP_MAX_NODES; n++)
        puts += atomic_load(&re_cnt[n][RE_PUTS]);
    printf("torture: reentrant: callbacks %" PRIu64 " child puts %" PRIu64 " (EAGAIN %" PRIu64
           ", ENOMEM %" PRIu64 ") child frees %" PRIu64 " pins in callbacks EAGAIN %" PRIu64 "\n",
           atomic_load(&re_calls), puts, atomic_load(&re_put_eagain),
           atomic_load(&re_put_enomem), re_frees_total(), atomic_load(&re_pin_eagain));
}
