/*
 * pinbench_urcu.c -- urcu-lfht: liburcu's lock-free resizable hash table
 * (cds_lfht, default "memb" flavour, read-side fast paths inlined with
 * _LGPL_SOURCE as a performance-minded user would) keyed by the entry's
 * index, hashed with XXH3, with an atomic refcount in each node:
 *
 *   pin    rcu_read_lock, cds_lfht_lookup, refs++ (acquire), rcu_read_unlock
 *   unpin  refs-- (release) on the node the pin returned
 *   churn  malloc node + data, cds_lfht_add; pin; unpin; cds_lfht_del, then
 *          call_rcu frees node and data after a grace period
 *
 * The table starts with a bucket per entry (rounded up to a power of two)
 * and resizes itself (CDS_LFHT_AUTO_RESIZE, as churn needs).  Its own nodes
 * (and their data) are preallocated in one array; churn mallocs each node
 * and frees it with call_rcu.
 *
 * A baseline, so it is generous: a pin never checks that the node is being
 * deleted (a real one would take the ref only if not zero and re-check).
 * Every worker is registered with rcu_register_thread; the main thread is
 * registered while any table exists (it builds, settles and destroys them).
 */
#define _LGPL_SOURCE
#include "pinbench.h"

#include <urcu.h>
#include <urcu/rculfhash.h>

#include <stdlib.h>
#include <xxhash.h>

typedef struct ul_entry {
    struct cds_lfht_node node;
    uint64_t key;
    _Atomic uint64_t refs;
    void *data;
    struct rcu_head rcu;
} ul_entry_t;

typedef struct ul_table {
    struct cds_lfht *ht;
    size_t n;
    ul_entry_t *slab;           /* the table's n nodes */
    unsigned char *data;        /* their data, n * PB_DATA_BYTES; NULL: shared */
} ul_table_t;

static unsigned tables_alive;     /* main thread only */

static unsigned long ul_hash(uint64_t key)
{
    return (unsigned long)XXH3_64bits(&key, sizeof key);
}

static int ul_match(struct cds_lfht_node *node, const void *key)
{
    return caa_container_of(node, ul_entry_t, node)->key == *(const uint64_t *)key;
}

static void ul_add(ul_table_t *t, ul_entry_t *e)
{
    cds_lfht_node_init(&e->node);
    cds_lfht_add(t->ht, ul_hash(e->key), &e->node);
}

static void *ul_create(size_t n, void *shared)
{
    if (tables_alive++ == 0)
        rcu_register_thread();
    ul_table_t *t = pb_calloc(1, sizeof *t);
    unsigned long buckets = 1;
    while (buckets < n)
        buckets <<= 1;
    t->ht = cds_lfht_new(buckets, 1, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
    if (t->ht == NULL)
        pb_die("cds_lfht_new failed");
    t->n = n;
    t->slab = pb_zalloc(n * sizeof *t->slab);
    t->data = shared != NULL ? NULL : pb_zalloc(n * PB_DATA_BYTES);
    for (size_t i = 0; i < n;) {
        rcu_read_lock();
        for (size_t end = i + 4096; i < n && i < end; i++) {
            ul_entry_t *e = &t->slab[i];
            e->key = i;
            e->data = shared != NULL ? shared : t->data + i * PB_DATA_BYTES;
            ul_add(t, e);
        }
        rcu_read_unlock();
    }
    return t;
}

static void ul_destroy(void *table)
{
    ul_table_t *t = table;
    rcu_barrier();                    /* the frees churn queued */
    /* cds_lfht_destroy wants an empty table.  The nodes are removed in
     * array order: much quicker than walking the table's list, which is in
     * hash order. */
    for (size_t i = 0; i < t->n;) {
        rcu_read_lock();
        for (size_t end = i + 4096; i < t->n && i < end; i++) {
            if (atomic_load_explicit(&t->slab[i].refs, memory_order_relaxed) != 0)
                pb_die("urcu-lfht: entry %zu still pinned at the end", i);
            if (cds_lfht_del(t->ht, &t->slab[i].node) != 0)
                pb_die("urcu-lfht: cds_lfht_del: entry %zu was not in the table", i);
        }
        rcu_read_unlock();
    }
    synchronize_rcu();
    int rc = cds_lfht_destroy(t->ht, NULL);
    if (rc != 0)
        pb_die("cds_lfht_destroy: error %d (nodes left in the table?)", rc);
    free(t->slab);
    free(t->data);
    free(t);
    if (--tables_alive == 0)
        rcu_unregister_thread();
}

static void ul_thread_init(pb_worker_t *w)
{
    (void)w;
    rcu_register_thread();
}

static void ul_thread_exit(pb_worker_t *w)
{
    (void)w;
    rcu_unregister_thread();
}

static void ul_settle(void *table)
{
    (void)table;
    rcu_barrier();
}

static ul_entry_t *ul_pin(ul_table_t *t, uint64_t key)
{
    struct cds_lfht_iter it;
    rcu_read_lock();
    cds_lfht_lookup(t->ht, ul_hash(key), ul_match, &key, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    if (node == NULL)
        pb_die("urcu-lfht: key %lu not found", (unsigned long)key);
    ul_entry_t *e = caa_container_of(node, ul_entry_t, node);
    /* acquire: the pinner sees what the last unpinner wrote to the data */
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_acquire);
    rcu_read_unlock();
    return e;
}

static void ul_unpin(ul_entry_t *e)
{
    /* release: publishes the pinner's writes to the next pinner */
    atomic_fetch_sub_explicit(&e->refs, 1, memory_order_release);
}

static void ul_pairs(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    ul_table_t *t = w->table;
    for (unsigned i = 0; i < n; i++)
        ul_unpin(ul_pin(t, keys[i]));
}

static void ul_tasks(pb_worker_t *w, const uint64_t *keys, unsigned n)
{
    ul_table_t *t = w->table;
    uint64_t sink = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t *in = &keys[i * PB_TASK_INPUTS];
        ul_entry_t *e[PB_TASK_INPUTS];
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            e[k] = ul_pin(t, in[k]);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            sink += pb_read_data(e[k]->data);
        for (unsigned k = 0; k < PB_TASK_INPUTS; k++)
            ul_unpin(e[k]);
    }
    w->sink += sink;
}

static void ul_free_churned(struct rcu_head *head)
{
    ul_entry_t *e = caa_container_of(head, ul_entry_t, rcu);
    free(e->data);
    free(e);
}

static void ul_churn(pb_worker_t *w, unsigned n)
{
    ul_table_t *t = w->table;
    for (unsigned i = 0; i < n; i++) {
        /* Keys of thread id: (id + 1) << 40 | counter, apart from the
         * table's 0 .. entries-1 and from every other thread's. */
        uint64_t key = ((uint64_t)(w->id + 1) << 40) | (w->next_key++ & ((1ull << 40) - 1));
        ul_entry_t *e = pb_malloc(sizeof *e);
        uint64_t *buf = pb_malloc(PB_DATA_BYTES);
        buf[0] = key;
        e->key = key;
        atomic_init(&e->refs, 0);
        e->data = buf;
        rcu_read_lock();
        ul_add(t, e);
        rcu_read_unlock();

        ul_unpin(ul_pin(t, key));

        rcu_read_lock();
        if (cds_lfht_del(t->ht, &e->node) != 0)
            pb_die("urcu-lfht: cds_lfht_del: key %lu already removed", (unsigned long)key);
        rcu_read_unlock();
        call_rcu(&e->rcu, ul_free_churned);
    }
}

const pb_impl_t pb_impl_urcu_lfht = {
    .name = "urcu-lfht",
    .what = "liburcu cds_lfht lookup under rcu_read_lock + an atomic refcount",
    .create = ul_create,
    .destroy = ul_destroy,
    .thread_init = ul_thread_init,
    .thread_exit = ul_thread_exit,
    .settle = ul_settle,
    .pairs = ul_pairs,
    .tasks = ul_tasks,
    .churn = ul_churn,
};
