/**
 * @file graph.h
 * The graph IR: tensors with a name, dtype, static shape and role;
 * ops with a kind, attributes and ordered inputs and outputs; a DAG that is
 * immutable once finalized.
 *
 * A graph is built with the functions of ops.h, which infer shapes and dtypes
 * as they go, or loaded from a .sgg file (sgg.h). Builder errors are sticky
 * (like ggml or cairo): a failing builder call returns ::SG_NO_TENSOR, records
 * the first error on the graph and in sg_last_error(), and every later call
 * that receives SG_NO_TENSOR fails quietly. sg_graph_finalize() returns that
 * first error, so a program may check once at the end.
 *
 * Threads: a graph may be used from one thread at a time while it is being
 * built; once finalized, all read-only queries may run concurrently.
 */
#ifndef SGRT_GRAPH_H
#define SGRT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/export.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

/** Maximum rank of a tensor. */
#define SG_MAX_DIMS 8

/** Element types. The numbers are stored in .sgg files: append-only. */
typedef enum sg_dtype {
  SG_F32 = 1,
  SG_F16 = 2,
  SG_BF16 = 3,
  SG_I32 = 4,
  SG_I64 = 5,
  SG_U8 = 6,
  SG_BOOL = 7,
} sg_dtype;

/** What a tensor is for. Stored in .sgg files: append-only. */
typedef enum sg_role {
  SG_ROLE_INPUT = 1,           /**< fed by the caller every step (images, labels, learning rate) */
  SG_ROLE_PARAMETER = 2,       /**< trainable weight */
  SG_ROLE_CONSTANT = 3,        /**< fixed data known at build time */
  SG_ROLE_ACTIVATION = 4,      /**< produced by an op in the forward pass */
  SG_ROLE_GRADIENT = 5,        /**< produced by a backward op */
  SG_ROLE_OPTIMIZER_STATE = 6, /**< momentum, Adam moments, step counts */
  SG_ROLE_STATE = 7,           /**< non-trainable buffer updated by an op (batch-norm running stats) */
} sg_role;

/** Op kinds. The numbers are stored in .sgg files: append-only. */
typedef enum sg_op_kind {
  SG_OP_CONV2D = 1,
  SG_OP_BATCH_NORM = 2,
  SG_OP_RELU = 3,
  SG_OP_CLIP = 4, /**< relu6 is clip(0, 6) */
  SG_OP_GELU = 5,
  SG_OP_SIGMOID = 6,
  SG_OP_TANH = 7,
  SG_OP_ADD = 8,
  SG_OP_SUB = 9,
  SG_OP_MUL = 10,
  SG_OP_DIV = 11,
  SG_OP_ADD_SCALAR = 12,
  SG_OP_MUL_SCALAR = 13,
  SG_OP_POW_SCALAR = 14,
  SG_OP_MATMUL = 15,
  SG_OP_GEMM = 16, /**< linear layers: alpha * op(A) op(B) + beta * C */
  SG_OP_MAX_POOL2D = 17,
  SG_OP_AVG_POOL2D = 18,
  SG_OP_GLOBAL_AVG_POOL = 19,
  SG_OP_FLATTEN = 20,
  SG_OP_RESHAPE = 21,
  SG_OP_TRANSPOSE = 22,
  SG_OP_CONCAT = 23,
  SG_OP_SOFTMAX = 24,
  SG_OP_LOG_SOFTMAX = 25,
  SG_OP_CROSS_ENTROPY = 26,
  SG_OP_REDUCE_MEAN = 27,
  SG_OP_REDUCE_SUM = 28,
  SG_OP_DROPOUT = 29,
  SG_OP_SGD_UPDATE = 30,
  SG_OP_ADAMW_UPDATE = 31,
  /* Backward ops, appended by sg_graph_backward() (see docs/ops.md). */
  SG_OP_CONV2D_BACKWARD_DATA = 32,
  SG_OP_CONV2D_BACKWARD_WEIGHT = 33,
  SG_OP_BATCH_NORM_BACKWARD = 34,
  SG_OP_RELU_BACKWARD = 35,
  SG_OP_CLIP_BACKWARD = 36,
  SG_OP_GELU_BACKWARD = 37,
  SG_OP_SIGMOID_BACKWARD = 38,
  SG_OP_TANH_BACKWARD = 39,
  SG_OP_MAX_POOL2D_BACKWARD = 40,
  SG_OP_AVG_POOL2D_BACKWARD = 41,
  SG_OP_SOFTMAX_BACKWARD = 42,
  SG_OP_LOG_SOFTMAX_BACKWARD = 43,
  SG_OP_CROSS_ENTROPY_BACKWARD = 44,
  SG_OP_DROPOUT_BACKWARD = 45,
  SG_OP_SUM_TO = 46,       /**< sum broadcast dims away: the adjoint of broadcasting */
  SG_OP_BROADCAST_TO = 47, /**< NumPy broadcast to a shape: the adjoint of a reduction */
  SG_OP_SLICE = 48,        /**< a contiguous range along one axis: the adjoint of concat */
  /* Elementwise math, min/max, select and casts (issue 17). */
  SG_OP_EXP = 49,
  SG_OP_LOG = 50,
  SG_OP_SQRT = 51,
  SG_OP_RECIPROCAL = 52,
  SG_OP_NEG = 53,
  SG_OP_ABS = 54,
  SG_OP_SIGN = 55, /**< -1, 0 or 1 (NaN and -0 pass through): the derivative of abs */
  SG_OP_ERF = 56,
  SG_OP_MAX = 57,   /**< elementwise maximum of two operands, with broadcasting */
  SG_OP_MIN = 58,   /**< elementwise minimum of two operands, with broadcasting */
  SG_OP_WHERE = 59, /**< cond ? a : b, elementwise with broadcasting */
  SG_OP_CAST = 60,  /**< convert to another dtype */
  SG_OP_LAYER_NORM = 61,
  SG_OP_LAYER_NORM_BACKWARD = 62,
  /* Embedding lookup (token and position embeddings). */
  SG_OP_EMBEDDING = 63,          /**< rows of a table by integer ids: table[ids] */
  SG_OP_EMBEDDING_BACKWARD = 64, /**< the table's gradient: dy rows added into the rows named by ids */
  /* Fused scaled-dot-product attention (memory-efficient: no [T, T] tensor). */
  SG_OP_ATTENTION = 65,          /**< softmax(q k^T scale [+ causal mask]) v, and each row's log-sum-exp */
  SG_OP_ATTENTION_BACKWARD = 66, /**< dq, dk, dv from dy, the probabilities recomputed from lse */
  /* Running sums (ONNX CumSum: RoBERTa's position ids). */
  SG_OP_CUMSUM = 67, /**< cumulative sum along one axis, inclusive or exclusive, either direction */
  /* Max and min over axes (ONNX ReduceMax, ReduceMin; torch.amax, torch.amin). */
  SG_OP_REDUCE_MAX = 68,          /**< largest element over axes; NaN if any is NaN */
  SG_OP_REDUCE_MIN = 69,          /**< smallest element over axes; NaN if any is NaN */
  SG_OP_REDUCE_MAX_BACKWARD = 70, /**< dx of reduce_max (min 0) or reduce_min (min 1): dy split among ties */
  /* The k largest or smallest along the last axis (ONNX TopK; Mixtral's router). */
  SG_OP_TOPK = 71, /**< values and i64 indices of each row's top k, in order, ties to the lower index */
  SG_OP_TOPK_BACKWARD = 72, /**< dx of topk: dy added at the positions the indices name, 0 elsewhere */
  /* Trigonometry at run time (rotary tables from run-time positions; YOSO's angles). */
  SG_OP_SIN = 73,  /**< sin(x), f32 */
  SG_OP_COS = 74,  /**< cos(x), f32 */
  SG_OP_ACOS = 75, /**< acos(x), f32: NaN outside [-1, 1] */
} sg_op_kind;

/** Opaque graph. */
typedef struct sg_graph sg_graph;

/** A tensor of a graph, by index. Small and passed by value, like ggml's
 * tensor pointers but safe to store and to pass through ctypes. */
typedef struct sg_tensor {
  int32_t id; /**< index into the graph's tensors; negative = none */
} sg_tensor;

/** "No tensor": returned by failing builder calls and used for absent
 * optional inputs (e.g. a convolution without bias). */
#define SG_NO_TENSOR ((sg_tensor){-1})

/** Creates an empty graph. @param out receives the graph; NULL on failure. */
SG_API sg_status sg_graph_create(sg_graph **out);

/**
 * Makes an editable (not finalized) copy of a graph, initializers included.
 * A loaded .sgg graph is finalized and immutable; to train it, clone it, then
 * add a loss, sg_graph_backward() and an optimizer, and finalize the copy.
 * @return SG_OK; SG_ERR_NO_MEMORY; the source's builder error if it has one.
 */
SG_API sg_status sg_graph_clone(const sg_graph *g, sg_graph **out);

/** Destroys a graph and everything it owns. Accepts NULL. */
SG_API void sg_graph_destroy(sg_graph *g);

/** First error recorded by a builder call on this graph (SG_OK if none). */
SG_API sg_status sg_graph_status(const sg_graph *g);

/**
 * Runs the verifier (acyclicity, arity, dtypes, shapes, attributes, unique
 * names, dangling tensors) and freezes the graph: later builder calls fail with
 * SG_ERR_STATE. Returns the first sticky builder error if there was one, and
 * sets sg_last_error() to that error's own message (the op and the shapes),
 * whatever calls came between.
 */
SG_API sg_status sg_graph_finalize(sg_graph *g);

/** Runs the verifier without freezing. Every error names the op or tensor. */
SG_API sg_status sg_graph_verify(const sg_graph *g);

/** 1 when finalized, else 0. */
SG_API int sg_graph_is_finalized(const sg_graph *g);

/* ---- sources: tensors that no op produces ------------------------------- */

/**
 * Adds a source tensor. `data` (may be NULL for inputs and for parameters and
 * state initialised later) is copied into the graph; it must hold exactly the
 * tensor's byte size. Names must be unique within the graph.
 * Roles ACTIVATION and GRADIENT are produced by ops and are rejected here.
 */
SG_API sg_tensor sg_graph_add_tensor(sg_graph *g, const char *name, sg_dtype dtype, sg_role role, int ndim,
                                     const int64_t *dims, const void *data);

/** Shorthands for sg_graph_add_tensor with the role in their name. */
SG_API sg_tensor sg_input(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims);
SG_API sg_tensor sg_parameter(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                              const void *data);
SG_API sg_tensor sg_constant(sg_graph *g, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                             const void *data);

/** Renames a tensor (e.g. an op's output to "loss"). SG_ERR_DUPLICATE if taken. */
SG_API sg_status sg_tensor_set_name(sg_graph *g, sg_tensor t, const char *name);

/** Marks a tensor as a graph output (kept alive and readable after a step). */
SG_API sg_status sg_graph_mark_output(sg_graph *g, sg_tensor t);

/* ---- queries ------------------------------------------------------------ */

/** Plain description of a tensor; pointers stay valid while the graph lives.
 * Fixed layout (no `size`: callers pass it uninitialised), never grows;
 * docs/api.md "Versions of structs". The same holds for sg_op_info and
 * sg_attr. */
typedef struct sg_tensor_info {
  const char *name;
  sg_dtype dtype;
  sg_role role;
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  int64_t numel;    /**< product of dims (1 for a scalar) */
  size_t nbytes;    /**< numel * element size */
  const void *data; /**< initializer, or NULL */
  int32_t producer; /**< index of the op that produces it, or -1 */
} sg_tensor_info;

/** Plain description of an op; arrays stay valid while the graph lives. */
typedef struct sg_op_info {
  sg_op_kind kind;
  const char *name;
  int n_inputs;
  const int32_t *inputs; /**< tensor ids; -1 for an absent optional input */
  int n_outputs;
  const int32_t *outputs;
  int n_attrs;
} sg_op_info;

SG_API int32_t sg_graph_num_tensors(const sg_graph *g);
SG_API int32_t sg_graph_num_ops(const sg_graph *g);
SG_API sg_status sg_graph_tensor_info(const sg_graph *g, sg_tensor t, sg_tensor_info *out);
SG_API sg_status sg_graph_op_info(const sg_graph *g, int32_t op, sg_op_info *out);
/** Finds a tensor by name. SG_ERR_NOT_FOUND if there is none. */
SG_API sg_status sg_graph_find_tensor(const sg_graph *g, const char *name, sg_tensor *out);
/** Graph inputs (role INPUT, in creation order) and marked outputs. */
SG_API int32_t sg_graph_num_inputs(const sg_graph *g);
SG_API int32_t sg_graph_num_outputs(const sg_graph *g);
SG_API sg_tensor sg_graph_input(const sg_graph *g, int32_t i);
SG_API sg_tensor sg_graph_output(const sg_graph *g, int32_t i);

/** Attribute value types. Stored in .sgg files: append-only. */
typedef enum sg_attr_type {
  SG_ATTR_INT = 1,   /**< one int64 */
  SG_ATTR_FLOAT = 2, /**< one double */
  SG_ATTR_INTS = 3,  /**< array of int64 */
} sg_attr_type;

/** One attribute of an op: a name and one value of `type`. Used both to
 * pass attributes to sg_graph_add_op() and to read them back. */
typedef struct sg_attr {
  const char *name;
  sg_attr_type type;
  int64_t i;           /**< SG_ATTR_INT */
  double f;            /**< SG_ATTR_FLOAT */
  int count;           /**< SG_ATTR_INTS: number of values */
  const int64_t *ints; /**< SG_ATTR_INTS: values (read back: owned by the graph) */
} sg_attr;

/** Reads attribute `index` (0 .. n_attrs-1) of an op. Attributes are kept in
 * the op kind's canonical order with defaults filled in. */
SG_API sg_status sg_graph_op_attr(const sg_graph *g, int32_t op, int index, sg_attr *out);

/** Name of an op kind ("conv2d"), dtype ("f32") or role ("parameter");
 * "?" when out of range. */
SG_API const char *sg_op_kind_name(sg_op_kind kind);
SG_API const char *sg_dtype_name(sg_dtype dtype);
SG_API const char *sg_role_name(sg_role role);
/** Bytes per element; 0 for an unknown dtype. */
SG_API size_t sg_dtype_size(sg_dtype dtype);

/* ---- content hash --------------------------------------------------------- */

/** Flags of sg_graph_hash. */
enum { SG_HASH_WEIGHTS = 1 /**< include initializer bytes */ };

/**
 * Stable 64-bit content hash of the structure, names, attributes, shapes,
 * dtypes and roles (and initializer bytes with SG_HASH_WEIGHTS). Equal for a
 * graph and its .sgg round trip; independent of memory addresses, host and
 * library build. Keys the cross-rank consistency check.
 */
SG_API sg_status sg_graph_hash(const sg_graph *g, unsigned flags, uint64_t *out);

/* ---- Graphviz ------------------------------------------------------------- */

/** Writes a finalized graph as Graphviz DOT to `path` ("-" for stdout):
 * ops as boxes, source tensors as ellipses coloured by role, edges labelled
 * with shapes. SG_ERR_STATE if not finalized, SG_ERR_IO on a write error. */
SG_API sg_status sg_graph_write_dot(const sg_graph *g, const char *path);

SG_EXTERN_C_END

#endif /* SGRT_GRAPH_H */
