/*
 * fuzz_ops_more.c -- fuzz_api target: the ops drain, thread_exit, touch,
 * misc, set_owners, set_gen, overflow, scope and destroy.
 */
#include "fuzz_api.h"

void op_drain(rd_t *r)
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

void op_thread_exit(rd_t *r)
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
void op_touch(rd_t *r)
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

void op_misc(rd_t *r)
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
        pp_stats_t st = PP_STATS_INIT;
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
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
        check_rc("pp_node_stats(NULL)", pp_node_stats(NULL, 0, &ns), A(EINVAL));
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

void op_set_owners(rd_t *r)
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

void op_set_gen(rd_t *r)
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
void op_overflow(rd_t *r)
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

/* Whether k more refs need a bigger ledger (src/api/scope.c: PP_SCOPE_INLINE
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
void scopes_end_open(const char *why)
{
    for (int si = 0; si < NSCOPES; si++)
        if (M.sc[si].state == SC_OPEN)
            scope_end(si, why);
}

/* scope: sub-op byte (bit 0: scope 0 or 1; bits 1-3: what), then its
 * arguments.  Scopes are zeroed memory at the start of an input. */
void op_scope(rd_t *r)
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
bool op_destroy(rd_t *r)
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
