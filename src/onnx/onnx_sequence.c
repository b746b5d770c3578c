/* SplitToSequence and SequenceAt. PyTorch 2's exporter, unoptimised
 * (torch.onnx.export(..., optimize=False), the form that keeps a model's
 * parameters as PyTorch has them), writes `x.split(n, dim)` and `x.chunk`
 * as a SplitToSequence whose parts are taken by SequenceAt at constant
 * positions: together, a Split. sgrt has no sequence type, so the sequence
 * stays a plan (the value, the axis, the part sizes) and each SequenceAt
 * becomes that part (folded for a constant, a slice of a tensor). Any other
 * use of a sequence (ConcatFromSequence, SequenceLength, a graph output) is
 * an unsupported op, or refused by sg__ox_tensor, naming it. */
#include <string.h>

#include "onnx/onnx_internal.h"

/* SplitToSequence(input, split?): `split` a scalar (parts of that size, the
 * last smaller) or a list of sizes adding up to the dim; none: parts of 1,
 * which keepdims = 0 (default 1) squeezes out. */
static sg_status cv_split_to_sequence(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"axis", "keepdims", NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *data = sg__ox_input(c, n, 0), *split = sg__ox_input(c, n, 1);
  int ndim, axis;
  int64_t dims[SG_MAX_DIMS], axis_attr, keepdims;
  SG_CHECK(sg__ox_shape(c, data, &ndim, dims));
  SG_CHECK(sg__ox_attr_int(c, "axis", 0, &axis_attr));
  SG_CHECK(sg__ox_attr_int(c, "keepdims", 1, &keepdims));
  SG_CHECK(sg__ox_axis(c, axis_attr, ndim, "axis", &axis));
  if (keepdims != 0 && keepdims != 1)
    return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "keepdims is %lld; must be 0 or 1", (long long)keepdims);
  int64_t d = dims[axis];
  int64_t *sizes = sg__arena_alloc(&c->tmp, sizeof(int64_t) * SG__MAX_OP_IO, 8);
  if (sizes == NULL) return sg__ox_node_error(c, SG_ERR_NO_MEMORY, "out of memory");
  int ns = 0;
  bool scalar = false;
  if (split) {
    SG_CHECK(sg__ox_const_ints(c, split, "split", SG__MAX_OP_IO, sizes, &ns));
    scalar = split->ndim == 0;
  }
  if (split == NULL || scalar) { /* parts of one size, the last smaller */
    int64_t part = scalar ? sizes[0] : 1;
    if (part < 1)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "split is %lld; a part has at least 1 element",
                               (long long)part);
    if (d / part + (d % part != 0) > SG__MAX_OP_IO) /* no d + part - 1: part may be near INT64_MAX */
      return sg__ox_node_error(c, SG_ERR_RANGE, "an axis of %lld in parts of %lld makes more than %d parts",
                               (long long)d, (long long)part, SG__MAX_OP_IO);
    ns = 0;
    for (int64_t off = 0; off < d; off += part) sizes[ns++] = d - off < part ? d - off : part;
  }
  int64_t sum = 0;
  for (int i = 0; i < ns; i++) {
    if (sizes[i] < 1 || sizes[i] > d)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "split size %d is %lld; the axis has %lld", i,
                               (long long)sizes[i], (long long)d);
    sum += sizes[i];
  }
  if (sum != d)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "split sizes add up to %lld; the axis has %lld", (long long)sum,
                             (long long)d);
  ox_value *v = sg__ox_find(c, n->output[0]);
  if (v == NULL) return SG_OK;
  v->kind = OX_V_SEQUENCE;
  v->tensor = -1;
  v->seq_of = (int32_t)(data - c->values);
  v->seq_len = ns;
  v->seq_axis = axis;
  v->seq_sizes = sizes;
  v->seq_squeeze = split == NULL && keepdims == 0;
  return SG_OK;
}

/* SequenceAt(sequence, position): the part at a constant position (negative
 * counts from the end). */
static sg_status cv_sequence_at(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *seq = sg__ox_input(c, n, 0), *pos = sg__ox_input(c, n, 1);
  if (seq->kind != OX_V_SEQUENCE)
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                             "input 0 '%s' is not a sequence that sgrt can take apart (it takes those of "
                             "SplitToSequence)",
                             seq->name);
  int64_t at;
  int np = 0;
  SG_CHECK(sg__ox_const_ints(c, pos, "position", 1, &at, &np));
  if (np != 1 || pos->ndim != 0)
    return sg__ox_node_error(c, SG_ERR_SHAPE, "position '%s' must be a scalar", pos->name);
  if (at < -(int64_t)seq->seq_len || at >= seq->seq_len)
    return sg__ox_node_error(c, SG_ERR_RANGE, "position %lld is outside the sequence '%s' of %d parts",
                             (long long)at, seq->name, (int)seq->seq_len);
  if (at < 0) at += seq->seq_len;
  int64_t first = 0;
  for (int64_t i = 0; i < at; i++) first += seq->seq_sizes[i];
  return sg__ox_take_range(c, 0, &c->values[seq->seq_of], seq->seq_axis, first, seq->seq_sizes[at],
                           seq->seq_squeeze);
}

const ox_op sg__ox_sequence_ops[] = {
    {"SplitToSequence", cv_split_to_sequence, 1, 2, 1, 1},
    {"SequenceAt", cv_sequence_at, 2, 2, 1, 1},
};
const int sg__ox_n_sequence_ops = (int)(sizeof sg__ox_sequence_ops / sizeof *sg__ox_sequence_ops);
