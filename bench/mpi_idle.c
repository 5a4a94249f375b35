/*
 * mpi_idle.c -- what an idle MPI layer costs in CPU.
 *
 *   mpiexec --allow-run-as-root --oversubscribe -np 2 build/default/bench/mpi_idle [seconds]
 *
 * Each rank measures its process's CPU time (getrusage: user + system)
 * over the same idle spell twice, in one run: first with MPI alone (the
 * baseline: what the library and its own threads cost when nothing
 * happens), then with a pinpool pool and an MPI layer whose progress
 * thread has nothing to do.  It prints both and the layer's share, per
 * rank, and the CPU model.  The spell ends with a barrier, so the idle
 * time is the same on every rank.
 */
#include <pinpool_mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "machine.h"

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) * 1e-6;
}

static double idle(double seconds)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double c0 = cpu_s();
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    nanosleep(&ts, NULL);
    double c1 = cpu_s();
    MPI_Barrier(MPI_COMM_WORLD);
    return c1 - c0;
}

int main(int argc, char **argv)
{
    int provided = 0, rank = 0, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    if (seconds <= 0)
        seconds = 3.0;
    double base = idle(seconds);
    pp_pool_t *pool = NULL;
    pp_mpi_t *m = NULL;
    pp_options_t opt = PP_OPTIONS_INIT;
    int rc = pp_pool_create(&opt, &pool);
    if (rc == 0)
        rc = pp_mpi_create(MPI_COMM_WORLD, pool, &m);
    if (rc != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, pp_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* one round trip first, so the idle spell starts after the layer has
     * worked (its progress thread then backs off to its idle sleep) */
    pp_gref_t g;
    void *buf = calloc(1, 4096);
    pp_mpi_put(m, buf, 4096, NULL, 0, &g);
    pp_gref_t all[64];
    MPI_Allgather(&g, (int)sizeof g, MPI_BYTE, all, (int)sizeof g, MPI_BYTE, MPI_COMM_WORLD);
    void *d;
    pp_gref_t other = all[(rank + 1) % size];
    if (size > 1 && size <= 64 && pp_mpi_pin(m, other, 0, &d, NULL) == 0)
        pp_mpi_unpin(m, other, 0, d);
    MPI_Barrier(MPI_COMM_WORLD);
    double with = idle(seconds);
    pp_mpi_release(m, g);
    pp_mpi_destroy(m);
    pp_pool_destroy(pool);
    double mine[2] = { base, with }, sums[2] = { 0, 0 };
    MPI_Reduce(mine, sums, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("rank %d: idle %.1f s: CPU %.3f s with MPI alone, %.3f s with the layer "
           "(the layer: %.3f s, %.2f%% of one CPU)\n",
           rank, seconds, base, with, with - base, 100.0 * (with - base) / seconds);
    if (rank == 0) {
        machine_t mach;
        machine_describe(&mach);
        machine_print(stdout, &mach, "machine: ");
        printf("%d ranks: the layers' idle CPU %.3f s in %.1f s (%.2f%% of one CPU "
               "per rank)\n",
               size, sums[1] - sums[0], seconds,
               100.0 * (sums[1] - sums[0]) / seconds / size);
    }
    MPI_Finalize();
    return 0;
}
