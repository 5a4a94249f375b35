/*
 * typed.c -- entries whose type has save and load, across ranks.
 *
 * Such an entry's bytes are not its data (a struct with pointers, say), so
 * the home packs it with the type's save (pp_type_pack, on its progress
 * thread, under the serve's read pin: home.c) and the pinning rank unpacks
 * it with the type's load (pp_type_unpack, on the thread that installs the
 * copy).  Both sides know the type by an id the application registers on
 * every rank that puts or pins such entries.
 *
 * A typed copy is an entry of the local pool whose data is a copy header
 * alone (layer.h, pp__copy_hdr_t), of the registry's DISCARD type; the
 * header's obj is what load made, and a pin gives obj.  An unpin is given
 * obj back, so the registry keeps a table obj -> header (a ck_ht read
 * without a lock, written under the registry's mutex): a typed unpin is
 * one lookup, and so is every other remote unpin once a type is registered
 * (a flat copy's data cannot be told from a typed one's without it); with
 * no type registered, none.  The copy's free (on the local pool's
 * reclaimer, or at pp_pool_destroy) takes obj out of the table, frees it
 * with the type's free and drops the copy's reference to the registry, so
 * the registry lives as long as the layer or its last typed copy,
 * whichever is later: a copy may be freed after pp_mpi_destroy.
 */
#include "layer.h"

#include <stdlib.h>
#include <string.h>

typedef struct pp__types {
    _Atomic uint32_t refs;               /* the layer's, and one per typed copy */
    _Atomic uint32_t nreg;               /* types registered (0: no typed copy can exist) */
    pthread_mutex_t mu;                  /* registration; writers of by_obj */
    const pp_type_t *_Atomic reg[PP_MPI_TYPES_MAX];
    ck_ht_t by_obj;                      /* obj -> its copy's header */
    pp_type_t copy_type;                 /* the copies' type: DISCARD, free = copy_free */
} pp__types_t;

static void copy_free(void *data, size_t size, void *ctx);

int pp__typed_create(pp__types_t **out)
{
    pp__types_t *ts = calloc(1, sizeof *ts);
    if (ts == NULL)
        return PP_ENOMEM;
    pp__ht_hold();
    if (!pp__ht_init(&ts->by_obj)) {
        pp__ht_unhold();
        free(ts);
        return PP_ENOMEM;
    }
    pthread_mutex_init(&ts->mu, NULL);
    pp__atomic_store_relaxed(&ts->refs, 1);   /* not shared yet */
    ts->copy_type = (pp_type_t){ .name = "pinpool-mpi typed copy",
                                 .free = copy_free,
                                 .ctx = ts,
                                 .flags = PP_TYPE_DISCARD };
    *out = ts;
    return 0;
}

static void types_ref(pp__types_t *ts)
{
    pp__atomic_add_relaxed(&ts->refs, 1);
}

void pp__typed_unref(pp__types_t *ts)
{
    if (ts == NULL)
        return;
    /* acq_rel: the release half pairs with the acquire half of the last
     * holder's decrement, so every use of the registry by one holder
     * comes before the last holder's free of it */
    if (pp__atomic_sub_acq_rel(&ts->refs, 1) != 1)
        return;
    ck_ht_destroy(&ts->by_obj);
    pthread_mutex_destroy(&ts->mu);
    free(ts);
    pp__ht_unhold();
}

int pp_mpi_type_register(pp_mpi_t *m, uint32_t id, const pp_type_t *type)
{
    if (m == NULL || id == 0 || id >= PP_MPI_TYPES_MAX || type == NULL || type->save == NULL ||
        type->load == NULL || (type->flags & PP_TYPE_DISCARD))
        return PP_EINVAL;
    pp__types_t *ts = m->types;
    int rc = 0;
    pthread_mutex_lock(&ts->mu);
    const pp_type_t *had = pp__atomic_load_relaxed(&ts->reg[id]);
    if (had == NULL) {
        for (uint32_t i = 1; i < PP_MPI_TYPES_MAX && rc == 0; i++)
            if (pp__atomic_load_relaxed(&ts->reg[i]) == type)
                rc = PP_EINVAL;   /* already registered under another id */
        if (rc == 0) {
            /* release: pairs with pp__typed_get's acquire load, so a
             * thread that finds the type reads it as given */
            pp__atomic_store_release(&ts->reg[id], type);
            pp__atomic_add_relaxed(&ts->nreg, 1);
        }
    } else if (had != type) {
        rc = PP_EINVAL;   /* the id is another type's */
    }
    pthread_mutex_unlock(&ts->mu);
    return rc;
}

uint32_t pp__typed_id_of(const pp__types_t *ts, const pp_type_t *type)
{
    if (type == NULL || type->save == NULL)
        return 0;
    for (uint32_t i = 1; i < PP_MPI_TYPES_MAX; i++)
        if (pp__atomic_load_relaxed(&ts->reg[i]) == type)
            return i;
    return PP__TYPE_UNREGISTERED;
}

const pp_type_t *pp__typed_get(const pp__types_t *ts, uint32_t id)
{
    if (id == 0 || id >= PP_MPI_TYPES_MAX)
        return NULL;
    /* acquire: pairs with the registration's release */
    return pp__atomic_load_acquire(&ts->reg[id]);
}

/* What load made, freed as the type frees its data. */
static void free_obj(const pp_type_t *type, void *obj, size_t size)
{
    if (type->free != NULL)
        type->free(obj, size, type->ctx);
    else
        free(obj);
}

/* The copies' free: the pool calls it once per typed copy, on a reclaimer
 * (or at pp_pool_destroy), when the copy is dead and unpinned. */
static void copy_free(void *data, size_t size, void *ctx)
{
    pp__types_t *ts = ctx;
    pp__copy_hdr_t *h = data;
    if (h->obj != NULL) {
        /* out of the table before obj's memory can be reused */
        pthread_mutex_lock(&ts->mu);
        uint64_t v;
        if (pp__ht_get(&ts->by_obj, (uint64_t)(uintptr_t)h->obj, &v) && v == (uintptr_t)h)
            (void)pp__ht_remove(&ts->by_obj, (uint64_t)(uintptr_t)h->obj);
        pthread_mutex_unlock(&ts->mu);
        free_obj(pp__typed_get(ts, h->type_id), h->obj, size);
    }
    free(h);
    pp__typed_unref(ts);
}

/* A copy's header for req's reply (all but local), before its put: a
 * typed copy's here, a flat one's in remote.c (flat_copy). */
void pp__typed_hdr_fill(pp__copy_hdr_t *h, const pp__req_t *req, uint64_t size)
{
    memset(h, 0, sizeof *h);
    h->magic = PP__COPY_MAGIC;
    h->home_ref = req->home_ref;
    h->size = size;
    h->rank = req->rank;
    h->version = req->version;
}

int pp__typed_copy(pp_mpi_t *m, pp__req_t *req, unsigned put_flags, pp_ref_t *local,
                   pp__copy_hdr_t **hdr)
{
    pp__types_t *ts = m->types;
    const pp_type_t *type = pp__typed_get(ts, req->type_id);   /* checked at the reply */
    pp__copy_hdr_t *h = malloc(sizeof *h);
    if (h == NULL)
        return PP_ENOMEM;
    /* Everything but local is written before the put, which publishes it
     * to every pin of the copy. */
    pp__typed_hdr_fill(h, req, req->size);
    h->types = ts;
    h->type_id = req->type_id;
    int rc = pp_type_unpack(type, (const unsigned char *)req->buf + PP__COPY_HDR,
                            req->len - PP__COPY_HDR, (size_t)req->size, &h->obj);
    if (rc != 0) {
        pp__common_report(m, "type %s: load failed for a copy of rank %u's ref %#llx",
                          type->name != NULL ? type->name : "(unnamed)", req->rank,
                          (unsigned long long)req->home_ref);
        free(h);
        return rc;
    }
    /* obj names the copy at its unpins: it goes into the table before the
     * put, and no other copy may hold it (a load that hands out data
     * another copy holds breaks its contract, and the unpins of the two
     * could not be told apart: refused, never mapped twice). */
    uint64_t key = (uint64_t)(uintptr_t)h->obj, other;
    pthread_mutex_lock(&ts->mu);
    bool taken = pp__ht_get(&ts->by_obj, key, &other);
    bool in = !taken && pp__ht_set(&ts->by_obj, key, (uint64_t)(uintptr_t)h);
    pthread_mutex_unlock(&ts->mu);
    if (taken) {
        pp__common_report(m, "type %s: load returned data that another copy holds (a load must "
                          "allocate new data): rank %u's ref %#llx not copied, PP_EIO",
                          type->name != NULL ? type->name : "(unnamed)", req->rank,
                          (unsigned long long)req->home_ref);
        free(h);   /* obj is the other copy's */
        return PP_EIO;
    }
    if (!in) {
        free_obj(type, h->obj, (size_t)req->size);
        free(h);
        return PP_ENOMEM;
    }
    types_ref(ts);
    pp_ref_t ref;
    rc = pp_put(m->pool, h, (size_t)req->size, &ts->copy_type, put_flags, &ref);
    if (rc != 0) {
        /* no room now: the packed bytes stay req's, for the next try */
        pthread_mutex_lock(&ts->mu);
        (void)pp__ht_remove(&ts->by_obj, key);
        pthread_mutex_unlock(&ts->mu);
        free_obj(type, h->obj, (size_t)req->size);
        free(h);
        pp__typed_unref(ts);
        return rc;
    }
    /* From here the pool owns h, and copy_free undoes the rest; until the
     * pin, the pool may drop the copy and free h, so h is not touched. */
    void *d;
    if (pp_pin(m->pool, ref, PP_PIN_NOWAIT, &d) != 0)
        return PP_ESTALE;   /* dropped already, to make room */
    /* release: pairs with the unpin's acquire load */
    pp__atomic_store_release(&h->local, ref);
    free(req->buf);   /* unpacked: the copy holds what load made */
    req->buf = NULL;
    *local = ref;
    *hdr = h;
    return 0;
}

const pp__copy_hdr_t *pp__typed_find(pp_mpi_t *m, const void *data)
{
    pp__types_t *ts = m->types;
    /* relaxed: a typed copy this thread holds a pin of was installed after
     * its type was registered, and the pin ordered that before us */
    if (pp__atomic_load_relaxed(&ts->nreg) == 0)
        return NULL;
    uint64_t h;
    if (!pp__ht_get(&ts->by_obj, (uint64_t)(uintptr_t)data, &h))
        return NULL;
    return (const pp__copy_hdr_t *)(uintptr_t)h;
}
