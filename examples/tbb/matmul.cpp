/*
 * pinpool-tbb -- a tiled matrix multiply C += A B on a oneTBB flow graph,
 * its tiles in a pinpool pool whose memory limit is below the working set.
 *
 *   pinpool-tbb [-n N] [-b B] [-t THREADS] [-m SIZE] [--swap-dir DIR]
 *               [--seed S]
 *
 * A, B and C are N x N matrices of doubles cut into B x B tiles; every tile
 * is one pool entry.  The flow graph (tbb::flow::continue_node) has a task
 * per tile that makes it and puts it in the pool, a task per product
 * C(i,j) += A(i,k) B(k,j), and a task per tile of C that checks it.  Its
 * edges are the dependencies: gemm(i,j,k) after the puts of A(i,k) and
 * B(k,j) and after gemm(i,j,k-1) (the put of C(i,j) for k = 0), and
 * check(i,j) after gemm(i,j,N/B-1).  The pool may hold only a quarter of
 * the three matrices in memory (-m), so tiles are written to a private swap
 * directory and loaded back when a task pins them.
 *
 * Every element is a small integer, so every product and sum is exact in
 * double: check(i,j) compares C(i,j) bit for bit with C0 + A B computed
 * directly from the generators (without the pool), and A(i,j), B(i,j) --
 * read-only inputs that went to swap and came back -- with their
 * generators.
 *
 * How the tasks use the pool (docs/scheduler.md, "oneTBB"):
 *  - a put task allocates a tile, fills it and puts it (pinpool::pool::put,
 *    an owner); its data is freed by the type's free function;
 *  - a gemm task pins its inputs with read guards and C(i,j) with a write
 *    guard (pinpool::pinned, pinpool::pinned_write), which unpin when they
 *    go out of scope, and prefetches the inputs of its successor;
 *  - a check task pins its three tiles through a pinpool::scope, which
 *    unpins all of them at end() or when it is destroyed;
 *  - a pin that fails throws pinpool::error, and the guards or scope taken
 *    so far unpin as it unwinds: all or none; PP_ENOMEM (every resident
 *    byte pinned, for now) runs the task's pins again after a yield;
 *  - each tile counts the tasks that still need it; the last one drops the
 *    tile's owner, so the entry is freed as soon as its last use is over;
 *  - every task ends with pp_quiescent: a worker holds nothing between tasks.
 *
 * What tasks share goes through the pool (tile data: a pin acquires, an
 * unpin releases) or through std::atomic (refs, counters), never through
 * memory that only oneTBB's own synchronisation orders: oneTBB is not
 * instrumented for ThreadSanitizer, which cannot see its task hand-overs.
 *
 * Exit status: 0 when every check passed (the result exact; every task
 * done without error; every tile put, no checksum or I/O error; the pool's peak resident bytes within the limit;
 * tiles written to swap and loaded back; every tile allocated freed once);
 * 1 when a check failed; 2 for a usage error; 3 when the run could not
 * start (the pool could not be made).
 */
#include <pinpool.hpp>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <getopt.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

enum { EXIT_CHECK = 1, EXIT_USAGE = 2, EXIT_RUN = 3 };
enum matrix { MAT_A, MAT_B, MAT_C };

constexpr double MIB = 1024.0 * 1024.0;
constexpr int ENOMEM_TRIES = 100000;   // pins retried while every byte is pinned
constexpr unsigned TILES_PER_THREAD = 4;   // tiles of limit a thread: 3 pinned, room to load

struct config {
    size_t n = 1024, b = 128;
    unsigned threads = 0;
    size_t mem_limit = 0;              // 0: a quarter of the working set
    std::string swap_dir;
    unsigned seed = 1;
};

/* ---------------------------------------------------------------------------
 * The matrices: every element a small integer, from a hash of its place
 * ------------------------------------------------------------------------- */

double element(unsigned seed, matrix m, size_t r, size_t c)
{
    uint64_t x = (uint64_t)r * 0x9E3779B97F4A7C15ull ^ (uint64_t)c * 0xC2B2AE3D27D4EB4Full ^
                 ((uint64_t)seed << 40 | (uint64_t)m << 32);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (double)((int)(x % 17u) - 8);   // -8..8: every sum of products exact
}

/* The tile (i,j) of matrix m, as generated (C: its initial value C0). */
void generate_tile(const config &cfg, matrix m, size_t i, size_t j, double *t)
{
    for (size_t r = 0; r < cfg.b; r++)
        for (size_t c = 0; c < cfg.b; c++)
            t[r * cfg.b + c] = element(cfg.seed, m, i * cfg.b + r, j * cfg.b + c);
}

/* c += a b, for B x B row-major tiles. */
void gemm_kernel(size_t b, const double *a, const double *bt, double *c)
{
    for (size_t r = 0; r < b; r++)
        for (size_t k = 0; k < b; k++) {
            double x = a[r * b + k];
            const double *brow = bt + k * b;
            double *crow = c + r * b;
            for (size_t col = 0; col < b; col++)
                crow[col] += x * brow[col];
        }
}

/* ---------------------------------------------------------------------------
 * The tiles' type: data freed by its free function, swapped by save/load
 * ------------------------------------------------------------------------- */

struct tile_heap {
    std::atomic<uint64_t> allocs{0}, frees{0};
};

void *tile_alloc(size_t bytes)
{
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}

void tile_free(void *data, size_t, void *ctx)
{
    std::free(data);
    static_cast<tile_heap *>(ctx)->frees.fetch_add(1, std::memory_order_relaxed);
}

int tile_save(const void *data, size_t size, pp_writer_t *w, void *)
{
    return pp_write(w, data, size) != 0;   // PP_EAGAIN: a pin won, stop
}

int tile_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    void *p = tile_alloc(size);
    if (p == nullptr)
        return 1;
    if (pp_read(r, p, size) != 0) {
        std::free(p);
        return 1;
    }
    static_cast<tile_heap *>(ctx)->allocs.fetch_add(1, std::memory_order_relaxed);
    *data = p;
    return 0;
}

/* ---------------------------------------------------------------------------
 * The run: what the tasks share
 * ------------------------------------------------------------------------- */

struct tile_slot {
    // Published by the put task (release), read by every user (acquire):
    // the hand-over TSan can see, whatever thread oneTBB runs a task on.
    std::atomic<pp_ref_t> ref{PP_REF_NONE};
    // Tasks that still have to pin the tile; the last one drops the owner.
    std::atomic<unsigned> uses{0};
    // Written by the put task, then by the last user only (after it read
    // ref), then destroyed by main after every task is counted done.
    pinpool::owner owner;
};

/* Its plain fields are written by main before the graph starts, and only
 * read by the tasks: oneTBB makes its worker threads at the first spawn,
 * after them, and TSan sees thread creation.  (A graph run on workers that
 * already exist would publish such fields through an atomic too.) */
struct run_state {
    const config &cfg;
    pinpool::pool &pool;
    const pp_type_t &type;
    tile_heap &heap;
    size_t nt, tile_elems, tile_bytes;
    std::unique_ptr<tile_slot[]> slots;
    std::atomic<uint64_t> tasks_done{0}, checked{0}, wrong{0}, enomem_retries{0}, errors{0};
    std::mutex error_mutex;
    std::string first_error;

    run_state(const config &c, pinpool::pool &p, const pp_type_t &t, tile_heap &h)
        : cfg(c), pool(p), type(t), heap(h), nt(c.n / c.b), tile_elems(c.b * c.b),
          tile_bytes(c.b * c.b * sizeof(double)), slots(new tile_slot[3 * nt * nt])
    {
        for (size_t s = 0; s < 3 * nt * nt; s++)
            slots[s].uses.store((unsigned)nt + 1, std::memory_order_relaxed);
    }
    tile_slot &slot(matrix m, size_t i, size_t j) { return slots[((size_t)m * nt + i) * nt + j]; }
    pp_ref_t ref(matrix m, size_t i, size_t j)
    {
        return slot(m, i, j).ref.load(std::memory_order_acquire);
    }
    void fail(const char *task, const std::string &what)
    {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (errors.fetch_add(1) == 0)
            first_error = std::string(task) + ": " + what;
    }
};

/* Runs body (which pins) again while the pool has no room (PP_ENOMEM: every
 * resident byte pinned, transient while other tasks hold the pins); any
 * other error fails the task.  Pins taken by a failed attempt were dropped
 * by their guards or scope as the exception left it. */
template <class F> void attempt(run_state &st, const char *task, F &&body)
{
    for (int tries = 1;; tries++) {
        try {
            body();
            return;
        } catch (const pinpool::error &e) {
            if (e.code() != PP_ENOMEM || tries >= ENOMEM_TRIES) {
                st.fail(task, e.what());
                return;
            }
        } catch (const std::exception &e) {
            st.fail(task, e.what());
            return;
        }
        st.enomem_retries.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::yield();
    }
}

/* One task is done with tile (m,i,j): the last one drops its owner (the
 * entry is freed once its last pin is gone).  acq_rel: the last user sees
 * every other user's accesses end before it touches the owner. */
void done_with(run_state &st, matrix m, size_t i, size_t j)
{
    tile_slot &s = st.slot(m, i, j);
    if (s.uses.fetch_sub(1, std::memory_order_acq_rel) == 1)
        s.owner = pinpool::owner();
}

/* The end of every task: the worker holds no pin now, and pp_quiescent
 * ends its epoch section (entered by pp_stat, under count()), so a worker
 * that idles or steals next never holds the reclaimers back. */
void task_over(run_state &st)
{
    pp_quiescent(st.pool.get());
    st.tasks_done.fetch_add(1);
}

/* ---------------------------------------------------------------------------
 * The tasks
 * ------------------------------------------------------------------------- */

void put_task(run_state &st, matrix m, size_t i, size_t j)
{
    tile_slot &s = st.slot(m, i, j);
    attempt(st, "put", [&] {
        double *t = static_cast<double *>(tile_alloc(st.tile_bytes));
        if (t == nullptr)
            throw pinpool::error(PP_ENOMEM, "aligned_alloc");
        generate_tile(st.cfg, m, i, j, t);
        try {
            s.owner = st.pool.put(t, st.tile_bytes, &st.type);
        } catch (...) {
            std::free(t);                  // on failure the caller still owns it
            throw;
        }
        st.heap.allocs.fetch_add(1, std::memory_order_relaxed);
        s.ref.store(s.owner.ref(), std::memory_order_release);
    });
    task_over(st);
}

/* C(i,j) += A(i,k) B(k,j): the inputs under read guards, the output under a
 * write guard (it is dirty from then on: its next eviction writes it). */
void gemm_task(run_state &st, size_t i, size_t j, size_t k)
{
    pp_ref_t ra = st.ref(MAT_A, i, k), rb = st.ref(MAT_B, k, j), rc = st.ref(MAT_C, i, j);
    attempt(st, "gemm", [&] {
        pinpool::pinned<double> a = st.pool.pin<double>(ra);
        pinpool::pinned<double> b = st.pool.pin<double>(rb);
        pinpool::pinned_write<double> c = st.pool.pin_write<double>(rc);
        if (c.count() != st.tile_elems)
            throw std::runtime_error("C tile of the wrong size");
        // The successor in this chain, gemm(i,j,k+1), needs A(i,k+1) and
        // B(k+1,j): start loading them while this kernel runs.
        if (k + 1 < st.nt) {
            pp_ref_t next[2] = { st.ref(MAT_A, i, k + 1), st.ref(MAT_B, k + 1, j) };
            for (pp_ref_t r : next)
                if (r != PP_REF_NONE)
                    (void)pp_prefetch(st.pool.get(), r);   // advice only
        }
#if PINPOOL_TBB_SEED_SKIP_GEMM
        if (i + j + k == 0)                // seeded bug: one product skipped
            return;
#endif
        gemm_kernel(st.cfg.b, a.data(), b.data(), c.data());
        if (int err = c.unpin())           // publishes the writes to the next pinner
            throw pinpool::error(err, "pp_unpin");
    });
    done_with(st, MAT_A, i, k);
    done_with(st, MAT_B, k, j);
    done_with(st, MAT_C, i, j);
    task_over(st);
}

/* Elements of tile t of matrix m (A or B) that differ from the generators. */
uint64_t compare_input(const config &cfg, matrix m, size_t i, size_t j, const double *t)
{
    uint64_t bad = 0;
    for (size_t r = 0; r < cfg.b; r++)
        for (size_t c = 0; c < cfg.b; c++)
            bad += t[r * cfg.b + c] != element(cfg.seed, m, i * cfg.b + r, j * cfg.b + c);
    return bad;
}

/* Elements of tile (i,j) of C that differ from C0 + A B computed directly
 * from the generators, as dot products over the whole row and column (in
 * blocks, so that only three tiles of memory are needed). */
uint64_t compare_product(const config &cfg, size_t i, size_t j, const double *c)
{
    size_t b = cfg.b;
    std::vector<double> want(b * b), arow(b * b), bcol(b * b);
    generate_tile(cfg, MAT_C, i, j, want.data());
    for (size_t k = 0; k < cfg.n / b; k++) {
        generate_tile(cfg, MAT_A, i, k, arow.data());
        generate_tile(cfg, MAT_B, k, j, bcol.data());
        for (size_t r = 0; r < b; r++)
            for (size_t col = 0; col < b; col++) {
                double dot = 0;
                for (size_t x = 0; x < b; x++)
                    dot += arow[r * b + x] * bcol[x * b + col];
                want[r * b + col] += dot;
            }
    }
    uint64_t bad = 0;
    for (size_t e = 0; e < b * b; e++)
        bad += c[e] != want[e];
    return bad;
}

/* Checks C(i,j), A(i,j) and B(i,j), all three pinned through one scope. */
void check_task(run_state &st, size_t i, size_t j)
{
    pp_ref_t ra = st.ref(MAT_A, i, j), rb = st.ref(MAT_B, i, j), rc = st.ref(MAT_C, i, j);
    attempt(st, "check", [&] {
        pinpool::scope s(st.pool);
        const double *a = s.pin<double>(ra);
        const double *b = s.pin<double>(rb);
        const double *c = s.pin<double>(rc);
        if (s.count() != 3)
            throw std::runtime_error("the scope does not hold the three pins");
        uint64_t bad = compare_input(st.cfg, MAT_A, i, j, a) +
                       compare_input(st.cfg, MAT_B, i, j, b) + compare_product(st.cfg, i, j, c);
        if (int err = s.end())             // unpins all three
            throw pinpool::error(err, "pp_scope_end");
        st.wrong.fetch_add(bad, std::memory_order_relaxed);
        st.checked.fetch_add(3 * st.tile_elems, std::memory_order_relaxed);
    });
    done_with(st, MAT_A, i, j);
    done_with(st, MAT_B, i, j);
    done_with(st, MAT_C, i, j);
    task_over(st);
}

/* ---------------------------------------------------------------------------
 * The graph
 * ------------------------------------------------------------------------- */

using node = tbb::flow::continue_node<tbb::flow::continue_msg>;
using msg = tbb::flow::continue_msg;

struct task_graph {
    tbb::flow::graph g;
    tbb::flow::broadcast_node<msg> start{g};
    std::vector<std::unique_ptr<node>> put, gemm, check;
    size_t edges = 0;

    task_graph(run_state &st);
    size_t tasks() const { return put.size() + gemm.size() + check.size(); }
    void edge(tbb::flow::sender<msg> &from, node &to)
    {
        tbb::flow::make_edge(from, to);
        edges++;
    }
};

task_graph::task_graph(run_state &st)
{
    size_t nt = st.nt;
    for (unsigned m = MAT_A; m <= MAT_C; m++)
        for (size_t i = 0; i < nt; i++)
            for (size_t j = 0; j < nt; j++) {
                put.emplace_back(new node(g, [&st, m, i, j](const msg &) {
                    put_task(st, (matrix)m, i, j);
                }));
                edge(start, *put.back());
            }
    auto put_of = [&](matrix m, size_t i, size_t j) -> node & {
        return *put[((size_t)m * nt + i) * nt + j];
    };
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < nt; j++)
            for (size_t k = 0; k < nt; k++) {
                gemm.emplace_back(new node(g, [&st, i, j, k](const msg &) {
                    gemm_task(st, i, j, k);
                }));
                node &n = *gemm.back();
                edge(put_of(MAT_A, i, k), n);
                edge(put_of(MAT_B, k, j), n);
                edge(k == 0 ? put_of(MAT_C, i, j) : *gemm[gemm.size() - 2], n);
            }
    for (size_t i = 0; i < nt; i++)
        for (size_t j = 0; j < nt; j++) {
            check.emplace_back(new node(g, [&st, i, j](const msg &) { check_task(st, i, j); }));
            edge(*gemm[(i * nt + j) * nt + nt - 1], *check.back());
        }
}

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

void usage(FILE *f)
{
    std::fprintf(f,
        "usage: pinpool-tbb [options]\n"
        "  -n, --size N          matrix order (default 1024; a multiple of the tile)\n"
        "  -b, --tile B          tile order (default 128)\n"
        "  -t, --threads N       oneTBB threads (default: oneTBB's default concurrency)\n"
        "  -m, --mem-limit SIZE  bytes the pool may hold in memory, with a K, M or G\n"
        "                        suffix (default: a quarter of the three matrices)\n"
        "      --swap-dir DIR    where the private swap directory is made\n"
        "                        (default: $TMPDIR, else /tmp)\n"
        "      --seed S          seed of the matrices (default 1)\n");
}

bool parse_size(const char *s, size_t *out)
{
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return false;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return false;
    *out = (size_t)v << shift;
    return true;
}

/* 0, or the exit status of a usage error (already reported). */
int parse_options(int argc, char **argv, config *cfg)
{
    enum { O_SWAP_DIR = 256, O_SEED };
    static const struct option longopts[] = {
        { "size", required_argument, nullptr, 'n' },
        { "tile", required_argument, nullptr, 'b' },
        { "threads", required_argument, nullptr, 't' },
        { "mem-limit", required_argument, nullptr, 'm' },
        { "swap-dir", required_argument, nullptr, O_SWAP_DIR },
        { "seed", required_argument, nullptr, O_SEED },
        { "help", no_argument, nullptr, 'h' },
        { nullptr, 0, nullptr, 0 },
    };
    int c;
    size_t v = 0;
    while ((c = getopt_long(argc, argv, "n:b:t:m:h", longopts, nullptr)) != -1) {
        bool ok = true;
        switch (c) {
        case 'n': ok = parse_size(optarg, &cfg->n); break;
        case 'b': ok = parse_size(optarg, &cfg->b); break;
        case 't': ok = parse_size(optarg, &v) && v > 0 && v <= 4096; cfg->threads = (unsigned)v; break;
        case 'm': ok = parse_size(optarg, &cfg->mem_limit) && cfg->mem_limit > 0; break;
        case O_SWAP_DIR: cfg->swap_dir = optarg; break;
        case O_SEED: ok = parse_size(optarg, &v) && v <= UINT32_MAX; cfg->seed = (unsigned)v; break;
        case 'h': usage(stdout); std::exit(0);
        default: usage(stderr); return EXIT_USAGE;
        }
        if (!ok) {
            std::fprintf(stderr, "pinpool-tbb: bad value for -%c: %s\n", c < 256 ? c : '-', optarg);
            return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (cfg->b == 0 || cfg->n == 0 || cfg->n % cfg->b != 0 || cfg->n / cfg->b > 256) {
        std::fprintf(stderr, "pinpool-tbb: the order (-n %zu) must be a multiple of the tile "
                             "(-b %zu), with at most 256 tiles a side\n", cfg->n, cfg->b);
        return EXIT_USAGE;
    }
    if (cfg->threads == 0)
        cfg->threads = (unsigned)tbb::info::default_concurrency();
    if (cfg->swap_dir.empty()) {
        const char *tmp = std::getenv("TMPDIR");
        cfg->swap_dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    size_t tile = cfg->b * cfg->b * sizeof(double), total = 3 * (cfg->n / cfg->b) * (cfg->n / cfg->b) * tile;
    if (cfg->mem_limit == 0)
        cfg->mem_limit = total / 4;
    size_t least = (size_t)cfg->threads * TILES_PER_THREAD * tile;
    if (cfg->mem_limit < least) {
        std::fprintf(stderr, "pinpool-tbb: memory limit of %.2f MiB is too small: %u threads pin "
                             "up to 3 tiles of %.2f MiB each at once; give at least %.2f MiB "
                             "(%u tiles a thread)\n", cfg->mem_limit / MIB, cfg->threads,
                     tile / MIB, least / MIB, TILES_PER_THREAD);
        return EXIT_USAGE;
    }
    if (cfg->mem_limit >= total) {
        std::fprintf(stderr, "pinpool-tbb: memory limit of %.2f MiB holds the whole working set "
                             "(%.2f MiB): nothing would be swapped\n",
                     cfg->mem_limit / MIB, total / MIB);
        return EXIT_USAGE;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * The figures and the verdict
 * ------------------------------------------------------------------------- */

/* Prints one check's line; returns 1 if it failed. */
int verdict(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int verdict(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::printf("pinpool-tbb: ");
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf(": %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/* Prints the run's figures and checks them; returns the checks failed. */
int report(const config &cfg, run_state &st, const task_graph &tg, const pp_stats_t &ps,
           double seconds)
{
    const pp_node_stats_t &t = ps.total;
    size_t tiles = 3 * st.nt * st.nt;
    uint64_t done = st.tasks_done.load(std::memory_order_acquire);
    int failed = 0;
    std::printf("pinpool-tbb: time %.3f s for the graph (puts, products, checks), "
                "%" PRIu64 " tasks retried for room\n", seconds, st.enomem_retries.load());
    failed += verdict(done == tg.tasks() && st.errors.load() == 0,
                      "%" PRIu64 " of %zu tasks done, %" PRIu64 " failed%s%s", done, tg.tasks(),
                      st.errors.load(), st.first_error.empty() ? "" : ", first: ",
                      st.first_error.c_str());
    failed += verdict(st.wrong.load() == 0 && st.checked.load() == 3 * cfg.n * cfg.n,
                      "C = C0 + A B, A and B compared exactly with a direct computation: "
                      "%" PRIu64 " of %zu elements checked, %" PRIu64 " wrong",
                      st.checked.load(), 3 * cfg.n * cfg.n, st.wrong.load());
    failed += verdict(ps.resident_peak <= cfg.mem_limit,
                      "peak resident %.2f MiB of the %.2f MiB limit (%.0f%%; working set "
                      "%.2f MiB, %zu tiles)", ps.resident_peak / MIB, cfg.mem_limit / MIB,
                      100.0 * (double)ps.resident_peak / (double)cfg.mem_limit,
                      (double)(tiles * st.tile_bytes) / MIB, tiles);
    failed += verdict(t.evictions_written > 0 && t.swap_bytes_written > 0,
                      "swapped out %.2f MiB (%" PRIu64 " tiles written, %" PRIu64
                      " dropped clean, %" PRIu64 " evictions abandoned to a pin)",
                      t.swap_bytes_written / MIB, t.evictions_written, t.evictions_clean,
                      t.evictions_abandoned);
    failed += verdict(t.loads > 0 && t.swap_bytes_read > 0,
                      "swapped in %.2f MiB (%" PRIu64 " loads, %" PRIu64
                      " pins waited for another's load)",
                      t.swap_bytes_read / MIB, t.loads, t.load_waits);
    failed += verdict(t.puts == tiles && t.checksum_failures == 0 && t.io_errors == 0,
                      "%" PRIu64 " tiles put, %" PRIu64 " checksum failures, %" PRIu64
                      " I/O errors", t.puts, t.checksum_failures, t.io_errors);
    return failed;
}

/* Builds the graph, runs it, prints the figures; returns the checks failed. */
int run(const config &cfg, pinpool::pool &pool, const pp_type_t &type, tile_heap &heap)
{
    run_state st(cfg, pool, type, heap);
    task_graph tg(st);
    std::printf("pinpool-tbb: flow graph of %zu tasks (%zu put, %zu gemm, %zu check), %zu edges, "
                "on %u oneTBB threads\n",
                tg.tasks(), tg.put.size(), tg.gemm.size(), tg.check.size(), tg.edges, cfg.threads);
    std::fflush(stdout);
    auto t0 = std::chrono::steady_clock::now();
    tg.start.try_put(msg());
    tg.g.wait_for_all();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Every tile's last user has dropped its owner: wait for the frees, so
    // that the figures below are final.
    int rc = pp_pool_drain(pool.get(), 60000);
    pp_stats_t ps = PP_STATS_INIT;
    if (rc == 0)
        rc = pp_pool_stats(pool.get(), &ps);
    if (rc != 0) {
        std::printf("pinpool-tbb: %s: FAILED\n", pinpool::error(rc, "pp_pool_drain/stats").what());
        return 1;
    }
    return report(cfg, st, tg, ps, seconds);
}

} // namespace

int main(int argc, char **argv)
{
    config cfg;
    if (int rc = parse_options(argc, argv, &cfg))
        return rc;
    size_t nt = cfg.n / cfg.b, tile = cfg.b * cfg.b * sizeof(double);
    std::printf("pinpool-tbb: C += A B, order %zu, %zux%zu tiles of %.2f MiB, %zux%zu tiles a "
                "matrix, %zu tiles in all (%.2f MiB)\n",
                cfg.n, cfg.b, cfg.b, tile / MIB, nt, nt, 3 * nt * nt, 3 * nt * nt * tile / MIB);
    std::printf("pinpool-tbb: memory limit %.2f MiB (%.0f%% of the working set), swap under %s\n",
                cfg.mem_limit / MIB, 100.0 * (double)cfg.mem_limit / (double)(3 * nt * nt * tile),
                cfg.swap_dir.c_str());

    tbb::global_control threads(tbb::global_control::max_allowed_parallelism, cfg.threads);
    tile_heap heap;
    const pp_type_t type = { "tile", tile_free, tile_save, tile_load, &heap, 0u };
    int failed = 0;
    try {
        // The pool outlives the run's owners (destroyed in run()) and is
        // destroyed here, which frees anything still owned.
        pinpool::pool pool(pinpool::options().mem_limit(cfg.mem_limit).swap_dir(cfg.swap_dir.c_str()));
        failed = run(cfg, pool, type, heap);
    } catch (const pinpool::error &e) {
        std::fprintf(stderr, "pinpool-tbb: %s\n", e.what());
        return EXIT_RUN;
    }
    uint64_t allocs = heap.allocs.load(), frees = heap.frees.load();
    failed += verdict(allocs == frees, "%" PRIu64 " tiles allocated (puts and loads), %" PRIu64
                      " freed by the type's free function", allocs, frees);
    if (failed != 0) {
        std::printf("pinpool-tbb: %d check%s FAILED\n", failed, failed > 1 ? "s" : "");
        return EXIT_CHECK;
    }
    std::printf("pinpool-tbb: all checks passed\n");
    return 0;
}
