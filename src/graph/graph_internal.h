/* The graph layer's own internals: the op table's schemas and inference
 * functions, the builder's and the verifier's helpers. The IR and what the
 * layers above read of it are in graph/graph.h. */
#ifndef SG_GRAPH_INTERNAL_H
#define SG_GRAPH_INTERNAL_H

#include "graph/graph.h"

/* Shape and dtype of one tensor, as inferred. */
typedef struct sg__shape {
  sg_dtype dtype;
  int ndim;
  int64_t dims[SG_MAX_DIMS];
} sg__shape;

/* ---- op kind table (op_table.c) ---------------------------------------- */

typedef struct sg__attr_schema {
  const char *name;
  sg_attr_type type;
  bool required;
  int64_t def_i;
  double def_f;
  int def_count; /* INTS default length */
  int64_t def_ints[4];
  int min_count, max_count; /* INTS length bounds */
  /* INT value, or every INTS element, within min_value..max_value when
   * `bounded` (builder and verifier check it before inference, so a kernel
   * never sees an out-of-range window from the C API or a file). */
  bool bounded;
  int64_t min_value, max_value;
} sg__attr_schema;

/* Checks attribute `a` (canonical, of schema s's type) against s's value
 * bounds; SG_ERR_ATTRIBUTE naming the op, the attribute and the value. */
sg_status sg__attr_check_bounds(const char *kind, const char *op_name, const sg__attr_schema *s,
                                const sg_attr *a);

/* Infers the outputs of `op` (attributes already canonical) into `outs`
 * (room for SG__MAX_OUTPUTS, graph/graph.h) and their number into *n_outs. On a mismatch it
 * returns the error through sg__error with a message naming the op and the
 * shapes involved. Inputs are valid tensor ids or -1 where optional. */
typedef sg_status (*sg__infer_fn)(const sg_graph *g, const sg__op *op, sg__shape *outs, int *n_outs);

typedef struct sg__op_def {
  sg_op_kind kind;
  const char *name;           /* "conv2d" */
  int min_inputs, max_inputs; /* max_inputs < 0: unbounded (concat) */
  uint32_t optional_inputs;   /* bit i: input i may be -1 */
  uint32_t mutated_inputs;    /* bit i: the op updates input i in place */
  sg_role output_role;
  int n_attrs;
  const sg__attr_schema *attrs;
  sg__infer_fn infer;
  uint32_t flags; /* SG__OP_* (graph.h) but SG__OP_UNARY, which sg__op_flags derives */
} sg__op_def;

/* NULL for an unknown kind. */
const sg__op_def *sg__op_def_get(sg_op_kind kind);

/* Runs the generic constructor and returns output 0 (typed builders). */
sg_tensor sg__build1(sg_graph *g, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                     const sg_attr *attrs);

/* Per-family definitions, each next to its inference code. */
extern const sg__op_def sg__def_conv2d, sg__def_batch_norm;
extern const sg__op_def sg__def_relu, sg__def_clip, sg__def_gelu, sg__def_sigmoid, sg__def_tanh;
extern const sg__op_def sg__def_add, sg__def_sub, sg__def_mul, sg__def_div;
extern const sg__op_def sg__def_add_scalar, sg__def_mul_scalar, sg__def_pow_scalar;
extern const sg__op_def sg__def_matmul, sg__def_gemm;
extern const sg__op_def sg__def_max_pool2d, sg__def_avg_pool2d, sg__def_global_avg_pool;
extern const sg__op_def sg__def_flatten, sg__def_reshape, sg__def_transpose, sg__def_concat;
extern const sg__op_def sg__def_softmax, sg__def_log_softmax, sg__def_cross_entropy;
extern const sg__op_def sg__def_reduce_mean, sg__def_reduce_sum, sg__def_dropout;
extern const sg__op_def sg__def_sgd_update, sg__def_adamw_update;
/* Backward ops (ops_grad_*.c), appended by sg_graph_backward(). */
extern const sg__op_def sg__def_conv2d_backward_data, sg__def_conv2d_backward_weight;
extern const sg__op_def sg__def_batch_norm_backward;
extern const sg__op_def sg__def_relu_backward, sg__def_clip_backward, sg__def_gelu_backward;
extern const sg__op_def sg__def_sigmoid_backward, sg__def_tanh_backward, sg__def_dropout_backward;
extern const sg__op_def sg__def_max_pool2d_backward, sg__def_avg_pool2d_backward;
extern const sg__op_def sg__def_softmax_backward, sg__def_log_softmax_backward;
extern const sg__op_def sg__def_cross_entropy_backward;
extern const sg__op_def sg__def_sum_to, sg__def_broadcast_to, sg__def_slice;
/* Elementwise math, min/max, where, cast (ops_math.c); layer norm (ops_norm.c,
 * ops_grad_norm.c). */
extern const sg__op_def sg__def_exp, sg__def_log, sg__def_sqrt, sg__def_reciprocal, sg__def_neg;
extern const sg__op_def sg__def_abs, sg__def_sign, sg__def_erf, sg__def_max, sg__def_min;
extern const sg__op_def sg__def_where, sg__def_cast, sg__def_layer_norm, sg__def_layer_norm_backward;
/* Embedding lookup and its backward (ops_embedding.c). */
extern const sg__op_def sg__def_embedding, sg__def_embedding_backward;
/* Fused scaled-dot-product attention and its backward (ops_attention.c). */
extern const sg__op_def sg__def_attention, sg__def_attention_backward;
/* Cumulative sum along one axis (ops_cumsum.c). */
extern const sg__op_def sg__def_cumsum;
/* Max and min over axes and their backward (ops_reduce_max.c). */
extern const sg__op_def sg__def_reduce_max, sg__def_reduce_min, sg__def_reduce_max_backward;
/* sin, cos, acos (ops_math.c). */
extern const sg__op_def sg__def_sin, sg__def_cos, sg__def_acos;
/* The top k along the last axis and its backward (ops_topk.c). */
extern const sg__op_def sg__def_topk, sg__def_topk_backward;

/* conv2d's attribute schema entries, in order (stride, padding, dilation,
 * groups); its backward ops start their schemas with the same entries. */
/* clang-format off */
#define SG__CONV2D_ATTR_SCHEMA                                                                      \
  {"stride", SG_ATTR_INTS, false, 0, 0, 2, {1, 1}, 2, 2, true, 1, SG__MAX_ATTR_DIM},                \
  {"padding", SG_ATTR_INTS, false, 0, 0, 4, {0, 0, 0, 0}, 4, 4, true, 0, SG__MAX_ATTR_DIM},         \
  {"dilation", SG_ATTR_INTS, false, 0, 0, 2, {1, 1}, 2, 2, true, 1, SG__MAX_ATTR_DIM},              \
  {"groups", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0, true, 1, SG__MAX_ATTR_DIM}
/* clang-format on */

/* max_pool2d's and avg_pool2d's attribute schema entries, in order (kernel,
 * stride, padding, ceil_mode, count_include_pad; max pooling has the first
 * four); their backward ops share them. */
/* clang-format off */
#define SG__POOL2D_ATTR_SCHEMA                                                                      \
  {"kernel", SG_ATTR_INTS, true, 0, 0, 0, {0}, 2, 2, true, 1, SG__MAX_ATTR_DIM},                    \
  {"stride", SG_ATTR_INTS, false, 0, 0, 2, {1, 1}, 2, 2, true, 1, SG__MAX_ATTR_DIM},                \
  {"padding", SG_ATTR_INTS, false, 0, 0, 4, {0, 0, 0, 0}, 4, 4, true, 0, SG__MAX_ATTR_DIM},         \
  {"ceil_mode", SG_ATTR_INT, false, 0, 0, 0, {0}, 0, 0, true, 0, 1},                                \
  {"count_include_pad", SG_ATTR_INT, false, 1, 0, 0, {0}, 0, 0, true, 0, 1}
/* clang-format on */

/* Checks conv2d's attributes on `op` (schema order above) and computes the
 * output shape y of an input of shape x with a weight of shape w (4-D each).
 * xdesc / wdesc describe x and w in messages. */
sg_status sg__conv2d_window(const sg__op *op, const int64_t *x, const char *xdesc, const int64_t *w,
                            const char *wdesc, int64_t y[4]);

/* Output size of a convolution window over one dim; 0 when it does not fit. */
int64_t sg__conv_out_dim(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t k, int64_t stride, int64_t dil);

/* The window checks of max/avg pooling and their output size over x's dims
 * [N,C,H,W]; the attributes are in the pooling schema order (forward and
 * backward ops share it). xdesc describes x in messages. */
sg_status sg__pool2d_window(const sg__op *op, bool avg, const int64_t *x, const char *xdesc, int64_t *oh,
                            int64_t *ow);

/* The checks softmax and log_softmax and their backward ops share (the
 * axis attribute against tensor t, named `what` in the message), and those
 * of cross_entropy's inputs, logits x and labels y, which its backward op
 * repeats with its dloss dl (NULL for the forward op), in one order for
 * both (ops_loss.c). */
sg_status sg__softmax_axis_check(const sg__op *op, const sg__tensor *t, const char *what);
sg_status sg__cross_entropy_check(const sg__op *op, const sg__tensor *x, const sg__tensor *y,
                                  const sg__tensor *dl);

/* The checks layer_norm and its backward share: x a float tensor of rank
 * >= 1, the axis attribute (schema index 0) in range, normalised into
 * *axis, and scale and bias (each may be NULL) of x's dtype and its dims
 * from the axis on (ops_norm.c). */
sg_status sg__layer_norm_check(const sg_graph *g, const sg__op *op, const sg__tensor *x,
                               const sg__tensor *scale, const sg__tensor *bias, int *axis);

/* ---- graph internals (graph.c) ----------------------------------------- */

/* Records st as the graph's sticky error (the first one wins) with the
 * message that the failing call just set through sg__error(); returns st. */
sg_status sg__graph_fail(sg_graph *g, sg_status st);
/* A builder's versioned params (sg__params_read into dst, defaults first);
 * a failure becomes the graph's sticky error. */
sg_status sg__graph_params(sg_graph *g, const char *fn, sg__versioned v, void *dst, const void *src);
/* Sets the last error to the graph's sticky error and its first message. */
sg_status sg__graph_sticky_error(const sg_graph *g);

/* Appends a tensor without validation beyond memory safety; `name` is copied.
 * Used by the builder (after validating) and the .sgg reader (verified after). */
sg_status sg__graph_push_tensor(sg_graph *g, const sg__tensor *t, int32_t *id);
/* Appends an op whose arrays are already in the graph's arena. */
sg_status sg__graph_push_op(sg_graph *g, const sg__op *op);

/* Canonicalises attributes against a kind's schema: matches names, checks
 * types, fills defaults, copies INTS into the arena. */
sg_status sg__canon_attrs(sg_graph *g, const sg__op_def *def, const char *op_name, int n_attrs,
                          const sg_attr *attrs, sg_attr **out);

/* ---- helpers for inference (infer_util.c) ------------------------------ */

/* Copies a tensor's dtype and shape into an sg__shape. */
void sg__shape_of(const sg__tensor *t, sg__shape *s);
/* NumPy broadcast of two shapes; SG_ERR_SHAPE with both shapes named. */
sg_status sg__broadcast(const sg__op *op, const sg__tensor *a, const sg__tensor *b, sg__shape *out);

#endif /* SG_GRAPH_INTERNAL_H */
