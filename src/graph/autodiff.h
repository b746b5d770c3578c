/* Reverse-mode autodiff, shared between the driver (autodiff.c: which
 * tensors need a gradient, accumulation, naming) and the per-op gradient
 * rules (autodiff_rules.c). */
#ifndef SG_GRAPH_AUTODIFF_H
#define SG_GRAPH_AUTODIFF_H

#include "graph/graph_internal.h"

/* State of one sg_graph_backward() call. */
typedef struct sg__ad {
  sg_graph *g;
  uint32_t n_fwd_tensors, n_fwd_ops; /* the graph before backward */
  uint8_t *flags;                    /* per forward tensor: AD_DEPENDS | AD_REACHES */
  int32_t *head;                     /* per forward tensor: first gradient contribution, or -1 */
  struct sg__ad_contrib {
    int32_t tensor, next;
  } * contribs;
  uint32_t n_contribs, cap_contribs;
  const char *group;  /* ops appended now are named "<group>/grad[_k]" */
  uint32_t group_seq; /* next k to try */
} sg__ad;

/* A gradient rule: given dy, the gradient of output 0 of forward op `op`,
 * appends ops and hands a gradient to every input i for which
 * sg__ad_needs(c, op, i) is true, with that input's shape and dtype. `op`
 * is a copy: g->ops moves while ops are appended. Pointers into g->tensors
 * move too, so rules copy what they need before appending. */
typedef sg_status (*sg__grad_rule)(sg__ad *c, const sg__op *op, sg_tensor dy);

typedef struct sg__grad_def {
  sg__grad_rule rule;   /* NULL: the op kind has no gradient */
  uint32_t diff_inputs; /* bit i: a gradient can flow into input i */
} sg__grad_def;

/* The rule of an op kind (autodiff_rules.c); NULL when there is none. */
const sg__grad_def *sg__grad_def_get(sg_op_kind kind);

/* Services of the driver for the rules. */
bool sg__ad_needs(const sg__ad *c, const sg__op *op, int i);
/* Adds `grad` to the gradient of input i of `op`. A failed emission
 * (grad = SG_NO_TENSOR) returns the graph's error. */
sg_status sg__ad_give(sg__ad *c, const sg__op *op, int i, sg_tensor grad);
/* Appends an op (role GRADIENT outputs, named after the current group) and
 * returns output 0; up to max_outputs outputs go to `outputs` if not NULL.
 * SG_NO_TENSOR on failure, with the error recorded on the graph (sticky, so
 * later emissions fail quietly and the rule just returns the status). */
sg_tensor sg__ad_emit(sg__ad *c, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                      const sg_attr *attrs, int max_outputs, sg_tensor *outputs);

#endif /* SG_GRAPH_AUTODIFF_H */
