/*
 * owners.c -- owners across ranks, counted by weight (pinpool_mpi.h,
 * "Owners across ranks"; docs/mpi.md).
 *
 * The home mints weight as intervals of a per-entry space that only grows:
 * the k-th export gets [k * 2^32, k * 2^32 + 2^32).  It keeps the intervals
 * it minted and that have not come back (pp__home_t.out), and frees the
 * entry when that set is empty and its own owners are gone.  Another rank
 * keeps, per remote ref, a proxy: its local owners and the intervals it
 * holds.  Nothing here sends a message for a transfer: tokens travel in
 * the scheduler's own messages; weight goes home only when a rank's last
 * owner of a ref is released (or a token dropped), batched by the
 * progress thread.  Everything is under own_mu.
 */
#include "layer.h"

#include <stdlib.h>

#define MINT_SHIFT 32
#define MINT_MAX   ((uint64_t)1 << 32)   /* intervals one entry can mint */

static bool token_sane(const pp_mpi_t *m, const pp_mpi_token_t *t)
{
    return t->gref.ref != PP_REF_NONE && t->gref.rank < (uint32_t)m->size && t->lo < t->hi &&
           t->from < (uint32_t)m->size && t->seq != 0 && t->seq != UINT64_MAX;
}

/* Home, own_mu held: claims the token seq of rank from (its import or its
 * drop), once: 0, PP_EINVAL (claimed before), PP_ENOMEM.  A token's seq
 * is its exporter's count of exports toward this home, so each rank's
 * claimed set is a few intervals (the gaps are tokens still in flight). */
static int claim(pp_mpi_t *m, uint32_t from, uint64_t seq)
{
    if (from >= (uint32_t)m->size || seq == 0 || seq == UINT64_MAX)
        return PP_EINVAL;
    return pp__wset_add(&m->claimed[from], (pp__wiv_t){ seq, seq + 1 });
}

/* Claims the token at its home: locally on the home, else one round trip
 * (own_mu not held). */
static int claim_token(pp_mpi_t *m, const pp_mpi_token_t *t)
{
    if (t->gref.rank != (uint32_t)m->rank)
        return pp__remote_claim(m, t->gref.rank, t->gref.ref, t->from, t->seq);
    pthread_mutex_lock(&m->own_mu);
    int rc = claim(m, t->from, t->seq);
    pthread_mutex_unlock(&m->own_mu);
    return rc;
}

/* Home, own_mu held: mints the next interval of h. */
static int mint(pp__home_t *h, pp__wiv_t *iv)
{
    if (h->minted >= MINT_MAX)
        return PP_EOVERFLOW;
    *iv = (pp__wiv_t){ h->minted << MINT_SHIFT, (h->minted + 1) << MINT_SHIFT };
    if (h->minted + 1 == MINT_MAX)
        iv->hi = UINT64_MAX;   /* wset intervals lie within [0, UINT64_MAX) */
    int rc = pp__wset_add(&h->out, *iv);
    if (rc == 0)
        h->minted++;
    return rc;
}

/* own_mu held: the home's weight or owners changed; kills h if both are gone. */
static void home_check(pp_mpi_t *m, pp__home_t *h)
{
    if (h->owners == 0 && pp__wset_empty(&h->out))
        pp__home_kill(m, h);
}

/* own_mu held: the proxy's weight goes home (the progress thread batches
 * it), and the cached copy goes too: a copy is kept only while this rank
 * owns the ref, so a later pin asks the home, which knows if it is dead. */
static void proxy_give_back(pp_mpi_t *m, uint32_t rank, uint64_t ref, pp__proxy_t *p)
{
    for (uint32_t i = 0; i < p->held.n; i++) {
        pp__wire_return_t rec = { ref, p->held.iv[i].lo, p->held.iv[i].hi };
        if (pp__common_command(m, PP__CMD_RETURN, rank, &rec, NULL) != 0)
            pp__common_report(m, "no memory to return weight of ref %#llx to rank %u: its home "
                                 "keeps it until destroy", (unsigned long long)ref, rank);
    }
    pp__remote_drop_copy(m, rank, ref);
    pp__proxy_remove(m, rank, ref, p);
}

/* ---- the public calls ------------------------------------------------------ */

int pp_mpi_export(pp_mpi_t *m, pp_gref_t ref, pp_mpi_token_t *out)
{
    if (m == NULL || out == NULL || ref.ref == PP_REF_NONE || ref.rank >= (uint32_t)m->size)
        return PP_EINVAL;
    pp__wiv_t iv;
    int rc;
    pthread_mutex_lock(&m->own_mu);
    if (ref.rank == (uint32_t)m->rank) {
        pp__home_t *h = pp__home_find(m, ref.ref);
        rc = h == NULL || h->owners == 0 ? PP_ESTALE : mint(h, &iv);
    } else {
        pp__proxy_t *p = pp__proxy_find(m, ref.rank, ref.ref);
        if (p == NULL || p->owners == 0) {
            rc = PP_ESTALE;
        } else {
            rc = pp__wset_split(&p->held, &iv);
            if (rc == PP_EAGAIN) {
                /* Unit weight left: ask the home to mint more.  The
                 * caller's owner keeps p alive while we wait unlocked. */
                pthread_mutex_unlock(&m->own_mu);
                pp__wiv_t more;
                rc = pp__remote_mint(m, ref.rank, ref.ref, &more);
                pthread_mutex_lock(&m->own_mu);
                if (rc == 0) {
                    /* Keep the lower half, give the upper half.  Minted
                     * weight is never dropped: with no room to keep a
                     * part, the token takes it all; with no proxy left
                     * (the caller's owner released meanwhile), it goes
                     * home. */
                    p = pp__proxy_find(m, ref.rank, ref.ref);
                    pp__wiv_t keep = { more.lo, more.lo + (more.hi - more.lo) / 2 };
                    bool grow_fails = false;
                    PP__MPI_TP(m, EXPORT_GROW, &grow_fails);
                    if (p == NULL) {
                        pp__wire_return_t rec = { ref.ref, more.lo, more.hi };
                        if (pp__common_command(m, PP__CMD_RETURN, ref.rank, &rec, NULL) != 0)
                            pp__common_report(m, "no memory to return weight of ref %#llx to "
                                                 "rank %u: its home keeps it until destroy",
                                              (unsigned long long)ref.ref, ref.rank);
                        rc = PP_ESTALE;
                    } else if (!grow_fails && pp__wset_add(&p->held, keep) == 0) {
                        iv = (pp__wiv_t){ keep.hi, more.hi };
                    } else {
                        iv = more;
                    }
                }
            }
        }
    }
    if (rc == 0)
        *out = (pp_mpi_token_t){ ref, iv.lo, iv.hi, (uint32_t)m->rank, 0,
                                 ++m->export_seq[ref.rank] };
    pthread_mutex_unlock(&m->own_mu);
    return rc;
}

int pp_mpi_import(pp_mpi_t *m, const pp_mpi_token_t *token, pp_gref_t *out)
{
    if (m == NULL || token == NULL || out == NULL)
        return PP_EINVAL;
    if (!token_sane(m, token)) {
        if (m != NULL)
            pp__atomic_add_relaxed(&m->st.refused_imports, 1);
        return PP_EINVAL;
    }
    pp__wiv_t iv = { token->lo, token->hi };
    uint32_t rank = token->gref.rank;
    uint64_t ref = token->gref.ref;
    /* The home claims the token first: a token imported or dropped before,
     * on any rank, is refused here, before this rank holds its weight. */
    int rc = claim_token(m, token);
    if (rc != 0) {
        if (rc == PP_EINVAL)
            pp__atomic_add_relaxed(&m->st.refused_imports, 1);
        return rc;
    }
    pthread_mutex_lock(&m->own_mu);
    if (rank == (uint32_t)m->rank) {
        /* The weight comes home at once: it becomes one owner here. */
        pp__home_t *h = pp__home_find(m, ref);
        if (h == NULL) {
            rc = PP_ESTALE;
        } else if (h->owners == PP_MAX_OWNERS) {
            /* claimed, but no owner to give: the weight is home, unowned */
            rc = PP_EOVERFLOW;
            if (pp__wset_remove(&h->out, iv) == 0)
                home_check(m, h);
        } else if ((rc = pp__wset_remove(&h->out, iv)) == 0) {
            h->owners++;
        }
    } else {
        pp__proxy_t *p = pp__proxy_find(m, rank, ref);
        bool made = false;
        if (p == NULL) {
            p = calloc(1, sizeof *p);
            if (p != NULL && !pp__ht_set(&m->proxies[rank], ref, (uint64_t)(uintptr_t)p)) {
                free(p);
                p = NULL;
            }
            made = p != NULL;
        }
        if (p == NULL)
            rc = PP_ENOMEM;
        else if (p->owners == PP_MAX_OWNERS)
            rc = PP_EOVERFLOW;
        else if ((rc = pp__wset_add(&p->held, iv)) == 0)
            p->owners++;
        if (rc != 0 && made)
            pp__proxy_remove(m, rank, ref, p);
        if (rc == PP_ENOMEM || rc == PP_EOVERFLOW) {
            /* claimed, but not held here: the weight goes home, the token is used up */
            pp__wire_return_t rec = { ref, iv.lo, iv.hi };
            if (pp__common_command(m, PP__CMD_RETURN, rank, &rec, NULL) != 0)
                pp__common_report(m, "import of ref %#llx of rank %u failed (%s): its weight "
                                     "stays out until destroy",
                                  (unsigned long long)ref, rank, pp_err_name(rc));
        }
    }
    pthread_mutex_unlock(&m->own_mu);
    if (rc == PP_EINVAL)
        pp__atomic_add_relaxed(&m->st.refused_imports, 1);
    if (rc == 0)
        *out = token->gref;
    return rc;
}

int pp_mpi_token_drop(pp_mpi_t *m, const pp_mpi_token_t *token)
{
    if (m == NULL || token == NULL || !token_sane(m, token))
        return PP_EINVAL;
    uint32_t rank = token->gref.rank;
    int rc = claim_token(m, token);   /* a dropped token is never imported */
    if (rc != 0)
        return rc;
    if (rank != (uint32_t)m->rank) {
        /* Claimed: its weight goes straight home. */
        pp__wire_return_t rec = { token->gref.ref, token->lo, token->hi };
        return pp__common_command(m, PP__CMD_RETURN, rank, &rec, NULL);
    }
    pthread_mutex_lock(&m->own_mu);
    pp__home_t *h = pp__home_find(m, token->gref.ref);
    if (h == NULL) {
        rc = PP_ESTALE;
    } else {
        rc = pp__wset_remove(&h->out, (pp__wiv_t){ token->lo, token->hi });
        if (rc == 0)
            home_check(m, h);
    }
    pthread_mutex_unlock(&m->own_mu);
    return rc;
}

int pp_mpi_retain(pp_mpi_t *m, pp_gref_t ref)
{
    if (m == NULL || ref.ref == PP_REF_NONE || ref.rank >= (uint32_t)m->size)
        return PP_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&m->own_mu);
    uint32_t *owners = NULL;
    if (ref.rank == (uint32_t)m->rank) {
        pp__home_t *h = pp__home_find(m, ref.ref);
        owners = h != NULL ? &h->owners : NULL;
    } else {
        pp__proxy_t *p = pp__proxy_find(m, ref.rank, ref.ref);
        owners = p != NULL ? &p->owners : NULL;
    }
    if (owners == NULL || *owners == 0)
        rc = PP_ESTALE;
    else if (*owners == PP_MAX_OWNERS)
        rc = PP_EOVERFLOW;
    else
        (*owners)++;
    pthread_mutex_unlock(&m->own_mu);
    return rc;
}

int pp_mpi_release(pp_mpi_t *m, pp_gref_t ref)
{
    if (m == NULL || ref.ref == PP_REF_NONE || ref.rank >= (uint32_t)m->size)
        return PP_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&m->own_mu);
    if (ref.rank == (uint32_t)m->rank) {
        pp__home_t *h = pp__home_find(m, ref.ref);
        if (h == NULL || h->owners == 0) {
            rc = PP_ESTALE;
        } else {
            h->owners--;
            home_check(m, h);
        }
    } else {
        /* A ref this rank never imported: PP_ESTALE, and no message. */
        pp__proxy_t *p = pp__proxy_find(m, ref.rank, ref.ref);
        if (p == NULL || p->owners == 0)
            rc = PP_ESTALE;
        else if (--p->owners == 0)
            proxy_give_back(m, ref.rank, ref.ref, p);
    }
    pthread_mutex_unlock(&m->own_mu);
    return rc;
}

/* ---- messages (progress thread) -------------------------------------------- */

/* own_mu held: one interval of weight came back from src.  What of it is
 * out comes home; the rest (a token imported twice, merged at its holder
 * with weight it owned, or garbage) is refused, reported and counted, and
 * never holds back the part that is good. */
static void return_one(pp_mpi_t *m, int src, pp__wire_return_t r)
{
    pp__home_t *h = pp__home_find(m, r.ref);
    uint64_t gone = 0;
    int rc = h == NULL ? PP_ESTALE : pp__wset_remove_overlap(&h->out, (pp__wiv_t){ r.lo, r.hi },
                                                             &gone);
    if (rc == PP_ENOMEM) {
        pp__common_report(m, "no memory to take back weight [%#llx, %#llx) of ref %#llx from "
                             "rank %d: its home keeps it until destroy",
                          (unsigned long long)r.lo, (unsigned long long)r.hi,
                          (unsigned long long)r.ref, src);
        return;
    }
    if (gone != r.hi - r.lo) {
        pp__common_report(m, "rank %d returned weight [%#llx, %#llx) of ref %#llx of which %#llx "
                             "is not out (a token imported twice, or garbage): that part refused",
                          src, (unsigned long long)r.lo, (unsigned long long)r.hi,
                          (unsigned long long)r.ref, (unsigned long long)(r.hi - r.lo - gone));
        /* release: pairs with pp_mpi_stats' acquire load; counted after
         * the report, so whoever sees the count sees the line */
        pp__atomic_add_release(&m->st.refused_returns, 1);
    }
    if (gone != 0)
        home_check(m, h);
}

void pp__owners_return_msg(pp_mpi_t *m, int src, const void *buf, size_t len)
{
    size_t n = 0;
    if (pp__wire_return_check(buf, len, &n, NULL) != 0) {
        pp__common_report(m, "a weight return from rank %d is garbage (%zu bytes): ignored", src,
                          len);
        return;
    }
    pthread_mutex_lock(&m->own_mu);
    for (size_t i = 0; i < n; i++)
        return_one(m, src, pp__wire_return_get(buf, i));
    pthread_mutex_unlock(&m->own_mu);
}

void pp__owners_return_local(pp_mpi_t *m, const pp__wire_return_t *rec, size_t n)
{
    pthread_mutex_lock(&m->own_mu);
    for (size_t i = 0; i < n; i++)
        return_one(m, m->rank, rec[i]);
    pthread_mutex_unlock(&m->own_mu);
}

void pp__owners_mint_msg(pp_mpi_t *m, int src, const void *buf, size_t len)
{
    uint64_t f[PP__WIRE_MINT_N];
    if (pp__wire_fixed_check(buf, len, PP__WIRE_MINT, f, PP__WIRE_MINT_N) != 0) {
        pp__common_report(m, "a mint request from rank %d is garbage: ignored", src);
        return;
    }
    pp__wiv_t iv = { 0, 0 };
    int rc;
    pthread_mutex_lock(&m->own_mu);
    pp__home_t *h = pp__home_find(m, f[1]);
    /* The asker holds weight, so a live entry has weight out. */
    rc = h == NULL || pp__wset_empty(&h->out) ? PP_ESTALE : mint(h, &iv);
    pthread_mutex_unlock(&m->own_mu);
    uint64_t g[PP__WIRE_MINTED_N] = { f[0], (uint64_t)(int64_t)rc, iv.lo, iv.hi };
    unsigned char msg[PP__WIRE_FIXED_SIZE(PP__WIRE_MINTED_N)];
    pp__wire_fixed_pack(msg, PP__WIRE_MINTED, g, PP__WIRE_MINTED_N);
    (void)pp__common_send(m, src, PP__TAG_MINTED, msg, sizeof msg, NULL, 0, 0, NULL, NULL);
}

void pp__owners_claim_msg(pp_mpi_t *m, int src, const void *buf, size_t len)
{
    uint64_t f[PP__WIRE_CLAIM_N];
    if (pp__wire_fixed_check(buf, len, PP__WIRE_CLAIM, f, PP__WIRE_CLAIM_N) != 0) {
        pp__common_report(m, "a claim from rank %d is garbage: ignored", src);
        return;
    }
    pthread_mutex_lock(&m->own_mu);
    int rc = f[2] >= (uint64_t)m->size ? PP_EINVAL : claim(m, (uint32_t)f[2], f[3]);
    pthread_mutex_unlock(&m->own_mu);
    uint64_t g[PP__WIRE_CLAIMED_N] = { f[0], (uint64_t)(int64_t)rc };
    unsigned char msg[PP__WIRE_FIXED_SIZE(PP__WIRE_CLAIMED_N)];
    pp__wire_fixed_pack(msg, PP__WIRE_CLAIMED, g, PP__WIRE_CLAIMED_N);
    (void)pp__common_send(m, src, PP__TAG_CLAIMED, msg, sizeof msg, NULL, 0, 0, NULL, NULL);
}

/* ---- destroy ---------------------------------------------------------------- */

void pp__owners_finish(pp_mpi_t *m)
{
    pthread_mutex_lock(&m->own_mu);
    for (int r = 0; r < m->size; r++) {
        ck_ht_iterator_t it = CK_HT_ITERATOR_INITIALIZER;
        ck_ht_entry_t *e;
        uint64_t keys[64];
        size_t nk;
        do {
            /* collect first: removing while iterating is not allowed */
            nk = 0;
            ck_ht_iterator_init(&it);
            while (nk < 64 && ck_ht_next(&m->proxies[r], &it, &e))
                keys[nk++] = (uint64_t)ck_ht_entry_key_direct(e);
            for (size_t i = 0; i < nk; i++) {
                pp__proxy_t *p = pp__proxy_find(m, (uint32_t)r, keys[i]);
                if (p->owners != 0)
                    pp__common_report(m, "destroy: %u owner(s) of ref %#llx of rank %d were "
                                         "never released: their weight goes home now",
                                      p->owners, (unsigned long long)keys[i], r);
                proxy_give_back(m, (uint32_t)r, keys[i], p);
            }
        } while (nk != 0);
    }
    pthread_mutex_unlock(&m->own_mu);
}

void pp__owners_destroy(pp_mpi_t *m)
{
    (void)m;   /* pp__owners_finish emptied every proxy table */
}
