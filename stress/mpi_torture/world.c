/*
 * world.c -- where the MPI torture's ranks live: threads of this process
 * over the in-process transport (delays, reordering and duplicates from
 * the seed; TSan sees everything), or MPI processes; and the channel that
 * carries the program's own messages (tokens) between ranks, FIFO per
 * sender, as a scheduler's would.
 */
#include "mpi_torture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"       /* pp__layer_create_on: the layer over any transport */
#include "transport_inproc.h"   /* tests/mpi/support: ranks as threads */

struct chan {
    bool mpi;
    MPI_Comm comm;                         /* MPI: the program's own */
    struct box {                           /* in-process: one per rank */
        pthread_mutex_t mu;
        tmsg_t *m;
        int *src;
        size_t head, n, cap;
    } box[MAX_RANKS];
};

#define TMSG_TAG 77

int chan_send(chan_t *ch, int src, int dst, const tmsg_t *m)
{
    if (ch->mpi)
        return MPI_Send(m, (int)sizeof *m, MPI_BYTE, dst, TMSG_TAG, ch->comm) == MPI_SUCCESS ? 0
                                                                                           : -1;
    struct box *b = &ch->box[dst];
    pthread_mutex_lock(&b->mu);
    if (b->head + b->n == b->cap) {
        if (b->head != 0) {
            memmove(b->m, b->m + b->head, b->n * sizeof *b->m);
            memmove(b->src, b->src + b->head, b->n * sizeof *b->src);
            b->head = 0;
        }
        if (b->n == b->cap) {
            size_t cap = b->cap ? 2 * b->cap : 64;
            b->m = realloc(b->m, cap * sizeof *b->m);
            b->src = realloc(b->src, cap * sizeof *b->src);
            b->cap = cap;
        }
    }
    b->m[b->head + b->n] = *m;
    b->src[b->head + b->n] = src;
    b->n++;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

bool chan_room(chan_t *ch, int dst)
{
    if (ch->mpi)
        return true;
    struct box *b = &ch->box[dst];
    pthread_mutex_lock(&b->mu);
    bool room = b->n < CHAN_ROOM;
    pthread_mutex_unlock(&b->mu);
    return room;
}

int chan_recv(chan_t *ch, int rank, tmsg_t *m, int *src)
{
    if (ch->mpi) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        if (MPI_Improbe(MPI_ANY_SOURCE, TMSG_TAG, ch->comm, &flag, &msg, &st) != MPI_SUCCESS ||
            !flag)
            return 0;
        if (MPI_Mrecv(m, (int)sizeof *m, MPI_BYTE, &msg, &st) != MPI_SUCCESS)
            return 0;
        *src = st.MPI_SOURCE;
        return 1;
    }
    struct box *b = &ch->box[rank];
    pthread_mutex_lock(&b->mu);
    int got = b->n != 0;
    if (got) {
        *m = b->m[b->head];
        *src = b->src[b->head];
        b->head++;
        b->n--;
    }
    pthread_mutex_unlock(&b->mu);
    return got;
}

/* One rank's life once its pool and layer exist. */
static void rank_life(rank_t *R)
{
    rank_register(R);
    rank_run(R);
    pp_mpi_stats_t st;
    pp_mpi_stats(R->m, &st);
    int rc = pp_mpi_destroy(R->m);
    if (rc != 0)
        failf(R->rank, "pp_mpi_destroy: %s", pp_err_name(rc));
    rank_check_empty(R);
    rc = pp_pool_destroy(R->pool);
    if (rc != 0)
        failf(R->rank, "pp_pool_destroy: %s", pp_err_name(rc));
    rank_final_checks(R);
    rank_summary(R, &st);
}

static void *rank_thread(void *arg)
{
    rank_life(arg);
    return NULL;
}

int run_inproc(void)
{
    static rank_t R[MAX_RANKS];
    static chan_t ch;
    int n = g_opt.ranks;
    pp__inproc_chaos_t chaos = { g_opt.seed, g_opt.delay, g_opt.dup };
    pp__inproc_world_t *w;
    if (pp__inproc_world_create(n, &chaos, &w) != 0)
        return 1;
    for (int r = 0; r < n; r++)
        pthread_mutex_init(&ch.box[r].mu, NULL);
    for (int r = 0; r < n; r++) {
        R[r].ch = &ch;
        if (rank_setup(&R[r], r, n) != 0 ||
            pp__layer_create_on(pp__inproc_rank(w, r), false, R[r].pool, &R[r].m) != 0)
            return 1;
    }
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < n; r++)
        pthread_create(&th[r], NULL, rank_thread, &R[r]);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    /* a duplicate the transport made of a message already counted may
     * still be in flight: not a failure */
    size_t left = pp__inproc_world_destroy(w);
    if (left != 0 && g_opt.dup == 0)
        failf(-1, "%zu message(s) still in flight after destroy", left);
    for (int r = 0; r < n; r++) {
        free(ch.box[r].m);
        free(ch.box[r].src);
        free((void *)R[r].frees);
    }
    return 0;
}

int run_mpi(int *argc, char ***argv)
{
    int provided = 0, rank = 0, size = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS ||
        provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "mpi_torture: MPI_THREAD_MULTIPLE is needed (got %d)\n", provided);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static rank_t R;
    static chan_t ch;
    ch.mpi = true;
    MPI_Comm_dup(MPI_COMM_WORLD, &ch.comm);
    R.ch = &ch;
    int rc = size > MAX_RANKS ? 1 : rank_setup(&R, rank, size);
    if (rc == 0)
        rc = pp_mpi_create(MPI_COMM_WORLD, R.pool, &R.m);
    if (rc != 0) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, pp_err_name(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rank_life(&R);
    int mine = atomic_load(&g_failed), any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    free((void *)R.frees);
    MPI_Comm_free(&ch.comm);
    MPI_Finalize();
    if (any)
        atomic_store(&g_failed, 1);
    return 0;
}
