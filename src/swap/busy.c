/*
 * busy.c -- the swap device's busy time per node and direction
 * (pp_node_stats_t.swap_write_ns, swap_read_ns): the time at least one
 * request of that direction is with the device.  A request counts from
 * its start (the thread engine, swap.c) or its queueing on the ring
 * (io_uring, xfer.c) to its result, so that bytes over busy time is the
 * rate the device gave while it worked, however many requests overlap.
 *
 * A lock per node keeps the count of requests there and the start of the
 * interval together; it is taken on the I/O path only, never by a pin.
 */
#include <string.h>

#include "swap/swap.h"

int pp__busy_init(pp__node_t *node)
{
    memset(node->sw.busy_n, 0, sizeof node->sw.busy_n);
    memset(node->sw.busy_ns, 0, sizeof node->sw.busy_ns);
    return pthread_mutex_init(&node->sw.busy_lock, NULL) == 0 ? 0 : PP_ENOMEM;
}

void pp__busy_destroy(pp__node_t *node) { pthread_mutex_destroy(&node->sw.busy_lock); }

void pp__busy_mark(pp__node_t *node, bool write, bool start)
{
    unsigned d = write;
    pthread_mutex_lock(&node->sw.busy_lock);
    uint64_t now = pp__wait_now_ns();
    if (start) {
        if (node->sw.busy_n[d]++ == 0)
            node->sw.busy_since[d] = now;
    } else {
        PP__CHECK(node->sw.busy_n[d] > 0);
        if (--node->sw.busy_n[d] == 0)
            node->sw.busy_ns[d] += now - node->sw.busy_since[d];
    }
    pthread_mutex_unlock(&node->sw.busy_lock);
}

uint64_t pp__busy_ns(pp__node_t *node, bool write)
{
    unsigned d = write;
    pthread_mutex_lock(&node->sw.busy_lock);
    uint64_t ns = node->sw.busy_ns[d];
    if (node->sw.busy_n[d] > 0)
        ns += pp__wait_now_ns() - node->sw.busy_since[d];
    pthread_mutex_unlock(&node->sw.busy_lock);
    return ns;
}
