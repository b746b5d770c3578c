/* Strided views: the shared walker of broadcasting binaries, broadcast_to,
 * reductions and transpose (cpu_internal.h). */
#include <string.h>

#include "backend/cpu/cpu_internal.h"

void sg__cpu_bcast_strides(int ndim, const int64_t *dims, int nd, const int64_t *d, int64_t *strides) {
  (void)dims;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    int j = i - (ndim - nd);
    if (j < 0 || d[j] == 1) {
      strides[i] = 0;
    } else {
      strides[i] = s;
      s *= d[j];
    }
  }
}

void sg__cpu_iter_init(sg__cpu_iter *it, int ndim, const int64_t *dims, int nops,
                       const int64_t (*strides)[SG_MAX_DIMS]) {
  memset(it, 0, sizeof *it);
  int n = 0;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] == 1) continue;
    bool merge = n > 0;
    /* dim i continues dim n-1 when, for every operand, stepping n-1 once is
     * the same as stepping i dims[i] times. */
    for (int k = 0; merge && k < nops; k++)
      if (it->strides[k][n - 1] != strides[k][i] * dims[i]) merge = false;
    if (merge) {
      it->dims[n - 1] *= dims[i];
      for (int k = 0; k < nops; k++) it->strides[k][n - 1] = strides[k][i];
    } else {
      it->dims[n] = dims[i];
      for (int k = 0; k < nops; k++) it->strides[k][n] = strides[k][i];
      n++;
    }
  }
  if (n == 0) {
    it->dims[0] = 1;
    n = 1;
  }
  it->nd = n;
}

int64_t sg__cpu_iter_rows(const sg__cpu_iter *it) {
  int64_t r = 1;
  for (int d = 0; d < it->nd - 1; d++) r *= it->dims[d];
  return r;
}

void sg__cpu_iter_seek(const sg__cpu_iter *it, int64_t r, sg__cpu_pos *p) {
  memset(p, 0, sizeof *p);
  for (int d = it->nd - 2; d >= 0; d--) {
    p->idx[d] = r % it->dims[d];
    r /= it->dims[d];
    for (int k = 0; k < 3; k++) p->off[k] += p->idx[d] * it->strides[k][d];
  }
}

/* Elements per piece of a long row, and the least work worth threads. */
#define PIECE 16384
#define MIN_PARALLEL_ELEMS 65536

typedef struct iter_job {
  const sg__cpu_iter *it;
  sg__cpu_row_fn row;
  void *ctx;
  int64_t n, pieces; /* innermost length, pieces per row */
} iter_job;

static void iter_range(void *data, int64_t begin, int64_t end) {
  const iter_job *j = data;
  sg__cpu_pos p;
  if (j->pieces == 1) {
    sg__cpu_iter_seek(j->it, begin, &p);
    for (int64_t r = begin; r < end; r++) {
      j->row(j->ctx, &p, 0, j->n);
      sg__cpu_iter_next(j->it, &p);
    }
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    int64_t r = u / j->pieces, i0 = (u % j->pieces) * PIECE;
    sg__cpu_iter_seek(j->it, r, &p);
    j->row(j->ctx, &p, i0, j->n - i0 < PIECE ? j->n - i0 : PIECE);
  }
}

void sg__cpu_iter_for(const sg__cpu_iter *it, sg__cpu_row_fn row, void *ctx) {
  int64_t rows = sg__cpu_iter_rows(it), n = it->dims[it->nd - 1];
  iter_job j = {it, row, ctx, n, n > 2 * PIECE ? (n + PIECE - 1) / PIECE : 1};
  int64_t units = rows * j.pieces;
  /* Enough units that small tensors stay on the calling thread. */
  int64_t per_unit = n / j.pieces > 0 ? n / j.pieces : 1;
  sg__cpu_parallel_for(units, (MIN_PARALLEL_ELEMS + per_unit - 1) / per_unit, iter_range, &j);
}
