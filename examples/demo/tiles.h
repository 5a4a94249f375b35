/*
 * tiles.h -- what every version of the tiled Cholesky shares: the matrix,
 * the four kernels, the check, and the parsing of their command lines.  pinpool-demo (cholesky.c) and the StarPU
 * version of the same computation (starpu_cholesky.c) both use it, so the
 * two factorise the same matrix with the same code per tile.
 *
 * Tiles are b-by-b, column-major with leading dimension b; tile (i, j) of
 * the lower triangle (i >= j) holds rows i*b.. and columns j*b.. of A.
 */
#ifndef PINPOOL_DEMO_TILES_H
#define PINPOOL_DEMO_TILES_H

#include <stddef.h>
#include <stdint.h>

/* The kernels of the right- and left-looking tiled Cholesky. */
enum { K_POTRF, K_TRSM, K_SYRK, K_GEMM };

/* The stored tiles of an order-T lower triangle, row by row. */
static inline int demo_tile_index(int i, int j) { return i * (i + 1) / 2 + j; }

/* Tile (i, j) of A, i >= j: symmetric, off-diagonal entries in [-1, 1)
 * from XXH3 of (seed, row, column), n on the diagonal, so A is strictly
 * diagonally dominant and positive definite.  Regenerated from the formula
 * by the check, so no copy of A is kept. */
void demo_a_tile(uint64_t seed, int n, int b, int i, int j, double *t);

/* Runs one kernel on b-by-b tiles (one BLAS thread: the caller's):
 *   K_POTRF  out <- chol(out)                 (in0, in1 unused)
 *   K_TRSM   out <- out in0^-T                (in0 = L_kk)
 *   K_SYRK   out <- out - in0 in0^T           (lower triangle)
 *   K_GEMM   out <- out - in0 in1^T
 * Returns LAPACKE_dpotrf's info for K_POTRF (0: factorised), else 0. */
int demo_kernel(int kind, int b, const double *in0, const double *in1, double *out);

/* The flops of one kernel, for GFLOP/s. */
double demo_kernel_flops(int kind, int b);

/* One step of the check of tile (i, j): acc += L_ik L_jk^T, where
 * x = L_ik and y = L_jk; at k == j, y is the factorised diagonal tile and
 * only its lower triangle counts (tri: b*b scratch).  i == j at k == j:
 * x is that same tile. */
void demo_check_step(int b, int i, int j, int k, const double *x, const double *y,
                     double *tri, double *acc);

/* After the last step of tile (i, j): adds ||A_ij - acc||^2 to *err2 and
 * ||A_ij||^2 to *norm2, each counted twice off the diagonal (tile (j, i)
 * is the transpose).  a: b*b scratch for A_ij. */
void demo_check_end(uint64_t seed, int n, int b, int i, int j, const double *acc, double *a,
                    double *err2, double *norm2);

/* The command lines' numbers: a size with an optional K, M or G suffix
 * (binary; "KiB", "KB" accepted), and a decimal integer in [lo, hi].  0,
 * or -1 if s is not one. */
int demo_parse_size(const char *s, size_t *out);
int demo_parse_int(const char *s, int lo, int hi, int *out);

#endif /* PINPOOL_DEMO_TILES_H */
