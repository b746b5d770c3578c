/* Backend registry and the in-place contract shared by planner and kernels. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

const sg__backend_i *sg__backend_find(const char *name) {
  if (name == NULL) return NULL;
  if (strcmp(name, sg__cpu_backend.name) == 0) return &sg__cpu_backend;
#if defined(SG_HAVE_CUDA_BACKEND)
  if (strcmp(name, sg__cuda_backend.name) == 0) return &sg__cuda_backend;
#endif
  return NULL;
}

#if defined(SG_HAVE_CUDA_BACKEND)
#define AVAILABLE "cpu, cuda, cuda:N"
#else
#define AVAILABLE "cpu; this build has no CUDA backend"
#endif

sg_status sg__backend_parse(const char *who, const char *spec, const sg__backend_i **be, int *device) {
  *be = NULL;
  *device = 0;
  char name[16];
  const char *colon = strchr(spec, ':');
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  if (n >= sizeof name)
    return sg__error(SG_ERR_NOT_FOUND, "%s: no device '%s' (available: " AVAILABLE ")", who, spec);
  memcpy(name, spec, n);
  name[n] = '\0';
  *be = sg__backend_find(name);
  if (*be == NULL)
    return sg__error(SG_ERR_NOT_FOUND, "%s: no device '%s' (available: " AVAILABLE ")", who, spec);
  if (colon == NULL) return SG_OK;
  char *end;
  long v = strtol(colon + 1, &end, 10);
  if (*be == &sg__cpu_backend || colon[1] < '0' || colon[1] > '9' || *end != '\0' || v > 1023)
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: device '%s' is not 'cpu', 'cuda' or 'cuda:N' (N a device number)", who, spec);
  *device = (int)v;
  return SG_OK;
}

static bool same_layout(const sg__tensor *a, const sg__tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

int sg__op_inplace_input(const sg_graph *g, const sg__op *op) {
  uint32_t f = sg__op_flags(op->kind);
  if (!(f & SG__OP_INPLACE_INPUT0) || op->n_outputs < 1 || op->n_inputs < 1 || op->inputs[0] < 0) return -1;
  const sg__tensor *in = &g->tensors[op->inputs[0]], *out = &g->tensors[op->outputs[0]];
  /* Views: the same bytes under another shape, so the output may simply be
   * the input's buffer (the kernel then copies nothing). */
  if (f & SG__OP_VIEW) return in->nbytes == out->nbytes && in->dtype == out->dtype ? 0 : -1;
  /* Elementwise: out[i] depends only on the operands' elements at i. */
  return same_layout(in, out) ? 0 : -1;
}
