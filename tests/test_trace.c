/*
 * test_trace.c -- the timeline trace (src/api/trace.c, src/core/tevent.c):
 * pp_trace_start and pp_trace_stop and their errors, PINPOOL_TRACE, the
 * file they leave (one complete JSON object, counters, named tracks,
 * reclaim rounds), events dropped when a thread outruns the writer,
 * counted exactly, and allocations that fail.  The swap events (loads, write-backs, flows) are
 * checked in test_evict_load.c, on the fault device; the whole format,
 * against the pool's own counts, by tests/trace/check_trace.py on the
 * demo (ctest demo.trace).
 */
#include "helpers.h"
#include "support/swaptest.h"
#include "testing/testhooks.h"

#include <sys/stat.h>
#include <unistd.h>

/* A fresh file name for a trace in the test's directory. */
static void trace_path(char *buf, size_t n, const char *what)
{
    snprintf(buf, n, "%s/pinpool-trace-%d-%s.json", test_swap_parent(), (int)getpid(), what);
    (void)unlink(buf);
}

/* The whole file, NUL-terminated (freed by the caller). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no trace at %s", path);
    struct stat st;
    cr_assert_eq(fstat(fileno(f), &st), 0);
    char *s = malloc((size_t)st.st_size + 1);
    cr_assert_not_null(s);
    size_t got = fread(s, 1, (size_t)st.st_size, f);
    cr_assert_eq(got, (size_t)st.st_size);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* A complete trace: the object's start and end, the process named, no
 * event dropped (or dropped of them). */
static void check_complete(const char *s, const char *dropped)
{
    cr_assert(strncmp(s, "{\"traceEvents\":[\n", 17) == 0, "starts with: %.40s", s);
    size_t n = strlen(s);
    char end[96];
    snprintf(end, sizeof end, "\"otherData\":{\"events_dropped\":\"%s\"}}\n", dropped);
    cr_assert(n >= strlen(end) && strcmp(s + n - strlen(end), end) == 0,
              "does not end with %s: ...%s", end, n > 80 ? s + n - 80 : s);
    cr_assert_not_null(strstr(s, "\"name\":\"process_name\""));
}

Test(trace, errors, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    char path[512];
    trace_path(path, sizeof path, "errors");
    assert_rc(pp_trace_start(NULL, path, 0), PP_EINVAL);
    assert_rc(pp_trace_start(pool, NULL, 0), PP_EINVAL);
    assert_rc(pp_trace_start(pool, "", 0), PP_EINVAL);
    assert_rc(pp_trace_start(pool, path, 1), PP_EINVAL);
    assert_rc(pp_trace_stop(NULL), PP_EINVAL);
    assert_rc(pp_trace_stop(pool), PP_EINVAL);           /* none running */
    cr_assert_eq(access(path, F_OK), -1, "a refused start made the file");

    /* A file that cannot be made: PP_EIO, reported with its name. */
    size_t from = report_cap_count(&rep);
    assert_rc(pp_trace_start(pool, "/nonexistent-dir/trace.json", 0), PP_EIO);
    cr_assert(report_has(&rep, from, "trace", "/nonexistent-dir/trace.json", NULL));
    assert_rc(pp_trace_stop(pool), PP_EINVAL);

    /* One at a time: a second start is refused and names the first. */
    assert_rc(pp_trace_start(pool, path, 0), 0);
    char other[512];
    trace_path(other, sizeof other, "other");
    from = report_cap_count(&rep);
    assert_rc(pp_trace_start(pool, other, 0), PP_EINUSE);
    cr_assert(report_has(&rep, from, "trace", path, NULL));
    cr_assert_eq(access(other, F_OK), -1);
    assert_rc(pp_trace_stop(pool), 0);
    assert_rc(pp_trace_stop(pool), PP_EINVAL);
    char *s = slurp(path);
    check_complete(s, "0");
    free(s);
    /* And again, to the same file: a new trace. */
    assert_rc(pp_trace_start(pool, path, 0), 0);
    assert_rc(pp_trace_stop(pool), 0);
    s = slurp(path);
    check_complete(s, "0");
    free(s);
    unlink(path);
    test_destroy(pool);
    report_cap_free(&rep);
}

/* Reclaim rounds, counters and thread names, in a pool without swap: a
 * trace stopped after 64 entries were released and freed has a reclaim
 * span of the node's reclaimer, at least one counter sample per node (the
 * writer samples when it starts and when it stops), and names the
 * reclaimer's track. */
Test(trace, reclaim_rounds_counters_and_names, .timeout = 30)
{
    pp_options_t o = PP_OPTIONS_INIT;
    pp_pool_t *pool = test_pool(&o);
    char path[512];
    trace_path(path, sizeof path, "reclaim");
    assert_rc(pp_trace_start(pool, path, 0), 0);
    ct_t *ct = ct_new(64);
    for (size_t i = 0; i < 64; i++)
        assert_rc(pp_release(pool, ct_put(pool, ct, i, 256, 0)), 0);
    test_drain(pool);
    assert_rc(pp_trace_stop(pool), 0);
    char *s = slurp(path);
    check_complete(s, "0");
    cr_assert_not_null(strstr(s, "\"name\":\"reclaim\",\"cat\":\"reclaim\",\"ph\":\"X\""),
                       "no reclaim span");
    cr_assert_not_null(strstr(s, "pinpool reclaimer node"), "the reclaimer's track is not named");
    for (unsigned n = 0; n < test_nodes(pool); n++) {
        char name[64];
        snprintf(name, sizeof name, "\"name\":\"node %u memory MB\",\"ph\":\"C\"", n);
        cr_assert_not_null(strstr(s, name), "no counter %s", name);
    }
    /* Nothing was swapped: no I/O counters without swap. */
    cr_assert_null(strstr(s, "swap MB/s"));
    free(s);
    unlink(path);
    test_destroy(pool);
    ct_delete(ct);
}

/* A thread that records more events than its buffer holds between two
 * rounds of the writer loses the rest, counted exactly: the writer is held
 * before its first round while this thread records 3000 events into a
 * buffer of 2048; the file says 952 were dropped, and so does a report
 * line. */
typedef struct hold {
    pp_pool_t *pool;
    test_sig_t at, go;
    atomic_int armed;
} hold_t;

static void hold_point(enum pp__test_point where, void *arg, void *ctx)
{
    hold_t *h = ctx;
    if (where != PP__TP_TRACE_ROUND || arg != h->pool || atomic_exchange(&h->armed, 0) == 0)
        return;
    sig_set(&h->at, 1);
    (void)sig_wait(&h->go, 1);               /* bounded: TEST_WAIT_MS */
}

#define DROP_EVENTS 3000u
#define DROP_BUFFER PP__TBUF_EVENTS

Test(trace, events_dropped_are_counted, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    char path[512];
    trace_path(path, sizeof path, "dropped");
    hold_t h = {.pool = pool};
    sig_init(&h.at);
    sig_init(&h.go);
    atomic_store(&h.armed, 1);
    pp__test_point_hook(hold_point, &h);
    assert_rc(pp_trace_start(pool, path, 0), 0);
    cr_assert(sig_wait(&h.at, 1), "the writer never began a round");
    pp__thread_t *t = pp__thread_get(pool);
    cr_assert_not_null(t);
    for (uint32_t i = 0; i < DROP_EVENTS; i++) {
        pp__tev_t ev = {.t0 = pp__wait_now_ns(), .kind = PP__TEV_QUEUE, .ref = i + 1};
        ev.t1 = ev.t0;
        pp__tevent_add(pool, t, &ev);
    }
    sig_set(&h.go, 1);
    size_t from = report_cap_count(&rep);
    assert_rc(pp_trace_stop(pool), 0);
    pp__test_point_hook(NULL, NULL);
    char *s = slurp(path);
    char want[64];
    snprintf(want, sizeof want, "%u", DROP_EVENTS - DROP_BUFFER);
    check_complete(s, want);
    snprintf(want, sizeof want, "%u events dropped", DROP_EVENTS - DROP_BUFFER);
    cr_assert(report_has(&rep, from, want, NULL, NULL));
    /* The events kept are written: the last of them is there, and the
     * first dropped is not. */
    char id[64];
    snprintf(id, sizeof id, "\"id\":\"0x%016x\"", DROP_BUFFER);
    cr_assert_not_null(strstr(s, id));
    snprintf(id, sizeof id, "\"id\":\"0x%016x\"", DROP_BUFFER + 1);
    cr_assert_null(strstr(s, id));
    free(s);
    unlink(path);
    sig_destroy(&h.at);
    sig_destroy(&h.go);
    test_destroy(pool);
    report_cap_free(&rep);
}

/* Allocations that fail.  pp_trace_start: PP_ENOMEM, no file made, and a
 * later start works.  A thread's first event, whose buffer cannot be
 * made: the event is lost and counted with the dropped ones, and the
 * thread's next event makes its buffer.  The writer is held meanwhile, so
 * that no allocation but the one failed happens. */
Test(trace, allocation_failures, .timeout = 30)
{
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = test_pool(&o);
    pp__thread_t *t = pp__thread_get(pool);
    cr_assert_not_null(t);
    char path[512];
    trace_path(path, sizeof path, "nomem");
    for (int k = 0; k < 2; k++) {                /* the trace's record, its path */
        pp__alloc_fail_after(k);
        assert_rc(pp_trace_start(pool, path, 0), PP_ENOMEM);
        pp__alloc_fail_after(-1);
        cr_assert_eq(access(path, F_OK), -1, "a failed start made the file");
        assert_rc(pp_trace_stop(pool), PP_EINVAL);
    }
    hold_t h = {.pool = pool};
    sig_init(&h.at);
    sig_init(&h.go);
    atomic_store(&h.armed, 1);
    pp__test_point_hook(hold_point, &h);
    assert_rc(pp_trace_start(pool, path, 0), 0);
    cr_assert(sig_wait(&h.at, 1), "the writer never began a round");
    cr_assert_null(t->tbuf, "this thread has a buffer before its first event");
    pp__tev_t ev = {.t0 = pp__wait_now_ns(), .kind = PP__TEV_QUEUE, .ref = 1};
    ev.t1 = ev.t0;
    pp__alloc_fail_after(0);
    pp__tevent_add(pool, t, &ev);
    pp__alloc_fail_after(-1);
    cr_assert_null(t->tbuf);
    ev.ref = 2;
    pp__tevent_add(pool, t, &ev);
    cr_assert_not_null(t->tbuf);
    sig_set(&h.go, 1);
    size_t from = report_cap_count(&rep);
    assert_rc(pp_trace_stop(pool), 0);
    pp__test_point_hook(NULL, NULL);
    char *s = slurp(path);
    check_complete(s, "1");
    cr_assert(report_has(&rep, from, "1 events dropped", NULL, NULL));
    cr_assert_null(strstr(s, "\"id\":\"0x0000000000000001\""));
    cr_assert_not_null(strstr(s, "\"id\":\"0x0000000000000002\""));
    free(s);
    unlink(path);
    sig_destroy(&h.at);
    sig_destroy(&h.go);
    test_destroy(pool);
    report_cap_free(&rep);
}

/* PINPOOL_TRACE=path traces from pp_pool_create to pp_pool_destroy; a
 * path that cannot be written makes pp_pool_create fail, reported. */
Test(trace, environment, .timeout = 30)
{
    char path[512];
    trace_path(path, sizeof path, "env");
    setenv("PINPOOL_TRACE", path, 1);
    report_cap_t rep;
    report_cap_init(&rep);
    pp_options_t o = PP_OPTIONS_INIT;
    report_cap_attach(&rep, &o);
    pp_pool_t *pool = NULL;
    assert_rc(pp_pool_create(&o, &pool), 0);
    assert_rc(pp_trace_start(pool, path, 0), PP_EINUSE);   /* it runs */
    cr_assert(report_has(&rep, 0, "one is running already", path, NULL));
    /* A second pool meanwhile writes path.2, not over the first. */
    pp_pool_t *second = NULL;
    assert_rc(pp_pool_create(NULL, &second), 0);
    assert_rc(pp_pool_destroy(second), 0);
    assert_rc(pp_pool_destroy(pool), 0);
    char *s = slurp(path);
    check_complete(s, "0");
    free(s);
    unlink(path);
    char path2[520];
    snprintf(path2, sizeof path2, "%s.2", path);
    s = slurp(path2);
    check_complete(s, "0");
    free(s);
    unlink(path2);

    setenv("PINPOOL_TRACE", "/nonexistent-dir/t.json", 1);
    pool = NULL;
    size_t from = report_cap_count(&rep);
    assert_rc(pp_pool_create(&o, &pool), PP_EIO);
    cr_assert_null(pool);
    cr_assert(report_has(&rep, from, "/nonexistent-dir/t.json", NULL, NULL));
    setenv("PINPOOL_TRACE", "", 1);                  /* empty: unset */
    assert_rc(pp_pool_create(&o, &pool), 0);
    assert_rc(pp_trace_stop(pool), PP_EINVAL);
    test_destroy(pool);
    unsetenv("PINPOOL_TRACE");
    report_cap_free(&rep);
}
