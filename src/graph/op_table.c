/* The table of op kinds. Each family's definition (arity, attribute schema,
 * inference) lives next to its builder in ops_*.c; this file only indexes
 * them by kind number, which is what .sgg files store. */
#include "graph/graph_internal.h"

static const sg__op_def *const table[] = {
    [SG_OP_CONV2D] = &sg__def_conv2d,
    [SG_OP_BATCH_NORM] = &sg__def_batch_norm,
    [SG_OP_RELU] = &sg__def_relu,
    [SG_OP_CLIP] = &sg__def_clip,
    [SG_OP_GELU] = &sg__def_gelu,
    [SG_OP_SIGMOID] = &sg__def_sigmoid,
    [SG_OP_TANH] = &sg__def_tanh,
    [SG_OP_ADD] = &sg__def_add,
    [SG_OP_SUB] = &sg__def_sub,
    [SG_OP_MUL] = &sg__def_mul,
    [SG_OP_DIV] = &sg__def_div,
    [SG_OP_ADD_SCALAR] = &sg__def_add_scalar,
    [SG_OP_MUL_SCALAR] = &sg__def_mul_scalar,
    [SG_OP_POW_SCALAR] = &sg__def_pow_scalar,
    [SG_OP_MATMUL] = &sg__def_matmul,
    [SG_OP_GEMM] = &sg__def_gemm,
    [SG_OP_MAX_POOL2D] = &sg__def_max_pool2d,
    [SG_OP_AVG_POOL2D] = &sg__def_avg_pool2d,
    [SG_OP_GLOBAL_AVG_POOL] = &sg__def_global_avg_pool,
    [SG_OP_FLATTEN] = &sg__def_flatten,
    [SG_OP_RESHAPE] = &sg__def_reshape,
    [SG_OP_TRANSPOSE] = &sg__def_transpose,
    [SG_OP_CONCAT] = &sg__def_concat,
    [SG_OP_SOFTMAX] = &sg__def_softmax,
    [SG_OP_LOG_SOFTMAX] = &sg__def_log_softmax,
    [SG_OP_CROSS_ENTROPY] = &sg__def_cross_entropy,
    [SG_OP_REDUCE_MEAN] = &sg__def_reduce_mean,
    [SG_OP_REDUCE_SUM] = &sg__def_reduce_sum,
    [SG_OP_DROPOUT] = &sg__def_dropout,
    [SG_OP_SGD_UPDATE] = &sg__def_sgd_update,
    [SG_OP_ADAMW_UPDATE] = &sg__def_adamw_update,
    [SG_OP_CONV2D_BACKWARD_DATA] = &sg__def_conv2d_backward_data,
    [SG_OP_CONV2D_BACKWARD_WEIGHT] = &sg__def_conv2d_backward_weight,
    [SG_OP_BATCH_NORM_BACKWARD] = &sg__def_batch_norm_backward,
    [SG_OP_RELU_BACKWARD] = &sg__def_relu_backward,
    [SG_OP_CLIP_BACKWARD] = &sg__def_clip_backward,
    [SG_OP_GELU_BACKWARD] = &sg__def_gelu_backward,
    [SG_OP_SIGMOID_BACKWARD] = &sg__def_sigmoid_backward,
    [SG_OP_TANH_BACKWARD] = &sg__def_tanh_backward,
    [SG_OP_MAX_POOL2D_BACKWARD] = &sg__def_max_pool2d_backward,
    [SG_OP_AVG_POOL2D_BACKWARD] = &sg__def_avg_pool2d_backward,
    [SG_OP_SOFTMAX_BACKWARD] = &sg__def_softmax_backward,
    [SG_OP_LOG_SOFTMAX_BACKWARD] = &sg__def_log_softmax_backward,
    [SG_OP_CROSS_ENTROPY_BACKWARD] = &sg__def_cross_entropy_backward,
    [SG_OP_DROPOUT_BACKWARD] = &sg__def_dropout_backward,
    [SG_OP_SUM_TO] = &sg__def_sum_to,
    [SG_OP_BROADCAST_TO] = &sg__def_broadcast_to,
    [SG_OP_SLICE] = &sg__def_slice,
    [SG_OP_EXP] = &sg__def_exp,
    [SG_OP_LOG] = &sg__def_log,
    [SG_OP_SQRT] = &sg__def_sqrt,
    [SG_OP_RECIPROCAL] = &sg__def_reciprocal,
    [SG_OP_NEG] = &sg__def_neg,
    [SG_OP_ABS] = &sg__def_abs,
    [SG_OP_SIGN] = &sg__def_sign,
    [SG_OP_ERF] = &sg__def_erf,
    [SG_OP_MAX] = &sg__def_max,
    [SG_OP_MIN] = &sg__def_min,
    [SG_OP_WHERE] = &sg__def_where,
    [SG_OP_CAST] = &sg__def_cast,
    [SG_OP_LAYER_NORM] = &sg__def_layer_norm,
    [SG_OP_LAYER_NORM_BACKWARD] = &sg__def_layer_norm_backward,
    [SG_OP_EMBEDDING] = &sg__def_embedding,
    [SG_OP_EMBEDDING_BACKWARD] = &sg__def_embedding_backward,
    [SG_OP_ATTENTION] = &sg__def_attention,
    [SG_OP_ATTENTION_BACKWARD] = &sg__def_attention_backward,
    [SG_OP_CUMSUM] = &sg__def_cumsum,
    [SG_OP_REDUCE_MAX] = &sg__def_reduce_max,
    [SG_OP_REDUCE_MIN] = &sg__def_reduce_min,
    [SG_OP_REDUCE_MAX_BACKWARD] = &sg__def_reduce_max_backward,
    [SG_OP_TOPK] = &sg__def_topk,
    [SG_OP_TOPK_BACKWARD] = &sg__def_topk_backward,
    [SG_OP_SIN] = &sg__def_sin,
    [SG_OP_COS] = &sg__def_cos,
    [SG_OP_ACOS] = &sg__def_acos,
};

const sg__op_def *sg__op_def_get(sg_op_kind kind) {
  if ((int)kind <= 0 || (size_t)kind >= sizeof table / sizeof table[0]) return NULL;
  return table[kind];
}

int sg__op_attr_count(sg_op_kind kind) {
  const sg__op_def *d = sg__op_def_get(kind);
  return d ? d->n_attrs : -1;
}

uint32_t sg__op_flags(sg_op_kind kind) {
  const sg__op_def *d = sg__op_def_get(kind);
  if (d == NULL) return 0;
  return d->flags | (d->min_inputs == 1 && d->max_inputs == 1 ? SG__OP_UNARY : 0u);
}

const char *sg_op_kind_name(sg_op_kind kind) {
  const sg__op_def *d = sg__op_def_get(kind);
  return d ? d->name : "?";
}

bool sg__op_draws_random(const sg__op *op) {
  const sg__op_def *d = sg__op_def_get(op->kind);
  if (d == NULL || op->n_attrs != d->n_attrs) return false;
  if (op->kind == SG_OP_DROPOUT) return op->attrs[2].i != 0 && op->attrs[0].f > 0; /* training, p */
  if (op->kind == SG_OP_ATTENTION) return op->attrs[2].f > 0;                      /* dropout */
  return false;
}

uint32_t sg__op_mutated_inputs(const sg__op *op) {
  const sg__op_def *d = sg__op_def_get(op->kind);
  if (d == NULL) return 0;
  /* Batch norm updates its running statistics only in training form. */
  if (op->kind == SG_OP_BATCH_NORM && op->n_attrs == d->n_attrs && op->attrs[2].i == 0) return 0;
  return d->mutated_inputs;
}
