// harness.hpp -- what the tests of pinpool.hpp share: a small test runner
// that needs no exceptions (one of the programs is built without them),
// checks that report where they failed, pools on the test topology, a
// counting entry type, and the capture of report lines.
//
//   TEST_CASE(name) { ... }        registers a case; main() runs them all in
//                                  order (or those whose name contains
//                                  argv[1]) and exits 1 if any check failed
//   CHECK(cond)                    records a failure and goes on
//   REQUIRE(cond)                  records a failure and ends the case
//   CHECK_RC(call, want)           a return code, shown by name on failure
//   CHECK_THROWS(want, stmt)       stmt throws pinpool::error with code want
//
// A case fails, too, if it leaves report lines (pinpool::set_report) it did
// not take with take_reports(): a destructor that failed without the case
// expecting it is a failure.
#ifndef PINPOOL_TESTS_CXX_HARNESS_HPP
#define PINPOOL_TESTS_CXX_HARNESS_HPP

#include <pinpool.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace harness {

struct test_case {
    const char *name;
    void (*fn)();
};

inline std::vector<test_case> &cases()
{
    static std::vector<test_case> all;
    return all;
}

inline int &failures()
{
    static int n = 0;
    return n;
}

struct registrar {
    registrar(const char *name, void (*fn)()) { cases().push_back({name, fn}); }
};

inline void fail(const char *file, int line, const char *what)
{
    std::fprintf(stderr, "  %s:%d: check failed: %s\n", file, line, what);
    failures()++;
}

inline bool check_rc(int got, int want, const char *file, int line, const char *expr)
{
    if (got == want)
        return true;
    std::fprintf(stderr, "  %s:%d: %s returned %s (%s), expected %s\n", file, line, expr,
                 pp_err_name(got), pp_strerror(got), pp_err_name(want));
    failures()++;
    return false;
}

// Report lines sent through pinpool::set_report, until taken.
inline std::mutex &report_mu()
{
    static std::mutex mu;
    return mu;
}
inline std::vector<std::string> &report_lines()
{
    static std::vector<std::string> lines;
    return lines;
}
inline void capture_report(const char *line)
{
    std::lock_guard<std::mutex> lock(report_mu());
    report_lines().push_back(line);
}
// The lines reported since the last call (and forgets them).
inline std::vector<std::string> take_reports()
{
    std::lock_guard<std::mutex> lock(report_mu());
    std::vector<std::string> lines;
    lines.swap(report_lines());
    return lines;
}
// Whether exactly one line was reported since the last take_reports(), and
// it contains every one of the given parts.
inline bool one_report_with(std::initializer_list<const char *> parts)
{
    std::vector<std::string> lines = take_reports();
    bool ok = lines.size() == 1;
    for (const char *p : parts)
        ok = ok && lines[0].find(p) != std::string::npos;
    if (!ok) {
        std::fprintf(stderr, "  %zu report line(s):\n", lines.size());
        for (const std::string &l : lines)
            std::fprintf(stderr, "    %s\n", l.c_str());
    }
    return ok;
}

// Lines the pools of the tests report (pp_options_t.report), apart from
// the wrapper's own: a pool refusing to be destroyed names its pinned
// entries there.
inline std::atomic<int> &pool_report_count()
{
    static std::atomic<int> n{0};
    return n;
}
inline void pool_report(const char *line, void *)
{
    pool_report_count()++;
    std::fprintf(stderr, "  (pool report) %s\n", line);
}

// Options on the test topology: PINPOOL_TEST_TOPOLOGY if set (ctest runs
// each program on this machine and on a synthetic 4-node topology).
inline pinpool::options test_options()
{
    pinpool::options o;
    const char *t = std::getenv("PINPOOL_TEST_TOPOLOGY");
    if (t != nullptr && *t != '\0')
        o.topology(t);
    o.report(pool_report);
    return o;
}

// A type whose free function counts the entries it frees.
struct counted {
    std::atomic<int> frees{0};
    pp_type_t type;
    counted() : type()
    {
        type.name = "counted";
        type.free = free_it;
        type.ctx = this;
    }
    static void free_it(void *data, size_t, void *ctx)
    {
        static_cast<counted *>(ctx)->frees++;
        std::free(data);
    }
};

// n bytes from malloc, each set to fill.
inline char *bytes(size_t n, char fill)
{
    char *p = static_cast<char *>(std::malloc(n != 0 ? n : 1));
    if (p == nullptr)
        std::abort();
    std::memset(p, fill, n);
    return p;
}

// The entry's snapshot (all zero, state included, if pp_stat fails).
inline pp_entry_info_t info_of(pp_pool_t *pool, pp_ref_t ref)
{
    pp_entry_info_t info = pp_entry_info_t();
    if (pp_stat(pool, ref, &info) != 0)
        info = pp_entry_info_t();
    return info;
}

inline int run(int argc, char **argv)
{
    pinpool::set_report(capture_report);
    const char *only = argc > 1 ? argv[1] : nullptr;
    int ran = 0, failed = 0;
    for (const test_case &c : cases()) {
        if (only != nullptr && std::strstr(c.name, only) == nullptr)
            continue;
        std::fprintf(stderr, "[ RUN  ] %s\n", c.name);
        int before = failures();
        c.fn();
        std::vector<std::string> left = take_reports();
        for (const std::string &l : left)
            fail(__FILE__, __LINE__, ("unexpected report: " + l).c_str());
        ran++;
        if (failures() != before) {
            failed++;
            std::fprintf(stderr, "[ FAIL ] %s\n", c.name);
        } else {
            std::fprintf(stderr, "[   OK ] %s\n", c.name);
        }
    }
    std::fprintf(stderr, "%d case(s) run, %d failed\n", ran, failed);
    return ran == 0 || failed != 0 ? 1 : 0;
}

}  // namespace harness

#define TEST_CASE(name)                                                        \
    static void name();                                                        \
    static const harness::registrar name##_registrar(#name, name);             \
    static void name()

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            harness::fail(__FILE__, __LINE__, #cond);                          \
    } while (0)

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            harness::fail(__FILE__, __LINE__, #cond);                          \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_RC(call, want) harness::check_rc((call), (want), __FILE__, __LINE__, #call)

#if defined(__cpp_exceptions)
// The statement throws a pinpool::error with code want.
#define CHECK_THROWS(want, ...)                                                \
    do {                                                                       \
        bool thrown_ = false;                                                  \
        try {                                                                  \
            __VA_ARGS__;                                                       \
        } catch (const pinpool::error &e_) {                                   \
            thrown_ = true;                                                    \
            CHECK_RC(e_.code(), want);                                         \
        }                                                                      \
        if (!thrown_)                                                          \
            harness::fail(__FILE__, __LINE__, "no pinpool::error from " #__VA_ARGS__); \
    } while (0)
#endif

#endif  // PINPOOL_TESTS_CXX_HARNESS_HPP
