/* The graph layer's interface to the layers above it (SG's IR): the
 * tensors, ops and graph a finalized sg_graph holds, and the read-only
 * queries and message helpers that compile, backend, runtime, partition,
 * onnx and parallel use. The public API only sees handles; the op table's
 * schemas and the builder's internals stay in graph/graph_internal.h. */
#ifndef SG_GRAPH_GRAPH_H
#define SG_GRAPH_GRAPH_H

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

/* The highest op kind number this library knows (kinds are 1..LAST). */
#define SG__OP_KIND_LAST SG_OP_ACOS
/* Most outputs an op kind has. */
#define SG__MAX_OUTPUTS 4

/* Properties of an op kind (sg__op_flags), kept in the op table
 * (graph_internal.h's sg__op_def.flags, set next to each kind's definition)
 * so that the layers above ask instead of listing kinds. */
/* out[i] is computed from the operands' elements at i (after broadcasting;
 * dropout also from a random draw for i): the activations, add/sub/mul/div,
 * the scalar ops, dropout and the backward ops of the activations and of
 * dropout. */
#define SG__OP_ELEMENTWISE (1u << 0)
/* Exactly one tensor operand (min = max = 1 input). Derived from the
 * kind's arity by sg__op_flags, never set in the table. */
#define SG__OP_UNARY (1u << 1)
/* Output 0 may be written over input 0's buffer: every kernel of the kind
 * stays correct with out[0] == in[0]. sg__op_inplace_input (backend.h) adds
 * the per-op condition (same shape and dtype, or same bytes for a view).
 * The elementwise kinds but dropout, and the views. */
#define SG__OP_INPLACE_INPUT0 (1u << 2)
/* Output 0 is input 0's bytes under another shape (flatten, reshape). */
#define SG__OP_VIEW (1u << 3)
/* Elementwise, independent of the element's position, and all-zero operands
 * give zero: the op runs unchanged on any storage layout its operands share
 * (same dims, zero padding included), e.g. the CPU backend's channel-blocked
 * layouts. Marked where that has been checked with the backends' kernels:
 * relu, relu_backward, add, sub, mul, mul_scalar. (tanh, gelu and the
 * backward ops of clip, gelu, sigmoid and tanh qualify mathematically too;
 * marking one changes which tensors the CPU backend blocks.) */
#define SG__OP_LAYOUT_AGNOSTIC (1u << 4)
/* A sum of input 0 over some of its dims into output 0, in the order of
 * cpu_reduce.c (reduce_sum, reduce_mean, sum_to): an f32 one may end a
 * fused chain (compile/fuse.c). */
#define SG__OP_SUM (1u << 5)

/* The SG__OP_* flags of `kind`; 0 for an unknown kind. */
uint32_t sg__op_flags(sg_op_kind kind);

/* The number of attributes of `kind`'s schema (the canonical order the
 * accessors below index), or -1 for an unknown kind. */
int sg__op_attr_count(sg_op_kind kind);
/* Bit i set: this op updates input i in place (depends on attributes). */
uint32_t sg__op_mutated_inputs(const sg__op *op);
/* The op draws random numbers (dropout masks) in a training pass: a
 * dropout in training form, an attention with dropout > 0. Such an op never
 * folds at compile time, and its draws depend on the step and the stream. */
bool sg__op_draws_random(const sg__op *op);
/* An error about op: "KIND 'NAME': " and the formatted text (shape
 * inference, kernels). */
sg_status sg__op_error(const sg__op *op, sg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Attribute accessors by schema index (attributes are canonical). */
static inline int64_t sg__attr_i(const sg__op *op, int k) { return op->attrs[k].i; }
static inline double sg__attr_f(const sg__op *op, int k) { return op->attrs[k].f; }
static inline const int64_t *sg__attr_ints(const sg__op *op, int k) { return op->attrs[k].ints; }
static inline int sg__attr_count(const sg__op *op, int k) { return op->attrs[k].count; }

/* Attribute literals for builders. */
#define SG__AI(n, v) ((sg_attr){.name = (n), .type = SG_ATTR_INT, .i = (v)})
#define SG__AF(n, v) ((sg_attr){.name = (n), .type = SG_ATTR_FLOAT, .f = (v)})
#define SG__AS(n, c, p) ((sg_attr){.name = (n), .type = SG_ATTR_INTS, .count = (c), .ints = (p)})

/* Name maps. sg__names_insert fails with SG_ERR_DUPLICATE (and sets no
 * message) when the name is taken. */
int32_t sg__tensor_lookup(const sg_graph *g, const char *name);
int32_t sg__op_lookup(const sg_graph *g, const char *name);
sg_status sg__names_insert(sg_graph *g, bool ops, int32_t id);
void sg__names_clear(sg__name_map *m);

/* The scale an attention or attention_backward op applies to q k^T: its
 * `scale` attribute, or 1/sqrt(d) (d = q's last dim) for 0, the default
 * (ops_attention.c). */
double sg__attention_scale(const sg_graph *g, const sg__op *op);

/* ---- queries and message helpers (infer_util.c) ------------------------- */

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
/* Normalises axis into [0, ndim); false when out of range. */
bool sg__norm_axis(int64_t axis, int ndim, int *out);
/* The dims of x (input 0) that reduce_sum, reduce_mean or sum_to op `op`
 * sums over: summed[d] for each of x's dims (the axes given, all of them
 * without axes; for sum_to the dims the target shape, right-aligned, lacks
 * or has as 1 where x's is not 1). False for any other op or an axis out of
 * range. */
bool sg__sum_dims(const sg_graph *g, const sg__op *op, bool *summed);

#endif /* SG_GRAPH_GRAPH_H */
