/*
 * test_swapdio.c -- direct I/O of the swap store (PP_SWAP_DIRECT): the
 * files are opened O_DIRECT and swapped bytes stay out of the page cache,
 * short writes and reads that stop inside a block are carried on, a file
 * system that refuses O_DIRECT gives PP_ENOTSUP with a report.
 *
 * Everything else about swap is in tests/test_swap_*.c, also built
 * as test_swap_direct (suite swap_direct): all of it with direct I/O.
 * Here each test makes its pools with and without PP_SWAP_DIRECT itself,
 * and checks what each must do.  Eviction is forced as test_swap does
 * (dio_squeeze: a NOSWAP entry as large as the limit fits only once every
 * evictable entry is out).  No sleeps.
 */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "support/faultdev.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

TestSuite(swap_dio);

typedef struct dio {
    char dir[64];              /* swap_dir, empty at the end */
    pp_pool_t *pool;
    faultdev_t *fd;            /* the fault device, or NULL */
    size_t limit;
    report_cap_t rep;
} dio_t;

/* A fresh swap_dir under parent; the options of a pool with swap there. */
static pp_options_t dio_options(dio_t *s, const char *parent, size_t limit, unsigned flags)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s/pp-diotest-XXXXXX", parent);
    cr_assert_not_null(mkdtemp(s->dir), "mkdtemp under %s: %s", parent, strerror(errno));
    report_cap_init(&s->rep);
    pp_options_t o = PP_OPTIONS_INIT;
    o.mem_limit = limit;
    o.swap_dir = s->dir;
    o.flags = flags;
    report_cap_attach(&s->rep, &o);
    s->limit = limit;
    return o;
}

static void dio_open(dio_t *s, size_t limit, unsigned flags, bool fault)
{
    pp_options_t o = dio_options(s, "/tmp", limit, flags);
    int rc;
    if (fault) {
        s->fd = faultdev_new();
        cr_assert_not_null(s->fd);
        rc = faultdev_pool_create(&o, s->fd, &s->pool);
    } else {
        rc = test_pool_create(&o, &s->pool);
    }
    cr_assert_eq(rc, 0, "pp_pool_create: %s", pp_err_name(rc));
}

/* Destroys the pool (if any); swap_dir must be left empty. */
static void dio_close(dio_t *s)
{
    if (s->pool != NULL)
        test_destroy(s->pool);
    s->pool = NULL;
    s->fd = NULL;
    cr_assert_eq(dir_entries(s->dir), 0, "swap_dir %s not empty", s->dir);
    cr_assert_eq(rmdir(s->dir), 0, "rmdir %s: %s", s->dir, strerror(errno));
    report_cap_free(&s->rep);
}

static const pp_type_t squeeze_type = {.name = "squeeze", .flags = PP_TYPE_NOSWAP};

/* Every unpinned swappable entry out (see test_swap_support.c's sw_squeeze). */
static void dio_squeeze(dio_t *s)
{
    void *buf = malloc(s->limit);
    cr_assert_not_null(buf);
    pp_ref_t ref;
    int rc = pp_put(s->pool, buf, s->limit, &squeeze_type, 0, &ref);
    if (rc != 0)
        free(buf);
    assert_rc(rc, 0);
    assert_rc(pp_release(s->pool, ref), 0);
    test_drain(s->pool);
}

static pp_ref_t dio_put(dio_t *s, size_t size, uint64_t seed)
{
    void *buf = malloc(size);
    cr_assert_not_null(buf);
    fill_pattern(buf, size, seed);
    pp_ref_t ref;
    assert_rc(pp_put(s->pool, buf, size, NULL, PP_ON_NODE(0), &ref), 0);
    return ref;
}

static void dio_check(dio_t *s, pp_ref_t ref, size_t size, uint64_t seed)
{
    void *d = NULL;
    assert_rc(pp_pin(s->pool, ref, 0, &d), 0);
    bool ok = check_pattern(d, size, seed);
    assert_rc(pp_unpin(s->pool, ref), 0);
    cr_assert(ok, "the %zu-byte entry lost its contents", size);
}

static void assert_swapped(dio_t *s, pp_ref_t ref)
{
    unsigned st = test_stat(s->pool, ref).state;
    cr_assert_eq(st & (PP_STATE_RESIDENT | PP_STATE_SWAPPED), PP_STATE_SWAPPED, "state 0x%x", st);
}

/* The open file descriptors of this process whose path is a swap file of
 * pool (found through the /proc/self/fd links); their open flags, from
 * /proc/self/fdinfo, in flags[]. */
static size_t swap_fds(pp_pool_t *pool, int *flags, size_t max)
{
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/node", pp__swap_path(pool));
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char link[300], target[4200] = {0};
        if (de->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0 || strncmp(target, prefix, strlen(prefix)) != 0)
            continue;
        char info[300], line[256];
        snprintf(info, sizeof info, "/proc/self/fdinfo/%s", de->d_name);
        FILE *f = fopen(info, "r");
        cr_assert_not_null(f, "%s: %s", info, strerror(errno));
        int fl = -1;
        while (fgets(line, sizeof line, f) != NULL) {
            if (sscanf(line, "flags: %o", (unsigned *)&fl) == 1)
                break;
        }
        fclose(f);
        cr_assert_geq(fl, 0, "no flags line in %s", info);
        cr_assert_lt(n, max);
        flags[n++] = fl;
    }
    closedir(d);
    return n;
}

/* Pages of the swap file of node 0 that are in the page cache. */
static size_t cached_pages(pp_pool_t *pool)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/node0.swap", pp__swap_path(pool));
    int f = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(f, 0, "open %s: %s", path, strerror(errno));
    struct stat sb;
    cr_assert_eq(fstat(f, &sb), 0);
    size_t len = (size_t)sb.st_size, pages = (len + 4095) / 4096, n = 0;
    if (len > 0) {
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, f, 0);
        cr_assert_neq(m, MAP_FAILED, "mmap %s: %s", path, strerror(errno));
        unsigned char *vec = malloc(pages);
        cr_assert_not_null(vec);
        cr_assert_eq(mincore(m, len, vec), 0, "mincore: %s", strerror(errno));
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
        free(vec);
        munmap(m, len);
    }
    close(f);
    return n;
}

/* ------------------------------------------------------------------------ */
/* The files                                                                 */
/* ------------------------------------------------------------------------ */

/* Each node's swap file is open O_DIRECT exactly when PP_SWAP_DIRECT was
 * asked for. */
static void files_opened(unsigned flags)
{
    dio_t s;
    dio_open(&s, 1 * MiB, flags, false);
    int fl[PP_MAX_NODES + 1];
    size_t n = swap_fds(s.pool, fl, PP_MAX_NODES + 1);
    cr_assert_eq(n, test_nodes(s.pool), "%zu swap files open for %u nodes", n,
                 test_nodes(s.pool));
    bool direct = (flags & PP_SWAP_DIRECT) != 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq((fl[i] & O_DIRECT) != 0, direct, "swap file flags 0%o: O_DIRECT %s", fl[i],
                     direct ? "missing" : "set");
        cr_assert_eq(fl[i] & O_ACCMODE, O_RDWR);
        cr_assert(fl[i] & O_CLOEXEC);
    }
    dio_close(&s);
}

Test(swap_dio, direct_pool_opens_its_files_o_direct, .timeout = 60)
{
    files_opened(PP_SWAP_DIRECT);
    files_opened(PP_SWAP_DIRECT | PP_SWAP_COMPRESS);
}

Test(swap_dio, buffered_pool_does_not, .timeout = 60)
{
    files_opened(0);
}

/* Swapped bytes of a direct pool are not in the page cache, after writes
 * and after loads; those of a buffered pool are (the contrast shows that
 * the check can see them). */
static size_t pages_cached_after_round_trip(unsigned flags)
{
    dio_t s;
    dio_open(&s, 1 * MiB, flags, false);
    enum { N = 8 };
    const size_t size = 64 * KiB + 5;
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = dio_put(&s, size, 100 + i);
    dio_squeeze(&s);
    size_t after_write = cached_pages(s.pool);
    for (size_t i = 0; i < N; i++)
        dio_check(&s, ref[i], size, 100 + i);
    size_t after_read = cached_pages(s.pool);
    for (size_t i = 0; i < N; i++)
        assert_rc(pp_release(s.pool, ref[i]), 0);
    test_drain(s.pool);
    dio_close(&s);
    if (flags & PP_SWAP_DIRECT) {
        cr_assert_eq(after_write, 0, "%zu pages of a direct pool's swap file cached", after_write);
        cr_assert_eq(after_read, 0, "%zu pages cached after loads", after_read);
    }
    return after_write + after_read;
}

Test(swap_dio, direct_copies_stay_out_of_the_page_cache, .timeout = 60)
{
    pages_cached_after_round_trip(PP_SWAP_DIRECT);
    cr_assert_gt(pages_cached_after_round_trip(0), 0,
                 "a buffered pool's swap file is not cached either: the check sees nothing");
}

/* ------------------------------------------------------------------------ */
/* Short writes and reads                                                    */
/* ------------------------------------------------------------------------ */

/* Every device call does only half of what it is asked and reports a count
 * that stops inside a block: the store goes on from that block (direct) or
 * byte (buffered), every copy comes back whole. */
static const size_t odd_sizes[] = {1, 7, 511, 4095, 4097, 65537, MiB + 3, 2 * MiB + 5};
#define ODD_N (sizeof odd_sizes / sizeof odd_sizes[0])

static void odd_counts(unsigned flags)
{
    dio_t s;
    dio_open(&s, 4 * MiB, flags, true);
    atomic_store(&s.fd->write_odd, 1);
    atomic_store(&s.fd->read_odd, 1);
    pp_ref_t ref[ODD_N];
    for (size_t i = 0; i < ODD_N; i++)
        ref[i] = dio_put(&s, odd_sizes[i], 7 + i);
    for (int r = 0; r < 2; r++) {
        dio_squeeze(&s);
        for (size_t i = 0; i < ODD_N; i++)
            assert_swapped(&s, ref[i]);
        for (size_t i = 0; i < ODD_N; i++)
            dio_check(&s, ref[i], odd_sizes[i], 7 + i);
    }
    pp_stats_t st;
    test_stats(s.pool, &st);
    cr_assert_eq(st.total.io_errors, 0);
    cr_assert_eq(st.total.checksum_failures, 0);
    cr_assert_eq(st.total.loads, 2 * ODD_N);
    /* Each copy took more than one call each way. */
    cr_assert_gt(atomic_load(&s.fd->writes), ODD_N);
    cr_assert_gt(atomic_load(&s.fd->reads), 2 * ODD_N);
    cr_assert(pp__pool_is_valid(s.pool));
    for (size_t i = 0; i < ODD_N; i++)
        assert_rc(pp_release(s.pool, ref[i]), 0);
    test_drain(s.pool);
    cr_assert_eq(STAT_TOTAL(s.pool, swap_used_bytes), 0);
    dio_close(&s);
}

Test(swap_dio, direct_counts_inside_a_block_are_carried_on, .timeout = 60)
{
    odd_counts(PP_SWAP_DIRECT);
    odd_counts(PP_SWAP_DIRECT | PP_SWAP_COMPRESS);
}

Test(swap_dio, buffered_counts_inside_a_block_are_carried_on, .timeout = 60)
{
    odd_counts(0);
}

/* ------------------------------------------------------------------------ */
/* Memory that loads make                                                    */
/* ------------------------------------------------------------------------ */

#define HUGE_PAGE (2 * MiB)

/* The VmFlags of the mapping of p in /proc/self/smaps, into flags. */
static void vma_flags(const void *p, char *flags, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f, "/proc/self/smaps: %s", strerror(errno));
    char line[512];
    bool in = false;
    flags[0] = '\0';
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
            line[strspn(line, "0123456789abcdef")] == '-') {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, n, "%s", line + 8);
            break;
        }
    }
    fclose(f);
    cr_assert_neq(flags[0], '\0', "no mapping of %p in /proc/self/smaps", p);
}

/* A load of PP__HUGE bytes or more reads into memory aligned to a huge
 * page and advised MADV_HUGEPAGE (VmFlags "hg"): one fault where 4 KiB
 * pages take 512 (src/os/alloc.c, pp__alloc_io).  The advice is looked
 * for only where the kernel has transparent huge pages: without them
 * madvise refuses it (EINVAL, a hint the pool ignores), and the alignment
 * is what the pool still promises. */
static void loads_make_huge_page_memory(unsigned flags)
{
    bool thp = access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
    dio_t s;
    dio_open(&s, 16 * MiB, flags, false);
    const size_t sizes[] = {HUGE_PAGE, HUGE_PAGE + 5, 2 * HUGE_PAGE + 4096};
    enum { N = sizeof sizes / sizeof sizes[0] };
    pp_ref_t ref[N];
    for (size_t i = 0; i < N; i++)
        ref[i] = dio_put(&s, sizes[i], 40 + i);
    dio_squeeze(&s);
    for (size_t i = 0; i < N; i++) {
        assert_swapped(&s, ref[i]);
        void *d = NULL;
        assert_rc(pp_pin(s.pool, ref[i], 0, &d), 0);
        char vm[512];
        vma_flags(d, vm, sizeof vm);
        bool ok = check_pattern(d, sizes[i], 40 + i);
        assert_rc(pp_unpin(s.pool, ref[i]), 0);
        cr_assert(ok, "the %zu-byte entry lost its contents", sizes[i]);
        cr_assert_eq((uintptr_t)d % HUGE_PAGE, 0, "flags 0x%x: a load of %zu bytes read into %p, "
                     "not on a huge page", flags, sizes[i], d);
        cr_assert(!thp || strstr(vm, " hg") != NULL, "flags 0x%x: the %zu bytes loaded at %p are not "
                  "advised MADV_HUGEPAGE (VmFlags:%s)", flags, sizes[i], d, vm);
    }
    for (size_t i = 0; i < N; i++)
        assert_rc(pp_release(s.pool, ref[i]), 0);
    test_drain(s.pool);
    dio_close(&s);
}

Test(swap_dio, direct_loads_of_a_huge_page_read_into_huge_page_memory, .timeout = 60)
{
    loads_make_huge_page_memory(PP_SWAP_DIRECT);
    loads_make_huge_page_memory(PP_SWAP_DIRECT | PP_SWAP_COMPRESS);
}

Test(swap_dio, buffered_loads_of_a_huge_page_read_into_huge_page_memory, .timeout = 60)
{
    loads_make_huge_page_memory(0);
    loads_make_huge_page_memory(PP_SWAP_COMPRESS);
}

/* ------------------------------------------------------------------------ */
/* A file system that refuses O_DIRECT                                       */
/* ------------------------------------------------------------------------ */

/* The device's open fails as a file system's that refuses O_DIRECT
 * (EINVAL) or needs more alignment (EOPNOTSUPP): with PP_SWAP_DIRECT that
 * is PP_ENOTSUP, said through the report hook; without, PP_EIO. */
static void refused(int err, unsigned flags, int want, const char *said)
{
    dio_t s;
    pp_options_t o = dio_options(&s, "/tmp", 1 * MiB, flags);
    faultdev_t *f = faultdev_new();
    cr_assert_not_null(f);
    atomic_store(&f->open_err, err);
    pp_pool_t *pool = NULL;
    assert_rc(faultdev_pool_create(&o, f, &pool), want);
    cr_assert_null(pool);
    cr_assert(report_has(&s.rep, 0, said, s.dir, NULL), "no report naming %s and %s", said,
              s.dir);
    dio_close(&s);
}

Test(swap_dio, refused_o_direct_is_enotsup_and_reported, .timeout = 60)
{
    refused(-EINVAL, PP_SWAP_DIRECT, PP_ENOTSUP, "refuses O_DIRECT");
    refused(-EOPNOTSUPP, PP_SWAP_DIRECT | PP_SWAP_COMPRESS, PP_ENOTSUP, "4096");
    refused(-EINVAL, 0, PP_EIO, "cannot make the swap store");
}

/* On tmpfs (/dev/shm), the pool does what the kernel does: Linux 6.6 and
 * later give tmpfs O_DIRECT, and a direct pool works there; earlier ones
 * refuse it, and pp_pool_create returns PP_ENOTSUP with a report.  The
 * test asks the kernel first (an O_DIRECT open of a file there), then
 * checks that the pool agrees; a buffered pool always works. */
static bool tmpfs_takes_o_direct(const char *dir)
{
    char probe[128];
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int f = open(probe, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
    int err = errno;
    if (f >= 0)
        close(f);
    unlink(probe);
    cr_assert(f >= 0 || err == EINVAL, "O_DIRECT open on tmpfs: %s", strerror(err));
    return f >= 0;
}

static void on_tmpfs(unsigned flags)
{
    struct statfs sf;
    cr_assert_eq(statfs("/dev/shm", &sf), 0, "statfs /dev/shm: %s", strerror(errno));
    cr_assert_eq(sf.f_type, TMPFS_MAGIC, "/dev/shm is not tmpfs here");
    dio_t s;
    pp_options_t o = dio_options(&s, "/dev/shm", 1 * MiB, flags);
    bool works = !(flags & PP_SWAP_DIRECT) || tmpfs_takes_o_direct(s.dir);
    int rc = test_pool_create(&o, &s.pool);
    if (!works) {
        assert_rc(rc, PP_ENOTSUP);
        cr_assert_null(s.pool);
        cr_assert(report_has(&s.rep, 0, "refuses O_DIRECT", NULL, NULL));
        dio_close(&s);
        return;
    }
    assert_rc(rc, 0);
    pp_ref_t a = dio_put(&s, 300 * KiB + 1, 1), b = dio_put(&s, 5000, 2);
    dio_squeeze(&s);
    assert_swapped(&s, a);
    assert_swapped(&s, b);
    dio_check(&s, a, 300 * KiB + 1, 1);
    dio_check(&s, b, 5000, 2);
    assert_rc(pp_release(s.pool, a), 0);
    assert_rc(pp_release(s.pool, b), 0);
    test_drain(s.pool);
    dio_close(&s);
}

Test(swap_dio, tmpfs_direct_pool_does_what_the_kernel_does, .timeout = 60)
{
    on_tmpfs(PP_SWAP_DIRECT);
    on_tmpfs(0);
}

/* PP_SWAP_DIRECT without swap_dir is accepted and changes nothing. */
Test(swap_dio, direct_without_swap_dir_is_ignored, .timeout = 60)
{
    pp_options_t o = PP_OPTIONS_INIT;
    o.flags = PP_SWAP_DIRECT;
    pp_pool_t *pool = test_pool(&o);
    pp_stats_t st;
    test_stats(pool, &st);
    cr_assert_eq(st.swap, 0);
    test_destroy(pool);
    o.flags = 0x8u;                      /* the next bit is not a flag */
    assert_rc(test_pool_create(&o, &pool), PP_EINVAL);
}
