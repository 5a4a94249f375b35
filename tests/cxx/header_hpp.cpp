// pinpool.hpp compiles alone (or, with PP_TEST_C_FIRST, after pinpool.h),
// as C++17 and C++20, with and without exceptions, with every warning an
// error, under g++ and clang++: cmake/header_hpp_check.cmake builds this
// file every way and runs what it links.  Every class template is
// instantiated in full, so every member compiles; main() then makes one
// round trip through the pool and returns non-zero if anything is wrong.
#ifdef PP_TEST_C_FIRST
#include <pinpool.h>
#endif
#include <pinpool.hpp>

#include <cstdlib>
#include <cstring>

template class pinpool::pinned<int>;
template class pinpool::pinned<void>;
template class pinpool::pinned<const char>;
template class pinpool::pinned_write<double>;
template class pinpool::pinned_write<void>;
template class pinpool::pinned_many<>;
template class pinpool::pinned_many<const double>;
// Explicit instantiation of a class leaves its bases' members alone.
template class pinpool::detail::pin_guard<pinpool::pinned<int>, const int, 0u>;
template class pinpool::detail::pin_guard<pinpool::pinned<void>, const void, 0u>;
template class pinpool::detail::pin_guard<pinpool::pinned_write<double>, double, PP_PIN_WRITE>;
template class pinpool::detail::pin_guard<pinpool::pinned_write<void>, void, PP_PIN_WRITE>;

static int round_trip(pinpool::pool &pool)
{
    char *buf = static_cast<char *>(std::calloc(64, 1));
    if (buf == nullptr)
        return 1;
    std::strcpy(buf, "hpp");
    pinpool::owner e;
    if (pool.try_put(buf, 64, nullptr, 0, e) != 0) {
        std::free(buf);
        return 2;
    }
    pinpool::pinned_write<char> w;
    if (pool.try_pin_write(e.ref(), 0, w) != 0 || w.count() != 64)
        return 3;
    w[3] = '!';
    if (w.unpin() != 0)
        return 4;
#if defined(__cpp_exceptions)
    pinpool::pinned<char> r = pool.pin<char>(e.ref());
    try {
        pinpool::pinned<char> bad = pool.pin<char>(12345);
        return 5;
    } catch (const pinpool::error &err) {
        if (err.code() != PP_ESTALE)
            return 6;
    }
#else
    pinpool::pinned<char> r;
    if (pool.try_pin(e.ref(), 0, r) != 0)
        return 5;
#endif
    if (std::strcmp(r.data(), "hpp!") != 0)
        return 7;
#if __cplusplus >= 202002L && __has_include(<span>)
    std::span<const char> s = r.span();
    if (s.size() != 64 || s[3] != '!')
        return 8;
#endif
    pp_ref_t refs[2] = {e.ref(), e.ref()};
    pinpool::pinned_many<const char> m;
    if (pool.try_pin_many(refs, 2, 0, m) != 0 || m.data(1)[0] != 'h')
        return 9;
    pinpool::scope sc(pool);
    void *d = nullptr;
    if (sc.try_pin(e.ref(), 0, &d) != 0 || sc.count() != 1 || sc.end() != 0)
        return 10;
    return 0;
}

int main()
{
    pinpool::options opt;
    opt.reclaim_backlog(PP_RECLAIM_BACKLOG_DEFAULT);
    pinpool::pool pool(nullptr);
    if (pinpool::pool::create(opt, pool) != 0)
        return 20;
    int rc = round_trip(pool);
    if (rc != 0)
        return rc;
    return pool.destroy() == 0 ? 0 : 21;
}
