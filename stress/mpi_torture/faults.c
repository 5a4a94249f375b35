/*
 * faults.c -- the MPI torture's failing loads (--load-faults N, with
 * --mem-limit and --swap): every rank's pool runs on the fault device of
 * tests/support/faultdev.h, and one in N of its device calls goes wrong
 * (reads: an I/O error, a missing copy, a flipped bit; writes and syncs
 * too, which the pool absorbs).  A pin whose load fails, on its home or
 * from another rank (the home's load, reported back), gets PP_EIO or
 * PP_ECORRUPT: that is counted, and the program pins again until a pin
 * succeeds -- the swap copy must still be there.  The pool's reports of
 * such faults ("pinpool: swap: ...") are counted, not failures.
 */
#include "mpi_torture.h"

#include <stdio.h>
#include <string.h>

#include "../../tests/support/faultdev.h"   /* the fault-injecting swap device */
#include "../common/content.h"              /* mix3 */

#define RETRIES 1000   /* pins of one ref after a failed load, before giving up */

int faults_pool_create(rank_t *R, const pp_options_t *opt)
{
    faultdev_t *fd = faultdev_new();
    if (fd == NULL)
        return PP_ENOMEM;
    faultdev_random(fd, g_opt.load_faults, mix3(g_opt.seed, (uint64_t)R->rank, 0x10adfa17ull));
    R->fd = fd;
    return faultdev_pool_create(opt, fd, &R->pool);   /* the pool owns fd, also on failure */
}

bool faults_report(rank_t *R, const char *line)
{
    if (g_opt.load_faults == 0 || strncmp(line, "pinpool: swap: ", 15) != 0)
        return false;
    atomic_fetch_add(&R->fault_reports, 1);
    return true;
}

bool faults_load_failed(rank_t *R, int rc, bool remote)
{
    if (g_opt.load_faults == 0 || (rc != PP_EIO && rc != PP_ECORRUPT))
        return false;
    atomic_fetch_add(remote ? &R->remote_load_errors : &R->home_load_errors, 1);
    return true;
}

int faults_pin_again(rank_t *R, int rc, pp_gref_t g, unsigned flags, void **d, uint32_t *got)
{
    if (g_opt.load_faults == 0 || (rc != PP_EIO && rc != PP_ECORRUPT))
        return rc;
    bool remote = g.rank != (uint32_t)R->rank;
    for (int k = 0; k < RETRIES && (rc == PP_EIO || rc == PP_ECORRUPT); k++) {
        atomic_fetch_add(remote ? &R->remote_load_errors : &R->home_load_errors, 1);
        rc = pp_mpi_pin(R->m, g, flags & ~PP_PIN_NOWAIT, d, got);
    }
    if (rc == 0)
        atomic_fetch_add(remote ? &R->remote_later_ok : &R->home_later_ok, 1);
    return rc;
}

int faults_pin_many_again(rank_t *R, int rc, const pp_gref_t *g, size_t n, unsigned flags,
                          void **d, uint32_t *got)
{
    if (g_opt.load_faults == 0 || (rc != PP_EIO && rc != PP_ECORRUPT))
        return rc;
    bool remote = false;
    for (size_t i = 0; i < n; i++)
        remote |= g[i].rank != (uint32_t)R->rank;
    for (int k = 0; k < RETRIES && (rc == PP_EIO || rc == PP_ECORRUPT); k++) {
        atomic_fetch_add(remote ? &R->remote_load_errors : &R->home_load_errors, 1);
        rc = pp_mpi_pin_many(R->m, g, n, flags & ~PP_PIN_NOWAIT, d, got);
    }
    if (rc == 0)
        atomic_fetch_add(remote ? &R->remote_later_ok : &R->home_later_ok, 1);
    return rc;
}

void faults_pool_closing(rank_t *R)
{
    if (R->fd != NULL)
        R->injected = faultdev_injected(R->fd);
    R->fd = NULL;   /* the pool's destroy frees it */
}

void faults_summary(rank_t *R)
{
    if (g_opt.load_faults == 0)
        return;
    printf("rank %d: load faults: %llu device faults injected; %llu remote pins got a failed "
           "load of their home (a later pin got the bytes %llu times), %llu pins at home got "
           "one (later: %llu); %llu fault reports\n",
           R->rank, (unsigned long long)R->injected,
           (unsigned long long)atomic_load(&R->remote_load_errors),
           (unsigned long long)atomic_load(&R->remote_later_ok),
           (unsigned long long)atomic_load(&R->home_load_errors),
           (unsigned long long)atomic_load(&R->home_later_ok),
           (unsigned long long)atomic_load(&R->fault_reports));
}
