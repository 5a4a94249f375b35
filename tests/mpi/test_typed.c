/*
 * test_typed.c -- typed entries across ranks (src/mpi/typed.c): an entry
 * whose type has save and load is packed at its home and unpacked where
 * it is pinned, with the type each rank registered under the same id.
 *
 * Each rank registers its own vt_t (tests/support/vectype.h) under one id,
 * so the counts say where save, load and free ran: save at the home,
 * load and the copies' frees on the pinning rank.  Shown: the copy is the
 * type's data, in new memory, and a hit gives the same copy; a new
 * version is unpacked again; the copies die with their type's free (with
 * the last owner, and when the pool drops them for room); a type
 * registered on one side only, and a failing save or load, are errors
 * with a report line on the rank where they happened, and the next pin
 * works; registration misuse is PP_EINVAL; and, on threads, pins of
 * typed copies racing with new versions and with drops.
 */
#include "world.h"

#include "support/vectype.h"

#define TID 7u

TestSuite(typed, .timeout = 120);

/* A typed entry of n bytes of pattern seed at rank r, of vt's type. */
static pp_gref_t put_vec(world_t *W, int r, vt_t *vt, size_t n, uint64_t seed)
{
    pp_gref_t g;
    vec_t *v = vec_new(n, seed);
    assert_rc(pp_mpi_put(W->m[r], v, vec_size(n), &vt->type, 0, &g), 0);
    return g;
}

/* Rewrites g's vector at its home with pattern seed: publishes a version. */
static void home_rewrite(world_t *W, pp_gref_t g, uint64_t seed)
{
    void *d;
    assert_rc(pp_mpi_pin(W->m[g.rank], g, PP_PIN_WRITE, &d, NULL), 0);
    vec_t *v = d;
    fill_pattern(v->bytes, v->n, seed);
    assert_rc(pp_mpi_unpin(W->m[g.rank], g, PP_PIN_WRITE, d), 0);
}

static void drain(pp_pool_t *pool) { assert_rc(pp_pool_drain(pool, -1), 0); }

/* Two ranks (rank r's pool limited to limit[r], limit may be NULL), each
 * with its own vec type (save writing chunks of chunk bytes) registered as
 * TID. */
static void typed_up(world_t *W, vt_t vt[2], uint64_t seed, unsigned delay, size_t chunk,
                     const size_t *limit)
{
    world_up_limit(W, 2, seed, delay, 0, limit);
    for (int r = 0; r < 2; r++) {
        vt_init(&vt[r], chunk);
        assert_rc(pp_mpi_type_register(W->m[r], TID, &vt[r].type), 0);
    }
}

Test(typed, remote_pin_unpacks_with_the_registered_type)
{
    world_t W;
    vt_t vt[2];
    typed_up(&W, vt, 31, 3, 777, NULL);
    const size_t n = 50000;
    pp_gref_t g = put_vec(&W, 0, &vt[0], n, 1);
    give(&W, 0, 1, g);
    void *d = NULL, *d2 = NULL, *hd = NULL;
    uint32_t got = 0;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, &got), 0);
    assert_rc(pp_mpi_pin(W.m[0], g, 0, &hd, NULL), 0);
    cr_assert(vec_check(d, n, 1), "the copy is the type's data, with the home's content");
    cr_assert_neq(d, hd, "made by load, in new memory");
    assert_rc(pp_mpi_unpin(W.m[0], g, 0, hd), 0);
    cr_assert_eq(got, 1u);
    cr_assert_eq(atomic_load(&vt[0].saves), 1, "saved at the home");
    cr_assert_eq(atomic_load(&vt[1].loads), 1, "loaded here");
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d2, NULL), 0);
    cr_assert_eq(d2, d, "a hit gives the same copy");
    cr_assert_eq(atomic_load(&vt[1].loads), 1, "a hit loads nothing");
    pp_mpi_stats_t st;
    assert_rc(pp_mpi_stats(W.m[1], &st), 0);
    cr_assert_eq(st.misses, 1);
    cr_assert_eq(st.hits, 1);
    cr_assert_eq(st.bytes_fetched, sizeof(size_t) + n, "the packed bytes travelled");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d2), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), PP_ENOTPINNED);

    home_rewrite(&W, g, 2);
    pp_gref_t g2 = g;
    g2.version = 2;
    assert_rc(pp_mpi_pin(W.m[1], g2, 0, &d, &got), 0);
    cr_assert_eq(got, 2u);
    cr_assert(vec_check(d, n, 2), "version 2's content");
    cr_assert_eq(atomic_load(&vt[1].loads), 2);
    assert_rc(pp_mpi_unpin(W.m[1], g2, 0, d), 0);

    assert_rc(pp_mpi_release(W.m[1], g), 0);
    drain(W.pool[1]);
    cr_assert_eq(atomic_load(&vt[1].frees), 2, "both copies freed by the type, here");
    cr_assert_eq(atomic_load(&vt[0].frees), 0, "the home's entry lives on");
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(atomic_load(&vt[0].frees), 1, "the home's entry freed once");
    cr_assert_eq(atomic_load(&vt[1].frees), 2);
    world_free_ct(&W);
}

Test(typed, a_cached_copy_outliving_its_layer_is_freed_by_its_type)
{
    world_t W;
    vt_t vt[2];
    typed_up(&W, vt, 32, 2, 4096, NULL);
    pp_gref_t g = put_vec(&W, 0, &vt[0], 10000, 3);
    give(&W, 0, 1, g);
    void *d;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    /* Rank 1 still owns g, so its copy is cached when its layer goes:
     * destroy reports the owner, gives the weight back and drops the copy,
     * whose free runs on the pool's reclaimer after a grace period, so
     * mostly after the layer is freed (the registry lives on while the
     * copy does; ASan sees any use of freed memory). */
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(atomic_load(&vt[1].frees), 0, "cached while owned");
    cr_assert_eq(world_down(&W), 0);
    cr_assert(report_has(&W.rep[1], 0, "never", "released", NULL), "%s", report_dump(&W.rep[1]));
    cr_assert_eq(atomic_load(&vt[1].frees), 1, "freed by its type, once");
    cr_assert_eq(atomic_load(&vt[0].frees), 1);
    world_free_ct(&W);
}

Test(typed, a_type_registered_on_one_side_only_is_enotsup_and_reported)
{
    world_t W;
    world_up(&W, 2, 33, 2, 0);
    vt_t vt[2];
    vt_init(&vt[0], 100);
    vt_init(&vt[1], 100);
    /* not registered at the home: the home alone may pin it */
    pp_gref_t g = put_vec(&W, 0, &vt[0], 300, 4);
    give(&W, 0, 1, g);
    void *d;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), PP_ENOTSUP);
    cr_assert(report_has(&W.rep[0], 0, "not registered here", NULL, NULL), "%s",
              report_dump(&W.rep[0]));
    assert_rc(pp_mpi_pin(W.m[0], g, 0, &d, NULL), 0);
    cr_assert(vec_check(d, 300, 4));
    assert_rc(pp_mpi_unpin(W.m[0], g, 0, d), 0);

    /* registered at the home (before the put), not on the pinning rank */
    assert_rc(pp_mpi_type_register(W.m[0], TID, &vt[0].type), 0);
    pp_gref_t h = put_vec(&W, 0, &vt[0], 300, 5);
    give(&W, 0, 1, h);
    assert_rc(pp_mpi_pin(W.m[1], h, 0, &d, NULL), PP_ENOTSUP);
    cr_assert(report_has(&W.rep[1], 0, "type id 7", "not registered here", NULL), "%s",
              report_dump(&W.rep[1]));
    cr_assert_eq(atomic_load(&vt[1].loads), 0);
    /* registered there too: the next pin works, nothing stale was kept */
    assert_rc(pp_mpi_type_register(W.m[1], TID, &vt[1].type), 0);
    assert_rc(pp_mpi_pin(W.m[1], h, 0, &d, NULL), 0);
    cr_assert(vec_check(d, 300, 5));
    assert_rc(pp_mpi_unpin(W.m[1], h, 0, d), 0);
    for (int r = 1; r >= 0; r--) {
        assert_rc(pp_mpi_release(W.m[r], g), 0);
        assert_rc(pp_mpi_release(W.m[r], h), 0);
    }
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(atomic_load(&vt[0].frees), 2);
    cr_assert_eq(atomic_load(&vt[1].frees), 1);
    world_free_ct(&W);
}

Test(typed, failing_save_or_load_is_eio_reported_and_the_next_pin_works)
{
    world_t W;
    vt_t vt[2];
    typed_up(&W, vt, 34, 2, 64, NULL);
    pp_gref_t g = put_vec(&W, 0, &vt[0], 1000, 6);
    give(&W, 0, 1, g);
    void *d;
    atomic_store(&vt[0].fail_save, 1);
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), PP_EIO);
    cr_assert(report_has(&W.rep[0], 0, "save failed", NULL, NULL), "%s", report_dump(&W.rep[0]));
    atomic_store(&vt[0].fail_save, 0);
    atomic_store(&vt[1].fail_load, 1);
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), PP_EIO);
    cr_assert(report_has(&W.rep[1], 0, "load failed", NULL, NULL), "%s", report_dump(&W.rep[1]));
    atomic_store(&vt[1].fail_load, 0);
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
    cr_assert(vec_check(d, 1000, 6), "nothing was lost at the home");
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(atomic_load(&vt[1].frees), 1, "the failed load's copy held no data to free");
    cr_assert_eq(atomic_load(&vt[0].frees), 1);
    world_free_ct(&W);
}

Test(typed, registration_misuse_is_einval)
{
    world_t W;
    world_up(&W, 1, 35, 0, 0);
    vt_t a, b;
    vt_init(&a, 1);
    vt_init(&b, 1);
    pp_type_t no_load = a.type, discard = a.type, flat = { .name = "flat" };
    no_load.load = NULL;
    discard.flags |= PP_TYPE_DISCARD;
    assert_rc(pp_mpi_type_register(NULL, TID, &a.type), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], 0, &a.type), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], PP_MPI_TYPES_MAX, &a.type), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], TID, NULL), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], TID, &no_load), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], TID, &discard), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], TID, &flat), PP_EINVAL);
    assert_rc(pp_mpi_type_register(W.m[0], TID, &a.type), 0);
    assert_rc(pp_mpi_type_register(W.m[0], TID, &a.type), 0, "again, the same: fine");
    assert_rc(pp_mpi_type_register(W.m[0], TID, &b.type), PP_EINVAL, "the id is a's");
    assert_rc(pp_mpi_type_register(W.m[0], TID + 1, &a.type), PP_EINVAL, "a has an id");
    assert_rc(pp_mpi_type_register(W.m[0], PP_MPI_TYPES_MAX - 1, &b.type), 0);
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}

Test(typed, prefetch_installs_one_copy)
{
    world_t W;
    vt_t vt[2];
    typed_up(&W, vt, 36, 3, 500, NULL);
    pp_gref_t g = put_vec(&W, 0, &vt[0], 20000, 7);
    give(&W, 0, 1, g);
    assert_rc(pp_mpi_prefetch(W.m[1], g), 0);
    void *d;
    assert_rc(pp_mpi_pin(W.m[1], g, 0, &d, NULL), 0);
    cr_assert(vec_check(d, 20000, 7));
    assert_rc(pp_mpi_unpin(W.m[1], g, 0, d), 0);
    cr_assert_eq(atomic_load(&vt[1].loads), 1, "the pin joined or hit the prefetch");
    assert_rc(pp_mpi_release(W.m[1], g), 0);
    assert_rc(pp_mpi_release(W.m[0], g), 0);
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(atomic_load(&vt[1].frees), 1);
    world_free_ct(&W);
}

#define NREF 12
#define VN 6000                             /* each vector's bytes */

Test(typed, copies_dropped_for_room_are_freed_by_their_type)
{
    world_t W;
    /* room for about 4 copies on rank 1: the other 8 make it drop */
    const size_t limit[2] = { 0, 4 * vec_size(VN) + vec_size(VN) / 2 };
    vt_t vt[2];
    typed_up(&W, vt, 37, 2, 1000, limit);
    pp_gref_t g[NREF];
    for (int i = 0; i < NREF; i++) {
        g[i] = put_vec(&W, 0, &vt[0], VN, 100 + (uint64_t)i);
        give(&W, 0, 1, g[i]);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < NREF; i++) {
            void *d;
            assert_rc(pp_mpi_pin(W.m[1], g[i], 0, &d, NULL), 0, "round %d ref %d", round, i);
            cr_assert(vec_check(d, VN, 100 + (uint64_t)i), "round %d ref %d", round, i);
            assert_rc(pp_mpi_unpin(W.m[1], g[i], 0, d), 0);
        }
    }
    pp_stats_t ps = PP_STATS_INIT;
    assert_rc(pp_pool_stats(W.pool[1], &ps), 0);
    cr_assert_gt(ps.total.drops, 0, "the pool dropped copies for room");
    int loads = atomic_load(&vt[1].loads);
    cr_assert_gt(loads, NREF, "dropped copies were fetched again");
    for (int i = 0; i < NREF; i++) {
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
        assert_rc(pp_mpi_release(W.m[0], g[i]), 0);
    }
    drain(W.pool[1]);
    cr_assert_eq(atomic_load(&vt[1].frees), loads, "every copy freed by its type, once");
    cr_assert_eq(world_down(&W), 0);
    cr_assert_eq(atomic_load(&vt[0].frees), NREF);
    world_free_ct(&W);
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct racer {
    world_t *W;
    pp_gref_t *g;
    _Atomic uint32_t *published;         /* [NREF]: versions the writer finished */
    unsigned seed;
    int bad;
} racer_t;

/* Pins typed copies of at least the version the writer last finished;
 * each must hold that version's pattern or a later one's. */
static void *racer_main(void *arg)
{
    racer_t *a = arg;
    for (int k = 0; k < 300; k++) {
        int i = (int)(rand_r(&a->seed) % NREF);
        pp_gref_t g = a->g[i];
        g.version = atomic_load(&a->published[i]);
        void *d;
        uint32_t got;
        if (pp_mpi_pin(a->W->m[1], g, 0, &d, &got) != 0 || got < g.version ||
            !vec_check(d, VN, 1000u * got + (uint64_t)i))
            a->bad++;
        else if (pp_mpi_unpin(a->W->m[1], g, 0, d) != 0)
            a->bad++;
    }
    return NULL;
}

Test(typed, pins_on_threads_race_with_new_versions_and_drops)
{
    world_t W;
    const size_t limit[2] = { 0, 5 * vec_size(VN) };
    vt_t vt[2];
    typed_up(&W, vt, 38, 3, 2000, limit);
    pp_gref_t g[NREF];
    _Atomic uint32_t published[NREF];
    for (int i = 0; i < NREF; i++) {
        g[i] = put_vec(&W, 0, &vt[0], VN, 1000u + (uint64_t)i);   /* version 1 */
        give(&W, 0, 1, g[i]);
        atomic_init(&published[i], 1);
    }
    racer_t a[3];
    pthread_t th[3];
    for (int t = 0; t < 3; t++) {
        a[t] = (racer_t){ &W, g, published, 7u + (unsigned)t, 0 };
        cr_assert_eq(pthread_create(&th[t], NULL, racer_main, &a[t]), 0);
    }
    for (uint32_t v = 2; v <= 6; v++) {
        for (int i = 0; i < NREF; i++) {
            home_rewrite(&W, g[i], 1000u * v + (uint64_t)i);
            atomic_store(&published[i], v);
        }
    }
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(a[t].bad, 0, "thread %d: %d pins saw a wrong copy", t, a[t].bad);
    }
    int loads = atomic_load(&vt[1].loads);
    for (int i = 0; i < NREF; i++) {
        assert_rc(pp_mpi_release(W.m[1], g[i]), 0);
        assert_rc(pp_mpi_release(W.m[0], g[i]), 0);
    }
    drain(W.pool[1]);
    cr_assert_eq(atomic_load(&vt[1].frees), loads, "every copy freed by its type, once");
    cr_assert_eq(world_down(&W), 0);
    world_free_ct(&W);
}
