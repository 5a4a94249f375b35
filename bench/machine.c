/*
 * machine.c -- the description of the machine a benchmark runs on
 * (machine.h).
 *
 * Sources: the CPU model from hwloc (the first package's CPUModel, which
 * hwloc reads from cpuid or /proc/cpuinfo), else /proc/cpuinfo's "model
 * name"; the family, model and stepping numbers and the hypervisor flag
 * from the first processor of /proc/cpuinfo (x86; elsewhere "unknown");
 * caches, cores and NUMA nodes from hwloc; the CPUs the process may use
 * from sched_getaffinity; the rest from uname, sysfs, the clock and the
 * build (PINBENCH_GIT_COMMIT, bench/CMakeLists.txt).
 *
 * hwloc is only trusted when its topology is this system's: HWLOC_XMLFILE
 * or HWLOC_SYNTHETIC in the environment would otherwise describe a machine
 * that is not the one the figures come from.
 */
#define _GNU_SOURCE               /* sched_getaffinity, CPU_COUNT, getline */
#include "machine.h"

#include <hwloc.h>

#include <ctype.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef PINBENCH_GIT_COMMIT
#define PINBENCH_GIT_COMMIT "unknown"
#endif

#define UNKNOWN "unknown"

static const char *const keys[MACHINE_NFIELDS] = {
    [MACHINE_CPU] = "cpu",
    [MACHINE_CPU_ID] = "cpu_id",
    [MACHINE_CACHES] = "caches",
    [MACHINE_CPUS] = "cpus",
    [MACHINE_NUMA] = "numa_nodes",
    [MACHINE_HYPERVISOR] = "hypervisor",
    [MACHINE_KERNEL] = "kernel",
    [MACHINE_THP] = "thp",
    [MACHINE_DATE] = "date",
    [MACHINE_COMMIT] = "commit",
};

const char *machine_key(int field)
{
    return field >= 0 && field < MACHINE_NFIELDS ? keys[field] : "?";
}

/* Copies src into field f of m: control characters (which would break a
 * line of the output or of a CSV file) become blanks, and leading,
 * trailing and repeated blanks go; empty or NULL gives "unknown". */
static void set_field(machine_t *m, int f, const char *src)
{
    char *d = m->value[f];
    size_t n = 0;
    int blank = 0;
    for (const char *p = src != NULL ? src : ""; *p != '\0' && n + 1 < MACHINE_VALUE_MAX; p++) {
        unsigned char c = (unsigned char)*p;
        if (isspace(c) || iscntrl(c)) {
            blank = n > 0;
            continue;
        }
        if (blank) {
            if (n + 2 >= MACHINE_VALUE_MAX)
                break;
            d[n++] = ' ';
            blank = 0;
        }
        d[n++] = (char)c;
    }
    d[n] = '\0';
    if (n == 0)
        snprintf(d, MACHINE_VALUE_MAX, "%s", UNKNOWN);
}

/* Appends to buf (size bytes, *n used); what does not fit is cut off. */
__attribute__((format(printf, 4, 5)))
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
{
    if (*n + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *n, size - *n, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n += (size_t)w < size - *n ? (size_t)w : size - *n - 1;
}

static int known(const machine_t *m, int f)
{
    return strcmp(m->value[f], UNKNOWN) != 0;
}

/* ------------------------------------------------------------------------ */
/* /proc/cpuinfo                                                             */
/* ------------------------------------------------------------------------ */

typedef struct cpuinfo {
    char model_name[MACHINE_VALUE_MAX];
    char family[32], model[32], stepping[32];
    int has_flags, hypervisor;
} cpuinfo_t;

static void copy_value(char *dst, size_t size, const char *v)
{
    snprintf(dst, size, "%s", v);
}

/* The first processor's block (up to the first empty line): every
 * processor of a machine has the same model, and on a large machine the
 * whole file is long. */
static void read_cpuinfo(cpuinfo_t *ci)
{
    memset(ci, 0, sizeof *ci);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            break;
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        char *end = colon;                 /* the key is "model name\t" */
        while (end > line && isspace((unsigned char)end[-1]))
            end--;
        *end = '\0';
        char *v = colon + 1;
        while (isspace((unsigned char)*v))
            v++;
        if (strcmp(line, "model name") == 0)
            copy_value(ci->model_name, sizeof ci->model_name, v);
        else if (strcmp(line, "cpu family") == 0)
            copy_value(ci->family, sizeof ci->family, v);
        else if (strcmp(line, "model") == 0)
            copy_value(ci->model, sizeof ci->model, v);
        else if (strcmp(line, "stepping") == 0)
            copy_value(ci->stepping, sizeof ci->stepping, v);
        else if (strcmp(line, "flags") == 0) {
            /* A whole word: "hypervisor" is one flag among a hundred. */
            ci->has_flags = 1;
            for (char *save = NULL, *w = strtok_r(v, " \t", &save); w != NULL;
                 w = strtok_r(NULL, " \t", &save))
                if (strcmp(w, "hypervisor") == 0)
                    ci->hypervisor = 1;
        }
    }
    free(line);
    fclose(f);
}

/* "family 25, model 1, stepping 1", from what cpuinfo gives, else from the
 * numbers hwloc reads from cpuid (pkg may be NULL). */
static void describe_cpu_id(machine_t *m, const cpuinfo_t *ci, hwloc_obj_t pkg)
{
    static const char *const names[3] = { "family", "model", "stepping" };
    static const char *const hwloc_names[3] = { "CPUFamilyNumber", "CPUModelNumber",
                                                "CPUStepping" };
    const char *ours[3] = { ci->family, ci->model, ci->stepping };
    char buf[MACHINE_VALUE_MAX] = "";
    size_t n = 0;
    for (int k = 0; k < 3; k++) {
        const char *v = ours[k][0] != '\0' ? ours[k] : NULL;
        if (v == NULL && pkg != NULL)
            v = hwloc_obj_get_info_by_name(pkg, hwloc_names[k]);
        if (v != NULL && *v != '\0')
            append(buf, sizeof buf, &n, "%s%s %s", n ? ", " : "", names[k], v);
    }
    set_field(m, MACHINE_CPU_ID, buf);
}

/* ------------------------------------------------------------------------ */
/* hwloc                                                                     */
/* ------------------------------------------------------------------------ */

/* "32 KiB", "2 MiB", or bytes when neither divides. */
static void size_text(char *dst, size_t size, unsigned long long bytes)
{
    if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
        snprintf(dst, size, "%llu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(dst, size, "%llu KiB", bytes >> 10);
    else
        snprintf(dst, size, "%llu B", bytes);
}

/* One level: "L2 512 KiB x 2", the size of one instance and how many there
 * are; a machine whose instances differ (big and little cores) gives each
 * size with its count, "L2 2 MiB x 4 + 1 MiB x 8".  Appends to buf;
 * nothing if the level has no instance. */
#define MAX_SIZES 4
static void describe_level(char *buf, size_t size, size_t *n, hwloc_topology_t topo,
                           hwloc_obj_type_t type, const char *name)
{
    unsigned long long sizes[MAX_SIZES];
    unsigned counts[MAX_SIZES], nsizes = 0, others = 0;
    int nobj = hwloc_get_nbobjs_by_type(topo, type);
    for (int i = 0; i < nobj; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo, type, (unsigned)i);
        if (o == NULL || o->attr == NULL)
            continue;
        unsigned long long s = (unsigned long long)o->attr->cache.size;
        unsigned k = 0;
        while (k < nsizes && sizes[k] != s)
            k++;
        if (k == MAX_SIZES) {
            others++;
            continue;
        }
        if (k == nsizes) {
            sizes[nsizes] = s;
            counts[nsizes++] = 0;
        }
        counts[k]++;
    }
    if (nsizes == 0)
        return;
    append(buf, size, n, "%s%s", *n ? ", " : "", name);
    for (unsigned k = 0; k < nsizes; k++) {
        char s[32];
        size_text(s, sizeof s, sizes[k]);
        append(buf, size, n, "%s %s x %u", k ? " +" : "", s, counts[k]);
    }
    if (others > 0)
        append(buf, size, n, " + %u of other sizes", others);
}

static void describe_caches(machine_t *m, hwloc_topology_t topo)
{
    char buf[MACHINE_VALUE_MAX] = "";
    size_t n = 0;
    describe_level(buf, sizeof buf, &n, topo, HWLOC_OBJ_L1CACHE, "L1d");
    describe_level(buf, sizeof buf, &n, topo, HWLOC_OBJ_L2CACHE, "L2");
    describe_level(buf, sizeof buf, &n, topo, HWLOC_OBJ_L3CACHE, "L3");
    set_field(m, MACHINE_CACHES, buf);
}

/* "2 cores, 2 PUs for this process (of 2 cores, 2 PUs)": the cores and
 * PUs of the process's affinity mask (what pinbench binds its workers to;
 * a core counts if any of its PUs is in the mask), then all those hwloc
 * sees.  topo may be NULL: then PUs only, the machine's from sysconf. */
static void describe_cpus(machine_t *m, hwloc_topology_t topo)
{
    cpu_set_t affinity;
    CPU_ZERO(&affinity);
    int have_mask = sched_getaffinity(0, sizeof affinity, &affinity) == 0;
    int my_cores = -1, my_pus = have_mask ? CPU_COUNT(&affinity) : -1;
    int cores = -1, pus = -1;
    if (topo != NULL) {
        cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
        hwloc_bitmap_t mask = have_mask ? hwloc_bitmap_alloc() : NULL;
        if (mask != NULL) {
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &affinity))
                    hwloc_bitmap_set(mask, (unsigned)c);
            my_cores = 0;
            for (int i = 0; i < cores; i++) {
                hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
                my_cores += o != NULL && hwloc_bitmap_intersects(o->cpuset, mask);
            }
            hwloc_bitmap_free(mask);
        }
    } else {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        pus = online > 0 && online <= INT_MAX ? (int)online : -1;
    }
    char buf[MACHINE_VALUE_MAX] = "";
    size_t n = 0;
    int c[2] = { my_cores, cores }, p[2] = { my_pus, pus };
    for (int k = 0; k < 2; k++) {
        append(buf, sizeof buf, &n, "%s", k ? " (of " : "");
        if (c[k] >= 0)
            append(buf, sizeof buf, &n, "%d core%s, ", c[k], c[k] == 1 ? "" : "s");
        if (p[k] >= 0)
            append(buf, sizeof buf, &n, "%d PU%s", p[k], p[k] == 1 ? "" : "s");
        else
            append(buf, sizeof buf, &n, "%s PUs", UNKNOWN);
        append(buf, sizeof buf, &n, "%s", k ? ")" : " for this process");
    }
    set_field(m, MACHINE_CPUS, buf);
}

/* What hwloc knows: the model if cpuinfo had none, caches, cores, NUMA
 * nodes, and the cpuid numbers cpuinfo lacked. */
static void describe_hwloc(machine_t *m, const cpuinfo_t *ci)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        describe_cpu_id(m, ci, NULL);
        describe_cpus(m, NULL);
        return;
    }
    if (hwloc_topology_load(topo) != 0 || !hwloc_topology_is_thissystem(topo)) {
        hwloc_topology_destroy(topo);
        describe_cpu_id(m, ci, NULL);
        describe_cpus(m, NULL);
        return;
    }
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg != NULL)
        set_field(m, MACHINE_CPU, hwloc_obj_get_info_by_name(pkg, "CPUModel"));
    describe_cpu_id(m, ci, pkg);
    describe_caches(m, topo);
    describe_cpus(m, topo);
    int nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    char buf[32];
    snprintf(buf, sizeof buf, "%d", nodes);
    set_field(m, MACHINE_NUMA, nodes > 0 ? buf : NULL);
    hwloc_topology_destroy(topo);
}

/* ------------------------------------------------------------------------ */
/* The rest                                                                  */
/* ------------------------------------------------------------------------ */

/* The bracketed word of "always [madvise] never". */
static void describe_thp(machine_t *m)
{
    char line[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f != NULL) {
        if (fgets(line, sizeof line, f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    char *open = strchr(line, '['), *close = open != NULL ? strchr(open, ']') : NULL;
    if (close != NULL)
        *close = '\0';
    set_field(m, MACHINE_THP, close != NULL ? open + 1 : NULL);
}

static void describe_kernel(machine_t *m)
{
    struct utsname u;
    char buf[MACHINE_VALUE_MAX];
    if (uname(&u) != 0) {
        set_field(m, MACHINE_KERNEL, NULL);
        return;
    }
    snprintf(buf, sizeof buf, "%.120s %.60s", u.release, u.machine);
    set_field(m, MACHINE_KERNEL, buf);
}

static void describe_date(machine_t *m)
{
    char buf[64];
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || gmtime_r(&now, &tm) == NULL ||
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        set_field(m, MACHINE_DATE, NULL);
    else
        set_field(m, MACHINE_DATE, buf);
}

void machine_describe(machine_t *m)
{
    for (int f = 0; f < MACHINE_NFIELDS; f++)
        set_field(m, f, NULL);
    cpuinfo_t ci;
    read_cpuinfo(&ci);
    describe_hwloc(m, &ci);
    if (!known(m, MACHINE_CPU))
        set_field(m, MACHINE_CPU, ci.model_name);
    if (ci.has_flags)
        set_field(m, MACHINE_HYPERVISOR, ci.hypervisor ? "yes" : "no");
    describe_kernel(m);
    describe_thp(m);
    describe_date(m);
    set_field(m, MACHINE_COMMIT, PINBENCH_GIT_COMMIT);
}

int machine_print(FILE *f, const machine_t *m, const char *prefix)
{
    int bad = 0;
    for (int k = 0; k < MACHINE_NFIELDS; k++)
        bad |= fprintf(f, "%s%s: %s\n", prefix, keys[k], m->value[k]) < 0;
    return bad ? -1 : 0;
}
