/*
 * fuzz_api.c -- libFuzzer target of pinpool's public API.
 *
 * Each input is a small program: a configuration, then up to MAX_OPS op
 * records, run against a fresh pool.  The target keeps a model of every
 * ref the input created (owners, pins, dead or gone, escaped, contents)
 * and checks every call's return code against what include/pinpool.h
 * documents for that situation; where the header allows several outcomes
 * (a load that may find no room, a non-blocking pin of an entry that may
 * have been evicted) it accepts exactly the documented set.  Data read
 * under a pin must hold the bytes last written; data a type's save sees
 * and its load reads back are checked too; free functions must run once
 * per allocation, never on the calling thread.  Two scopes (pp_scope_t)
 * are modelled too: their state and ledger, pins through them counted as
 * the entries' pins in every other check.  At the end every open scope is
 * ended, every pin and owner dropped, the pool drained and its statistics
 * checked (no entry, no byte left), and the pool destroyed (its swap
 * directory must be gone).
 * Any disagreement prints "fuzz_api: FAIL: ..." and aborts.
 *
 * Input format (bytes; reading past the end gives zeros):
 *
 *   config  c0: bits 0-1 mode     0 no limit, 1 mem_limit 64 KiB without
 *                                 swap, 2 swap (64 KiB), 3 swap + LZ4
 *               bits 2-3 topology 0,1 "numa:2 pu:1" (2 nodes), 2 "pu:1",
 *                                 3 NULL (this machine)
 *               bit 4    PP_TRACK_PINS
 *               bit 5    swap_limit 48 KiB (swap modes)
 *               bit 6    mem_limit 16 KiB instead of 64 KiB
 *               bit 7    allows the (slow) overflow op
 *   ops     op byte (op_of: low 5 bits; 0-23 are enum op, 24-31 repeat
 *           common ops), then the op's arguments (see the op_* functions;
 *           tests/fuzz/make_corpus.py writes them).
 *
 *   op scope (23): a sub-op byte b, scope b & 1 (0 or 1), what (b >> 1) & 7:
 *     0 init      flags: bit 0 the plain function (no call site), bit 1 a
 *                 NULL pool; skipped if the scope is open
 *     1 pin       ref, flags as op pin (0x30 both set: a NULL scope)
 *     2 pin_many  count byte, flags, refs, as op pin_many (flags 0x38 all
 *                 set: a NULL scope)
 *     3 unpin     ref, byte ((b & 0x0f) == 0x0f: a NULL scope)
 *     4 end
 *     5 count
 *     6 zero      memset of the scope's memory; skipped if it is open
 *     7 misuse    ref: every call with a NULL scope
 *   After each, pp_scope_count of both scopes must match the model.  A
 *   single thread calls a scope at a time (op thread runs one op on a
 *   helper, then joins it), so PP_EINUSE is never allowed.
 *
 *   A ref argument is one selector byte s (pick_ref):
 *     s < 0xA0   the ref of model entry s % n (alive, dead or gone)
 *     0xA0-0xAF  a ref of an entry not gone (alive or dead but pinned)
 *     0xB0-0xBF  an entry's ref with generation + 1
 *     0xC0-0xC7  an entry's ref with generation - 1
 *     0xC8-0xCF  an entry's ref with slot, node or generation mangled
 *     0xD0-0xD7  PP_REF_NONE
 *     0xD8-0xDF  an old ref of an entry whose generation was changed
 *     0xE0-0xEF  small garbage: node s & 1, slot and generation one byte each
 *     0xF0-0xFF  garbage: the next 8 bytes, little endian
 *
 * FUZZ_API_TRACE=1 in the environment prints every call and its result.
 */
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

#include "testhooks.h"   /* pinpool.h, and the test hooks pp__* */

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
#define CUST_MAGIC    0x70696e706f6f6cull   /* "pinpool" */

static const char *const TOPO2 = "numa:2 pu:1";
static const char *const TOPO1 = "pu:1";

/* ------------------------------------------------------------------------ */
/* Failing                                                                   */
/* ------------------------------------------------------------------------ */

static void at_exit_cleanup(void);

static int g_opno;                 /* op being run (for messages) */
static const char *g_opname = "setup";
static bool g_trace;

__attribute__((format(printf, 1, 2), noreturn))
static void fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "fuzz_api: FAIL: op #%d (%s): %s\n", g_opno, g_opname, msg);
    fflush(stderr);
    at_exit_cleanup();             /* libFuzzer's crash exit skips atexit */
    abort();
}

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            fail(__VA_ARGS__);                                                 \
    } while (0)

__attribute__((format(printf, 1, 2)))
static void trace(const char *fmt, ...)
{
    if (!g_trace)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  #%d %s: ", g_opno, g_opname);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Allowed return codes as a bit set: bit k is -k (bit 0 is PP_OK). */
#define A_OK  (1u << 0)
#define A(e)  (1u << (unsigned)(-(PP_##e)))

/* Injected allocation failures (op fault): the k-th allocation pinpool
 * makes for itself on this thread from now fails.  A call during which
 * one failed may also return PP_ENOMEM (with no effect, as every failed
 * call); the pool's own threads are never failed (their errors are not
 * returned to anyone). */
/* Set on the threads that call the API: the input's thread and the helper
 * of op thread (free functions must never run on them). */
static __thread bool t_caller;
static atomic_int g_fault_left = -1;
static atomic_uint g_fault_fired, g_fault_seen;

static bool fault_fn(size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (!t_caller || atomic_load(&g_fault_left) < 0)
        return false;
    if (atomic_fetch_sub(&g_fault_left, 1) != 0)
        return false;
    atomic_fetch_add(&g_fault_fired, 1);
    return true;
}

/* Whether an injected failure happened since the last call checked. */
static bool fault_fired(void)
{
    unsigned f = atomic_load(&g_fault_fired);
    return f != atomic_exchange(&g_fault_seen, f);
}

/* rc must be in allowed; if an injected allocation failure happened
 * during the call, PP_ENOMEM is allowed too unless the call cannot fail
 * that way (fault_widens false). */
static void check_rc_set(const char *call, int rc, unsigned allowed, bool fault_widens)
{
    unsigned bit = rc <= 0 && rc > -31 ? 1u << (unsigned)(-rc) : 1u << 31;
    if (fault_fired()) {
        trace("%s: an injected allocation failure", call);
        if (fault_widens)
            allowed |= A(ENOMEM);
    }
    trace("%s -> %s", call, pp_err_name(rc));
    if (bit & allowed)
        return;
    char set[256] = "";
    size_t k = 0;
    for (int e = 0; e > -31; e--) {
        if (allowed & (1u << (unsigned)(-e)))
            k += (size_t)snprintf(set + k, sizeof set - k, "%s%s", k ? " " : "", pp_err_name(e));
        if (k >= sizeof set)
            break;
    }
    fail("%s returned %s (%d); pinpool.h allows here: {%s}", call, pp_err_name(rc), rc, set);
}

static void check_rc(const char *call, int rc, unsigned allowed)
{
    check_rc_set(call, rc, allowed, true);
}

/* ------------------------------------------------------------------------ */
/* Input                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd_t;

static uint8_t u8(rd_t *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static uint32_t u32(rd_t *r)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint32_t)u8(r) << (8 * k);
    return v;
}
static uint64_t u64(rd_t *r) { uint64_t lo = u32(r); return lo | (uint64_t)u32(r) << 32; }

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(void *p, size_t n, uint64_t seed)
{
    unsigned char *b = p;
    uint64_t st = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = mix64(st++);
        memcpy(b + i, &w, 8);
    }
    uint64_t w = mix64(st);
    for (; i < n; i++)
        b[i] = (unsigned char)(w >> (8 * (i % 8)));
}

/* Offset of the first wrong byte, or n. */
static size_t verify(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t st = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = mix64(st++);
        if (memcmp(b + i, &w, 8) != 0)
            return i;
    }
    uint64_t w = mix64(st);
    for (; i < n; i++)
        if (b[i] != (unsigned char)(w >> (8 * (i % 8))))
            return i;
    return n;
}

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

static void cnt_free(void *data, size_t size, void *ctx);
static int cust_save(const void *data, size_t size, pp_writer_t *w, void *ctx);
static int cust_load(void **data, size_t size, pp_reader_t *r, void *ctx);
static int refuse_save(const void *data, size_t size, pp_writer_t *w, void *ctx);
static int never_load(void **data, size_t size, pp_reader_t *r, void *ctx);

#define CTX_FREE   ((void *)(uintptr_t)0x1001)
#define CTX_CUSTOM ((void *)(uintptr_t)0x1002)
#define CTX_REFUSE ((void *)(uintptr_t)0x1003)

static const pp_type_t T_FLAT = {"fuzz-flat", NULL, NULL, NULL, NULL, 0};
static const pp_type_t T_FREE = {"fuzz-free", cnt_free, NULL, NULL, CTX_FREE, 0};
static const pp_type_t T_CUSTOM = {"fuzz-custom", cnt_free, cust_save, cust_load, CTX_CUSTOM, 0};
static const pp_type_t T_NOSWAP = {NULL, NULL, NULL, NULL, NULL, PP_TYPE_NOSWAP};
static const pp_type_t T_REFUSE = {"fuzz-refuse", cnt_free, refuse_save, never_load, CTX_REFUSE, 0};
static const pp_type_t T_CUSTOM_NOSWAP = {NULL, cnt_free, cust_save, cust_load, CTX_CUSTOM,
                                          PP_TYPE_NOSWAP};
static const pp_type_t T_BAD_SAVE = {"bad", NULL, cust_save, NULL, NULL, 0};
static const pp_type_t T_BAD_LOAD = {"bad", cnt_free, NULL, cust_load, CTX_FREE, 0};

static bool kind_counted(int k)
{
    return k == K_FREE || k == K_CUSTOM || k == K_REFUSE || k == K_CUSTOM_NOSWAP;
}

/* Never evicted whatever happens (its bytes stay resident). */
static bool kind_unswappable(int k)
{
    return k == K_FREE || k == K_NOSWAP || k == K_REFUSE || k == K_CUSTOM_NOSWAP;
}

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

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rec_t g_recs[REC_MAX];
static int g_nrecs;
static uint64_t g_seed_of[MAX_ENTS];      /* contents of each entry, for save/load */
static atomic_ulong g_free_calls, g_saves, g_loads;

static void rec_add(void *p, size_t size, size_t alloc, int ent)
{
    pthread_mutex_lock(&g_mu);
    int slot = -1;
    if (g_nrecs < REC_MAX) {
        slot = g_nrecs++;
    } else {
        for (int i = 0; i < REC_MAX && slot < 0; i++)
            if (g_recs[i].freed)
                slot = i;
    }
    if (slot < 0) {
        pthread_mutex_unlock(&g_mu);
        fail("allocation registry full");
    }
    g_recs[slot] = (rec_t){p, size, alloc, ent, false};
    pthread_mutex_unlock(&g_mu);
}

/* The live record of p (caller holds g_mu), or NULL. */
static rec_t *rec_find(const void *p)
{
    for (int i = g_nrecs; i-- > 0;)
        if (g_recs[i].p == p && !g_recs[i].freed)
            return &g_recs[i];
    return NULL;
}

/* pp_put failed: the caller still owns the buffer. */
static void rec_forget(void *p)
{
    pthread_mutex_lock(&g_mu);
    rec_t *r = rec_find(p);
    if (r != NULL)
        r->freed = true;
    pthread_mutex_unlock(&g_mu);
}

static void cnt_free(void *data, size_t size, void *ctx)
{
    atomic_fetch_add(&g_free_calls, 1);
    if (t_caller)
        fail("a free function ran on the calling thread (pinpool.h: the thread that did "
             "the final unpin or release never calls it)");
    CHECK(ctx == CTX_FREE || ctx == CTX_CUSTOM || ctx == CTX_REFUSE,
          "free function got ctx %p, not its type's", ctx);
    pthread_mutex_lock(&g_mu);
    rec_t *r = rec_find(data);
    if (r == NULL) {
        pthread_mutex_unlock(&g_mu);
        fail("free function called for %p, which no live entry holds (double free?)", data);
    }
    if (r->size != size) {
        size_t want = r->size;
        pthread_mutex_unlock(&g_mu);
        fail("free function got size %zu for %p, the entry's size is %zu", size, data, want);
    }
    r->freed = true;
    size_t alloc = r->alloc;
    pthread_mutex_unlock(&g_mu);
    memset(data, 0xdd, alloc);   /* a later read of these bytes fails its check */
    free(data);
}

struct cust_hdr {
    uint64_t magic, ent, seed, size;
};

static int cust_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    atomic_fetch_add(&g_saves, 1);
    CHECK(ctx == CTX_CUSTOM, "save got a wrong ctx");
    pthread_mutex_lock(&g_mu);
    rec_t *r = rec_find(data);
    int ent = r != NULL ? r->ent : -1;
    size_t rsize = r != NULL ? r->size : 0;
    uint64_t seed = ent >= 0 ? g_seed_of[ent] : 0;
    pthread_mutex_unlock(&g_mu);
    CHECK(ent >= 0, "save called for %p, which no live entry holds", data);
    CHECK(rsize == size, "save got size %zu, the entry's is %zu", size, rsize);
    size_t bad = verify(data, size, seed);
    CHECK(bad == size, "save of entry %d sees wrong bytes at offset %zu of %zu "
          "(the swap thread reads what no unpin published)", ent, bad, size);
    /* Misuse inside save: argument errors, nothing written. */
    CHECK(pp_write(NULL, data, 1) == PP_EINVAL, "pp_write(NULL, ...) != PP_EINVAL");
    int rc = pp_write(w, NULL, 0);
    CHECK(rc == 0 || rc == PP_EAGAIN, "pp_write(w, NULL, 0) = %s", pp_err_name(rc));
    if (rc != 0)
        return 1;
    rc = pp_write(w, NULL, 1);
    CHECK(rc == PP_EINVAL || rc == PP_EAGAIN, "pp_write(w, NULL, 1) = %s", pp_err_name(rc));
    if (rc == PP_EAGAIN)
        return 1;
    struct cust_hdr h = {CUST_MAGIC, (uint64_t)ent, seed, size};
    rc = pp_write(w, &h, sizeof h);
    if (rc == 0)
        rc = pp_write(w, data, size / 3);
    if (rc == 0)
        rc = pp_write(w, (const char *)data + size / 3, size - size / 3);
    CHECK(rc == 0 || rc == PP_EAGAIN || rc == PP_ENOMEM,
          "pp_write returned %s, which pinpool.h does not list", pp_err_name(rc));
    if (rc != 0) {
        int again = pp_write(w, &h, 1);
        CHECK(again == rc, "pp_write after %s returned %s (pinpool.h: every later call "
              "returns the same error)", pp_err_name(rc), pp_err_name(again));
        return 1;
    }
    return 0;
}

static int cust_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    atomic_fetch_add(&g_loads, 1);
    CHECK(ctx == CTX_CUSTOM, "load got a wrong ctx");
    CHECK(data != NULL && r != NULL, "load got NULL arguments");
    size_t left = pp_read_left(r);
    CHECK(left == sizeof(struct cust_hdr) + size,
          "load: pp_read_left %zu, save wrote %zu", left, sizeof(struct cust_hdr) + size);
    char one;
    CHECK(pp_read(r, NULL, 1) == PP_EINVAL && pp_read_left(r) == left,
          "pp_read(r, NULL, 1) not PP_EINVAL, or it consumed");
    CHECK(pp_read(r, NULL, 0) == 0, "pp_read(r, NULL, 0) != 0");
    CHECK(pp_read(NULL, &one, 1) == PP_EINVAL, "pp_read(NULL, ...) != PP_EINVAL");
    struct cust_hdr h;
    CHECK(pp_read(r, &h, sizeof h) == 0, "pp_read of the header failed");
    CHECK(h.magic == CUST_MAGIC && h.size == size && h.ent < MAX_ENTS,
          "load: the header save wrote came back wrong");
    pthread_mutex_lock(&g_mu);
    uint64_t seed = g_seed_of[h.ent];
    pthread_mutex_unlock(&g_mu);
    CHECK(h.seed == seed, "load of entry %d: its copy is of older contents (seed %" PRIx64
          ", now %" PRIx64 ")", (int)h.ent, h.seed, seed);
    char *p = malloc(size > 0 ? size : 1);
    CHECK(p != NULL, "out of memory in load");
    CHECK(pp_read(r, p, size + 1) == PP_EINVAL && pp_read_left(r) == size,
          "pp_read past the end not PP_EINVAL, or it consumed");
    CHECK(pp_read(r, p, size) == 0 && pp_read_left(r) == 0, "pp_read of the data failed");
    CHECK(pp_read(r, &one, 1) == PP_EINVAL, "pp_read at the end not PP_EINVAL");
    size_t bad = verify(p, size, seed);
    CHECK(bad == size, "load of entry %d: wrong bytes at offset %zu", (int)h.ent, bad);
    rec_add(p, size, size > 0 ? size : 1, (int)h.ent);
    *data = p;
    return 0;
}

static int refuse_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    (void)data;
    (void)size;
    CHECK(ctx == CTX_REFUSE, "save got a wrong ctx");
    (void)pp_write(w, "x", 1);
    return 1;   /* abandon: the entry stays resident */
}

static int never_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    (void)data;
    (void)size;
    (void)r;
    (void)ctx;
    fail("load called for a type whose save never succeeded");
}

/* ------------------------------------------------------------------------ */
/* Reports (options.report)                                                  */
/* ------------------------------------------------------------------------ */

static atomic_int g_reports;
static char g_last_report[512];

static void report_cb(const char *line, void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    snprintf(g_last_report, sizeof g_last_report, "%s", line);
    pthread_mutex_unlock(&g_mu);
    atomic_fetch_add(&g_reports, 1);
    if (g_trace)
        fprintf(stderr, "  report: %s\n", line);
}

/* Reports since *mark must be exactly want (then *mark moves on). */
static void reports_expect(int *mark, int want, const char *why)
{
    int now = atomic_load(&g_reports);
    if (now - *mark != want) {
        pthread_mutex_lock(&g_mu);
        char last[512];
        memcpy(last, g_last_report, sizeof last);
        pthread_mutex_unlock(&g_mu);
        fail("%s: %d report line(s), expected %d; last: %s", why, now - *mark, want, last);
    }
    *mark = now;
}

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
 * pinned through it in the order src/scope.c keeps them (appended; an
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

static const char *const sc_names[] = {"zeroed", "open", "open without a pool", "ended"};

typedef struct trk {      /* PP_TRACK_PINS records, as track.c keeps them */
    pp_ref_t ref;
    uint64_t reg;         /* registration that pinned; 0 once reported */
} trk_t;

static struct {
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
} M;

static pp_scope_t g_scope[NSCOPES];        /* the input's scopes (zeroed per input) */

static pp_ref_t g_big[4096];

static bool ent_dead(const ent_t *x) { return x->owners == 0; }

/* The entry a ref names now, or -1 (then every call gives PP_ESTALE). */
static int classify(pp_ref_t ref)
{
    for (int i = M.n; i-- > 0;)
        if (!M.e[i].gone && M.e[i].ref == ref)
            return i;
    return -1;
}

static bool forced_resident(const ent_t *x)
{
    return !M.swap || x->pins > 0 || x->escaped || x->size == 0 || kind_unswappable(x->kind);
}

static uint64_t bytes_live(void)
{
    uint64_t s = 0;
    for (int i = 0; i < M.n; i++)
        if (!M.e[i].gone)
            s += M.e[i].size;
    return s;
}

static uint64_t bytes_dying(void)
{
    uint64_t s = 0;
    for (int i = 0; i < M.n; i++)
        if (M.e[i].gone && !M.e[i].freed_known)
            s += M.e[i].size;
    return s;
}

static bool any_lie(void)
{
    for (int i = 0; i < M.n; i++)
        if (M.e[i].lie)
            return true;
    return false;
}

static bool deaths_pending(void)
{
    for (int i = 0; i < M.n; i++)
        if (M.e[i].gone && !M.e[i].freed_known)
            return true;
    return false;
}

/* With swap: whether a put or load of `extra` bytes must find room.  The
 * header: PP_ENOMEM only "when it does not fit and nothing can be evicted"
 * (every resident byte pinned, escaped, being loaded, of a type that cannot
 * be evicted, or dirty with the swap store full), and bytes of dead entries
 * are waited for unless a QSBR section holds them back.  Conservative: no
 * swap_limit, no dead entry whose bytes may still be held, and the bytes
 * that cannot go plus the new ones under the low watermark. */
static bool room_certain(uint64_t extra)
{
    if (!M.swap || M.swap_limit != 0 || deaths_pending())
        return false;
    uint64_t stuck = 0;
    for (int i = 0; i < M.n; i++)
        if (!M.e[i].gone && forced_resident(&M.e[i]))
            stuck += M.e[i].size;
    return stuck + extra <= M.limit - M.limit / 8;
}

static void node_count(uint64_t *arr, pp_ref_t ref, uint64_t k)
{
    arr[pp_ref_node(ref) & 1] += k;
}

/* The entry became gone (dead, no pins): queued for its reclaimer. */
static void ent_gone(ent_t *x)
{
    x->gone = true;
    M.gone[x->node & 1]++;
}

static void trk_add(pp_ref_t ref)
{
    if (!M.track)
        return;
    if (M.ntrk == M.ctrk) {
        M.ctrk = M.ctrk ? 2 * M.ctrk : 64;
        M.trk = realloc(M.trk, M.ctrk * sizeof *M.trk);
        CHECK(M.trk != NULL, "out of memory");
    }
    M.trk[M.ntrk++] = (trk_t){ref, M.reg};
}

/* As pp__track_unpin: the newest record of ref by this registration, else
 * the newest of any; removed by moving the last one into its place. */
static void trk_del(pp_ref_t ref)
{
    if (!M.track)
        return;
    size_t found = SIZE_MAX;
    for (size_t i = M.ntrk; i-- > 0;) {
        if (M.trk[i].ref != ref)
            continue;
        if (found == SIZE_MAX)
            found = i;
        if (M.trk[i].reg == M.reg) {
            found = i;
            break;
        }
    }
    if (found != SIZE_MAX)
        M.trk[found] = M.trk[--M.ntrk];
}

/* ------------------------------------------------------------------------ */
/* Picking refs                                                              */
/* ------------------------------------------------------------------------ */

static pp_ref_t mkref(unsigned node, uint32_t slot, uint32_t gen)
{
    return ((pp_ref_t)(node & 63u) << 58) | ((pp_ref_t)(slot & 0x3FFFFFFu) << 32) | gen;
}

static pp_ref_t pick_ref(rd_t *r)
{
    uint8_t s = u8(r);
    if (s >= 0xF0)
        return u64(r);
    if (s >= 0xE0) {
        uint32_t slot = u8(r), gen = u8(r);
        return mkref(s & 1u, slot, gen);
    }
    if (s >= 0xD8) {
        if (M.nalias > 0)
            return M.alias[s % M.nalias];
        s = 0;   /* no alias yet: an entry */
    }
    if (s >= 0xD0)
        return PP_REF_NONE;
    if (M.n == 0)
        return (pp_ref_t)s;   /* nothing put yet: garbage */
    if (s >= 0xA0 && s < 0xB0) {
        int live[MAX_ENTS], k = 0;
        for (int i = 0; i < M.n; i++)
            if (!M.e[i].gone)
                live[k++] = i;
        if (k > 0)
            return M.e[live[s % k]].ref;
    }
    pp_ref_t b = M.e[s % M.n].ref;
    unsigned node = pp_ref_node(b);
    uint32_t slot = pp_ref_slot(b), gen = pp_ref_gen(b);
    if (s >= 0xB0 && s < 0xC0)
        return mkref(node, slot, gen + 1);
    if (s >= 0xC0 && s < 0xC8)
        return mkref(node, slot, gen - 1);
    if (s >= 0xC8 && s < 0xD0) {
        switch (s & 7) {
        case 0: return mkref(node, slot + 1, gen);
        case 1: return mkref(node + 1, slot, gen);
        case 2: return mkref(node ^ 1u, slot, gen);
        case 3: return mkref(node, slot, gen ^ 0x80000000u);
        case 4: return mkref(node, slot ^ 0x2000u, gen);   /* another segment */
        case 5: return mkref(63, slot, gen);
        case 6: return mkref(node, slot, UINT32_MAX);
        default: return mkref(node, 0x3FFFFFFu, gen);
        }
    }
    return b;
}

/* ------------------------------------------------------------------------ */
/* Checks of one entry                                                       */
/* ------------------------------------------------------------------------ */

static void check_bytes(const ent_t *x, const void *p, const char *how)
{
    size_t bad = verify(p, x->bytes, x->seed);
    CHECK(bad == x->bytes, "%s: entry %d (ref 0x%016" PRIx64 ", size %zu) has wrong bytes at "
          "offset %zu", how, (int)(x - M.e), x->ref, x->size, bad);
}

/* New contents, written under a write pin or through an escaped pointer
 * (the caller may write to either). */
static void rewrite(ent_t *x, void *p)
{
    x->seed = mix64(x->seed ^ ((uint64_t)g_opno << 40) ^ 0x5eed);
    fill(p, x->bytes, x->seed);
    pthread_mutex_lock(&g_mu);
    g_seed_of[x - M.e] = x->seed;
    pthread_mutex_unlock(&g_mu);
}

/* A pin of x succeeded and gave p (NULL if the caller passed no data). */
static void pinned(ent_t *x, void *p, unsigned flags)
{
    if (p != NULL) {
        if (x->pins > 0 && x->pin_ptr != NULL)
            CHECK(p == x->pin_ptr, "a pin moved the data of a pinned entry (%p -> %p)",
                  x->pin_ptr, p);
        if (x->escaped && x->esc_ptr != NULL && (x->owners > 0 || x->pins > 0))
            CHECK(p == x->esc_ptr, "a pin moved the data of an escaped entry");
        check_bytes(x, p, "data under a pin");
        x->pin_ptr = p;
    }
    x->pins++;
    if (flags & PP_PIN_WRITE) {
        x->ever_write = true;
        if (p != NULL)
            rewrite(x, p);
    }
}

static void unpinned(ent_t *x)
{
    x->pins--;
    if (x->pins == 0) {
        x->pin_ptr = NULL;
        if (ent_dead(x))
            ent_gone(x);
    }
}

/* pinpool.h: with swap, a dead entry without pins is still described while
 * an eviction or load of it is in flight (queued when it ends). */
static void check_gone_info(const ent_t *x, const pp_entry_info_t *in)
{
    int i = (int)(x - M.e);
    CHECK(in->size == x->size && in->type == x->type && in->node == x->node &&
              in->pins == 0 && in->owners == 0 && (in->state & PP_STATE_DEAD) &&
              (in->state & (PP_STATE_LOADING | PP_STATE_EVICTING)),
          "pp_stat described entry %d, dead and unpinned, with pins %u owners %u state 0x%x "
          "(pinpool.h: only while an eviction or load of it is in flight)", i, in->pins,
          in->owners, in->state);
}

static void check_info(const ent_t *x, const pp_entry_info_t *in)
{
    int i = (int)(x - M.e);
    unsigned st = in->state;
    CHECK(in->size == x->size, "pp_stat of entry %d: size %zu, put %zu", i, in->size, x->size);
    CHECK(in->type == x->type, "pp_stat of entry %d: wrong type", i);
    CHECK(in->node == x->node, "pp_stat of entry %d: node %u, ref says %u", i, in->node, x->node);
    CHECK(in->pins == x->pins, "pp_stat of entry %d: %u pins, model %u", i, in->pins, x->pins);
    CHECK(in->owners == x->owners, "pp_stat of entry %d: %u owners, model %u", i, in->owners,
          x->owners);
    CHECK((st & ~0x7Fu) == 0, "pp_stat of entry %d: unknown state bits 0x%x", i, st);
    CHECK(!!(st & PP_STATE_DEAD) == ent_dead(x), "pp_stat of entry %d: DEAD is %d, owners %u",
          i, !!(st & PP_STATE_DEAD), x->owners);
    CHECK(!!(st & PP_STATE_ESCAPED) == x->escaped, "pp_stat of entry %d: ESCAPED is %d, model %d",
          i, !!(st & PP_STATE_ESCAPED), x->escaped);
    if (!M.swap) {
        CHECK(st & PP_STATE_RESIDENT, "pp_stat of entry %d: not resident without swap", i);
        CHECK(!(st & (PP_STATE_SWAPPED | PP_STATE_LOADING | PP_STATE_EVICTING)),
              "pp_stat of entry %d: swap state 0x%x without swap", i, st);
        CHECK(!!(st & PP_STATE_DIRTY) == x->ever_write,
              "pp_stat of entry %d: DIRTY is %d, pinned for write: %d", i,
              !!(st & PP_STATE_DIRTY), x->ever_write);
        return;
    }
    if (!x->ever_write)
        CHECK(!(st & PP_STATE_DIRTY), "pp_stat of entry %d: DIRTY, never pinned for write", i);
    if (forced_resident(x))
        CHECK(st & PP_STATE_RESIDENT, "pp_stat of entry %d: not resident, but it is %s", i,
              x->pins ? "pinned" : x->escaped ? "escaped" : "never evicted (type or size 0)");
    /* Never evicted: the pool does not even try (a refusing save is tried,
     * so it may show EVICTING, never SWAPPED). */
    if (x->size == 0 || (kind_unswappable(x->kind) && x->kind != K_REFUSE))
        CHECK(!(st & (PP_STATE_SWAPPED | PP_STATE_LOADING | PP_STATE_EVICTING)),
              "pp_stat of entry %d: swap state 0x%x for an entry never evicted", i, st);
    if (x->kind == K_REFUSE)
        CHECK(!(st & (PP_STATE_SWAPPED | PP_STATE_LOADING)),
              "pp_stat of entry %d: swap state 0x%x, but its save always refuses", i, st);
    if (st & PP_STATE_LOADING)
        CHECK(!(st & PP_STATE_RESIDENT), "pp_stat of entry %d: LOADING and RESIDENT", i);
    if (st & PP_STATE_EVICTING)
        CHECK(st & PP_STATE_RESIDENT, "pp_stat of entry %d: EVICTING, not RESIDENT", i);
    if (!(st & PP_STATE_RESIDENT)) {
        CHECK(st & PP_STATE_SWAPPED, "pp_stat of entry %d: neither resident nor swapped", i);
        CHECK(!(st & PP_STATE_DIRTY), "pp_stat of entry %d: DIRTY but not resident", i);
    }
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

static void learn_frees(const pp_stats_t *st)
{
    /* Every entry put and not gone is counted in entries; if that is all,
     * every gone entry has been freed. */
    uint64_t alive = 0;
    for (int i = 0; i < M.n; i++)
        alive += !M.e[i].gone;
    if (st->total.entries == alive)
        for (int i = 0; i < M.n; i++)
            if (M.e[i].gone)
                M.e[i].freed_known = true;
}

static void check_stats(bool final)
{
    pp_stats_t st;
    int rc = pp_pool_stats(M.pool, &st);
    check_rc("pp_pool_stats", rc, A_OK);
    trace("stats: entries %" PRIu64 " resident %" PRIu64 " swapped %" PRIu64 " frees %" PRIu64
          " evictions %" PRIu64 "+%" PRIu64 " (abandoned %" PRIu64 ") loads %" PRIu64
          " reserved %" PRIu64, st.total.entries, st.total.resident_bytes,
          st.total.swapped_bytes, st.total.frees, st.total.evictions_written,
          st.total.evictions_clean, st.total.evictions_abandoned, st.total.loads,
          st.resident_reserved);
    CHECK(st.nodes == M.nnodes, "stats: %u nodes, the pool has %u", st.nodes, M.nnodes);
    unsigned callers = 1 + (M.reg >= ((uint64_t)1 << 40));   /* and op thread's helper */
    CHECK(st.threads <= callers, "stats: %u threads registered; %u call", st.threads, callers);
    CHECK(st.topology_is_this_system == (M.topology == NULL),
          "stats: topology_is_this_system %d", st.topology_is_this_system);
    CHECK(st.mem_limit == M.limit && st.swap_limit == M.swap_limit && st.swap == M.swap,
          "stats: options not as given");
    uint64_t ent_gone_freed_known[2] = {0, 0};
    for (int i = 0; i < M.n; i++)
        if (M.e[i].gone && M.e[i].freed_known)
            ent_gone_freed_known[M.e[i].node & 1]++;
    pp_node_stats_t sum;
    memset(&sum, 0, sizeof sum);
    for (unsigned n = 0; n < st.nodes; n++) {
        const pp_node_stats_t *s = &st.node[n];
        CHECK(s->puts == M.puts[n] && s->pins == M.pins[n] && s->unpins == M.unpins[n] &&
                  s->retains == M.retains[n] && s->releases == M.releases[n] &&
                  s->gets == M.gets[n],
              "stats node %u: puts %" PRIu64 "/%" PRIu64 " pins %" PRIu64 "/%" PRIu64
              " unpins %" PRIu64 "/%" PRIu64 " retains %" PRIu64 "/%" PRIu64
              " releases %" PRIu64 "/%" PRIu64 " gets %" PRIu64 "/%" PRIu64 " (pool/model)",
              n, s->puts, M.puts[n], s->pins, M.pins[n], s->unpins, M.unpins[n], s->retains,
              M.retains[n], s->releases, M.releases[n], s->gets, M.gets[n]);
        if (M.swap)
            CHECK(s->queued <= M.gone[n], "stats node %u: %" PRIu64 " queued, %" PRIu64
                  " entries gone", n, s->queued, M.gone[n]);
        else
            CHECK(s->queued == M.gone[n], "stats node %u: %" PRIu64 " queued, %" PRIu64
                  " entries gone", n, s->queued, M.gone[n]);
        CHECK(s->frees <= s->queued && s->frees >= ent_gone_freed_known[n],
              "stats node %u: %" PRIu64 " frees, %" PRIu64 " queued", n, s->frees, s->queued);
        CHECK(s->entries == s->puts - s->frees, "stats node %u: entries != puts - frees", n);
        CHECK(s->reclaim_queue_depth == s->queued - s->frees,
              "stats node %u: reclaim_queue_depth", n);
        CHECK(s->lag_p50_ns <= s->lag_p99_ns && s->lag_p99_ns <= s->lag_max_ns,
              "stats node %u: lag quantiles out of order", n);
        if (!M.swap)
            CHECK(s->swapped_bytes == 0 && s->evictions_written == 0 && s->evictions_clean == 0 &&
                      s->loads == 0 && s->swap_bytes_written == 0 && s->swap_used_bytes == 0,
                  "stats node %u: swap figures without swap", n);
        CHECK(s->checksum_failures == 0 && s->io_errors == 0,
              "stats node %u: %" PRIu64 " checksum failures, %" PRIu64 " I/O errors", n,
              s->checksum_failures, s->io_errors);
        if (final) {
            /* The lag is timed on a sample: the first of every
             * PP__LAG_SAMPLE entries each thread queues for a node. */
            CHECK(s->lag_count <= s->frees && s->lag_count >= s->frees / PP__LAG_SAMPLE,
                  "stats node %u: lag_count %" PRIu64 ", frees %" PRIu64, n, s->lag_count,
                  s->frees);
        }
        sum.puts += s->puts;
        sum.frees += s->frees;
        sum.resident_bytes += s->resident_bytes;
        sum.swapped_bytes += s->swapped_bytes;
        sum.entries += s->entries;
        sum.queued += s->queued;
        sum.swap_used_bytes += s->swap_used_bytes;
    }
    CHECK(st.total.puts == sum.puts && st.total.frees == sum.frees &&
              st.total.entries == sum.entries && st.total.queued == sum.queued &&
              st.total.resident_bytes == sum.resident_bytes &&
              st.total.swapped_bytes == sum.swapped_bytes &&
              st.total.swap_used_bytes == sum.swap_used_bytes,
          "stats: totals are not the sums of the nodes");
    if (M.limit != 0) {
        CHECK(st.resident_reserved <= M.limit && st.resident_peak <= M.limit,
              "stats: resident_reserved %" PRIu64 " / peak %" PRIu64 " over mem_limit %zu",
              st.resident_reserved, st.resident_peak, M.limit);
    }
    if (!M.swap && !any_lie()) {
        uint64_t live = bytes_live(), dying = bytes_dying();
        CHECK(st.total.resident_bytes >= live && st.total.resident_bytes <= live + dying,
              "stats: resident_bytes %" PRIu64 ", model: %" PRIu64 " live + %" PRIu64
              " dying", st.total.resident_bytes, live, dying);
        /* The reclaimer subtracts an entry's bytes, then unreserves them;
         * pp_pool_stats reads the reservation first: at most the dying
         * bytes apart. */
        if (M.limit != 0)
            CHECK(st.resident_reserved >= st.total.resident_bytes &&
                      st.resident_reserved <= st.total.resident_bytes + dying,
                  "stats: resident_reserved %" PRIu64 ", resident_bytes %" PRIu64
                  " (%" PRIu64 " dying)", st.resident_reserved, st.total.resident_bytes, dying);
    }
    if (M.swap) {
        uint64_t stuck = 0;
        for (int i = 0; i < M.n; i++)
            if (!M.e[i].gone && forced_resident(&M.e[i]))
                stuck += M.e[i].size;
        CHECK(st.resident_reserved >= stuck, "stats: resident_reserved %" PRIu64 " below the "
              "%" PRIu64 " bytes pinned, escaped or never evicted", st.resident_reserved, stuck);
    }
    /* A slot whose generation ran out is retired when its entry is freed. */
    uint64_t last_gen = 0;
    for (int i = 0; i < M.n; i++)
        last_gen += M.e[i].gone && pp_ref_gen(M.e[i].ref) == UINT32_MAX;
    CHECK(final ? st.total.retired_slots == last_gen : st.total.retired_slots <= last_gen,
          "stats: %" PRIu64 " retired slots, %" PRIu64 " entries of the last generation gone",
          st.total.retired_slots, last_gen);
    if (final) {
        CHECK(st.total.entries == 0 && st.total.resident_bytes == 0 &&
                  st.total.swapped_bytes == 0 && st.total.reclaim_queue_depth == 0 &&
                  st.total.swap_used_bytes == 0 && st.resident_reserved == 0 &&
                  st.total.frees == st.total.puts && st.total.queued == st.total.puts,
              "stats after the last release and a drain: entries %" PRIu64 " resident %" PRIu64
              " swapped %" PRIu64 " queue %" PRIu64 " swap_used %" PRIu64 " reserved %" PRIu64
              " frees %" PRIu64 " queued %" PRIu64 " puts %" PRIu64,
              st.total.entries, st.total.resident_bytes, st.total.swapped_bytes,
              st.total.reclaim_queue_depth, st.total.swap_used_bytes, st.resident_reserved,
              st.total.frees, st.total.queued, st.total.puts);
    }
    learn_frees(&st);
}

/* pp_stat of every ref the input made. */
static void check_all_entries(void)
{
    for (int i = 0; i < M.n; i++) {
        pp_entry_info_t in;
        int rc = pp_stat(M.pool, M.e[i].ref, &in);
        if (M.e[i].gone) {
            check_rc("pp_stat(gone)", rc, M.swap ? A(ESTALE) | A_OK : A(ESTALE));
            if (rc == 0)
                check_gone_info(&M.e[i], &in);
        } else {
            check_rc("pp_stat", rc, A_OK);
            if (rc == 0)
                check_info(&M.e[i], &in);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

static char g_swapbase[256];

static int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int k = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            k++;
    closedir(d);
    return k;
}

static void rm_rf_children(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        rm_rf_children(p);
        (void)remove(p);
    }
    closedir(d);
}

static void at_exit_cleanup(void)
{
    if (g_swapbase[0] != '\0') {
        rm_rf_children(g_swapbase);
        (void)rmdir(g_swapbase);
        g_swapbase[0] = '\0';
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    unsetenv("PINPOOL_TRACK_PINS");   /* the input decides */
    /* hwloc loads its plugins (dlopen) when its first topology is made and
     * unloads them when its last one is destroyed: every pool would pay
     * for both (most of the time of an input).  One topology held for the
     * process keeps them loaded. */
    static hwloc_topology_t keep;
    if (hwloc_topology_init(&keep) != 0) {
        fprintf(stderr, "fuzz_api: FAIL: hwloc_topology_init\n");
        exit(1);
    }
    const char *t = getenv("FUZZ_API_TRACE");
    g_trace = t != NULL && t[0] == '1';
    const char *tmp = getenv("TMPDIR");
    snprintf(g_swapbase, sizeof g_swapbase, "%s/pinpool-fuzz.XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(g_swapbase) == NULL) {
        fprintf(stderr, "fuzz_api: FAIL: mkdtemp %s: %s\n", g_swapbase, strerror(errno));
        exit(1);
    }
    atexit(at_exit_cleanup);
    __sanitizer_set_death_callback(at_exit_cleanup);   /* sanitizer reports */
    pp__alloc_fault_hook(fault_fn, NULL);
    return 0;
}

/* After a successful pp_pool_destroy: every counted buffer freed exactly
 * once, the swap directory removed. */
static void check_after_destroy(void)
{
    M.pool = NULL;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nrecs; i++) {
        if (!g_recs[i].freed) {
            int ent = g_recs[i].ent;
            pthread_mutex_unlock(&g_mu);
            fail("after pp_pool_destroy, the data of entry %d (%p) was never freed", ent,
                 g_recs[i].p);
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (M.swap)
        CHECK(dir_entries(g_swapbase) == 0, "pp_pool_destroy left files in swap_dir %s",
              g_swapbase);
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

enum op {
    OP_PUT, OP_PIN, OP_UNPIN, OP_RETAIN, OP_RELEASE, OP_GET, OP_STAT, OP_PREFETCH,
    OP_PIN_MANY, OP_UNPIN_MANY, OP_QUIESCENT, OP_STATS, OP_DRAIN, OP_THREAD_EXIT,
    OP_TOUCH, OP_MISC, OP_SET_OWNERS, OP_SET_GEN, OP_OVERFLOW, OP_DESTROY, OP_SLEEP,
    OP_FAULT, OP_THREAD, OP_SCOPE, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "put", "pin", "unpin", "retain", "release", "get", "stat", "prefetch",
    "pin_many", "unpin_many", "quiescent", "stats", "drain", "thread_exit",
    "touch", "misc", "set_owners", "set_gen", "overflow", "destroy", "sleep",
    "fault", "thread", "scope",
};

/* An op byte: its low 5 bits; 0 .. OP_COUNT-1 are the ops, the rest
 * repeat the most common ones.  Fixed, so that corpus files keep their
 * meaning: a new op takes the first repeat (OP_SCOPE took 23, which
 * repeated OP_PUT and which no file of tests/fuzz/corpus used as an op
 * byte), and every other byte keeps its op. */
static int op_of(uint8_t b)
{
    static const uint8_t more[32 - OP_COUNT] = {
        OP_PIN, OP_UNPIN, OP_RELEASE, OP_STAT, OP_GET, OP_PIN_MANY, OP_RETAIN, OP_STATS,
    };
    _Static_assert(OP_COUNT + sizeof more == 32, "op bytes: 32 values");
    b &= 31;
    return b < OP_COUNT ? b : more[b - OP_COUNT];
}

static const size_t sizes[24] = {
    0, 1, 3, 8, 63, 100, 511, 1000, 4095, 4096, 4097, 9000, 16384, 24000, 30000, 40000,
    57344, 61440, 65536, 65537,
    (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX + 1, SIZE_MAX, SIZE_MAX / 4,
};

/* put: size, type, flags, seed */
static void op_put(rd_t *r)
{
    uint8_t zs = u8(r), ts = u8(r), fl = u8(r), sd = u8(r);
    size_t size = zs < 24 ? sizes[zs] : (size_t)(zs - 24) * 97 + 5;
    int kind = ts % K_COUNT;
    const pp_type_t *type = NULL;
    switch (kind) {
    case K_NULL: type = NULL; break;
    case K_FLAT: type = &T_FLAT; break;
    case K_FREE: type = &T_FREE; break;
    case K_CUSTOM: type = &T_CUSTOM; break;
    case K_NOSWAP: type = &T_NOSWAP; break;
    case K_REFUSE: type = &T_REFUSE; break;
    case K_CUSTOM_NOSWAP: type = &T_CUSTOM_NOSWAP; break;
    default: type = (ts & 0x80) ? &T_BAD_LOAD : &T_BAD_SAVE; break;
    }
    unsigned flags = 0, want_node = UINT_MAX;
    bool bad = kind == K_BAD || size > (size_t)PTRDIFF_MAX;
    switch (fl & 7) {
    case 4: flags = PP_ON_NODE(0); want_node = 0; break;
    case 5: flags = PP_ON_NODE(1); want_node = 1; break;
    case 6: {
        unsigned n = u8(r);
        flags = PP_ON_NODE(n);
        want_node = n;
        break;
    }
    case 7: flags = 1u << (u8(r) % 32); break;
    default: break;
    }
    if ((flags & ~(PP_ON_NODE(0xff) | PP_PUT_NOWAIT)) != 0)
        bad = true;
    if (want_node != UINT_MAX && want_node >= M.nnodes)
        bad = true;
    unsigned nul = (fl >> 3) & 0x1f;
    bool data_null = nul == 1, out_null = nul == 2, pool_null = nul == 3;
    bad = bad || data_null || out_null || pool_null;

    bool lie = size > REAL_MAX;
    size_t bytes = lie ? LIE_BYTES : size;
    int idx = M.n;
    CHECK(idx < MAX_ENTS, "too many entries");
    void *data = malloc(bytes > 0 ? bytes : 1);
    CHECK(data != NULL, "out of memory");
    uint64_t seed = mix64(((uint64_t)sd << 8) ^ (uint64_t)idx ^ ((uint64_t)g_opno << 32));
    fill(data, bytes, seed);
    pthread_mutex_lock(&g_mu);
    g_seed_of[idx] = seed;
    pthread_mutex_unlock(&g_mu);
    if (kind_counted(kind) || type == &T_BAD_LOAD)
        rec_add(data, size, bytes > 0 ? bytes : 1, idx);

    unsigned allowed;
    if (bad) {
        allowed = A(EINVAL);
    } else if (M.limit == 0) {
        allowed = A_OK;
    } else if (size > M.limit) {
        allowed = A(ENOMEM);                   /* never fits */
    } else if (!M.swap) {
        /* A hard cap: resident bytes are the live ones plus those of dead
         * entries not yet freed. */
        uint64_t live = bytes_live(), dying = bytes_dying();
        if (live + size > M.limit)
            allowed = A(ENOMEM);
        else if (live + dying + size <= M.limit)
            allowed = A_OK;
        else
            allowed = A_OK | A(ENOMEM);
    } else {
        allowed = room_certain(size) ? A_OK : A_OK | A(ENOMEM);
    }
    /* The reclaim backlog (a dead entry counts its size, which a lying
     * entry claims large): a put may be refused instead of waiting for it,
     * with PP_PUT_NOWAIT (PP_EAGAIN, also for room with swap) or in this
     * QSBR thread's section (PP_EDEADLK). */
    if (!bad) {
        allowed |= A(EDEADLK);
        if (flags & PP_PUT_NOWAIT)
            allowed |= A(EAGAIN);
    }

    pp_ref_t ref = 0;
    int rc = pp_put(pool_null ? NULL : M.pool, data_null ? NULL : data, size, type, flags,
                    out_null ? NULL : &ref);
    char call[160];
    snprintf(call, sizeof call, "pp_put(size %zu, kind %d, flags 0x%x%s%s%s)", size, kind,
             flags, data_null ? ", data NULL" : "", out_null ? ", out NULL" : "",
             pool_null ? ", pool NULL" : "");
    check_rc(call, rc, allowed);
    if (rc != 0) {
        if (kind_counted(kind) || type == &T_BAD_LOAD)
            rec_forget(data);
        free(data);
        return;
    }
    trace("  ref 0x%016" PRIx64 " -> entry %d", ref, idx);
    CHECK(pp_ref_gen(ref) != 0 && pp_ref_node(ref) < M.nnodes,
          "pp_put gave ref 0x%016" PRIx64 " (node %u, gen %u)", ref, pp_ref_node(ref),
          pp_ref_gen(ref));
    if (want_node != UINT_MAX)
        CHECK(pp_ref_node(ref) == want_node, "PP_ON_NODE(%u) put the entry on node %u",
              want_node, pp_ref_node(ref));
    for (int i = 0; i < M.nissued; i++)
        CHECK(M.issued[i] != ref, "pp_put reissued ref 0x%016" PRIx64
              " (pinpool.h: a stale ref can never name a later entry)", ref);
    M.issued[M.nissued++] = ref;
    ent_t *x = &M.e[M.n++];
    *x = (ent_t){.ref = ref, .size = size, .bytes = bytes, .kind = kind, .type = type,
                 .node = pp_ref_node(ref), .owners = 1, .seed = seed, .lie = lie};
    node_count(M.puts, ref, 1);
}

/* The outcome pp_pin documents for the entry a ref names (i, or -1), with
 * `taken` pins of the same call already on it; `extra` is what the call may
 * have to load (room_certain). */
static unsigned pin_allowed(int i, unsigned flags, uint32_t taken, uint64_t extra)
{
    if (i < 0 || ent_dead(&M.e[i]))
        return A(ESTALE);
    const ent_t *x = &M.e[i];
    if (x->pins + taken >= PP_MAX_PINS)
        return A(EOVERFLOW);
    /* A write that must not wait: a write-out that began before the pins
     * held may still be reading the bytes (not once escaped: pp_get waited
     * for it to stop). */
    unsigned wo = M.swap && (flags & PP_PIN_WRITE) && (flags & PP_PIN_NOWAIT) &&
                          x->size > 0 && (!kind_unswappable(x->kind) || x->kind == K_REFUSE) &&
                          !x->escaped ? A(EAGAIN) : 0;
    if (forced_resident(x) || taken > 0)
        return A_OK | wo;
    /* With swap the entry may have been evicted: a load. */
    unsigned a = A_OK;
    if (flags & PP_PIN_NOWAIT)
        a |= A(EAGAIN);   /* not resident, or (WRITE) being written out */
    else if (!room_certain(extra))
        a |= A(ENOMEM);
    return a;
}

/* pin: ref, flags */
static void op_pin(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    uint8_t fl = u8(r);
    unsigned flags = fl & (PP_PIN_WRITE | PP_PIN_NOWAIT);
    if (fl & 0x04)
        flags |= 0x4u << (fl >> 6);       /* an unknown flag */
    bool data_null = fl & 0x08, pool_null = (fl & 0x30) == 0x30, plain = fl & 0x10;
    int i = classify(ref);
    unsigned allowed;
    if ((flags & ~(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0 || pool_null)
        allowed = A(EINVAL);
    else
        allowed = pin_allowed(i, flags, 0, i >= 0 ? M.e[i].size : 0);
    void *p = NULL;
    int rc = plain ? (pp_pin)(pool_null ? NULL : M.pool, ref, flags, data_null ? NULL : &p)
                   : pp_pin(pool_null ? NULL : M.pool, ref, flags, data_null ? NULL : &p);
    char call[128];
    snprintf(call, sizeof call, "pp_pin(0x%016" PRIx64 " [entry %d], 0x%x%s%s)", ref, i, flags,
             data_null ? ", data NULL" : "", pool_null ? ", pool NULL" : "");
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    ent_t *x = &M.e[i];
    pinned(x, data_null ? NULL : p, flags);
    node_count(M.pins, ref, 1);
    trk_add(ref);
}

/* unpin: ref, flags */
static void op_unpin(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    int i = classify(ref);
    unsigned allowed;
    if (pool_null)
        allowed = A(EINVAL);
    else if (i < 0)
        allowed = A(ESTALE);       /* invalid, reclaimed, or dead with no pin left */
    else if (M.e[i].pins == 0)
        allowed = A(ENOTPINNED);   /* alive: a dead entry with no pins is gone */
    else
        allowed = A_OK;
    int rc = pp_unpin(pool_null ? NULL : M.pool, ref);
    char call[96];
    snprintf(call, sizeof call, "pp_unpin(0x%016" PRIx64 " [entry %d])", ref, i);
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    unpinned(&M.e[i]);
    node_count(M.unpins, ref, 1);
    trk_del(ref);
}

static void op_retain(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    int i = classify(ref);
    unsigned allowed;
    if (pool_null)
        allowed = A(EINVAL);
    else if (i < 0 || ent_dead(&M.e[i]))
        allowed = A(ESTALE);
    else if (M.e[i].owners == PP_MAX_OWNERS)
        allowed = A(EOVERFLOW);
    else
        allowed = A_OK;
    int rc = pp_retain(pool_null ? NULL : M.pool, ref);
    char call[96];
    snprintf(call, sizeof call, "pp_retain(0x%016" PRIx64 " [entry %d])", ref, i);
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    M.e[i].owners++;
    node_count(M.retains, ref, 1);
}

static void do_release(pp_pool_t *pool, pp_ref_t ref)
{
    int i = classify(ref);
    unsigned allowed;
    if (pool == NULL)
        allowed = A(EINVAL);
    else if (i < 0 || ent_dead(&M.e[i]))
        allowed = A(ESTALE);       /* a release past zero */
    else
        allowed = A_OK;
    int rc = pp_release(pool, ref);
    char call[96];
    snprintf(call, sizeof call, "pp_release(0x%016" PRIx64 " [entry %d])", ref, i);
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    ent_t *x = &M.e[i];
    x->owners--;
    node_count(M.releases, ref, 1);
    if (x->owners == 0 && x->pins == 0)
        ent_gone(x);
}

static void op_release(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    do_release(pool_null ? NULL : M.pool, ref);
}

/* get: ref, flags */
static void op_get(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    uint8_t fl = u8(r);
    bool data_null = (fl & 0x0f) == 0x0e, pool_null = (fl & 0x0f) == 0x0f;
    int i = classify(ref);
    unsigned allowed;
    if (data_null || pool_null)
        allowed = A(EINVAL);
    else if (i < 0 || ent_dead(&M.e[i]))
        allowed = A(ESTALE);
    else if (forced_resident(&M.e[i]) || room_certain(M.e[i].size))
        allowed = A_OK;
    else
        allowed = A_OK | A(ENOMEM);
    void *p = NULL;
    int rc = pp_get(pool_null ? NULL : M.pool, ref, data_null ? NULL : &p);
    char call[96];
    snprintf(call, sizeof call, "pp_get(0x%016" PRIx64 " [entry %d]%s%s)", ref, i,
             data_null ? ", data NULL" : "", pool_null ? ", pool NULL" : "");
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    ent_t *x = &M.e[i];
    CHECK(p != NULL, "pp_get gave NULL data");
    if (x->pins > 0 && x->pin_ptr != NULL)
        CHECK(p == x->pin_ptr, "pp_get of a pinned entry gave another pointer");
    if (x->escaped && x->esc_ptr != NULL)
        CHECK(p == x->esc_ptr, "pp_get of an escaped entry gave another pointer "
              "(escaped data never moves)");
    check_bytes(x, p, "data from pp_get");
    x->escaped = true;
    x->esc_ptr = p;
    x->esc_qsbr = M.qsbr ? M.qsbr_epoch : 0;
    node_count(M.gets, ref, 1);
}

/* stat: ref, flags */
static void op_stat(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    uint8_t fl = u8(r);
    bool out_null = (fl & 0x0f) == 0x0e, pool_null = (fl & 0x0f) == 0x0f;
    int i = classify(ref);
    pp_entry_info_t in;
    int rc = pp_stat(pool_null ? NULL : M.pool, ref, out_null ? NULL : &in);
    char call[96];
    snprintf(call, sizeof call, "pp_stat(0x%016" PRIx64 " [entry %d])", ref, i);
    /* A ref of a gone entry: ESTALE, or (swap) described while its I/O ends. */
    int g = -1;
    if (i < 0 && M.swap)
        for (int k = M.n; k-- > 0 && g < 0;)
            if (M.e[k].gone && M.e[k].ref == ref)
                g = k;
    check_rc(call, rc, out_null || pool_null ? A(EINVAL)
                       : i >= 0              ? A_OK
                       : g >= 0              ? A(ESTALE) | A_OK
                                             : A(ESTALE));
    if (rc == 0 && i >= 0)
        check_info(&M.e[i], &in);
    else if (rc == 0)
        check_gone_info(&M.e[g], &in);
    /* Bits 4-5: make a live entry hot, or end its hot mode (src/hot.c); no
     * call's result may change, so the model does not know. */
    if (i >= 0 && !pool_null && (fl & 0x30) != 0 && (fl & 0x30) != 0x30) {
        int h = pp__debug_hot(M.pool, ref, (fl & 0x30) == 0x10 ? 1 : 0);
        if (h < 0 && !ent_dead(&M.e[i]))
            fail("pp__debug_hot of live entry %d: %s", i, pp_err_name(h));
    }
}

static void op_prefetch(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    int i = classify(ref);
    int rc = pp_prefetch(pool_null ? NULL : M.pool, ref);
    char call[96];
    snprintf(call, sizeof call, "pp_prefetch(0x%016" PRIx64 " [entry %d])", ref, i);
    check_rc(call, rc,
             pool_null ? A(EINVAL) : (i < 0 || ent_dead(&M.e[i])) ? A(ESTALE) : A_OK);
}

/* What pp_pin_many documents for refs (idx: the entries they name, from
 * classify) with valid arguments and known flags: all or none, the first
 * failing ref's error.  With swap, a stale ref anywhere is found before
 * any load starts. */
static unsigned pin_many_allowed(const pp_ref_t *refs, const int *idx, size_t n,
                                 unsigned flags)
{
    unsigned allowed = A_OK;
    bool any_stale = false, failed = false;
    uint64_t extra = 0;          /* bytes the call may load */
    for (size_t k = 0; k < n; k++) {
        bool first = true;
        for (size_t j = 0; j < k; j++)
            first = first && refs[j] != refs[k];
        if (idx[k] < 0 || ent_dead(&M.e[idx[k]]))
            any_stale = true;
        else if (first && !forced_resident(&M.e[idx[k]]))
            extra += M.e[idx[k]].size;
    }
    for (size_t k = 0; k < n && !failed; k++) {
        uint32_t t = 0;
        for (size_t j = 0; j < k; j++)
            t += refs[j] == refs[k];
        unsigned a = pin_allowed(idx[k], flags, t, extra);
        if (!(a & A_OK)) {
            allowed = a;
            failed = true;
        } else {
            allowed |= a;
        }
    }
    if (M.swap && any_stale)
        allowed |= A(ESTALE);
    if (failed)
        allowed &= ~A_OK;
    return allowed;
}

/* A pp_pin_many (or pp_scope_pin_many) of refs succeeded; ptrs is what it
 * wrote, or NULL if the caller passed no data array. */
static void pinned_many(const pp_ref_t *refs, const int *idx, size_t n, unsigned flags,
                        void *const *ptrs)
{
    for (size_t k = 0; k < n; k++) {
        ent_t *x = &M.e[idx[k]];
        bool first = true;
        for (size_t j = 0; j < k; j++)
            if (refs[j] == refs[k]) {
                first = false;
                if (ptrs != NULL)
                    CHECK(ptrs[j] == ptrs[k], "pp_pin_many gave two pointers for one entry");
            }
        /* Contents are rewritten once per entry (duplicates see the same). */
        pinned(x, ptrs == NULL ? NULL : ptrs[k], first ? flags : (flags & ~PP_PIN_WRITE));
        if (flags & PP_PIN_WRITE)
            x->ever_write = true;
        node_count(M.pins, refs[k], 1);
        trk_add(refs[k]);
    }
}

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

static void read_many(rd_t *r, many_args_t *a)
{
    uint8_t cb = u8(r), fl = u8(r);
    a->n = cb % (MAX_MANY + 1);
    a->refs_null = (cb & 0x30) == 0x30;
    a->data_null = cb & 0x40;
    a->flags = fl & (PP_PIN_WRITE | PP_PIN_NOWAIT);
    if (fl & 0x04)
        a->flags |= 0x4u << (fl >> 6);       /* an unknown flag */
    a->first_null = (fl & 0x38) == 0x38;
    a->fl = fl;
    for (size_t k = 0; k < a->n; k++) {
        a->refs[k] = pick_ref(r);
        a->idx[k] = classify(a->refs[k]);
    }
}

/* pin_many: count byte, flags, refs */
static void op_pin_many(rd_t *r)
{
    many_args_t a;
    read_many(r, &a);
    size_t n = a.n;
    bool refs_null = a.refs_null, data_null = a.data_null, pool_null = a.first_null;
    unsigned flags = a.flags;
    uint8_t fl = a.fl;
    pp_ref_t *refs = a.refs;
    int *idx = a.idx;
    unsigned allowed;
    if (pool_null || (refs_null && n > 0) || (flags & ~(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0)
        allowed = A(EINVAL);
    else
        allowed = pin_many_allowed(refs, idx, n, flags);
    void *ptrs[MAX_MANY];
    memset(ptrs, 0, sizeof ptrs);
    bool plain = fl & 0x10;
    pp_pool_t *pool = pool_null ? NULL : M.pool;
    const pp_ref_t *rp = refs_null ? NULL : refs;
    void **dp = data_null ? NULL : ptrs;
    int rc = plain ? (pp_pin_many)(pool, rp, n, flags, dp) : pp_pin_many(pool, rp, n, flags, dp);
    char call[96];
    snprintf(call, sizeof call, "pp_pin_many(n %zu, flags 0x%x%s%s)", n, flags,
             refs_null ? ", refs NULL" : "", data_null ? ", data NULL" : "");
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    pinned_many(refs, idx, n, flags, data_null ? NULL : ptrs);
}

/* unpin_many: count byte, refs */
static void op_unpin_many(rd_t *r)
{
    uint8_t cb = u8(r);
    size_t n = cb % (MAX_MANY + 1);
    bool refs_null = (cb & 0x30) == 0x30, pool_null = (cb & 0xc0) == 0xc0;
    pp_ref_t refs[MAX_MANY];
    int idx[MAX_MANY];
    for (size_t k = 0; k < n; k++) {
        refs[k] = pick_ref(r);
        idx[k] = classify(refs[k]);
    }
    unsigned allowed = A_OK;
    if (pool_null || (refs_null && n > 0)) {
        allowed = A(EINVAL);
    } else {
        for (size_t k = 0; k < n; k++) {
            uint32_t times = 0;
            bool first = true;
            for (size_t j = 0; j < n; j++) {
                if (refs[j] == refs[k]) {
                    times++;
                    if (j < k)
                        first = false;
                }
            }
            if (!first)
                continue;
            if (idx[k] < 0) {
                allowed = A(ESTALE);
                break;
            }
            if (M.e[idx[k]].pins < times) {
                allowed = A(ENOTPINNED);
                break;
            }
        }
    }
    int rc = pp_unpin_many(pool_null ? NULL : M.pool, refs_null ? NULL : refs, n, NULL);
    char call[96];
    snprintf(call, sizeof call, "pp_unpin_many(n %zu%s, NULL)", n, refs_null ? ", refs NULL" : "");
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    for (size_t k = 0; k < n; k++) {
        unpinned(&M.e[idx[k]]);
        node_count(M.unpins, refs[k], 1);
        trk_del(refs[k]);
    }
}

static void op_quiescent(rd_t *r)
{
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    pp_quiescent(pool_null ? NULL : M.pool);
    trace("pp_quiescent(%s)", pool_null ? "NULL" : "pool");
    /* A registration that could not allocate: not in QSBR mode. */
    if (!pool_null && !fault_fired()) {
        M.qsbr = true;
        M.qsbr_epoch++;
    }
}

static void op_stats(rd_t *r)
{
    uint8_t fl = u8(r);
    if ((fl & 0x0f) == 0x0f) {
        pp_stats_t st;
        check_rc("pp_pool_stats(NULL, st)", pp_pool_stats(NULL, &st), A(EINVAL));
        check_rc("pp_pool_stats(pool, NULL)", pp_pool_stats(M.pool, NULL), A(EINVAL));
        return;
    }
    check_stats(false);
    if (fl & 1)
        check_all_entries();
}

static void op_drain(rd_t *r)
{
    static const int timeouts[4] = {-1, 0, 1, DRAIN_MS};
    uint8_t fl = u8(r);
    int to = timeouts[fl & 3];
    int rc = pp_pool_drain(M.pool, to);
    char call[64];
    snprintf(call, sizeof call, "pp_pool_drain(%d)", to);
    check_rc(call, rc, to == 0 || to == 1 ? A_OK | A(EBUSY) : A_OK);
    M.qsbr_epoch++;               /* the section was ended */
    if (rc == 0 && !M.swap) {
        /* Everything gone was queued at once: now freed. */
        for (int i = 0; i < M.n; i++)
            if (M.e[i].gone)
                M.e[i].freed_known = true;
    }
    if (fl & 4)
        check_stats(false);
}

static void op_thread_exit(rd_t *r)
{
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    if (pool_null) {
        check_rc("pp_thread_exit(NULL)", pp_thread_exit(NULL), A(EINVAL));
        return;
    }
    size_t mine = 0;
    for (size_t k = 0; k < M.ntrk; k++)
        if (M.trk[k].reg == M.reg)
            mine++;
    int rc = pp_thread_exit(M.pool);
    check_rc("pp_thread_exit", rc, mine > 0 ? A(EBUSY) : A_OK);
    reports_expect(&M.report_mark, (int)mine, "pp_thread_exit with pins held (PP_TRACK_PINS)");
    for (size_t k = 0; k < M.ntrk; k++)
        if (M.trk[k].reg == M.reg)
            M.trk[k].reg = 0;
    M.reg++;
    M.qsbr = false;
    M.qsbr_epoch++;
}

/* touch: entry, flags -- reads (and may write) data got by pp_get, while
 * pinpool.h says it is valid: an owner or a pin is held, or this thread is
 * in QSBR mode and has not called pp_quiescent since. */
static void op_touch(rd_t *r)
{
    uint8_t s = u8(r), fl = u8(r);
    int cand[MAX_ENTS], k = 0;
    for (int i = 0; i < M.n; i++) {
        ent_t *x = &M.e[i];
        if (x->esc_ptr == NULL)
            continue;
        bool held = !x->gone && (x->owners > 0 || x->pins > 0);
        bool qsbr = x->esc_qsbr != 0 && x->esc_qsbr == M.qsbr_epoch;
        if (held || qsbr)
            cand[k++] = i;
    }
    if (k == 0)
        return;
    ent_t *x = &M.e[cand[s % k]];
    trace("touch entry %d (%s)", (int)(x - M.e), x->gone ? "gone, QSBR" : "owned");
    check_bytes(x, x->esc_ptr, x->gone ? "escaped data in a QSBR section after the last release"
                                       : "escaped data");
    if ((fl & 1) && !x->gone && x->owners > 0)
        rewrite(x, x->esc_ptr);
}

static void op_misc(rd_t *r)
{
    uint8_t sub = u8(r);
    switch (sub % 6) {
    case 0: {
        int v = (int)u32(r);
        const char *s = pp_strerror(v), *nm = pp_err_name(v);
        CHECK(s != NULL && nm != NULL, "pp_strerror/pp_err_name(%d) gave NULL", v);
        if (v == 0)
            CHECK(strcmp(nm, "PP_OK") == 0, "pp_err_name(0) = %s", nm);
        else if (v < 0 && v >= PP_EDEADLK)   /* the last code */
            CHECK(strncmp(nm, "PP_E", 4) == 0 && strcmp(nm, "PP_E?") != 0 &&
                      strcmp(s, "unknown error") != 0,
                  "pp_err_name(%d) = %s", v, nm);
        else
            CHECK(strcmp(nm, "PP_E?") == 0 && strcmp(s, "unknown error") == 0,
                  "unknown code %d: %s / %s", v, nm, s);
        break;
    }
    case 1: {
        char buf[4] = {0};
        size_t n = u8(r) & 3;
        CHECK(pp_write(NULL, buf, n) == PP_EINVAL && pp_write(NULL, NULL, 0) == PP_EINVAL,
              "pp_write(NULL) != PP_EINVAL");
        CHECK(pp_read(NULL, buf, n) == PP_EINVAL && pp_read(NULL, NULL, 0) == PP_EINVAL,
              "pp_read(NULL) != PP_EINVAL");
        CHECK(pp_read_left(NULL) == 0, "pp_read_left(NULL) != 0");
        break;
    }
    case 2: {
        /* NULL pool for every call. */
        pp_ref_t ref = pick_ref(r);
        void *p;
        pp_entry_info_t in;
        pp_stats_t st;
        pp_ref_t out;
        char d;
        check_rc("pp_put(NULL)", pp_put(NULL, &d, 1, NULL, 0, &out), A(EINVAL));
        check_rc("pp_retain(NULL)", pp_retain(NULL, ref), A(EINVAL));
        check_rc("pp_release(NULL)", pp_release(NULL, ref), A(EINVAL));
        check_rc("pp_pin(NULL)", pp_pin(NULL, ref, 0, &p), A(EINVAL));
        check_rc("pp_pin(NULL) plain", (pp_pin)(NULL, ref, 0, NULL), A(EINVAL));
        check_rc("pp_unpin(NULL)", pp_unpin(NULL, ref), A(EINVAL));
        check_rc("pp_pin_many(NULL)", pp_pin_many(NULL, &ref, 1, 0, NULL), A(EINVAL));
        check_rc("pp_pin_many(NULL, n 0)", pp_pin_many(NULL, NULL, 0, 0, NULL), A(EINVAL));
        check_rc("pp_unpin_many(NULL, NULL)", pp_unpin_many(NULL, &ref, 1, NULL), A(EINVAL));
        check_rc("pp_prefetch(NULL)", pp_prefetch(NULL, ref), A(EINVAL));
        check_rc("pp_get(NULL)", pp_get(NULL, ref, &p), A(EINVAL));
        check_rc("pp_stat(NULL)", pp_stat(NULL, ref, &in), A(EINVAL));
        check_rc("pp_pool_stats(NULL)", pp_pool_stats(NULL, &st), A(EINVAL));
        check_rc("pp_pool_drain(NULL)", pp_pool_drain(NULL, 0), A(EINVAL));
        check_rc("pp_thread_exit(NULL)", pp_thread_exit(NULL), A(EINVAL));
        check_rc("pp_pool_destroy(NULL)", pp_pool_destroy(NULL), A(EINVAL));
        pp_quiescent(NULL);
        break;
    }
    case 3: {
        /* Refs nobody holds, and 0, with valid arguments otherwise. */
        pp_ref_t ref = pick_ref(r);
        if (classify(ref) >= 0)
            break;
        void *p;
        pp_entry_info_t in;
        check_rc("pp_pin(stale, NOWAIT|WRITE)", pp_pin(M.pool, ref, 3, &p), A(ESTALE));
        check_rc("pp_pin_many(stale)", pp_pin_many(M.pool, &ref, 1, 0, NULL), A(ESTALE));
        check_rc("pp_unpin_many(stale, NULL)", pp_unpin_many(M.pool, &ref, 1, NULL), A(ESTALE));
        check_rc("pp_get(stale)", pp_get(M.pool, ref, &p), A(ESTALE));
        bool io = false;          /* gone, maybe still in its last I/O (swap) */
        for (int k = 0; k < M.n && M.swap; k++)
            io = io || (M.e[k].gone && M.e[k].ref == ref);
        check_rc("pp_stat(stale)", pp_stat(M.pool, ref, &in), io ? A(ESTALE) | A_OK : A(ESTALE));
        check_rc("pp_retain(stale)", pp_retain(M.pool, ref), A(ESTALE));
        check_rc("pp_release(stale)", pp_release(M.pool, ref), A(ESTALE));
        check_rc("pp_unpin(stale)", pp_unpin(M.pool, ref), A(ESTALE));
        check_rc("pp_prefetch(stale)", pp_prefetch(M.pool, ref), A(ESTALE));
        break;
    }
    case 4: {
        /* pp_pool_create's documented argument errors. */
        pp_options_t o = PP_OPTIONS_INIT;
        pp_pool_t *p2 = NULL;
        o.topology = TOPO1;
        o.report = report_cb;
        int v = u8(r) % 6;
        int rc;
        switch (v) {
        case 0:
            check_rc("pp_pool_create(out NULL)", pp_pool_create(&o, NULL), A(EINVAL));
            break;
        case 1:
            o.flags = 0x100u;
            check_rc("pp_pool_create(bad flags)", pp_pool_create(&o, &p2), A(EINVAL));
            break;
        case 2:
            o.swap_dir = g_swapbase;
            check_rc("pp_pool_create(swap_dir, no mem_limit)", pp_pool_create(&o, &p2),
                     A(EINVAL));
            break;
        case 3:
            o.topology = "frob:3 zap:2";
            check_rc("pp_pool_create(bad topology)", pp_pool_create(&o, &p2), A(ETOPOLOGY));
            break;
        case 4:
            o.mem_limit = 4096;
            o.swap_dir = "/nonexistent/pinpool-fuzz";
            rc = pp_pool_create(&o, &p2);
            check_rc("pp_pool_create(missing swap_dir)", rc, A(EIO));
            /* The swap store's failure is reported (also when the device
             * could not allocate: PP_ENOMEM). */
            if (rc == PP_ENOMEM && atomic_load(&g_reports) != M.report_mark)
                reports_expect(&M.report_mark, 1, "pp_pool_create, no memory for the swap store");
            else
                reports_expect(&M.report_mark, rc == PP_EIO, "pp_pool_create with a missing swap_dir");
            break;
        default:
            rc = pp_pool_create(NULL, &p2);
            check_rc("pp_pool_create(NULL options)", rc, A_OK);
            if (rc == 0)
                check_rc("pp_pool_destroy(empty)", pp_pool_destroy(p2), A_OK);
            p2 = NULL;
            break;
        }
        CHECK(p2 == NULL, "a failed pp_pool_create left a pool");
        break;
    }
    default: {
        /* Misuse of flags: unknown pin flags on a good ref; bad node. */
        pp_ref_t ref = pick_ref(r);
        void *p;
        check_rc("pp_pin(flags 0x80)", pp_pin(M.pool, ref, 0x80u, &p), A(EINVAL));
        check_rc("pp_pin_many(flags 0x80)", pp_pin_many(M.pool, &ref, 1, 0x80u, NULL),
                 A(EINVAL));
        break;
    }
    }
}

static void op_set_owners(rd_t *r)
{
    uint8_t s = u8(r), v = u8(r);
    if (M.n == 0)
        return;
    ent_t *x = &M.e[s % M.n];
    uint32_t owners = v % 3 == 0 ? PP_MAX_OWNERS : v % 3 == 1 ? PP_MAX_OWNERS - 1 : 2;
    int rc = pp__debug_set_owners(M.pool, x->ref, owners);
    check_rc("pp__debug_set_owners", rc, x->gone || ent_dead(x) ? A(ESTALE) : A_OK);
    if (rc == 0)
        x->owners = owners;
}

static void op_set_gen(rd_t *r)
{
    uint8_t s = u8(r), v = u8(r);
    if (M.n == 0 || M.swap)        /* the hook is single-threaded: no swap thread */
        return;
    ent_t *x = &M.e[s % M.n];
    uint32_t cur = pp_ref_gen(x->ref), gen;
    switch (v % 4) {
    case 0: gen = UINT32_MAX; break;
    case 1: gen = UINT32_MAX - 1; break;
    case 2: gen = 0x80000000u; break;
    default: gen = cur + 1 + (v >> 2); break;
    }
    if (gen <= cur)
        gen = cur == UINT32_MAX ? cur : cur + 1;
    if (gen == cur)
        return;
    pp_ref_t out = 0;
    bool ok = !x->gone && !ent_dead(x) && x->pins == 0;
    int rc = pp__debug_set_gen(M.pool, x->ref, gen, &out);
    check_rc("pp__debug_set_gen", rc, ok ? A_OK : A(ESTALE));
    if (rc != 0)
        return;
    CHECK(pp_ref_gen(out) == gen, "pp__debug_set_gen gave gen %u", pp_ref_gen(out));
    if (M.nalias < MAX_ALIASES)
        M.alias[M.nalias++] = x->ref;
    for (int i = 0; i < M.nissued; i++)
        CHECK(M.issued[i] != out, "pp__debug_set_gen reissued a ref");
    M.issued[M.nissued++] = out;
    x->ref = out;
}

/* overflow: magic, entry -- PP_MAX_PINS pins on one entry, then one more.
 * A million pins and unpins take about a second under the sanitizers: only
 * with config bit 7 and the magic byte 'O', once per input. */
static void op_overflow(rd_t *r)
{
    uint8_t magic = u8(r), s = u8(r);
    if (!M.overflow_ok || magic != 'O' || M.overflow_done || M.n == 0)
        return;
    ent_t *x = &M.e[s % M.n];
    if (x->gone || ent_dead(x))
        return;
    M.overflow_done = true;
    atomic_store(&g_fault_left, -1);   /* no injected failure in here */
    uint32_t want = PP_MAX_PINS - x->pins;
    for (size_t k = 0; k < sizeof g_big / sizeof g_big[0]; k++)
        g_big[k] = x->ref;
    uint32_t done = 0;
    while (done < want) {
        size_t n = want - done < 4096 ? want - done : 4096;
        int rc = pp_pin_many(M.pool, g_big, n, 0, NULL);
        check_rc("pp_pin_many(4096 x one ref)", rc,
                 done == 0 ? pin_allowed((int)(x - M.e), 0, 0, x->size) : A_OK);
        if (rc != 0)
            return;
        for (size_t k = 0; k < n; k++)
            trk_add(x->ref);
        done += (uint32_t)n;
        x->pins += (uint32_t)n;
        node_count(M.pins, x->ref, n);
    }
    void *p;
    check_rc("pp_pin(at PP_MAX_PINS)", pp_pin(M.pool, x->ref, 0, &p), A(EOVERFLOW));
    check_rc("pp_pin_many(at PP_MAX_PINS)", pp_pin_many(M.pool, &x->ref, 1, 0, NULL),
             A(EOVERFLOW));
    /* All or none: another live entry first, then the full one. */
    for (int i = 0; i < M.n; i++) {
        ent_t *y = &M.e[i];
        if (y == x || y->gone || ent_dead(y) || !forced_resident(y))
            continue;
        pp_ref_t two[2] = {y->ref, x->ref};
        check_rc("pp_pin_many(ok, full)", pp_pin_many(M.pool, two, 2, 0, NULL), A(EOVERFLOW));
        pp_entry_info_t in;
        check_rc("pp_stat", pp_stat(M.pool, y->ref, &in), A_OK);
        CHECK(in.pins == y->pins, "a failed pp_pin_many left a pin on its first ref");
        break;
    }
    pp_entry_info_t in;
    check_rc("pp_stat(full)", pp_stat(M.pool, x->ref, &in), A_OK);
    CHECK(in.pins == PP_MAX_PINS, "pp_stat: %u pins, PP_MAX_PINS taken", in.pins);
    for (uint32_t k = 0; k < want; k++) {
        int rc = pp_unpin(M.pool, x->ref);
        if (rc != 0)
            check_rc("pp_unpin(back from PP_MAX_PINS)", rc, A_OK);
        trk_del(x->ref);
    }
    x->pins -= want;
    node_count(M.unpins, x->ref, want);
    if (x->pins == 0)
        x->pin_ptr = NULL;
}

/* ------------------------------------------------------------------------ */
/* Scopes                                                                    */
/* ------------------------------------------------------------------------ */

/* Whether k more refs need a bigger ledger (src/scope.c: PP_SCOPE_INLINE
 * inline, then the heap, doubling; never smaller until the end). */
static bool ledger_grows(const mscope_t *m, size_t k)
{
    return k > (size_t)(m->cap - m->n);
}

static void ledger_grow(mscope_t *m, size_t k)
{
    uint64_t need = (uint64_t)m->n + k;
    while (m->cap < need)
        m->cap *= 2;
}

static void ledger_push(mscope_t *m, pp_ref_t ref)
{
    CHECK(m->n < LEDGER_MAX, "the model's ledger is full");
    m->led[m->n++] = ref;
}

/* pp_scope_count of every scope of the input, against the model. */
static void scope_check_counts(void)
{
    for (int si = 0; si < NSCOPES; si++) {
        size_t want = M.sc[si].state == SC_OPEN ? M.sc[si].n : 0;
        size_t got = pp_scope_count(&g_scope[si]);
        CHECK(got == want, "pp_scope_count of scope %d (%s): %zu, the model holds %zu pins", si,
              sc_names[M.sc[si].state], got, want);
    }
}

/* Whether the scope's ledger must grow for k more refs, and whether that
 * growth fails: it is the first allocation the call makes (the claim
 * allocates nothing), so it fails if and only if an injected failure is
 * due at the next allocation. */
static bool scope_grow_fails(const mscope_t *m, size_t k, bool *grows)
{
    *grows = m->state == SC_OPEN && ledger_grows(m, k);
    return *grows && atomic_load(&g_fault_left) == 0;
}

/* pp_scope_end of scope si, then the model: each ref of the ledger in its
 * order is dropped as pp_unpin would drop it (pp_unpin_many of the whole
 * ledger does the same when every pin is still there; otherwise the scope
 * drops them one by one).  A pin dropped behind the scope's back (pp_unpin
 * of a ref it holds) is missing then: the entry holds fewer pins than the
 * scope has occurrences of its ref, and those occurrences fail with
 * pp_unpin's error -- PP_ENOTPINNED for a live entry, PP_ESTALE for a dead
 * or reclaimed one.  pinpool.h: the pins are dropped "in any order" and
 * the first such error is returned, so any error that occurs may be the
 * one.  No other error: an unpin fails only if a pin was dropped behind
 * the scope's back.  An injected allocation failure (the registration
 * the end makes on a new thread) is PP_ENOMEM with nothing done. */
static void scope_end(int si, const char *why)
{
    mscope_t *m = &M.sc[si];
    unsigned allowed, errs = 0;
    uint32_t n = m->n;
    int rc = pp_scope_end(&g_scope[si]);
    char call[128];
    snprintf(call, sizeof call, "pp_scope_end(scope %d, %u pins%s%s)", si, n,
             why != NULL ? ", " : "", why != NULL ? why : "");
    if (m->state == SC_OPEN && rc == PP_ENOMEM && fault_fired()) {
        /* pinpool.h: an end whose thread could not register ends nothing;
         * the scope stays open with its pins listed (pp_scope_count and
         * every entry's pins are checked against the unchanged model) */
        trace("%s: an injected allocation failure: the scope stays open", call);
        return;
    }
    if (m->state != SC_OPEN) {
        allowed = A(EINVAL);          /* ended, never initialized, or without a pool */
    } else {
        for (uint32_t k = 0; k < m->n; k++) {
            pp_ref_t ref = m->led[k];
            int i = classify(ref);
            if (i < 0) {
                errs |= A(ESTALE);
            } else if (M.e[i].pins == 0) {
                errs |= A(ENOTPINNED);   /* alive: a dead entry without pins is gone */
            } else {
                unpinned(&M.e[i]);
                node_count(M.unpins, ref, 1);
                trk_del(ref);
            }
        }
        allowed = errs != 0 ? errs : A_OK;
        m->state = SC_ENDED;
        m->n = 0;
        m->cap = PP_SCOPE_INLINE;
    }
    check_rc_set(call, rc, allowed, false);
}

/* Ends the open scopes (before the pool is destroyed: their ledgers'
 * memory is freed by pp_scope_end only). */
static void scopes_end_open(const char *why)
{
    for (int si = 0; si < NSCOPES; si++)
        if (M.sc[si].state == SC_OPEN)
            scope_end(si, why);
}

/* scope: sub-op byte (bit 0: scope 0 or 1; bits 1-3: what), then its
 * arguments.  Scopes are zeroed memory at the start of an input. */
static void op_scope(rd_t *r)
{
    uint8_t sub = u8(r);
    int si = sub & 1;
    mscope_t *m = &M.sc[si];
    pp_scope_t *s = &g_scope[si];
    char call[160];
    switch ((sub >> 1) & 7) {
    case 0: {
        /* init: flags (bit 0: the plain function, no call site; bit 1: a
         * NULL pool).  Not on an open scope: its pins would be lost and
         * its ledger's memory leaked (pinpool.h: initialized again after
         * pp_scope_end). */
        uint8_t fl = u8(r);
        if (m->state == SC_OPEN) {
            trace("scope %d is open: not initialized again", si);
            break;
        }
        pp_pool_t *pool = (fl & 2) ? NULL : M.pool;
        if (fl & 1)
            (pp_scope_init)(s, pool);
        else
            pp_scope_init(s, pool);
        trace("pp_scope_init(scope %d, %s%s) of a %s scope", si, pool ? "pool" : "NULL",
              (fl & 1) ? ", no call site" : "", sc_names[m->state]);
        m->state = pool ? SC_OPEN : SC_NOPOOL;
        m->n = 0;
        m->cap = PP_SCOPE_INLINE;
        break;
    }
    case 1: {
        /* pin: ref, flags (as op pin; (fl & 0x30) == 0x30: a NULL scope) */
        pp_ref_t ref = pick_ref(r);
        uint8_t fl = u8(r);
        unsigned flags = fl & (PP_PIN_WRITE | PP_PIN_NOWAIT);
        if (fl & 0x04)
            flags |= 0x4u << (fl >> 6);
        bool data_null = fl & 0x08, scope_null = (fl & 0x30) == 0x30;
        int i = classify(ref);
        unsigned allowed;
        bool grows = false, grow_fails = false;
        if (scope_null || m->state != SC_OPEN) {
            allowed = A(EINVAL);
        } else {
            /* pp_pin's outcomes, plus PP_ENOMEM when the ledger cannot
             * grow: then no pin (the call can fail otherwise first). */
            allowed = (flags & ~(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0
                          ? A(EINVAL)
                          : pin_allowed(i, flags, 0, i >= 0 ? M.e[i].size : 0);
            grow_fails = scope_grow_fails(m, 1, &grows);
            if (grow_fails)
                allowed = (allowed & ~A_OK) | A(ENOMEM);
        }
        void *p = NULL;
        int rc = pp_scope_pin(scope_null ? NULL : s, ref, flags, data_null ? NULL : &p);
        snprintf(call, sizeof call, "pp_scope_pin(scope %d %s, %u pins, 0x%016" PRIx64
                 " [entry %d], 0x%x%s%s)", si, scope_null ? "NULL" : sc_names[m->state], m->n,
                 ref, i, flags, data_null ? ", data NULL" : "", grows ? ", ledger grows" : "");
        check_rc(call, rc, allowed);
        if (grows && !grow_fails)
            ledger_grow(m, 1);     /* room is made before the pin */
        if (rc != 0)
            break;
        pinned(&M.e[i], data_null ? NULL : p, flags);
        node_count(M.pins, ref, 1);
        trk_add(ref);
        ledger_push(m, ref);
        break;
    }
    case 2: {
        /* pin_many: count byte, flags, refs (as op pin_many; (fl & 0x38) ==
         * 0x38: a NULL scope) */
        many_args_t a;
        read_many(r, &a);
        size_t n = a.n;
        bool refs_null = a.refs_null, data_null = a.data_null, scope_null = a.first_null;
        unsigned flags = a.flags;
        pp_ref_t *refs = a.refs;
        int *idx = a.idx;
        unsigned allowed;
        bool grows = false, grow_fails = false;
        if (scope_null || m->state != SC_OPEN || (refs_null && n > 0)) {
            allowed = A(EINVAL);
        } else {
            /* pinpool.h: room for all n is made first, so PP_ENOMEM takes
             * no pin. */
            allowed = (flags & ~(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0
                          ? A(EINVAL)
                          : pin_many_allowed(refs, idx, n, flags);
            grow_fails = scope_grow_fails(m, n, &grows);
            if (grow_fails)
                allowed = (allowed & ~A_OK) | A(ENOMEM);
        }
        void *ptrs[MAX_MANY];
        memset(ptrs, 0, sizeof ptrs);
        int rc = pp_scope_pin_many(scope_null ? NULL : s, refs_null ? NULL : refs, n, flags,
                                   data_null ? NULL : ptrs);
        snprintf(call, sizeof call,
                 "pp_scope_pin_many(scope %d %s, %u pins, n %zu, flags 0x%x%s%s%s)", si,
                 scope_null ? "NULL" : sc_names[m->state], m->n, n, flags,
                 refs_null ? ", refs NULL" : "", data_null ? ", data NULL" : "",
                 grows ? ", ledger grows" : "");
        check_rc(call, rc, allowed);
        if (grows && !grow_fails)
            ledger_grow(m, n);
        if (rc != 0)
            break;
        pinned_many(refs, idx, n, flags, data_null ? NULL : ptrs);
        for (size_t k = 0; k < n; k++)
            ledger_push(m, refs[k]);
        break;
    }
    case 3: {
        /* unpin: ref, flags ((b & 0x0f) == 0x0f: a NULL scope).  Drops the
         * most recent pin of ref the scope holds; PP_ENOTPINNED if it holds
         * none (even if the entry is pinned otherwise); pp_unpin's errors
         * (the pin stays recorded) if the pin was dropped behind its back. */
        pp_ref_t ref = pick_ref(r);
        bool scope_null = (u8(r) & 0x0f) == 0x0f;
        int i = classify(ref);
        uint32_t pos = 0;
        unsigned allowed;
        if (scope_null || m->state != SC_OPEN) {
            allowed = A(EINVAL);
        } else {
            pos = m->n;
            while (pos > 0 && m->led[pos - 1] != ref)
                pos--;
            if (pos == 0)
                allowed = A(ENOTPINNED);
            else if (i < 0)
                allowed = A(ESTALE);
            else if (M.e[i].pins == 0)
                allowed = A(ENOTPINNED);
            else
                allowed = A_OK;
        }
        int rc = pp_scope_unpin(scope_null ? NULL : s, ref);
        snprintf(call, sizeof call, "pp_scope_unpin(scope %d %s, %u pins, 0x%016" PRIx64
                 " [entry %d]%s)", si, scope_null ? "NULL" : sc_names[m->state], m->n, ref, i,
                 pos == 0 && !scope_null && m->state == SC_OPEN ? ", not in the scope" : "");
        check_rc(call, rc, allowed);
        if (rc != 0)
            break;
        m->led[pos - 1] = m->led[--m->n];
        unpinned(&M.e[i]);
        node_count(M.unpins, ref, 1);
        trk_del(ref);
        break;
    }
    case 4:
        scope_end(si, NULL);
        break;
    case 5:
        /* count: checked after every scope op; here the NULL scope too. */
        CHECK(pp_scope_count(NULL) == 0, "pp_scope_count(NULL) != 0");
        trace("pp_scope_count(scope %d %s) -> %zu", si, sc_names[m->state], pp_scope_count(s));
        break;
    case 6:
        /* zero: the memory of a scope that is not open, zeroed (never
         * initialized as far as the pool can tell). */
        if (m->state == SC_OPEN) {
            trace("scope %d is open: not zeroed", si);
            break;
        }
        memset(s, 0, sizeof *s);
        trace("scope %d (%s) zeroed", si, sc_names[m->state]);
        m->state = SC_ZERO;
        break;
    default: {
        /* NULL scope for every call: ref */
        pp_ref_t ref = pick_ref(r);
        void *p;
        check_rc("pp_scope_pin(NULL)", pp_scope_pin(NULL, ref, 0, &p), A(EINVAL));
        check_rc("pp_scope_pin_many(NULL)", pp_scope_pin_many(NULL, &ref, 1, 0, NULL), A(EINVAL));
        check_rc("pp_scope_pin_many(NULL, n 0)", pp_scope_pin_many(NULL, NULL, 0, 0, NULL),
                 A(EINVAL));
        check_rc("pp_scope_unpin(NULL)", pp_scope_unpin(NULL, ref), A(EINVAL));
        check_rc("pp_scope_end(NULL)", pp_scope_end(NULL), A(EINVAL));
        CHECK(pp_scope_count(NULL) == 0, "pp_scope_count(NULL) != 0");
        break;
    }
    }
    scope_check_counts();
}

/* destroy: flags.  Refused while pinned (the pool stays usable). */
static bool op_destroy(rd_t *r)
{
    uint8_t fl = u8(r);
    if ((fl & 0x0f) == 0x0f) {
        check_rc("pp_pool_destroy(NULL)", pp_pool_destroy(NULL), A(EINVAL));
        return false;
    }
    uint64_t pinned_ents = 0, pins = 0, owned[2] = {0, 0};
    for (int i = 0; i < M.n; i++) {
        ent_t *x = &M.e[i];
        if (x->gone)
            continue;
        if (x->pins > 0) {
            pinned_ents++;
            pins += x->pins;
        }
        if (x->owners > 0)
            owned[x->node & 1]++;
    }
    if (pins > PP_MAX_PINS / 2)
        return false;             /* a report line per pin: too many */
    /* Nothing pinned: the destroy will succeed, so the open scopes are
     * ended first (their ledgers may still hold refs whose pins were
     * dropped behind their backs). */
    if (pinned_ents == 0)
        scopes_end_open("before pp_pool_destroy");
    int rc = pp_pool_destroy(M.pool);
    check_rc("pp_pool_destroy", rc, pinned_ents ? A(EBUSY) : A_OK);
    if (rc != 0) {
        /* One line per pinned entry (per pin under PP_TRACK_PINS), then
         * the refusal. */
        reports_expect(&M.report_mark, (int)(1 + (M.track ? pins : pinned_ents)),
                       "pp_pool_destroy refused");
        return false;
    }
    /* Entries still owned: up to 4 lines per node, then a summary. */
    int want = 0;
    for (unsigned n = 0; n < M.nnodes; n++)
        want += owned[n] < 4 ? (int)owned[n] : 4;
    if (owned[0] + owned[1] > 0)
        want++;
    reports_expect(&M.report_mark, want, "pp_pool_destroy with owners left");
    check_after_destroy();
    return true;
}

static void op_thread(rd_t *r);

/* Runs one op; true if it destroyed the pool. */
static bool run_op(rd_t *in, int op)
{
    g_opname = op_names[op];
    switch (op) {
    case OP_PUT: op_put(in); break;
    case OP_PIN: op_pin(in); break;
    case OP_UNPIN: op_unpin(in); break;
    case OP_RETAIN: op_retain(in); break;
    case OP_RELEASE: op_release(in); break;
    case OP_GET: op_get(in); break;
    case OP_STAT: op_stat(in); break;
    case OP_PREFETCH: op_prefetch(in); break;
    case OP_PIN_MANY: op_pin_many(in); break;
    case OP_UNPIN_MANY: op_unpin_many(in); break;
    case OP_QUIESCENT: op_quiescent(in); break;
    case OP_STATS: op_stats(in); break;
    case OP_DRAIN: op_drain(in); break;
    case OP_THREAD_EXIT: op_thread_exit(in); break;
    case OP_TOUCH: op_touch(in); break;
    case OP_MISC: op_misc(in); break;
    case OP_SET_OWNERS: op_set_owners(in); break;
    case OP_SET_GEN: op_set_gen(in); break;
    case OP_OVERFLOW: op_overflow(in); break;
    case OP_DESTROY: return op_destroy(in);
    case OP_SLEEP: usleep(100u * (1u + (u8(in) & 15))); break;
    case OP_FAULT: {
        /* k: the k-th allocation of a calling thread from now fails (0: the
         * next); 255 disarms. */
        uint8_t k = u8(in);
        atomic_store(&g_fault_left, k == 255 ? -1 : (int)(k & 15));
        trace("fault after %d allocations", k == 255 ? -1 : (int)(k & 15));
        break;
    }
    case OP_THREAD: op_thread(in); break;
    case OP_SCOPE: op_scope(in); break;
    default: break;
    }
    return false;
}

struct helper {
    rd_t *in;
    int op;
};

static void *helper_main(void *arg)
{
    struct helper *h = arg;
    t_caller = true;
    (void)run_op(h->in, h->op);
    return NULL;   /* its registration ends here (pinpool's exit handler) */
}

/* thread: op -- runs the next op on a new thread, which then exits: pins
 * taken on one thread are dropped on another, a thread registers on its
 * first call and is unregistered at its exit (PP_TRACK_PINS reports the
 * pins it still holds then). */
static void op_thread(rd_t *r)
{
    int sub = op_of(u8(r));
    if (sub == OP_THREAD || sub == OP_DESTROY || sub == OP_OVERFLOW)
        return;
    bool qsbr = M.qsbr;
    uint64_t reg = M.reg, epoch = M.qsbr_epoch;
    M.qsbr = false;                        /* a new thread: not in QSBR mode */
    M.reg = ((uint64_t)1 << 40) + ++M.helper_reg;
    M.qsbr_epoch = ((uint64_t)1 << 50) + M.helper_reg;
    struct helper h = {r, sub};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, helper_main, &h) == 0, "pthread_create");
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    g_opname = "thread";
    size_t held = 0;
    for (size_t k = 0; k < M.ntrk; k++) {
        if (M.trk[k].reg == M.reg) {
            M.trk[k].reg = 0;              /* reported at its exit */
            held++;
        }
    }
    reports_expect(&M.report_mark, (int)held, "a thread that exits with pins (PP_TRACK_PINS)");
    M.qsbr = qsbr;
    M.reg = reg;
    M.qsbr_epoch = epoch;
}

/* ------------------------------------------------------------------------ */
/* One input                                                                 */
/* ------------------------------------------------------------------------ */

static void finish(void)
{
    g_opname = "finish";
    /* Every open scope, every pin, then every owner. */
    scopes_end_open("finish");
    for (int i = 0; i < M.n; i++) {
        ent_t *x = &M.e[i];
        while (!x->gone && x->pins > 0) {
            check_rc("pp_unpin(finish)", pp_unpin(M.pool, x->ref), A_OK);
            node_count(M.unpins, x->ref, 1);
            trk_del(x->ref);
            unpinned(x);
        }
    }
    for (int i = 0; i < M.n; i++) {
        ent_t *x = &M.e[i];
        if (x->gone || x->owners == 0)
            continue;
        if (x->owners > 1) {
            check_rc("pp__debug_set_owners(1)", pp__debug_set_owners(M.pool, x->ref, 1), A_OK);
            x->owners = 1;
        }
        do_release(M.pool, x->ref);
        CHECK(x->gone, "entry %d not gone after its last release", i);
    }
    CHECK(M.ntrk == 0, "the model still tracks %zu pins", M.ntrk);
    /* Everything is queued now, or (with swap) will be when the I/O in
     * flight on it ends: one drain waits for both, and must leave nothing. */
    check_rc("pp_pool_drain(finish)", pp_pool_drain(M.pool, DRAIN_MS), A_OK);
    pp_stats_t st;
    check_rc("pp_pool_stats", pp_pool_stats(M.pool, &st), A_OK);
    CHECK(st.total.entries == 0, "pp_pool_drain returned 0 with %" PRIu64 " entries not freed",
          st.total.entries);
    check_all_entries();
    check_stats(true);
    reports_expect(&M.report_mark, 0, "the input");
    int rc = pp_pool_destroy(M.pool);
    check_rc("pp_pool_destroy(finish)", rc, A_OK);
    reports_expect(&M.report_mark, 0, "pp_pool_destroy of an empty pool");
    check_after_destroy();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd_t in = {data, size, 0};
    free(M.trk);
    memset(&M, 0, sizeof M);
    memset(g_scope, 0, sizeof g_scope);   /* every scope was ended (or never opened) */
    M.reg = 1;
    g_nrecs = 0;
    t_caller = true;
    g_opno = 0;
    g_opname = "create";
    atomic_store(&g_reports, 0);
    atomic_store(&g_fault_left, -1);
    (void)fault_fired();

    uint8_t c0 = u8(&in);
    M.mode = c0 & 3;
    M.swap = M.mode >= 2;
    M.compress = M.mode == 3;
    M.track = c0 & 0x10;
    M.overflow_ok = c0 & 0x80;
    M.limit = M.mode == 0 ? 0 : (c0 & 0x40) ? LIMIT_SMALL : LIMIT_BIG;
    M.swap_limit = M.swap && (c0 & 0x20) ? SWAP_LIMIT : 0;
    switch ((c0 >> 2) & 3) {
    case 2: M.topology = TOPO1; break;
    case 3: M.topology = NULL; break;
    default: M.topology = TOPO2; break;
    }
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = M.limit;
    o.swap_dir = M.swap ? g_swapbase : NULL;
    o.swap_limit = M.swap_limit;
    o.topology = M.topology;
    o.flags = (M.track ? PP_TRACK_PINS : 0) | (M.compress ? PP_SWAP_COMPRESS : 0);
    o.report = report_cb;
    if (g_trace)
        fprintf(stderr, "input: %zu bytes; mode %d, limit %zu, swap_limit %" PRIu64
                ", topology %s, track %d\n", size, M.mode, M.limit, M.swap_limit,
                M.topology ? M.topology : "(this machine)", M.track);
    int rc = pp_pool_create(&o, &M.pool);
    check_rc("pp_pool_create", rc, A_OK);
    pp_stats_t st;
    check_rc("pp_pool_stats", pp_pool_stats(M.pool, &st), A_OK);
    M.nnodes = st.nodes;
    CHECK(M.nnodes == (M.topology == TOPO2 ? 2u : M.topology == TOPO1 ? 1u : M.nnodes),
          "topology %s gave %u nodes", M.topology, M.nnodes);
    if (M.nnodes > 2)
        M.nnodes = 2;   /* this machine with more nodes: model counts fold (unused) */

    for (g_opno = 1; g_opno <= MAX_OPS && in.i < in.n; g_opno++) {
        uint8_t ob = u8(&in);
        if (g_trace)
            fprintf(stderr, "op #%d: byte 0x%02x: %s\n", g_opno, ob, op_names[op_of(ob)]);
        if (run_op(&in, op_of(ob))) {
            atomic_store(&g_fault_left, -1);
            free(M.trk);
            M.trk = NULL;
            return 0;
        }
        reports_expect(&M.report_mark, 0, "an op that reports nothing");
        /* pp__pool_is_valid checks across words (hot slots against the
         * entries that hold them) and holds only while no call runs; with
         * swap the swap threads run (their eviction hand demotes hot
         * entries), so only what holds at every instant is checked then
         * (pp_pool_destroy checks the rest once they have stopped). */
        if (M.swap)
            CHECK(pp__pool_words_valid(M.pool), "pp__pool_words_valid: an entry's word "
                  "breaks the invariants of entry.h");
        else
            CHECK(pp__pool_is_valid(M.pool), "pp__pool_is_valid: an entry breaks the "
                  "invariants of entry.h");
    }
    atomic_store(&g_fault_left, -1);
    (void)fault_fired();
    finish();
    free(M.trk);
    M.trk = NULL;
    return 0;
}
