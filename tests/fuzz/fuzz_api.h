/*
 * fuzz_api.h -- what the files of the fuzz_api target share: limits, the
 * failure checks, the input reader, the model of the pool, the checks of
 * entries and statistics, and the ops.  The input format is in fuzz_api.c.
 */
#ifndef PINPOOL_TESTS_FUZZ_API_H
#define PINPOOL_TESTS_FUZZ_API_H

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "testing/testhooks.h"   /* pinpool.h, and the test hooks pp__* */

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */
/* ------------------------------------------------------------------------ */

#define MAX_OPS       64
#define MAX_ENTS      64            /* puts per input (one per op at most) */
#define MAX_MANY      15            /* refs in one pin_many / unpin_many */
#define MAX_ALIASES   32
#define LIMIT_BIG     ((size_t)64 << 10)
#define LIMIT_SMALL   ((size_t)16 << 10)
#define SWAP_LIMIT    ((uint64_t)48 << 10)
#define REAL_MAX      (LIMIT_BIG + 1)   /* larger sizes are not allocated (see lie) */
#define LIE_BYTES     16
#define REC_MAX       8192
#define DRAIN_MS      10000

extern const char *const TOPO2;
extern const char *const TOPO1;

/* ------------------------------------------------------------------------ */
/* Failing                                                                   */
/* ------------------------------------------------------------------------ */

extern int g_opno;
extern const char *g_opname;
extern bool g_trace;

__attribute__((format(printf, 1, 2), noreturn))
void fail(const char *fmt, ...);

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            fail(__VA_ARGS__);                                                 \
    } while (0)

__attribute__((format(printf, 1, 2)))
void trace(const char *fmt, ...);

/* Allowed return codes as a bit set: bit k is -k (bit 0 is PP_OK). */
#define A_OK  (1u << 0)
#define A(e)  (1u << (unsigned)(-(PP_##e)))

extern __thread bool t_caller;
extern atomic_int g_fault_left;
bool fault_fn(size_t size, void *ctx);
bool fault_fired(void);
void check_rc_set(const char *call, int rc, unsigned allowed, bool fault_widens);
void check_rc(const char *call, int rc, unsigned allowed);

/* ------------------------------------------------------------------------ */
/* Input                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd_t;

uint8_t u8(rd_t *r);
uint32_t u32(rd_t *r);
uint64_t u64(rd_t *r);

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

uint64_t mix64(uint64_t z);
void fill(void *p, size_t n, uint64_t seed);
size_t verify(const void *p, size_t n, uint64_t seed);

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

enum kind {
    K_NULL,          /* type NULL: flat, free() */
    K_FLAT,          /* a named type with no functions: the same */
    K_FREE,          /* own free, no save/load: never evicted */
    K_CUSTOM,        /* free + save + load */
    K_NOSWAP,        /* PP_TYPE_NOSWAP, free() */
    K_REFUSE,        /* save always refuses: never evicted */
    K_CUSTOM_NOSWAP, /* free + save + load, PP_TYPE_NOSWAP */
    K_BAD,           /* save without load or load without save: PP_EINVAL */
    K_COUNT
};

extern const pp_type_t T_FLAT;
extern const pp_type_t T_FREE;
extern const pp_type_t T_CUSTOM;
extern const pp_type_t T_NOSWAP;
extern const pp_type_t T_REFUSE;
extern const pp_type_t T_CUSTOM_NOSWAP;
extern const pp_type_t T_BAD_SAVE;
extern const pp_type_t T_BAD_LOAD;
bool kind_counted(int k);
bool kind_unswappable(int k);

/* ------------------------------------------------------------------------ */
/* Allocation registry: every buffer handed to a counting free function      */
/* ------------------------------------------------------------------------ */

typedef struct rec {
    void *p;
    size_t size;       /* the entry's size (what free and save are given) */
    size_t alloc;      /* bytes allocated */
    int ent;
    bool freed;
} rec_t;

extern pthread_mutex_t g_mu;
extern rec_t g_recs[REC_MAX];
extern int g_nrecs;
extern uint64_t g_seed_of[MAX_ENTS];
extern atomic_ulong g_free_calls, g_saves, g_loads;
void rec_add(void *p, size_t size, size_t alloc, int ent);
void rec_forget(void *p);

/* ------------------------------------------------------------------------ */
/* Reports (options.report)                                                  */
/* ------------------------------------------------------------------------ */

extern atomic_int g_reports;
void report_cb(const char *line, void *ctx);
void reports_expect(int *mark, int want, const char *why);

/* ------------------------------------------------------------------------ */
/* The model                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct ent {
    pp_ref_t ref;
    size_t size;          /* as given to pp_put */
    size_t bytes;         /* bytes really there (size, or LIE_BYTES for a lie) */
    int kind;
    const pp_type_t *type;
    unsigned node;
    uint32_t owners, pins;
    bool escaped, ever_write, gone, freed_known, lie;
    uint64_t seed;
    void *pin_ptr;        /* the data pointer while pins > 0 (NULL: not seen) */
    void *esc_ptr;        /* from pp_get */
    uint64_t esc_qsbr;    /* g_qsbr_epoch when esc_ptr was got in QSBR mode, else 0 */
} ent_t;

/* A scope of the input (pp_scope_t): its state and its ledger, the refs
 * pinned through it in the order src/api/scope.c keeps them (appended; an
 * early unpin moves the last one into the place of the one it drops), so
 * that pp_scope_end drops them, and forgets PP_TRACK_PINS records, in the
 * order the pool does.  Its pins are pins of the entries (ent_t.pins) like
 * any other; the ledger only says which of them the scope drops. */
#define NSCOPES    2
#define LEDGER_MAX (MAX_OPS * MAX_MANY + 64)

enum { SC_ZERO, SC_OPEN, SC_NOPOOL, SC_ENDED };   /* SC_ZERO: never initialized */

typedef struct mscope {
    int state;            /* SC_NOPOOL: initialized with a NULL pool */
    uint32_t n;           /* refs in the ledger */
    uint32_t cap;         /* its room: PP_SCOPE_INLINE, then the heap's (doubling) */
    pp_ref_t led[LEDGER_MAX];
} mscope_t;

extern const char *const sc_names[];

typedef struct trk {      /* PP_TRACK_PINS records, as track.c keeps them */
    pp_ref_t ref;
    uint64_t reg;         /* registration that pinned; 0 once reported */
} trk_t;

/* The model of the running input. */
struct model {
    /* configuration */
    int mode;
    bool swap, track, compress;
    size_t limit;
    uint64_t swap_limit;
    const char *topology;
    unsigned nnodes;
    char swapdir[256];

    pp_pool_t *pool;
    ent_t e[MAX_ENTS];
    int n;
    pp_ref_t issued[MAX_ENTS + MAX_OPS];   /* every ref ever handed out */
    int nissued;
    pp_ref_t alias[MAX_ALIASES];           /* refs replaced by set_gen */
    int nalias;

    /* per node counters as pp_pool_stats must show them */
    uint64_t puts[2], pins[2], unpins[2], retains[2], releases[2], gets[2], gone[2];

    bool qsbr;
    uint64_t qsbr_epoch;
    uint64_t reg;                          /* current registration number */
    trk_t *trk;
    size_t ntrk, ctrk;
    bool overflow_ok, overflow_done;
    uint64_t helper_reg;                   /* registrations of helper threads */
    int report_mark;
    mscope_t sc[NSCOPES];
};
extern struct model M;
extern pp_scope_t g_scope[NSCOPES];
extern pp_ref_t g_big[4096];
bool ent_dead(const ent_t *x);
int classify(pp_ref_t ref);
bool forced_resident(const ent_t *x);
uint64_t bytes_live(void);
uint64_t bytes_dying(void);
bool any_lie(void);
bool room_certain(uint64_t extra);
void node_count(uint64_t *arr, pp_ref_t ref, uint64_t k);
void ent_gone(ent_t *x);
void trk_add(pp_ref_t ref);
void trk_del(pp_ref_t ref);

/* ------------------------------------------------------------------------ */
/* Picking refs                                                              */
/* ------------------------------------------------------------------------ */

pp_ref_t pick_ref(rd_t *r);

/* ------------------------------------------------------------------------ */
/* Checks of one entry                                                       */
/* ------------------------------------------------------------------------ */

void check_bytes(const ent_t *x, const void *p, const char *how);
void rewrite(ent_t *x, void *p);
void pinned(ent_t *x, void *p, unsigned flags);
void unpinned(ent_t *x);
void check_gone_info(const ent_t *x, const pp_entry_info_t *in);
void check_info(const ent_t *x, const pp_entry_info_t *in);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

void check_stats(bool final);
void check_all_entries(void);

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

extern char g_swapbase[256];
void at_exit_cleanup(void);
void check_after_destroy(void);

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

enum op {
    OP_PUT, OP_PIN, OP_UNPIN, OP_RETAIN, OP_RELEASE, OP_GET, OP_STAT, OP_PREFETCH,
    OP_PIN_MANY, OP_UNPIN_MANY, OP_QUIESCENT, OP_STATS, OP_DRAIN, OP_THREAD_EXIT,
    OP_TOUCH, OP_MISC, OP_SET_OWNERS, OP_SET_GEN, OP_OVERFLOW, OP_DESTROY, OP_SLEEP,
    OP_FAULT, OP_THREAD, OP_SCOPE, OP_COUNT
};

extern const char *const op_names[OP_COUNT];
int op_of(uint8_t b);
void op_put(rd_t *r);
unsigned pin_allowed(int i, unsigned flags, uint32_t taken, uint64_t extra);
void op_pin(rd_t *r);
void op_unpin(rd_t *r);
void op_retain(rd_t *r);
void do_release(pp_pool_t *pool, pp_ref_t ref);
void op_release(rd_t *r);
void op_get(rd_t *r);
void op_stat(rd_t *r);
void op_prefetch(rd_t *r);
unsigned pin_many_allowed(const pp_ref_t *refs, const int *idx, size_t n,
                          unsigned flags);
void pinned_many(const pp_ref_t *refs, const int *idx, size_t n, unsigned flags,
                 void *const *ptrs);

/* The arguments of a pin_many, pp_pin_many's or pp_scope_pin_many's: a
 * count byte, a flags byte, the refs.  (fl & 0x38) == 0x38: the call's
 * first argument (pool or scope) is NULL; *fl: the flags byte. */
typedef struct many_args {
    size_t n;
    bool refs_null, data_null, first_null;
    unsigned flags;
    uint8_t fl;
    pp_ref_t refs[MAX_MANY];
    int idx[MAX_MANY];
} many_args_t;

void read_many(rd_t *r, many_args_t *a);
void op_pin_many(rd_t *r);
void op_unpin_many(rd_t *r);
void op_quiescent(rd_t *r);
void op_stats(rd_t *r);
void op_drain(rd_t *r);
void op_thread_exit(rd_t *r);
void op_touch(rd_t *r);
void op_misc(rd_t *r);
void op_set_owners(rd_t *r);
void op_set_gen(rd_t *r);
void op_overflow(rd_t *r);

/* ------------------------------------------------------------------------ */
/* Scopes                                                                    */
/* ------------------------------------------------------------------------ */

void scopes_end_open(const char *why);
void op_scope(rd_t *r);
bool op_destroy(rd_t *r);

#endif
