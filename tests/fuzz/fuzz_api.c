/*
 * fuzz_api.c -- libFuzzer target of pinpool's public API: the input's
 * configuration, its pool, and the loop over its ops.  The rest of the
 * program is in fuzz_model.c, fuzz_check.c, fuzz_ops.c and fuzz_ops_more.c,
 * which share fuzz_api.h.
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
#include "fuzz_api.h"

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

char g_swapbase[256];

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

void at_exit_cleanup(void)
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
void check_after_destroy(void)
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
    pp_stats_t st = PP_STATS_INIT;
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
    pp_stats_t st = PP_STATS_INIT;
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
