// pinpool.h compiles alone as C++11 with -Wall -Wextra -Werror -pedantic:
// it is included first and nothing else is.
#include <pinpool.h>

int main()
{
    pp_options_t opt = PP_OPTIONS_INIT;
    pp_type_t type = { "header", 0, 0, 0, 0, PP_TYPE_NOSWAP };
    pp_entry_info_t info = pp_entry_info_t();
    pp_ref_t ref = (static_cast<pp_ref_t>(3) << 58) |
                   (static_cast<pp_ref_t>(5) << 32) | 7u;
    const char *(*err_name)(int) = pp_err_name;
    pp_stats_t stats = PP_STATS_INIT;
    pp_node_stats_t node = PP_NODE_STATS_INIT;
    int (*pin)(pp_pool_t *, pp_ref_t, unsigned, void **, const char *, int) =
        pp_pin_loc;
    int (*dump)(pp_pool_t *, FILE *) = pp_pins_dump;   /* FILE: pinpool.h */

    (void)opt;
    (void)type;
    (void)info;
    (void)pin;
    if (dump(NULL, stdout) != PP_EINVAL)
        return 1;
    if (pp_ref_node(ref) != 3 || pp_ref_slot(ref) != 5 || pp_ref_gen(ref) != 7)
        return 1;
    if (stats.size != sizeof stats || stats.version != PP_STATS_VERSION ||
        stats.total.puts != 0 || node.size != sizeof node || node.version != PP_STATS_VERSION)
        return 1;
    if (PP_ON_NODE(1) == 0 || PP_OK != 0 || PP_ESTALE >= 0)
        return 1;
    return err_name(PP_EINVAL) == 0;
}
