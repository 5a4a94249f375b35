/*
 * home.c -- the home side of the MPI layer: a record per entry put through
 * the layer, write pins and the versions they publish, and serving other
 * ranks' remote pins from the progress thread.
 *
 * A record holds one owner of its entry in the local pool for as long as
 * it lives; it dies (and drops that owner) when this rank's owners
 * through the layer are gone and every interval of weight it minted has
 * come back (owners.c).  Records are recycled, never freed while the layer
 * lives: a reader that found one in the table may be looking at a record
 * that died and was reused since, so every reader checks the record's key
 * after it has claimed what it needs (layer.h).
 */
#include "layer.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* A request waiting at the home: for a version not yet published, or for
 * a write pin to end.  (One waiting for its entry to be loaded waits on
 * the loader thread: loader.c.) */
struct pp__parked {
    int src;
    uint64_t id, ref;
    uint32_t need;
    pp__parked_t *next;
};

#define HOME_BLOCK 64u

/* ---- records -------------------------------------------------------------- */

pp__home_t *pp__home_find(pp_mpi_t *m, pp_ref_t ref)
{
    uint64_t v;
    if (ref == PP_REF_NONE || !pp__ht_get(&m->home, ref, &v))
        return NULL;
    pp__home_t *h = (pp__home_t *)(uintptr_t)v;
    /* acquire: pairs with pp__home_add's release store of the key, so the
     * record's fields are seen as they were set for this ref */
    if (pp__atomic_load_acquire(&h->ref) != ref)
        return NULL;
    return h;
}

int pp__home_add(pp_mpi_t *m, pp_ref_t ref, size_t size, uint32_t type_id, pp__home_t **out)
{
    pthread_mutex_lock(&m->home_mu);
    if (m->home_free == NULL) {
        pp__home_t *blk = calloc(HOME_BLOCK, sizeof *blk);
        pp__home_t **blocks = realloc(m->home_blocks, (m->home_nblocks + 1) * sizeof *blocks);
        if (blk == NULL || blocks == NULL) {
            free(blk);
            if (blocks != NULL)
                m->home_blocks = blocks;
            pthread_mutex_unlock(&m->home_mu);
            return PP_ENOMEM;
        }
        m->home_blocks = blocks;
        m->home_blocks[m->home_nblocks++] = blk;
        for (unsigned i = 0; i < HOME_BLOCK; i++) {
            blk[i].next_free = m->home_free;
            m->home_free = &blk[i];
        }
    }
    pp__home_t *h = m->home_free;
    m->home_free = h->next_free;
    h->next_free = NULL;
    h->size = size;
    h->type_id = type_id;
    h->owners = 1;
    h->minted = 0;
    h->out = (pp__wset_t)PP__WSET_INIT;
    h->parked = NULL;
    h->zombie = false;
    pp__atomic_store_relaxed(&h->version, 1);
    pp__atomic_store_relaxed(&h->rw, 0);
    pp__atomic_store_relaxed(&h->has_parked, false);
    /* publish_queued and local_waiters are not reset: a thread that found
     * the record in an earlier life may still be about to change them (a
     * late write release queues the publish command, a woken waiter
     * counts itself out).  Reset, the flag would let the command be
     * pushed a second time while it is still in the queue, which cuts the
     * queue; a command taken late only makes the progress thread look at
     * the record's parked requests again. */
    /* release: pairs with pp__home_find's acquire load of the key: the
     * fields above are set before a reader can match it */
    pp__atomic_store_release(&h->ref, ref);
    if (!pp__ht_set(&m->home, ref, (uint64_t)(uintptr_t)h)) {
        pp__atomic_store_relaxed(&h->ref, 0);
        h->next_free = m->home_free;
        m->home_free = h;
        pthread_mutex_unlock(&m->home_mu);
        return PP_ENOMEM;
    }
    pthread_mutex_unlock(&m->home_mu);
    *out = h;
    return 0;
}

/* own_mu held; h has no owner and no weight out.  The record leaves the
 * table now; the progress thread answers what is parked on it and recycles
 * it (pp__home_killed); the entry's owner is dropped here. */
void pp__home_kill(pp_mpi_t *m, pp__home_t *h)
{
    pp_ref_t ref = pp__atomic_load_relaxed(&h->ref);
    pthread_mutex_lock(&m->home_mu);
    (void)pp__ht_remove(&m->home, ref);
    pthread_mutex_unlock(&m->home_mu);
    /* seq_cst: readers that still hold h check the key after claiming and
     * the pool's own generation check refuses a pin of the dead entry.
     * The store-load pair: this store, then pp__home_killed's load of
     * local_waiters (after the command), against wait_version's increment
     * of local_waiters, then its load of the key: either that load sees
     * the waiter and wakes it, or the waiter sees the key gone */
    pp__atomic_store_seq_cst(&h->ref, 0);
    pp__wset_free(&h->out);
    h->kill_cmd = (pp__cmd_t){ .kind = PP__CMD_KILL, .home = h };
    h->kill_cmd.rec.ref = ref;
    pp__common_push(m, &h->kill_cmd);
    if (pp_release(m->pool, ref) != 0)
        pp__common_report(m, "ref %#llx: the layer's owner was already gone (released with "
                             "pp_release instead of pp_mpi_release?)", (unsigned long long)ref);
}

/* ---- pins on the home ------------------------------------------------------ */

/* Waits until h has published at least need (req_mu's pub_cv).  0;
 * PP_EAGAIN with PP_PIN_NOWAIT; PP_ESTALE if h died meanwhile (its key is
 * no longer ref: pp__home_killed wakes the waiters). */
static int wait_version(pp_mpi_t *m, pp__home_t *h, pp_ref_t ref, uint32_t need, unsigned flags)
{
    /* acquire: pairs with the release increment in release_writer */
    if (pp__atomic_load_acquire(&h->version) >= need)
        return 0;
    if (flags & PP_PIN_NOWAIT)
        return PP_EAGAIN;
    int rc = 0;
    pthread_mutex_lock(&m->req_mu);
    /* seq_cst increment, then seq_cst loads of the version and the key:
     * two store-load pairs, against release_writer (its increment of
     * version, then its load of local_waiters) and against the kill (its
     * store of the key, then pp__home_killed's load of local_waiters).
     * Either the other side sees us waiting and broadcasts (under req_mu,
     * so not before we wait), or we see its change.  The version load is
     * also the acquire of release_writer's increment. */
    pp__atomic_add_seq_cst(&h->local_waiters, 1);
    while (pp__atomic_load_seq_cst(&h->version) < need) {
        if (pp__atomic_load_seq_cst(&h->ref) != ref) {
            rc = PP_ESTALE;
            break;
        }
        pthread_cond_wait(&m->pub_cv, &m->req_mu);
    }
    /* relaxed: we are done waiting, and a count seen too high only costs
     * a needless broadcast.  It cannot hide another waiter: its seq_cst
     * increment is in every later value of the counter, which a seq_cst
     * load after that increment reads. */
    pp__atomic_sub_relaxed(&h->local_waiters, 1);
    pthread_mutex_unlock(&m->req_mu);
    return rc;
}

/* Ends one writer's place in h, taken by pp__home_pin: every path that
 * takes the place back comes here, the write unpin (publish: the next
 * version) and every failure or rollback (nothing written: no version).
 * Either way a serve parked behind the writer may go now, so the progress
 * thread is told (one queued command per record: it rereads the record),
 * and threads waiting for a version are woken.  h may have died and been
 * reused since (a pin that found it in an earlier life): what it tells is
 * then only a look for nothing. */
static void release_writer(pp_mpi_t *m, pp__home_t *h, bool publish)
{
    /* seq_cst (release at least: pairs with wait_version's and
     * try_serve's loads of version, so a reader that sees the new version
     * sees the data written under this pin).  The store-load pairs: this
     * increment, then the loads of local_waiters and has_parked below,
     * against wait_version (local_waiters, then version) and try_serve
     * (has_parked, then rw and version) */
    if (publish)
        pp__atomic_add_seq_cst(&h->version, 1);
    /* seq_cst: release pairs with a serve's acquire CAS (the writes come
     * before the send that reads them).  The store-load pair: this
     * decrement, then the load of has_parked below, against try_serve's
     * store of has_parked, then its load of rw */
    pp__atomic_sub_seq_cst(&h->rw, PP__RW_WRITER);
    PP__MPI_TP(m, WRITER_GONE, h);
    /* seq_cst: the load of the pair with wait_version (above) */
    if (publish && pp__atomic_load_seq_cst(&h->local_waiters) != 0) {
        pthread_mutex_lock(&m->req_mu);
        pthread_cond_broadcast(&m->pub_cv);
        pthread_mutex_unlock(&m->req_mu);
    }
    /* seq_cst: the load of the pair with try_serve (above).  The exchange
     * is acquire: it pairs with pp__home_publish's release clear of the
     * flag, which comes after the progress thread last read publish_cmd,
     * so we rewrite the command only after that read.  It needs no
     * release: a writer that finds the flag set relies on the has_parked
     * handshake, not on this word, for the progress thread to see its
     * decrement of rw. */
    if (pp__atomic_load_seq_cst(&h->has_parked) &&
        !pp__atomic_exchange_acquire(&h->publish_queued, true)) {
        h->publish_cmd = (pp__cmd_t){ .kind = PP__CMD_PUBLISH, .home = h };
        pp__common_push(m, &h->publish_cmd);
    }
}

int pp__home_pin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, void **data, uint32_t *got)
{
    pp__home_t *h = pp__home_find(m, ref.ref);
    if (h == NULL)
        return PP_ESTALE;
    int rc = wait_version(m, h, ref.ref, ref.version, flags);
    if (rc != 0)
        return rc;
    if (flags & PP_PIN_WRITE) {
        /* Claim a writer's place while no serve is in flight: a copy on
         * its way to another rank is never written under it. */
        uint32_t v = pp__atomic_load_relaxed(&h->rw);
        for (;;) {
            if ((v & PP__RW_SERVES) != 0) {
                if (flags & PP_PIN_NOWAIT)
                    return PP_EAGAIN;
                sched_yield();
                v = pp__atomic_load_relaxed(&h->rw);
                continue;
            }
            /* acquire: pairs with a serve's release when its send is done,
             * so the send's reads of the data come before our writes */
            if (pp__atomic_cas_weak_acquire(&h->rw, &v, v + PP__RW_WRITER))
                break;
        }
        if (pp__atomic_load_relaxed(&h->ref) != ref.ref) {
            release_writer(m, h, false);
            return PP_ESTALE;
        }
    }
    rc = pp_pin(m->pool, ref.ref, flags, data);
    if (rc == 0 && (flags & PP_PIN_WRITE) && pp__perthread_wpin_add(m->id, ref.ref) != 0) {
        (void)pp_unpin(m->pool, ref.ref);
        rc = PP_ENOMEM;
    }
    if (rc != 0) {
        if (flags & PP_PIN_WRITE)
            release_writer(m, h, false);
        return rc;
    }
    if (got != NULL)
        *got = pp__atomic_load_relaxed(&h->version);
    return 0;
}

int pp__home_unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, bool publish)
{
    if (!(flags & PP_PIN_WRITE))
        return pp_unpin(m->pool, ref.ref);
    /* Only a thread that holds a write pin of ref drops one: a read pin
     * dropped with PP_PIN_WRITE is refused, whoever else writes. */
    uint32_t *mine = pp__perthread_wpin_find(m->id, ref.ref);
    if (mine == NULL)
        return PP_ENOTPINNED;
    int rc = pp_unpin(m->pool, ref.ref);
    if (rc != 0)
        return rc;
    --*mine;
    pp__home_t *h = pp__home_find(m, ref.ref);
    if (h != NULL)
        release_writer(m, h, publish);
    /* else the record died under the pin: it stays a zombie (pp__home_killed) */
    return 0;
}

/* ---- serving (progress thread) --------------------------------------------- */

typedef struct serve {
    pp_mpi_t *m;
    pp__home_t *h;
    uint64_t ref;
    void *packed;                  /* a typed entry: what its save wrote */
    unsigned char hdr[PP__COPY_HDR];
} serve_t;

static void reply_status(pp_mpi_t *m, int src, uint64_t id, int status)
{
    uint64_t f[PP__WIRE_REPLY_N] = { id, (uint64_t)(int64_t)status, 0, 0, 0, 0 };
    unsigned char hdr[PP__WIRE_FIXED_SIZE(PP__WIRE_REPLY_N)];
    pp__wire_fixed_pack(hdr, PP__WIRE_REPLY, f, PP__WIRE_REPLY_N);
    (void)pp__common_send(m, src, PP__TAG_REPLY, hdr, sizeof hdr, NULL, 0, 0, NULL, NULL);
}

static void recycle(pp_mpi_t *m, pp__home_t *h)
{
    pthread_mutex_lock(&m->home_mu);
    h->next_free = m->home_free;
    m->home_free = h;
    pthread_mutex_unlock(&m->home_mu);
}

static void served(void *arg, int err)
{
    serve_t *s = arg;
    pp__home_t *h = s->h;
    (void)err;   /* a failed send was reported by the transport's caller */
    (void)pp_unpin(s->m->pool, s->ref);
    free(s->packed);
    /* release: pairs with pp__home_pin's acquire CAS: our reads of the
     * data (the send) come before a writer is let in to write */
    uint32_t was = pp__atomic_sub_release(&h->rw, 1);
    if (h->zombie && was == 1) {
        h->zombie = false;   /* killed during the send: its memory may be reused now */
        recycle(s->m, h);
    }
    free(s);
}

static int park(pp__parked_t **list, int src, uint64_t id, uint64_t ref, uint32_t need)
{
    pp__parked_t *p = malloc(sizeof *p);
    if (p == NULL)
        return PP_ENOMEM;
    *p = (pp__parked_t){ src, id, ref, need, *list };
    *list = p;
    return 0;
}

/* A typed entry, pinned for a serve: packed with its type's save (on this
 * thread: the pin and the serve's count keep writers out meanwhile).
 * PP_EIO (save failed, reported), PP_ENOMEM. */
static int pack(pp_mpi_t *m, const pp__home_t *h, const void *data, void **out, size_t *len)
{
    const pp_type_t *type = pp__typed_get(m->types, h->type_id);
    int rc = pp_type_pack(type, data, h->size, out, len);
    if (rc != 0)
        pp__common_report(m, "type %s: save failed (%s) packing ref %#llx for another rank",
                          type->name != NULL ? type->name : "(unnamed)", pp_err_name(rc),
                          (unsigned long long)pp__atomic_load_relaxed(&h->ref));
    return rc == PP_ENOMEM ? PP_ENOMEM : rc != 0 ? PP_EIO : 0;
}

/* Serves one request, or parks it.  1: done with it (served or answered);
 * 0: parked on h; 2: queued for a load on the loader thread. */
static int try_serve(pp_mpi_t *m, int src, uint64_t id, uint64_t ref, uint32_t need)
{
    pp__home_t *h = pp__home_find(m, ref);
    if (h == NULL) {
        reply_status(m, src, id, PP_ESTALE);
        return 1;
    }
    if (h->type_id == PP__TYPE_UNREGISTERED) {
        pp__common_report(m, "rank %d pinned ref %#llx, whose type is not registered here "
                          "(pp_mpi_type_register): PP_ENOTSUP", src, (unsigned long long)ref);
        reply_status(m, src, id, PP_ENOTSUP);
        return 1;
    }
    uint32_t v = pp__atomic_load_relaxed(&h->rw);
    /* acquire: pairs with release_writer's increment */
    uint32_t version = pp__atomic_load_acquire(&h->version);
    for (bool looked_again = false;;) {
        if (v >= PP__RW_WRITER || version < need || (v & PP__RW_SERVES) == PP__RW_SERVES) {
            if (!looked_again) {
                /* seq_cst store, then seq_cst loads of rw and version:
                 * the store-load pair against release_writer (its
                 * changes of version and rw, then its load of has_parked).
                 * A write unpin either sees the flag (and tells us) or
                 * made the change we now see */
                pp__atomic_store_seq_cst(&h->has_parked, true);
                looked_again = true;
                v = pp__atomic_load_seq_cst(&h->rw);
                version = pp__atomic_load_seq_cst(&h->version);
                continue;
            }
            if (park(&h->parked, src, id, ref, need) != 0) {
                reply_status(m, src, id, PP_ENOMEM);
                return 1;
            }
            PP__MPI_TP(m, PARKED, h);
            return 0;
        }
        /* acquire: pairs with release_writer's decrement of rw, so the
         * last writer's data comes before the send reads it */
        if (pp__atomic_cas_weak_acquire(&h->rw, &v, v + 1))
            break;
    }
    void *data = NULL;
    int rc = pp__atomic_load_relaxed(&h->ref) == ref
                 ? pp_pin(m->pool, ref, PP_PIN_NOWAIT, &data)
                 : PP_ESTALE;
    if (rc != 0) {
        pp__atomic_sub_relaxed(&h->rw, 1);
        if (rc == PP_EAGAIN) {
            /* not resident: the loader thread pins it, waiting for the
             * load, and brings the request back with the load's result */
            if (pp__loader_add(m, src, id, ref, need) == 0)
                return 2;
            rc = PP_ENOMEM;
        }
        reply_status(m, src, id, rc);
        return 1;
    }
    serve_t *s = malloc(sizeof *s);
    if (s == NULL) {
        (void)pp_unpin(m->pool, ref);
        pp__atomic_sub_relaxed(&h->rw, 1);
        reply_status(m, src, id, PP_ENOMEM);
        return 1;
    }
    version = pp__atomic_load_relaxed(&h->version);   /* under the serve: no writer */
    *s = (serve_t){ .m = m, .h = h, .ref = ref };
    const void *body = data;
    size_t len = h->size;
    if (h->type_id != 0) {
        rc = pack(m, h, data, &s->packed, &len);
        if (rc != 0) {
            served(s, rc);
            reply_status(m, src, id, rc);
            return 1;
        }
        body = s->packed;
    }
    uint64_t f[PP__WIRE_REPLY_N] = { id, 0, version, len, h->type_id, h->size };
    pp__wire_fixed_pack(s->hdr, PP__WIRE_REPLY, f, PP__WIRE_REPLY_N);
    rc = pp__common_send(m, src, PP__TAG_REPLY, s->hdr, sizeof s->hdr, body, len, 0, served, s);
    if (rc != 0) {
        served(s, rc);
        return 1;
    }
    pp__atomic_add_relaxed(&m->st.requests_served, 1);
    pp__atomic_add_relaxed(&m->st.bytes_served, len);
    return 1;
}

void pp__home_serve(pp_mpi_t *m, int src, const void *buf, size_t len)
{
    uint64_t f[PP__WIRE_REQ_N];
    if (pp__wire_fixed_check(buf, len, PP__WIRE_REQ, f, PP__WIRE_REQ_N) != 0 ||
        f[2] > UINT32_MAX) {
        pp__common_report(m, "a request from rank %d is garbage (%zu bytes): ignored", src, len);
        return;
    }
    (void)try_serve(m, src, f[0], f[1], (uint32_t)f[2]);
}

/* Takes a list and serves what it can; what cannot be served parks again. */
static void serve_list(pp_mpi_t *m, pp__parked_t *p)
{
    while (p != NULL) {
        pp__parked_t *next = p->next;
        (void)try_serve(m, p->src, p->id, p->ref, p->need);
        free(p);
        p = next;
    }
}

void pp__home_publish(pp_mpi_t *m, pp__home_t *h)
{
    /* release, not seq_cst: pairs with release_writer's acquire exchange,
     * so a writer that finds the flag clear rewrites publish_cmd only
     * after take_commands read it.  A publish after this point queues the
     * command again.  One that found the flag still set is seen through
     * has_parked: every request this list parks again stores it (seq_cst)
     * and then looks at rw and version again (try_serve), so no
     * store-load pair involves this word. */
    pp__atomic_store_release(&h->publish_queued, false);
    pp__parked_t *p = h->parked;
    h->parked = NULL;
    /* what cannot be served now parks again, and sets the flag again.
     * relaxed, not seq_cst: a writer that reads this false leaves no
     * request behind.  Each request parked again stores true (seq_cst)
     * after it, then looks again; a seq_cst load that follows that store
     * in the total order cannot read this earlier value. */
    pp__atomic_store_relaxed(&h->has_parked, false);
    serve_list(m, p);
}

void pp__home_loaded(pp_mpi_t *m, int src, uint64_t id, uint64_t ref, uint32_t need, int rc)
{
    if (rc != 0)
        reply_status(m, src, id, rc);   /* the load's error is the remote pin's */
    else
        (void)try_serve(m, src, id, ref, need);   /* resident: the loader's pin holds it */
}

void pp__home_killed(pp_mpi_t *m, pp__home_t *h)
{
    /* seq_cst: the load of the pair with wait_version (the kill's store
     * of the key, then this load; pp__home_kill) */
    if (pp__atomic_load_seq_cst(&h->local_waiters) != 0) {
        /* threads of this rank waiting for a version that will never come:
         * they see the key gone and return PP_ESTALE */
        pthread_mutex_lock(&m->req_mu);
        pthread_cond_broadcast(&m->pub_cv);
        pthread_mutex_unlock(&m->req_mu);
    }
    pp__parked_t *p = h->parked;
    h->parked = NULL;
    while (p != NULL) {
        pp__parked_t *next = p->next;
        reply_status(m, p->src, p->id, PP_ESTALE);
        free(p);
        p = next;
    }
    /* A serve in flight still holds h (its done callback decrements rw), so
     * h is reused only after it: served() recycles it.  A write pin still
     * held when the entry died cannot find h again at its unpin (h is out
     * of the table), so such a record is never reused: it stays a zombie
     * until destroy frees its block (one record per such race). */
    if (pp__atomic_load_relaxed(&h->rw) != 0)
        h->zombie = true;
    else
        recycle(m, h);
}

/* Destroy, before FIN: a request that waits for a version nobody will
 * publish now is answered PP_EAGAIN (the asker gives up, nothing lost). */
void pp__home_finish(pp_mpi_t *m)
{
    for (size_t b = 0; b < m->home_nblocks; b++) {
        for (unsigned i = 0; i < HOME_BLOCK; i++) {
            pp__home_t *h = &m->home_blocks[b][i];
            pp__parked_t *p = h->parked;
            h->parked = NULL;
            while (p != NULL) {
                pp__parked_t *next = p->next;
                reply_status(m, p->src, p->id, PP_EAGAIN);
                free(p);
                p = next;
            }
        }
    }
}

/* After the progress thread stopped: every record still alive is
 * reported (owners here never released, weight other ranks never
 * returned) and drops its owner of the entry. */
void pp__home_destroy(pp_mpi_t *m)
{
    for (size_t b = 0; b < m->home_nblocks; b++) {
        for (unsigned i = 0; i < HOME_BLOCK; i++) {
            pp__home_t *h = &m->home_blocks[b][i];
            pp_ref_t ref = pp__atomic_load_relaxed(&h->ref);
            if (ref == PP_REF_NONE)
                continue;
            if (h->owners != 0)
                pp__common_report(m, "destroy: ref %#llx still has %u owner(s) on its home",
                                  (unsigned long long)ref, h->owners);
            if (!pp__wset_empty(&h->out))
                pp__common_report(m, "destroy: ref %#llx: weight %llu never came back from other "
                                     "ranks (owners not released, or tokens never imported)",
                                  (unsigned long long)ref,
                                  (unsigned long long)pp__wset_weight(&h->out));
            pp__wset_free(&h->out);
            (void)pp_release(m->pool, ref);
        }
        free(m->home_blocks[b]);
    }
    free(m->home_blocks);
    m->home_blocks = NULL;
    m->home_nblocks = 0;
}
