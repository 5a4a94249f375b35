/*
 * pinbench_mutex.c -- mutex-dict: one global pthread mutex around a hash map
 * of refcounted entries, which is how MemPool.jl's datastore works (a lock
 * around a Dict).  The map is Concurrency Kit's ck_ht in direct mode (key:
 * the entry's index + 1, since 0 and ~0 are reserved; value: the entry),
 * hashed with XXH3 like urcu-lfht.  The hash is computed before taking the
 * lock; everything else is under it:
 *
 *   pin    lock, look up, refs++, unlock
 *   unpin  lock, look up, refs--, unlock
 *   churn  malloc entry + data, lock, insert, unlock; pin; unpin;
 *          lock, remove, unlock, free
 *
 * The table's own entries (and their data) are preallocated in one array,
 * as a store that preallocates its nodes would (which also keeps building
 * and dropping 10 million of them quick); churn mallocs and frees each.
 *
 * Removals leave tombstones in ck_ht, which later inserts must probe past;
 * like Julia's Dict, which rehashes when deletions pile up, the map is
 * rebuilt (under the lock) once the removals since the last rebuild
 * outnumber the live entries.
 */
#include "pinbench.h"

#include <ck_ht.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <xxhash.h>

#define MD_MODE (CK_HT_MODE_DIRECT | CK_HT_WORKLOAD_DELETE)
#define MD_SEED 0x5eedu

typedef struct md_entry {
    uintptr_t key;
    uint64_t refs;              /* under the lock */
    void *data;
} md_entry_t;

typedef struct md_table {
    pthread_mutex_t lock;
    ck_ht_t ht;
    uint64_t removals;          /* since the last rebuild */
    size_t n;
    md_entry_t *slab;           /* the table's n entries */
    unsigned char *data;        /* their data, n * PB_DATA_BYTES; NULL: shared */
} md_table_t;

static void *md_malloc(size_t n)
{
    return malloc(n);
}

static void *md_realloc(void *p, size_t old, size_t n, bool defer)
{
    (void)old, (void)defer;
    return realloc(p, n);
}

/* defer is for concurrent readers of an old map; there are none under the
 * lock. */
static void md_free(void *p, size_t n, bool defer)
{
    (void)n, (void)defer;
    free(p);
}

static struct ck_malloc md_allocator = { md_malloc, md_realloc, md_free };

/* ck_ht rehashes with this callback when it grows; inserts and look-ups
 * pass the same hash, computed by md_hash_key. */
static void md_hash(ck_ht_hash_t *h, const void *key, size_t len, uint64_t seed)
{
    h->value = XXH3_64bits_withSeed(key, len, seed);
}

static ck_ht_hash_t md_hash_key(uintptr_t key)
{
    ck_ht_hash_t h;
    md_hash(&h, &key, sizeof key, MD_SEED);
    return h;
}

static void md_lock(md_table_t *t)
{
    int rc = pthread_mutex_lock(&t->lock);
    if (rc != 0)
        pb_die_errno("pthread_mutex_lock", rc);
}

static void md_unlock(md_table_t *t)
{
    int rc = pthread_mutex_unlock(&t->lock);
    if (rc != 0)
        pb_die_errno("pthread_mutex_unlock", rc);
}

static void md_init_map(ck_ht_t *ht, uint64_t entries)
{
    /* ck_ht keeps its load under 1/2: room for twice the entries. */
    if (!ck_ht_init(ht, MD_MODE, md_hash, &md_allocator, 2 * entries + 2, MD_SEED))
        pb_die("ck_ht_init: out of memory");
}

/* Under the lock. */
static void md_insert_locked(md_table_t *t, md_entry_t *e)
{
    ck_ht_hash_t h = md_hash_key(e->key);
    ck_ht_entry_t he;
    ck_ht_entry_set_direct(&he, h, e->key, (uintptr_t)e);
    if (!ck_ht_put_spmc(&t->ht, h, &he))
        pb_die("mutex-dict: ck_ht_put_spmc failed (key %lu present, or out of memory)",
               (unsigned long)e->key);
}

static void md_rebuild_locked(md_table_t *t)
{
    ck_ht_t fresh;
    md_init_map(&fresh, ck_ht_count(&t->ht));
    ck_ht_iterator_t it = CK_HT_ITERATOR_INITIALIZER;
    ck_ht_entry_t *cur;
    while (ck_ht_next(&t->ht, &it, &cur)) {
        uintptr_t key = ck_ht_entry_key_direct(cur);
        ck_ht_hash_t h = md_hash_key(key);
        ck_ht_entry_t he;
        ck_ht_entry_set_direct(&he, h, key, ck_ht_entry_value_direct(cur));
        if (!ck_ht_put_spmc(&fresh, h, &he))
            pb_die("mutex-dict: ck_ht_put_spmc failed while rebuilding");
    }
    ck_ht_destroy(&t->ht);
    t->ht = fresh;
    t->removals = 0;
}

static void *md_create(size_t n, void *shared)
{
    md_table_t *t = pb_calloc(1, sizeof *t);
    int rc = pthread_mutex_init(&t->lock, NULL);
    if (rc != 0)
        pb_die_errno("pthread_mutex_init", rc);
    md_init_map(&t->ht, n);
    t->n = n;
    t->slab = pb_zalloc(n * sizeof *t->slab);
    t->data = shared != NULL ? NULL : pb_zalloc(n * PB_DATA_BYTES);
    for (size_t i = 0; i < n; i++) {
        md_entry_t *e = &t->slab[i];
        *e = (md_entry_t){ .key = (uintptr_t)i + 1,
                           .data = shared != NULL ? shared : t->data + i * PB_DATA_BYTES };
        md_insert_locked(t, e);      /* no other thread yet */
    }
    return t;
}

static void md_destroy(void *table)
{
    md_table_t *t = table;
    if (ck_ht_count(&t->ht) != t->n)
        pb_die("mutex-dict: %llu entries at the end, expected %zu",
               (unsigned long long)ck_ht_count(&t->ht), t->n);
    for (size_t i = 0; i < t->n; i++)
        if (t->slab[i].refs != 0)
            pb_die("mutex-dict: entry %zu still pinned at the end", i);
    ck_ht_destroy(&t->ht);
    int rc = pthread_mutex_destroy(&t->lock);
    if (rc != 0)
        pb_die_errno("pthread_mutex_destroy", rc);
    free(t->slab);
    free(t->data);
    free(t);
}

static md_entry_t *md_lookup_locked(md_table_t *t, uintptr_t key, ck_ht_hash_t h)
{
    ck_ht_entry_t he;
    ck_ht_entry_key_set_direct(&he, key);
    if (!ck_ht_get_spmc(&t->ht, h, &he))
        pb_die("mutex-dict: key %lu not found", (unsigned long)key);
    return (md_entry_t *)ck_ht_entry_value_direct(&he);
}

static void *md_pin(md_table_t *t, uintptr_t key)
{
    ck_ht_hash_t h = md_hash_key(key);
    md_lock(t);
    md_entry_t *e = md_lookup_locked(t, key, h);
    e->refs++;
    void *data = e->data;
    md_unlock(t);
    return data;
}

static void md_unpin(md_table_t *t, uintptr_t key)
{
    ck_ht_hash_t h = md_hash_key(key);
    md_lock(t);
    md_entry_t *e = md_lookup_locked(t, key, h);
    if (e->refs == 0)
        pb_die("mutex-dict: unpin of key %lu, which holds no pin", (unsigned long)key);
    e->refs--;
    md_unlock(t);
}

static void md_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    md_table_t *t = w->table;
    for (unsigned i = 0; i < n; i++) {
        md_pin(t, (uintptr_t)keys[i] + 1);
        md_unpin(t, (uintptr_t)keys[i] + 1);
    }
}

static void md_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    md_table_t *t = w->table;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t *in = &keys[i * PB_TASK_INPUTS];
        void *data[PB_TASK_INPUTS];
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            data[k] = md_pin(t, (uintptr_t)in[k] + 1);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(data[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            md_unpin(t, (uintptr_t)in[k] + 1);
    }
    w->sink += sink;
}

static void md_churn(pb_worker_t *w, unsigned n)
{
    md_table_t *t = w->table;
    for (unsigned i = 0; i < n; i++) {
        /* Keys of thread id: (id + 1) << 40 | counter, apart from the
         * table's 1 .. entries and from every other thread's. */
        uintptr_t key = ((uintptr_t)(w->id + 1) << 40) | (w->next_key++ & ((1ull << 40) - 1));
        md_entry_t *e = pb_malloc(sizeof *e);
        uint64_t *buf = pb_malloc(PB_DATA_BYTES);
        buf[0] = key;
        *e = (md_entry_t){ .key = key, .data = buf };
        md_lock(t);
        md_insert_locked(t, e);
        md_unlock(t);

        md_pin(t, key);
        md_unpin(t, key);

        ck_ht_hash_t h = md_hash_key(key);
        ck_ht_entry_t he;
        ck_ht_entry_key_set_direct(&he, key);
        md_lock(t);
        if (!ck_ht_remove_spmc(&t->ht, h, &he))
            pb_die("mutex-dict: ck_ht_remove_spmc: key %lu not found", (unsigned long)key);
        if (++t->removals > ck_ht_count(&t->ht))
            md_rebuild_locked(t);
        md_unlock(t);
        if (e->refs != 0)
            pb_die("mutex-dict: removed key %lu while pinned", (unsigned long)key);
        free(e->data);
        free(e);
    }
}

const pb_impl_t pb_impl_mutex_dict = {
    .name = "mutex-dict",
    .what = "one pthread mutex around a ck_ht of refcounted entries (MemPool.jl)",
    .create = md_create,
    .destroy = md_destroy,
    .pairs = md_pairs,
    .tasks = md_tasks,
    .churn = md_churn,
};
