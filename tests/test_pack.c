/*
 * test_pack.c -- pp_type_pack and pp_type_unpack (src/swap/swap.c): a type's
 * save and load run outside swap, into and out of one buffer, as the MPI
 * layer uses them to send typed entries to other ranks.  A round trip
 * gives back the same content through the type's own layout (a struct
 * with an out-of-line buffer, written in several chunks); save and load
 * failures are PP_EIO and hand back nothing; a type that cannot pack
 * (no save/load, DISCARD) and NULL arguments are PP_EINVAL; a failed
 * allocation of the buffer is PP_ENOMEM.
 */
#include "helpers.h"
#include "testing/testhooks.h" /* pp__alloc_fail_after */
#include "support/vectype.h"

/* A round trip of n bytes written in chunks of chunk: the same content,
 * in new memory, through the type's load. */
static void round_trip(size_t n, size_t chunk)
{
    vt_t vt;
    vt_init(&vt, chunk);
    vec_t *v = vec_new(n, n * 31 + chunk);
    size_t size = vec_size(n);
    void *buf = NULL;
    size_t len = 0;
    cr_assert_eq(pp_type_pack(&vt.type, v, size, &buf, &len), 0);
    cr_assert_eq(len, sizeof(size_t) + n, "everything save wrote, nothing else");
    cr_assert_eq(vt.saves, 1);
    void *out = NULL;
    cr_assert_eq(pp_type_unpack(&vt.type, buf, len, size, &out), 0);
    free(buf);
    cr_assert_neq(out, v, "load made new data");
    cr_assert(vec_check(out, n, n * 31 + chunk), "the content came back");
    vec_free(v, size, &vt);
    vec_free(out, size, &vt);
    cr_assert_eq(vt.frees, 2, "pack and unpack never free the caller's data");
}

Test(pack, round_trip_small) { round_trip(100, 7); }
Test(pack, round_trip_grows_the_buffer) { round_trip(3u << 20, 40000); }
Test(pack, round_trip_of_nothing) { round_trip(0, 1); }

Test(pack, save_that_writes_nothing_gives_an_empty_buffer)
{
    vt_t vt;
    vt_init(&vt, 1);
    atomic_store(&vt.empty, 1);
    vec_t *v = vec_new(10, 1);
    void *buf = (void *)&vt;
    size_t len = 99;
    cr_assert_eq(pp_type_pack(&vt.type, v, vec_size(10), &buf, &len), 0);
    cr_assert_null(buf);
    cr_assert_eq(len, 0);
    void *out = (void *)&vt;
    cr_assert_eq(pp_type_unpack(&vt.type, NULL, 0, vec_size(10), &out), PP_EIO,
                 "load sees an empty copy and fails: PP_EIO");
    cr_assert_eq(out, (void *)&vt, "*data untouched on failure");
    vec_free(v, 0, &vt);
}

Test(pack, failing_save_is_eio_and_hands_back_nothing)
{
    vt_t vt;
    vt_init(&vt, 1);
    atomic_store(&vt.fail_save, 1);
    vec_t *v = vec_new(10, 2);
    void *buf = (void *)&vt;
    size_t len = 99;
    cr_assert_eq(pp_type_pack(&vt.type, v, vec_size(10), &buf, &len), PP_EIO);
    cr_assert_eq(buf, (void *)&vt, "*buf untouched");
    cr_assert_eq(len, 99, "*len untouched");
    cr_assert_eq(vt.frees, 0, "the data is still the caller's");
    cr_assert(check_pattern(v->bytes, 10, 2));
    vec_free(v, 0, &vt);
}

Test(pack, failing_load_is_eio_and_leaves_data_untouched)
{
    vt_t vt;
    vt_init(&vt, 3);
    vec_t *v = vec_new(10, 3);
    void *buf;
    size_t len;
    cr_assert_eq(pp_type_pack(&vt.type, v, vec_size(10), &buf, &len), 0);
    atomic_store(&vt.fail_load, 1);
    void *out = (void *)&vt;
    cr_assert_eq(pp_type_unpack(&vt.type, buf, len, vec_size(10), &out), PP_EIO);
    cr_assert_eq(out, (void *)&vt);
    atomic_store(&vt.fail_load, 0);
    cr_assert_eq(pp_type_unpack(&vt.type, buf, len - 1, vec_size(10), &out), PP_EIO,
                 "a short copy: load's pp_read fails, so does the unpack");
    free(buf);
    vec_free(v, 0, &vt);
}

Test(pack, types_that_cannot_pack_and_null_arguments_are_einval)
{
    vt_t vt;
    vt_init(&vt, 1);
    vec_t *v = vec_new(4, 4);
    size_t size = vec_size(4);
    void *buf = NULL, *out = NULL;
    size_t len = 0;
    pp_type_t no_save = vt.type, no_load = vt.type, discard = vt.type, flat = { .name = "flat" };
    no_save.save = NULL;
    no_load.load = NULL;
    discard.flags = PP_TYPE_DISCARD;
    const pp_type_t *bad[] = { NULL, &no_save, &no_load, &discard, &flat };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(pp_type_pack(bad[i], v, size, &buf, &len), PP_EINVAL, "type %zu", i);
        cr_assert_eq(pp_type_unpack(bad[i], "x", 1, size, &out), PP_EINVAL, "type %zu", i);
    }
    cr_assert_eq(pp_type_pack(&vt.type, v, size, NULL, &len), PP_EINVAL);
    cr_assert_eq(pp_type_pack(&vt.type, v, size, &buf, NULL), PP_EINVAL);
    cr_assert_eq(pp_type_unpack(&vt.type, NULL, 1, size, &out), PP_EINVAL);
    cr_assert_eq(pp_type_unpack(&vt.type, "x", 1, size, NULL), PP_EINVAL);
    cr_assert_eq(vt.saves + vt.loads, 0, "save and load never ran");
    vec_free(v, 0, &vt);
}

Test(pack, no_memory_for_the_buffer_is_enomem)
{
    vt_t vt;
    vt_init(&vt, 1000);
    vec_t *v = vec_new(200000, 5);
    void *buf = (void *)&vt;
    size_t len = 99;
    pp__alloc_fail_after(0);   /* the buffer's first allocation fails */
    int rc = pp_type_pack(&vt.type, v, vec_size(200000), &buf, &len);
    pp__alloc_fail_after(-1);
    cr_assert_eq(rc, PP_ENOMEM);
    cr_assert_eq(buf, (void *)&vt);
    cr_assert_eq(len, 99);
    /* and when the buffer must grow */
    pp__alloc_fail_after(1);
    rc = pp_type_pack(&vt.type, v, vec_size(200000), &buf, &len);
    pp__alloc_fail_after(-1);
    cr_assert_eq(rc, PP_ENOMEM);
    cr_assert_eq(buf, (void *)&vt);
    vec_free(v, 0, &vt);
}
