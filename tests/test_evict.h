/*
 * test_evict.h -- what the files of the evict suite (test_evict_*.c)
 * share: pools on the fault device, entry contents, a swappable counting
 * type, state checks and a thread for calls that may block.
 *
 * Every pool here swaps through the fault-injecting device
 * (tests/support/faultdev.h).  Its gates freeze an eviction inside its
 * device write, or a load inside its device read, so each race is set up
 * by state -- "one write is blocked, this entry is EVICTING" -- and never
 * by sleeping.  Polls that wait for the swap threads use WAIT_UNTIL
 * (sched_yield between polls, bounded only to turn a hang into a failure).
 *
 * Most tests put their entries on node 0 (PP_ON_NODE(0)): one swap thread
 * then owns every eviction, which makes the order of evictions (CLOCK from
 * slot 0, puts do not set the recency bit) and the level they stop at
 * deterministic on both topologies the suite runs on.
 */
#ifndef PINPOOL_TESTS_TEST_EVICT_H
#define PINPOOL_TESTS_TEST_EVICT_H

/* helpers.h defines rand_r in TSan builds: once per binary, in
 * test_evict_support.c. */
#ifndef EV_SUPPORT
#define HELPERS_NO_RAND_R 1
#endif
#include "helpers.h"
#include "support/swaptest.h"
#include "support/faultdev.h" /* faultdev_*; testhooks.h: pp__pool_is_valid */

#include <dirent.h>
#include <sys/syscall.h>

#define PAGE 4096u
#define SMALL_LIMIT (16u * PAGE)                  /* 16 one-page entries */
#define HIGH_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 16)
#define LOW_WM(l) ((uint64_t)(l) - (uint64_t)(l) / 8)
#define FILL_ID 0xF111u                           /* content id of fillers */

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

pp_pool_t *ev_pool(size_t limit, const char *topology, faultdev_t **fd);
bool all_freed(pp_pool_t *pool);
void ev_finish(pp_pool_t *pool, const pp_ref_t *refs, size_t n);
int my_tid(void);

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

void buf_fill(void *p, size_t id, size_t size, uint64_t seed);
void *buf_new(size_t id, size_t size, uint64_t seed);
bool buf_check(const void *p, size_t id, size_t size, uint64_t seed);
pp_ref_t put_flat(pp_pool_t *pool, size_t id, size_t size, unsigned node, void **buf);

/* ------------------------------------------------------------------------ */
/* A swappable counting type (save/load/free)                               */
/* ------------------------------------------------------------------------ */

/*
 * ct_t (helpers.h) has no save/load, so the pool never evicts its entries.
 * sw_t does: save writes the bytes, load reads them into malloc'd memory.
 * It counts, per entry id, the buffers that exist (allocs: the put's and
 * each load's) and the free calls (an eviction frees the data too), so
 * frees == allocs at the end means every buffer was freed exactly once,
 * and frees > allocs at any moment is a double free.  It also records the
 * thread that ran the last save and load.
 */
typedef struct sw {
    pp_type_t type;                      /* type.ctx == this */
    size_t cap;
    atomic_uint *allocs, *frees, *saves, *loads;
    atomic_int *save_tid, *load_tid;
    atomic_uint bad;                     /* bad header, size, id; double free */
} sw_t;

sw_t *sw_new(size_t cap);
void sw_check_delete(sw_t *sw, size_t n);
pp_ref_t put_sw(pp_pool_t *pool, sw_t *sw, size_t id, size_t size, unsigned node);

/* ------------------------------------------------------------------------ */
/* States                                                                    */
/* ------------------------------------------------------------------------ */

unsigned state_of(pp_pool_t *pool, pp_ref_t ref);
bool is_swapped_out(pp_pool_t *pool, pp_ref_t ref);
size_t find_one(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned bit);
void swap_out(pp_pool_t *pool, unsigned node, const pp_ref_t *targets, size_t n);

/* ------------------------------------------------------------------------ */
/* A helper thread for calls that may block                                  */
/* ------------------------------------------------------------------------ */

enum call_kind { CALL_PIN, CALL_PIN_MANY, CALL_GET };

typedef struct call {
    pp_pool_t *pool;
    faultdev_t *fd;
    pp_ref_t ref;
    enum call_kind kind;
    unsigned flags;
    int rc;
    void *data;
    bool gate_closed_at_return;          /* the device gate was still closed */
    test_sig_t done;                     /* 1 once the call returned */
} call_t;

void call_start(call_t *c, pthread_t *th, pp_pool_t *pool, faultdev_t *fd, pp_ref_t ref,
                enum call_kind kind, unsigned flags);
bool call_returned(call_t *c);
size_t freeze_eviction(pp_pool_t *pool, faultdev_t *f, pp_ref_t refs[16], void *bufs[16]);

#endif
