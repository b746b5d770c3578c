/**
 * @file ops.h
 * Builder API: each function appends one op to a graph, infers the
 * shape and dtype of its outputs, and returns the (first) output.
 *
 * Layout conventions follow PyTorch: images are NCHW, convolution weights are
 * [C_out, C_in / groups, kH, kW], linear weights are [out_features,
 * in_features]. A shape or dtype that does not fit fails at the call that
 * caused it, with a message naming the op and the shapes involved; see graph.h
 * for how errors propagate (sticky, SG_NO_TENSOR).
 *
 * Every params struct starts with `size` and is initialised from its
 * SG_X_PARAMS_INIT macro or sg_X_params_init(). Fields are only ever
 * appended: a program built against an older, shorter version of a struct
 * gets the defaults (the INIT values) for the fields it lacks, and a size
 * below the first version's or above this library's fails with
 * SG_ERR_INVALID_ARG naming the struct and both sizes (docs/api.md). A NULL
 * params pointer means the defaults.
 */
#ifndef SGRT_OPS_H
#define SGRT_OPS_H

#include "sgrt/graph.h"

SG_EXTERN_C_BEGIN

/**
 * Generic op constructor used by the typed builders below, by importers and
 * by tests. Attributes are matched by name against the op kind's schema;
 * missing optional ones take their defaults (see docs/ops.md).
 * @param outputs  receives up to max_outputs output tensors (may be NULL)
 * @param n_outputs receives the number of outputs the op has (may be NULL)
 * @return SG_OK or the error that was also recorded on the graph.
 */
SG_API sg_status sg_graph_add_op(sg_graph *g, sg_op_kind kind, int n_inputs, const sg_tensor *inputs,
                                 int n_attrs, const sg_attr *attrs, int max_outputs, sg_tensor *outputs,
                                 int *n_outputs);

/* ---- convolution and normalization -------------------------------------- */

typedef struct sg_conv2d_params {
  size_t size;
  int64_t stride[2];   /**< (h, w), default 1 */
  int64_t padding[4];  /**< (top, left, bottom, right), default 0 */
  int64_t dilation[2]; /**< (h, w), default 1 */
  int64_t groups;      /**< default 1 */
} sg_conv2d_params;
#define SG_CONV2D_PARAMS_INIT \
  { sizeof(sg_conv2d_params), {1, 1}, {0, 0, 0, 0}, {1, 1}, 1 }
SG_API sg_conv2d_params sg_conv2d_params_init(void);

/** y = conv2d(x, w) + bias. x [N,C,H,W], w [K,C/groups,R,S], bias [K] or SG_NO_TENSOR. */
SG_API sg_tensor sg_conv2d(sg_graph *g, sg_tensor x, sg_tensor w, sg_tensor bias, const sg_conv2d_params *p);

typedef struct sg_batch_norm_params {
  size_t size;
  double eps;      /**< default 1e-5 */
  double momentum; /**< running = (1 - momentum) * running + momentum * batch; default 0.1 */
  int training;    /**< 1: batch statistics, running stats updated; 0: running stats. Default 1 */
} sg_batch_norm_params;
#define SG_BATCH_NORM_PARAMS_INIT \
  { sizeof(sg_batch_norm_params), 1e-5, 0.1, 1 }
SG_API sg_batch_norm_params sg_batch_norm_params_init(void);

/**
 * Batch normalization over N (and H, W) of x [N,C,...]. gamma, beta,
 * running_mean, running_var are [C]. In training form the op also outputs the
 * batch mean and inverse standard deviation (outputs 1 and 2, kept for the
 * backward pass) and updates running_mean and running_var in place, which
 * must then have role SG_ROLE_STATE.
 */
SG_API sg_tensor sg_batch_norm(sg_graph *g, sg_tensor x, sg_tensor gamma, sg_tensor beta,
                               sg_tensor running_mean, sg_tensor running_var, const sg_batch_norm_params *p);

/* ---- elementwise -------------------------------------------------------- */

SG_API sg_tensor sg_relu(sg_graph *g, sg_tensor x);
/** min(max(x, lo), hi). */
SG_API sg_tensor sg_clip(sg_graph *g, sg_tensor x, double lo, double hi);
/** clip(x, 0, 6). */
SG_API sg_tensor sg_relu6(sg_graph *g, sg_tensor x);
/** GELU; approximate = 0 for the erf form, 1 for the tanh approximation. */
SG_API sg_tensor sg_gelu(sg_graph *g, sg_tensor x, int approximate);
SG_API sg_tensor sg_sigmoid(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_tanh(sg_graph *g, sg_tensor x);

/** Binary ops with NumPy broadcasting; both operands have the same dtype. */
SG_API sg_tensor sg_add(sg_graph *g, sg_tensor a, sg_tensor b);
SG_API sg_tensor sg_sub(sg_graph *g, sg_tensor a, sg_tensor b);
SG_API sg_tensor sg_mul(sg_graph *g, sg_tensor a, sg_tensor b);
SG_API sg_tensor sg_div(sg_graph *g, sg_tensor a, sg_tensor b);

/** x + s, x * s, x ^ s with a scalar known at build time. */
SG_API sg_tensor sg_add_scalar(sg_graph *g, sg_tensor x, double s);
SG_API sg_tensor sg_mul_scalar(sg_graph *g, sg_tensor x, double s);
SG_API sg_tensor sg_pow_scalar(sg_graph *g, sg_tensor x, double s);

/** Elementwise math on floats: e^x, natural log, square root, 1/x and the
 * error function. */
SG_API sg_tensor sg_exp(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_log(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_sqrt(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_reciprocal(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_erf(sg_graph *g, sg_tensor x);
/** sin(x), cos(x) and acos(x) of a float tensor (libm's sinf, cosf and acosf on the CPU; acos is NaN
 * outside [-1, 1]). Gradients: cos(x)·dy, −sin(x)·dy and −dy / sqrt(1 − x²). */
SG_API sg_tensor sg_sin(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_cos(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_acos(sg_graph *g, sg_tensor x);
/** -x, |x| and the sign (-1, 0 or 1; NaN and -0 pass through) of a float or
 * integer tensor (integers wrap: -MIN is MIN). */
SG_API sg_tensor sg_neg(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_abs(sg_graph *g, sg_tensor x);
SG_API sg_tensor sg_sign(sg_graph *g, sg_tensor x);

/** Elementwise maximum / minimum with NumPy broadcasting, like
 * torch.maximum / torch.minimum: a NaN operand gives NaN. */
SG_API sg_tensor sg_max(sg_graph *g, sg_tensor a, sg_tensor b);
SG_API sg_tensor sg_min(sg_graph *g, sg_tensor a, sg_tensor b);
/** cond ? a : b elementwise; cond is bool, a and b share one dtype; all
 * three broadcast (NumPy). */
SG_API sg_tensor sg_where(sg_graph *g, sg_tensor cond, sg_tensor a, sg_tensor b);
/** Converts x to dtype `to`; both among f32, i32, i64 and bool. Floats to
 * integers truncate toward zero (NaN and out-of-range values give 0), to
 * bool is x != 0, i64 to i32 wraps. */
SG_API sg_tensor sg_cast(sg_graph *g, sg_tensor x, sg_dtype to);

/* ---- matrix products ---------------------------------------------------- */

/** NumPy matmul: 1-D operands are promoted, batch dims broadcast. */
SG_API sg_tensor sg_matmul(sg_graph *g, sg_tensor a, sg_tensor b);

typedef struct sg_gemm_params {
  size_t size;
  int trans_a, trans_b; /**< default 0 */
  double alpha, beta;   /**< default 1, 1 */
} sg_gemm_params;
#define SG_GEMM_PARAMS_INIT \
  { sizeof(sg_gemm_params), 0, 0, 1.0, 1.0 }
SG_API sg_gemm_params sg_gemm_params_init(void);

/** alpha * op(a) op(b) + beta * c for 2-D a, b; c (optional) broadcasts to [M,N]. */
SG_API sg_tensor sg_gemm(sg_graph *g, sg_tensor a, sg_tensor b, sg_tensor c, const sg_gemm_params *p);

/** Linear layer: x [N,in], w [out,in], bias [out] or SG_NO_TENSOR -> [N,out]. */
SG_API sg_tensor sg_linear(sg_graph *g, sg_tensor x, sg_tensor w, sg_tensor bias);

/* ---- pooling ------------------------------------------------------------ */

typedef struct sg_pool2d_params {
  size_t size;
  int64_t kernel[2];     /**< (h, w); required, default 1 */
  int64_t stride[2];     /**< (h, w); default 0 = same as kernel, like PyTorch (0 is "automatic" here) */
  int64_t padding[4];    /**< (top, left, bottom, right); at most half the kernel */
  int ceil_mode;         /**< default 0 */
  int count_include_pad; /**< average pooling only; default 1 (PyTorch's default) */
} sg_pool2d_params;
#define SG_POOL2D_PARAMS_INIT \
  { sizeof(sg_pool2d_params), {1, 1}, {0, 0}, {0, 0, 0, 0}, 0, 1 }
SG_API sg_pool2d_params sg_pool2d_params_init(void);

SG_API sg_tensor sg_max_pool2d(sg_graph *g, sg_tensor x, const sg_pool2d_params *p);
SG_API sg_tensor sg_avg_pool2d(sg_graph *g, sg_tensor x, const sg_pool2d_params *p);
/** Mean over H and W of x [N,C,H,W] -> [N,C,1,1]. */
SG_API sg_tensor sg_global_avg_pool(sg_graph *g, sg_tensor x);

/* ---- shape manipulation ------------------------------------------------- */

/** ONNX Flatten: [d0..d(axis-1)] x [d(axis)..] -> 2-D. axis may be negative. */
SG_API sg_tensor sg_flatten(sg_graph *g, sg_tensor x, int axis);
/** Reshape; one entry may be -1 (inferred) and 0 copies the input's dim. */
SG_API sg_tensor sg_reshape(sg_graph *g, sg_tensor x, int ndim, const int64_t *shape);
/** Permute dims: output dim i is input dim perm[i]. */
SG_API sg_tensor sg_transpose(sg_graph *g, sg_tensor x, int ndim, const int64_t *perm);
/** Concatenate n tensors of equal rank along `axis` (may be negative). */
SG_API sg_tensor sg_concat(sg_graph *g, int n, const sg_tensor *xs, int axis);
/** The range [start, start + length) of x along `axis` (may be negative): x[..., start:start+length, ...].
 * The range must be non-empty and inside the dim. Its gradient puts dy back in place with zeros around. */
SG_API sg_tensor sg_slice(sg_graph *g, sg_tensor x, int axis, int64_t start, int64_t length);

/* ---- softmax, losses, reductions ---------------------------------------- */

SG_API sg_tensor sg_softmax(sg_graph *g, sg_tensor x, int axis);
SG_API sg_tensor sg_log_softmax(sg_graph *g, sg_tensor x, int axis);

typedef enum sg_reduction {
  SG_REDUCTION_NONE = 0,
  SG_REDUCTION_MEAN = 1,
  SG_REDUCTION_SUM = 2,
} sg_reduction;

/** Cross entropy of logits [N,C] against class indices [N] (i32 or i64),
 * like torch.nn.functional.cross_entropy. Mean/sum give a scalar, none [N]. */
SG_API sg_tensor sg_cross_entropy(sg_graph *g, sg_tensor logits, sg_tensor labels, sg_reduction reduction);

/** Mean / sum over `axes` (all when naxes == 0); keepdims keeps them as 1. */
SG_API sg_tensor sg_reduce_mean(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims);
SG_API sg_tensor sg_reduce_sum(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims);

/**
 * Largest / smallest element over `axes` (all when naxes == 0; may be
 * negative, distinct), like torch.amax / torch.amin and ONNX ReduceMax /
 * ReduceMin; keepdims keeps the reduced dims as 1. x is a float type, i32
 * or i64 (the CPU backend takes f32, i32, i64); y has x's dtype. A NaN in a
 * group makes its result NaN, as in PyTorch. The gradient (float x) splits
 * dy evenly among the elements equal to the result (ties), as PyTorch's
 * amax/amin backward does: one reduce_max_backward op. Errors name the op:
 * SG_ERR_DTYPE, SG_ERR_ATTRIBUTE (an axis out of range or listed twice,
 * keepdims not 0 or 1). Any thread may call it on a graph no other thread
 * is using.
 */
SG_API sg_tensor sg_reduce_max(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims);
/** As sg_reduce_max, the smallest element. */
SG_API sg_tensor sg_reduce_min(sg_graph *g, sg_tensor x, int naxes, const int64_t *axes, int keepdims);

/**
 * Top k along the last axis (ONNX TopK, torch.topk; Mixtral's router): the
 * k largest elements of each row of x (f32, rank >= 1; largest 0: the
 * smallest), in order, returned as values [..., k]; their positions in the
 * row as i64 [..., k] in *indices (when not NULL; the op's output 1). Of
 * equal values the lower index comes first, as ONNX specifies (torch.topk
 * leaves the order of ties to its kernel), and NaN ranks above every
 * number, as in torch.topk. 1 <= k <= the last dim (SG_ERR_SHAPE). The values'
 * gradient is one topk_backward: dy added at those positions, 0 elsewhere;
 * the indices have none. Errors name the op. */
SG_API sg_tensor sg_topk(sg_graph *g, sg_tensor x, int64_t k, int largest, sg_tensor *indices);

/**
 * Layer normalization over the trailing dims of x from `axis` (may be
 * negative; -1 = the last dim), like torch.nn.LayerNorm and ONNX
 * LayerNormalization: y = (x - mean) / sqrt(var + epsilon) * scale + bias
 * with the biased variance. scale and bias (each SG_NO_TENSOR or of the
 * normalised dims x.dims[axis:]) default to 1 and 0. Outputs 1 and 2 are the
 * mean and 1 / sqrt(var + epsilon), of x's dims with the normalised ones 1.
 */
SG_API sg_tensor sg_layer_norm(sg_graph *g, sg_tensor x, sg_tensor scale, sg_tensor bias, int axis,
                               double epsilon);

/**
 * Embedding lookup, like torch.nn.Embedding and NumPy's table[ids]: the rows
 * of a float table [V, C] named by integer ids (i32 or i64, rank 0 to 7);
 * the result has ids' dims followed by C, in the table's dtype. The table
 * gets a gradient (repeated ids add up); the ids get none. An id outside
 * 0..V-1 fails the step with SG_ERR_RANGE naming the op, the id and V (no
 * wrap-around of negative ids, as PyTorch).
 */
SG_API sg_tensor sg_embedding(sg_graph *g, sg_tensor table, sg_tensor ids);

/**
 * Fused scaled-dot-product attention, as torch.nn.functional.
 * scaled_dot_product_attention: y = softmax(q k^T * scale + mask) v over the
 * last two dims, for q [..., T_q, d], k [..., T_k, d], v [..., T_k, d_v] of
 * dtype f32 with the same leading dims (e.g. [B, H]); y is [..., T_q, d_v].
 * scale 0 means 1/sqrt(d); otherwise it must be finite and > 0. causal 1
 * lets query i see keys 0..i only (needs T_q == T_k). Output 1 of the op is
 * lse [..., T_q], each query row's log-sum-exp of its scaled scores, which
 * the backward pass uses to recompute the probabilities: no [T_q, T_k]
 * tensor is kept (docs/ops.md). Gradients flow to q, k and v; lse gets
 * none. Errors (SG_ERR_DTYPE, SG_ERR_SHAPE, SG_ERR_ATTRIBUTE) name the op
 * and the shapes involved.
 */
SG_API sg_tensor sg_attention(sg_graph *g, sg_tensor q, sg_tensor k, sg_tensor v, double scale, int causal);

/**
 * sg_attention with dropout p in [0, 1) on the attention weights in
 * training: y = dropout(softmax(q k^T * scale + mask)) v, with the same
 * keep masks as sg_dropout(softmax, p, seed, 1) would draw on the [..., T_q,
 * T_k] weights (element index (head * T_q + query) * T_k + key), drawn again
 * in backward, never stored. In an inference pass (no backward) nothing is
 * dropped. p outside [0, 1) is SG_ERR_ATTRIBUTE.
 */
SG_API sg_tensor sg_attention_dropout(sg_graph *g, sg_tensor q, sg_tensor k, sg_tensor v, double scale,
                                      int causal, double p, uint64_t seed);

/**
 * Cumulative sum of x along `axis` (may be negative), like ONNX CumSum and
 * torch.cumsum (which keeps the dtype here: f32, i32 or i64, rank >= 1):
 * y[..., j, ...] = sum of x[..., i, ...] over i <= j. exclusive 1 leaves
 * element j itself out (i < j, so y starts with 0); reverse 1 sums from the
 * end instead (i >= j, or i > j when exclusive). f32 sums are accumulated
 * in double, as PyTorch's CPU kernel does; integer sums wrap around. The
 * gradient flows to a float x: the cumulative sum of dy in the other
 * direction, with the same exclusive. Errors (SG_ERR_DTYPE; SG_ERR_ATTRIBUTE
 * for an axis out of range or a flag not 0 or 1) name the op and the shape.
 * Any thread may call it on a graph no other thread is using.
 */
SG_API sg_tensor sg_cumsum(sg_graph *g, sg_tensor x, int axis, int exclusive, int reverse);

/** Inverted dropout with probability p in [0, 1); the mask (u8, output 1) is
 * drawn from `seed` and the step number, so runs are reproducible. */
SG_API sg_tensor sg_dropout(sg_graph *g, sg_tensor x, double p, uint64_t seed, int training);

/* ---- optimizer updates ---------------------------------------------------- */

typedef struct sg_sgd_params {
  size_t size;
  double momentum;     /**< default 0 */
  double dampening;    /**< default 0 */
  double weight_decay; /**< L2, added to the gradient; default 0 */
  int nesterov;        /**< default 0; needs momentum > 0 and dampening 0 */
} sg_sgd_params;
#define SG_SGD_PARAMS_INIT \
  { sizeof(sg_sgd_params), 0.0, 0.0, 0.0, 0 }
SG_API sg_sgd_params sg_sgd_params_init(void);

/**
 * In-place SGD update of `param` (role PARAMETER) from `grad` (same shape and
 * dtype) with learning rate `lr` (a scalar f32 tensor), as torch.optim.SGD.
 * `momentum_buf` (role OPTIMIZER_STATE, same shape) is required when
 * momentum > 0 and must be SG_NO_TENSOR otherwise. The op has no outputs.
 */
SG_API sg_status sg_sgd_update(sg_graph *g, sg_tensor param, sg_tensor grad, sg_tensor lr,
                               sg_tensor momentum_buf, const sg_sgd_params *p);

typedef struct sg_adamw_params {
  size_t size;
  double beta1, beta2; /**< default 0.9, 0.999 */
  double eps;          /**< default 1e-8 */
  double weight_decay; /**< decoupled; default 0.01 */
  /** Weight decay only for parameters of at least this many dims, none for the others (0, the default:
   * every parameter). 2 is GPT-2's and nanoGPT's rule, the usual two parameter groups of
   * torch.optim.AdamW: matrices and embeddings decay, biases and LayerNorm scales do not. */
  int decay_min_ndim;
} sg_adamw_params;
#define SG_ADAMW_PARAMS_INIT \
  { sizeof(sg_adamw_params), 0.9, 0.999, 1e-8, 0.01, 0 }
SG_API sg_adamw_params sg_adamw_params_init(void);

/**
 * In-place AdamW update, as torch.optim.AdamW. m and v (role OPTIMIZER_STATE,
 * shape of param) and step (role OPTIMIZER_STATE, scalar f32, the number of
 * updates done so far) are updated in place. The op has no outputs. Its
 * weight_decay attribute is p->weight_decay, or 0 when param has fewer dims
 * than p->decay_min_ndim (SG_ERR_ATTRIBUTE if that is negative).
 */
SG_API sg_status sg_adamw_update(sg_graph *g, sg_tensor param, sg_tensor grad, sg_tensor lr, sg_tensor m,
                                 sg_tensor v, sg_tensor step, const sg_adamw_params *p);

SG_EXTERN_C_END

#endif /* SGRT_OPS_H */
