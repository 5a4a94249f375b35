/*
 * stress/epoch_torture/free.c -- epoch_torture's free function (it runs on
 * the home node's reclaimer): it checks that it runs once per entry, on
 * that reclaimer, with no owner, pin or QSBR pointer of the program left
 * and, during an open lag, for no entry that died in it (b); then it
 * poisons the block and keeps it in its node's quarantine ring of freed
 * blocks, whose poison must stay intact.
 */
#include "epoch_torture.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Quarantine: the last freed (poisoned) blocks of each node. */
typedef struct quar {
    pthread_mutex_t lock;
    unsigned char **p;
    uint32_t *size;
    uint64_t *id;
    unsigned head, n;
} quar_t;
static quar_t g_quar[PP_MAX_NODES];
_Atomic uint64_t g_quar_checked;

static void et_free(void *data, size_t size, void *ctx);
static char g_type_ctx;
const pp_type_t g_type = {
    .name = "epoch_torture", .free = et_free, .save = NULL, .load = NULL,
    .ctx = &g_type_ctx, .flags = 0
};

static void quarantine_push(unsigned node, unsigned char *p, size_t size, uint64_t k)
{
    if (g_quarantine == 0 || node >= g_nnodes) {
        free(p);
        return;
    }
    quar_t *q = &g_quar[node];
    unsigned char *old = NULL;
    uint32_t old_size = 0;
    uint64_t old_id = 0;
    pthread_mutex_lock(&q->lock);
    unsigned i = (q->head + q->n) % g_quarantine;
    if (q->n == g_quarantine) {
        old = q->p[q->head];
        old_size = q->size[q->head];
        old_id = q->id[q->head];
        q->head = (q->head + 1) % g_quarantine;
        q->n--;
        i = (q->head + q->n) % g_quarantine;
    }
    q->p[i] = p;
    q->size[i] = (uint32_t)size;
    q->id[i] = k;
    q->n++;
    pthread_mutex_unlock(&q->lock);
    if (old != NULL) {
        /* Nobody may write a freed block: its poison must be intact. */
        long j = poison_intact(old, old_size);
        if (j >= 0)
            failf(NULL, "freed block of entry %" PRIu64 " (%u bytes) was written after its "
                  "free: byte %ld is %#04x, not poison", old_id, old_size, j, old[j]);
        atomic_fetch_add_explicit(&g_quar_checked, 1, memory_order_relaxed);
        free(old);
    }
}

static void et_free(void *data, size_t size, void *ctx)
{
    if (ctx != &g_type_ctx)
        failf(NULL, "free function got ctx %p, expected %p", ctx, (void *)&g_type_ctx);
    if (tl_user)
        failf(NULL, "free function called on a user thread");
    unsigned char *p = data;
    if (p == NULL || size < BLK_MIN || size % 8 != 0) {
        failf(NULL, "free function called with data %p size %zu", data, size);
        return;
    }
    uint64_t magic, k;
    memcpy(&magic, p, 8);
    memcpy(&k, p + 8, 8);
    rec_t *r = magic == HDR_MAGIC ? rec_get(k) : NULL;
    if (r == NULL || rec_data(r) != p) {
        failf(NULL, "free function: block %p (%zu bytes) is not a live entry (magic %#" PRIx64
              ", id %" PRIu64 "): a double free or a foreign pointer", data, size, magic, k);
        return;   /* do not touch it further */
    }
    uint32_t f = atomic_fetch_add_explicit(&r->frees, 1, memory_order_acq_rel);
    if (f != 0) {
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") freed %u times", k, rec_ref(r), f + 1);
        return;
    }
    unsigned node = rec_node(r);
    int tid = (int)syscall(SYS_gettid);
    if (node >= g_nnodes || tid != g_rtid[node]) {
        int other = -1;
        for (unsigned n = 0; n < g_nnodes; n++)
            if (tid == g_rtid[n])
                other = (int)n;
        failf(NULL, "entry %" PRIu64 " of node %u freed on thread %d (%s%d), not on its home "
              "reclaimer %d", k, node, tid, other >= 0 ? "the reclaimer of node " : "",
              other >= 0 ? other : tid, node < g_nnodes ? g_rtid[node] : -1);
    }
    if (atomic_load(&r->state) != REC_LIVE)
        failf(NULL, "entry %" PRIu64 " freed but its pp_put never returned success", k);
    if (size != rec_size(r))
        failf(NULL, "entry %" PRIu64 " freed with size %zu, put with %zu", k, size, rec_size(r));
    int32_t o = atomic_load(&r->owners), pi = atomic_load(&r->pins), q = atomic_load(&r->qsbr);
    if (o != 0 || pi != 0)
        atomic_fetch_add(&g_early_held, 1);
    if (q != 0)
        atomic_fetch_add(&g_early_qsbr, 1);
    rec_check_free_holders(k, rec_ref(r), o, pi, q, ": no grace period");
    /* (b) A free of an entry that died during the open lag: the lagger's
     * section began before that death and has not ended (it clears
     * g_lag_cur before its pp_quiescent), so no grace period can have
     * passed. */
    uint32_t lag = atomic_load(&r->lag), cur = atomic_load(&g_lag_cur);
    if (lag != 0 && lag == cur) {
        atomic_fetch_add(&g_lag_early, 1);
        failf(NULL, "(b) entry %" PRIu64 " (ref %#" PRIx64 ") freed during lag %u: its last owner "
              "was released after the lagging reader's section began, and that section is "
              "still open", k, rec_ref(r), lag);
    }
    long off = verify(p, size, k);
    if (off >= 0)
        failf(NULL, "entry %" PRIu64 " (ref %#" PRIx64 ") corrupted when freed: byte %ld of %zu "
              "is %#04x", k, rec_ref(r), off, size, p[off]);
    atomic_store(&r->free_tid, tid);
    /* Poison, then free (through the quarantine ring). */
    memset(p, POISON, size);
    if (node < g_nnodes)
        atomic_fetch_add(&g_frees_node[node], 1);
    quarantine_push(node, p, size, k);
}

/* Free function calls so far (the progress of reclamation). */
uint64_t frees_so_far(void)
{
    uint64_t f = 0;
    for (unsigned n = 0; n < g_nnodes; n++)
        f += atomic_load_explicit(&g_frees_node[n], memory_order_relaxed);
    return f;
}

/* Node's quarantine ring (g_quarantine blocks; none if 0). */
void quarantine_init(unsigned node)
{
    pthread_mutex_init(&g_quar[node].lock, NULL);
    if (g_quarantine > 0) {
        g_quar[node].p = calloc(g_quarantine, sizeof *g_quar[node].p);
        g_quar[node].size = calloc(g_quarantine, sizeof *g_quar[node].size);
        g_quar[node].id = calloc(g_quarantine, sizeof *g_quar[node].id);
        if (!g_quar[node].p || !g_quar[node].size || !g_quar[node].id)
            oom();
    }
}

/* The quarantined blocks: still poison, then freed for good. */
void quarantine_drain(thr_t *m)
{
    for (unsigned n = 0; n < g_nnodes; n++) {
        quar_t *q = &g_quar[n];
        for (unsigned i = 0; i < q->n; i++) {
            unsigned j = (q->head + i) % (g_quarantine ? g_quarantine : 1);
            if (poison_intact(q->p[j], q->size[j]) >= 0)
                failf(m, "freed block of entry %" PRIu64 " was written after its free",
                      q->id[j]);
            free(q->p[j]);
        }
        atomic_fetch_add(&g_quar_checked, q->n);
        free(q->p);
        free(q->size);
        free(q->id);
    }
}
