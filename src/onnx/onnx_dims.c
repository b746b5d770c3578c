/* The sizes of symbolic graph-input dims: sg_onnx_params.dims by name
 * ("batch=4", "seq=256", as onnxruntime's free-dimension overrides by name),
 * then sg_onnx_params.batch for every other one.
 *
 * A model exported with dynamic batch and sequence (Hugging Face's exports,
 * `dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}}`, torch.export's
 * Dim("batch"), Dim("seq")) has two symbols that need two sizes; the shape
 * arithmetic in the graph (Shape, Gather, Range, Slice of the causal mask)
 * then folds at import with them, as it does for a static export. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "onnx_internal.h"

/* More names than any model has symbols: a bound for the caller's array. */
#define OX_MAX_NAMED_DIMS 64

/* Splits "NAME=SIZE" at its last '=' (a dim_param may contain one) and checks both halves. */
static sg_status parse_entry(const char *fn, size_t i, const char *s, ox_named_dim *out) {
  const char *eq = strrchr(s, '=');
  if (eq == NULL || eq == s || eq[1] == '\0')
    return sg__error(SG_ERR_INVALID_ARG,
                     "%s: dims[%zu] is '%.200s'; each entry is NAME=SIZE, e.g. \"seq=256\"", fn, i, s);
  size_t len = (size_t)(eq - s);
  if (len >= sizeof out->name)
    return sg__error(SG_ERR_INVALID_ARG, "%s: dims[%zu]: the name is %zu bytes; at most %zu", fn, i, len,
                     sizeof out->name - 1);
  const char *digits = eq + 1;
  for (const char *p = digits; *p; p++)
    if (*p < '0' || *p > '9')
      return sg__error(SG_ERR_INVALID_ARG, "%s: dims[%zu] is '%.200s'; the size must be a whole number >= 1",
                       fn, i, s);
  errno = 0;
  long long v = strtoll(digits, NULL, 10);
  if (errno != 0 || v < 1 || v > SG__MAX_NUMEL)
    return sg__error(SG_ERR_INVALID_ARG, "%s: dims[%zu] is '%.200s'; the size must be in 1..2^56", fn, i, s);
  memcpy(out->name, s, len);
  out->name[len] = '\0';
  out->size = v;
  return SG_OK;
}

sg_status sg__ox_dims_parse(const char *fn, const char *const *dims, sg__arena *a, ox_named_dim **out,
                            uint32_t *n) {
  *out = NULL;
  *n = 0;
  if (dims == NULL) return SG_OK;
  size_t count = 0;
  while (count <= OX_MAX_NAMED_DIMS && dims[count] != NULL) count++;
  if (count > OX_MAX_NAMED_DIMS)
    return sg__error(SG_ERR_INVALID_ARG, "%s: dims has more than %d entries (is it NULL-terminated?)", fn,
                     OX_MAX_NAMED_DIMS);
  if (count == 0) return SG_OK;
  ox_named_dim *d = a ? sg__arena_alloc(a, sizeof *d * count, _Alignof(ox_named_dim)) : NULL;
  ox_named_dim scratch;
  if (a != NULL && d == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", fn);
  for (size_t i = 0; i < count; i++) {
    ox_named_dim *e = d ? &d[i] : &scratch;
    SG_CHECK(parse_entry(fn, i, dims[i], e));
    /* Duplicates: compared on the caller's strings, so that the check needs no storage. */
    size_t len = strlen(e->name);
    for (size_t j = 0; j < i; j++) {
      const char *eq = strrchr(dims[j], '=');
      if ((size_t)(eq - dims[j]) == len && memcmp(dims[j], e->name, len) == 0)
        return sg__error(SG_ERR_INVALID_ARG, "%s: dims names '%s' twice (dims[%zu] and dims[%zu])", fn,
                         e->name, j, i);
    }
  }
  *out = d;
  *n = (uint32_t)count;
  return SG_OK;
}

sg_status sg__ox_dim_size(ox_ctx *c, const char *input, size_t d, const char *param, int64_t *out) {
  for (uint32_t i = 0; param[0] && i < c->n_dims; i++) {
    if (strcmp(c->dims[i].name, param) != 0) continue;
    *out = c->dims[i].size;
    return SG_OK;
  }
  if (c->batch > 0) {
    *out = c->batch;
    return SG_OK;
  }
  if (param[0])
    return sg__error(SG_ERR_SHAPE,
                     "graph input '%s': dim %zu is symbolic ('%s'); give its size with sg_onnx_params.dims "
                     "(\"%s=N\"; sgrt --dim %s=N), or every symbolic dim's with sg_onnx_params.batch (sgrt "
                     "--batch N)",
                     input, d, param, param, param);
  return sg__error(
      SG_ERR_SHAPE,
      "graph input '%s': dim %zu is symbolic and unnamed (''); give its size with "
      "sg_onnx_params.batch (sgrt --batch N), which sizes every symbolic dim that dims does not name",
      input, d);
}

/* The named symbolic dims of graph input k ("" for other dims), for the loops below. */
static const char *input_dim_param(const Onnx__GraphProto *gp, size_t k, size_t j, size_t *n_dim) {
  const Onnx__TypeProto *tp = gp->input[k]->type;
  *n_dim = 0;
  if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL ||
      tp->tensor_type->shape == NULL)
    return "";
  const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
  *n_dim = sh->n_dim;
  if (j >= sh->n_dim) return "";
  const Onnx__TensorShapeProto__Dimension *dim = sh->dim[j];
  if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM || !dim->dim_param) return "";
  return dim->dim_param;
}

sg_status sg__ox_dims_check_names(const ox_ctx *c) {
  const Onnx__GraphProto *gp = c->graph;
  for (uint32_t i = 0; i < c->n_dims; i++) {
    bool found = false;
    size_t n_dim = 1;
    for (size_t k = 0; k < gp->n_input && !found; k++)
      for (size_t j = 0; j < n_dim && !found; j++)
        found = strcmp(input_dim_param(gp, k, j, &n_dim), c->dims[i].name) == 0;
    if (found) continue;
    /* The names the model has, for the message. */
    char have[512] = "";
    size_t len = 0;
    int shown = 0;
    for (size_t k = 0; k < gp->n_input; k++) {
      n_dim = 1;
      for (size_t j = 0; j < n_dim; j++) {
        const char *param = input_dim_param(gp, k, j, &n_dim);
        if (!param[0] || len >= sizeof have - 1) continue;
        char quoted[104];
        snprintf(quoted, sizeof quoted, "'%.100s'", param);
        if (strstr(have, quoted) != NULL) continue; /* listed already (names are quoted whole) */
        int w = snprintf(have + len, sizeof have - len, "%s%s", shown ? ", " : "", quoted);
        if (w > 0) len += (size_t)w < sizeof have - len ? (size_t)w : sizeof have - len - 1;
        shown++;
      }
    }
    return sg__error(
        SG_ERR_NOT_FOUND, "sg_onnx_params.dims names '%s', which no graph input has; %s%s", c->dims[i].name,
        shown ? "the model's named symbolic dims: " : "the model has no named symbolic dims", have);
  }
  return SG_OK;
}
