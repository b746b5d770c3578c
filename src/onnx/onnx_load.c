/* ONNX import, the outer layers: reading the file, checking the protobuf
 * wire format, unpacking it with protobuf-c (through sgrt's allocator, so
 * allocation-failure injection reaches it), then the model: opset, graph
 * inputs, initializers, node order, conversion, outputs, names, finalize. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx_internal.h"

sg_onnx_params sg_onnx_params_init(void) { return (sg_onnx_params)SG_ONNX_PARAMS_INIT; }

/* ---- protobuf wire format --------------------------------------------------
 * protobuf-c reports any problem as a bare NULL and recurses once per level
 * of message nesting. This walk comes first: it bounds the nesting depth and
 * tells a truncated file from a malformed one, with the file offset. */

typedef struct wire {
  const uint8_t *base;
  size_t size;
} wire;

/* 0 ok, -1 runs past `left`, -2 longer than 10 bytes. */
static int varint(const uint8_t *p, size_t left, uint64_t *v, size_t *used) {
  uint64_t x = 0;
  for (size_t i = 0; i < 10; i++) {
    if (i >= left) return -1;
    x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if ((p[i] & 0x80) == 0) {
      *v = x;
      *used = i + 1;
      return 0;
    }
  }
  return -2;
}

/* The wire type protobuf uses for a field type (packed repeated scalars
 * also come as length-delimited). */
static int wire_type_of(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return 5;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 1;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return 2;
    default: return 0;
  }
}

static sg_status overrun(const wire *w, const uint8_t *end, const char *what, const char *msg,
                         const uint8_t *at) {
  unsigned long long off = (unsigned long long)(at - w->base);
  if (end == w->base + w->size)
    return sg__error(SG_ERR_TRUNCATED,
                     "protobuf: %s at file offset 0x%llx %s: the file ends first (%zu bytes)", what, off, msg,
                     w->size);
  return sg__error(SG_ERR_FORMAT,
                   "protobuf: %s at file offset 0x%llx %s: past the end of its enclosing message", what, off,
                   msg);
}

static sg_status wire_check(const wire *w, const uint8_t *p, const uint8_t *end,
                            const ProtobufCMessageDescriptor *d, int depth) {
  while (p < end) {
    const uint8_t *at = p;
    uint64_t tag, v;
    size_t n;
    int r = varint(p, (size_t)(end - p), &tag, &n);
    if (r == -1) return overrun(w, end, d->short_name, "a field tag runs", at);
    if (r == -2 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
      return sg__error(SG_ERR_FORMAT, "protobuf: invalid field tag in %s at file offset 0x%llx",
                       d->short_name, (unsigned long long)(at - w->base));
    p += n;
    uint32_t field = (uint32_t)(tag >> 3);
    int wt = (int)(tag & 7);
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, field);
    char what[160];
    if (f) snprintf(what, sizeof what, "field %s.%s", d->short_name, f->name);
    else snprintf(what, sizeof what, "unknown field %u of %s", field, d->short_name);
    if (f) {
      int want = wire_type_of(f->type);
      bool packed = wt == 2 && f->label == PROTOBUF_C_LABEL_REPEATED && want != 2;
      if (wt != want && !packed)
        return sg__error(SG_ERR_FORMAT, "protobuf: %s at file offset 0x%llx has wire type %d, expected %d",
                         what, (unsigned long long)(at - w->base), wt, want);
    }
    switch (wt) {
      case 0:
        r = varint(p, (size_t)(end - p), &v, &n);
        if (r == -1) return overrun(w, end, what, "runs", at);
        if (r == -2)
          return sg__error(SG_ERR_FORMAT, "protobuf: %s at file offset 0x%llx: varint longer than 10 bytes",
                           what, (unsigned long long)(at - w->base));
        p += n;
        break;
      case 1:
      case 5: {
        size_t len = wt == 1 ? 8 : 4;
        if ((size_t)(end - p) < len) return overrun(w, end, what, "runs", at);
        p += len;
        break;
      }
      case 2: {
        r = varint(p, (size_t)(end - p), &v, &n);
        if (r == -1) return overrun(w, end, what, "has a length that runs", at);
        if (r == -2)
          return sg__error(SG_ERR_FORMAT, "protobuf: %s at file offset 0x%llx: bad length", what,
                           (unsigned long long)(at - w->base));
        p += n;
        if (v > (uint64_t)(end - p)) {
          char msg[96];
          snprintf(msg, sizeof msg, "declares %llu bytes, %zu remain", (unsigned long long)v,
                   (size_t)(end - p));
          return overrun(w, end, what, msg, at);
        }
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
          if (depth + 1 > OX_MAX_NESTING)
            return sg__error(SG_ERR_RANGE,
                             "protobuf: %s at file offset 0x%llx is nested more than %d levels deep", what,
                             (unsigned long long)(at - w->base), OX_MAX_NESTING);
          SG_CHECK(wire_check(w, p, p + v, f->descriptor, depth + 1));
        }
        p += v;
        break;
      }
      default:
        return sg__error(SG_ERR_FORMAT, "protobuf: %s at file offset 0x%llx has wire type %d (%s)", what,
                         (unsigned long long)(at - w->base), wt,
                         wt == 3 || wt == 4 ? "groups are not supported" : "invalid");
    }
  }
  return SG_OK;
}

/* protobuf-c allocates through this, so sgrt's allocator and its failure
 * injection see every allocation; `failed` tells a NULL from unpack that
 * means "out of memory" from one that means "malformed". */
typedef struct pb_alloc {
  ProtobufCAllocator a;
  bool failed;
} pb_alloc;

static void *pb_malloc(void *data, size_t size) {
  void *p = sg__malloc(size);
  if (p == NULL) ((pb_alloc *)data)->failed = true;
  return p;
}

static void pb_free(void *data, void *p) {
  (void)data;
  sg__free(p);
}

/* ---- graph inputs and initializers ---------------------------------------- */

static sg_status add_initializers(ox_ctx *c) {
  const Onnx__GraphProto *gp = c->graph;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    if (t->name == NULL || t->name[0] == '\0')
      return sg__error(SG_ERR_FORMAT, "initializer %zu has no name", i);
    if (sg__ox_find(c, t->name))
      return sg__error(SG_ERR_DUPLICATE, "initializer '%s' is given twice", t->name);
    ox_value *v;
    SG_CHECK(sg__ox_add(c, t->name, &v));
    SG_CHECK(sg__ox_decode_tensor(c, t, "initializer", v));
    v->initializer = true;
    /* Float initializers are the model's weights; the pre-scans below turn
     * batch-norm running statistics into state and buffers into constants. */
    v->role = v->elem == OX_FLOAT ? SG_ROLE_PARAMETER : SG_ROLE_CONSTANT;
  }
  return SG_OK;
}

static sg_status add_input(ox_ctx *c, const Onnx__ValueInfoProto *vi, size_t i) {
  const char *name = vi->name;
  if (name == NULL || name[0] == '\0') return sg__error(SG_ERR_FORMAT, "graph input %zu has no name", i);
  ox_value *v = sg__ox_find(c, name);
  if (v && v->initializer) return SG_OK; /* an initializer listed as input (IR < 4): a weight */
  if (v) return sg__error(SG_ERR_DUPLICATE, "graph input '%s' is listed twice", name);
  const Onnx__TypeProto *tp = vi->type;
  if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL)
    return sg__error(SG_ERR_UNSUPPORTED, "graph input '%s' is not a tensor", name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  int elem = tt->has_elem_type ? tt->elem_type : 0;
  if (elem != OX_FLOAT && elem != OX_INT64 && elem != OX_BOOL)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "graph input '%s' has data type %d; sgrt imports FLOAT (1), INT64 (7) and BOOL (9)",
                     name, elem);
  if (tt->shape == NULL) return sg__error(SG_ERR_SHAPE, "graph input '%s' has no shape", name);
  if (tt->shape->n_dim > SG_MAX_DIMS)
    return sg__error(SG_ERR_RANGE, "graph input '%s' has rank %zu; at most %d", name, tt->shape->n_dim,
                     SG_MAX_DIMS);
  int64_t dims[SG_MAX_DIMS], numel = 1;
  for (size_t d = 0; d < tt->shape->n_dim; d++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (dim->dim_value < 1)
        return sg__error(SG_ERR_SHAPE, "graph input '%s': dim %zu is %lld; sgrt needs dims >= 1", name, d,
                         (long long)dim->dim_value);
      dims[d] = dim->dim_value;
    } else {
      const char *sym =
          dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param
              ? dim->dim_param
              : "";
      SG_CHECK(sg__ox_dim_size(c, name, d, sym, &dims[d]));
    }
    if (numel > SG__MAX_NUMEL / dims[d])
      return sg__error(SG_ERR_RANGE, "graph input '%s' has more than 2^56 elements", name);
    numel *= dims[d];
  }
  const char *tmp = sg__ox_tmp_name(c, name);
  if (tmp == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  sg_dtype dt = elem == OX_FLOAT ? SG_F32 : elem == OX_INT64 ? SG_I64 : SG_BOOL;
  sg_tensor t = sg_input(c->g, tmp, dt, (int)tt->shape->n_dim, dims);
  if (t.id < 0) return sg__error(sg_graph_status(c->g), "graph input '%s': %s", name, sg_last_error());
  SG_CHECK(sg__ox_add(c, name, &v));
  v->kind = OX_V_TENSOR;
  v->tensor = t.id;
  v->input = true;
  return sg__ox_want_name(c, t.id, name, 2);
}

/* ---- nodes: structure and order -------------------------------------------- */

static const char *node_label(const Onnx__NodeProto *n, int i, char *buf, size_t cap) {
  if (n->name && n->name[0]) snprintf(buf, cap, "node '%s' (%s)", n->name, sg__ox_str(n->op_type));
  else snprintf(buf, cap, "node #%d (%s)", i, sg__ox_str(n->op_type));
  return buf;
}

/* Registers every node output as a value and checks every node input names
 * a value. */
static sg_status index_nodes(ox_ctx *c) {
  const Onnx__GraphProto *gp = c->graph;
  char b1[512], b2[512];
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    if (n->op_type == NULL || n->op_type[0] == '\0')
      return sg__error(SG_ERR_FORMAT, "node #%zu has no op_type", i);
    if (n->n_input > SG__MAX_OP_IO || n->n_output > SG__MAX_OP_IO)
      return sg__error(SG_ERR_RANGE, "%s has %zu inputs and %zu outputs; at most %d each",
                       node_label(n, (int)i, b1, sizeof b1), n->n_input, n->n_output, SG__MAX_OP_IO);
    for (size_t k = 0; k < n->n_output; k++) {
      const char *name = n->output[k];
      if (name[0] == '\0') continue;
      ox_value *v = sg__ox_find(c, name);
      if (v && v->producer >= 0)
        return sg__error(SG_ERR_DUPLICATE, "tensor '%s' is produced by %s and by %s", name,
                         node_label(gp->node[v->producer], v->producer, b1, sizeof b1),
                         node_label(n, (int)i, b2, sizeof b2));
      if (v)
        return sg__error(SG_ERR_DUPLICATE, "%s produces '%s', which is also a graph %s",
                         node_label(n, (int)i, b1, sizeof b1), name,
                         v->initializer ? "initializer" : "input");
      SG_CHECK(sg__ox_add(c, name, &v));
      v->producer = (int32_t)i;
    }
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    for (size_t k = 0; k < n->n_input; k++)
      if (n->input[k][0] && sg__ox_find(c, n->input[k]) == NULL)
        return sg__error(SG_ERR_NOT_FOUND,
                         "%s: input %zu '%s' is not produced by any node, nor a graph input or initializer",
                         node_label(n, (int)i, b1, sizeof b1), k, n->input[k]);
  }
  /* Running statistics of batch norm are state, whatever the form: the
   * training form updates them, and checkpoints keep them either way. */
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    if (strcmp(n->op_type, "BatchNormalization") != 0) continue;
    for (size_t k = 3; k < 5 && k < n->n_input; k++) {
      ox_value *v = sg__ox_find(c, n->input[k]);
      if (v && v->initializer && v->elem == OX_FLOAT) v->role = SG_ROLE_STATE;
    }
  }
  return SG_OK;
}

/* Depth-first topological order that keeps the file's order when it is one
 * already (as ONNX requires); a cycle is an error, never a hang. */
static sg_status node_order(ox_ctx *c, int32_t *order) {
  const Onnx__GraphProto *gp = c->graph;
  size_t nn = gp->n_node, done = 0;
  uint8_t *state = sg__arena_alloc(&c->tmp, nn ? nn : 1, 1);
  int32_t *stack = sg__arena_alloc(&c->tmp, sizeof(int32_t) * (nn ? nn : 1), 4);
  size_t *next = sg__arena_alloc(&c->tmp, sizeof(size_t) * (nn ? nn : 1), 8);
  if (state == NULL || stack == NULL || next == NULL)
    return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory ordering nodes");
  for (size_t root = 0; root < nn; root++) {
    if (state[root]) continue;
    size_t sp = 0;
    stack[sp++] = (int32_t)root;
    next[root] = 0;
    state[root] = 1;
    while (sp > 0) {
      int32_t u = stack[sp - 1];
      const Onnx__NodeProto *n = gp->node[u];
      if (next[u] < n->n_input) {
        const char *in = n->input[next[u]++];
        const ox_value *v = sg__ox_find(c, in);
        if (v == NULL || v->producer < 0 || state[v->producer] == 2) continue;
        if (state[v->producer] == 1) {
          char b1[512];
          return sg__error(SG_ERR_CYCLE,
                           "the nodes form a cycle: %s consumes '%s', which depends on its own output",
                           node_label(n, u, b1, sizeof b1), in);
        }
        state[v->producer] = 1;
        next[v->producer] = 0;
        stack[sp++] = v->producer;
      } else {
        state[u] = 2;
        order[done++] = u;
        sp--;
      }
    }
  }
  return SG_OK;
}

/* ---- buffers --------------------------------------------------------------- */

/* Uses through which no gradient reaches input k: Equal and the other
 * comparisons (a bool result),
 * Where's condition, Shape and EyeLike (read the shape only), Range's bounds,
 * Resize's roi, scales and sizes, Pad's pads and constant value (PyTorch's
 * are Python numbers, never weights). */
static bool use_ends_gradient(const char *op, size_t k) {
  return strcmp(op, "Equal") == 0 || strcmp(op, "Less") == 0 || strcmp(op, "Greater") == 0 ||
         strcmp(op, "LessOrEqual") == 0 || strcmp(op, "GreaterOrEqual") == 0 || strcmp(op, "Shape") == 0 ||
         strcmp(op, "EyeLike") == 0 || strcmp(op, "Range") == 0 || (strcmp(op, "Where") == 0 && k == 0) ||
         ((strcmp(op, "Resize") == 0 || strcmp(op, "Pad") == 0) && k >= 1);
}

/* Ops that fold for constants and pass their data (input 0; Concat: every
 * input) on to their outputs. */
static bool use_passes_data(const char *op, size_t k) {
  static const char *const ops[] = {"Slice",    "Split", "Reshape", "Unsqueeze", "Squeeze",
                                    "Identity", "Cast",  "Expand",  "Trilu",     "Gather"};
  if (strcmp(op, "Concat") == 0) return true;
  for (size_t i = 0; k == 0 && i < sizeof ops / sizeof *ops; i++)
    if (strcmp(op, ops[i]) == 0) return true;
  return false;
}

/* PyTorch exports buffers as initializers, as it does weights. A float
 * initializer whose values reach only uses that end the gradient (through
 * ops that pass data on) can never be trained: it is a buffer, like the
 * causal mask `bias` of nanoGPT's attention (`bias[:, :, :T, :T] == 0`).
 * It becomes a constant, so that the ops reading it fold at import (sgrt has
 * no comparison op); as a parameter, an optimizer's weight decay would also
 * change it. `order` is topological, so walking it backwards sees every
 * consumer of a value before the value's producer. */
static sg_status find_buffers(ox_ctx *c, const int32_t *order) {
  const Onnx__GraphProto *gp = c->graph;
  /* ends[v]: every use of value v seen so far ends the gradient. */
  bool *ends = sg__arena_alloc(&c->tmp, c->n_values ? c->n_values : 1, 1);
  if (ends == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  memset(ends, 1, c->n_values);
  for (size_t i = 0; i < gp->n_output; i++) {
    const ox_value *v = sg__ox_find(c, gp->output[i]->name);
    if (v) ends[v - c->values] = false;
  }
  for (size_t i = gp->n_node; i-- > 0;) {
    const Onnx__NodeProto *n = gp->node[order[i]];
    bool outputs_end = true;
    for (size_t k = 0; k < n->n_output; k++) {
      const ox_value *v = sg__ox_find(c, n->output[k]);
      if (v && !ends[v - c->values]) outputs_end = false;
    }
    for (size_t k = 0; k < n->n_input; k++) {
      const ox_value *v = sg__ox_find(c, n->input[k]);
      if (v && !use_ends_gradient(n->op_type, k) && !(outputs_end && use_passes_data(n->op_type, k)))
        ends[v - c->values] = false;
    }
  }
  for (uint32_t i = 0; i < c->n_values; i++) {
    ox_value *v = &c->values[i];
    if (v->initializer && v->elem == OX_FLOAT && v->role == SG_ROLE_PARAMETER && ends[i])
      v->role = SG_ROLE_CONSTANT;
  }
  return SG_OK;
}

/* sg_onnx_params.constants: initializers the caller knows to be buffers. */
static sg_status mark_constants(ox_ctx *c, const char *const *names) {
  for (size_t i = 0; names != NULL && names[i] != NULL; i++) {
    ox_value *v = sg__ox_find(c, names[i]);
    if (v == NULL || !v->initializer)
      return sg__error(SG_ERR_NOT_FOUND,
                       "sg_onnx_params.constants[%zu]: '%s' is no initializer of the model%s", i, names[i],
                       v ? " (it is computed by a node or is a graph input)" : "");
    if (v->role == SG_ROLE_STATE)
      return sg__error(
          SG_ERR_INVALID_ARG,
          "sg_onnx_params.constants[%zu]: '%s' is a batch norm's running statistic (state), which "
          "training updates; it cannot be a constant",
          i, names[i]);
    v->role = SG_ROLE_CONSTANT; /* an integer initializer is one already */
  }
  return SG_OK;
}

static sg_status convert_node(ox_ctx *c, int32_t i) {
  const Onnx__NodeProto *n = c->graph->node[i];
  c->node = n;
  c->node_index = i;
  if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "op '%s' of domain '%s' is not supported", n->op_type,
                             n->domain);
  const ox_op *op = sg__ox_op_get(n->op_type);
  if (op == NULL)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "op '%s' is not supported (docs/onnx.md lists the ops)",
                             n->op_type);
  if ((int)n->n_input < op->min_inputs || (int)n->n_input > op->max_inputs)
    return sg__ox_node_error(c, SG_ERR_ARITY, "has %zu inputs; %s takes %d..%d", n->n_input, n->op_type,
                             op->min_inputs, op->max_inputs);
  if ((int)n->n_output < op->min_outputs || (int)n->n_output > op->max_outputs)
    return sg__ox_node_error(c, SG_ERR_ARITY, "has %zu outputs; %s gives %d..%d", n->n_output, n->op_type,
                             op->min_outputs, op->max_outputs);
  for (int k = 0; k < op->min_inputs; k++)
    if (n->input[k][0] == '\0') return sg__ox_node_error(c, SG_ERR_ARITY, "required input %d is empty", k);
  SG_CHECK(sg__ox_check_attr_fields(c));
  uint32_t first = c->g->n_ops;
  SG_CHECK(op->convert(c, n));
  SG_CHECK(sg__ox_note_ops(c, first));
  for (size_t k = 0; k < n->n_output; k++) {
    ox_value *v = sg__ox_find(c, n->output[k]);
    if (v && v->kind == 0) {
      v->kind = OX_V_UNAVAILABLE;
      v->why = "an output that sgrt's conversion of this op does not produce";
    }
  }
  return SG_OK;
}

/* ---- graph outputs --------------------------------------------------------- */

/* What the model declares about an output must match what sgrt inferred. */
static sg_status check_declared(ox_ctx *c, const Onnx__ValueInfoProto *vi, const sg__tensor *t) {
  const Onnx__TypeProto *tp = vi->type;
  if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL)
    return SG_OK;
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  int want = t->dtype == SG_F32    ? OX_FLOAT
             : t->dtype == SG_I64  ? OX_INT64
             : t->dtype == SG_I32  ? OX_INT32
             : t->dtype == SG_BOOL ? OX_BOOL
                                   : -1;
  if (tt->has_elem_type && tt->elem_type != 0 && tt->elem_type != want &&
      !(tt->elem_type == OX_BOOL && t->dtype == SG_U8))
    return sg__error(SG_ERR_DTYPE, "graph output '%s' is declared with data type %d but is %s", vi->name,
                     tt->elem_type, sg_dtype_name(t->dtype));
  if (tt->shape == NULL) return SG_OK;
  bool ok = tt->shape->n_dim == (size_t)t->ndim;
  for (int d = 0; ok && d < t->ndim; d++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
      ok = dim->dim_value == t->dims[d];
  }
  if (ok) return SG_OK;
  char b1[256], b2[256];
  int64_t decl[SG_MAX_DIMS];
  int nd = tt->shape->n_dim > SG_MAX_DIMS ? SG_MAX_DIMS : (int)tt->shape->n_dim;
  for (int d = 0; d < nd; d++)
    decl[d] = tt->shape->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                  ? tt->shape->dim[d]->dim_value
                  : -1;
  (void)c;
  return sg__error(SG_ERR_SHAPE, "graph output '%s' is %s but the model declares %s (-1: symbolic)", vi->name,
                   sg__onnx_dims_text(b1, sizeof b1, t->ndim, t->dims),
                   sg__onnx_dims_text(b2, sizeof b2, nd, decl));
}

static sg_status mark_outputs(ox_ctx *c) {
  const Onnx__GraphProto *gp = c->graph;
  c->node = NULL;
  c->node_index = -1;
  if (gp->n_output == 0) return sg__error(SG_ERR_FORMAT, "the graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    const char *name = vi->name;
    if (name == NULL || name[0] == '\0') return sg__error(SG_ERR_FORMAT, "graph output %zu has no name", i);
    ox_value *v = sg__ox_find(c, name);
    if (v == NULL)
      return sg__error(SG_ERR_NOT_FOUND,
                       "graph output '%s' is not produced by any node, nor a graph input or initializer",
                       name);
    if (v->kind == OX_V_UNAVAILABLE)
      return sg__error(SG_ERR_UNSUPPORTED, "graph output '%s' cannot be provided: %s", name, v->why);
    sg_tensor t;
    SG_CHECK(sg__ox_tensor(c, v, &t));
    SG_CHECK(check_declared(c, vi, &c->g->tensors[t.id]));
    const char *clean = sg__ox_sanitize(c, name);
    if (clean == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
    /* Makes want[] cover t, and names a tensor that has no wanted name yet. */
    SG_CHECK(sg__ox_want_name(c, t.id, clean, 1));
    if (strcmp(c->want[t.id], clean) != 0 && (c->g->tensors[t.id].producer < 0 || c->want_prio[t.id] == 3)) {
      /* An input, weight or another output under a second name: a copy
       * carries this name. */
      const sg__tensor *src = &c->g->tensors[t.id];
      int64_t dims[SG_MAX_DIMS];
      memcpy(dims, src->dims, sizeof dims);
      /* The CPU backend reshapes no bools: a bool copy is two casts. */
      if (src->dtype == SG_BOOL) t = sg_cast(c->g, sg_cast(c->g, t, SG_F32), SG_BOOL);
      else t = sg_reshape(c->g, t, src->ndim, dims);
      if (t.id < 0) return sg__error(sg_graph_status(c->g), "graph output '%s': %s", name, sg_last_error());
      SG_CHECK(sg__ox_want_name(c, t.id, clean, 1));
    }
    c->want[t.id] = clean; /* the graph output's name wins over the tensor's other names */
    c->want_prio[t.id] = 3;
    if (sg_graph_mark_output(c->g, t) != SG_OK)
      return sg__error(sg_graph_status(c->g), "graph output '%s': %s", name, sg_last_error());
  }
  return SG_OK;
}

/* ---- the import ------------------------------------------------------------ */

/* Reads the caller's params (NULL, or an older caller's shorter struct: the defaults for what it lacks) into
 * *p and validates them. */
static sg_status read_params(const sg_onnx_params *given, const char *fn, sg_onnx_params *p) {
  SG_CHECK(sg__params_read(fn, SG__VERSIONED(sg_onnx_params, batch, "SG_ONNX_PARAMS_INIT"), p, given));
  if (p->batch < 0 || p->batch > SG__MAX_NUMEL)
    return sg__error(SG_ERR_INVALID_ARG, "%s: batch is %lld; must be 0 (none) or a size", fn,
                     (long long)p->batch);
  if (p->training < -1 || p->training > 1)
    return sg__error(SG_ERR_INVALID_ARG, "%s: training is %d; must be -1 (as exported), 0 or 1", fn,
                     p->training);
  ox_named_dim *unused;
  uint32_t n;
  return sg__ox_dims_parse(fn, p->dims, NULL, &unused, &n); /* before the file is read */
}

static sg_status opset_of(const Onnx__ModelProto *m, int64_t *out) {
  bool found = false;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if (o->domain && o->domain[0] && strcmp(o->domain, "ai.onnx") != 0) continue;
    *out = o->has_version ? o->version : 0;
    found = true;
  }
  if (!found) return sg__error(SG_ERR_FORMAT, "the model imports no opset of the default ONNX domain");
  if (*out < OX_OPSET_MIN || *out > OX_OPSET_MAX)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "opset %lld is not supported (this importer implements opsets %d to %d)",
                     (long long)*out, OX_OPSET_MIN, OX_OPSET_MAX);
  return SG_OK;
}

static sg_status build(ox_ctx *c) {
  const Onnx__GraphProto *gp = c->graph;
  if (gp->n_sparse_initializer > 0)
    return sg__error(SG_ERR_UNSUPPORTED, "sparse initializers are not supported");
  if (gp->n_node > SG__MAX_OPS || gp->n_initializer > SG__MAX_TENSORS || gp->n_input > SG__MAX_TENSORS)
    return sg__error(SG_ERR_RANGE, "the graph has %zu nodes, %zu initializers and %zu inputs; too many",
                     gp->n_node, gp->n_initializer, gp->n_input);
  SG_CHECK(add_initializers(c));
  SG_CHECK(sg__ox_dims_check_names(c));
  for (size_t i = 0; i < gp->n_input; i++) SG_CHECK(add_input(c, gp->input[i], i));
  SG_CHECK(index_nodes(c));
  int32_t *order = sg__arena_alloc(&c->tmp, sizeof(int32_t) * (gp->n_node ? gp->n_node : 1), 4);
  if (order == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  SG_CHECK(node_order(c, order));
  SG_CHECK(sg__ox_torch_roles(c));
  SG_CHECK(find_buffers(c, order));
  SG_CHECK(mark_constants(c, c->constants));
  for (size_t i = 0; i < gp->n_node; i++) SG_CHECK(convert_node(c, order[i]));
  SG_CHECK(mark_outputs(c));
  SG_CHECK(sg__ox_apply_names(c));
  return sg_graph_finalize(c->g);
}

/* Checks the wire format, then unpacks the ModelProto with `alloc` (set up here; free the model with it). */
static sg_status unpack(const uint8_t *data, size_t size, pb_alloc *alloc, Onnx__ModelProto **out) {
  wire w = {data, size};
  SG_CHECK(wire_check(&w, data, data + size, &onnx__model_proto__descriptor, 0));
  *alloc = (pb_alloc){{pb_malloc, pb_free, NULL}, false};
  alloc->a.allocator_data = alloc;
  *out = onnx__model_proto__unpack(&alloc->a, size, data);
  if (*out != NULL) return SG_OK;
  if (alloc->failed) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory unpacking the model");
  return sg__error(SG_ERR_FORMAT, "malformed protobuf: protobuf-c cannot unpack the model");
}

/* A failure reading the file at `path`, its message prefixed with the path. */
static sg_status with_path(sg_status st, const char *path) {
  if (st == SG_OK) return SG_OK;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", sg_last_error());
  return sg__error(st, "%s: %s", path, msg);
}

/* `path`: the model file's, for its external data; NULL from memory. */
static sg_status import(const uint8_t *data, size_t size, const char *path, const sg_onnx_params *p,
                        sg_graph **out) {
  pb_alloc alloc;
  Onnx__ModelProto *m;
  SG_CHECK(unpack(data, size, &alloc, &m));
  ox_ctx c = {.path = path,
              .model = m,
              .graph = m->graph,
              .batch = p->batch,
              .training = p->training,
              .constants = p->constants,
              .node_index = -1};
  sg__arena_init(&c.tmp);
  sg_status st = sg__ox_dims_parse("sg_onnx_import", p->dims, &c.tmp, &c.dims, &c.n_dims);
  if (st == SG_OK && m->graph == NULL) st = sg__error(SG_ERR_FORMAT, "the model has no graph");
  if (st == SG_OK) st = opset_of(m, &c.opset);
  if (st == SG_OK) st = sg_graph_create(&c.g);
  if (st == SG_OK) st = build(&c);
  if (st != SG_OK) {
    sg_graph_destroy(c.g);
    c.g = NULL;
  }
  *out = c.g;
  sg__ox_external_close(&c);
  sg__arena_destroy(&c.tmp);
  sg__free(c.values);
  sg__free(c.slots);
  sg__free(c.want);
  sg__free(c.want_prio);
  sg__free(c.op_node);
  protobuf_c_message_free_unpacked(&m->base, &alloc.a);
  return st;
}

sg_status sg_onnx_import_from_memory(const void *data, size_t size, const sg_onnx_params *p, sg_graph **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_onnx_import_from_memory: out is NULL");
  *out = NULL;
  if (data == NULL && size > 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_onnx_import_from_memory: data is NULL");
  sg_onnx_params q = SG_ONNX_PARAMS_INIT;
  SG_CHECK(read_params(p, "sg_onnx_import_from_memory", &q));
  static const uint8_t empty[1];
  return import(data ? data : empty, size, NULL, &q, out);
}

/* The symbolic dims of the graph inputs of an unpacked model (sg_onnx_symbolic_dims). */
static void list_symbolic(const Onnx__GraphProto *gp, sg_onnx_symbolic_dim *out, size_t cap, size_t *count) {
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    bool initializer = false;
    for (size_t k = 0; k < gp->n_initializer && !initializer && vi->name; k++)
      initializer = gp->initializer[k]->name && strcmp(gp->initializer[k]->name, vi->name) == 0;
    const Onnx__TypeProto *tp = vi->type;
    if (initializer || tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        tp->tensor_type == NULL || tp->tensor_type->shape == NULL)
      continue;
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    for (size_t d = 0; d < sh->n_dim; d++) {
      const Onnx__TensorShapeProto__Dimension *dim = sh->dim[d];
      if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) continue;
      if (*count < cap) {
        sg_onnx_symbolic_dim *e = &out[*count];
        snprintf(e->input, sizeof e->input, "%s", vi->name ? vi->name : "");
        e->dim = (int)d;
        snprintf(e->name, sizeof e->name, "%s",
                 dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param
                     ? dim->dim_param
                     : "");
      }
      (*count)++;
    }
  }
}

sg_status sg_onnx_symbolic_dims(const char *path, sg_onnx_symbolic_dim *out, size_t cap, size_t *count) {
  if (path == NULL || count == NULL || (out == NULL && cap > 0))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_onnx_symbolic_dims: NULL path or count, or NULL out with cap %zu", cap);
  *count = 0;
  const void *map;
  size_t size;
  SG_CHECK(sg__map_file(path, &map, &size));
  static const uint8_t empty[1];
  pb_alloc alloc;
  Onnx__ModelProto *m = NULL;
  sg_status st = unpack(map ? map : empty, size, &alloc, &m);
  if (st == SG_OK && m->graph == NULL) st = sg__error(SG_ERR_FORMAT, "the model has no graph");
  if (st == SG_OK) list_symbolic(m->graph, out, cap, count);
  if (m != NULL) protobuf_c_message_free_unpacked(&m->base, &alloc.a);
  sg__unmap_file(map, size);
  return with_path(st, path);
}

sg_status sg_onnx_import(const char *path, const sg_onnx_params *p, sg_graph **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_onnx_import: out is NULL");
  *out = NULL;
  if (path == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_onnx_import: path is NULL");
  sg_onnx_params q = SG_ONNX_PARAMS_INIT;
  SG_CHECK(read_params(p, "sg_onnx_import", &q));
  const void *map;
  size_t size;
  SG_CHECK(sg__map_file(path, &map, &size));
  static const uint8_t empty[1];
  sg_status st = import(map ? map : empty, size, path, &q, out);
  sg__unmap_file(map, size);
  return with_path(st, path);
}
