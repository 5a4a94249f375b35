/*
 * common.c -- what every file of the MPI layer uses: reports, the clock,
 * the test points, the command queue to the progress thread and its wake,
 * and the progress thread's sends.
 */
#include "layer.h"

#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- reports, time, the command queue ------------------------------------ */

void pp__common_report(pp_mpi_t *m, const char *fmt, ...)
{
    char line[256];
    int n = snprintf(line, sizeof line, "pinpool-mpi rank %d: ", m->rank);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    pp_pool_report(m->pool, line);
}

uint64_t pp__common_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if PP__TESTING
void pp__common_tp_run(pp_mpi_t *m, enum pp__mpi_tp where, void *arg)
{
    /* acquire: pairs with the test's release store of tp, after tp_ctx */
    pp__mpi_tp_fn fn = pp__atomic_load_acquire(&m->tp);
    if (fn != NULL)
        fn(m, where, arg, m->tp_ctx);
}
#endif

void pp__common_wake(pp_mpi_t *m)
{
    /* seq_cst bump and load: the store-load pair (the bump, then the load
     * of sleeping) against idle_sleep's (its store of sleeping, then its
     * load of wake).  Either the progress thread sees the new wake value
     * before it sleeps (its FUTEX_WAIT compares it), or it has set
     * sleeping before our load and we wake it.  The bump is also the
     * release the progress thread's acquire load of wake pairs with. */
    pp__atomic_add_seq_cst(&m->wake, 1);
    if (pp__atomic_load_seq_cst(&m->sleeping))
        syscall(SYS_futex, &m->wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int pp__common_command(pp_mpi_t *m, int kind, uint32_t rank, const pp__wire_return_t *rec,
                       pp__home_t *home)
{
    pp__cmd_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return PP_ENOMEM;
    c->kind = kind;
    c->rank = rank;
    if (rec != NULL)
        c->rec = *rec;
    c->home = home;
    pp__common_push(m, c);
    return 0;
}

void pp__common_push(pp_mpi_t *m, pp__cmd_t *c)
{
    c->next = NULL;
    pthread_mutex_lock(&m->cmd_mu);
    if (m->cmd_tail != NULL)
        m->cmd_tail->next = c;
    else
        m->cmd_head = c;
    m->cmd_tail = c;
    pthread_mutex_unlock(&m->cmd_mu);
    pp__common_wake(m);
}

/* ---- sends (progress thread) --------------------------------------------- */

/* A send on the transport, from the progress thread: counted for the FIN,
 * or reported, the first failure kept as the layer's error. */
int pp__common_send(pp_mpi_t *m, int dst, int tag, const void *hdr, size_t hlen,
                    const void *body, size_t blen, unsigned flags, pp__sent_fn done,
                    void *arg)
{
    int rc = m->t->ops->send(m->t, dst, tag, hdr, hlen, body, blen, flags, done, arg);
    if (rc == 0) {
        m->sent_to[dst]++;
    } else {
        pp__common_report(m, "send to rank %d failed: %s", dst,
                          m->t->err[0] ? m->t->err : pp_strerror(rc));
        if (m->progress_err == 0)
            m->progress_err = rc == PP_EINVAL ? PP_EIO : rc;
    }
    return rc;
}
