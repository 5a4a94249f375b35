/*
 * test_swap.h -- what the files of the swap suite (test_swap_*.c) share:
 * contents derived from a seed, pools with swap, and a type with
 * save/load.  The code is in test_swap_support.c.
 *
 * Eviction is made to happen when the test wants it, not when the swap
 * threads feel like it: sw_squeeze() puts a PP_TYPE_NOSWAP entry as large
 * as the memory limit minus what the test keeps pinned, which fits only
 * once every evictable entry is out; pp_put waits for the swap threads to
 * make that room (or fails with PP_ENOMEM when they cannot), so when it
 * returns 0 every unpinned swappable entry is SWAPPED and not RESIDENT.
 * The squeeze entry is then released and drained.  No sleeps anywhere.
 *
 * The swap threads' scheduling (CLOCK, racing pins, waits) is the evict
 * suite's concern (tests/test_evict_*.c); here the store is.
 */
#ifndef PINPOOL_TESTS_TEST_SWAP_H
#define PINPOOL_TESTS_TEST_SWAP_H

/* helpers.h defines rand_r in TSan builds: once per binary, in
 * test_swap_support.c. */
#ifndef SW_SUPPORT
#define HELPERS_NO_RAND_R 1
#endif
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "support/faultdev.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

/* Incompressible (fill_pattern) or compressible (runs of one byte value)
 * contents, both derived from a seed. */
typedef struct content {
    const char *name;
    void (*fill)(void *p, size_t n, uint64_t seed);
    bool (*check)(const void *p, size_t n, uint64_t seed);
} content_t;

extern const content_t RANDOM;
extern const content_t RUNS;

bool check_runs(const void *p, size_t n, uint64_t seed);
uint64_t seed_of(size_t i, unsigned version);

/* ------------------------------------------------------------------------ */
/* Pools with swap                                                           */
/* ------------------------------------------------------------------------ */

typedef struct sw {
    char dir[64];              /* swap_dir: a fresh directory, empty at the end */
    pp_pool_t *pool;
    faultdev_t *fd;            /* the fault device, or NULL (the file device) */
    size_t limit;
    unsigned nodes;
    report_cap_t rep;          /* the pool's reports (kept off stderr) */
} sw_t;

/* Built twice: test_swap (suite swap), and test_swap_direct (suite
 * swap_direct), which defines PP_TEST_POOL_FLAGS=PP_SWAP_DIRECT, so that
 * every pool made here -- through test_pool_create or faultdev_pool_create
 * -- uses direct I/O, every fault case included. */
#ifdef PP_TEST_SUITE
#define SW_SUITE PP_TEST_SUITE
#else
#define SW_SUITE swap
#endif
#ifdef PP_TEST_POOL_FLAGS
#define SW_DIRECT ((PP_TEST_POOL_FLAGS & PP_SWAP_DIRECT) != 0)
#else
#define SW_DIRECT false
#endif

size_t dir_count(const char *path);
uint64_t dev_bytes(uint64_t n);
void sw_open(sw_t *s, size_t mem_limit, uint64_t swap_limit, unsigned flags, bool fault);
void sw_close(sw_t *s);
int sw_squeeze(sw_t *s, size_t keep);
void sw_stats(sw_t *s, pp_stats_t *st);
void assert_swapped(sw_t *s, pp_ref_t ref, const char *what);
void assert_resident_no_copy(sw_t *s, pp_ref_t ref, const char *what);
pp_ref_t put_flat(pp_pool_t *pool, size_t size, const pp_type_t *type, const content_t *c,
                  uint64_t seed, unsigned flags);
void pin_check(pp_pool_t *pool, pp_ref_t ref, size_t size, const content_t *c, uint64_t seed);
void pin_rewrite(pp_pool_t *pool, pp_ref_t ref, size_t size, const content_t *c,
                 uint64_t old_seed, uint64_t new_seed);
void release_all(pp_pool_t *pool, const pp_ref_t *refs, size_t n);
void flip_byte(sw_t *s, pp_ref_t ref, uint64_t at);

/* ------------------------------------------------------------------------ */
/* A type with save/load: a struct with an out-of-line buffer                */
/* ------------------------------------------------------------------------ */

#define BLOB_MAGIC 0x626c6f6221626c6full

typedef struct blob {
    uint64_t magic;
    size_t n;
    uint64_t seed;
    unsigned char *bytes;                /* n bytes of content(seed) */
} blob_t;

/* The type and what its functions saw (they run on pool threads). */
typedef struct bt {
    pp_type_t type;                      /* type.ctx == this */
    const content_t *content;
    atomic_int fail_save, fail_load;     /* make save / load return nonzero */
    atomic_int save_calls, load_calls;
    atomic_int saves, loads;             /* successful ones */
    atomic_int frees, frees_reclaimer, frees_main;
    atomic_int write_fail_rc;            /* first failure of pp_write but PP_EAGAIN */
    atomic_int bad;                      /* a check inside save/load/free failed */
    const char *_Atomic why;             /* the first such check */
    atomic_int reclaimer_tid[PP_MAX_NODES];
    int main_tid;
} bt_t;

#define BT_OK(bt)                                                              \
    cr_assert_eq(atomic_load(&(bt)->bad), 0, "blob type: %d bad; first: %s",   \
                 atomic_load(&(bt)->bad), atomic_load(&(bt)->why))

int blob_save(const void *data, size_t size, pp_writer_t *w, void *ctx);
int blob_load(void **data, size_t size, pp_reader_t *r, void *ctx);
bt_t *bt_new(const content_t *c);
void bt_note_reclaimers(bt_t *bt, pp_pool_t *pool);
pp_ref_t blob_put(pp_pool_t *pool, bt_t *bt, size_t n, uint64_t seed);
bool blob_ok(const bt_t *bt, const blob_t *b, size_t n, uint64_t seed);
void blob_pin_check(pp_pool_t *pool, bt_t *bt, pp_ref_t ref, size_t n, uint64_t seed);
void blob_pin_rewrite(pp_pool_t *pool, bt_t *bt, pp_ref_t ref, size_t n, uint64_t old_seed,
                      uint64_t new_seed);

#endif
