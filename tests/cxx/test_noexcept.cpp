// test_noexcept.cpp -- pinpool.hpp built with -fno-exceptions, as a
// scheduler without exceptions builds it: the forms that return codes, and
// the throwing ones left out.
#include "harness.hpp"

#include <type_traits>
#include <utility>

#if defined(__cpp_exceptions)
#error "test_noexcept.cpp is built with -fno-exceptions"
#endif

using harness::bytes;
using harness::info_of;
using harness::one_report_with;
using harness::test_options;

// What throws is not there.
static_assert(!std::is_default_constructible_v<pinpool::pool>, "pool() throws");
static_assert(!std::is_constructible_v<pinpool::pool, const pinpool::options &>);
static_assert(std::is_constructible_v<pinpool::pool, std::nullptr_t>);
static_assert(!std::is_copy_constructible_v<pinpool::owner>, "a copy could not fail");
static_assert(!std::is_copy_assignable_v<pinpool::owner>);
static_assert(std::is_nothrow_move_constructible_v<pinpool::owner>);
static_assert(!std::is_constructible_v<pinpool::pinned<int>, pp_pool_t *, pp_ref_t>);
static_assert(!std::is_constructible_v<pinpool::pinned_write<int>, pp_pool_t *, pp_ref_t>);
static_assert(!std::is_constructible_v<pinpool::pinned_many<>, pp_pool_t *, const pp_ref_t *,
                                       size_t>);
static_assert(std::is_nothrow_default_constructible_v<pinpool::pinned<int>>);

TEST_CASE(create_put_pin_release_without_exceptions)
{
    pinpool::pool pool(nullptr);
    REQUIRE(CHECK_RC(pinpool::pool::create(test_options(), pool), 0));
    pinpool::owner e;
    char *data = bytes(32, 'n');
    REQUIRE(CHECK_RC(pool.try_put(data, 32, nullptr, 0, e), 0));
    {
        pinpool::pinned_write<char> w;
        REQUIRE(CHECK_RC(pool.try_pin_write(e.ref(), 0, w), 0));
        w[0] = 'N';
        CHECK((info_of(pool.get(), e.ref()).state & PP_STATE_DIRTY) != 0);
        pinpool::pinned<char> r;
        REQUIRE(CHECK_RC(pinpool::pinned<char>::try_pin(pool.get(), e.ref(), 0, r), 0));
        CHECK(r[0] == 'N' && r.count() == 32 && info_of(pool.get(), e.ref()).pins == 2);
    }
    CHECK(info_of(pool.get(), e.ref()).pins == 0);
    pinpool::owner copy;
    REQUIRE(CHECK_RC(e.try_copy(copy), 0));
    CHECK(info_of(pool.get(), e.ref()).owners == 2);
    CHECK_RC(copy.reset(), 0);
    CHECK_RC(e.reset(), 0);
    CHECK_RC(pool.drain(10000), 0);
    CHECK_RC(pool.destroy(), 0);
}

TEST_CASE(errors_come_back_as_codes)
{
    pinpool::pool pool(nullptr);
    pinpool::options bad;
    bad.swap_dir("/tmp");   // no memory limit
    CHECK_RC(pinpool::pool::create(bad, pool), PP_EINVAL);
    CHECK(!pool);
    REQUIRE(CHECK_RC(pinpool::pool::create(test_options(), pool), 0));
    pinpool::owner e;
    char *mine = bytes(8, 0);
    CHECK_RC(pool.try_put(mine, 8, nullptr, 0x40u, e), PP_EINVAL);
    std::free(mine);
    REQUIRE(CHECK_RC(pool.try_put(bytes(8, 1), 8, nullptr, 0, e), 0));
    pp_ref_t r = e.ref();
    REQUIRE(CHECK_RC(pp_release(pool.get(), r), 0));   // dead, behind e's back
    pinpool::pinned<char> g;
    CHECK_RC(pool.try_pin(r, 0, g), PP_ESTALE);
    pinpool::pinned_many<> m;
    CHECK_RC(pool.try_pin_many(&r, 1, 0, m), PP_ESTALE);
    pinpool::owner copy;
    CHECK_RC(e.try_copy(copy), PP_ESTALE);
    CHECK(!g && !m && !copy);
    CHECK_RC(e.reset(), PP_ESTALE);
    // pinpool::error is there for messages all the same.
    pinpool::error err(PP_ESTALE, "pool.try_pin");
    CHECK(std::strcmp(err.what(), "pool.try_pin: PP_ESTALE: stale, dead or never valid ref") == 0);
}

TEST_CASE(scope_and_many_without_exceptions)
{
    pinpool::pool pool(nullptr);
    REQUIRE(CHECK_RC(pinpool::pool::create(test_options(), pool), 0));
    pinpool::owner a, b;
    REQUIRE(CHECK_RC(pool.try_put(bytes(8, 'a'), 8, nullptr, 0, a), 0));
    REQUIRE(CHECK_RC(pool.try_put(bytes(8, 'b'), 8, nullptr, 0, b), 0));
    pp_ref_t refs[3] = {a.ref(), b.ref(), 12345};
    {
        pinpool::scope s(pool);
        void *data[2] = {nullptr, nullptr};
        CHECK_RC(s.try_pin_many(refs, 3, 0, data), PP_ESTALE);
        CHECK(s.count() == 0);
        REQUIRE(CHECK_RC(s.try_pin_many(refs, 2, PP_PIN_WRITE, data), 0));
        CHECK(static_cast<char *>(data[0])[0] == 'a');
        CHECK_RC(s.try_unpin(a.ref()), 0);
        CHECK_RC(s.try_unpin(a.ref()), PP_ENOTPINNED);
        CHECK(s.count() == 1);
    }
    CHECK(info_of(pool.get(), b.ref()).pins == 0);
    pinpool::pinned_many<const char> m;
    CHECK_RC(pool.try_pin_many(refs, 3, 0, m), PP_ESTALE);
    CHECK(info_of(pool.get(), a.ref()).pins == 0);
    REQUIRE(CHECK_RC(pinpool::pinned_many<const char>::try_pin(pool.get(), refs, 2, 0, m), 0));
    CHECK(m.data(1)[0] == 'b');
    pinpool::pinned_many<const char> moved = std::move(m);
    CHECK(!m && moved.size() == 2);
}

TEST_CASE(a_guard_outliving_its_pool_without_exceptions)
{
    pinpool::pinned<char> g;
    pp_pool_t *raw = nullptr;
    {
        pinpool::pool pool(nullptr);
        REQUIRE(CHECK_RC(pinpool::pool::create(test_options(), pool), 0));
        raw = pool.get();
        pinpool::owner e;
        REQUIRE(CHECK_RC(pool.try_put(bytes(8, 'g'), 8, nullptr, 0, e), 0));
        REQUIRE(CHECK_RC(pool.try_pin(e.ref(), 0, g), 0));
    }
    CHECK(one_report_with({"~pool", "PP_EBUSY"}));
    CHECK(g[7] == 'g');
    CHECK_RC(g.unpin(), 0);
    CHECK_RC(pp_pool_destroy(raw), 0);
}

int main(int argc, char **argv) { return harness::run(argc, argv); }
