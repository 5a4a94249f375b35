// test_scope.cpp -- pinpool.hpp: scope, over pp_scope_t.
#include "harness.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using harness::bytes;
using harness::info_of;
using harness::one_report_with;
using harness::test_options;

static_assert(!std::is_copy_constructible_v<pinpool::scope>);
static_assert(!std::is_move_constructible_v<pinpool::scope>);
static_assert(!std::is_move_assignable_v<pinpool::scope>);
static_assert(std::is_same_v<decltype(std::declval<pinpool::scope &>().pin<int>(0)), const int *>);
static_assert(std::is_same_v<decltype(std::declval<pinpool::scope &>().pin_write<int>(0)), int *>);

static uint32_t pins_of(const pinpool::pool &pool, pp_ref_t ref)
{
    return info_of(pool.get(), ref).pins;
}

static bool dirty(const pinpool::pool &pool, pp_ref_t ref)
{
    return (info_of(pool.get(), ref).state & PP_STATE_DIRTY) != 0;
}

TEST_CASE(scope_ends_its_pins_when_destroyed)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 'a'), 8), b = pool.put(bytes(8, 'b'), 8);
    {
        pinpool::scope s(pool);
        const char *pa = s.pin<char>(a.ref());
        char *pb = s.pin_write<char>(b.ref());
        CHECK(pa[0] == 'a' && pb[0] == 'b');
        pb[1] = 'B';
        CHECK(s.count() == 2 && pp_scope_count(s.get()) == 2);
        CHECK(pins_of(pool, a.ref()) == 1 && pins_of(pool, b.ref()) == 1);
        CHECK(!dirty(pool, a.ref()) && dirty(pool, b.ref()));
    }
    CHECK(pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 0);
    // From a pp_pool_t * too, and past the ledger's inline room (its heap
    // part is freed at the end: the asan build checks).
    {
        pinpool::scope s(pool.get());
        for (unsigned i = 0; i < PP_SCOPE_INLINE + 8; i++)
            s.pin(a.ref());
        CHECK(s.count() == PP_SCOPE_INLINE + 8 && pins_of(pool, a.ref()) == PP_SCOPE_INLINE + 8);
    }
    CHECK(pins_of(pool, a.ref()) == 0);
}

TEST_CASE(scope_ends_its_pins_when_an_exception_unwinds)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 'a'), 8), b = pool.put(bytes(8, 'b'), 8);
    bool caught = false;
    try {
        pinpool::scope s(pool);
        s.pin(a.ref());
        s.pin_write(b.ref());
        throw std::runtime_error("the task failed");
    } catch (const std::runtime_error &) {
        caught = true;
    }
    CHECK(caught);
    CHECK(pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 0);
    // A pin of the scope itself fails halfway: what it took is dropped.
    caught = false;
    try {
        pinpool::scope s(pool);
        s.pin(a.ref());
        s.pin(12345);   // throws PP_ESTALE
        CHECK(false);
    } catch (const pinpool::error &e) {
        caught = true;
        CHECK(e.code() == PP_ESTALE);
        CHECK(std::string(e.what()).rfind("pp_scope_pin: PP_ESTALE", 0) == 0);
    }
    CHECK(caught);
    CHECK(pins_of(pool, a.ref()) == 0);
}

TEST_CASE(scope_end_now)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 'a'), 8);
    pinpool::scope s(pool);
    s.pin(a.ref());
    CHECK_RC(s.end(), 0);
    CHECK(s.count() == 0 && pins_of(pool, a.ref()) == 0);
    CHECK_RC(s.end(), PP_EINVAL);   // ended already, as in C
    void *data = nullptr;
    CHECK_RC(s.try_pin(a.ref(), 0, &data), PP_EINVAL);
    CHECK_THROWS(PP_EINVAL, s.pin(a.ref()));
    CHECK(pins_of(pool, a.ref()) == 0);
}   // the destructor does nothing more (no report)

TEST_CASE(scope_pin_many_is_all_or_none)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 'a'), 8), b = pool.put(bytes(8, 'b'), 8);
    pinpool::scope s(pool);
    pp_ref_t bad[2] = {a.ref(), 12345};
    CHECK_THROWS(PP_ESTALE, s.pin_many(bad, 2, PP_PIN_WRITE));
    CHECK(s.count() == 0 && pins_of(pool, a.ref()) == 0 && !dirty(pool, a.ref()));
    CHECK_RC(s.try_pin_many(bad, 2, 0, nullptr), PP_ESTALE);
    CHECK(s.count() == 0);
    pp_ref_t good[2] = {a.ref(), b.ref()};
    void *data[2] = {nullptr, nullptr};
    s.pin_many(good, 2, 0, data);
    CHECK(s.count() == 2 && static_cast<char *>(data[1])[0] == 'b');
    REQUIRE(CHECK_RC(s.try_pin_many(good, 2, PP_PIN_WRITE, data), 0));
    CHECK(s.count() == 4 && pins_of(pool, a.ref()) == 2 && dirty(pool, b.ref()));
}

TEST_CASE(scope_unpin_one)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 'a'), 8), b = pool.put(bytes(8, 'b'), 8);
    pinpool::scope s(pool);
    void *data = nullptr;
    REQUIRE(CHECK_RC(s.try_pin(a.ref(), 0, &data), 0));
    CHECK(static_cast<char *>(data)[0] == 'a');
    s.pin(b.ref());
    s.unpin(a.ref());
    CHECK(s.count() == 1 && pins_of(pool, a.ref()) == 0 && pins_of(pool, b.ref()) == 1);
    CHECK_THROWS(PP_ENOTPINNED, s.unpin(a.ref()));   // the scope holds no pin of a
    CHECK_RC(s.try_unpin(a.ref()), PP_ENOTPINNED);
    CHECK_RC(s.try_unpin(b.ref()), 0);
    CHECK(s.count() == 0);
    CHECK_RC(s.try_pin(12345, 0, &data), PP_ESTALE);
    CHECK(s.count() == 0);
}

TEST_CASE(scope_reports_a_pin_dropped_behind_its_back)
{
    pinpool::pool pool(test_options());
    pinpool::owner a = pool.put(bytes(8, 'a'), 8), b = pool.put(bytes(8, 'b'), 8);
    {
        pinpool::scope s(pool);
        s.pin(a.ref());
        s.pin(b.ref());
        REQUIRE(CHECK_RC(pp_unpin(pool.get(), a.ref()), 0));
    }
    CHECK(one_report_with({"~scope: pp_scope_end", "PP_ENOTPINNED"}));
    CHECK(pins_of(pool, b.ref()) == 0);   // the rest dropped all the same
}

TEST_CASE(scope_of_an_empty_pool)
{
    pinpool::pool empty(nullptr);
    pinpool::scope s(empty);
    void *data = nullptr;
    CHECK_RC(s.try_pin(1, 0, &data), PP_EINVAL);
    CHECK_THROWS(PP_EINVAL, s.pin(1));
    CHECK(s.count() == 0);
}   // nothing held, nothing reported

int main(int argc, char **argv) { return harness::run(argc, argv); }
