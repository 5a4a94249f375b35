// test_pins.cpp -- pinpool.hpp: pinned<T>, pinned_write<T> and
// pinned_many<T>.
#include "harness.hpp"

#include <numeric>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using harness::bytes;
using harness::info_of;
using harness::one_report_with;
using harness::test_options;

using pinpool::pinned;
using pinpool::pinned_many;
using pinpool::pinned_write;

static_assert(std::is_same_v<decltype(pinned<int>().data()), const int *>);
static_assert(std::is_same_v<decltype(pinned<void>().data()), const void *>);
static_assert(std::is_same_v<decltype(pinned_write<int>().data()), int *>);
static_assert(std::is_same_v<decltype(pinned_write<void>().data()), void *>);
static_assert(std::is_same_v<decltype(pinned_many<>().data(0)), const void *>);
static_assert(std::is_same_v<decltype(pinned_many<void>().data(0)), void *>);
static_assert(pinned_many<>::forced_flags == 0u && pinned_many<const int>::forced_flags == 0u);
static_assert(pinned_many<int>::forced_flags == PP_PIN_WRITE &&
              pinned_many<void>::forced_flags == PP_PIN_WRITE);
static_assert(std::is_same_v<decltype(pinned_many<const double>().data(0)), const double *>);
static_assert(!std::is_same_v<pinned<int>, pinned_write<int>>);
static_assert(!std::is_convertible_v<pinned_write<int>, pinned<int>>);
static_assert(!std::is_convertible_v<pinned<int>, pinned_write<int>>);
static_assert(!std::is_copy_constructible_v<pinned<int>>);
static_assert(!std::is_copy_assignable_v<pinned_write<int>>);
static_assert(!std::is_copy_constructible_v<pinned_many<>>);
static_assert(std::is_nothrow_move_constructible_v<pinned<int>>);
static_assert(std::is_nothrow_move_assignable_v<pinned_write<int>>);
static_assert(std::is_nothrow_move_constructible_v<pinned_many<>>);
static_assert(std::is_nothrow_destructible_v<pinned<int>>);

// An entry of n ints 0, 1, ..., n-1.
static pinpool::owner put_ints(pinpool::pool &pool, int n)
{
    int *p = static_cast<int *>(std::malloc(sizeof(int) * (size_t)n));
    if (p == nullptr)
        std::abort();
    std::iota(p, p + n, 0);
    return pool.put(p, sizeof(int) * (size_t)n);
}

static uint32_t pins_of(const pinpool::pool &pool, pp_ref_t ref)
{
    return info_of(pool.get(), ref).pins;
}

// ---- pinned ---------------------------------------------------------------

TEST_CASE(pinned_reads_the_data_and_unpins_at_the_end_of_scope)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = put_ints(pool, 16);
    {
        pinned<int> g = pool.pin<int>(e.ref());
        REQUIRE(g);
        CHECK(g.ref() == e.ref() && g.pool() == pool.get());
        CHECK(pins_of(pool, e.ref()) == 1);
        CHECK(g.size() == 64 && g.count() == 16);
        CHECK(std::accumulate(g.begin(), g.end(), 0) == 120);
        CHECK(g[5] == 5 && *g == 0);
        int n = 0;
        for (int v : g)
            CHECK(v == n++);
        CHECK(n == 16);
        pinned<int> nested(pool.get(), e.ref());   // pins nest
        CHECK(pins_of(pool, e.ref()) == 2 && nested.data() == g.data());
    }
    CHECK(pins_of(pool, e.ref()) == 0);
    // Raw bytes: count() is the size in bytes.
    pinned<void> raw = pool.pin(e.ref());
    CHECK(raw.count() == 64 && raw.size() == 64);
    CHECK(static_cast<const int *>(raw.data())[15] == 15);
}

TEST_CASE(a_struct_through_the_arrow)
{
    struct point {
        int x, y;
    };
    pinpool::pool pool(test_options());
    point *p = static_cast<point *>(std::malloc(sizeof(point)));
    REQUIRE(p != nullptr);
    p->x = 3;
    p->y = 4;
    pinpool::owner e = pool.put(p, sizeof *p);
    pinned<point> g = pool.pin<point>(e.ref());
    CHECK(g->x == 3 && g->y == 4 && g.count() == 1);
}

TEST_CASE(unpin_early_and_empty_guards)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = put_ints(pool, 4);
    pinned<int> g = pool.pin<int>(e.ref());
    CHECK_RC(g.unpin(), 0);
    CHECK(pins_of(pool, e.ref()) == 0);
    CHECK(!g && g.data() == nullptr && g.ref() == PP_REF_NONE && g.pool() == nullptr);
    CHECK_RC(g.unpin(), 0);   // an empty guard has nothing to drop
    CHECK(g.size() == 0 && g.count() == 0 && g.begin() == g.end());
    pinned_write<int> w;
    CHECK(!w && w.data() == nullptr && w.size() == 0);
    CHECK_RC(w.unpin(), 0);
}

TEST_CASE(moved_from_guards_are_empty)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4);
    pinpool::owner b = put_ints(pool, 8);
    pinned<int> g = pool.pin<int>(a.ref());
    CHECK(g.size() == 16);   // cached before the move: travels with the pin
    pinned<int> h(std::move(g));
    CHECK(!g && g.data() == nullptr && g.size() == 0 && g.pool() == nullptr);
    CHECK_RC(g.unpin(), 0);
    CHECK(h && h.ref() == a.ref() && h.size() == 16 && pins_of(pool, a.ref()) == 1);
    // Assignment drops the pin the target held.
    pinned<int> k = pool.pin<int>(b.ref());
    k = std::move(h);
    CHECK(pins_of(pool, b.ref()) == 0 && pins_of(pool, a.ref()) == 1);
    CHECK(k.ref() == a.ref() && k.size() == 16 && !h);
    pinned<int> &alias = k;
    k = std::move(alias);   // self-move keeps the pin
    CHECK(k && pins_of(pool, a.ref()) == 1);
    pinned_write<int> w = pool.pin_write<int>(b.ref());
    pinned_write<int> w2 = std::move(w);
    CHECK(!w && w2 && pins_of(pool, b.ref()) == 1);
}

TEST_CASE(a_pin_dropped_behind_the_guard_is_reported)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = put_ints(pool, 4);
    {
        pinned<int> g = pool.pin<int>(e.ref());
        REQUIRE(CHECK_RC(pp_unpin(pool.get(), e.ref()), 0));
    }
    CHECK(one_report_with({"~pinned: pp_unpin(ref 0x", "PP_ENOTPINNED"}));
    {
        pinned_write<int> w = pool.pin_write<int>(e.ref());
        REQUIRE(CHECK_RC(pp_unpin(pool.get(), e.ref()), 0));
    }
    CHECK(one_report_with({"~pinned_write: pp_unpin", "PP_ENOTPINNED"}));
    // unpin() returns the error instead, and the guard is empty after it.
    pinned<int> g = pool.pin<int>(e.ref());
    REQUIRE(CHECK_RC(pp_unpin(pool.get(), e.ref()), 0));
    CHECK_RC(g.unpin(), PP_ENOTPINNED);
    CHECK(!g);
}

TEST_CASE(try_pin_replaces_on_success_and_leaves_out_on_failure)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4);
    pinpool::owner b = put_ints(pool, 4);
    pinned<int> out;
    REQUIRE(CHECK_RC(pinned<int>::try_pin(pool.get(), a.ref(), 0, out), 0));
    CHECK(out.ref() == a.ref() && out.data()[3] == 3);
    CHECK_RC(pool.try_pin(b.ref(), 0, out), 0);   // drops a's pin
    CHECK(out.ref() == b.ref() && pins_of(pool, a.ref()) == 0);
    CHECK_RC(pool.try_pin(out.ref(), 0, out), 0);   // the same ref again
    CHECK(pins_of(pool, b.ref()) == 1);
    CHECK_RC(pool.try_pin(12345, 0, out), PP_ESTALE);
    CHECK_RC(pool.try_pin(a.ref(), 0x80u, out), PP_EINVAL);   // unknown flag
    CHECK(out.ref() == b.ref() && pins_of(pool, b.ref()) == 1);
    pinned_write<int> w;
    CHECK_RC(pool.try_pin_write(a.ref(), 0, w), 0);
    CHECK((info_of(pool.get(), a.ref()).state & PP_STATE_DIRTY) != 0);
    CHECK_RC(pinned_write<int>::try_pin(pool.get(), 12345, 0, w), PP_ESTALE);
    CHECK(w.ref() == a.ref());
}

TEST_CASE(write_guard_marks_the_entry_dirty)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = put_ints(pool, 8);
    CHECK((info_of(pool.get(), e.ref()).state & PP_STATE_DIRTY) == 0);
    {
        pinned<int> r = pool.pin<int>(e.ref());
        CHECK((info_of(pool.get(), e.ref()).state & PP_STATE_DIRTY) == 0);
    }
    {
        pinned_write<int> w = pool.pin_write<int>(e.ref());
        CHECK((info_of(pool.get(), e.ref()).state & PP_STATE_DIRTY) != 0);
        for (int &v : w)
            v *= 10;
        w[0] = -1;
    }
    CHECK((info_of(pool.get(), e.ref()).state & PP_STATE_DIRTY) != 0);
    pinned<int> r = pool.pin<int>(e.ref());
    CHECK(r[0] == -1 && r[7] == 70);
}

TEST_CASE(size_is_safe_from_two_threads)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = put_ints(pool, 256);
    const pinned<int> g = pool.pin<int>(e.ref());
    size_t seen[2] = {0, 0};
    std::thread t1([&] { seen[0] = g.size(); }), t2([&] { seen[1] = g.count(); });
    t1.join();
    t2.join();
    CHECK(seen[0] == 1024 && seen[1] == 256);
    CHECK(g.size() == 1024 && g.count() == 256);
}

TEST_CASE(a_guard_moves_to_another_thread)
{
    pinpool::pool pool(test_options());
    pinpool::owner e = put_ints(pool, 4);
    pinned_write<int> w = pool.pin_write<int>(e.ref());
    w[1] = 41;
    std::thread t([g = std::move(w)]() mutable {
        g[1]++;
        (void)g.unpin();   // dropped on this thread: pins are not tied to one
    });
    t.join();
    CHECK(!w && pins_of(pool, e.ref()) == 0);
    CHECK(pool.pin<int>(e.ref())[1] == 42);
}

// ---- pinned_many ----------------------------------------------------------

TEST_CASE(pinned_many_pins_all)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 8);
    pp_ref_t refs[3] = {a.ref(), b.ref(), a.ref()};   // a twice: pinned twice
    {
        pinned_many<const int> m = pool.pin_many<const int>(refs, 3);
        REQUIRE(m && m.size() == 3 && m.pool() == pool.get());
        CHECK(pins_of(pool, a.ref()) == 2 && pins_of(pool, b.ref()) == 1);
        CHECK(m.data(0)[3] == 3 && m.data(1)[7] == 7 && m.data(2) == m.data(0));
        CHECK(m.ref(1) == b.ref() && m.refs()[2] == a.ref());
        CHECK(m.data(3) == nullptr && m.ref(3) == PP_REF_NONE);
        refs[1] = PP_REF_NONE;   // the guard keeps its own copy
        CHECK(m.ref(1) == b.ref());
    }
    CHECK(pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 0);
    pinned_many<> none(pool.get(), refs, 0);   // n == 0 succeeds, holds nothing
    CHECK(!none && none.size() == 0);
    CHECK_RC(none.unpin(), 0);
}

TEST_CASE(pinned_many_is_all_or_none)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 4);
    pp_ref_t refs[3] = {a.ref(), b.ref(), 12345};
    CHECK_THROWS(PP_ESTALE, pinned_many<int> m(pool.get(), refs, 3, PP_PIN_WRITE));
    CHECK(pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 0);
    CHECK((info_of(pool.get(), a.ref()).state & PP_STATE_DIRTY) == 0);
    pinned_many<> out;
    REQUIRE(CHECK_RC(pool.try_pin_many(refs, 2, 0, out), 0));
    CHECK_RC(pool.try_pin_many(refs, 3, 0, out), PP_ESTALE);   // out unchanged
    CHECK(out.size() == 2 && pins_of(pool, a.ref()) == 1 && pins_of(pool, b.ref()) == 1);
    CHECK_RC(pinned_many<>::try_pin(pool.get(), nullptr, 2, 0, out), PP_EINVAL);
    CHECK(out.size() == 2);
    // Beyond the inline room, the same.
    pp_ref_t many[20];
    for (pp_ref_t &r : many)
        r = a.ref();
    many[19] = 12345;
    CHECK_RC(pool.try_pin_many(many, 20, 0, out), PP_ESTALE);
    CHECK(out.size() == 2 && pins_of(pool, a.ref()) == 1);
}

TEST_CASE(pinned_many_write_marks_every_entry_dirty)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 4);
    pp_ref_t refs[2] = {a.ref(), b.ref()};
    pinned_many<int> w = pool.pin_many<int>(refs, 2, PP_PIN_WRITE);
    w.data(0)[0] = 100;
    w.data(1)[0] = 200;
    CHECK((info_of(pool.get(), a.ref()).state & PP_STATE_DIRTY) != 0);
    CHECK((info_of(pool.get(), b.ref()).state & PP_STATE_DIRTY) != 0);
    CHECK_RC(w.unpin(), 0);
    CHECK(pool.pin<int>(b.ref())[0] == 200);
}

// Writable pointers come only with a write pin: pinned_many<int> marks its
// entries dirty without PP_PIN_WRITE in the flags, pinned_many<const int>
// leaves them clean.
TEST_CASE(pinned_many_of_writable_data_is_a_write_pin)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 4);
    pp_ref_t ra[1] = {a.ref()}, rb[1] = {b.ref()};
    {
        pinned_many<const int> r = pool.pin_many<const int>(rb, 1);
        CHECK((info_of(pool.get(), b.ref()).state & PP_STATE_DIRTY) == 0);
    }
    {
        pinned_many<int> w = pool.pin_many<int>(ra, 1);
        w.data(0)[0] = 7;
        CHECK((info_of(pool.get(), a.ref()).state & PP_STATE_DIRTY) != 0);
    }
    pinned_many<int> t;
    CHECK_RC(pinned_many<int>::try_pin(pool.get(), rb, 1, 0, t), 0);
    CHECK((info_of(pool.get(), b.ref()).state & PP_STATE_DIRTY) != 0);
    CHECK(pool.pin<int>(a.ref())[0] == 7);
}

TEST_CASE(pinned_many_moves_inline_and_heap)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 4);
    const size_t n[2] = {3, pinned_many<>::inline_refs + 12};
    for (size_t k : n) {
        std::vector<pp_ref_t> refs(k);
        for (size_t i = 0; i < k; i++)
            refs[i] = i % 2 ? b.ref() : a.ref();
        pinned_many<const int> m = pool.pin_many<const int>(refs.data(), k);
        pinned_many<const int> moved(std::move(m));
        CHECK(!m && m.size() == 0 && m.data(0) == nullptr && m.pool() == nullptr);
        CHECK_RC(m.unpin(), 0);
        REQUIRE(moved.size() == k);
        for (size_t i = 0; i < k; i++)
            CHECK(moved.ref(i) == refs[i] && moved.data(i)[2] == 2);
        CHECK(moved.refs() != refs.data());
        pinned_many<const int> target = pool.pin_many<const int>(refs.data(), 1);
        target = std::move(moved);   // drops target's own pin
        CHECK(target.size() == k && !moved);
        CHECK(pins_of(pool, a.ref()) == (k + 1) / 2 && pins_of(pool, b.ref()) == k / 2);
        CHECK_RC(target.unpin(), 0);
        CHECK(pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 0);
    }
}

TEST_CASE(pinned_many_drops_what_is_left_after_a_pin_went_behind_its_back)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 4);
    pp_ref_t refs[2] = {a.ref(), b.ref()};
    pinned_many<> m = pool.pin_many(refs, 2);
    REQUIRE(CHECK_RC(pp_unpin(pool.get(), a.ref()), 0));
    CHECK_RC(m.unpin(), PP_ENOTPINNED);
    CHECK(!m && pins_of(pool, b.ref()) == 0);   // b's pin dropped all the same
    {
        pinned_many<> g = pool.pin_many(refs, 2);
        REQUIRE(CHECK_RC(pp_unpin(pool.get(), b.ref()), 0));
    }
    CHECK(one_report_with({"~pinned_many: pp_unpin_many", "PP_ENOTPINNED"}));
    CHECK(pins_of(pool, a.ref()) == 0);
}

// The test hook of the C library (src/testing/testhooks.h, which is C only):
// while set, every allocation of the pool asks fail() first.
extern "C" {
typedef bool (*pp__alloc_fault_fn)(size_t size, void *ctx);
void pp__alloc_fault_hook(pp__alloc_fault_fn fail, void *ctx);
}

static thread_local bool t_no_memory = false;

static bool fail_on_this_thread(size_t, void *) { return t_no_memory; }

// Runs fn on a thread new to the pool, whose registration (its first call
// into the pool) cannot allocate: every call there fails with PP_ENOMEM.
template <class Fn>
static void on_a_thread_without_memory(Fn fn)
{
    pp__alloc_fault_hook(fail_on_this_thread, nullptr);
    std::thread th([&] {
        t_no_memory = true;
        fn();
        t_no_memory = false;
    });
    th.join();
    pp__alloc_fault_hook(nullptr, nullptr);
}

TEST_CASE(guards_keep_their_pins_when_an_unpin_fails_for_memory)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4), b = put_ints(pool, 4);
    pinned<int> g = pool.pin<int>(a.ref());
    pinned_write<int> w = pool.pin_write<int>(b.ref());
    pp_ref_t refs[2] = {a.ref(), b.ref()};
    pinned_many<> m = pool.pin_many(refs, 2);
    int rg = 0, rw = 0, rm = 0;
    on_a_thread_without_memory([&] {
        rg = g.unpin();
        rw = w.unpin();
        rm = m.unpin();
    });
    CHECK_RC(rg, PP_ENOMEM);
    CHECK_RC(rw, PP_ENOMEM);
    CHECK_RC(rm, PP_ENOMEM);
    CHECK(g && g.ref() == a.ref() && g.data() != nullptr);
    CHECK(w && w.ref() == b.ref() && w.data() != nullptr);
    CHECK(m && m.size() == 2 && m.ref(0) == a.ref() && m.ref(1) == b.ref());
    CHECK(pins_of(pool, a.ref()) == 2 && pins_of(pool, b.ref()) == 2);
    // The retry, on a thread that can register, drops them.
    CHECK_RC(g.unpin(), 0);
    CHECK_RC(w.unpin(), 0);
    CHECK_RC(m.unpin(), 0);
    CHECK(!g && !w && !m);
    CHECK(pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 0);
}

TEST_CASE(an_owner_keeps_its_entry_when_a_release_fails_for_memory)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = put_ints(pool, 4);
    pp_ref_t r = a.ref();
    int rc = 0;
    on_a_thread_without_memory([&] { rc = a.reset(); });
    CHECK_RC(rc, PP_ENOMEM);
    CHECK(a && a.ref() == r);
    CHECK(info_of(pool.get(), r).owners == 1);
    CHECK_RC(a.reset(), 0);
    CHECK(!a);
}

int main(int argc, char **argv) { return harness::run(argc, argv); }
