/*
 * stress/common/memstat.h -- the process's own memory, as the kernel counts
 * it (/proc/self/status: VmRSS, the resident set now; VmHWM, its peak), and
 * which sanitizer the program was built with (their shadow memory,
 * redzones and quarantines make a byte of data cost more than a byte).
 */
#ifndef PP_STRESS_MEMSTAT_H
#define PP_STRESS_MEMSTAT_H

#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define STRESS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRESS_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define STRESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRESS_TSAN 1
#endif
#endif

/* The field of /proc/self/status ("VmRSS", "VmHWM"), in bytes; 0 if it
 * cannot be read. */
uint64_t proc_status_bytes(const char *field);

/* "asan", "tsan" or "none". */
const char *sanitizer_name(void);

#endif /* PP_STRESS_MEMSTAT_H */
