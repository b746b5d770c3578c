/* Backend registry and the in-place contract shared by planner and kernels. */
#include <string.h>

#include "backend/backend.h"

const sg__backend_i *sg__backend_find(const char *name) {
  if (name == NULL) return NULL;
  if (strcmp(name, sg__cpu_backend.name) == 0) return &sg__cpu_backend;
  return NULL;
}

static bool same_layout(const sg__tensor *a, const sg__tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

int sg__op_inplace_input(const sg_graph *g, const sg__op *op) {
  int candidate;
  switch (op->kind) {
    /* Unary elementwise: out[i] depends only on in[i]. */
    case SG_OP_RELU:
    case SG_OP_CLIP:
    case SG_OP_GELU:
    case SG_OP_SIGMOID:
    case SG_OP_TANH:
    case SG_OP_ADD_SCALAR:
    case SG_OP_MUL_SCALAR:
    case SG_OP_POW_SCALAR:
    case SG_OP_ADD:
    case SG_OP_SUB:
    case SG_OP_MUL:
    case SG_OP_DIV: candidate = 0; break;
    /* Backward elementwise: dx[i] depends on dy[i] and one other value at i. */
    case SG_OP_RELU_BACKWARD:
    case SG_OP_CLIP_BACKWARD:
    case SG_OP_GELU_BACKWARD:
    case SG_OP_SIGMOID_BACKWARD:
    case SG_OP_TANH_BACKWARD:
    case SG_OP_DROPOUT_BACKWARD: candidate = 0; break;
    /* Views: the same bytes under another shape, so the output may simply
     * be the input's buffer (the kernel then copies nothing). */
    case SG_OP_FLATTEN:
    case SG_OP_RESHAPE:
      if (op->n_outputs < 1 || op->n_inputs < 1 || op->inputs[0] < 0) return -1;
      return g->tensors[op->inputs[0]].nbytes == g->tensors[op->outputs[0]].nbytes &&
                     g->tensors[op->inputs[0]].dtype == g->tensors[op->outputs[0]].dtype
                 ? 0
                 : -1;
    default: return -1;
  }
  if (op->n_outputs < 1 || candidate >= op->n_inputs || op->inputs[candidate] < 0) return -1;
  return same_layout(&g->tensors[op->inputs[candidate]], &g->tensors[op->outputs[0]]) ? candidate : -1;
}
