/* Internal representation of a graph. Shared by the builder, verifier, hash,
 * .sgg reader/writer and later layers; the public API only sees handles. */
#ifndef SG_GRAPH_INTERNAL_H
#define SG_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "sgrt/graph.h"
#include "sgrt/ops.h"

/* Largest element count of one tensor: keeps every byte size (numel * 8)
 * representable in int64/size_t and rejects absurd shapes from files. */
#define SG__MAX_NUMEL ((int64_t)1 << 56)
/* Largest number of tensors, ops, inputs per op and attribute values: far
 * above any real model, low enough that counts times record sizes never
 * overflow. */
#define SG__MAX_TENSORS (1u << 24)
#define SG__MAX_OPS (1u << 24)
#define SG__MAX_OP_IO 4096
#define SG__MAX_ATTR_INTS 4096
#define SG__MAX_NAME 4096
/* Bound on paddings and similar attributes, so arithmetic on them is safe. */
#define SG__MAX_ATTR_DIM ((int64_t)1 << 30)

typedef struct sg__tensor {
  const char *name; /* arena */
  sg_dtype dtype;
  sg_role role;
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  int32_t producer; /* op index or -1 */
  const void *data; /* initializer in the arena or in the file mapping, or NULL */
  size_t nbytes;    /* numel * dtype size */
} sg__tensor;

typedef struct sg__op {
  sg_op_kind kind;
  const char *name; /* arena */
  int n_inputs, n_outputs, n_attrs;
  int32_t *inputs;  /* arena; -1 marks an absent optional input */
  int32_t *outputs; /* arena */
  sg_attr *attrs;   /* arena; in the kind's schema order, names point to the schema */
} sg__op;

/* Open-addressing map from names to ids (tensors or ops). */
typedef struct sg__name_map {
  int32_t *slots; /* id or -1 */
  uint32_t cap;   /* power of two or 0 */
  uint32_t count;
} sg__name_map;

struct sg_graph {
  sg__arena arena;
  sg__tensor *tensors;
  uint32_t n_tensors, cap_tensors;
  sg__op *ops;
  uint32_t n_ops, cap_ops;
  int32_t *inputs; /* tensors of role INPUT, in creation order */
  uint32_t n_inputs, cap_inputs;
  int32_t *outputs; /* marked outputs */
  uint32_t n_outputs, cap_outputs;
  sg__name_map tensor_names;
  sg__name_map op_names;
  sg_status error; /* first builder error (sticky) */
  /* Its message, as sg_last_error() had it: later calls (finalize, verify)
   * report it again, so a program that checks once at the end, as api.md
   * advises, still prints which op failed and with which shapes. */
  char error_message[1024];
  bool finalized;
  /* On while sg_graph_backward() appends ops: every op output it creates,
   * including those of ordinary ops (gemm, add, reshape, ...), gets role
   * GRADIENT. */
  bool grad_mode;
  /* Set when loaded from a .sgg file: initializers point into this mapping. */
  void *mapping;
  size_t mapping_size;
};

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
 * (room for SG__MAX_OUTPUTS) and their number into *n_outs. On a mismatch it
 * returns the error through sg__error with a message naming the op and the
 * shapes involved. Inputs are valid tensor ids or -1 where optional. */
#define SG__MAX_OUTPUTS 4
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
} sg__op_def;

/* The highest op kind number this library knows (kinds are 1..LAST). */
#define SG__OP_KIND_LAST SG_OP_SLICE

/* NULL for an unknown kind. */
const sg__op_def *sg__op_def_get(sg_op_kind kind);
/* Bit i set: this op updates input i in place (depends on attributes). */
uint32_t sg__op_mutated_inputs(const sg__op *op);

/* Attribute accessors by schema index (attributes are canonical). */
static inline int64_t sg__attr_i(const sg__op *op, int k) { return op->attrs[k].i; }
static inline double sg__attr_f(const sg__op *op, int k) { return op->attrs[k].f; }
static inline const int64_t *sg__attr_ints(const sg__op *op, int k) { return op->attrs[k].ints; }
static inline int sg__attr_count(const sg__op *op, int k) { return op->attrs[k].count; }

/* Runs the generic constructor and returns output 0 (typed builders). */
sg_tensor sg__build1(sg_graph *g, sg_op_kind kind, int n_inputs, const sg_tensor *inputs, int n_attrs,
                     const sg_attr *attrs);
/* Checks a params struct's size field; records the error on the graph. */
bool sg__params_ok(sg_graph *g, size_t given, size_t need, const char *fn, const char *init);
/* Attribute literals for builders. */
#define SG__AI(n, v) ((sg_attr){.name = (n), .type = SG_ATTR_INT, .i = (v)})
#define SG__AF(n, v) ((sg_attr){.name = (n), .type = SG_ATTR_FLOAT, .f = (v)})
#define SG__AS(n, c, p) ((sg_attr){.name = (n), .type = SG_ATTR_INTS, .count = (c), .ints = (p)})

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

/* ---- graph internals (graph.c) ----------------------------------------- */

/* Records st as the graph's sticky error (the first one wins) with the
 * message that the failing call just set through sg__error(); returns st. */
sg_status sg__graph_fail(sg_graph *g, sg_status st);
/* Sets the last error to the graph's sticky error and its first message. */
sg_status sg__graph_sticky_error(const sg_graph *g);

/* Appends a tensor without validation beyond memory safety; `name` is copied.
 * Used by the builder (after validating) and the .sgg reader (verified after). */
sg_status sg__graph_push_tensor(sg_graph *g, const sg__tensor *t, int32_t *id);
/* Appends an op whose arrays are already in the graph's arena. */
sg_status sg__graph_push_op(sg_graph *g, const sg__op *op);

/* Name maps. sg__names_insert fails with SG_ERR_DUPLICATE (and sets no
 * message) when the name is taken. */
int32_t sg__tensor_lookup(const sg_graph *g, const char *name);
int32_t sg__op_lookup(const sg_graph *g, const char *name);
sg_status sg__names_insert(sg_graph *g, bool ops, int32_t id);
void sg__names_clear(sg__name_map *m);

/* Canonicalises attributes against a kind's schema: matches names, checks
 * types, fills defaults, copies INTS into the arena. */
sg_status sg__canon_attrs(sg_graph *g, const sg__op_def *def, const char *op_name, int n_attrs,
                          const sg_attr *attrs, sg_attr **out);

/* ---- helpers for inference and messages (infer_util.c) ----------------- */

int64_t sg__numel(int ndim, const int64_t *dims);
/* Element count with every dim >= 1 and the product <= SG__MAX_NUMEL; false
 * otherwise (no overflow on any input). */
bool sg__numel_checked(int ndim, const int64_t *dims, int64_t *out);
bool sg__is_float(sg_dtype dt);
bool sg__is_int(sg_dtype dt);
bool sg__dtype_valid(sg_dtype dt);
/* NULL when `s` is a valid name (1..4095 bytes of UTF-8 without control
 * characters), else what is wrong with it. Names end up in DOT files, JSON
 * and terminals, so they are checked at every boundary. */
const char *sg__name_problem(const char *s);
bool sg__role_valid(sg_role r);
/* "[2,3,4] f32" into buf (at least SG__SHAPE_STR bytes). */
#define SG__SHAPE_STR 240
const char *sg__shape_str(char *buf, sg_dtype dt, int ndim, const int64_t *dims);
const char *sg__tensor_str(char *buf, const sg_graph *g, int32_t id);
/* "'name' [2,3,4] f32" into buf (SG__SHAPE_STR bytes). */
const char *sg__tstr(char *buf, const sg__tensor *t);
const sg__tensor *sg__in(const sg_graph *g, const sg__op *op, int i); /* NULL if absent */
/* Copies a tensor's dtype and shape into an sg__shape. */
void sg__shape_of(const sg__tensor *t, sg__shape *s);
/* NumPy broadcast of two shapes; SG_ERR_SHAPE with both shapes named. */
sg_status sg__broadcast(const sg__op *op, const sg__tensor *a, const sg__tensor *b, sg__shape *out);
/* Normalises axis into [0, ndim); false when out of range. */
bool sg__norm_axis(int64_t axis, int ndim, int *out);

/* Shape-inference error with the op's kind and name prefixed. */
sg_status sg__op_error(const sg__op *op, sg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* SG_GRAPH_INTERNAL_H */
