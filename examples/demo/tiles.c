/*
 * tiles.c -- the matrix, the kernels and the check of the tiled Cholesky
 * (see tiles.h).
 */
#include "tiles.h"

#include <cblas.h>
#include <lapacke.h>
#include <xxhash.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

static double a_entry(uint64_t seed, int n, int r, int c)
{
    uint32_t hi = (uint32_t)(r > c ? r : c), lo = (uint32_t)(r > c ? c : r);
    uint64_t key = ((uint64_t)hi << 32) | lo;
    uint64_t h = XXH3_64bits_withSeed(&key, sizeof key, seed);
    double u = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;   /* [-1, 1) */
    return r == c ? (double)n + u : u;
}

void demo_a_tile(uint64_t seed, int n, int b, int i, int j, double *t)
{
    for (int c = 0; c < b; c++)
        for (int r = 0; r < b; r++)
            t[(size_t)c * b + r] = a_entry(seed, n, i * b + r, j * b + c);
}

int demo_kernel(int kind, int b, const double *in0, const double *in1, double *out)
{
    switch (kind) {
    case K_POTRF:
        return (int)LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', b, out, b);
    case K_TRSM:    /* A_ik <- A_ik L_kk^-T */
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit,
                    b, b, 1.0, in0, b, out, b);
        return 0;
    case K_SYRK:    /* A_ii <- A_ii - A_ik A_ik^T */
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0, in0, b, 1.0, out, b);
        return 0;
    default:        /* A_ij <- A_ij - A_ik A_jk^T */
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0, in0, b,
                    in1, b, 1.0, out, b);
        return 0;
    }
}

double demo_kernel_flops(int kind, int b)
{
    double bb = (double)b * b * b;
    switch (kind) {
    case K_POTRF: return bb / 3.0;
    case K_TRSM: return bb;
    case K_SYRK: return bb;
    default: return 2.0 * bb;
    }
}

void demo_check_step(int b, int i, int j, int k, const double *x, const double *y,
                     double *tri, double *acc)
{
    if (k == j) {           /* L_jj: its lower triangle only */
        for (int c = 0; c < b; c++)
            for (int row = 0; row < b; row++)
                tri[(size_t)c * b + row] = row >= c ? y[(size_t)c * b + row] : 0.0;
        y = tri;
        if (i == j)
            x = tri;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, 1.0, x, b, y, b, 1.0, acc, b);
}

void demo_check_end(uint64_t seed, int n, int b, int i, int j, const double *acc, double *a,
                    double *err2, double *norm2)
{
    size_t bb = (size_t)b * b;
    demo_a_tile(seed, n, b, i, j, a);
    double e2 = 0, n2 = 0;
    for (size_t x = 0; x < bb; x++) {
        double d = a[x] - acc[x];
        e2 += d * d;
        n2 += a[x] * a[x];
    }
    double w = i == j ? 1.0 : 2.0;      /* tile (j, i) is the transpose */
    *err2 += w * e2;
    *norm2 += w * n2;
}

int demo_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0)
        return -1;
    double mult = 1;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = (1024.0 * 1024.0); end++; break;
    case 'g': case 'G': mult = (1024.0 * 1024.0) * 1024.0; end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B')
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end != '\0' || v * mult > 0x1p62)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

int demo_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}
