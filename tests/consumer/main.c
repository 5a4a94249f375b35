/* Uses an installed pinpool: create a pool, put, pin, unpin, release,
 * destroy, checking every return code.  Built three ways by
 * cmake/consumer_test.cmake: find_package + pinpool::pinpool,
 * find_package + pinpool::pinpool_static, and pkg-config. */
#include <pinpool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                           \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != 0) {                                                       \
            fprintf(stderr, "consumer: %s: %s (%s)\n", #call,                 \
                    pp_err_name(rc_), pp_strerror(rc_));                      \
            return 1;                                                         \
        }                                                                     \
    } while (0)

int main(void)
{
    pp_options_t opt = PP_OPTIONS_INIT;
    pp_pool_t *pool = NULL;
    CHECK(pp_pool_create(&opt, &pool));

    char *buf = malloc(64);
    if (buf == NULL)
        return 1;
    strcpy(buf, "hello");

    pp_ref_t ref = PP_REF_NONE;
    CHECK(pp_put(pool, buf, 64, NULL, 0, &ref));
    if (ref == PP_REF_NONE) {
        fprintf(stderr, "consumer: pp_put gave PP_REF_NONE\n");
        return 1;
    }

    void *data = NULL;
    CHECK(pp_pin(pool, ref, PP_PIN_WRITE, &data));
    if (data != buf || strcmp(data, "hello") != 0) {
        fprintf(stderr, "consumer: pp_pin gave the wrong data\n");
        return 1;
    }
    CHECK(pp_unpin(pool, ref));
    pp_stats_t st = PP_STATS_INIT;
    CHECK(pp_pool_stats(pool, &st));
    if (st.total.puts != 1 || st.total.pins != 1) {
        fprintf(stderr, "consumer: pp_pool_stats counted the wrong puts or pins\n");
        return 1;
    }
    if (pp_unpin(pool, ref) != PP_ENOTPINNED) {
        fprintf(stderr, "consumer: unbalanced pp_unpin was not PP_ENOTPINNED\n");
        return 1;
    }
    CHECK(pp_release(pool, ref));
    if (pp_pin(pool, ref, 0, NULL) != PP_ESTALE) {
        fprintf(stderr, "consumer: pin after the last release was not PP_ESTALE\n");
        return 1;
    }
    CHECK(pp_pool_destroy(pool));

    printf("consumer: pinpool %d.%d.%d ok\n", PINPOOL_VERSION_MAJOR,
           PINPOOL_VERSION_MINOR, PINPOOL_VERSION_PATCH);
    return 0;
}
