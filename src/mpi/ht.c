/*
 * ht.c -- the MPI layer's hash tables: ck_ht with direct 64-bit keys and
 * values (home records, proxies, the cache, typed copies), and the maps
 * they retire as they grow, kept until no layer or type registry is left.
 */
#include "layer.h"

/* xxHash header-only: the tables' hash, with no library to link */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdlib.h>

/* ---- ck_ht with direct keys ----------------------------------------------
 * ck_ht is read without a lock while one writer (under the caller's mutex)
 * changes it; when it grows, the old map may still be read by a reader
 * that found it before: ck asks for such frees to be deferred.  The layer
 * keeps those maps until the process's last layer (and the last type
 * registry, which may outlive its layer) is gone (a map is
 * retired only when its table doubles, so they add up to less than the
 * live one). */
static pthread_mutex_t retired_mu = PTHREAD_MUTEX_INITIALIZER;
static void **retired;
static size_t n_retired, cap_retired;
static unsigned live_layers;          /* layers and type registries (typed.c) */

static void *ht_malloc(size_t n)
{
    return malloc(n);
}

static void *ht_realloc(void *p, size_t old, size_t n, bool defer)
{
    (void)old;
    (void)defer;
    return realloc(p, n);
}

static void ht_free(void *p, size_t n, bool defer)
{
    (void)n;
    if (!defer || p == NULL) {
        free(p);
        return;
    }
    pthread_mutex_lock(&retired_mu);
    if (n_retired == cap_retired) {
        size_t cap = cap_retired ? 2 * cap_retired : 16;
        void **r = realloc(retired, cap * sizeof *r);
        if (r == NULL) {
            /* Cannot keep it: leaking a map is safe, freeing it is not. */
            pthread_mutex_unlock(&retired_mu);
            return;
        }
        retired = r;
        cap_retired = cap;
    }
    retired[n_retired++] = p;
    pthread_mutex_unlock(&retired_mu);
}

void pp__ht_hold(void)
{
    pthread_mutex_lock(&retired_mu);
    live_layers++;
    pthread_mutex_unlock(&retired_mu);
}

void pp__ht_unhold(void)
{
    pthread_mutex_lock(&retired_mu);
    if (--live_layers == 0) {
        for (size_t i = 0; i < n_retired; i++)
            free(retired[i]);
        free(retired);
        retired = NULL;
        n_retired = cap_retired = 0;
    }
    pthread_mutex_unlock(&retired_mu);
}

static struct ck_malloc ht_alloc = { ht_malloc, ht_realloc, ht_free };

static void ht_hash(ck_ht_hash_t *h, const void *key, size_t len, uint64_t seed)
{
    /* direct mode: ck passes &key, the 64-bit value itself */
    h->value = XXH3_64bits_withSeed(key, len, seed);
}

bool pp__ht_init(ck_ht_t *ht)
{
    return ck_ht_init(ht, CK_HT_MODE_DIRECT | CK_HT_WORKLOAD_DELETE, ht_hash, &ht_alloc, 64,
                      0x70706d70ull);
}

bool pp__ht_get(ck_ht_t *ht, uint64_t key, uint64_t *val)
{
    ck_ht_entry_t e;
    ck_ht_hash_t h;
    ck_ht_hash_direct(&h, ht, (uintptr_t)key);
    ck_ht_entry_key_set_direct(&e, (uintptr_t)key);
    if (!ck_ht_get_spmc(ht, h, &e))
        return false;
    *val = (uint64_t)ck_ht_entry_value_direct(&e);
    return true;
}

bool pp__ht_set(ck_ht_t *ht, uint64_t key, uint64_t val)
{
    ck_ht_entry_t e;
    ck_ht_hash_t h;
    ck_ht_hash_direct(&h, ht, (uintptr_t)key);
    ck_ht_entry_set_direct(&e, h, (uintptr_t)key, (uintptr_t)val);
    return ck_ht_set_spmc(ht, h, &e);
}

bool pp__ht_remove(ck_ht_t *ht, uint64_t key)
{
    ck_ht_entry_t e;
    ck_ht_hash_t h;
    ck_ht_hash_direct(&h, ht, (uintptr_t)key);
    ck_ht_entry_key_set_direct(&e, (uintptr_t)key);
    return ck_ht_remove_spmc(ht, h, &e);
}
