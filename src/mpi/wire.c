/*
 * wire.c -- the MPI layer's messages, as bytes (wire.h).
 */
#include "wire.h"

#include "pinpool.h"

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

size_t pp__wire_return_size(size_t n)
{
    if (n > UINT32_MAX || n > (SIZE_MAX - PP__WIRE_HDR - PP__WIRE_SEQ) / PP__WIRE_RETURN_REC)
        return 0;
    return PP__WIRE_HDR + PP__WIRE_SEQ + n * PP__WIRE_RETURN_REC;
}

static void put_hdr(unsigned char *p, unsigned kind, uint32_t count, uint32_t aux)
{
    put32(p, PP__WIRE_MAGIC);
    put32(p + 4, PP__WIRE_VERSION | ((uint32_t)kind << 16));
    put32(p + 8, count);
    put32(p + 12, aux);
}

int pp__wire_kind(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    if (buf == NULL || len < PP__WIRE_HDR || get32(p) != PP__WIRE_MAGIC)
        return PP_ECORRUPT;
    uint32_t vk = get32(p + 4);
    unsigned kind = vk >> 16;
    if ((vk & 0xffffu) != PP__WIRE_VERSION || kind < PP__WIRE_RETURN || kind > PP__WIRE_CLAIMED)
        return PP_ECORRUPT;
    return (int)kind;
}

void pp__wire_fixed_pack(void *buf, unsigned kind, const uint64_t *f, unsigned nf)
{
    unsigned char *p = buf;
    put_hdr(p, kind, 0, 0);
    for (unsigned i = 0; i < nf; i++)
        put64(p + PP__WIRE_HDR + 8 * i, f[i]);
}

/* The field count of each fixed kind (0: not a fixed kind). */
static unsigned fixed_fields(unsigned kind)
{
    switch (kind) {
    case PP__WIRE_REQ: return PP__WIRE_REQ_N;
    case PP__WIRE_REPLY: return PP__WIRE_REPLY_N;
    case PP__WIRE_MINT: return PP__WIRE_MINT_N;
    case PP__WIRE_MINTED: return PP__WIRE_MINTED_N;
    case PP__WIRE_FIN: return PP__WIRE_FIN_N;
    case PP__WIRE_CLAIM: return PP__WIRE_CLAIM_N;
    case PP__WIRE_CLAIMED: return PP__WIRE_CLAIMED_N;
    default: return 0;
    }
}

int pp__wire_fixed_check(const void *buf, size_t len, unsigned kind, uint64_t *f, unsigned nf)
{
    if (nf != fixed_fields(kind) || len != PP__WIRE_FIXED_SIZE(nf) ||
        pp__wire_kind(buf, len) != (int)kind)
        return PP_ECORRUPT;
    const unsigned char *p = buf;
    if (get32(p + 8) != 0 || get32(p + 12) != 0)
        return PP_ECORRUPT;
    for (unsigned i = 0; i < nf; i++)
        f[i] = get64(p + PP__WIRE_HDR + 8 * i);
    return 0;
}

void pp__wire_return_pack(void *buf, uint64_t seq, const pp__wire_return_t *recs, size_t n)
{
    unsigned char *p = buf;
    put_hdr(p, PP__WIRE_RETURN, (uint32_t)n, 0);
    put64(p + PP__WIRE_HDR, seq);
    p += PP__WIRE_HDR + PP__WIRE_SEQ;
    for (size_t i = 0; i < n; i++, p += PP__WIRE_RETURN_REC) {
        put64(p, recs[i].ref);
        put64(p + 8, recs[i].lo);
        put64(p + 16, recs[i].hi);
    }
}

int pp__wire_return_check(const void *buf, size_t len, size_t *n, uint64_t *seq)
{
    if ((buf == NULL && len != 0) || n == NULL)
        return PP_EINVAL;
    const unsigned char *p = buf;
    if (len < PP__WIRE_HDR || get32(p) != PP__WIRE_MAGIC)
        return PP_ECORRUPT;
    uint32_t vk = get32(p + 4);
    if ((vk & 0xffffu) != PP__WIRE_VERSION || (vk >> 16) != PP__WIRE_RETURN)
        return PP_ECORRUPT;
    size_t count = get32(p + 8);
    if (get32(p + 12) != 0 || pp__wire_return_size(count) != len)
        return PP_ECORRUPT;
    for (size_t i = 0; i < count; i++) {
        pp__wire_return_t r = pp__wire_return_get(buf, i);
        if (r.lo >= r.hi)
            return PP_ECORRUPT;
    }
    *n = count;
    if (seq != NULL)
        *seq = get64(p + PP__WIRE_HDR);
    return 0;
}

pp__wire_return_t pp__wire_return_get(const void *buf, size_t i)
{
    const unsigned char *p =
        (const unsigned char *)buf + PP__WIRE_HDR + PP__WIRE_SEQ + i * PP__WIRE_RETURN_REC;
    return (pp__wire_return_t){ get64(p), get64(p + 8), get64(p + 16) };
}
