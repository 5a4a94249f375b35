/*
 * stress/torture/faults.c -- the torture's fault injection (--faults N):
 * the allocation fault hook of the pool (pp__alloc_fault_hook), and with
 * --swap the fault device of tests/support/faultdev.h under the pool (the
 * real file device, with 1 in N writes, reads and syncs going wrong).
 * Only this file sees the device.
 */
#include "torture.h"

#include <stdlib.h>

#include "../../tests/support/faultdev.h"   /* --faults: the fault-injecting swap device */
#include "testing/testhooks.h"   /* pp__alloc_fault_hook, pp__pool_create_dev */

_Atomic int g_faults_armed;
_Atomic uint64_t g_alloc_calls, g_alloc_faults;

static faultdev_t *g_fd;            /* the fault device (--faults with --swap) */

/* The allocation fault hook (--faults): once armed, 1 allocation in
 * g_faults fails, decided by the seed and a call counter. */
bool alloc_fault(size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (!atomic_load_explicit(&g_faults_armed, memory_order_relaxed))
        return false;
    uint64_t n = atomic_fetch_add_explicit(&g_alloc_calls, 1, memory_order_relaxed) + 1;
    if (mix3(g_seed, n, 0xA110CFA17ull) % g_faults != 0)
        return false;
    atomic_fetch_add_explicit(&g_alloc_faults, 1, memory_order_relaxed);
    return true;
}

/* Creates g_pool (with --faults and --swap on the fault device), then
 * sets the allocation fault hook; the pool's error (exits 2 if out of
 * memory). */
int pool_create(const pp_options_t *opt)
{
    int rc;
    if (g_faults && g_swap) {
        /* The file device under a wrapper that injects random faults. */
        g_fd = faultdev_new();
        if (g_fd == NULL) {
            fprintf(stderr, "torture: out of memory\n");
            exit(2);
        }
        faultdev_random(g_fd, g_faults, mix3(g_seed, 0xDE7, 0xFA17));
        rc = pp__pool_create_dev(opt, &g_fd->dev, &g_pool);
    } else {
        rc = pp_pool_create(opt, &g_pool);
    }
    if (g_faults)
        pp__alloc_fault_hook(alloc_fault, NULL);
    return rc;
}

int faults_on_device(void)
{
    return g_fd != NULL;
}

unsigned long faults_injected(void)
{
    return faultdev_injected(g_fd);
}

void faults_off(void)
{
    atomic_store(&g_faults_armed, 0);
    if (g_fd != NULL)
        faultdev_random(g_fd, 0, 0);
}

uint64_t faults_io_errors(void)
{
    return atomic_load(&g_fd->write_fails) + atomic_load(&g_fd->read_fails);
}

unsigned long faults_read_corrupt(void)
{
    return atomic_load(&g_fd->inj_read_corrupt);
}

void faults_counts(unsigned long inj[7])
{
    if (g_fd == NULL)
        return;
    inj[0] = atomic_load(&g_fd->inj_write_eio);
    inj[1] = atomic_load(&g_fd->inj_write_enospc);
    inj[2] = atomic_load(&g_fd->inj_write_short);
    inj[3] = atomic_load(&g_fd->inj_read_eio);
    inj[4] = atomic_load(&g_fd->inj_read_missing);
    inj[5] = atomic_load(&g_fd->inj_read_corrupt);
    inj[6] = atomic_load(&g_fd->inj_sync);
    g_fd = NULL;
}
