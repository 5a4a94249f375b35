/*
 * layer.c -- the MPI layer's life (create, destroy), put, stats, and the
 * public calls that only choose between the home side (home.c) and the
 * remote side (remote.c): the top of the layer, which calls every file
 * below it.
 */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- create, destroy ------------------------------------------------------ */

static void free_layer(pp_mpi_t *m)
{
    if (m->cache != NULL)
        for (int r = 0; r < m->size; r++)
            ck_ht_destroy(&m->cache[r]);
    if (m->proxies != NULL)
        for (int r = 0; r < m->size; r++)
            ck_ht_destroy(&m->proxies[r]);
    ck_ht_destroy(&m->home);
    if (m->outbox != NULL)
        for (int r = 0; r < m->size; r++)
            free(m->outbox[r].rec);
    if (m->seen_seq != NULL)
        for (int r = 0; r < m->size; r++)
            pp__wset_free(&m->seen_seq[r]);
    if (m->claimed != NULL)
        for (int r = 0; r < m->size; r++)
            pp__wset_free(&m->claimed[r]);
    free(m->claimed);
    free(m->export_seq);
    free(m->cache);
    free(m->proxies);
    free(m->outbox);
    free(m->sent_to);
    free(m->recv_from);
    free(m->fin_from);
    free(m->seen_seq);
    pp__perthread_free(m);
    pthread_mutex_destroy(&m->thr_mu);
    pthread_mutex_destroy(&m->cmd_mu);
    pthread_mutex_destroy(&m->home_mu);
    pthread_mutex_destroy(&m->own_mu);
    pthread_mutex_destroy(&m->cache_mu);
    pthread_mutex_destroy(&m->req_mu);
    pthread_cond_destroy(&m->req_cv);
    pthread_cond_destroy(&m->pub_cv);
    pthread_mutex_destroy(&m->load_mu);
    pthread_cond_destroy(&m->load_cv);
    pp__typed_unref(m->types);   /* lives on while typed copies do */
    free(m);
    pp__ht_unhold();
}

int pp__layer_create_on(pp__transport_t *t, bool own, pp_pool_t *pool, pp_mpi_t **out)
{
    if (t == NULL || pool == NULL || out == NULL || t->size <= 0)
        return PP_EINVAL;
    pp_mpi_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return PP_ENOMEM;
    pp__ht_hold();
    m->pool = pool;
    m->t = t;
    m->own_transport = own;
    m->rank = t->rank;
    m->size = t->size;
    m->id = pp__perthread_layer_id();
    pthread_mutex_init(&m->thr_mu, NULL);
    pthread_mutex_init(&m->cmd_mu, NULL);
    pthread_mutex_init(&m->home_mu, NULL);
    pthread_mutex_init(&m->own_mu, NULL);
    pthread_mutex_init(&m->cache_mu, NULL);
    pthread_mutex_init(&m->req_mu, NULL);
    pthread_cond_init(&m->req_cv, NULL);
    pthread_cond_init(&m->pub_cv, NULL);
    pthread_mutex_init(&m->load_mu, NULL);
    pthread_cond_init(&m->load_cv, NULL);
    size_t n = (size_t)m->size;
    m->cache = calloc(n, sizeof *m->cache);
    m->proxies = calloc(n, sizeof *m->proxies);
    m->outbox = calloc(n, sizeof *m->outbox);
    m->sent_to = calloc(n, sizeof *m->sent_to);
    m->recv_from = calloc(n, sizeof *m->recv_from);
    m->fin_from = calloc(n, sizeof *m->fin_from);
    m->seen_seq = calloc(n, sizeof *m->seen_seq);
    m->export_seq = calloc(n, sizeof *m->export_seq);
    m->claimed = calloc(n, sizeof *m->claimed);
    bool ok = m->cache && m->proxies && m->outbox && m->sent_to && m->recv_from &&
              m->fin_from && m->seen_seq && m->export_seq && m->claimed &&
              pp__ht_init(&m->home) &&
              pp__typed_create(&m->types) == 0;
    for (size_t r = 0; ok && r < n; r++) {
        ok = pp__ht_init(&m->cache[r]) && pp__ht_init(&m->proxies[r]);
        m->fin_from[r] = UINT64_MAX;
    }
    m->next_id = 1;
    if (!ok) {
        /* ck_ht_destroy of a table that was never made is a no-op only if
         * it is zeroed: calloc saw to that. */
        free_layer(m);
        return PP_ENOMEM;
    }
    if (pthread_create(&m->thread, NULL, pp__progress_main, m) != 0) {
        free_layer(m);
        return PP_ENOMEM;
    }
    *out = m;
    return 0;
}

int pp_mpi_create(MPI_Comm comm, pp_pool_t *pool, pp_mpi_t **out)
{
    if (pool == NULL || out == NULL || comm == MPI_COMM_NULL)
        return PP_EINVAL;
    int inited = 0, level = 0;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited)
        return PP_ENOTSUP;
    if (MPI_Query_thread(&level) != MPI_SUCCESS || level < MPI_THREAD_SERIALIZED)
        return PP_ENOTSUP;
    pp__transport_t *t = NULL;
    char err[160] = "";
    int rc = pp__transport_mpi_create(comm, &t, err, sizeof err);
    if (rc != 0) {
        if (err[0] != '\0')
            fprintf(stderr, "pinpool-mpi: %s\n", err);
        return rc;
    }
    rc = pp__layer_create_on(t, true, pool, out);
    if (rc != 0)
        t->ops->destroy(t);
    return rc;
}

int pp_mpi_destroy(pp_mpi_t *m)
{
    if (m == NULL)
        return PP_EINVAL;
    uint64_t hits;
    int64_t pins;
    pp__perthread_sum(m, &hits, &pins);   /* every thread's pins and unpins */
    if (pins > 0)
        return PP_EBUSY;
    /* Owners this rank still holds of other ranks' entries are reported
     * and their weight goes home, before the FIN that says nothing more
     * comes from here but replies. */
    pp__owners_finish(m);
    /* release: pairs with the progress thread's acquire load: the owners
     * pp__owners_finish gave back are queued before it sees the flag */
    pp__atomic_store_release(&m->finishing, 1);
    pp__common_wake(m);
    pthread_join(m->thread, NULL);
    pp__loader_stop(m);
    int rc = m->progress_err;
    pp__home_destroy(m);
    pp__remote_destroy(m);
    pp__owners_destroy(m);
    if (m->own_transport)
        m->t->ops->destroy(m->t);
    free_layer(m);
    return rc;
}

/* ---- put, stats ----------------------------------------------------------- */

int pp_mpi_put(pp_mpi_t *m, void *data, size_t size, const pp_type_t *type, unsigned flags,
               pp_gref_t *out)
{
    if (m == NULL || out == NULL)
        return PP_EINVAL;
    pp_ref_t ref;
    int rc = pp_put(m->pool, data, size, type, flags, &ref);
    if (rc != 0)
        return rc;
    pp__home_t *h = NULL;
    rc = pp__home_add(m, ref, size, pp__typed_id_of(m->types, type), &h);
    if (rc != 0) {
        /* The pool owns data now: dropping the one owner frees it. */
        (void)pp_release(m->pool, ref);
        return rc;
    }
    *out = (pp_gref_t){ ref, (uint32_t)m->rank, 1 };
    return 0;
}

int pp_mpi_stats(pp_mpi_t *m, pp_mpi_stats_t *out)
{
    if (m == NULL || out == NULL)
        return PP_EINVAL;
    /* relaxed: counts for reporting, each bumped with a relaxed add that
     * publishes nothing, so an acquire load would pair with nothing */
#define PP__LD(f) pp__atomic_load_relaxed(&m->st.f)
    *out = (pp_mpi_stats_t){
        .misses = PP__LD(misses),
        .requests_served = PP__LD(requests_served),
        .bytes_fetched = PP__LD(bytes_fetched),
        .bytes_served = PP__LD(bytes_served),
        .weight_messages = PP__LD(weight_messages),
        .weight_records = PP__LD(weight_records),
        .refused_imports = PP__LD(refused_imports),
    };
#undef PP__LD
    /* acquire: pairs with the release add in owners.c (return_one): a
     * refused return is reported before it is counted, so whoever sees
     * the count sees the line */
    out->refused_returns = pp__atomic_load_acquire(&m->st.refused_returns);
    int64_t pins;
    pp__perthread_sum(m, &out->hits, &pins);   /* the threads' blocks */
    return 0;
}

/* ---- pins: home or remote ------------------------------------------------- */

static int check_ref(const pp_mpi_t *m, pp_gref_t ref)
{
    if (ref.ref == PP_REF_NONE || ref.rank >= (uint32_t)m->size)
        return PP_EINVAL;
    return 0;
}

int pp_mpi_pin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, void **data, uint32_t *got)
{
    if (m == NULL || (flags & ~(unsigned)(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0)
        return PP_EINVAL;
    int rc = check_ref(m, ref);
    if (rc != 0)
        return rc;
    if (ref.rank == (uint32_t)m->rank)
        return pp__home_pin(m, ref, flags, data, got);
    if (flags & PP_PIN_WRITE)
        return PP_ENOTSUP;
    return pp__remote_pin(m, ref, flags, data, got);
}

/* publish: see pp__home_unpin. */
static int unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, const void *data, bool publish)
{
    if (m == NULL || (flags & ~(unsigned)(PP_PIN_WRITE | PP_PIN_NOWAIT)) != 0)
        return PP_EINVAL;
    int rc = check_ref(m, ref);
    if (rc != 0)
        return rc;
    if (ref.rank == (uint32_t)m->rank)
        return pp__home_unpin(m, ref, flags, publish);
    if (flags & PP_PIN_WRITE)
        return PP_ENOTSUP;
    return pp__remote_unpin(m, ref, flags, data);
}

int pp_mpi_unpin(pp_mpi_t *m, pp_gref_t ref, unsigned flags, const void *data)
{
    return unpin(m, ref, flags, data, true);
}

int pp_mpi_pin_many(pp_mpi_t *m, const pp_gref_t *refs, size_t n, unsigned flags, void **data,
                    uint32_t *got)
{
    if (m == NULL || (n != 0 && (refs == NULL || data == NULL)))
        return PP_EINVAL;
    /* Remote misses first, without waiting: every fetch is in flight
     * before the first wait. */
    for (size_t i = 0; i < n; i++)
        if (refs[i].rank != (uint32_t)m->rank && refs[i].rank < (uint32_t)m->size)
            (void)pp__remote_prefetch(m, refs[i]);
    for (size_t i = 0; i < n; i++) {
        int rc = pp_mpi_pin(m, refs[i], flags, &data[i], got != NULL ? &got[i] : NULL);
        if (rc != 0) {
            /* All or none: the pins taken are dropped, and a write pin's
             * drop publishes nothing (nothing was written under it). */
            while (i-- > 0)
                (void)unpin(m, refs[i], flags, data[i], false);
            return rc;
        }
    }
    return 0;
}

int pp_mpi_prefetch(pp_mpi_t *m, pp_gref_t ref)
{
    if (m == NULL)
        return PP_EINVAL;
    int rc = check_ref(m, ref);
    if (rc != 0)
        return rc;
    if (ref.rank == (uint32_t)m->rank)
        return pp_prefetch(m->pool, ref.ref);
    return pp__remote_prefetch(m, ref);
}
