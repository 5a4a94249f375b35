// pinpool_inline.h compiles alone as C++11 with -Wall -Wextra -Werror
// -pedantic: it is included first and nothing else is; its calls on a
// null pool reach the library and get PP_EINVAL.
#include <pinpool_inline.h>

int main()
{
    void *data = nullptr;
    pp_ref_t ref = (static_cast<pp_ref_t>(3) << 58) | (static_cast<pp_ref_t>(5) << 32) | 7u;
    bool ok = pp_pin(nullptr, ref, 0, &data) == PP_EINVAL &&
              pp_unpin(nullptr, ref) == PP_EINVAL && data == nullptr &&
              pp_pool_create_inline(nullptr, nullptr, PP_INLINE_ABI + 1) == PP_ENOTSUP;
    return ok ? 0 : 1;
}
