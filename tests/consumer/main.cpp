// Uses an installed pinpool from C++, through pinpool.hpp: a pool, an
// owner and its copy, read and write guards, a scope, and the error a
// stale ref throws.  Built by cmake/consumer_test.cmake against
// pinpool::pinpool, against pinpool::pinpool_static and with pkg-config.
#include <pinpool.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static int fail(const char *what)
{
    std::fprintf(stderr, "consumer (C++): %s\n", what);
    return 1;
}

int main()
{
    try {
        pinpool::pool pool;
        char *buf = static_cast<char *>(std::malloc(64));
        if (buf == nullptr)
            return fail("malloc");
        std::strcpy(buf, "hello");
        pinpool::owner tile = pool.put(buf, 64);
        pinpool::owner copy = tile;
        pp_entry_info_t info;
        if (pool.stat(tile.ref(), info) != 0 || info.owners != 2)
            return fail("a copy of the owner did not retain");
        {
            pinpool::pinned_write<char> w = pool.pin_write<char>(tile.ref());
            std::strcat(w.data(), " world");
        }
        {
            pinpool::scope task(pool);
            if (std::strcmp(task.pin<char>(tile.ref()), "hello world") != 0)
                return fail("the scope's pin gave the wrong data");
        }
        pp_ref_t ref = tile.ref();
        if (tile.reset() != 0 || copy.reset() != 0)
            return fail("release");
        try {
            pinpool::pinned<char> stale = pool.pin<char>(ref);
            return fail("a pin after the last release did not throw");
        } catch (const pinpool::error &e) {
            if (e.code() != PP_ESTALE || std::strcmp(e.name(), "PP_ESTALE") != 0)
                return fail(e.what());
        }
        if (pool.destroy() != 0)
            return fail("pp_pool_destroy");
    } catch (const pinpool::error &e) {
        return fail(e.what());
    }
    std::printf("consumer (C++): pinpool %d.%d.%d ok\n", PINPOOL_VERSION_MAJOR,
                PINPOOL_VERSION_MINOR, PINPOOL_VERSION_PATCH);
    return 0;
}
