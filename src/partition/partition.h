/* The partitioner's interface to the layers above it (the parallel
 * runtime), beyond the public sgrt/partition.h. */
#ifndef SG_PARTITION_PARTITION_H
#define SG_PARTITION_PARTITION_H

#include <stdbool.h>

#include "sgrt/ops.h"

/* Elementwise ops of one input that keep a last-dim (column) split intact
 * (SG__OP_ELEMENTWISE and SG__OP_UNARY in graph/graph.h): the planner
 * pairs a column split with a row split only through these (tp_plan.c),
 * and the tensor-parallel rewrite carries the split through the same ones. */
bool sg__tp_keeps_split(sg_op_kind kind);

#endif /* SG_PARTITION_PARTITION_H */
