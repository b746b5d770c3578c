/* Changing how a tensor is split, with graph ops only (tp.h), so autodiff
 * derives the backward pass and the runner needs just one kind of sync: an
 * in-place all-reduce sum.
 *
 * Gather (a column split whose output a non-split op needs whole): the shard
 * is padded with zeros to the whole width at this rank's offset; summing the
 * padded tensors over the group gives the whole tensor. Its gradient is
 * concat's adjoint, a slice -- exactly this rank's part, no communication.
 *
 * Slice (a row split whose input arrives whole): a product with a constant
 * 0/1 selector [in, in/ways] picks this rank's columns. Its gradient
 * dy . S^T is the input gradient zero-padded outside this rank's columns:
 * summed over the group (a backward sync) it is the whole gradient.
 *
 * Both cost more than the dedicated collective would (a zero-padded sum moves
 * about twice an all-gather's bytes; the selector product costs
 * M*in*in/ways flops). First version: correct and simple; an all-gather sync
 * and a strided slice op are the optimisation (docs/tensor_parallel.md). */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/tp.h"

static sg_status suffixed(char *buf, size_t size, const char *name, const char *suffix) {
  if ((size_t)snprintf(buf, size, "%s%s", name, suffix) >= size)
    return sg__error(SG_ERR_RANGE, "sg__tp_rewrite: tensor name '%s' is too long", name);
  return SG_OK;
}

/* A zero constant of x's shape with last dim `width`. */
static sg_tensor zeros(sg_graph *g, const sg__tensor *x, int64_t width, const char *name) {
  int64_t dims[SG_MAX_DIMS];
  memcpy(dims, x->dims, sizeof dims);
  dims[x->ndim - 1] = width;
  size_t bytes = (size_t)sg__numel(x->ndim, dims) * sg_dtype_size(x->dtype);
  void *data = sg__calloc(1, bytes + 1);
  if (data == NULL) {
    sg__error(SG_ERR_NO_MEMORY, "sg__tp_rewrite: out of memory");
    return SG_NO_TENSOR;
  }
  sg_tensor t = sg_constant(g, name, x->dtype, x->ndim, dims, data);
  sg__free(data);
  return t;
}

sg_status sg__tp_gather_last(sg_graph *g, sg_tensor shard, int ways, int rank, const char *name,
                             sg_tensor *out) {
  /* Adding tensors may move g->tensors: no pointer into it is kept. */
  const sg__tensor *x = &g->tensors[shard.id];
  if (x->ndim < 1) return sg__error(SG_ERR_INTERNAL, "sg__tp_rewrite: gathering scalar '%s'", name);
  int64_t c = x->dims[x->ndim - 1];
  char buf[SG__MAX_NAME + 16];
  SG_CHECK(suffixed(buf, sizeof buf, name, ".tp_shard"));
  SG_CHECK(sg_tensor_set_name(g, shard, buf));
  sg_tensor parts[3];
  int n = 0;
  if (rank > 0) {
    SG_CHECK(suffixed(buf, sizeof buf, name, ".tp_pad_lo"));
    parts[n++] = zeros(g, &g->tensors[shard.id], c * rank, buf);
  }
  parts[n++] = shard;
  if (rank < ways - 1) {
    SG_CHECK(suffixed(buf, sizeof buf, name, ".tp_pad_hi"));
    parts[n++] = zeros(g, &g->tensors[shard.id], c * (ways - 1 - rank), buf);
  }
  for (int i = 0; i < n; i++)
    if (parts[i].id < 0) return sg_graph_status(g) != SG_OK ? sg_graph_status(g) : SG_ERR_NO_MEMORY;
  sg_tensor whole = sg_concat(g, n, parts, -1);
  if (whole.id < 0) return sg_graph_status(g);
  SG_CHECK(sg_tensor_set_name(g, whole, name));
  *out = whole;
  return SG_OK;
}

sg_status sg__tp_slice_last(sg_graph *g, sg_tensor whole, int ways, int rank, const char *name,
                            sg_tensor *out, sg_tensor *selector) {
  const sg__tensor *x = &g->tensors[whole.id];
  if (x->ndim < 1 || x->dims[x->ndim - 1] % ways != 0)
    return sg__error(SG_ERR_INTERNAL, "sg__tp_rewrite: cannot slice '%s' %d ways", name, ways);
  int64_t in = x->dims[x->ndim - 1], c = in / ways, dims[2] = {in, c};
  size_t es = sg_dtype_size(x->dtype);
  if (x->dtype != SG_F32)
    return sg__error(SG_ERR_UNSUPPORTED, "sg__tp_rewrite: slicing '%s' (%s): only f32 inputs of row splits",
                     name, sg_dtype_name(x->dtype));
  float *s = sg__calloc((size_t)(in * c) + 1, es);
  if (s == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__tp_rewrite: out of memory");
  for (int64_t j = 0; j < c; j++) s[(rank * c + j) * c + j] = 1.0f;
  char buf[SG__MAX_NAME + 16];
  sg_status st = suffixed(buf, sizeof buf, name, ".tp_select");
  sg_tensor sel = st == SG_OK ? sg_constant(g, buf, x->dtype, 2, dims, s) : SG_NO_TENSOR;
  sg__free(s);
  SG_CHECK(st);
  sg_tensor part = sg_matmul(g, whole, sel);
  if (sel.id < 0 || part.id < 0) return sg_graph_status(g);
  SG_CHECK(suffixed(buf, sizeof buf, name, ".tp_slice"));
  SG_CHECK(sg_tensor_set_name(g, part, buf));
  *out = part;
  *selector = sel;
  return SG_OK;
}

void sg__tp_slice_copy(unsigned char *whole, unsigned char *part, int ndim, const int64_t *dims, size_t es,
                       int axis, int groups, int ways, int k, bool put) {
  /* The blocks of the axis are one more outer dim. */
  size_t outer = (size_t)groups, inner = es;
  for (int i = 0; i < axis; i++) outer *= (size_t)dims[i];
  for (int i = axis + 1; i < ndim; i++) inner *= (size_t)dims[i];
  size_t len = (size_t)dims[axis] / (size_t)groups, chunk = len / (size_t)ways * inner;
  for (size_t o = 0; o < outer; o++) {
    unsigned char *w = whole + o * len * inner + (size_t)k * chunk, *q = part + o * chunk;
    if (put) memcpy(w, q, chunk);
    else memcpy(q, w, chunk);
  }
}
