/*
 * criterion_lsan.c -- LeakSanitizer checks the tests, not Criterion's runner.
 *
 * Linked into every unit test, in ASan builds only (CMakeLists.txt).
 *
 * Criterion runs each test in a child process; the parent only schedules
 * them.  With several tests that have a .timeout, Criterion 2.4.1's parent
 * leaks one 48-byte timeout record (calloc in its sandbox code) at exit, and
 * LeakSanitizer reports it, failing the test binary for a leak that is not
 * pinpool's.  LeakSanitizer asks __lsan_is_turned_off() at exit: it answers
 * yes only in the parent (no current test), so every test's own process is
 * still checked for leaks.
 */
#include <criterion/criterion.h>

#include <stddef.h>

int __lsan_is_turned_off(void);

int __lsan_is_turned_off(void)
{
    return criterion_current_test == NULL;
}
