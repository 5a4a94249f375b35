/* pinpool_inline.h compiles alone as C11 with -Wall -Wextra -Werror
 * -pedantic: it is included first and nothing else is; its calls on a
 * NULL pool reach the library and get PP_EINVAL. */
#include <pinpool_inline.h>

int main(void)
{
    void *data = 0;
    pp_ref_t ref = ((pp_ref_t)3 << 58) | ((pp_ref_t)5 << 32) | 7u;
    int ok = pp_pin(0, ref, 0, &data) == PP_EINVAL && pp_unpin(0, ref) == PP_EINVAL &&
             data == 0 && pp_pool_create_inline(0, 0, PP_INLINE_ABI + 1) == PP_ENOTSUP &&
             sizeof(pp__inline_entry_t) == 16;
    return ok ? 0 : 1;
}
