/*
 * wset.c -- sets of weight intervals (wset.h).
 *
 * A sorted array of disjoint, non-adjacent intervals; lookups are binary
 * searches, insertions and removals move the tail.  The sets are small:
 * a home's holds one interval per live fragment of the weight it minted,
 * which is about one per holder, and a holder's merges what comes back.
 */
#include "wset.h"

#include <stdlib.h>
#include <string.h>

#include "pinpool.h"

/* Index of the first interval whose hi is above x (n if none). */
static uint32_t wset_find(const pp__wset_t *s, uint64_t x)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->iv[mid].hi <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int wset_room(pp__wset_t *s, uint32_t more)
{
    if (s->n + more <= s->cap)
        return 0;
    uint32_t cap = s->cap ? s->cap * 2 : 4;
    while (cap < s->n + more)
        cap *= 2;
    pp__wiv_t *iv = realloc(s->iv, (size_t)cap * sizeof *iv);
    if (iv == NULL)
        return PP_ENOMEM;
    s->iv = iv;
    s->cap = cap;
    return 0;
}

int pp__wset_add(pp__wset_t *s, pp__wiv_t iv)
{
    if (iv.lo >= iv.hi)
        return PP_EINVAL;
    /* i: the first interval that ends after iv.lo; it must start at or
     * after iv.hi, or iv overlaps it. */
    uint32_t i = wset_find(s, iv.lo);
    if (i < s->n && s->iv[i].lo < iv.hi)
        return PP_EINVAL;
    bool left = i > 0 && s->iv[i - 1].hi == iv.lo;
    bool right = i < s->n && s->iv[i].lo == iv.hi;
    if (left && right) {
        s->iv[i - 1].hi = s->iv[i].hi;
        memmove(&s->iv[i], &s->iv[i + 1], (size_t)(s->n - i - 1) * sizeof *s->iv);
        s->n--;
    } else if (left) {
        s->iv[i - 1].hi = iv.hi;
    } else if (right) {
        s->iv[i].lo = iv.lo;
    } else {
        int rc = wset_room(s, 1);
        if (rc != 0)
            return rc;
        memmove(&s->iv[i + 1], &s->iv[i], (size_t)(s->n - i) * sizeof *s->iv);
        s->iv[i] = iv;
        s->n++;
    }
    return 0;
}

int pp__wset_remove(pp__wset_t *s, pp__wiv_t iv)
{
    if (iv.lo >= iv.hi)
        return PP_EINVAL;
    uint32_t i = wset_find(s, iv.lo);
    if (i == s->n || s->iv[i].lo > iv.lo || s->iv[i].hi < iv.hi)
        return PP_EINVAL;                 /* not wholly within one interval */
    pp__wiv_t *c = &s->iv[i];
    if (c->lo == iv.lo && c->hi == iv.hi) {
        memmove(c, c + 1, (size_t)(s->n - i - 1) * sizeof *s->iv);
        s->n--;
    } else if (c->lo == iv.lo) {
        c->lo = iv.hi;
    } else if (c->hi == iv.hi) {
        c->hi = iv.lo;
    } else {
        int rc = wset_room(s, 1);
        if (rc != 0)
            return rc;
        c = &s->iv[i];                    /* the array may have moved */
        memmove(c + 2, c + 1, (size_t)(s->n - i - 1) * sizeof *s->iv);
        c[1] = (pp__wiv_t){ iv.hi, c->hi };
        c->hi = iv.lo;
        s->n++;
    }
    return 0;
}

int pp__wset_remove_overlap(pp__wset_t *s, pp__wiv_t iv, uint64_t *gone)
{
    *gone = 0;
    if (iv.lo >= iv.hi)
        return PP_EINVAL;
    if (pp__wset_remove(s, iv) == 0) {   /* wholly within one interval */
        *gone = iv.hi - iv.lo;
        return 0;
    }
    /* Otherwise each overlap ends at an end of its interval or of iv, so
     * none splits an interval: nothing to allocate (only a PP_ENOMEM of
     * the whole-interval case above reaches here with iv inside one). */
    for (uint32_t i = wset_find(s, iv.lo); i < s->n && s->iv[i].lo < iv.hi;) {
        pp__wiv_t o = { s->iv[i].lo > iv.lo ? s->iv[i].lo : iv.lo,
                        s->iv[i].hi < iv.hi ? s->iv[i].hi : iv.hi };
        if (o.lo > s->iv[i].lo && o.hi < s->iv[i].hi)
            return PP_ENOMEM;             /* iv inside this one: the split had no room */
        uint32_t n = s->n;
        (void)pp__wset_remove(s, o);
        *gone += o.hi - o.lo;
        if (s->n == n)
            i++;                          /* trimmed, not removed: the next one */
    }
    return 0;
}

int pp__wset_split(pp__wset_t *s, pp__wiv_t *out)
{
    if (s->n == 0)
        return PP_EAGAIN;
    uint32_t w = 0;
    for (uint32_t i = 1; i < s->n; i++)
        if (s->iv[i].hi - s->iv[i].lo > s->iv[w].hi - s->iv[w].lo)
            w = i;
    pp__wiv_t *c = &s->iv[w];
    uint64_t width = c->hi - c->lo;
    if (width == 1) {
        if (s->n == 1)
            return PP_EAGAIN;
        *out = *c;
        memmove(c, c + 1, (size_t)(s->n - w - 1) * sizeof *s->iv);
        s->n--;
        return 0;
    }
    uint64_t mid = c->lo + width / 2;
    *out = (pp__wiv_t){ mid, c->hi };
    c->hi = mid;
    return 0;
}

bool pp__wset_empty(const pp__wset_t *s)
{
    return s->n == 0;
}

uint64_t pp__wset_weight(const pp__wset_t *s)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t w = s->iv[i].hi - s->iv[i].lo;
        sum = w > UINT64_MAX - sum ? UINT64_MAX : sum + w;
    }
    return sum;
}

void pp__wset_free(pp__wset_t *s)
{
    free(s->iv);
    *s = (pp__wset_t)PP__WSET_INIT;
}
