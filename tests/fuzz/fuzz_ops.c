/*
 * fuzz_ops.c -- fuzz_api target: the op table, and the ops on entries:
 * put, pin, unpin, retain, release, get, stat, prefetch, pin_many,
 * unpin_many, quiescent and stats.
 *
 * pp_pin, pp_unpin, pp_pin_many and pp_unpin_many here are the inline
 * fast paths (pinpool_inline.h, included before the internal headers, so
 * in its users' form); an op's "plain" bit calls the library's function
 * instead, so the model checks both against the same entries.
 */
#include <pinpool_inline.h>

#include "fuzz_api.h"

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

const char *const op_names[OP_COUNT] = {
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
int op_of(uint8_t b)
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
void op_put(rd_t *r)
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
unsigned pin_allowed(int i, unsigned flags, uint32_t taken, uint64_t extra)
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
void op_pin(rd_t *r)
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
void op_unpin(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    uint8_t b = u8(r);
    bool pool_null = (b & 0x0f) == 0x0f, plain = b & 0x10;
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
    int rc = plain ? (pp_unpin)(pool_null ? NULL : M.pool, ref)
                   : pp_unpin(pool_null ? NULL : M.pool, ref);
    char call[96];
    snprintf(call, sizeof call, "pp_unpin(0x%016" PRIx64 " [entry %d]%s)", ref, i,
             plain ? ", plain" : "");
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    unpinned(&M.e[i]);
    node_count(M.unpins, ref, 1);
    trk_del(ref);
}

void op_retain(rd_t *r)
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

void do_release(pp_pool_t *pool, pp_ref_t ref)
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

void op_release(rd_t *r)
{
    pp_ref_t ref = pick_ref(r);
    bool pool_null = (u8(r) & 0x0f) == 0x0f;
    do_release(pool_null ? NULL : M.pool, ref);
}

/* get: ref, flags */
void op_get(rd_t *r)
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
void op_stat(rd_t *r)
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
    /* Bits 4-5: make a live entry hot, or end its hot mode (src/core/hot.c); no
     * call's result may change, so the model does not know. */
    if (i >= 0 && !pool_null && (fl & 0x30) != 0 && (fl & 0x30) != 0x30) {
        int h = pp__debug_hot(M.pool, ref, (fl & 0x30) == 0x10 ? 1 : 0);
        if (h < 0 && !ent_dead(&M.e[i]))
            fail("pp__debug_hot of live entry %d: %s", i, pp_err_name(h));
    }
}

void op_prefetch(rd_t *r)
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
unsigned pin_many_allowed(const pp_ref_t *refs, const int *idx, size_t n,
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
void pinned_many(const pp_ref_t *refs, const int *idx, size_t n, unsigned flags,
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

void read_many(rd_t *r, many_args_t *a)
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
void op_pin_many(rd_t *r)
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

/* unpin_many: count byte (n = cb % 16; 0x30: refs NULL, 0x10 alone: the
 * library's function; 0xc0: pool NULL), refs */
void op_unpin_many(rd_t *r)
{
    uint8_t cb = u8(r);
    size_t n = cb % (MAX_MANY + 1);
    bool refs_null = (cb & 0x30) == 0x30, pool_null = (cb & 0xc0) == 0xc0;
    bool plain = (cb & 0x30) == 0x10;   /* the library's function, not the inline path */
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
    pp_pool_t *pool = pool_null ? NULL : M.pool;
    const pp_ref_t *rp = refs_null ? NULL : refs;
    int rc = plain ? (pp_unpin_many)(pool, rp, n, NULL) : pp_unpin_many(pool, rp, n, NULL);
    char call[96];
    snprintf(call, sizeof call, "pp_unpin_many(n %zu%s, NULL)%s", n, refs_null ? ", refs NULL" : "",
             plain ? " (library)" : "");
    check_rc(call, rc, allowed);
    if (rc != 0)
        return;
    for (size_t k = 0; k < n; k++) {
        unpinned(&M.e[idx[k]]);
        node_count(M.unpins, refs[k], 1);
        trk_del(refs[k]);
    }
}

void op_quiescent(rd_t *r)
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

void op_stats(rd_t *r)
{
    uint8_t fl = u8(r);
    if ((fl & 0x0f) == 0x0f) {
        pp_stats_t st = PP_STATS_INIT;
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
        check_rc("pp_pool_stats(NULL, st)", pp_pool_stats(NULL, &st), A(EINVAL));
        check_rc("pp_pool_stats(pool, NULL)", pp_pool_stats(M.pool, NULL), A(EINVAL));
        check_rc("pp_node_stats(pool, nodes)", pp_node_stats(M.pool, M.nnodes, &ns), A(EINVAL));
        check_rc("pp_node_stats(pool, 0, NULL)", pp_node_stats(M.pool, 0, NULL), A(EINVAL));
        return;
    }
    check_stats(false);
    if (fl & 1)
        check_all_entries();
}
