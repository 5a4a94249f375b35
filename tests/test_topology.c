/* test_topology.c -- node domains from hwloc topologies (src/core/topology.c). */
#include "helpers.h"

#include <dirent.h>
#include <hwloc.h>
#include <sys/stat.h>

static pp_pool_t *synth_pool(const char *topo)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = topo;
    return test_pool(&o);
}

static bool is_thread_of_this_process(int tid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/task/%d", tid);
    return stat(path, &st) == 0;
}

/* Every node has its own live reclaimer thread, distinct from the others
 * and from the caller. */
static void check_reclaimers(pp_pool_t *pool, const pp_stats_t *s)
{
    for (unsigned i = 0; i < s->nodes; i++) {
        int t = test_node(pool, i).reclaimer_tid;
        cr_assert_gt(t, 0, "node %u has no reclaimer tid", i);
        cr_assert_neq(t, (int)gettid(), "node %u", i);
        cr_assert(is_thread_of_this_process(t), "tid %d of node %u", t, i);
        for (unsigned j = 0; j < i; j++)
            cr_assert_neq(t, test_node(pool, j).reclaimer_tid, "nodes %u and %u", i, j);
    }
    cr_assert_eq(s->total.reclaimer_tid, 0);
}

Test(topology, synthetic_has_four_nodes, .timeout = 30)
{
    pp_pool_t *pool = synth_pool(TEST_SYNTH4);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.nodes, 4);
    cr_assert_eq(s.topology_is_this_system, 0);
    check_reclaimers(pool, &s);
    /* Not this machine: no binding. */
    for (unsigned i = 0; i < 4; i++) {
        cr_assert_eq(test_node(pool, i).cpu_bound, 0, "node %u", i);
        cr_assert_eq(test_node(pool, i).mem_bound, 0, "node %u", i);
    }
    test_destroy(pool);
}

Test(topology, synthetic_other_shapes, .timeout = 30)
{
    static const struct { const char *topo; unsigned nodes; } cases[] = {
        {"numa:1 pu:1", 1},
        {"numa:3 core:1 pu:1", 3},
        {"pack:2 numa:3 pu:2", 6},
        {"pack:1 numa:8 core:2 pu:2", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_pool_t *pool = synth_pool(cases[i].topo);
        pp_stats_t s;
        test_stats(pool, &s);
        cr_assert_eq(s.nodes, cases[i].nodes, "%s", cases[i].topo);
        cr_assert_eq(s.topology_is_this_system, 0);
        check_reclaimers(pool, &s);
        test_destroy(pool);
    }
}

Test(topology, this_system, .timeout = 30)
{
    pp_pool_t *pool = test_pool_native(NULL);
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.topology_is_this_system, 1);
    cr_assert(s.nodes >= 1 && s.nodes <= PP_MAX_NODES, "nodes %u", s.nodes);

    /* As many nodes as hwloc sees NUMA nodes here. */
    hwloc_topology_t topo;
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    hwloc_topology_destroy(topo);
    unsigned expect = nn > 0 ? (unsigned)nn : 1u;
    cr_assert_eq(s.nodes, expect, "pool %u nodes, hwloc %d", s.nodes, nn);
    check_reclaimers(pool, &s);
    test_destroy(pool);
}

/* The OS's CPU set of thread tid. */
static void thread_cpus(int tid, cpu_set_t *set)
{
    CPU_ZERO(set);
    cr_assert_eq(sched_getaffinity(tid, sizeof *set, set), 0, "sched_getaffinity(%d)", tid);
}

/* A process bound to one CPU (as mpiexec binds a rank to a core) keeps its
 * pool's threads there: the reclaimer is bound to that CPU, not to the
 * node's last one, and any other pool thread to no CPU outside it.  The
 * CPU is the first the process may use, so on a machine of two or more
 * the last CPU (where the reclaimer went before) is another one. */
Test(topology, pool_threads_stay_on_the_cpus_the_process_is_bound_to, .timeout = 30)
{
    cpu_set_t allowed, one;
    thread_cpus(0, &allowed);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &allowed))
            first = c;
    cr_assert_geq(first, 0);
    /* The whole process, as mpiexec does it: every thread it has now. */
    hwloc_topology_t topo;
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    hwloc_bitmap_only(set, (unsigned)first);
    cr_assert_eq(hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS), 0);
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);

    pp_pool_t *pool = test_pool_native(NULL);
    pp_stats_t s;
    test_stats(pool, &s);
    check_reclaimers(pool, &s);
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    for (unsigned n = 0; n < s.nodes; n++) {
        cpu_set_t got;
        thread_cpus(test_node(pool, n).reclaimer_tid, &got);
        if (test_node(pool, n).cpu_bound)
            cr_assert(CPU_EQUAL(&got, &one), "node %u: the reclaimer is on %d CPU(s), not CPU %d",
                      n, CPU_COUNT(&got), first);
    }
    cr_assert(test_node(pool, 0).cpu_bound || s.nodes > 1, "the node of CPU %d bound nothing",
              first);
    /* Every thread of the process: none may run outside CPU first. */
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        cpu_set_t got;
        thread_cpus(atoi(e->d_name), &got);
        cr_assert(CPU_EQUAL(&got, &one), "thread %s runs on %d CPU(s), not only CPU %d",
                  e->d_name, CPU_COUNT(&got), first);
    }
    closedir(d);
    test_destroy(pool);
}

Test(topology, on_node_puts_entry_on_node, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(2 * PP_MAX_NODES);
    pp_ref_t refs[2 * PP_MAX_NODES];

    for (unsigned rep = 0; rep < 2; rep++)
        for (unsigned n = 0; n < nodes; n++) {
            size_t id = rep * nodes + n;
            pp_ref_t r = ct_put(pool, ct, id, 100, PP_ON_NODE(n));
            refs[id] = r;
            cr_assert_eq(pp_ref_node(r), n);
            pp_entry_info_t info = test_stat(pool, r);
            cr_assert_eq(info.node, n);
        }

    pp_stats_t s;
    test_stats(pool, &s);
    for (unsigned n = 0; n < nodes; n++) {
        cr_assert_eq(test_node(pool, n).entries, 2, "node %u", n);
        cr_assert_eq(test_node(pool, n).puts, 2, "node %u", n);
    }
    cr_assert_eq(s.total.entries, 2 * nodes);

    for (unsigned i = 0; i < 2 * nodes; i++)
        assert_rc(pp_release(pool, refs[i]), 0);
    test_drain(pool);
    test_stats(pool, &s);
    for (unsigned i = 0; i < 2 * nodes; i++) {
        unsigned n = pp_ref_node(refs[i]);
        cr_assert_eq(ct_frees(ct, i), 1);
        cr_assert_eq(ct_tid(ct, i), test_node(pool, n).reclaimer_tid, "entry %u", i);
    }
    test_destroy(pool);
    ct_delete(ct);
}

Test(topology, on_node_each_of_four, .timeout = 30)
{
    pp_pool_t *pool = synth_pool(TEST_SYNTH4);
    cr_assert_eq(test_nodes(pool), 4);
    ct_t *ct = ct_new(4);
    for (unsigned n = 0; n < 4; n++) {
        pp_ref_t r = ct_put(pool, ct, n, 64, PP_ON_NODE(n));
        cr_assert_eq(pp_ref_node(r), n);
        cr_assert_eq(test_stat(pool, r).node, n);
    }
    test_destroy(pool);
    for (unsigned n = 0; n < 4; n++)
        cr_assert_eq(ct_frees(ct, n), 1);
    ct_delete(ct);
}

Test(topology, default_node_is_a_valid_node, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(1);
    pp_ref_t r = ct_put(pool, ct, 0, 64, 0);
    cr_assert_lt(pp_ref_node(r), nodes);
    cr_assert_eq(test_stat(pool, r).node, pp_ref_node(r));
    test_destroy(pool);
    ct_delete(ct);
}

Test(topology, on_node_out_of_range, .timeout = 30)
{
    pp_pool_t *pool = test_pool(NULL);
    unsigned nodes = test_nodes(pool);
    ct_t *ct = ct_new(1);
    void *buf = ct_buf(ct, 0, 64);
    unsigned bad[] = {nodes, nodes + 1, PP_MAX_NODES - 1, PP_MAX_NODES, 255};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i] < nodes)
            continue; /* PP_MAX_NODES - 1 is valid on a 64-node pool */
        pp_ref_t r = PP_REF_NONE;
        assert_rc(pp_put(pool, buf, 64, &ct->type, PP_ON_NODE(bad[i]), &r),
                  PP_EINVAL);
    }
    pp_stats_t s;
    test_stats(pool, &s);
    cr_assert_eq(s.total.entries, 0);
    cr_assert_eq(s.total.puts, 0);
    test_destroy(pool);
    /* The buffer was never taken. */
    cr_assert_eq(atomic_load(&ct->total), 0);
    cr_assert(ct_check(buf, 0, 64));
    free(buf);
    ct_delete(ct);
}

/* Exports the synthetic topology `synth` as XML into a temp file. */
static void export_xml(const char *synth, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "/tmp/pinpool-topo-XXXXXX.xml");
    int fd = mkstemps(path, 4);
    cr_assert(fd >= 0, "mkstemps");
    close(fd);
    hwloc_topology_t topo;
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_set_synthetic(topo, synth), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    cr_assert_eq(hwloc_topology_export_xml(topo, path, 0), 0);
    hwloc_topology_destroy(topo);
}

Test(topology, xml_file, .timeout = 30)
{
    static const struct { const char *synth; unsigned nodes; } cases[] = {
        {TEST_SYNTH4, 4},
        {"pack:1 numa:3 core:1 pu:2", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64];
        export_xml(cases[i].synth, path, sizeof path);
        pp_options_t o = PP_OPTIONS_INIT;
        o.topology = path;
        pp_pool_t *pool = NULL;
        int rc = pp_pool_create(&o, &pool);
        unlink(path);
        assert_rc(rc, 0);
        pp_stats_t s;
        test_stats(pool, &s);
        cr_assert_eq(s.nodes, cases[i].nodes, "%s", cases[i].synth);
        cr_assert_eq(s.topology_is_this_system, 0);
        check_reclaimers(pool, &s);

        ct_t *ct = ct_new(PP_MAX_NODES);
        for (unsigned n = 0; n < s.nodes; n++) {
            pp_ref_t r = ct_put(pool, ct, n, 64, PP_ON_NODE(n));
            cr_assert_eq(test_stat(pool, r).node, n);
            assert_rc(pp_release(pool, r), 0);
        }
        test_drain(pool);
        for (unsigned n = 0; n < s.nodes; n++) {
            cr_assert_eq(ct_frees(ct, n), 1);
            cr_assert_eq(ct_tid(ct, n), test_node(pool, n).reclaimer_tid);
        }
        test_destroy(pool);
        ct_delete(ct);
    }
}

Test(topology, xml_path_without_slash, .timeout = 30)
{
    /* "ending in .xml" is enough to name a file: a relative path. */
    char path[64];
    export_xml(TEST_SYNTH4, path, sizeof path);
    cr_assert_eq(chdir("/tmp"), 0);
    const char *base = path + strlen("/tmp/");
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = base;
    pp_pool_t *pool = NULL;
    int rc = pp_pool_create(&o, &pool);
    unlink(path);
    assert_rc(rc, 0);
    cr_assert_eq(test_nodes(pool), 4);
    test_destroy(pool);
}

/* ---- a described topology treated as this system ---------------------------- */

#include <sched.h>

/* With HWLOC_THISSYSTEM=1 hwloc takes the synthetic 4-node description as
 * this machine, so pinpool's real-machine paths run: binding reclaimers to
 * their node's CPUs, binding table memory to the node, and homing a put on
 * the node of the CPU the putter runs on.  In the description node k holds
 * PUs 2k and 2k+1.  What may be bound depends on the real machine, so the
 * expectations are computed from it: a node none of whose CPUs this process
 * may run on must report cpu_bound = 0 (the bind fails cleanly), a node
 * that does not exist here must report mem_bound = 0; either way the pool
 * works on every node. */
Test(topology, this_system_binding_degrades_cleanly, .timeout = 60)
{
    cr_assert_eq(setenv("HWLOC_THISSYSTEM", "1", 1), 0);
    pp_options_t o = PP_OPTIONS_INIT;
    o.topology = TEST_SYNTH4;
    pp_pool_t *pool = test_pool(&o);
    pp_stats_t s = PP_STATS_INIT;
    assert_rc(pp_pool_stats(pool, &s), 0);
    cr_assert_eq(s.nodes, 4);
    cr_assert_eq(s.topology_is_this_system, 1);
    check_reclaimers(pool, &s);

    cpu_set_t allowed;
    cr_assert_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    for (unsigned n = 0; n < 4; n++) {
        bool any_cpu = CPU_ISSET(2 * n, &allowed) || CPU_ISSET(2 * n + 1, &allowed);
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/sys/devices/system/node/node%u", n);
        bool node_exists = stat(path, &st) == 0;
        if (!any_cpu)
            cr_assert_eq(test_node(pool, n).cpu_bound, 0, "node %u: no CPU of it is usable here", n);
        if (!node_exists)
            cr_assert_eq(test_node(pool, n).mem_bound, 0, "node %u does not exist here", n);
    }

    /* Homing by CPU: run on one allowed CPU c < 8; a put lands on c / 2. */
    int c = -1;
    for (int i = 0; i < 8 && c < 0; i++)
        if (CPU_ISSET(i, &allowed))
            c = i;
    cr_assert_geq(c, 0, "no CPU below 8 to run on");
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    ct_t *ct = ct_new(8);
    pp_ref_t home = ct_put(pool, ct, 0, 64, 0);
    cr_assert_eq(pp_ref_node(home), (unsigned)c / 2, "put on CPU %d", c);
    cr_assert_eq(sched_setaffinity(0, sizeof allowed, &allowed), 0);

    /* Every node works: put, pin, release, reclaimed by its own reclaimer. */
    for (unsigned n = 0; n < 4; n++) {
        pp_ref_t r = ct_put(pool, ct, 1 + n, 64, PP_ON_NODE(n));
        void *d;
        assert_rc(pp_pin(pool, r, 0, &d), 0);
        assert_rc(pp_unpin(pool, r), 0);
        assert_rc(pp_release(pool, r), 0);
    }
    assert_rc(pp_release(pool, home), 0);
    test_drain(pool);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(ct_frees(ct, i), 1, "entry %zu", i);
    for (unsigned n = 0; n < 4; n++)
        cr_assert_eq(ct_tid(ct, 1 + n), test_node(pool, n).reclaimer_tid,
                     "entry on node %u freed by another thread", n);
    test_destroy(pool);
    ct_delete(ct);
    unsetenv("HWLOC_THISSYSTEM");
}
