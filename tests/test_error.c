/* test_error.c -- error codes, names and messages (src/os/error.c). */
#include "helpers.h"

#include <limits.h>

typedef struct err_case {
    int code;
    const char *name;
    const char *msg;
} err_case_t;

static const err_case_t k_errs[] = {
#define ERR_CASE(name, value, msg) {PP_##name, "PP_" #name, msg},
    PP_ERRNO_MAP(ERR_CASE)
#undef ERR_CASE
};
#define N_ERRS (sizeof k_errs / sizeof k_errs[0])

Test(error, every_code_has_its_name, .timeout = 30)
{
    for (size_t i = 0; i < N_ERRS; i++) {
        const char *name = pp_err_name(k_errs[i].code);
        cr_assert_not_null(name, "code %d", k_errs[i].code);
        cr_assert_str_eq(name, k_errs[i].name, "code %d", k_errs[i].code);
        cr_assert(strncmp(name, "PP_E", 4) == 0, "%s", name);
    }
}

Test(error, names_are_distinct, .timeout = 30)
{
    for (size_t i = 0; i < N_ERRS; i++)
        for (size_t j = i + 1; j < N_ERRS; j++) {
            cr_assert_neq(k_errs[i].code, k_errs[j].code);
            cr_assert(strcmp(pp_err_name(k_errs[i].code),
                             pp_err_name(k_errs[j].code)) != 0,
                      "codes %d and %d share the name %s", k_errs[i].code,
                      k_errs[j].code, pp_err_name(k_errs[i].code));
        }
}

Test(error, every_code_has_its_message, .timeout = 30)
{
    for (size_t i = 0; i < N_ERRS; i++) {
        int c = k_errs[i].code;
        const char *m = pp_strerror(c);
        cr_assert_not_null(m, "code %d", c);
        cr_assert(m[0] != '\0', "empty message for %s", k_errs[i].name);
        cr_assert_str_eq(m, k_errs[i].msg, "message of %s", k_errs[i].name);
        cr_assert(strcmp(m, "unknown error") != 0, "%s", k_errs[i].name);
    }
}

Test(error, codes_are_negative, .timeout = 30)
{
    for (size_t i = 0; i < N_ERRS; i++)
        cr_assert_lt(k_errs[i].code, 0, "%s", k_errs[i].name);
}

Test(error, ok_is_pp_ok, .timeout = 30)
{
    cr_assert_str_eq(pp_err_name(0), "PP_OK");
    cr_assert_str_eq(pp_err_name(PP_OK), "PP_OK");
    const char *m = pp_strerror(0);
    cr_assert_not_null(m);
    cr_assert(m[0] != '\0');
    cr_assert(strcmp(m, "unknown error") != 0, "0 is a known code");
}

Test(error, unknown_codes, .timeout = 30)
{
    static const int unknown[] = {1, 2, 42, -14, -15, -100, -1000,
                                  INT_MAX, INT_MIN, INT_MIN + 1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        int c = unknown[i];
        const char *n = pp_err_name(c);
        const char *m = pp_strerror(c);
        cr_assert_not_null(n, "code %d", c);
        cr_assert_not_null(m, "code %d", c);
        cr_assert_str_eq(n, "PP_E?", "code %d", c);
        cr_assert_str_eq(m, "unknown error", "code %d", c);
    }
}
