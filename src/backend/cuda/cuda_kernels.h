/* sgrt's own CUDA kernels as CUDA C text (cuda_kernels.c): cross entropy,
 * softmax / log_softmax, layer norm, dropout and embedding, forward and
 * backward, and sums over any axes, with the
 * CPU backend's definitions. Text only, part of every build: NVRTC
 * compiles it in CUDA builds (cuda_library.c loads it, cuda_loss.c and
 * cuda_rows.c launch it), and the tests run it on the host behind a shim
 * that emulates a launch (tests/unit/test_cuda_kernels.c).
 *
 * Every kernel is `extern "C" __global__`, takes plain arguments and runs
 * with blocks of SG__CUDA_LIB_BLOCK threads; the row kernels take a row per
 * block (grid-stride over rows), the column kernel a column per thread. */
#ifndef SG_BACKEND_CUDA_KERNELS_H
#define SG_BACKEND_CUDA_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"

/* Threads per block of every kernel of the program. */
#define SG__CUDA_LIB_BLOCK 256

typedef enum sg__cuda_lib_kernel {
  /* (x, labels, l64, N, C, double *rows, float *out_none, err): row losses. */
  SG__CUDA_CE_ROWS,
  /* (rows, N, scale, out): one block, sum(rows) * scale. */
  SG__CUDA_CE_TOTAL,
  /* (dloss, per_row, scale, x, labels, l64, N, C, dx, err). */
  SG__CUDA_CE_GRAD,
  /* (x, y, outer, C, inner, log): softmax (log: log_softmax) along the
   * middle axis of x seen as [outer, C, inner]. */
  SG__CUDA_SOFTMAX,
  /* (dy, y, dx, outer, C, inner, log): its gradient from the output y. */
  SG__CUDA_SOFTMAX_GRAD,
  /* (x, scale, bias, y, mean, invstd, R, D, eps): layer norm of R rows of D;
   * scale and bias may be NULL. */
  SG__CUDA_LN,
  /* (dy, x, scale, mean, invstd, dx, R, D): dx, a row per block. */
  SG__CUDA_LN_GRAD_ROWS,
  /* (dy, x, mean, invstd, dscale, dbias, R, D): a column per thread, rows
   * added in order in double. */
  SG__CUDA_LN_GRAD_COLS,
  /* (x, y, mask, n, key, threshold, scale): element i kept when
   * sg__dropout_bits(key, i) >= threshold (backend/dropout_rng.h); y = x *
   * scale or 0, mask 1 or 0 (u8). An element per thread, grid-stride. */
  SG__CUDA_DROPOUT,
  /* (dy, mask, dx, n, scale): dx = mask ? dy * scale : 0 (dx may be dy). */
  SG__CUDA_DROPOUT_GRAD,
  /* (geom, x, y): y = scale * sum of x over the reduced dims, a block per
   * output element (grid-stride), in double in a fixed tree. */
  SG__CUDA_SUM,
  /* (table, ids, l64, n, V, C, y, err): y's row i = table[ids[i]], a row per
   * block (grid-stride); an id outside 0..V-1 is recorded in `err` (its
   * position and value) and its row becomes NaN. */
  SG__CUDA_EMBEDDING,
  /* (dy, ids, l64, n, V, C, slices, dtable, err): a (column, slice of the
   * table's rows) per thread, grid-stride over C * slices: zeroes its
   * column of its rows, then adds dy's rows into them in position order;
   * ids out of range are recorded and skipped. */
  SG__CUDA_EMBEDDING_GRAD,
  SG__CUDA_LIB_N
} sg__cuda_lib_kernel;

/* A sum's geometry, passed to SG__CUDA_SUM by value (the program declares
 * the same struct): x's dims split into kept ones (the output's, row-major)
 * and reduced ones, each with x's element stride; adjacent dims of one kind
 * merged. */
#define SG__CUDA_SUM_DIMS 8
typedef struct sg__cuda_sum_geom {
  int64_t kd[SG__CUDA_SUM_DIMS], ks[SG__CUDA_SUM_DIMS]; /* kept: dims, x strides */
  int64_t rd[SG__CUDA_SUM_DIMS], rs[SG__CUDA_SUM_DIMS]; /* reduced: dims, x strides */
  int64_t n_out, n_red;                                 /* products of kd and rd */
  double scale;                                         /* 1, or 1 / n_red for a mean */
  int32_t nk, nr;
} sg__cuda_sum_geom;

/* The geometry of reduce_sum, reduce_mean or sum_to op `op` (f32), as the
 * CPU's cpu_reduce.c reads them: false when the op is none of those or has
 * more dims than SG__CUDA_SUM_DIMS. */
bool sg__cuda_sum_geometry(const sg_graph *g, const sg__op *op, sg__cuda_sum_geom *out);

/* The program (NULL when out of memory, once), and kernel k's name in it. */
const char *sg__cuda_library_program(void);
const char *sg__cuda_library_name(sg__cuda_lib_kernel k);

#endif /* SG_BACKEND_CUDA_KERNELS_H */
