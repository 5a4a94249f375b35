/*
 * remote.c -- the remote side of the MPI layer: pins of refs whose home is
 * another rank, answered from a cache of read-only copies that are
 * ordinary entries of the local pool.
 *
 * The cache is one ck_ht per home rank, home ref -> the local ref of the
 * newest copy, read without a lock.  A hit is a pp_pin of the copy, whose
 * header (layer.h, pp__copy_hdr_t) is then checked (pin_copy): it names the
 * home, the ref and the version the copy holds, so a value read from the
 * table while a writer replaced it can never be taken for another ref's
 * copy, and a copy the pool dropped is refused by pp_pin itself
 * (PP_ESTALE).  The local ref comes first from the thread's hint for the
 * ref (perthread.h), else from the table, whose answer becomes the hint.
 * A stale hint is as safe as a stale table read: a copy that left the
 * table is released at once and pins no more (a dead entry takes no new
 * pin, even while others hold it); before that release it is still a
 * whole snapshot of a version at least the one the pin needs, checked, so
 * returning it is what a table read a moment earlier would have returned.
 * A failed try clears the hint, so a thread never goes back to an older
 * copy than the table's.  Hits and the remote pins held are counted per
 * thread (pp__layer_thr_count): the hit path and the unpin take no lock, make
 * no shared write and no system call, and allocate nothing (but a
 * thread's first pin through a layer, which makes its state).  A miss
 * makes a request (or joins one already made for the same ref and at
 * least the same version), which the progress thread sends; the reply's
 * buffer becomes the copy in place.  A copy is kept in
 * the cache only while this rank owns the ref (owners.c drops it with the
 * last owner); a pin of a ref not owned here still works, with a copy
 * that dies when it is unpinned.
 */
#include "layer.h"

#include <stdlib.h>

/* Cached copies: dropped by eviction, never written (the home has them). */
static const pp_type_t copy_type = {
    .name = "pinpool-mpi copy",
    .flags = PP_TYPE_DISCARD,
};

/* What a pin of a copy gives: the bytes after the header, or a typed
 * copy's data. */
static void *copy_data(const pp__copy_hdr_t *h)
{
    return h->type_id != 0 ? h->obj : (unsigned char *)(uintptr_t)h + PP__COPY_HDR;
}

/* Pins the copy named by local if it is a copy of ref, of at least the
 * version the pin needs: 0, or PP_EAGAIN (no pin kept). */
static inline int pin_copy(pp_mpi_t *m, pp_gref_t ref, uint64_t local, void **data,
                           uint32_t *got)
{
    void *d;
    if (pp_pin(m->pool, local, PP_PIN_NOWAIT, &d) != 0)
        return PP_EAGAIN;   /* dropped by eviction, or replaced and freed */
    const pp__copy_hdr_t *h = d;
    uint32_t need = ref.version ? ref.version : 1;
    if (h->magic != PP__COPY_MAGIC || h->home_ref != ref.ref || h->rank != ref.rank ||
        h->version < need) {
        (void)pp_unpin(m->pool, local);
        return PP_EAGAIN;
    }
    if (data != NULL)
        *data = copy_data(h);
    if (got != NULL)
        *got = h->version;
    return 0;
}

/* A hit: the thread's hint first, then the cache table, whose answer
 * becomes the hint.  Either answer is only a guess that pin_copy checks. */
static inline int try_hit(pp_mpi_t *m, pp_gref_t ref, void **data, uint32_t *got)
{
    pp__tls_t *t = pp__perthread_tls_get();
    pp__hint_t *s = t != NULL ? pp__perthread_hint_slot(t, ref.rank, ref.ref) : NULL;
    bool mine = s != NULL && s->layer == m->id && s->home_ref == ref.ref && s->rank == ref.rank;
    if (mine && pin_copy(m, ref, s->local, data, got) == 0)
        return 0;
    uint64_t local;
    if (!pp__ht_get(&m->cache[ref.rank], ref.ref, &local) ||
        pin_copy(m, ref, local, data, got) != 0) {
        if (mine)
            s->layer = 0;   /* a later pin goes to the table, never to an older copy */
        return PP_EAGAIN;
    }
    if (s != NULL)
        *s = (pp__hint_t){ .layer = m->id, .home_ref = ref.ref, .local = local,
                           .rank = ref.rank };
    return 0;
}

/* req_mu held.  A request this pin can wait for: same home and ref, a
 * version at least ours, not finished. */
static pp__req_t *find_req(pp_mpi_t *m, pp_gref_t ref)
{
    for (pp__req_t *r = m->reqs; r != NULL; r = r->next)
        if (r->rank == ref.rank && r->home_ref == ref.ref && r->need >= ref.version &&
            r->state != PP__REQ_DONE)
            return r;
    return NULL;
}

static void unlink_req(pp_mpi_t *m, pp__req_t *req)
{
    for (pp__req_t **p = &m->reqs; *p != NULL; p = &(*p)->next) {
        if (*p == req) {
            *p = req->next;
            return;
        }
    }
}

/* req_mu held, after a lock-free look missed: whether a second look hits.
 * An install that ended since then put its copy in the table before it
 * took req_mu to finish its request, so with no request left to join, the
 * copy is found here and the home is not asked again. */
static bool hit_after_all(pp_mpi_t *m, pp_gref_t ref, void **data, uint32_t *got)
{
    return find_req(m, ref) == NULL && try_hit(m, ref, data, got) == 0;
}

/* req_mu held.  The request for ref, made if there is none; NULL: no memory. */
static pp__req_t *start_req(pp_mpi_t *m, pp_gref_t ref, bool *made)
{
    pp__req_t *req = find_req(m, ref);
    *made = false;
    if (req != NULL)
        return req;
    req = calloc(1, sizeof *req);
    if (req == NULL)
        return NULL;
    req->id = m->next_id++;
    req->rank = ref.rank;
    req->home_ref = ref.ref;
    req->need = ref.version;
    req->state = PP__REQ_SENT;
    req->next = m->reqs;
    m->reqs = req;
    m->unsent++;
    *made = true;
    pp__atomic_add_relaxed(&m->st.misses, 1);
    return req;
}

/* Makes req's arrived bytes a pinned flat copy: *local, *hdr.  The header
 * is written before the put, which publishes it to every pin. */
static int flat_copy(pp_mpi_t *m, pp__req_t *req, unsigned put_flags, pp_ref_t *local,
                     pp__copy_hdr_t **hdr)
{
    pp__copy_hdr_t *h = req->buf;
    pp__typed_hdr_fill(h, req, req->len - PP__COPY_HDR);
    int rc = pp_put(m->pool, req->buf, req->len, &copy_type, put_flags, local);
    if (rc != 0)
        return rc;
    req->buf = NULL;   /* the pool's now */
    void *d;
    /* A pin can fail only if the pool dropped the copy already, to make
     * room; until it succeeds, h may be freed, so it is not touched. */
    if (pp_pin(m->pool, *local, PP_PIN_NOWAIT, &d) != 0)
        return PP_ESTALE;
    /* release: pairs with the unpin's acquire load */
    pp__atomic_store_release(&h->local, *local);
    *hdr = h;
    return 0;
}

/* Makes the arrived reply of req a copy in the local pool and pins it (if
 * data != NULL) -- the caller has claimed req (state INSTALLING).  0;
 * PP_ESTALE: the pool dropped the copy before it could be pinned (fetch
 * again); PP_EIO: a typed copy's load failed; the errors of pp_put (the
 * bytes are then still req's). */
static int install(pp_mpi_t *m, pp__req_t *req, unsigned put_flags, void **data, uint32_t *got)
{
    pp_ref_t local;
    pp__copy_hdr_t *h;
    int rc = req->type_id != 0 ? pp__typed_copy(m, req, put_flags, &local, &h)
                               : flat_copy(m, req, put_flags, &local, &h);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&m->own_mu);
    bool cached = false;
    if (pp__proxy_held(m, req->rank, req->home_ref)) {
        pthread_mutex_lock(&m->cache_mu);
        uint64_t old = 0;
        bool newer_there = false;
        if (pp__ht_get(&m->cache[req->rank], req->home_ref, &old)) {
            void *od;
            if (pp_pin(m->pool, old, PP_PIN_NOWAIT, &od) == 0) {
                newer_there = ((const pp__copy_hdr_t *)od)->version > req->version;
                (void)pp_unpin(m->pool, old);
            }
        }
        if (!newer_there && pp__ht_set(&m->cache[req->rank], req->home_ref, local)) {
            cached = true;
            if (old != 0)
                (void)pp_release(m->pool, old);   /* PP_ESTALE: dropped already */
        }
        pthread_mutex_unlock(&m->cache_mu);
    }
    pthread_mutex_unlock(&m->own_mu);
    if (!cached)
        (void)pp_release(m->pool, local);   /* lives as long as our pin */
    if (data == NULL) {
        (void)pp_unpin(m->pool, local);
        return 0;
    }
    *data = copy_data(h);
    if (got != NULL)
        *got = req->version;
    return 0;
}

/* After a failed install: whether the failure was the installing
 * thread's alone, so the fetched bytes stay with the request (ARRIVED)
 * for another waiter or the next pin: no room for a copy now (PP_EAGAIN
 * with PP_PUT_NOWAIT, PP_ENOMEM), or a QSBR thread inside its section
 * that may not wait for the reclaim backlog (PP_EDEADLK).  Otherwise (a
 * typed copy's load failed: the bytes are bad) the request is finished
 * with the error for all its waiters. */
static bool installer_only(int rc)
{
    return rc == PP_EAGAIN || rc == PP_ENOMEM || rc == PP_EDEADLK;
}

/* req_mu held: req is finished (its waiters free it; see reap). */
static void finish_req(pp_mpi_t *m, pp__req_t *req, int status)
{
    req->state = PP__REQ_DONE;
    req->status = status;
    free(req->buf);
    req->buf = NULL;
    pthread_cond_broadcast(&m->req_cv);
}

/* req_mu held: frees a finished request no one waits for. */
static void reap(pp_mpi_t *m, pp__req_t *req)
{
    if (req->waiters == 0 && req->state == PP__REQ_DONE) {
        unlink_req(m, req);
        free(req);
    }
}

int pp__remote_pin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, void **data, uint32_t *got)
{
    for (;;) {
        if (try_hit(m, ref, data, got) == 0) {
            pp__layer_thr_count(m, 1, 1);
            return 0;
        }
        PP__MPI_TP(m, MISS, NULL);
        pthread_mutex_lock(&m->req_mu);
        if (hit_after_all(m, ref, data, got)) {
            pthread_mutex_unlock(&m->req_mu);
            pp__layer_thr_count(m, 1, 1);
            return 0;
        }
        bool made;
        pp__req_t *req = start_req(m, ref, &made);
        if (req == NULL) {
            pthread_mutex_unlock(&m->req_mu);
            return PP_ENOMEM;
        }
        if (made)
            pp__common_wake(m);
        if ((flags & PP_PIN_NOWAIT) && req->state != PP__REQ_ARRIVED) {
            pthread_mutex_unlock(&m->req_mu);
            return PP_EAGAIN;
        }
        req->waiters++;
        while (req->state == PP__REQ_SENT || req->state == PP__REQ_INSTALLING)
            pthread_cond_wait(&m->req_cv, &m->req_mu);
        int rc = req->status;
        bool mine = false, again = false;
        if (req->state == PP__REQ_ARRIVED) {
            req->state = PP__REQ_INSTALLING;
            pthread_mutex_unlock(&m->req_mu);
            PP__MPI_TP(m, INSTALL, req);
            rc = install(m, req, flags & PP_PIN_NOWAIT ? PP_PUT_NOWAIT : 0, data, got);
            pthread_mutex_lock(&m->req_mu);
            mine = rc == 0;
            again = rc == PP_ESTALE;   /* the pool dropped it at once: fetch again */
            if (installer_only(rc)) {
                req->state = PP__REQ_ARRIVED;   /* the bytes wait here for another try */
                pthread_cond_broadcast(&m->req_cv);
            } else {
                /* the other waiters look again: a hit, or a new fetch */
                finish_req(m, req, rc == PP_ESTALE ? 0 : rc);
            }
        } else {
            again = rc == 0;   /* another waiter installed it */
        }
        req->waiters--;
        reap(m, req);
        pthread_mutex_unlock(&m->req_mu);
        if (mine) {
            pp__layer_thr_count(m, 0, 1);
            return 0;
        }
        if (!again)
            return rc;
    }
}

int pp__remote_unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, const void *data)
{
    (void)flags;
    if (data == NULL)
        return PP_EINVAL;
    const pp__copy_hdr_t *h = pp__typed_find(m, data);
    if (h == NULL)
        h = (const pp__copy_hdr_t *)(const void *)((const unsigned char *)data - PP__COPY_HDR);
    if (h->magic != PP__COPY_MAGIC || h->home_ref != ref.ref || h->rank != ref.rank)
        return PP_EINVAL;
    /* acquire: pairs with the release store after the copy's put */
    int rc = pp_unpin(m->pool, pp__atomic_load_acquire(&h->local));
    if (rc == 0)
        pp__layer_thr_count(m, 0, -1);
    return rc;
}

int pp__remote_prefetch(pp_mpi_t *m, pp_gref_t ref)
{
    void *d;
    if (try_hit(m, ref, &d, NULL) == 0) {
        pp__layer_thr_count(m, 0, 1);   /* the pin its unpin drops */
        return pp__remote_unpin(m, ref, 0, d);
    }
    pthread_mutex_lock(&m->req_mu);
    if (hit_after_all(m, ref, &d, NULL)) {
        pthread_mutex_unlock(&m->req_mu);
        pp__layer_thr_count(m, 0, 1);   /* the pin its unpin drops */
        return pp__remote_unpin(m, ref, 0, d);
    }
    bool made;
    pp__req_t *req = start_req(m, ref, &made);
    pthread_mutex_unlock(&m->req_mu);
    if (req == NULL)
        return PP_ENOMEM;
    if (made)
        pp__common_wake(m);
    return 0;
}

void pp__remote_drop_copy(pp_mpi_t *m, uint32_t rank, uint64_t home_ref)
{
    uint64_t local = 0;
    pthread_mutex_lock(&m->cache_mu);
    bool had = pp__ht_get(&m->cache[rank], home_ref, &local);
    if (had)
        (void)pp__ht_remove(&m->cache[rank], home_ref);
    pthread_mutex_unlock(&m->cache_mu);
    if (had)
        (void)pp_release(m->pool, local);   /* PP_ESTALE: the pool dropped it already */
}

/* ---- the progress thread's part -------------------------------------------- */

int pp__remote_send_new(pp_mpi_t *m)
{
    int sent = 0;
    pthread_mutex_lock(&m->req_mu);
    if (m->unsent == 0) {
        pthread_mutex_unlock(&m->req_mu);
        return 0;
    }
    for (pp__req_t *r = m->reqs, *next; r != NULL; r = next) {
        next = r->next;
        if (r->sent)
            continue;
        r->sent = true;
        m->unsent--;
        uint64_t f[PP__WIRE_REQ_N] = { r->id, r->home_ref, r->need };
        unsigned char msg[PP__WIRE_FIXED_SIZE(PP__WIRE_REQ_N)];
        pp__wire_fixed_pack(msg, PP__WIRE_REQ, f, PP__WIRE_REQ_N);
        int rc = pp__common_send(m, (int)r->rank, PP__TAG_REQ, msg, sizeof msg, NULL, 0, 0,
                                 NULL, NULL);
        if (rc != 0) {
            finish_req(m, r, rc);
            reap(m, r);
        } else {
            m->awaiting++;
        }
        sent++;
    }
    for (pp__mint_t *t = m->mints; t != NULL; t = t->next) {
        if (t->sent)
            continue;
        t->sent = true;
        m->unsent--;
        uint64_t f[PP__WIRE_CLAIM_N] = { t->id, t->home_ref, t->from, t->seq };
        unsigned char msg[PP__WIRE_FIXED_SIZE(PP__WIRE_CLAIM_N)];
        unsigned nf = t->claim ? PP__WIRE_CLAIM_N : PP__WIRE_MINT_N;
        pp__wire_fixed_pack(msg, t->claim ? PP__WIRE_CLAIM : PP__WIRE_MINT, f, nf);
        int rc = pp__common_send(m, (int)t->rank, t->claim ? PP__TAG_CLAIM : PP__TAG_MINT, msg,
                                 PP__WIRE_FIXED_SIZE(nf), NULL, 0, 0, NULL, NULL);
        if (rc != 0) {
            t->status = rc;
            t->done = true;
            pthread_cond_broadcast(&m->req_cv);
        } else {
            m->awaiting++;
        }
        sent++;
    }
    pthread_mutex_unlock(&m->req_mu);
    return sent;
}

void pp__remote_reply(pp_mpi_t *m, int src, pp__msg_t *msg)
{
    uint64_t f[PP__WIRE_REPLY_N];
    size_t hl = PP__WIRE_FIXED_SIZE(PP__WIRE_REPLY_N);
    if (msg->len < hl || pp__wire_fixed_check(msg->buf, hl, PP__WIRE_REPLY, f,
                                              PP__WIRE_REPLY_N) != 0) {
        pp__common_report(m, "a reply from rank %d is garbage (%zu bytes): ignored", src,
                          msg->len);
        m->t->ops->msg_free(m->t, msg);
        return;
    }
    int status = (int)(int64_t)f[1];
    pthread_mutex_lock(&m->req_mu);
    pp__req_t *req = m->reqs;
    while (req != NULL && req->id != f[0])
        req = req->next;
    if (req == NULL || req->rank != (uint32_t)src || req->state != PP__REQ_SENT ||
        (status == 0 && (f[3] != msg->len - hl || f[2] < req->need || f[2] > UINT32_MAX ||
                         f[4] >= PP_MPI_TYPES_MAX || (f[4] == 0 && f[5] != f[3]))) ||
        status > 0 || status < -64) {
        pthread_mutex_unlock(&m->req_mu);
        pp__common_report(m, "a reply from rank %d matches no request of this rank: ignored",
                          src);
        m->t->ops->msg_free(m->t, msg);
        return;
    }
    m->awaiting--;
    if (status == 0 && f[4] != 0 && pp__typed_get(m->types, (uint32_t)f[4]) == NULL) {
        pp__common_report(m, "rank %d sent ref %#llx packed by type id %u, which is not "
                          "registered here (pp_mpi_type_register): PP_ENOTSUP", src,
                          (unsigned long long)req->home_ref, (unsigned)f[4]);
        status = PP_ENOTSUP;
    }
    if (status != 0) {
        finish_req(m, req, status);
        reap(m, req);
        pthread_mutex_unlock(&m->req_mu);
        m->t->ops->msg_free(m->t, msg);
        return;
    }
    pp__atomic_add_relaxed(&m->st.bytes_fetched, f[3]);
    req->buf = msg->buf;   /* kept: it becomes the copy */
    req->len = msg->len;
    req->version = (uint32_t)f[2];
    req->type_id = (uint32_t)f[4];
    req->size = f[5];
    if (req->waiters != 0) {
        req->state = PP__REQ_ARRIVED;
        pthread_cond_broadcast(&m->req_cv);
        pthread_mutex_unlock(&m->req_mu);
        return;
    }
    /* A prefetch: install it here if there is room now, never waiting. */
    req->state = PP__REQ_INSTALLING;
    pthread_mutex_unlock(&m->req_mu);
    int rc = install(m, req, PP_PUT_NOWAIT, NULL, NULL);
    pthread_mutex_lock(&m->req_mu);
    if (installer_only(rc)) {
        req->state = PP__REQ_ARRIVED;   /* a pin installs it */
        pthread_cond_broadcast(&m->req_cv);
    } else {
        finish_req(m, req, rc == PP_ESTALE ? 0 : rc);
        reap(m, req);
    }
    pthread_mutex_unlock(&m->req_mu);
}

/* Sends the ask t to its home and waits for the answer: its status. */
static int ask_home(pp_mpi_t *m, pp__mint_t *t)
{
    pthread_mutex_lock(&m->req_mu);
    t->id = m->next_id++;
    t->next = m->mints;
    m->mints = t;
    m->unsent++;
    pthread_mutex_unlock(&m->req_mu);
    pp__common_wake(m);
    pthread_mutex_lock(&m->req_mu);
    while (!t->done)
        pthread_cond_wait(&m->req_cv, &m->req_mu);
    for (pp__mint_t **p = &m->mints; *p != NULL; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    pthread_mutex_unlock(&m->req_mu);
    return t->status;
}

int pp__remote_claim(pp_mpi_t *m, uint32_t rank, uint64_t ref, uint32_t from, uint64_t seq)
{
    pp__mint_t t = { .rank = rank, .home_ref = ref, .claim = true, .from = from, .seq = seq };
    return ask_home(m, &t);
}

/* The ask whose answer came from src: req_mu held; NULL (reported) if none. */
static pp__mint_t *answered(pp_mpi_t *m, int src, uint64_t id, bool claim)
{
    pp__mint_t *t = m->mints;
    while (t != NULL && t->id != id)
        t = t->next;
    if (t == NULL || t->rank != (uint32_t)src || t->done || t->claim != claim)
        return NULL;
    return t;
}

void pp__remote_claimed(pp_mpi_t *m, int src, const void *buf, size_t len)
{
    uint64_t f[PP__WIRE_CLAIMED_N];
    int status = 0;
    pthread_mutex_lock(&m->req_mu);
    pp__mint_t *t = pp__wire_fixed_check(buf, len, PP__WIRE_CLAIMED, f, PP__WIRE_CLAIMED_N) == 0
                        ? answered(m, src, f[0], true)
                        : NULL;
    status = t != NULL ? (int)(int64_t)f[1] : 0;
    if (t == NULL || status > 0 || status < -64) {
        pthread_mutex_unlock(&m->req_mu);
        pp__common_report(m, "a claim answer from rank %d is garbage or matches no ask: ignored",
                          src);
        return;
    }
    m->awaiting--;
    t->status = status;
    t->done = true;
    pthread_cond_broadcast(&m->req_cv);
    pthread_mutex_unlock(&m->req_mu);
}

int pp__remote_mint(pp_mpi_t *m, uint32_t rank, uint64_t ref, pp__wiv_t *iv)
{
    pp__mint_t t = { .rank = rank, .home_ref = ref };
    int rc = ask_home(m, &t);
    if (rc == 0)
        *iv = t.iv;
    return rc;
}

void pp__remote_minted(pp_mpi_t *m, int src, const void *buf, size_t len)
{
    uint64_t f[PP__WIRE_MINTED_N];
    if (pp__wire_fixed_check(buf, len, PP__WIRE_MINTED, f, PP__WIRE_MINTED_N) != 0) {
        pp__common_report(m, "a mint answer from rank %d is garbage: ignored", src);
        return;
    }
    int status = (int)(int64_t)f[1];
    pthread_mutex_lock(&m->req_mu);
    pp__mint_t *t = answered(m, src, f[0], false);
    if (t == NULL || (status == 0 && f[2] >= f[3])) {
        pthread_mutex_unlock(&m->req_mu);
        pp__common_report(m, "a mint answer from rank %d matches no ask: ignored", src);
        return;
    }
    m->awaiting--;
    t->status = status;
    t->iv = (pp__wiv_t){ f[2], f[3] };
    t->done = true;
    pthread_cond_broadcast(&m->req_cv);
    pthread_mutex_unlock(&m->req_mu);
}

bool pp__remote_idle(pp_mpi_t *m)
{
    pthread_mutex_lock(&m->req_mu);
    bool idle = m->mints == NULL && m->unsent == 0;
    for (pp__req_t *r = m->reqs; idle && r != NULL; r = r->next)
        idle = r->state != PP__REQ_SENT;
    pthread_mutex_unlock(&m->req_mu);
    return idle;
}

void pp__remote_destroy(pp_mpi_t *m)
{
    for (pp__req_t *r = m->reqs, *next; r != NULL; r = next) {
        next = r->next;
        free(r->buf);
        free(r);
    }
    m->reqs = NULL;
    for (int r = 0; r < m->size; r++) {
        ck_ht_iterator_t it = CK_HT_ITERATOR_INITIALIZER;
        ck_ht_entry_t *e;
        while (ck_ht_next(&m->cache[r], &it, &e))
            (void)pp_release(m->pool, (pp_ref_t)ck_ht_entry_value_direct(e));
    }
}
