/* Internal state of the ONNX importer (SPEC G5), shared by its files:
 *   onnx_load.c    entry points, protobuf wire check and unpack, model and
 *                  graph structure, topological order, outputs, finalize
 *   onnx_values.c  the value table (ONNX name -> tensor or constant),
 *                  initializer decoding, attributes, naming
 *   onnx_nodes.c   converters of the ops that become sgrt ops
 *   onnx_nodes_math.c  those of the elementwise math ops, Pow, Max/Min,
 *                  Where, Gelu, LayerNormalization and CumSum
 *   onnx_fold.c    constants and the shape computations folded at import
 *   onnx_slice.c   Slice and Split, also of run-time tensors
 *   onnx_nodes_mask.c  Equal, Less, Greater, LessOrEqual, GreaterOrEqual,
 *                  Not, Range, Trilu, Expand, Tile: the ops exporters write
 *                  to build attention masks (folded); Equal of integers,
 *                  the order comparisons, Not, Expand and Tile also at
 *                  run time
 *   onnx_einsum.c  Einsum, lowered to reduce_sum, transpose, reshape and
 *                  matmul
 *   onnx_external.c  initializer bytes kept in files next to the model
 *   onnx_sequence.c  SplitToSequence and SequenceAt, as a Split
 *   onnx_torch.c   which initializers of a PyTorch 2 (dynamo) export are
 *                  weights, from torch.export's metadata
 *   onnx_dims.c    the sizes of symbolic input dims (sg_onnx_params.dims
 *                  by name, then .batch)
 *   onnx_pad.c     Pad, as slices, concats and broadcasts
 *   onnx_resize.c  Resize, linear and nearest, as products by
 *                  interpolation matrices
 *   onnx_scatter.c ScatterND and ScatterElements: folded, or of run-time
 *                  tensors by constant indices (onnx_remap.c)
 *   onnx_remap.c   a run-time tensor's elements moved to positions known at
 *                  import (GatherElements, the scatters, a reversing Slice)
 *   onnx_topk.c    TopK, as the topk op
 *
 * Every ONNX tensor name maps to one value: a tensor of the graph being
 * built, a constant known at import time (initializers, Constant nodes and
 * folded shape computations; materialised as a graph tensor only when an op
 * consumes it), or an output that sgrt cannot provide (with the reason). */
#ifndef SG_ONNX_INTERNAL_H
#define SG_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "sgrt/onnx.h"

#include <onnx.pb-c.h>

/* ONNX TensorProto.DataType numbers used here. */
enum {
  OX_FLOAT = 1,
  OX_INT32 = 6,
  OX_INT64 = 7,
  OX_BOOL = 9,
  OX_DOUBLE = 11,
};

/* Opsets this importer implements (default domain). */
#define OX_OPSET_MIN 7
#define OX_OPSET_MAX 20

/* Limits on constants computed at import time, so that a hostile model
 * cannot make the importer allocate without bound (shape computations are a
 * few dozen bytes in real models). */
#define OX_FOLD_MAX_NUMEL ((int64_t)1 << 20)
#define OX_FOLD_MAX_BYTES ((size_t)64 << 20)
/* Deepest protobuf message nesting accepted (a model is 5 levels deep; a
 * subgraph adds 3 per level). */
#define OX_MAX_NESTING 64

typedef enum ox_kind {
  OX_V_TENSOR = 1,      /* a tensor of the graph */
  OX_V_CONST = 2,       /* known at import time */
  OX_V_UNAVAILABLE = 3, /* produced by a node, but not representable */
  OX_V_SEQUENCE = 4,    /* SplitToSequence's parts of a value, unmade */
} ox_kind;

typedef struct ox_value {
  const char *name; /* ONNX name (points into the unpacked model) */
  ox_kind kind;
  int32_t tensor;   /* OX_V_TENSOR; OX_V_CONST once materialised; else -1 */
  int32_t producer; /* node index, -1 for graph inputs and initializers */
  bool initializer;
  bool input;
  sg_role role; /* OX_V_CONST: role when materialised */
  /* OX_V_CONST: ONNX element type, shape and data. FLOAT data is float32,
   * every other type is widened to int64 (bool: 0/1). */
  int elem;
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  int64_t numel;
  const void *data; /* may be unaligned (raw_data): read with ox_f32/ox_i64 */
  const char *why;  /* OX_V_UNAVAILABLE: what is missing */
  /* OX_V_UNAVAILABLE: an empty tensor (a dim of 0, shaped ndim/dims), which Concat drops and every
   * other consumer refuses (sgrt has no empty tensors). */
  bool empty;
  /* tied: an initializer that is the data of initializer tie_of (or, with
   * tie_transposed, its transpose), materialised as that tensor (or a
   * transpose of it): a tie that an exporter's optimizer wrote out twice
   * (onnx_torch.c). */
  bool tied, tie_transposed;
  int32_t tie_of;
  /* OX_V_SEQUENCE: value seq_of cut along seq_axis into seq_len parts of
   * seq_sizes (in c->tmp); seq_squeeze: each part without that axis. */
  int32_t seq_of, seq_len;
  int seq_axis;
  bool seq_squeeze;
  const int64_t *seq_sizes;
} ox_value;

/* A file of external data, mapped for the length of one import. */
typedef struct ox_extfile {
  const char *location; /* as the model names it (points into the model) */
  const void *map;
  size_t size;
} ox_extfile;

/* One entry of sg_onnx_params.dims: a symbolic dim's name and size. */
typedef struct ox_named_dim {
  char name[128];
  int64_t size;
} ox_named_dim;

typedef struct ox_ctx {
  sg_graph *g;
  /* The model file's path (sg_onnx_import), where external data is looked
   * up next to; NULL for a model imported from memory. */
  const char *path;
  ox_extfile *ext;
  uint32_t n_ext, cap_ext;
  sg__arena tmp; /* importer temporaries: folded data, names, lists */
  const Onnx__ModelProto *model;
  const Onnx__GraphProto *graph;
  int64_t opset;
  int64_t batch;
  ox_named_dim *dims; /* sg_onnx_params.dims, parsed */
  uint32_t n_dims;
  int training; /* sg_onnx_params.training */
  /* sg_onnx_params.constants (NULL-terminated) or NULL */
  const char *const *constants;

  ox_value *values;
  uint32_t n_values, cap_values;
  int32_t *slots; /* open addressing: name -> value index; -1 empty */
  uint32_t cap_slots;

  /* Wanted final name of each tensor the importer created, and its
   * priority (2: an ONNX name, 1: derived from one). Applied at the end in
   * one renaming pass, so that names never collide while building. */
  const char **want;
  uint8_t *want_prio;
  uint32_t cap_want;
  /* ONNX node that created each op (-1: none), for op names. */
  int32_t *op_node;
  uint32_t cap_op_node;
  uint32_t tmp_names; /* counter for provisional names */

  size_t folded_bytes;
  int32_t node_index; /* node being converted, -1 outside nodes */
  const Onnx__NodeProto *node;
} ox_ctx;

/* ---- values, names, attributes (onnx_values.c) -------------------------- */

/* Value of an ONNX name, or NULL. "" is never a value (absent input). */
ox_value *sg__ox_find(ox_ctx *c, const char *name);
/* Adds a value named `name` (not yet present). */
sg_status sg__ox_add(ox_ctx *c, const char *name, ox_value **out);
/* The value of node input i: NULL when absent ("" or beyond n_input). */
ox_value *sg__ox_input(ox_ctx *c, const Onnx__NodeProto *n, int i);
/* Decodes an initializer or Constant tensor into a constant value. */
sg_status sg__ox_decode_tensor(ox_ctx *c, const Onnx__TensorProto *t, const char *what, ox_value *v);

/* The `bytes` bytes of an initializer kept in an external file
 * (onnx_external.c): its location checked, the file mapped (once per
 * import), the range checked. */
sg_status sg__ox_external(ox_ctx *c, const Onnx__TensorProto *t, const char *what, uint64_t bytes,
                          const void **data);
/* Roles of the float initializers of a torch.export (dynamo) export, from
 * its metadata (onnx_torch.c); nothing for other files. */
sg_status sg__ox_torch_roles(ox_ctx *c);

/* onnx_dims.c. Parses sg_onnx_params.dims ("NAME=SIZE" strings, NULL-terminated, or NULL) into *out
 * (count *n), allocated from `a`; with `a` NULL only validates (SG_ERR_INVALID_ARG naming the entry:
 * not NAME=SIZE, a size outside 1..2^56, a name given twice, more than 64 entries). `fn` prefixes
 * the messages. */
sg_status sg__ox_dims_parse(const char *fn, const char *const *dims, sg__arena *a, ox_named_dim **out,
                            uint32_t *n);
/* The size of dim d of graph input `input`, symbolic with dim_param `param` ("" when unnamed):
 * the dims entry of that name, else c->batch; neither is SG_ERR_SHAPE saying how to give it. */
sg_status sg__ox_dim_size(ox_ctx *c, const char *input, size_t d, const char *param, int64_t *out);
/* Before the graph inputs are read: a dims entry that names no graph input's dim_param is
 * SG_ERR_NOT_FOUND, listing the model's named symbolic dims (a misspelt name is reported as such,
 * not as the symbol it left unsized). */
sg_status sg__ox_dims_check_names(const ox_ctx *c);
/* Unmaps the external files of an import. */
void sg__ox_external_close(ox_ctx *c);

/* Element access to constant data (which may be unaligned). */
float sg__ox_f32(const ox_value *v, int64_t i);
int64_t sg__ox_i64(const ox_value *v, int64_t i);
/* Element i as a double, whatever the element type. */
double sg__ox_num(const ox_value *v, int64_t i);

/* The ONNX element type of a value: a constant's, or its tensor's dtype
 * (0 for none of FLOAT, INT32, INT64, BOOL). */
int sg__ox_elem_of(const ox_ctx *c, const ox_value *v);
/* The graph tensor of a value, materialising a constant (with its role)
 * on first use. `what` names the operand in messages ("input 1 (W)"). */
sg_status sg__ox_tensor(ox_ctx *c, ox_value *v, sg_tensor *out);
/* The element count of dims, or OX_FOLD_MAX_NUMEL + 1 (which
 * sg__ox_fold_alloc refuses) once it passes the fold limit or a dim is
 * negative: a shape from the file may be as large as int64 allows, and the
 * product must not overflow on its way to being refused. */
int64_t sg__ox_fold_numel(int ndim, const int64_t *dims);
/* Adds a constant value computed at import time: copies nothing, `data` must
 * live in c->tmp. Checks the fold limits. */
sg_status sg__ox_fold_alloc(ox_ctx *c, int64_t numel, size_t elem_size, void **data);

/* Output k of the current node becomes graph tensor t (named after it). */
sg_status sg__ox_set_tensor(ox_ctx *c, int k, sg_tensor t);
/* Output k of the current node is another value (Identity, ...). */
sg_status sg__ox_set_alias(ox_ctx *c, int k, const ox_value *src);
/* Output k is a constant: elem, shape, data in c->tmp. */
sg_status sg__ox_set_const(ox_ctx *c, int k, int elem, int ndim, const int64_t *dims, const void *data);
/* Output k cannot be provided; using it fails with `why`. */
sg_status sg__ox_set_unavailable(ox_ctx *c, int k, const char *why);
/* Output k is an empty tensor of those dims (one of them 0): unavailable, with `why`, except to
 * Concat, which leaves it out (Phi-3's q[..., rotary_dim:] when the rotary dim is the head dim). */
sg_status sg__ox_set_empty(ox_ctx *c, int k, int ndim, const int64_t *dims, const char *why);
/* True when the current node has output k with a name. */
bool sg__ox_has_output(const ox_ctx *c, int k);

/* Records the wanted final name of a tensor (see ox_ctx.want). */
sg_status sg__ox_want_name(ox_ctx *c, int32_t tensor, const char *name, int prio);
/* A unique name for a new source tensor: its sanitized ONNX name when that
 * is free, else a provisional one (the final names are set at the end). */
const char *sg__ox_tmp_name(ox_ctx *c, const char *onnx_name);
/* `msg` with every quoted tensor name replaced by its wanted (ONNX) name, so
 * builder messages name tensors as the model does; returns buf. */
const char *sg__ox_message(ox_ctx *c, const char *msg, char *buf, size_t cap);
/* Records that ops [first, g->n_ops) were created by the current node. */
sg_status sg__ox_note_ops(ox_ctx *c, uint32_t first);
/* Applies the wanted names of tensors and ops (end of import). */
sg_status sg__ox_apply_names(ox_ctx *c);
/* A valid sgrt name for an ONNX name, in c->tmp (control characters and
 * invalid UTF-8 become '_', too long names are cut). */
const char *sg__ox_sanitize(ox_ctx *c, const char *name);

/* Checks every attribute of the current node before any is read: a name,
 * at most one field holding a value, and that field the one of the declared
 * `type` (an INT carries `i`, INTS `ints`, FLOAT `f`, ...); SG_ERR_FORMAT
 * naming the attribute, its declared type and the field otherwise. */
sg_status sg__ox_check_attr_fields(ox_ctx *c);

/* Attributes of the current node. Each returns SG_OK with the default when
 * the attribute is absent, SG_ERR_ATTRIBUTE when it has another type than
 * the op expects. */
const Onnx__AttributeProto *sg__ox_attr(const ox_ctx *c, const char *name);
/* The attribute `name` if present (*out NULL when absent), which must have
 * type `type` (an ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__ value). */
sg_status sg__ox_attr_typed(ox_ctx *c, const char *name, int type, const Onnx__AttributeProto **out);
sg_status sg__ox_attr_int(ox_ctx *c, const char *name, int64_t def, int64_t *out);
sg_status sg__ox_attr_float(ox_ctx *c, const char *name, double def, double *out);
/* INTS: *n receives the count (0 when absent); at most `cap` values. */
sg_status sg__ox_attr_ints(ox_ctx *c, const char *name, int cap, int64_t *vals, int *n);
sg_status sg__ox_attr_string(ox_ctx *c, const char *name, const char *def, char *buf, size_t cap);
/* Fails with SG_ERR_UNSUPPORTED naming the first attribute of the current
 * node that is not in the NULL-terminated list `known`. */
sg_status sg__ox_check_attrs(ox_ctx *c, const char *const *known);

/* Error with the current node as context: "node 'NAME' (OpType): ...". */
sg_status sg__ox_node_error(ox_ctx *c, sg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Printable ONNX name for messages (NULL -> ""). */
const char *sg__ox_str(const char *s);
/* A float32 attribute value as the decimal the exporter most likely wrote
 * (1e-05 rather than 9.99999974737875e-06). */
double sg__ox_snap_float(double v);

/* ---- converters (onnx_nodes.c, onnx_fold.c) ----------------------------- */

typedef sg_status (*ox_convert_fn)(ox_ctx *c, const Onnx__NodeProto *n);

typedef struct ox_op {
  const char *op_type;
  ox_convert_fn convert;
  int min_inputs, max_inputs;
  int min_outputs, max_outputs;
} ox_op;

/* The converter of an op_type, or NULL. */
const ox_op *sg__ox_op_get(const char *op_type);
/* Table parts. */
extern const ox_op sg__ox_nn_ops[];
extern const int sg__ox_n_nn_ops;
extern const ox_op sg__ox_fold_ops[];
extern const int sg__ox_n_fold_ops;
extern const ox_op sg__ox_math_ops[];
extern const int sg__ox_n_math_ops;
extern const ox_op sg__ox_act_ops[];
extern const int sg__ox_n_act_ops;
extern const ox_op sg__ox_mask_ops[];
extern const int sg__ox_n_mask_ops;
extern const ox_op sg__ox_einsum_ops[];
extern const int sg__ox_n_einsum_ops;
extern const ox_op sg__ox_sequence_ops[];
extern const int sg__ox_n_sequence_ops;
extern const ox_op sg__ox_pad_ops[];
extern const int sg__ox_n_pad_ops;
extern const ox_op sg__ox_resize_ops[];
extern const int sg__ox_n_resize_ops;
extern const ox_op sg__ox_scatter_ops[];
extern const int sg__ox_n_scatter_ops;
extern const ox_op sg__ox_gather_ops[];
extern const int sg__ox_n_gather_ops;
extern const ox_op sg__ox_topk_ops[];
extern const int sg__ox_n_topk_ops;
extern const ox_op sg__ox_slice_ops[];
extern const int sg__ox_n_slice_ops;
/* Row-major strides of a shape, in elements. */
void sg__ox_strides(int ndim, const int64_t *dims, int64_t *st);

/* Normalises a possibly negative axis against rank; SG_ERR_ATTRIBUTE naming
 * `what` when out of range. */
sg_status sg__ox_axis(ox_ctx *c, int64_t axis, int rank, const char *what, int *out);
/* The static shape of a value (tensor or constant); fails for an
 * unavailable one. */
sg_status sg__ox_shape(ox_ctx *c, const ox_value *v, int *ndim, int64_t *dims);
/* An import-time constant input holding integers (shape, axes, ...): its
 * values into vals (at most cap). SG_ERR_UNSUPPORTED if it is computed at
 * run time, SG_ERR_DTYPE if it does not hold integers. */
sg_status sg__ox_const_ints(ox_ctx *c, const ox_value *v, const char *what, int cap, int64_t *vals, int *n);
/* As sg__ox_const_ints, for one number of any type (Clip bounds, ratios). */
sg_status sg__ox_const_scalar(ox_ctx *c, const ox_value *v, const char *what, double *out);
/* SG_OK when v is a foldable constant; else SG_ERR_UNSUPPORTED naming v
 * (`what`: "input", "data", ...) and why (computed at run time, a
 * parameter, unavailable), for ops that sgrt only folds. */
sg_status sg__ox_need_foldable(ox_ctx *c, const ox_value *v, const char *what);
/* SG_ERR_UNSUPPORTED: the node uses v, a value sgrt cannot provide (its why). */
sg_status sg__ox_unavailable(ox_ctx *c, const ox_value *v);
/* Bytes per element of folded data of ONNX type elem: float32, else int64. */
static inline size_t sg__ox_elem_size(int elem) { return elem == OX_FLOAT ? 4 : 8; }
/* The Gather converter (onnx_gather.c). */
sg_status sg__ox_cv_gather(ox_ctx *c, const Onnx__NodeProto *n);
/* Output k of the current node is `count` elements of data from `first`
 * along axis (folded for a constant, a slice of a tensor), without that axis
 * when squeeze (a reshape). */
sg_status sg__ox_take_range(ox_ctx *c, int k, ox_value *data, int axis, int64_t first, int64_t count,
                            bool squeeze);
/* A runtime reshape of value v to dims (Squeeze, Unsqueeze, Reshape). */
sg_status sg__ox_reshape(ox_ctx *c, ox_value *v, int ndim, const int64_t *dims, sg_tensor *out);
/* The CPU backend moves no bool tensors (reshape, slice, concat,
 * transpose, broadcast_to take f32, i32, i64), yet masks computed at run
 * time from a BOOL graph input pass through such ops: sg__ox_bool_in casts
 * a bool tensor *t to f32 (0 and 1, exact) and says so in *was_bool;
 * sg__ox_bool_out casts the op's result back to bool when it was. */
sg_status sg__ox_bool_in(ox_ctx *c, sg_tensor *t, bool *was_bool);
sg_status sg__ox_bool_out(ox_ctx *c, sg_tensor *t, bool was_bool);
/* *out (dims yd) whose element p is element pos[p] (a flat position, valid:
 * the caller checked the indices) of the run-time tensor x, float or bool:
 * an embedding lookup of x's elements (onnx_remap.c). */
sg_status sg__ox_remap(ox_ctx *c, sg_tensor x, const int64_t *pos, int ynd, const int64_t *yd,
                       sg_tensor *out);
/* The flat positions in data (dims dd, rank r) that GatherElements reads and ScatterElements writes for
 * each element of indices idx (dims id, checked against dd by the caller): the index along axis (counted
 * from the end when negative; out of range: SG_ERR_RANGE), the element's own coordinates elsewhere. */
sg_status sg__ox_elements_positions(ox_ctx *c, const ox_value *idx, int r, const int64_t *id,
                                    const int64_t *dd, int axis, int64_t *flat);
/* After a builder call: SG_OK when t is a tensor, else the graph's error
 * with the current node as context. */
sg_status sg__ox_built(ox_ctx *c, sg_tensor t);
/* A constant whose data may be computed with at import time: not a float
 * initializer, which is a trainable parameter (or state). */
bool sg__ox_foldable(const ox_value *v);
/* Folds a binary op ('+', '-', '*', '/'; Mod: '%' the sign of the divisor
 * (integers), 'f' the dividend's (fmod); '&', '|', '^' And, Or, Xor of
 * bools; the comparisons '=' Equal, '<'
 * Less, '>' Greater, 'l' LessOrEqual, 'g' GreaterOrEqual give bools; 'm'
 * and 'M' are Min and Max)
 * when both operands are foldable constants of one type, with NumPy
 * broadcasting; *folded says whether it did. */
sg_status sg__ox_fold_binary(ox_ctx *c, char op, const ox_value *a, const ox_value *b, bool *folded);

/* dims as "[2,3,4]" into buf[cap] (always terminated; cut short when it
 * does not fit); returns buf, for error messages. */
const char *sg__onnx_dims_text(char *buf, size_t cap, int ndim, const int64_t *dims);

/* The arguments of a Reduce* node: `axes` (an attribute, or an optional
 * import-time constant input from opset `axes_input_opset` on; *na of them),
 * keepdims (default 1; 0 or 1), *noop when no axes are given and
 * noop_with_empty_axes is set (the node is then its input), and *x its data.
 * Attributes it does not know are refused, as every converter does. */
sg_status sg__ox_reduce_args(ox_ctx *c, const Onnx__NodeProto *n, int64_t axes_input_opset, int64_t *axes,
                             int *na, int64_t *keepdims, bool *noop, ox_value **x);
/* A reduction of an import-time constant over axes (none: all), folded (onnx_nodes_math.c). kind: 'M'
 * max, 'm' min, 's' sum, 'a' mean (floats only); `op` names the ONNX op in messages. */
sg_status sg__ox_fold_reduce(ox_ctx *c, const ox_value *x, const int64_t *axes, int na, int64_t keepdims,
                             char kind, const char *op);

#endif /* SG_ONNX_INTERNAL_H */
