// test_pool.cpp -- pinpool.hpp: error, options, pool and owner, and the
// lifetime rule (guards that outlive their pool object).
#include "harness.hpp"

#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

using harness::bytes;
using harness::info_of;
using harness::one_report_with;
using harness::test_options;

static_assert(!std::is_copy_constructible_v<pinpool::pool>, "a pool is move-only");
static_assert(std::is_nothrow_move_constructible_v<pinpool::pool>);
static_assert(std::is_nothrow_move_assignable_v<pinpool::owner>);
static_assert(std::is_copy_constructible_v<pinpool::owner>, "with exceptions, owners copy");
static_assert(std::is_base_of_v<std::exception, pinpool::error>);

// ---- error ----------------------------------------------------------------

TEST_CASE(error_carries_code_name_and_message)
{
    pinpool::error e(PP_ESTALE, "pp_pin");
    CHECK(e.code() == PP_ESTALE);
    CHECK(std::string(e.name()) == "PP_ESTALE");
    CHECK(std::string(e.message()) == pp_strerror(PP_ESTALE));
    CHECK(std::string(e.what()) == "pp_pin: PP_ESTALE: stale, dead or never valid ref");
    pinpool::error copy = e;
    CHECK(copy.code() == PP_ESTALE && std::string(copy.what()) == e.what());
    const std::exception &base = e;
    CHECK(std::string(base.what()) == e.what());
    // An unknown code says so rather than naming a wrong one.
    CHECK(std::string(pinpool::error(-999, "x").name()) == "PP_E?");
}

TEST_CASE(stale_ref_throws_estale_everywhere)
{
    pinpool::pool pool(test_options());
    pinpool::owner o = pool.put(bytes(16, 'a'), 16);
    pp_ref_t ref = o.ref();
    CHECK_RC(o.reset(), 0);   // dead: every later pin is PP_ESTALE
    bool thrown = false;
    try {
        pinpool::pinned<char> g = pool.pin<char>(ref);
    } catch (const pinpool::error &e) {
        thrown = true;
        CHECK(e.code() == PP_ESTALE);
        CHECK(std::string(e.name()) == "PP_ESTALE");
        CHECK(std::string(e.what()) == "pp_pin: PP_ESTALE: stale, dead or never valid ref");
    }
    CHECK(thrown);
    CHECK_THROWS(PP_ESTALE, pool.pin_write<char>(ref));
    CHECK_THROWS(PP_ESTALE, pinpool::pinned<void>(pool.get(), ref));
    CHECK_THROWS(PP_ESTALE, pool.pin_many(&ref, 1));
    pinpool::scope s(pool);
    CHECK_THROWS(PP_ESTALE, s.pin<char>(ref));
    CHECK(s.count() == 0);
    // A ref that never named an entry.
    CHECK_THROWS(PP_ESTALE, pool.pin<char>((pp_ref_t)12345));
}

// ---- options --------------------------------------------------------------

// Field by field (memcmp would compare the padding too).
static bool same_options(const pp_options_t &a, const pp_options_t &b)
{
    return a.mem_limit == b.mem_limit && a.swap_dir == b.swap_dir &&
           a.swap_limit == b.swap_limit && a.topology == b.topology && a.flags == b.flags &&
           a.report == b.report && a.report_ctx == b.report_ctx &&
           a.reclaim_backlog == b.reclaim_backlog;
}

TEST_CASE(options_start_from_the_defaults_and_set_every_field)
{
    const pp_options_t init = PP_OPTIONS_INIT;
    pinpool::options o;
    CHECK(same_options(o.c(), init));
    int ctx = 0;
    o.mem_limit(1u << 20)
        .swap_dir("/tmp")
        .swap_limit(1u << 30)
        .topology("pack:1 numa:1 core:1 pu:1")
        .flags(PP_TRACK_PINS | PP_SWAP_COMPRESS)
        .report(harness::pool_report, &ctx)
        .reclaim_backlog(4096);
    const pp_options_t &c = o.c();
    CHECK(c.mem_limit == 1u << 20);
    CHECK(std::strcmp(c.swap_dir, "/tmp") == 0);
    CHECK(c.swap_limit == 1u << 30);
    CHECK(std::strcmp(c.topology, "pack:1 numa:1 core:1 pu:1") == 0);
    CHECK(c.flags == (PP_TRACK_PINS | PP_SWAP_COMPRESS));
    CHECK(c.report == harness::pool_report && c.report_ctx == &ctx);
    CHECK(c.reclaim_backlog == 4096);
    pinpool::options from_c(c);
    CHECK(same_options(from_c.c(), c));
}

TEST_CASE(options_reach_the_pool)
{
    const char *tmp = std::getenv("TMPDIR");
    pinpool::options o;
    o.topology("pack:2 numa:2 core:2 pu:1")
        .mem_limit(8u << 20)
        .swap_dir(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp")
        .swap_limit(64u << 20)
        .reclaim_backlog(1u << 20)
        .flags(PP_TRACK_PINS)
        .report(harness::pool_report);
    pinpool::pool pool(o);
    pp_stats_t st = PP_STATS_INIT;
    REQUIRE(CHECK_RC(pool.stats(st), 0));
    CHECK(st.nodes == 4 && st.topology_is_this_system == 0);
    pp_node_stats_t ns = PP_NODE_STATS_INIT;
    CHECK_RC(pool.node_stats(3, ns), 0);
    CHECK(ns.reclaimer_tid > 0 && ns.size == sizeof ns);
    CHECK_RC(pool.node_stats(4, ns), PP_EINVAL);
    CHECK(st.mem_limit == 8u << 20 && st.swap == 1 && st.swap_limit == 64u << 20);
    CHECK(st.reclaim_backlog == 1u << 20);
    // PP_TRACK_PINS and the report hook: a thread that leaves with a pin
    // held is told so, through the hook.
    pinpool::owner e = pool.put(bytes(64, 'x'), 64);
    pinpool::pinned<char> g = pool.pin<char>(e.ref());
    int before = harness::pool_report_count();
    CHECK_RC(pool.thread_exit(), PP_EBUSY);
    CHECK(harness::pool_report_count() > before);
}

TEST_CASE(bad_options_throw_and_create_returns_the_code)
{
    pinpool::options no_limit;
    no_limit.swap_dir("/tmp");   // swap needs a memory limit
    CHECK_THROWS(PP_EINVAL, pinpool::pool p(no_limit));
    pinpool::options bad_flags;
    bad_flags.flags(0x8000u);
    CHECK_THROWS(PP_EINVAL, pinpool::pool p(bad_flags));

    pinpool::pool out(nullptr);
    CHECK(!out && out.get() == nullptr);
    CHECK_RC(pinpool::pool::create(no_limit, out), PP_EINVAL);
    CHECK(!out);
    REQUIRE(CHECK_RC(pinpool::pool::create(test_options(), out), 0));
    pp_pool_t *first = out.get();
    CHECK(first != nullptr);
    CHECK_RC(pinpool::pool::create(bad_flags, out), PP_EINVAL);
    CHECK(out.get() == first);   // unchanged on failure
}

// ---- pool -----------------------------------------------------------------

TEST_CASE(moved_from_pool_is_empty_and_safe)
{
    pinpool::pool a;   // this machine's topology, no limit
    REQUIRE(a);
    pp_pool_t *raw = a.get();
    pinpool::pool b(std::move(a));
    CHECK(b.get() == raw && !a && a.get() == nullptr);
    // Calls on the empty pool pass NULL on: the C call's PP_EINVAL.
    char *keep = bytes(8, 0);
    CHECK_THROWS(PP_EINVAL, a.put(keep, 8));
    pinpool::owner o;
    CHECK_RC(a.try_put(keep, 8, nullptr, 0, o), PP_EINVAL);
    std::free(keep);   // a failed put leaves the data with the caller
    CHECK(!o);
    CHECK_THROWS(PP_EINVAL, a.pin<int>(1));
    pinpool::pinned<int> g;
    CHECK_RC(a.try_pin(1, 0, g), PP_EINVAL);
    CHECK_RC(a.drain(0), PP_EINVAL);
    pp_stats_t st = PP_STATS_INIT;
    CHECK_RC(a.stats(st), PP_EINVAL);
    pp_node_stats_t ns = PP_NODE_STATS_INIT;
    CHECK_RC(a.node_stats(0, ns), PP_EINVAL);
    CHECK_RC(a.destroy(), 0);   // nothing to destroy
    CHECK(a.detach() == nullptr);
    // Move assignment destroys what the target held (no pins: no report).
    pinpool::pool c(test_options());
    c = std::move(b);
    CHECK(c.get() == raw && !b);
    pinpool::owner e = c.put(bytes(8, 1), 8);
    CHECK(info_of(c.get(), e.ref()).owners == 1);
}

TEST_CASE(destroy_refuses_while_pinned_and_keeps_the_pool)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = pool.put(bytes(32, 'd'), 32);
    pinpool::pinned<char> g = pool.pin<char>(e.ref());
    int before = harness::pool_report_count();
    CHECK_RC(pool.destroy(), PP_EBUSY);
    CHECK(harness::pool_report_count() > before);   // the pool named the pinned entry
    REQUIRE(pool);                                   // still owned and usable
    CHECK(g.data()[31] == 'd');
    CHECK_RC(g.unpin(), 0);
    CHECK_RC(e.reset(), 0);
    CHECK_RC(pool.destroy(), 0);
    CHECK(!pool);
}

TEST_CASE(adopt_and_detach)
{
    pp_pool_t *raw = nullptr;
    REQUIRE(CHECK_RC(pp_pool_create(&test_options().c(), &raw), 0));
    pinpool::pool p(raw);
    CHECK(p.get() == raw);
    CHECK(p.detach() == raw);
    CHECK(!p);
    CHECK_RC(pp_pool_destroy(raw), 0);   // still alive: detach did not destroy it
}

// The pool object goes first while guards and a scope still hold pins:
// ~pool reports and leaves the C pool alive, and they all stay valid.
TEST_CASE(guards_outliving_their_pool_stay_valid)
{
    auto pool = std::make_unique<pinpool::pool>(test_options());
    pp_pool_t *raw = pool->get();
    pinpool::owner a = pool->put(bytes(16, 'a'), 16);
    pinpool::owner b = pool->put(bytes(16, 'b'), 16);
    pp_ref_t refs[2] = {a.ref(), b.ref()};
    pinpool::pinned<char> read = pool->pin<char>(refs[0]);
    pinpool::pinned_write<char> write = pool->pin_write<char>(refs[1]);
    pinpool::pinned_many<const char> many = pool->pin_many<const char>(refs, 2);
    pinpool::scope s(*pool);
    CHECK(s.pin<char>(refs[0])[0] == 'a');
    // Owners go before their pool (the rule): the entries die, pinned.
    CHECK_RC(a.reset(), 0);
    CHECK_RC(b.reset(), 0);
    pool.reset();
    CHECK(one_report_with({"~pool", "pp_pool_destroy", "PP_EBUSY", "left alive"}));
    CHECK(read.data()[15] == 'a' && many.data(0)[0] == 'a' && many.data(1)[0] == 'b');
    write.data()[0] = 'B';
    CHECK(many.data(1)[0] == 'B');
    pp_entry_info_t info = info_of(raw, refs[0]);
    CHECK(info.pins == 3 && (info.state & PP_STATE_DEAD) != 0);
    CHECK_RC(read.unpin(), 0);
    CHECK_RC(write.unpin(), 0);
    CHECK_RC(many.unpin(), 0);
    CHECK_RC(s.end(), 0);   // the last pins: both entries go to their reclaimer
    CHECK_RC(pp_stat(raw, refs[0], &info), PP_ESTALE);
    // Whoever kept the pointer may destroy the pool once the pins are gone.
    CHECK_RC(pp_pool_destroy(raw), 0);
}

TEST_CASE(put_and_try_put)
{
    pinpool::pool pool(test_options());
    harness::counted ct;
    pinpool::owner a = pool.put(bytes(100, 1), 100, &ct.type, PP_ON_NODE(0));
    REQUIRE(a);
    CHECK(a.pool() == pool.get());
    pp_entry_info_t info = info_of(pool.get(), a.ref());
    CHECK(info.owners == 1 && info.pins == 0 && info.size == 100);
    CHECK(info.type == &ct.type && info.node == 0);
    // Failure: the data stays with the caller, nothing else changes.
    CHECK_THROWS(PP_EINVAL, pool.put(nullptr, 8));
    char *mine = bytes(8, 2);
    CHECK_THROWS(PP_EINVAL, pool.put(mine, 8, nullptr, 0x40u));   // unknown flag
    pinpool::owner out = pool.put(bytes(8, 3), 8);
    pp_ref_t before = out.ref();
    CHECK_RC(pool.try_put(mine, 8, nullptr, 0x40u, out), PP_EINVAL);
    CHECK(out.ref() == before && info_of(pool.get(), before).owners == 1);
    // Success gives out the new owner and releases the one it held.
    REQUIRE(CHECK_RC(pool.try_put(mine, 8, nullptr, 0, out), 0));
    CHECK(out.ref() != before && info_of(pool.get(), out.ref()).owners == 1);
    pp_entry_info_t gone;
    CHECK_RC(pp_stat(pool.get(), before, &gone), PP_ESTALE);
    CHECK_RC(a.reset(), 0);
    CHECK_RC(pool.drain(10000), 0);
    CHECK(ct.frees == 1);
}

TEST_CASE(pool_forwards)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = pool.put(bytes(64, 7), 64);
    pp_entry_info_t info;
    CHECK_RC(pool.stat(e.ref(), info), 0);
    CHECK(info.size == 64 && info.owners == 1);
    CHECK_RC(pool.stat(PP_REF_NONE, info), PP_ESTALE);
    CHECK_RC(pool.prefetch(e.ref()), 0);
    CHECK_RC(pool.advise(e.ref(), PP_ADVISE_WONTNEED), 0);
    CHECK_RC(pool.advise(e.ref(), 99u), PP_EINVAL);
    pool.quiescent();
    CHECK_RC(pool.thread_exit(), 0);
    pp_stats_t st = PP_STATS_INIT;
    CHECK_RC(pool.stats(st), 0);
    CHECK(st.total.puts == 1);
    CHECK_RC(e.reset(), 0);
    CHECK_RC(pool.drain(10000), 0);
    CHECK_RC(pool.stats(st), 0);
    CHECK(st.total.frees == 1);
}

// ---- owner ----------------------------------------------------------------

TEST_CASE(owner_copies_retain)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 0), 8);
    pp_pool_t *p = pool.get();
    pp_ref_t r = a.ref();
    {
        pinpool::owner b(a);
        CHECK(b.ref() == r && b.pool() == p);
        CHECK(info_of(p, r).owners == 2);
        pinpool::owner c;
        c = b;
        CHECK(info_of(p, r).owners == 3);
        c = a;   // the same entry: retains the new, releases the old
        CHECK(info_of(p, r).owners == 3);
        pinpool::owner &alias = c;
        c = alias;   // self-assignment keeps the count
        CHECK(info_of(p, r).owners == 3);
    }
    CHECK(info_of(p, r).owners == 1);
    // Copies of an empty owner are empty and retain nothing.
    pinpool::owner none;
    pinpool::owner none2(none);
    CHECK(!none2 && none2.ref() == PP_REF_NONE);
}

TEST_CASE(owner_copies_on_threads)
{
    pinpool::pool pool(test_options());
    const pinpool::owner a = pool.put(bytes(8, 0), 8);
    auto work = [&a] {
        for (int i = 0; i < 2000; i++) {
            pinpool::owner c(a);   // const members and copies: any thread
            pinpool::owner d = std::move(c);
            (void)d;
        }
    };
    std::thread t1(work), t2(work);
    t1.join();
    t2.join();
    CHECK(info_of(pool.get(), a.ref()).owners == 1);
}

TEST_CASE(owner_moves_transfer)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 0), 8);
    pp_ref_t r = a.ref();
    pinpool::owner b(std::move(a));
    CHECK(b.ref() == r && info_of(pool.get(), r).owners == 1);
    CHECK(!a && a.ref() == PP_REF_NONE && a.pool() == nullptr);
    CHECK_RC(a.reset(), 0);
    CHECK(a.detach() == PP_REF_NONE);
    pinpool::owner c;
    CHECK_RC(a.try_copy(c), 0);   // a copy of nothing
    CHECK(!c);
    pinpool::owner d = pool.put(bytes(8, 1), 8);
    pp_ref_t rd = d.ref();
    d = std::move(b);   // releases d's entry, takes b's
    CHECK(d.ref() == r && !b);
    pp_entry_info_t gone;
    CHECK_RC(pp_stat(pool.get(), rd, &gone), PP_ESTALE);
    CHECK(info_of(pool.get(), r).owners == 1);
}

TEST_CASE(owner_detach_and_reset)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 0), 8);
    pp_ref_t r = a.detach();
    CHECK(!a && a.pool() == pool.get());   // pool() stays after detach
    CHECK(info_of(pool.get(), r).owners == 1);
    pinpool::owner back(pool.get(), r);    // adopt it again
    CHECK_RC(back.reset(), 0);
    CHECK(!back);
    CHECK_RC(back.reset(), 0);             // nothing left to release
    pp_entry_info_t gone;
    CHECK_RC(pp_stat(pool.get(), r, &gone), PP_ESTALE);
}

TEST_CASE(owner_last_release_frees_once)
{
    harness::counted ct;
    pinpool::pool pool(test_options());
    {
        pinpool::owner a = pool.put(bytes(8, 0), 8, &ct.type);
        pinpool::owner b = a;
        pinpool::pinned<char> g = pool.pin<char>(a.ref());
        CHECK_RC(a.reset(), 0);
        CHECK_RC(b.reset(), 0);   // dead now, but pinned: not freed
        CHECK_RC(pool.drain(10000), 0);
        CHECK(ct.frees == 0);
    }   // the last pin goes
    CHECK_RC(pool.drain(10000), 0);
    CHECK(ct.frees == 1);
}

TEST_CASE(owner_copy_of_a_dead_entry_throws_and_its_destructor_reports)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 0), 8);
    pp_ref_t r = a.ref();
    REQUIRE(CHECK_RC(pp_release(pool.get(), r), 0));   // behind a's back
    CHECK_THROWS(PP_ESTALE, pinpool::owner b(a));
    pinpool::owner c;
    CHECK_THROWS(PP_ESTALE, c = a);
    CHECK(!c && a.ref() == r);                         // both unchanged
    CHECK_RC(a.try_copy(c), PP_ESTALE);
    CHECK(!c);
    {
        pinpool::owner d(pool.get(), r);
        pinpool::owner moved(std::move(a));
    }   // both release a dead entry: two reports
    std::vector<std::string> lines = harness::take_reports();
    CHECK(lines.size() == 2);
    for (const std::string &l : lines)
        CHECK(l.find("~owner: pp_release(ref 0x") != std::string::npos &&
              l.find("PP_ESTALE") != std::string::npos);
}

TEST_CASE(owner_try_copy_retains)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 0), 8);
    pinpool::owner b = pool.put(bytes(8, 1), 8);
    pp_ref_t rb = b.ref();
    REQUIRE(CHECK_RC(a.try_copy(b), 0));   // b's own owner is released
    CHECK(b.ref() == a.ref() && info_of(pool.get(), a.ref()).owners == 2);
    pp_entry_info_t gone;
    CHECK_RC(pp_stat(pool.get(), rb, &gone), PP_ESTALE);
    CHECK_RC(a.try_copy(a), 0);            // into itself: still one owner there
    CHECK(info_of(pool.get(), a.ref()).owners == 2);
}

int main(int argc, char **argv) { return harness::run(argc, argv); }
