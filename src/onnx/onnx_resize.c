/* ONNX Resize, in the one form sgrt can represent: a resize to the input's own size (BEiT's relative
 * position bias, interpolated from the table's size to the same size when the image size is the one
 * it was trained at), which every mode but tf_crop_and_resize leaves as it is: an identity. Any other
 * size is refused, naming the shapes and the mode (sgrt has no interpolation op). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"

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
  char mode[32], coord[32];
  SG_CHECK(sg__ox_attr_string(c, "mode", "nearest", mode, sizeof mode));
  SG_CHECK(sg__ox_attr_string(c, "coordinate_transformation_mode", "half_pixel", coord, sizeof coord));
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
      out[a] = (int64_t)floor((double)dims[a] * s);
    }
  } else {
    return sg__ox_node_error(c, SG_ERR_ARITY, "needs scales or sizes");
  }
  bool same = strcmp(coord, "tf_crop_and_resize") != 0;
  for (int d = 0; same && d < r; d++) same = out[d] == dims[d];
  if (same) return sg__ox_set_alias(c, 0, x);
  char from[256], to[256];
  return sg__ox_node_error(c, SG_ERR_UNSUPPORTED,
                           "resizes '%s' %s to %s (mode '%s', %s); sgrt has no interpolation op, and imports "
                           "a Resize only to the input's own size",
                           x->name, sg__onnx_dims_text(from, sizeof from, r, dims),
                           sg__onnx_dims_text(to, sizeof to, r, out), mode, coord);
}

const ox_op sg__ox_resize_ops[] = {
    {"Resize", cv_resize, 1, 4, 1, 1},
};
const int sg__ox_n_resize_ops = (int)(sizeof sg__ox_resize_ops / sizeof *sg__ox_resize_ops);
