/*
 * fuzz_check.c -- fuzz_api target: refs picked from the input, the checks
 * of one entry's bytes and pp_stat, and of the pool's statistics.
 */
#include "fuzz_api.h"

/* ------------------------------------------------------------------------ */
/* Picking refs                                                              */
/* ------------------------------------------------------------------------ */

static pp_ref_t mkref(unsigned node, uint32_t slot, uint32_t gen)
{
    return ((pp_ref_t)(node & 63u) << 58) | ((pp_ref_t)(slot & 0x3FFFFFFu) << 32) | gen;
}

pp_ref_t pick_ref(rd_t *r)
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

void check_bytes(const ent_t *x, const void *p, const char *how)
{
    size_t bad = verify(p, x->bytes, x->seed);
    CHECK(bad == x->bytes, "%s: entry %d (ref 0x%016" PRIx64 ", size %zu) has wrong bytes at "
          "offset %zu", how, (int)(x - M.e), x->ref, x->size, bad);
}

/* New contents, written under a write pin or through an escaped pointer
 * (the caller may write to either). */
void rewrite(ent_t *x, void *p)
{
    x->seed = mix64(x->seed ^ ((uint64_t)g_opno << 40) ^ 0x5eed);
    fill(p, x->bytes, x->seed);
    pthread_mutex_lock(&g_mu);
    g_seed_of[x - M.e] = x->seed;
    pthread_mutex_unlock(&g_mu);
}

/* A pin of x succeeded and gave p (NULL if the caller passed no data). */
void pinned(ent_t *x, void *p, unsigned flags)
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

void unpinned(ent_t *x)
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
void check_gone_info(const ent_t *x, const pp_entry_info_t *in)
{
    int i = (int)(x - M.e);
    CHECK(in->size == x->size && in->type == x->type && in->node == x->node &&
              in->pins == 0 && in->owners == 0 && (in->state & PP_STATE_DEAD) &&
              (in->state & (PP_STATE_LOADING | PP_STATE_EVICTING)),
          "pp_stat described entry %d, dead and unpinned, with pins %u owners %u state 0x%x "
          "(pinpool.h: only while an eviction or load of it is in flight)", i, in->pins,
          in->owners, in->state);
}

void check_info(const ent_t *x, const pp_entry_info_t *in)
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

void check_stats(bool final)
{
    pp_stats_t st = PP_STATS_INIT;
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
        pp_node_stats_t ns = PP_NODE_STATS_INIT;
        check_rc("pp_node_stats", pp_node_stats(M.pool, n, &ns), A_OK);
        const pp_node_stats_t *s = &ns;
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
    /* Each node is read after the totals: only the puts (this thread's
     * own calls) are the same in both reads, until the final drain has
     * stopped the pool's threads too. */
    CHECK(st.total.puts == sum.puts, "stats: total puts are not the sum of the nodes'");
    if (final)
        CHECK(st.total.frees == sum.frees && st.total.entries == sum.entries &&
                  st.total.queued == sum.queued && st.total.resident_bytes == sum.resident_bytes &&
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
void check_all_entries(void)
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
