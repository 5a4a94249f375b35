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
    if (n > UINT32_MAX || n > (SIZE_MAX - PP__WIRE_HDR) / PP__WIRE_RETURN_REC)
        return 0;
    return PP__WIRE_HDR + n * PP__WIRE_RETURN_REC;
}

void pp__wire_return_pack(void *buf, const pp__wire_return_t *recs, size_t n)
{
    unsigned char *p = buf;
    put32(p, PP__WIRE_MAGIC);
    put32(p + 4, PP__WIRE_VERSION | ((uint32_t)PP__WIRE_RETURN << 16));
    put32(p + 8, (uint32_t)n);
    p += PP__WIRE_HDR;
    for (size_t i = 0; i < n; i++, p += PP__WIRE_RETURN_REC) {
        put64(p, recs[i].ref);
        put64(p + 8, recs[i].lo);
        put64(p + 16, recs[i].hi);
    }
}

int pp__wire_return_check(const void *buf, size_t len, size_t *n)
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
    if (pp__wire_return_size(count) != len)
        return PP_ECORRUPT;
    for (size_t i = 0; i < count; i++) {
        pp__wire_return_t r = pp__wire_return_get(buf, i);
        if (r.lo >= r.hi)
            return PP_ECORRUPT;
    }
    *n = count;
    return 0;
}

pp__wire_return_t pp__wire_return_get(const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + PP__WIRE_HDR + i * PP__WIRE_RETURN_REC;
    return (pp__wire_return_t){ get64(p), get64(p + 8), get64(p + 16) };
}
