/* test_wset.c -- sets of weight intervals (src/mpi/wset.c), against a
 * bitmap of a small universe: every operation's result and the set's
 * invariants after it. */
#include "helpers.h" /* first: Criterion under the sanitizers */

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <pinpool.h>

#include "mpi/wset.h"

#define U 256                          /* the universe: [0, U) */

static bool model[U];

static uint64_t rnd(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void check_matches(const pp__wset_t *s, int step)
{
    uint64_t weight = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        cr_assert(s->iv[i].lo < s->iv[i].hi, "step %d: empty interval %u", step, i);
        if (i > 0)
            cr_assert(s->iv[i - 1].hi < s->iv[i].lo,
                      "step %d: intervals %u and %u overlap or touch", step, i - 1, i);
        weight += s->iv[i].hi - s->iv[i].lo;
    }
    uint64_t ones = 0;
    for (uint64_t x = 0; x < U; x++) {
        uint32_t i = 0;
        while (i < s->n && s->iv[i].hi <= x)
            i++;
        bool in = i < s->n && s->iv[i].lo <= x;
        cr_assert_eq(in, model[x], "step %d: %lu in the set %d, in the model %d", step,
                     (unsigned long)x, in, model[x]);
        ones += model[x];
    }
    cr_assert_eq(pp__wset_weight(s), weight);
    cr_assert_eq(weight, ones, "step %d", step);
    cr_assert_eq(pp__wset_empty(s), ones == 0);
}

/* [lo, hi) all set, all clear, or mixed. */
static int model_state(uint64_t lo, uint64_t hi)
{
    bool any = false, all = true;
    for (uint64_t x = lo; x < hi; x++) {
        any |= model[x];
        all &= model[x];
    }
    return all ? 1 : any ? 2 : 0;
}

static bool model_within_one(uint64_t lo, uint64_t hi)
{
    /* wholly set and one run: no clear bit inside */
    return lo < hi && model_state(lo, hi) == 1;
}

Test(wset, random_operations_match_a_bitmap, .timeout = 60)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        memset(model, 0, sizeof model);
        pp__wset_t s = PP__WSET_INIT;
        uint64_t st = seed;
        for (int step = 0; step < 2000; step++) {
            uint64_t lo = rnd(&st) % U, len = 1 + rnd(&st) % 24;
            uint64_t hi = lo + len > U ? U : lo + len;
            pp__wiv_t iv = { lo, hi };
            switch (rnd(&st) % 3) {
            case 0: {
                int expect = model_state(lo, hi) == 0 ? 0 : PP_EINVAL;
                cr_assert_eq(pp__wset_add(&s, iv), expect, "seed %lu step %d: add [%lu,%lu)",
                             (unsigned long)seed, step, (unsigned long)lo, (unsigned long)hi);
                if (expect == 0)
                    for (uint64_t x = lo; x < hi; x++)
                        model[x] = true;
                break;
            }
            case 1: {
                int expect = model_within_one(lo, hi) ? 0 : PP_EINVAL;
                cr_assert_eq(pp__wset_remove(&s, iv), expect,
                             "seed %lu step %d: remove [%lu,%lu)", (unsigned long)seed, step,
                             (unsigned long)lo, (unsigned long)hi);
                if (expect == 0)
                    for (uint64_t x = lo; x < hi; x++)
                        model[x] = false;
                break;
            }
            default: {
                uint64_t before = pp__wset_weight(&s);
                pp__wiv_t out;
                int rc = pp__wset_split(&s, &out);
                if (rc == PP_EAGAIN) {
                    cr_assert(before <= 1, "split refused with weight %lu", (unsigned long)before);
                    break;
                }
                cr_assert_eq(rc, 0);
                cr_assert(out.lo < out.hi && out.hi <= U);
                cr_assert(model_within_one(out.lo, out.hi), "split gave weight not held");
                for (uint64_t x = out.lo; x < out.hi; x++)
                    model[x] = false;
                cr_assert_eq(pp__wset_weight(&s) + (out.hi - out.lo), before);
                cr_assert(pp__wset_weight(&s) > 0, "a split never gives all away");
            }
            }
            check_matches(&s, step);
        }
        pp__wset_free(&s);
    }
}

/* The protocol in miniature: a home mints, holders split and return, a
 * duplicate return is refused, and the home is empty exactly when every
 * minted interval came back once. */
Test(wset, duplicates_are_refused_and_the_home_empties_once, .timeout = 30)
{
    pp__wset_t home = PP__WSET_INIT, a = PP__WSET_INIT, b = PP__WSET_INIT;
    pp__wiv_t minted = { 1ull << 32, 2ull << 32 };
    cr_assert_eq(pp__wset_add(&home, minted), 0);
    cr_assert_eq(pp__wset_add(&a, minted), 0);             /* the token, imported by a */
    cr_assert_eq(pp__wset_add(&a, minted), PP_EINVAL);     /* imported twice */
    pp__wiv_t half;
    cr_assert_eq(pp__wset_split(&a, &half), 0);           /* a exports to b */
    cr_assert_eq(pp__wset_add(&b, half), 0);
    for (uint32_t i = 0; i < a.n; i++)                    /* a returns all it holds */
        cr_assert_eq(pp__wset_remove(&home, a.iv[i]), 0);
    cr_assert(!pp__wset_empty(&home), "b still holds weight");
    cr_assert_eq(pp__wset_remove(&home, a.iv[0]), PP_EINVAL, "a's return, duplicated");
    cr_assert_eq(pp__wset_remove(&home, minted), PP_EINVAL, "the whole token, late and twice");
    cr_assert(!pp__wset_empty(&home));
    cr_assert_eq(pp__wset_remove(&home, b.iv[0]), 0);
    cr_assert(pp__wset_empty(&home), "every minted unit came back once");
    cr_assert_eq(pp__wset_remove(&home, b.iv[0]), PP_EINVAL);
    pp__wset_free(&home);
    pp__wset_free(&a);
    pp__wset_free(&b);
}

Test(wset, a_split_of_unit_weight_asks_for_more, .timeout = 30)
{
    pp__wset_t s = PP__WSET_INIT;
    pp__wiv_t out;
    cr_assert_eq(pp__wset_split(&s, &out), PP_EAGAIN);
    cr_assert_eq(pp__wset_add(&s, (pp__wiv_t){ 7, 8 }), 0);
    cr_assert_eq(pp__wset_split(&s, &out), PP_EAGAIN, "the last unit stays");
    cr_assert_eq(pp__wset_add(&s, (pp__wiv_t){ 9, 10 }), 0);
    cr_assert_eq(pp__wset_split(&s, &out), 0);
    cr_assert_eq(out.hi - out.lo, 1);
    cr_assert_eq(pp__wset_weight(&s), 1);
    cr_assert_eq(pp__wset_add(&s, (pp__wiv_t){ 3, 3 }), PP_EINVAL, "empty interval");
    pp__wset_free(&s);
}

Test(wset, remove_overlap_takes_what_is_there, .timeout = 30)
{
    pp__wset_t s = PP__WSET_INIT;
    cr_assert_eq(pp__wset_add(&s, (pp__wiv_t){ 10, 20 }), 0);
    cr_assert_eq(pp__wset_add(&s, (pp__wiv_t){ 30, 40 }), 0);
    cr_assert_eq(pp__wset_add(&s, (pp__wiv_t){ 50, 60 }), 0);
    uint64_t gone = 99;
    cr_assert_eq(pp__wset_remove_overlap(&s, (pp__wiv_t){ 12, 14 }, &gone), 0);
    cr_assert_eq(gone, 2, "inside one interval: a plain remove");
    cr_assert_eq(s.n, 4);
    cr_assert_eq(pp__wset_remove_overlap(&s, (pp__wiv_t){ 15, 55 }, &gone), 0);
    cr_assert_eq(gone, 5 + 10 + 5, "the tail of one, a whole one, the head of another");
    cr_assert_eq(s.n, 3);
    cr_assert(s.iv[0].lo == 10 && s.iv[0].hi == 12 && s.iv[1].lo == 14 && s.iv[1].hi == 15 &&
              s.iv[2].lo == 55 && s.iv[2].hi == 60);
    cr_assert_eq(pp__wset_remove_overlap(&s, (pp__wiv_t){ 20, 50 }, &gone), 0);
    cr_assert_eq(gone, 0, "none of it there");
    cr_assert_eq(pp__wset_remove_overlap(&s, (pp__wiv_t){ 0, 100 }, &gone), 0);
    cr_assert_eq(gone, 2 + 1 + 5);
    cr_assert(pp__wset_empty(&s));
    cr_assert_eq(pp__wset_remove_overlap(&s, (pp__wiv_t){ 5, 5 }, &gone), PP_EINVAL);
    pp__wset_free(&s);
}
