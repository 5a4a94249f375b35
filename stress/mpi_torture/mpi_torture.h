/*
 * mpi_torture.h -- what the MPI torture's files share (mpi_torture.c:
 * options, contents, the entry type, a rank's setup and checks; worker.c:
 * the workers' operations; world.c: ranks as threads, or MPI, and the
 * channel that carries tokens between ranks).
 */
#ifndef PP_MPI_TORTURE_H
#define PP_MPI_TORTURE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <pinpool_mpi.h>

#define MAX_RANKS   16
#define MAX_THREADS 16
#define MAX_IDS     (1u << 20)   /* entries one rank may put in a run */
#define MAX_OWNED   48           /* owners one worker holds at once */
#define CHAN_ROOM   512          /* tokens waiting for one rank, in-process */
#define ENT_MAGIC   0x746f727475726531ull
#define BOX_MAGIC   0x746f72626f783031ull
#define BOX_TYPE_ID 1u           /* the box type's id on every rank */

typedef struct opts {
    bool mpi;
    int ranks, threads;
    double seconds;
    uint64_t seed;
    size_t mem_limit;
    const char *swap;
    unsigned delay, dup;
    bool home_ops;               /* write batches and deaths under pins (worker.c) */
    unsigned load_faults;        /* --load-faults N: 1 device call in N fails (faults.c) */
} opts_t;
extern opts_t g_opt;
extern atomic_int g_failed;

/* An entry's first bytes; the rest is a function of (home, id, version). */
typedef struct ent_hdr {
    uint64_t magic;
    uint64_t id;
    uint32_t home;
    uint32_t version;
} ent_hdr_t;

/* A typed entry (a box): its contents live out of line, so its bytes are
 * not its data and it crosses ranks packed by the box type's save and
 * unpacked by its load.  bytes holds exactly what a flat entry of the
 * same home, id, version and size holds. */
typedef struct boxed {
    uint64_t magic;
    uint32_t home;
    uint32_t pad;
    uint64_t id;
    uint64_t size;               /* of bytes: the entry's size */
    unsigned char *bytes;
} box_t;

/* The contents a pin of an entry gives: a box's bytes, or the data. */
static inline const void *ent_bytes(const void *data, bool typed)
{
    return typed ? ((const box_t *)data)->bytes : data;
}

/* A token on its way to another rank, in the program's own message. */
typedef struct tmsg {
    uint32_t kind;               /* TMSG_TOKEN, TMSG_DONE */
    uint32_t version;            /* the sender's known version */
    uint32_t typed;              /* a box */
    uint32_t pad;
    uint64_t size;               /* the entry's bytes */
    uint64_t id;
    pp_mpi_token_t token;
} tmsg_t;
enum { TMSG_TOKEN = 1, TMSG_DONE = 2 };

typedef struct chan chan_t;       /* world.c */
int chan_send(chan_t *ch, int src, int dst, const tmsg_t *m);
/* false: rank dst has CHAN_ROOM messages waiting (in-process only), so a
 * sender holds back; its imports, a round trip each, must keep up. */
bool chan_room(chan_t *ch, int dst);
/* 1 and *m (and *src): a message for rank; 0: none now. */
int chan_recv(chan_t *ch, int rank, tmsg_t *m, int *src);

typedef struct rank {
    int rank, size;
    pp_pool_t *pool;
    pp_mpi_t *m;
    chan_t *ch;
    pp_type_t type, box_type;
    _Atomic unsigned *frees;     /* [MAX_IDS] */
    atomic_uint_fast64_t copy_loads, copy_frees;   /* boxes of other ranks: copies */
    atomic_uint_fast64_t put_ids;
    atomic_int reports;
    atomic_int dones;            /* DONE messages in (a worker may take one) */
    struct {
        uint64_t puts, pins, writes, sent, imported;
    } n;                         /* summed from the workers at the end */
    struct {                     /* --home-ops: the home side's own paths */
        atomic_uint_fast64_t batches, written;        /* write batches made, refs written */
        atomic_uint_fast64_t fail_stale, fail_remote, fail_busy;   /* failed batches, by cause */
        atomic_uint_fast64_t rolled_back;             /* write pins dropped by them */
        atomic_uint_fast64_t pinned_release, write_pinned_release;   /* owner released under a pin */
        atomic_uint_fast64_t died_pinned;             /* the record seen dead under the pin */
    } hx;
    /* --load-faults (faults.c) */
    struct faultdev *fd;         /* the pool's device (the pool owns it), until its destroy */
    uint64_t injected;           /* the faults it injected, counted before that */
    atomic_uint_fast64_t remote_load_errors, remote_later_ok;
    atomic_uint_fast64_t home_load_errors, home_later_ok, fault_reports;
} rank_t;

void failf(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void content_fill(void *data, size_t size, uint32_t home, uint64_t id, uint32_t version);
const char *content_check(const void *data, size_t size, uint32_t home, uint64_t id,
                          uint32_t version);
int rank_setup(rank_t *R, int rank, int size);
/* Once the layer exists: registers the box type. */
void rank_register(rank_t *R);
/* After the layer's destroy, before the pool's (also takes the fault
 * device's counts while it exists). */
void rank_check_empty(rank_t *R);
void rank_final_checks(rank_t *R);
void rank_summary(rank_t *R, pp_mpi_stats_t *st);

/* worker.c: runs the rank's workers for the run's time, then releases
 * everything they hold and drains the channel (DONE from every rank). */
void rank_run(rank_t *R);

/* faults.c: --load-faults.  The rank's pool on a fault device; whether a
 * report line is an expected fault's (counted); a failed pin's result
 * after pinning again while its load failed (PP_EIO, PP_ECORRUPT: counted
 * as remote or home); the summary line. */
int faults_pool_create(rank_t *R, const pp_options_t *opt);
bool faults_report(rank_t *R, const char *line);
/* rc is a load that failed for an injected fault: counted, true. */
bool faults_load_failed(rank_t *R, int rc, bool remote);
int faults_pin_again(rank_t *R, int rc, pp_gref_t g, unsigned flags, void **d, uint32_t *got);
int faults_pin_many_again(rank_t *R, int rc, const pp_gref_t *g, size_t n, unsigned flags,
                          void **d, uint32_t *got);
void faults_pool_closing(rank_t *R);   /* before pp_pool_destroy */
void faults_summary(rank_t *R);

/* world.c */
int run_inproc(void);
int run_mpi(int *argc, char ***argv);

#endif /* PP_MPI_TORTURE_H */
