/* A double-precision reference implementation of every op kind, written
 * straight from the definitions in docs/ops.md (PyTorch's where the page says
 * so) with naive loops, independent of the backends. Tests compare kernels
 * against it, and whole graphs can be evaluated with it for finite-difference
 * gradient checks.
 *
 * Values of every dtype are held as doubles (integer labels, u8 masks, ...).
 * Only the public API is used to read the graph. */
#ifndef SG_TEST_REF_OPS_H
#define SG_TEST_REF_OPS_H

#include <stdint.h>

#include "sgrt/sgrt.h"

/* Runs op `op` of the finalized graph `g`.
 *  in[i]   values of input i, or NULL for an absent optional input; inputs an
 *          op updates in place (batch-norm running stats in training, the
 *          optimizer's param and state) are updated through in[i];
 *  out[j]  room for output j (its element count); NULL skips that output
 *          where it is optional to compute (batch_norm's saved statistics and
 *          dropout's mask outside training);
 *  train   1: training behaviour (batch statistics, dropout applied); 0:
 *          evaluation (running statistics, dropout the identity);
 *  step, seed  the run context (dropout masks, SGD's first step).
 * Returns SG_ERR_UNSUPPORTED for an unknown kind and SG_ERR_RANGE for a label
 * outside 0..C-1 or an embedding id outside 0..V-1. */
sg_status ref_run_op(const sg_graph *g, int32_t op, int train, double *const *in, double *const *out,
                     uint64_t step, uint64_t seed);

/* Values of every tensor of a graph, for ref_run_graph. */
typedef struct ref_values {
  int32_t n;      /* number of tensors */
  double **v;     /* v[t]: numel(t) doubles */
  int64_t *numel; /* numel[t] */
} ref_values;

/* One zeroed buffer per tensor; initializers (f32, i32, i64, u8) copied in. */
sg_status ref_values_create(const sg_graph *g, ref_values **out);
void ref_values_destroy(ref_values *rv);
/* A deep copy (for evaluating perturbed copies in finite differences). */
sg_status ref_values_clone(const ref_values *rv, ref_values **out);
/* Sets a tensor's values from f32 / i32 / i64 data (numel elements). */
void ref_values_set_f32(ref_values *rv, sg_tensor t, const float *data);
void ref_values_set_i64(ref_values *rv, sg_tensor t, const int64_t *data);

/* Evaluates every op of `g` in index order (the builder's order is
 * topological) into rv. Source tensors keep what the caller put there. */
sg_status ref_run_graph(const sg_graph *g, int train, uint64_t step, uint64_t seed, ref_values *rv);

/* The dropout mask rule shared with the backends (docs/backend.md): element
 * i is kept iff bits(key, i) >= ceil(p * 2^24) with the counter-based hash
 * below. Exposed for tests. */
int ref_dropout_keep(uint64_t op_seed, uint64_t session_seed, uint64_t step, uint64_t i, double p);

#endif /* SG_TEST_REF_OPS_H */
