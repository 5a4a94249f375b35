/*
 * fuzz_model.c -- fuzz_api target: failures and allowed return codes, the
 * input reader, contents, the types and their counting free, save and
 * load, reports, and the model of the pool's entries.
 */
#include "fuzz_api.h"

/* ------------------------------------------------------------------------ */
/* Limits                                                                    */
/* ------------------------------------------------------------------------ */

#define CUST_MAGIC    0x70696e706f6f6cull   /* "pinpool" */

const char *const TOPO2 = "numa:2 pu:1";
const char *const TOPO1 = "pu:1";

/* ------------------------------------------------------------------------ */
/* Failing                                                                   */
/* ------------------------------------------------------------------------ */

int g_opno;                 /* op being run (for messages) */
const char *g_opname = "setup";
bool g_trace;

__attribute__((format(printf, 1, 2), noreturn))
void fail(const char *fmt, ...)
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

__attribute__((format(printf, 1, 2)))
void trace(const char *fmt, ...)
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

/* Injected allocation failures (op fault): the k-th allocation pinpool
 * makes for itself on this thread from now fails.  A call during which
 * one failed may also return PP_ENOMEM (with no effect, as every failed
 * call); the pool's own threads are never failed (their errors are not
 * returned to anyone). */
/* Set on the threads that call the API: the input's thread and the helper
 * of op thread (free functions must never run on them). */
__thread bool t_caller;
atomic_int g_fault_left = -1;
static atomic_uint g_fault_fired, g_fault_seen;

bool fault_fn(size_t size, void *ctx)
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
bool fault_fired(void)
{
    unsigned f = atomic_load(&g_fault_fired);
    return f != atomic_exchange(&g_fault_seen, f);
}

/* rc must be in allowed; if an injected allocation failure happened
 * during the call, PP_ENOMEM is allowed too unless the call cannot fail
 * that way (fault_widens false). */
void check_rc_set(const char *call, int rc, unsigned allowed, bool fault_widens)
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

void check_rc(const char *call, int rc, unsigned allowed)
{
    check_rc_set(call, rc, allowed, true);
}

/* ------------------------------------------------------------------------ */
/* Input                                                                     */
/* ------------------------------------------------------------------------ */

uint8_t u8(rd_t *r) { return r->i < r->n ? r->p[r->i++] : 0; }
uint32_t u32(rd_t *r)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint32_t)u8(r) << (8 * k);
    return v;
}
uint64_t u64(rd_t *r) { uint64_t lo = u32(r); return lo | (uint64_t)u32(r) << 32; }

/* ------------------------------------------------------------------------ */
/* Contents                                                                  */
/* ------------------------------------------------------------------------ */

uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fill(void *p, size_t n, uint64_t seed)
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
size_t verify(const void *p, size_t n, uint64_t seed)
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

static void cnt_free(void *data, size_t size, void *ctx);
static int cust_save(const void *data, size_t size, pp_writer_t *w, void *ctx);
static int cust_load(void **data, size_t size, pp_reader_t *r, void *ctx);
static int refuse_save(const void *data, size_t size, pp_writer_t *w, void *ctx);
static int never_load(void **data, size_t size, pp_reader_t *r, void *ctx);

#define CTX_FREE   ((void *)(uintptr_t)0x1001)
#define CTX_CUSTOM ((void *)(uintptr_t)0x1002)
#define CTX_REFUSE ((void *)(uintptr_t)0x1003)

const pp_type_t T_FLAT = {"fuzz-flat", NULL, NULL, NULL, NULL, 0};
const pp_type_t T_FREE = {"fuzz-free", cnt_free, NULL, NULL, CTX_FREE, 0};
const pp_type_t T_CUSTOM = {"fuzz-custom", cnt_free, cust_save, cust_load, CTX_CUSTOM, 0};
const pp_type_t T_NOSWAP = {NULL, NULL, NULL, NULL, NULL, PP_TYPE_NOSWAP};
const pp_type_t T_REFUSE = {"fuzz-refuse", cnt_free, refuse_save, never_load, CTX_REFUSE, 0};
const pp_type_t T_CUSTOM_NOSWAP = {NULL, cnt_free, cust_save, cust_load, CTX_CUSTOM,
                                          PP_TYPE_NOSWAP};
const pp_type_t T_BAD_SAVE = {"bad", NULL, cust_save, NULL, NULL, 0};
const pp_type_t T_BAD_LOAD = {"bad", cnt_free, NULL, cust_load, CTX_FREE, 0};

bool kind_counted(int k)
{
    return k == K_FREE || k == K_CUSTOM || k == K_REFUSE || k == K_CUSTOM_NOSWAP;
}

/* Never evicted whatever happens (its bytes stay resident). */
bool kind_unswappable(int k)
{
    return k == K_FREE || k == K_NOSWAP || k == K_REFUSE || k == K_CUSTOM_NOSWAP;
}

/* ------------------------------------------------------------------------ */
/* Allocation registry: every buffer handed to a counting free function      */
/* ------------------------------------------------------------------------ */

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
rec_t g_recs[REC_MAX];
int g_nrecs;
uint64_t g_seed_of[MAX_ENTS];      /* contents of each entry, for save/load */
atomic_ulong g_free_calls, g_saves, g_loads;

void rec_add(void *p, size_t size, size_t alloc, int ent)
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
void rec_forget(void *p)
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

atomic_int g_reports;
static char g_last_report[512];

void report_cb(const char *line, void *ctx)
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
void reports_expect(int *mark, int want, const char *why)
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

const char *const sc_names[] = {"zeroed", "open", "open without a pool", "ended"};

struct model M;

pp_scope_t g_scope[NSCOPES];        /* the input's scopes (zeroed per input) */

pp_ref_t g_big[4096];

bool ent_dead(const ent_t *x) { return x->owners == 0; }

/* The entry a ref names now, or -1 (then every call gives PP_ESTALE). */
int classify(pp_ref_t ref)
{
    for (int i = M.n; i-- > 0;)
        if (!M.e[i].gone && M.e[i].ref == ref)
            return i;
    return -1;
}

bool forced_resident(const ent_t *x)
{
    return !M.swap || x->pins > 0 || x->escaped || x->size == 0 || kind_unswappable(x->kind);
}

uint64_t bytes_live(void)
{
    uint64_t s = 0;
    for (int i = 0; i < M.n; i++)
        if (!M.e[i].gone)
            s += M.e[i].size;
    return s;
}

uint64_t bytes_dying(void)
{
    uint64_t s = 0;
    for (int i = 0; i < M.n; i++)
        if (M.e[i].gone && !M.e[i].freed_known)
            s += M.e[i].size;
    return s;
}

bool any_lie(void)
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
bool room_certain(uint64_t extra)
{
    if (!M.swap || M.swap_limit != 0 || deaths_pending())
        return false;
    uint64_t stuck = 0;
    for (int i = 0; i < M.n; i++)
        if (!M.e[i].gone && forced_resident(&M.e[i]))
            stuck += M.e[i].size;
    return stuck + extra <= M.limit - M.limit / 8;
}

void node_count(uint64_t *arr, pp_ref_t ref, uint64_t k)
{
    arr[pp_ref_node(ref) & 1] += k;
}

/* The entry became gone (dead, no pins): queued for its reclaimer. */
void ent_gone(ent_t *x)
{
    x->gone = true;
    M.gone[x->node & 1]++;
}

void trk_add(pp_ref_t ref)
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
void trk_del(pp_ref_t ref)
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
