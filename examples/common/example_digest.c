/* The examples' parameter digest (example_digest.h). */
#include "example_digest.h"

#include <math.h>
#include <stdlib.h>

sg_status example_param_digest(const sg_graph *g, const sg_session *s, uint64_t *hash, double *sum,
                               double *l2) {
  *hash = 1469598103934665603ull;
  *sum = *l2 = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    sg_graph_tensor_info(g, (sg_tensor){i}, &info);
    if (info.role != SG_ROLE_PARAMETER) continue;
    float *v = malloc(info.nbytes);
    if (v == NULL) return SG_ERR_NO_MEMORY;
    sg_status st = sg_session_read(s, info.name, v, info.nbytes);
    if (st != SG_OK) {
      free(v);
      return st;
    }
    const unsigned char *b = (const unsigned char *)v;
    for (size_t k = 0; k < info.nbytes; k++) *hash = (*hash ^ b[k]) * 1099511628211ull;
    for (int64_t k = 0; k < info.numel; k++) {
      *sum += v[k];
      *l2 += (double)v[k] * v[k];
    }
    free(v);
  }
  *l2 = sqrt(*l2);
  return SG_OK;
}
