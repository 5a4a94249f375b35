/*
 * hot.c -- sharded pin counts for contended entries.
 *
 * One counter per entry is the right thing for almost every entry, but when
 * every worker pins the same entry (a broadcast input of a task graph) its
 * cache line moves from core to core on every pin and unpin, and throughput
 * falls below that of one thread.  Such an entry is made HOT: its pins are
 * counted in one of its node's hot slots, a central counter and S shards
 * (one cache line each), each thread counting on its own shard.  Cold
 * entries keep their one word (entry.h); this is the mode switch of Linux's
 * percpu_ref, without its RCU read sections: every counter word carries the
 * tag of the promotion it counts for, so a change is validated in the same
 * compare-and-swap that makes it, as the generation validates a pin.
 *
 * A hot slot (node->hot.lines, PP__HOT_SLOTS per node), S + 1 cache lines:
 *
 *   central, shard[0], ..., shard[S-1]:   tag:32 | CLOSED:1 | count:31
 *
 * The entry's pins word holds HOT and the slot index in place of its count
 * (entry.h).  The slot's tag (in its central word) is the slot's promotion
 * sequence: it grows by one per promotion and a slot whose tag would wrap is
 * retired, so a counter word of an earlier promotion never validates.
 *
 *   promote  (pp__hot_promote; a pinner that met contention): only while no
 *            write pin may be held (!WPIN: a write pin sets it, the unpin
 *            that takes the count to 0 clears it), and the entry is
 *            resident, alive, not being evicted or loaded.  Takes a free
 *            slot, stores its shards (tag+1, 0) and central counter (tag+1,
 *            p), then CAS pw: count p -> HOT | slot.  Every pin counted in
 *            the slot is then a read pin (a write pin demotes the entry
 *            first), so no write needs ordering from one shard to another:
 *            a write pin's unpin always releases on the word.
 *   pin      (pp__hot_pin): one CAS on the caller's shard, (tag, open,
 *            c < cap) -> c + 1; a full or closed shard: the central counter;
 *            both unusable: help demote, then pin the cold way.
 *   unpin    (pp__hot_unpin): one CAS on a counter that holds at least one
 *            pin: the caller's shard, else the central one, else any shard;
 *            counts are interchangeable, no counter goes below 0.  If none
 *            holds a pin: demote, then the exact check of a cold unpin
 *            (PP_ENOTPINNED is only ever decided on the one word).
 *   demote   (pp__hot_demote; a write pin, the last release, the eviction
 *            hand, an overflow, a failed unpin, destroy): close every shard,
 *            then the central counter (CAS open -> CLOSED, the count kept),
 *            sum the frozen counts and CAS pw: HOT | slot -> the sum.  Any
 *            number of threads may demote at once: each close is a CAS, the
 *            sum of closed words is the same for all, and one CAS on pw
 *            wins; its winner frees the slot.  Lock-free: a thread that
 *            finds a closed counter helps instead of waiting.
 *
 * A demoter that lost the race must not install later.  Once the winner
 * frees the slot, a new promotion of the same entry may take the same slot
 * (the lowest free one) and so write the very word the loser read, HOT |
 * slot with the same flags: the loser's CAS would then succeed (ABA) and
 * put its old sum over the new promotion, whose counters keep counting --
 * a pin dropped on them stays in the word for ever (a dead entry is never
 * queued, destroy refuses), a pin taken on them is missing from it.  So
 * each demoter registers in its slot's demoters count and checks that the
 * slot still holds its promotion's tag, and a promotion, once it has
 * stored its new tag, checks that the slot has no demoter, else gives up
 * (it was only an optimisation).  Both sides are seq_cst (a store, then a
 * load of the other word): either the promoter sees the demoter and gives
 * up, or the demoter sees the new tag and leaves.  A registered demoter's
 * promotion is thus the only one the slot can show until it leaves, and a
 * word HOT | slot that its CAS finds is that promotion's.
 *
 * Totals never exceed PP_MAX_PINS: a shard holds at most pool->hot_scap pins
 * and the central counter at most pool->hot_ccap, with
 * S * hot_scap + hot_ccap == PP_MAX_PINS; a pin that finds both full
 * demotes and meets the exact limit of the cold word.
 *
 * Memory ordering.  Promotion's CAS on pw is acq_rel: it publishes the
 * counters' initial words to pinners, whose acquire load of pw sees HOT.
 * A hot pin acquires on its counter (as a cold pin does); a hot unpin
 * releases on its counter, and each close acquires that counter, so every
 * unpin happens before the demotion's CAS on pw (acq_rel), and through it
 * before a later final unpin, eviction or free.  Writes to the data happen
 * only under write pins, which are never counted hot.
 */
#include <ck_pr.h>

#include "core/core.h"

static inline uint32_t hot_tag(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint64_t hot_count(uint64_t w) { return w & PP__HOT_COUNT; }
static inline uint64_t hot_word(uint32_t tag, uint64_t count)
{
    return ((uint64_t)tag << 32) | count;
}

/* Line 0 of slot i is its central counter, lines 1..S its shards. */
static inline pp__hot_line_t *hot_slot(pp_pool_t *pool, pp__node_t *node, unsigned i)
{
    return &node->hot.lines[(size_t)i * (pool->hot_shards + 1u)];
}

int pp__hot_init(pp_pool_t *pool, pp__node_t *node)
{
    if (pool->hot_shards == 0) {
        /* At least 16, and two per CPU: threads get shards in turn. */
        unsigned s = 16;
        while (s < 2u * (unsigned)pool->ncpus && s < PP__HOT_MAX_SHARDS)
            s *= 2;
        pool->hot_shards = s;
        pool->hot_scap = ((uint64_t)PP_MAX_PINS + 1) / 2 / s;
        pool->hot_ccap = PP_MAX_PINS - (uint64_t)s * pool->hot_scap;
    }
    bool bound;
    node->hot.bytes = (size_t)PP__HOT_SLOTS * (pool->hot_shards + 1u) * sizeof(pp__hot_line_t);
    node->hot.lines = pp__topology_node_alloc(pool, node->index, node->hot.bytes, &bound);
    return node->hot.lines != NULL ? 0 : PP_ENOMEM;
}

void pp__hot_free(pp_pool_t *pool, pp__node_t *node)
{
    if (node->hot.lines != NULL)
        pp__topology_node_free(pool, node->hot.lines, node->hot.bytes);
    node->hot.lines = NULL;
}

/* The slot of a HOT word and its tag, read consistently: the tag is read
 * between two identical reads of pw, so it is the tag of the promotion pw
 * shows, or one no counter carries any more (its CASes fail).  false: pw
 * changed; *pw is the new word (acquire, see pp__hot_pin). */
static inline bool hot_find(pp_pool_t *pool, unsigned n, pp__entry_t *e,
                            uint64_t *pw, pp__hot_line_t **lines, uint32_t *tag)
{
    *lines = hot_slot(pool, pool->nodes[n], pp__hot_index(*pw));
    /* acquire: with the acquire of pw, orders the reads of the counters
     * after this read of the tag. */
    uint64_t c = pp__atomic_load_acquire(&(*lines)[0].w);
    /* acquire: pairs with the promotion's release (the counters' words). */
    uint64_t again = pp__atomic_load_acquire(&e->pw);
    if (again != *pw) {
        *pw = again;
        return false;
    }
    *tag = hot_tag(c);
    return true;
}

/* Ends the HOT mode of e (any promotion of it), helping whoever else is at
 * it.  Returns when e's word is no longer HOT -- or is HOT again by a later
 * promotion, which the caller's retry sees. */
void pp__hot_demote(pp_pool_t *pool, unsigned n, pp__entry_t *e)
{
    pp__node_t *node = pool->nodes[n];
    const unsigned S = pool->hot_shards;
    /* acquire: pairs with the promotion's release. */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    while (pw & PP__F_HOT) {
        pp__hot_line_t *lines;
        uint32_t tag;
        unsigned i = pp__hot_index(pw);
        if (!hot_find(pool, n, e, &pw, &lines, &tag))
            continue;
        /* seq_cst, both: the registration comes before the check of the
         * tag, against a promoter's store of a new tag before its check
         * of the count (pp__hot_promote): one of the two sees the other. */
        pp__atomic_add_seq_cst(&lines[0].demoters, 1);
        if (hot_tag(pp__atomic_load_seq_cst(&lines[0].w)) != tag) {
            /* The promotion is over, and the slot taken again or about
             * to be: nothing of ours to install. */
            pp__atomic_sub_release(&lines[0].demoters, 1);
            /* acquire: as above. */
            pw = pp__atomic_load_acquire(&e->pw);
            continue;
        }
        /* Close the shards, then the central counter (pins that find their
         * shard closed go there meanwhile), keeping each count. */
        uint64_t sum = 0;
        bool stale = false;
        for (unsigned k = 0; k <= S && !stale; k++) {
            pp__hot_line_t *l = &lines[k == S ? 0 : k + 1];
            /* acquire, here and on a failed CAS: a counter another demoter
             * closed first is read through its close (an RMW, so still in
             * the release sequence of every unpin on the counter), and
             * whichever demoter installs the sum has taken those unpins:
             * they happen before its CAS on pw, hence before an eviction's
             * claim and free.  (Read relaxed, a demoter that found the
             * counter closed handed the sum on without them: TSan, in a
             * 10-minute torture with swap and QSBR, saw the swap thread
             * free data a hot unpinner had read.) */
            uint64_t w = pp__atomic_load_acquire(&l->w);
            while (hot_tag(w) == tag && !(w & PP__HOT_CLOSED)) {
                PP__YIELD(PIN);
                /* acq_rel: acquire takes every unpin released on this
                 * counter, so they happen before the sum is installed;
                 * acquire on failure, as above. */
                if (pp__atomic_cas_strong_acq_rel(&l->w, &w, w | PP__HOT_CLOSED))
                    w |= PP__HOT_CLOSED;
            }
            stale = hot_tag(w) != tag;   /* demoted and reused meanwhile */
            sum += hot_count(w);
        }
        /* Install the sum while the promotion lasts: no later promotion of
         * the slot completes while we are registered, so a word HOT | i
         * found by the CAS below is our promotion's, and the tag read
         * again says whether it has ended. */
        /* acquire: as above. */
        pw = pp__atomic_load_acquire(&e->pw);
        while (!stale && (pw & PP__F_HOT) && pp__hot_index(pw) == i &&
               hot_tag(pp__atomic_load_acquire(&lines[0].w)) == tag) {
            PP__CHECK(sum <= PP_MAX_PINS);
            uint64_t next;
            PP__YIELD(PIN);
            PP__TEST_POINT(HOT_INSTALL, e);
            if (pp__pw_demote(e, &pw, sum, &next)) {
                pp__atomic_add_relaxed(&node->hot.demotions, 1);
                /* release: our reads of the closed counters happen before
                 * the next promotion stores into them (its acquire). */
                pp__atomic_and_release(&node->hot.used, ~((uint64_t)1 << i));
                pw = next;
            }
        }
        /* release: our reads of the counters happen before a promotion
         * that sees the slot free of demoters stores into them. */
        pp__atomic_sub_release(&lines[0].demoters, 1);
        /* A later promotion, if any, is demoted too: callers want the
         * word's own count. */
        if (pw & PP__F_HOT)
            pw = pp__atomic_load_acquire(&e->pw);
    }
}

/* The next pin or unpin of e by t goes to its shard of this promotion at
 * once (pp__hot_cached, and pinpool_inline.h's fast paths). */
static inline void hot_cache(pp_pool_t *pool, pp__thread_t *t, pp__entry_t *e, uint64_t pw,
                             pp__hot_line_t *mine, uint32_t tag)
{
    t->hc.e = e;
    t->hc.pw = pw;
    t->hc.w = (uint64_t *)(void *)&mine->w;
    t->hc.tag = tag;
    t->hc.cap = (uint32_t)pool->hot_scap;
}

int pp__hot_pin(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                unsigned flags, pp__thread_t *t, void **data)
{
    /* acquire: pairs with the promotion's release. */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    for (;;) {
        if (!pp__pw_alive(pw, gen))
            return PP_ESTALE;
        if (!(pw & PP__F_HOT))
            return PP__RETRY;
        if (flags & PP_PIN_WRITE) {
            /* Writes are ordered by the one word only. */
            pp__hot_demote(pool, n, e);
            return PP__RETRY;
        }
        pp__hot_line_t *lines;
        uint32_t tag;
        if (!hot_find(pool, n, e, &pw, &lines, &tag))
            continue;
        pp__hot_line_t *mine = &lines[1 + (t->shard & (pool->hot_shards - 1u))];
        hot_cache(pool, t, e, pw, mine, tag);
        uint64_t w = pp__atomic_load_relaxed(&mine->w);
        while (hot_tag(w) == tag && !(w & PP__HOT_CLOSED) && hot_count(w) < pool->hot_scap) {
            PP__YIELD(PIN);
            /* acquire: as a cold pin's (pin.c). */
            if (pp__atomic_cas_weak_acquire(&mine->w, &w, w + 1u))
                goto pinned;
        }
        if (hot_tag(w) == tag) {
            /* Full or closed: the central counter. */
            w = pp__atomic_load_relaxed(&lines[0].w);
            while (hot_tag(w) == tag && !(w & PP__HOT_CLOSED) && hot_count(w) < pool->hot_ccap) {
                PP__YIELD(PIN);
                /* acquire: as above. */
                if (pp__atomic_cas_weak_acquire(&lines[0].w, &w, w + 1u))
                    goto pinned;
            }
            if (hot_tag(w) == tag)
                pp__hot_demote(pool, n, e);   /* closing, or every counter full */
        }
        /* acquire: as above. */
        pw = pp__atomic_load_acquire(&e->pw);
    }
pinned:
    if (data != NULL)
        *data = e->data;   /* stable: HOT entries are resident and pinned */
    return 0;
}

/* One unpin on counter l if it holds a pin of promotion tag: 1 done, 0 it
 * holds none (or is closed), -1 the promotion is over. */
static inline int hot_take(pp__hot_line_t *l, uint32_t tag)
{
    uint64_t w = pp__atomic_load_relaxed(&l->w);
    while (hot_tag(w) == tag && !(w & PP__HOT_CLOSED) && hot_count(w) != 0) {
        PP__YIELD(UNPIN);
        /* release: the caller's reads of the data happen before the
         * demotion's close of this counter, which acquires it. */
        if (pp__atomic_cas_weak_release(&l->w, &w, w - 1u))
            return 1;
    }
    return hot_tag(w) == tag ? 0 : -1;
}

int pp__hot_unpin(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen,
                  pp__thread_t *t)
{
    const unsigned S = pool->hot_shards;
    /* acquire: pairs with the promotion's release. */
    uint64_t pw = pp__atomic_load_acquire(&e->pw);
    for (;;) {
        if (pp__word_gen(pw) != gen || !(pw & PP__F_LIVE))
            return PP_ESTALE;
        if (!(pw & PP__F_HOT))
            return PP__RETRY;
        pp__hot_line_t *lines;
        uint32_t tag;
        if (!hot_find(pool, n, e, &pw, &lines, &tag))
            continue;
        unsigned own = t->shard & (S - 1u);
        hot_cache(pool, t, e, pw, &lines[1 + own], tag);
        int r = hot_take(&lines[1 + own], tag);
        for (unsigned k = 0; r == 0 && k < S; k++) {
            /* Counts are interchangeable: the central one, then the others. */
            unsigned i = k == own ? 0 : 1 + k;
            r = hot_take(&lines[i], tag);
        }
        if (r == 1)
            return 0;
        if (r == 0)
            pp__hot_demote(pool, n, e);   /* the exact check is the word's */
        /* acquire: as above. */
        pw = pp__atomic_load_acquire(&e->pw);
    }
}

uint32_t pp__hot_pins(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint64_t pw)
{
    pp__hot_line_t *lines;
    uint32_t tag;
    /* A word that changes between the reads (a flag, a demotion) is read
     * again: never a sum of nothing. */
    while ((pw & PP__F_HOT) && !hot_find(pool, n, e, &pw, &lines, &tag))
        ;
    if (!(pw & PP__F_HOT))
        return pp__pw_pins(pw);
    uint64_t sum = 0;
    for (unsigned k = 0; k <= pool->hot_shards; k++) {
        uint64_t w = pp__atomic_load_relaxed(&lines[k].w);
        if (hot_tag(w) == tag)
            sum += hot_count(w);
    }
    return sum > PP_MAX_PINS ? PP_MAX_PINS : (uint32_t)sum;
}

void pp__hot_promote(pp_pool_t *pool, unsigned n, pp__entry_t *e, uint32_t gen)
{
    pp__node_t *node = pool->nodes[n];
    const unsigned S = pool->hot_shards;
    const uint64_t want = PP__F_LIVE | PP__F_RESIDENT;
    const uint64_t bad = PP__F_DEAD | PP__F_HOT | PP__F_BUSY | PP__F_QUEUED | PP__F_WPIN;
    uint64_t pw = pp__atomic_load_relaxed(&e->pw);
    if (pp__word_gen(pw) != gen || (pw & (want | bad)) != want)
        return;
    /* acquire: pairs with the release of the last demotion that freed the
     * slot (its reads of the counters come before our stores). */
    uint64_t used = pp__atomic_load_acquire(&node->hot.used);
    unsigned i;
    do {
        if (~used == 0) {
            pp__atomic_add_relaxed(&node->hot.full, 1);
            return;
        }
        i = (unsigned)__builtin_ctzll(~used);
        /* acquire (on success; a failed CAS goes round to one that
         * succeeds): as the load above. */
    } while (!pp__atomic_cas_weak_acquire(&node->hot.used, &used, used | ((uint64_t)1 << i)));
    pp__hot_line_t *lines = hot_slot(pool, node, i);
    uint32_t tag = hot_tag(pp__atomic_load_relaxed(&lines[0].w));
    if (tag == UINT32_MAX)
        return;          /* the slot's tags ran out: retired, its bit kept */
    tag++;
    for (unsigned k = 1; k <= S; k++)
        pp__atomic_store_relaxed(&lines[k].w, hot_word(tag, 0));
    /* The pins held now move to the central counter.  They are read pins
     * (!WPIN): no write needs its unpin to release on the word. */
    bool alone = false;                  /* no demoter of an earlier promotion */
    for (;;) {
        if (pp__word_gen(pw) != gen || (pw & (want | bad)) != want ||
            pp__pw_pins(pw) > pool->hot_ccap)
            break;
        if (!alone) {
            /* seq_cst, both: the new tag is stored before the count of
             * demoters is read, against a demoter's registration before
             * its check of the tag (pp__hot_demote).  A demoter of the
             * slot's last promotion may still hold the word it read, which
             * ours is about to repeat: give up. */
            pp__atomic_store_seq_cst(&lines[0].w, hot_word(tag, pp__pw_pins(pw)));
            if (pp__atomic_load_seq_cst(&lines[0].demoters) != 0)
                break;
            alone = true;
        }
        pp__atomic_store_relaxed(&lines[0].w, hot_word(tag, pp__pw_pins(pw)));
        PP__YIELD(PIN);
        if (pp__pw_promote(e, &pw, i)) {
            pp__atomic_add_relaxed(&node->hot.promotions, 1);
            return;
        }
    }
    /* Not promoted: the slot's tag stays as stored (never published). */
    pp__atomic_store_relaxed(&lines[0].w, hot_word(tag, 0));
    /* release: as in pp__hot_demote (our stores come before the next
     * promoter's). */
    pp__atomic_and_release(&node->hot.used, ~((uint64_t)1 << i));
}

unsigned pp__hot_in_use(pp_pool_t *pool, unsigned n)
{
    return (unsigned)__builtin_popcountll(pp__atomic_load_relaxed(&pool->nodes[n]->hot.used));
}

bool pp__hot_slots_valid(pp_pool_t *pool, unsigned n, const uint32_t *holders)
{
    pp__node_t *node = pool->nodes[n];
    if (node->hot.lines == NULL)
        return true;
    uint64_t used = pp__atomic_load_relaxed(&node->hot.used);
    for (unsigned i = 0; i < PP__HOT_SLOTS; i++) {
        pp__hot_line_t *lines = hot_slot(pool, node, i);
        bool retired = hot_tag(pp__atomic_load_relaxed(&lines[0].w)) == UINT32_MAX;
        /* A slot of tag UINT32_MAX may still hold its last promotion. */
        bool ok = (used >> i) & 1u ? holders[i] == 1 || (retired && holders[i] == 0)
                                   : holders[i] == 0;
        if (!ok || pp__atomic_load_relaxed(&lines[0].demoters) != 0)
            return false;
    }
    return true;
}

