/*
 * swapper.c -- each node's swap thread: its loop, its start and its stop.
 *
 * The thread runs the hand (evict.c) when the pool is above the high
 * watermark or a putter asked for room, and the loads queued for its node
 * (PP_PIN_NOWAIT, pp_prefetch, PP_ADVISE_WILLNEED).  The thread engine runs
 * each queued load in turn, blocking (load.c); the io_uring engine keeps
 * many in flight (xfer.c), and the hand's write-outs with them.  Between
 * bursts the thread sleeps on the node's io_wake event count.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "swap/swap.h"
#include "os/swapdev.h"

/* Writeback of swapped bytes is started (device sync) only when a swap
 * thread has had nothing to do for this long after writing: so swapped
 * data does not linger as dirty page cache until the kernel's 30 s expiry,
 * and evictions never queue behind writeback they started themselves
 * (starting it after every batch cut swap-out throughput by half to three
 * quarters on this project's machine, measured with swapbench). */
#define PP__SYNC_IDLE_NS 1000000000L

/* The thread engine's queued loads: each in turn, blocking, as they come. */
static bool swap_loads(pp_pool_t *pool, pp__node_t *node, bool stop)
{
    ck_stack_entry_t *batch = ck_stack_batch_pop_upmc(&node->sw.load_q);
    for (ck_stack_entry_t *s = batch; s != NULL;) {
        ck_stack_entry_t *next = s->next;
        pp__entry_t *e = pp__entry_of_link(s);
        if (stop || (pp__atomic_load_relaxed(&e->pw) & PP__F_DEAD))
            pp__ioend_cancel_load(pool, node, e);
        else
            (void)pp__load_only(pool, node->index, e, node, node->sw.st);
        s = next;
    }
    return batch != NULL;
}

static void *swap_main(void *arg)
{
    pp__node_t *node = arg;
    pp_pool_t *pool = node->pool;
    uint64_t served = 0;
    pp__atomic_store_relaxed(&node->sw.st->tid, (int)gettid());   /* the trace's track */
    (void)pp__topology_bind(pool, node->index, false);
    for (;;) {
        uint32_t seen = ck_ec32_value(&node->sw.io_wake);
        /* acquire: pairs with destroy's release of io_stop. */
        bool stop = pp__atomic_load_acquire(&node->sw.io_stop) != 0;
        bool loads;
        if (node->sw.xf != NULL) {
            if (stop) {
                pp__xfer_stop(pool, node);   /* cancels what has not started */
                break;
            }
            /* Starts queued loads, takes what has ended (xfer.c). */
            loads = pp__xfer_loads(pool, node, false, pp__evict_room);
            pp__xfer_reap(pool, node, false);
            pp__xfer_spares_trim(pool, node);
        } else {
            loads = swap_loads(pool, node, stop);
            if (stop)
                break;
        }
        uint64_t req = pp__atomic_load_relaxed(&pool->room_req);
        if (req != served || pp__atomic_load_relaxed(&pool->resident) > pool->high_wm) {
            bool stuck;
            PP__TEST_POINT(PASS, node);
            uint64_t hint = pp__atomic_load_relaxed(&node->sw.room_hint);
            uint64_t freed = pp__evict_pass(pool, node, false, &stuck, node->sw.st);
            /* The NOWAIT sizes this pass made room for: a caller still
             * short retries, and asks again.  A larger one refused during
             * the pass stays for the pass its request brings. */
            (void)pp__atomic_cas_strong_relaxed(&node->sw.room_hint, &hint, 0);
            served = req;
            pp__atomic_store_relaxed(&node->sw.pass_stuck, stuck);
            /* release: pass_stuck is read after an acquire of pass_seq. */
            pp__atomic_store_release(&node->sw.pass_seq, req);
            ck_ec32_inc(&pool->room_ec, &pp__wait_ec_mode);
            if (freed > 0 && pp__evict_needed(pool, node))
                continue;
        }
        if (loads)
            continue;
        if (node->sw.xf != NULL && pp__xfer_busy(node)) {
            /* Loads in flight, or held for their turn: the next
             * completion, then round again to start those held (a load
             * queued meanwhile is seen then too; no request takes long). */
            pp__xfer_reap(pool, node, true);
            continue;
        }
        PP__TEST_POINT(SWAP_IDLE, node);
        uint64_t written = pp__atomic_load_relaxed(&node->sw.sw_written);
        /* Memory kept for loads stays over idle moments: the next burst
         * of prefetches reads into it instead of into fresh pages. */
        bool kept = pp__xfer_spare_bytes(node) > 0;
        if (written == node->sw.synced && !kept) {
            ck_ec32_wait(&node->sw.io_wake, &pp__wait_ec_mode, seen, NULL);
            continue;
        }
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += PP__SYNC_IDLE_NS / 1000000000L;
        if (ck_ec32_wait(&node->sw.io_wake, &pp__wait_ec_mode, seen, &deadline) != 0) {
            /* idle since: start writeback, give back what no load took */
            if (written != node->sw.synced) {
                node->sw.synced = written;
                (void)pool->dev->sync(pool->dev, node->index);
            }
            if (kept)
                pp__xfer_spares_free(node);
        }
    }
    return NULL;
}

int pp__swapper_start(pp_pool_t *pool)
{
    if (!pool->swap)
        return 0;
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        ck_stack_init(&node->sw.load_q);
        ck_ec32_init(&node->sw.io_wake, 0);
        ck_ec32_init(&node->sw.io_done, 0);
        node->sw.st = pp__thread_new_reclaimer(pool);
        if (node->sw.st == NULL)
            return PP_ENOMEM;
        if (pthread_create(&node->sw.io_thread, NULL, swap_main, node) != 0)
            return PP_ENOMEM;
        node->sw.io_started = true;
    }
    return 0;
}

void pp__swapper_stop(pp_pool_t *pool)
{
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->sw.io_started)
            continue;
        /* release: everything the pool's users did happens before the swap
         * thread's last round. */
        pp__atomic_store_release(&node->sw.io_stop, 1);
        ck_ec32_inc(&node->sw.io_wake, &pp__wait_ec_mode);
    }
    for (unsigned n = 0; n < pool->nnodes; n++) {
        pp__node_t *node = pool->nodes[n];
        if (node == NULL || !node->sw.io_started)
            continue;
        pthread_join(node->sw.io_thread, NULL);
        node->sw.io_started = false;
    }
}
