/* ONNX Resize (F.interpolate; SegFormer's decode head, BEiT's relative position bias), in modes
 * nearest and linear: separable, so along each axis whose size changes the result is the input times
 * a constant interpolation matrix M [out, in] built at import from ONNX's formulas (the coordinate
 * transformation, the nearest rounding, the neighbours clamped to the edge). It becomes one matmul per
 * resized axis (with a transpose around it when the axis is not the last), so autodiff and the
 * kernels need nothing new; the gradient is the product with M's transpose. A resize to the input's
 * own size is the input. Refused, naming the shapes and the mode: cubic, tf_crop_and_resize,
 * half_pixel_symmetric, antialias when downsampling, and an axis of more than 4096 (M is a constant
 * of out x in elements). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Largest dim resized (M has out x in elements, within the import's constant limit). */
#define OX_RESIZE_MAX 4096

typedef struct resize_mode {
  char mode[32], coord[40], nearest[32];
} resize_mode;

/* The source coordinate of output index i (ONNX's coordinate_transformation_mode). */
static double source_coord(const resize_mode *m, int64_t i, int64_t in, int64_t out, double scale) {
  if (strcmp(m->coord, "align_corners") == 0)
    return out == 1 ? 0.0 : (double)i * (double)(in - 1) / (double)(out - 1);
  if (strcmp(m->coord, "asymmetric") == 0) return (double)i / scale;
  if (strcmp(m->coord, "tf_half_pixel_for_nn") == 0) return ((double)i + 0.5) / scale;
  if (strcmp(m->coord, "pytorch_half_pixel") == 0) return out > 1 ? ((double)i + 0.5) / scale - 0.5 : 0.0;
  return ((double)i + 0.5) / scale - 0.5; /* half_pixel */
}

/* The index nearest_mode picks for coordinate x. */
static int64_t nearest_index(const resize_mode *m, double x) {
  if (strcmp(m->nearest, "floor") == 0) return (int64_t)floor(x);
  if (strcmp(m->nearest, "ceil") == 0) return (int64_t)ceil(x);
  double f = floor(x);
  if (x - f == 0.5) return strcmp(m->nearest, "round_prefer_ceil") == 0 ? (int64_t)f + 1 : (int64_t)f;
  return (int64_t)floor(x + 0.5);
}

static int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* t resized along `axis` from in to out elements: t times M transposed along that axis. */
static sg_status resize_axis(ox_ctx *c, sg_tensor *t, int r, int axis, int64_t in, int64_t out, double scale,
                             const resize_mode *m) {
  float *mt; /* M transposed, [in, out]: x [..., in] @ mt */
  SG_CHECK(sg__ox_fold_alloc(c, in * out, sizeof(float), (void **)&mt));
  memset(mt, 0, sizeof(float) * (size_t)(in * out));
  bool linear = strcmp(m->mode, "linear") == 0;
  for (int64_t i = 0; i < out; i++) {
    double x = source_coord(m, i, in, out, scale);
    if (!linear) {
      mt[clamp_index(nearest_index(m, x), in) * out + i] = 1.0f;
      continue;
    }
    if (x < 0) x = 0; /* the edge repeats: a coordinate outside takes the border's value */
    if (x > (double)(in - 1)) x = (double)(in - 1);
    int64_t x0 = (int64_t)floor(x), x1 = clamp_index(x0 + 1, in);
    double w1 = x - (double)x0;
    mt[x0 * out + i] += (float)(1.0 - w1);
    mt[x1 * out + i] += (float)w1;
  }
  char name[300];
  snprintf(name, sizeof name, "%.256s.resize_%d", sg__ox_has_output(c, 0) ? c->node->output[0] : "resize",
           axis);
  const char *tmp = sg__ox_tmp_name(c, name);
  if (tmp == NULL) return sg__error(SG_ERR_NO_MEMORY, "ONNX import: out of memory");
  int64_t md[2] = {in, out};
  sg_tensor mat = sg_graph_add_tensor(c->g, tmp, SG_F32, SG_ROLE_CONSTANT, 2, md, mt);
  SG_CHECK(sg__ox_built(c, mat));
  SG_CHECK(sg__ox_want_name(c, mat.id, name, 1));
  int64_t perm[SG_MAX_DIMS];
  for (int d = 0; d < r; d++) perm[d] = d;
  perm[axis] = r - 1, perm[r - 1] = axis; /* a swap: its own inverse */
  sg_tensor x = axis == r - 1 ? *t : sg_transpose(c->g, *t, r, perm);
  x = sg_matmul(c->g, x, mat);
  *t = axis == r - 1 ? x : sg_transpose(c->g, x, r, perm);
  return sg__ox_built(c, *t);
}

static sg_status cv_resize(ox_ctx *c, const Onnx__NodeProto *n) {
  static const char *const known[] = {"antialias",
                                      "axes",
                                      "coordinate_transformation_mode",
                                      "cubic_coeff_a",
                                      "exclude_outside",
                                      "extrapolation_value",
                                      "keep_aspect_ratio_policy",
                                      "mode",
                                      "nearest_mode",
                                      NULL};
  SG_CHECK(sg__ox_check_attrs(c, known));
  ox_value *x = sg__ox_input(c, n, 0);
  if (x == NULL) return sg__ox_node_error(c, SG_ERR_ARITY, "input 0 (X) is missing");
  int r, naxes = 0;
  int64_t dims[SG_MAX_DIMS], out[SG_MAX_DIMS], axes[SG_MAX_DIMS];
  SG_CHECK(sg__ox_shape(c, x, &r, dims));
  resize_mode m;
  int64_t antialias = 0;
  SG_CHECK(sg__ox_attr_string(c, "mode", "nearest", m.mode, sizeof m.mode));
  SG_CHECK(sg__ox_attr_string(c, "coordinate_transformation_mode", "half_pixel", m.coord, sizeof m.coord));
  SG_CHECK(sg__ox_attr_string(c, "nearest_mode", "round_prefer_floor", m.nearest, sizeof m.nearest));
  SG_CHECK(sg__ox_attr_int(c, "antialias", 0, &antialias));
  const char *mode = m.mode, *coord = m.coord;
  double scale_of[SG_MAX_DIMS];
  SG_CHECK(sg__ox_attr_ints(c, "axes", SG_MAX_DIMS, axes, &naxes));
  if (naxes == 0)
    for (int d = 0; d < r; d++) axes[naxes++] = d;
  for (int k = 0; k < naxes; k++) SG_CHECK(sg__ox_axis(c, axes[k], r, "axes", &(int){0}));
  memcpy(out, dims, sizeof(int64_t) * (size_t)r);
  /* Opset 10: (X, scales); from 11: (X, roi, scales, sizes), either of the last two. */
  ox_value *scales = sg__ox_input(c, n, c->opset < 11 ? 1 : 2),
           *sizes = c->opset < 11 ? NULL : sg__ox_input(c, n, 3);
  if (sizes != NULL) {
    int64_t v[SG_MAX_DIMS];
    int nv = 0;
    SG_CHECK(sg__ox_const_ints(c, sizes, "sizes", SG_MAX_DIMS, v, &nv));
    if (nv != naxes) return sg__ox_node_error(c, SG_ERR_SHAPE, "sizes has %d values for %d axes", nv, naxes);
    for (int k = 0; k < naxes; k++) {
      int a;
      SG_CHECK(sg__ox_axis(c, axes[k], r, "axes", &a));
      out[a] = v[k];
      scale_of[a] = dims[a] > 0 ? (double)v[k] / (double)dims[a] : 1.0;
    }
  } else if (scales != NULL) {
    SG_CHECK(sg__ox_need_foldable(c, scales, "scales"));
    if (scales->numel != naxes)
      return sg__ox_node_error(c, SG_ERR_SHAPE, "scales has %lld values for %d axes",
                               (long long)scales->numel, naxes);
    for (int k = 0; k < naxes; k++) {
      int a;
      SG_CHECK(sg__ox_axis(c, axes[k], r, "axes", &a));
      double s = sg__ox_num(scales, k);
      if (!(s > 0) || !isfinite(s)) return sg__ox_node_error(c, SG_ERR_ATTRIBUTE, "scale %d is %g", k, s);
      double o = floor((double)dims[a] * s);
      if (o > (double)OX_RESIZE_MAX) /* before the cast: a huge scale has no int64 */
        return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                                 "scale %d (%g) resizes dim %d of '%s' from %lld to %g; sgrt resizes dims of "
                                 "1..%d",
                                 k, s, a, x->name, (long long)dims[a], o, OX_RESIZE_MAX);
      out[a] = (int64_t)o;
      scale_of[a] = s;
    }
  } else {
    return sg__ox_node_error(c, SG_ERR_ARITY, "needs scales or sizes");
  }
  bool same = strcmp(coord, "tf_crop_and_resize") != 0;
  for (int d = 0; same && d < r; d++) same = out[d] == dims[d];
  if (same) return sg__ox_set_alias(c, 0, x);
  char from[256], to[256], why[160] = "";
  static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                       "tf_half_pixel_for_nn"};
  bool coord_ok = false, downsample = false;
  for (size_t i = 0; i < sizeof coords / sizeof *coords; i++)
    coord_ok = coord_ok || strcmp(coord, coords[i]) == 0;
  for (int d = 0; d < r; d++) {
    downsample = downsample || out[d] < dims[d];
    if (out[d] < 1 || out[d] > OX_RESIZE_MAX || dims[d] > OX_RESIZE_MAX)
      snprintf(why, sizeof why, "dim %d resized from %lld to %lld; sgrt resizes dims of 1..%d", d,
               (long long)dims[d], (long long)out[d], OX_RESIZE_MAX);
  }
  if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0)
    snprintf(why, sizeof why, "sgrt resizes in modes nearest and linear");
  else if (!coord_ok)
    snprintf(why, sizeof why, "sgrt does not implement coordinate_transformation_mode '%s'", coord);
  else if (antialias && downsample)
    snprintf(why, sizeof why, "sgrt does not antialias a downsampling Resize (antialias = 1)");
  if (why[0])
    return sg__ox_node_error(c, SG_ERR_UNSUPPORTED, "resizes '%s' %s to %s (mode '%s', %s): %s", x->name,
                             sg__onnx_dims_text(from, sizeof from, r, dims),
                             sg__onnx_dims_text(to, sizeof to, r, out), mode, coord, why);
  sg_tensor t;
  bool was_bool;
  SG_CHECK(sg__ox_tensor(c, x, &t));
  SG_CHECK(sg__ox_bool_in(c, &t, &was_bool));
  for (int d = 0; d < r; d++)
    if (out[d] != dims[d]) SG_CHECK(resize_axis(c, &t, r, d, dims[d], out[d], scale_of[d], &m));
  SG_CHECK(sg__ox_bool_out(c, &t, was_bool));
  return sg__ox_set_tensor(c, 0, t);
}

const ox_op sg__ox_resize_ops[] = {
    {"Resize", cv_resize, 1, 4, 1, 1},
};
const int sg__ox_n_resize_ops = (int)(sizeof sg__ox_resize_ops / sizeof *sg__ox_resize_ops);
