/* The parameter digest of the training examples' --json summaries (SPEC
 * O1): two runs can be compared exactly (hash) or within a tolerance (sum,
 * L2 norm). */
#ifndef EXAMPLE_DIGEST_H
#define EXAMPLE_DIGEST_H

#include <stdint.h>

#include <sgrt/sgrt.h>

/* FNV-1a over the bytes of every parameter in graph order (the same digest
 * as sg_dist_params_hash), plus their float64 sum and L2 norm. */
sg_status example_param_digest(const sg_graph *g, const sg_session *s, uint64_t *hash, double *sum,
                               double *l2);

#endif /* EXAMPLE_DIGEST_H */
