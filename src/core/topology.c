/*
 * topology.c -- the machine (or a described machine) through hwloc: one node
 * domain per NUMA node, the CPU -> node map, thread binding and memory
 * placement.
 *
 * A topology given as an hwloc synthetic string or XML file is not this
 * system: it yields the same node domains, tables and reclaimer threads,
 * but nothing is bound (binding calls would name CPUs and nodes that do
 * not exist here).  Threads are then spread over the nodes round-robin as
 * they register, so multi-node paths run on a one-node machine.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "core/core.h"

static bool looks_like_xml_path(const char *spec)
{
    size_t len = strlen(spec);
    return strchr(spec, '/') != NULL ||
           (len >= 4 && strcmp(spec + len - 4, ".xml") == 0);
}

int pp__topology_load(pp_pool_t *pool, const char *spec)
{
    if (hwloc_topology_init(&pool->topo) != 0)
        return PP_ENOMEM;
    int rc = 0;
    if (spec != NULL) {
        rc = looks_like_xml_path(spec)
                 ? hwloc_topology_set_xml(pool->topo, spec)
                 : hwloc_topology_set_synthetic(pool->topo, spec);
    }
    if (rc == 0)
        rc = hwloc_topology_load(pool->topo);
    if (rc != 0) {
        hwloc_topology_destroy(pool->topo);
        pool->topo = NULL;
        return PP_ETOPOLOGY;
    }
    pool->thissystem = hwloc_topology_is_thissystem(pool->topo) != 0;

    int nn = hwloc_get_nbobjs_by_type(pool->topo, HWLOC_OBJ_NUMANODE);
    if (nn <= 0) {
        hwloc_topology_destroy(pool->topo);
        pool->topo = NULL;
        return PP_ETOPOLOGY;
    }
    if ((unsigned)nn > PP_MAX_NODES) {
        hwloc_topology_destroy(pool->topo);
        pool->topo = NULL;
        return PP_ENOTSUP;
    }
    pool->nnodes = (unsigned)nn;

    /* The CPUs the process runs on: the pool's threads stay on them. */
    if (pool->thissystem) {
        pool->run_cpus = hwloc_bitmap_alloc();
        if (pool->run_cpus == NULL) {
            hwloc_topology_destroy(pool->topo);
            pool->topo = NULL;
            return PP_ENOMEM;
        }
        hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(pool->topo);
        if (hwloc_get_cpubind(pool->topo, pool->run_cpus, HWLOC_CPUBIND_PROCESS) != 0)
            hwloc_bitmap_copy(pool->run_cpus, allowed);
        hwloc_bitmap_and(pool->run_cpus, pool->run_cpus, allowed);
        if (hwloc_bitmap_iszero(pool->run_cpus))
            hwloc_bitmap_copy(pool->run_cpus, allowed);
    }

    /* CPU -> node map, for homing entries on the putter's node. */
    if (pool->thissystem) {
        int last = hwloc_bitmap_last(hwloc_topology_get_complete_cpuset(pool->topo));
        pool->ncpus = last >= 0 ? last + 1 : 0;
        if (pool->ncpus > 0) {
            pool->cpu_node = pp__alloc_zeroed((size_t)pool->ncpus, 1);
            if (pool->cpu_node == NULL) {
                hwloc_bitmap_free(pool->run_cpus);
                pool->run_cpus = NULL;
                hwloc_topology_destroy(pool->topo);
                pool->topo = NULL;
                return PP_ENOMEM;
            }
            for (unsigned n = 0; n < pool->nnodes; n++) {
                hwloc_obj_t obj = hwloc_get_obj_by_type(pool->topo, HWLOC_OBJ_NUMANODE, n);
                int cpu;
                hwloc_bitmap_foreach_begin(cpu, obj->cpuset)
                    if (cpu < pool->ncpus)
                        pool->cpu_node[cpu] = (uint8_t)n;
                hwloc_bitmap_foreach_end();
            }
        }
    }
    return 0;
}

void pp__topology_free(pp_pool_t *pool)
{
    pp__alloc_free(pool->cpu_node);
    pool->cpu_node = NULL;
    if (pool->run_cpus != NULL)
        hwloc_bitmap_free(pool->run_cpus);
    pool->run_cpus = NULL;
    if (pool->topo != NULL)
        hwloc_topology_destroy(pool->topo);
    pool->topo = NULL;
}

static hwloc_obj_t numa_obj(pp_pool_t *pool, unsigned n)
{
    return hwloc_get_obj_by_type(pool->topo, HWLOC_OBJ_NUMANODE, n);
}

void *pp__topology_node_alloc(pp_pool_t *pool, unsigned n, size_t len, bool *bound)
{
    void *p = NULL;
    *bound = false;
    if (!pp__alloc_note())
        return NULL;   /* injected failure (tests) */
    if (pool->thissystem) {
        hwloc_obj_t obj = numa_obj(pool, n);
        /* STRICT: without it hwloc returns memory even when the binding
         * failed, and we could not tell; with it, failure is NULL and we
         * fall back to ordinary pages below. */
        p = hwloc_alloc_membind(pool->topo, len, obj->nodeset, HWLOC_MEMBIND_BIND,
                                HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_NOCPUBIND |
                                    HWLOC_MEMBIND_STRICT);
        *bound = p != NULL;
    }
    if (p == NULL)
        p = hwloc_alloc(pool->topo, len);
    if (p != NULL)
        memset(p, 0, len);   /* first touch: faults the pages in on the bound node */
    return p;
}

void pp__topology_node_free(pp_pool_t *pool, void *p, size_t len)
{
    if (p != NULL)
        hwloc_free(pool->topo, p, len);
}

/* A node's table (entry.h, table.c): 4 GiB of address space and no memory.
 * PROT_NONE keeps it out of the commit charge (even under strict
 * overcommit) until a segment is committed; the head and tail of the
 * twice as large mapping go back at once, leaving it aligned to its size,
 * so that records find each other by address. */
char *pp__topology_table_reserve(void)
{
    const size_t len = PP__TABLE_BYTES;
    if (!pp__alloc_note())
        return NULL;   /* injected failure (tests) */
    char *raw = mmap(NULL, 2 * len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + len - 1) & ~(uintptr_t)(len - 1));
    if (p > raw)
        (void)munmap(raw, (size_t)(p - raw));
    if (p + len < raw + 2 * len)
        (void)munmap(p + len, (size_t)(raw + 2 * len - (p + len)));
    return p;
}

void pp__topology_table_release(char *base)
{
    if (base != NULL)
        (void)munmap(base, PP__TABLE_BYTES);
}

/* huge: advise transparent huge pages (madvise mode is the Debian
 * default), one TLB entry for 2 MiB where 4 KiB pages need 512.  The pages
 * stay untouched until the slots are handed out (a put writes them), and
 * fresh pages are zero. */
bool pp__topology_table_commit(pp_pool_t *pool, unsigned n, char *p, size_t len, bool huge,
                               bool *bound)
{
    *bound = false;
    if (!pp__alloc_note() || mprotect(p, len, PROT_READ | PROT_WRITE) != 0)
        return false;   /* (an injected failure, in tests) */
#ifdef MADV_HUGEPAGE
    if (huge)
        (void)madvise(p, len, MADV_HUGEPAGE);   /* advice only: 4 KiB pages work too */
#else
    (void)huge;
#endif
    if (pool->thissystem) {
        hwloc_obj_t obj = numa_obj(pool, n);
        *bound = hwloc_set_area_membind(pool->topo, p, len, obj->nodeset, HWLOC_MEMBIND_BIND,
                                        HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_NOCPUBIND |
                                            HWLOC_MEMBIND_STRICT) == 0;
    }
    return true;
}

/* Binds the calling pool thread to node n's CPUs among those the process
 * runs on (pool->run_cpus: its binding when the pool was made, as mpiexec
 * or taskset set it, so that a rank bound to one core keeps its pool's
 * threads on that core and off its neighbours'); if the process runs on
 * none of the node's CPUs, to the node's CPUs its cgroup allows.  one_cpu:
 * the last of them only. */
bool pp__topology_bind(pp_pool_t *pool, unsigned n, bool one_cpu)
{
    if (!pool->thissystem)
        return false;
    hwloc_obj_t obj = numa_obj(pool, n);
    if (obj == NULL || hwloc_bitmap_iszero(obj->cpuset))
        return false;   /* a memory-only node: nothing to bind to */
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        return false;
    hwloc_bitmap_and(set, pool->run_cpus, obj->cpuset);
    if (hwloc_bitmap_iszero(set))
        hwloc_bitmap_and(set, hwloc_topology_get_allowed_cpuset(pool->topo), obj->cpuset);
    int last = hwloc_bitmap_last(set);
    bool ok = last >= 0;
    if (ok && one_cpu)
        hwloc_bitmap_only(set, (unsigned)last);
    if (ok)
        ok = hwloc_set_cpubind(pool->topo, set, HWLOC_CPUBIND_THREAD) == 0;
    hwloc_bitmap_free(set);
    return ok;
}

unsigned pp__topology_current_node(pp_pool_t *pool, pp__thread_t *t)
{
    if (pool->nnodes == 1)
        return 0;
    if (!pool->thissystem)
        return t->node;
    /* sched_getcpu is a vDSO call (no system call) on x86-64 Linux. */
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= pool->ncpus)
        return t->node;
    return pool->cpu_node[cpu];
}
