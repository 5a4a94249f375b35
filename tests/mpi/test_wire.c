/* test_wire.c -- the MPI layer's messages (src/mpi/wire.c): what is packed
 * is read back; every byte flipped, every truncation and extension of a
 * message is refused as PP_ECORRUPT or read back as other valid records,
 * never read past its end. */
#include "helpers.h" /* first: Criterion under the sanitizers */

#include "mpi/wire.h"

static void make(pp__wire_return_t *r, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t lo = splitmix64(&seed);
        r[i] = (pp__wire_return_t){ splitmix64(&seed), lo >> 1, (lo >> 1) + 1 + (seed & 0xffff) };
    }
}

Test(wire, returns_round_trip, .timeout = 30)
{
    for (size_t n = 0; n < 40; n++) {
        pp__wire_return_t r[40];
        make(r, n, n + 1);
        size_t len = pp__wire_return_size(n);
        cr_assert_eq(len, PP__WIRE_HDR + n * PP__WIRE_RETURN_REC);
        unsigned char *buf = malloc(len);
        cr_assert_not_null(buf);
        pp__wire_return_pack(buf, r, n);
        size_t got = 99;
        cr_assert_eq(pp__wire_return_check(buf, len, &got), 0, "n %zu", n);
        cr_assert_eq(got, n);
        for (size_t i = 0; i < n; i++) {
            pp__wire_return_t x = pp__wire_return_get(buf, i);
            cr_assert(x.ref == r[i].ref && x.lo == r[i].lo && x.hi == r[i].hi, "record %zu", i);
        }
        free(buf);
    }
}

/* Garbage: each message cut short, made longer, and with each byte of its
 * header flipped is refused; a flipped record byte either makes an empty
 * interval (refused) or another valid record.  Under ASan, a read past
 * the buffer would be reported. */
Test(wire, garbage_is_refused, .timeout = 60)
{
    enum { N = 5 };
    pp__wire_return_t r[N];
    make(r, N, 77);
    size_t len = pp__wire_return_size(N);
    unsigned char *good = malloc(len);
    cr_assert_not_null(good);
    pp__wire_return_pack(good, r, N);
    size_t n;
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *b = malloc(cut ? cut : 1);
        memcpy(b, good, cut);
        cr_assert_eq(pp__wire_return_check(b, cut, &n), PP_ECORRUPT, "cut to %zu", cut);
        free(b);
    }
    unsigned char *longer = malloc(len + 7);
    memcpy(longer, good, len);
    memset(longer + len, 0, 7);
    for (size_t extra = 1; extra <= 7; extra++)
        cr_assert_eq(pp__wire_return_check(longer, len + extra, &n), PP_ECORRUPT);
    free(longer);
    unsigned char *b = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, good, len);
            b[i] ^= (unsigned char)(1u << bit);
            int rc = pp__wire_return_check(b, len, &n);
            if (i < PP__WIRE_HDR) {
                cr_assert_eq(rc, PP_ECORRUPT, "header byte %zu bit %d", i, bit);
            } else if (rc == 0) {
                size_t k = (i - PP__WIRE_HDR) / PP__WIRE_RETURN_REC;
                pp__wire_return_t x = pp__wire_return_get(b, k);
                cr_assert(x.lo < x.hi, "an accepted record is a valid interval");
            } else {
                cr_assert_eq(rc, PP_ECORRUPT);
            }
        }
    }
    free(b);
    cr_assert_eq(pp__wire_return_check(NULL, 0, &n), PP_ECORRUPT);
    cr_assert_eq(pp__wire_return_check(good, len, NULL), PP_EINVAL);
    cr_assert_eq(pp__wire_return_size((size_t)UINT32_MAX + 1), 0);
    free(good);
}
