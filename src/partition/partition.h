/* The partitioner's interface to the layers above it (the parallel
 * runtime), beyond the public sgrt/partition.h. */
#ifndef SG_PARTITION_PARTITION_H
#define SG_PARTITION_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "sgrt/ops.h"

/* Elementwise ops of one input that keep a last-dim (column) split intact
 * (SG__OP_ELEMENTWISE and SG__OP_UNARY in graph/graph.h): the planner
 * pairs a column split with a row split only through these (tp_plan.c),
 * and the tensor-parallel rewrite carries the split through the same ones. */
bool sg__tp_keeps_split(sg_op_kind kind);

/* How a tensor is cut across a tensor-parallel group: along `axis` (-1:
 * whole on every rank), which consists of `groups` equal blocks, each cut
 * into `ways` slices; a rank holds its slice of every block, in order (a
 * fused QKV projection's output is 3 blocks: q, k and v, each cut by heads). */
typedef struct sg__tp_cut {
  int8_t axis;
  int32_t groups;
} sg__tp_cut;

/* Whether op `op` of g computes each rank's slice of its outputs from the
 * ranks' slices of its inputs when they are cut as in[] (one per input; a
 * whole one is {-1, 1}), with no communication, and if so how each output
 * is cut (out[], one per output). Ops without a cut input: true, all whole.
 * The rules (tp_flow.c): elementwise ops, broadcasting included; softmax
 * over another axis; slices of whole blocks; reshapes that keep the cut
 * axis's offset; transposes; batched matmuls cut along a batch dim, the
 * first operand's rows or the second's columns; fused attention cut along
 * the heads (a leading dim of q, k and v alike). A whole operand must not
 * need a gradient (its gradient would be a partial sum). */
bool sg__tp_flow(const sg_graph *g, const sg__op *op, int ways, const sg__tp_cut *in, sg__tp_cut *out);

#endif /* SG_PARTITION_PARTITION_H */
