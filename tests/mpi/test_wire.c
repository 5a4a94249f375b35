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
        cr_assert_eq(len, PP__WIRE_HDR + PP__WIRE_SEQ + n * PP__WIRE_RETURN_REC);
        unsigned char *buf = malloc(len);
        cr_assert_not_null(buf);
        uint64_t want = ((uint64_t)n << 32) * 7u + n;   /* past 32 bits */
        pp__wire_return_pack(buf, want, r, n);
        size_t got = 99;
        uint64_t seq = 0;
        cr_assert_eq(pp__wire_return_check(buf, len, &got, &seq), 0, "n %zu", n);
        cr_assert_eq(seq, want);
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
    pp__wire_return_pack(good, 5u, r, N);
    size_t n;
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *b = malloc(cut ? cut : 1);
        memcpy(b, good, cut);
        cr_assert_eq(pp__wire_return_check(b, cut, &n, NULL), PP_ECORRUPT, "cut to %zu", cut);
        free(b);
    }
    unsigned char *longer = malloc(len + 7);
    memcpy(longer, good, len);
    memset(longer + len, 0, 7);
    for (size_t extra = 1; extra <= 7; extra++)
        cr_assert_eq(pp__wire_return_check(longer, len + extra, &n, NULL), PP_ECORRUPT);
    free(longer);
    unsigned char *b = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, good, len);
            b[i] ^= (unsigned char)(1u << bit);
            int rc = pp__wire_return_check(b, len, &n, NULL);
            if (i < PP__WIRE_HDR) {
                cr_assert_eq(rc, PP_ECORRUPT, "header byte %zu bit %d", i, bit);
            } else if (i < PP__WIRE_HDR + PP__WIRE_SEQ) {
                uint64_t seq = 0;
                cr_assert_eq(pp__wire_return_check(b, len, &n, &seq), 0);
                cr_assert_eq(seq, 5u ^ (1ull << (8 * (i - PP__WIRE_HDR) + (size_t)bit)),
                             "a flipped sequence bit reads as another sequence number");
            } else if (rc == 0) {
                size_t k = (i - PP__WIRE_HDR - PP__WIRE_SEQ) / PP__WIRE_RETURN_REC;
                pp__wire_return_t x = pp__wire_return_get(b, k);
                cr_assert(x.lo < x.hi, "an accepted record is a valid interval");
            } else {
                cr_assert_eq(rc, PP_ECORRUPT);
            }
        }
    }
    free(b);
    cr_assert_eq(pp__wire_return_check(NULL, 0, &n, NULL), PP_ECORRUPT);
    cr_assert_eq(pp__wire_return_check(good, len, NULL, NULL), PP_EINVAL);
    cr_assert_eq(pp__wire_return_size((size_t)UINT32_MAX + 1), 0);
    free(good);
}

Test(wire, fixed_messages)
{
    uint64_t f[PP__WIRE_FIXED_MAX] = { 1, UINT64_MAX, 0x0102030405060708ull, 4, 5, 6 };
    unsigned char buf[PP__WIRE_FIXED_SIZE(PP__WIRE_FIXED_MAX)];
    cr_assert_eq(PP__WIRE_FIXED_SIZE(PP__WIRE_REPLY_N), 64u, "a reply's header is 64 bytes");
    pp__wire_fixed_pack(buf, PP__WIRE_REPLY, f, PP__WIRE_REPLY_N);
    cr_assert_eq(buf[PP__WIRE_HDR + 16], 0x08, "little-endian on the wire");
    uint64_t g[PP__WIRE_FIXED_MAX] = { 0 };
    cr_assert_eq(pp__wire_kind(buf, sizeof buf), PP__WIRE_REPLY);
    cr_assert_eq(pp__wire_fixed_check(buf, sizeof buf, PP__WIRE_REPLY, g, PP__WIRE_REPLY_N), 0);
    for (unsigned i = 0; i < PP__WIRE_REPLY_N; i++)
        cr_assert_eq(g[i], f[i]);
    /* another kind, a wrong length, every flipped header bit: refused */
    cr_assert_eq(pp__wire_fixed_check(buf, sizeof buf, PP__WIRE_REQ, g, PP__WIRE_REPLY_N),
                 PP_ECORRUPT);
    cr_assert_eq(pp__wire_fixed_check(buf, sizeof buf - 8, PP__WIRE_REPLY, g, PP__WIRE_REPLY_N - 1),
                 PP_ECORRUPT);
    for (size_t i = 0; i < PP__WIRE_HDR; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            int kind = pp__wire_kind(buf, sizeof buf);
            int rc = pp__wire_fixed_check(buf, sizeof buf, PP__WIRE_REPLY, g, PP__WIRE_REPLY_N);
            cr_assert_eq(rc, PP_ECORRUPT, "header byte %zu bit %d (kind read %d)", i, bit, kind);
            buf[i] ^= (unsigned char)(1u << bit);
        }
    }
    cr_assert_eq(pp__wire_kind(NULL, 0), PP_ECORRUPT);
    cr_assert_eq(pp__wire_kind(buf, PP__WIRE_HDR - 1), PP_ECORRUPT);
}
