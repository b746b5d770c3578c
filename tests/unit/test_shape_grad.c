/* Shape and dtype inference of the backward op kinds (32..48) and each of
 * their failure modes. Expected shapes are worked out by hand from the
 * forward ops' formulas (PyTorch's conv and pooling output sizes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "test_util.h"

static int name_counter;

static sg_graph *fresh(void) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  name_counter = 0;
  return g;
}

static sg_tensor mkr(sg_graph *g, sg_role role, sg_dtype dt, int ndim, const int64_t *dims) {
  char name[32];
  snprintf(name, sizeof name, "t%d", name_counter++);
  return sg_graph_add_tensor(g, name, dt, role, ndim, dims, NULL);
}
#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define MK(g, dt, ...) mkr(g, SG_ROLE_INPUT, dt, NDIM(__VA_ARGS__), D(__VA_ARGS__))
#define MK0(g, dt) mkr(g, SG_ROLE_INPUT, dt, 0, NULL)
#define T(...) ((const sg_tensor[]){__VA_ARGS__})
#define NT(...) ((int)(sizeof((sg_tensor[]){__VA_ARGS__}) / sizeof(sg_tensor)))
#define A(...) ((const sg_attr[]){__VA_ARGS__})
#define NA(...) ((int)(sizeof((sg_attr[]){__VA_ARGS__}) / sizeof(sg_attr)))
#define UNP(...) __VA_ARGS__
#define INTS(name, ...) SG__AS(name, NDIM(__VA_ARGS__), D(__VA_ARGS__))

/* Builds one op through the generic constructor and returns output `k`. */
static sg_tensor op_out(sg_graph *g, sg_op_kind kind, int n_in, const sg_tensor *in, int n_attrs,
                        const sg_attr *attrs, int k) {
  sg_tensor out[SG__MAX_OUTPUTS] = {SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR, SG_NO_TENSOR};
  sg_graph_add_op(g, kind, n_in, in, n_attrs, attrs, SG__MAX_OUTPUTS, out, NULL);
  return out[k];
}
/* OP(g, kind, (inputs...), attrs...) with at least one attribute; OP0 without. */
#define OPK(g, kind, k, ins, ...) op_out(g, kind, NT ins, T ins, NA(__VA_ARGS__), A(__VA_ARGS__), k)
#define OP(g, kind, ins, ...) OPK(g, kind, 0, ins, __VA_ARGS__)
#define OP0(g, kind, ins) op_out(g, kind, NT ins, T ins, 0, NULL, 0)

/* Backward kinds that are forward ops too: sg_slice (attention's q, k, v) and broadcast_to (the ONNX
 * importer's Expand). */
static bool forward_too(sg_op_kind kind) { return kind == SG_OP_SLICE || kind == SG_OP_BROADCAST_TO; }

static void expect_shape_(sg_graph *g, sg_tensor t, sg_dtype dt, int ndim, const int64_t *dims, int line) {
  sg_tensor_info info;
  if (t.id < 0) {
    fprintf(stderr, "line %d: builder failed: %s\n", line, sg_last_error());
    _fail(__FILE__, line);
  }
  assert_int_equal(sg_graph_tensor_info(g, t, &info), SG_OK);
  if (info.dtype != dt || info.ndim != ndim) {
    fprintf(stderr, "line %d: got dtype %s rank %d, want %s rank %d\n", line, sg_dtype_name(info.dtype),
            info.ndim, sg_dtype_name(dt), ndim);
    _fail(__FILE__, line);
  }
  for (int i = 0; i < ndim; i++)
    if (info.dims[i] != dims[i]) {
      fprintf(stderr, "line %d: dim %d is %lld, want %lld\n", line, i, (long long)info.dims[i],
              (long long)dims[i]);
      _fail(__FILE__, line);
    }
  /* Every backward op's output is a gradient; slice and broadcast_to, forward ops too, make activations
   * outside backward. */
  sg_role want = forward_too(g->ops[g->n_ops - 1].kind) ? SG_ROLE_ACTIVATION : SG_ROLE_GRADIENT;
  if (info.role != want) {
    fprintf(stderr, "line %d: role is %s, want %s\n", line, sg_role_name(info.role), sg_role_name(want));
    _fail(__FILE__, line);
  }
}
#define EXPECT_SHAPE(g, t, dt, ...) expect_shape_(g, t, dt, NDIM(__VA_ARGS__), D(__VA_ARGS__), __LINE__)
#define EXPECT_SCALAR(g, t, dt) expect_shape_(g, t, dt, 0, NULL, __LINE__)

/* A builder call that must fail with `status` and a message containing
 * `needle`; the error is sticky and finalize reports it. Starts a fresh graph. */
#define EXPECT_FAIL(g, expr, status, needle)           \
  do {                                                 \
    sg_tensor r_ = (expr);                             \
    assert_true(r_.id < 0);                            \
    assert_status(sg_graph_status(g), status, needle); \
    assert_status(sg_graph_finalize(g), status, NULL); \
    sg_graph_destroy(g);                               \
    g = fresh();                                       \
  } while (0)

#define STRIDE(s) INTS("stride", s, s)
#define PAD(p) INTS("padding", p, p, p, p)

static void test_conv2d_backward(void **state) {
  (void)state;
  sg_graph *g = fresh();
  /* ResNet stem: x [2,3,224,224], w [64,3,7,7], stride 2, pad 3 -> dy [2,64,112,112]. */
  sg_tensor dy = MK(g, SG_F32, 2, 64, 112, 112), w = MK(g, SG_F32, 64, 3, 7, 7),
            x = MK(g, SG_F32, 2, 3, 224, 224);
  EXPECT_SHAPE(
      g, OP(g, SG_OP_CONV2D_BACKWARD_DATA, (dy, w), STRIDE(2), PAD(3), INTS("input_shape", 2, 3, 224, 224)),
      SG_F32, 2, 3, 224, 224);
  EXPECT_SHAPE(
      g, OP(g, SG_OP_CONV2D_BACKWARD_WEIGHT, (dy, x), STRIDE(2), PAD(3), INTS("weight_shape", 64, 3, 7, 7)),
      SG_F32, 64, 3, 7, 7);
  /* Stride 2 loses the input size: 7 and 8 both give 4 with k3 s2 p1, so
   * the attribute decides (7: (7+2-3)/2+1 = 4; 8: (8+2-3)/2+1 = 4). */
  dy = MK(g, SG_BF16, 1, 2, 4, 4);
  w = MK(g, SG_BF16, 2, 1, 3, 3);
  EXPECT_SHAPE(g,
               OP(g, SG_OP_CONV2D_BACKWARD_DATA, (dy, w), STRIDE(2), PAD(1), INTS("input_shape", 1, 1, 7, 7)),
               SG_BF16, 1, 1, 7, 7);
  EXPECT_SHAPE(g,
               OP(g, SG_OP_CONV2D_BACKWARD_DATA, (dy, w), STRIDE(2), PAD(1), INTS("input_shape", 1, 1, 8, 8)),
               SG_BF16, 1, 1, 8, 8);
  /* Grouped, dilated, asymmetric: x [1,4,9,6], w [6,2,3,2], groups 2,
   * dilation (2,1), padding (1,0,2,1), stride (1,2):
   * oh = (9+1+2-5)/1+1 = 8, ow = (6+0+1-2)/2+1 = 3. */
  dy = MK(g, SG_F16, 1, 6, 8, 3);
  w = MK(g, SG_F16, 6, 2, 3, 2);
  x = MK(g, SG_F16, 1, 4, 9, 6);
  sg_attr grouped[] = {INTS("stride", 1, 2), INTS("padding", 1, 0, 2, 1), INTS("dilation", 2, 1),
                       SG__AI("groups", 2), INTS("input_shape", 1, 4, 9, 6)};
  EXPECT_SHAPE(g, op_out(g, SG_OP_CONV2D_BACKWARD_DATA, 2, T(dy, w), 5, grouped, 0), SG_F16, 1, 4, 9, 6);
  grouped[4] = INTS("weight_shape", 6, 2, 3, 2);
  EXPECT_SHAPE(g, op_out(g, SG_OP_CONV2D_BACKWARD_WEIGHT, 2, T(dy, x), 5, grouped, 0), SG_F16, 6, 2, 3, 2);
  /* Only the shape attribute is required; the rest take conv2d's defaults. */
  dy = MK(g, SG_F32, 1, 4, 6, 6);
  EXPECT_SHAPE(
      g, OP(g, SG_OP_CONV2D_BACKWARD_DATA, (dy, MK(g, SG_F32, 4, 3, 3, 3)), INTS("input_shape", 1, 3, 8, 8)),
      SG_F32, 1, 3, 8, 8);
  /* Canonical attribute order: conv2d's, then the shape. */
  sg_op_info info;
  int32_t last = sg_graph_num_ops(g) - 1;
  assert_int_equal(sg_graph_op_info(g, last, &info), SG_OK);
  assert_int_equal(info.n_attrs, 5);
  static const char *const order[] = {"stride", "padding", "dilation", "groups", "input_shape"};
  for (int i = 0; i < 5; i++) {
    sg_attr a;
    assert_int_equal(sg_graph_op_attr(g, last, i, &a), SG_OK);
    assert_string_equal(a.name, order[i]);
  }
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  /* Failures of backward_data: dy [1,4,6,6] is conv2d of [1,3,8,8] with [4,3,3,3]. */
  g = fresh();
#define BWD_DATA(dyd, wd, ...) \
  OP(g, SG_OP_CONV2D_BACKWARD_DATA, (MK(g, SG_F32, UNP dyd), MK(g, SG_F32, UNP wd)), __VA_ARGS__)
#define DY (1, 4, 6, 6)
#define W (4, 3, 3, 3)
  EXPECT_FAIL(
      g, BWD_DATA(DY, W, INTS("input_shape", 1, 3, 9, 9)), SG_ERR_SHAPE,
      "dy 't0' [1,4,6,6] f32 must be [1,4,7,7] f32, the conv2d output of input_shape [1,3,9,9] f32 with w "
      "'t1' [4,3,3,3] f32");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("input_shape", 2, 3, 8, 8)), SG_ERR_SHAPE, "must be [2,4,6,6] f32");
  EXPECT_FAIL(g, BWD_DATA((1, 5, 6, 6), W, INTS("input_shape", 1, 3, 8, 8)), SG_ERR_SHAPE,
              "must be [1,4,6,6]");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("input_shape", 1, 5, 8, 8)), SG_ERR_SHAPE,
              "input_shape [1,5,8,8] f32 has 5 channels but w 't1' [4,3,3,3] f32 expects 3");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("input_shape", 1, 3, 8, 0)), SG_ERR_ATTRIBUTE, "dims >= 1");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("input_shape", 1, 3, 8)), SG_ERR_ATTRIBUTE, "needs 4..4 values, got 3");
  EXPECT_FAIL(g, BWD_DATA(DY, W, STRIDE(1)), SG_ERR_ATTRIBUTE, "required attribute 'input_shape' is missing");
  EXPECT_FAIL(g, BWD_DATA(DY, W, STRIDE(0), INTS("input_shape", 1, 3, 8, 8)), SG_ERR_ATTRIBUTE, "stride");
  EXPECT_FAIL(g, BWD_DATA(DY, W, PAD(-1), INTS("input_shape", 1, 3, 8, 8)), SG_ERR_ATTRIBUTE,
              "padding[0] is -1");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("dilation", 0, 1), INTS("input_shape", 1, 3, 8, 8)), SG_ERR_ATTRIBUTE,
              "dilation");
  EXPECT_FAIL(g, BWD_DATA(DY, W, SG__AI("groups", 2), INTS("input_shape", 1, 3, 8, 8)), SG_ERR_SHAPE,
              "groups 2 must divide");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("input_shape", 1, 3, 2, 2)), SG_ERR_SHAPE,
              "larger than padded input_shape");
  EXPECT_FAIL(g, BWD_DATA((4, 6, 6), W, INTS("input_shape", 1, 3, 8, 8)), SG_ERR_SHAPE,
              "must be 4-D [N,K,OH,OW]");
  EXPECT_FAIL(g, BWD_DATA(DY, (4, 3, 3), INTS("input_shape", 1, 3, 8, 8)), SG_ERR_SHAPE,
              "w 't1' [4,3,3] f32 must be 4-D [K,C/groups,R,S]");
  EXPECT_FAIL(g,
              OP(g, SG_OP_CONV2D_BACKWARD_DATA, (MK(g, SG_F32, UNP DY), MK(g, SG_F16, UNP W)),
                 INTS("input_shape", 1, 3, 8, 8)),
              SG_ERR_DTYPE, "one float dtype");
  EXPECT_FAIL(g,
              OP(g, SG_OP_CONV2D_BACKWARD_DATA, (MK(g, SG_I32, UNP DY), MK(g, SG_I32, UNP W)),
                 INTS("input_shape", 1, 3, 8, 8)),
              SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g,
              OP(g, SG_OP_CONV2D_BACKWARD_DATA,
                 (MK(g, SG_F32, UNP DY), MK(g, SG_F32, UNP W), MK(g, SG_F32, 4)),
                 INTS("input_shape", 1, 3, 8, 8)),
              SG_ERR_ARITY, "conv2d_backward_data takes 2 inputs, got 3");
  EXPECT_FAIL(g, BWD_DATA(DY, W, INTS("input_shape", 1, 3, 8, 8), SG__AI("bogus", 1)), SG_ERR_ATTRIBUTE,
              "unknown attribute 'bogus'");

  /* Failures of backward_weight: the same convolution seen from x. */
#define BWD_W(dyd, xd, ...) \
  OP(g, SG_OP_CONV2D_BACKWARD_WEIGHT, (MK(g, SG_F32, UNP dyd), MK(g, SG_F32, UNP xd)), __VA_ARGS__)
#define X (1, 3, 8, 8)
  EXPECT_FAIL(g, BWD_W(DY, X, INTS("weight_shape", 5, 3, 3, 3)), SG_ERR_SHAPE,
              "dy 't0' [1,4,6,6] f32 must be [1,5,6,6] f32, the conv2d output of x 't1' [1,3,8,8] f32 with "
              "weight_shape [5,3,3,3] f32");
  EXPECT_FAIL(g, BWD_W(DY, X, INTS("weight_shape", 4, 3, 5, 5)), SG_ERR_SHAPE, "must be [1,4,4,4] f32");
  EXPECT_FAIL(g, BWD_W(DY, X, INTS("weight_shape", 4, 2, 3, 3)), SG_ERR_SHAPE,
              "x 't1' [1,3,8,8] f32 has 3 channels but weight_shape [4,2,3,3] f32 expects 2");
  EXPECT_FAIL(g, BWD_W(DY, X, INTS("weight_shape", -4, 3, 3, 3)), SG_ERR_ATTRIBUTE,
              "weight_shape [-4,3,3,3]");
  EXPECT_FAIL(g, BWD_W(DY, X, INTS("input_shape", 4, 3, 3, 3)), SG_ERR_ATTRIBUTE,
              "unknown attribute 'input_shape'");
  EXPECT_FAIL(g, BWD_W(DY, (3, 8, 8), INTS("weight_shape", 4, 3, 3, 3)), SG_ERR_SHAPE,
              "x 't1' [3,8,8] f32 must be 4-D");
#undef BWD_DATA
#undef BWD_W
#undef DY
#undef W
#undef X
  sg_graph_destroy(g);
}

static void test_batch_norm_backward(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor dy = MK(g, SG_F32, 4, 3, 5, 5), x = MK(g, SG_F32, 4, 3, 5, 5), c3[3];
  for (int i = 0; i < 3; i++) c3[i] = MK(g, SG_F32, 3);
  sg_tensor in[] = {dy, x, c3[0], c3[1], c3[2]}, out[3];
  int n = 0;
  assert_int_equal(sg_graph_add_op(g, SG_OP_BATCH_NORM_BACKWARD, 5, in, 0, NULL, 3, out, &n), SG_OK);
  assert_int_equal(n, 3);
  EXPECT_SHAPE(g, out[0], SG_F32, 4, 3, 5, 5);
  EXPECT_SHAPE(g, out[1], SG_F32, 3);
  EXPECT_SHAPE(g, out[2], SG_F32, 3);
  /* Inference form on 2-D input: still three outputs. */
  sg_tensor in2[] = {MK(g, SG_F16, 7, 3), MK(g, SG_F16, 7, 3), MK(g, SG_F16, 3), MK(g, SG_F16, 3),
                     MK(g, SG_F16, 3)};
  sg_attr inference[] = {SG__AF("eps", 1e-3), SG__AI("training", 0)};
  assert_int_equal(sg_graph_add_op(g, SG_OP_BATCH_NORM_BACKWARD, 5, in2, 2, inference, 3, out, &n), SG_OK);
  assert_int_equal(n, 3);
  EXPECT_SHAPE(g, out[0], SG_F16, 7, 3);
  EXPECT_SHAPE(g, out[2], SG_F16, 3);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
#define BNB(xd, dyd, cd, ...)                                                              \
  OP(g, SG_OP_BATCH_NORM_BACKWARD,                                                         \
     (MK(g, SG_F32, UNP dyd), MK(g, SG_F32, UNP xd), MK(g, SG_F32, cd), MK(g, SG_F32, cd), \
      MK(g, SG_F32, cd)),                                                                  \
     __VA_ARGS__)
  EXPECT_FAIL(g, BNB((4, 3, 5), (4, 3, 6), 3, SG__AI("training", 1)), SG_ERR_SHAPE,
              "dy 't0' [4,3,6] f32 must have the shape of x 't1' [4,3,5] f32");
  EXPECT_FAIL(g, BNB((4, 3), (4, 3), 4, SG__AI("training", 1)), SG_ERR_SHAPE,
              "gamma 't2' [4] f32 must be [3], the channels of x");
  EXPECT_FAIL(g, BNB((4, 3), (4, 3), 4, SG__AI("training", 0)), SG_ERR_SHAPE, "gamma");
  EXPECT_FAIL(g, BNB((4), (4), 4, SG__AI("training", 1)), SG_ERR_SHAPE, "at least 2 dims");
  EXPECT_FAIL(g, BNB((4, 3), (4, 3), 3, SG__AF("eps", 0)), SG_ERR_ATTRIBUTE, "eps is 0");
  EXPECT_FAIL(g, BNB((4, 3), (4, 3), 3, SG__AI("training", 2)), SG_ERR_ATTRIBUTE, "training is 2");
  EXPECT_FAIL(g, BNB((4, 3), (4, 3), 3, SG__AF("momentum", 0.1)), SG_ERR_ATTRIBUTE,
              "unknown attribute 'momentum'");
#undef BNB
  /* The statistics are named after the form: saved batch statistics in
   * training, running statistics in inference. */
  sg_tensor x2 = MK(g, SG_F32, 4, 3);
  EXPECT_FAIL(g,
              OP(g, SG_OP_BATCH_NORM_BACKWARD, (x2, x2, MK(g, SG_F32, 3), MK(g, SG_F32, 3), MK(g, SG_F32, 2)),
                 SG__AI("training", 1)),
              SG_ERR_SHAPE, "invstd 't3' [2] f32 must be [3]");
  x2 = MK(g, SG_F32, 4, 3);
  EXPECT_FAIL(g,
              OP(g, SG_OP_BATCH_NORM_BACKWARD, (x2, x2, MK(g, SG_F32, 3), MK(g, SG_F32, 2), MK(g, SG_F32, 3)),
                 SG__AI("training", 0)),
              SG_ERR_SHAPE, "running_mean 't2' [2] f32 must be [3]");
  x2 = MK(g, SG_F32, 4, 3);
  EXPECT_FAIL(g,
              OP(g, SG_OP_BATCH_NORM_BACKWARD, (x2, x2, MK(g, SG_F32, 3), MK(g, SG_F32, 3), MK(g, SG_F16, 3)),
                 SG__AI("training", 1)),
              SG_ERR_DTYPE, "invstd 't3' [3] f16 must have the dtype of x");
  EXPECT_FAIL(
      g,
      OP(g, SG_OP_BATCH_NORM_BACKWARD,
         (MK(g, SG_F16, 4, 3), MK(g, SG_F32, 4, 3), MK(g, SG_F32, 3), MK(g, SG_F32, 3), MK(g, SG_F32, 3)),
         SG__AI("training", 1)),
      SG_ERR_DTYPE, "dy 't0' [4,3] f16 must have the dtype of x");
  EXPECT_FAIL(
      g,
      OP(g, SG_OP_BATCH_NORM_BACKWARD,
         (MK(g, SG_I32, 4, 3), MK(g, SG_I32, 4, 3), MK(g, SG_I32, 3), MK(g, SG_I32, 3), MK(g, SG_I32, 3)),
         SG__AI("training", 1)),
      SG_ERR_DTYPE, "float");
  x2 = MK(g, SG_F32, 4, 3);
  EXPECT_FAIL(g, OP0(g, SG_OP_BATCH_NORM_BACKWARD, (x2, x2, MK(g, SG_F32, 3), MK(g, SG_F32, 3))),
              SG_ERR_ARITY, "takes 5 inputs, got 4");
  sg_graph_destroy(g);
}

static void test_activation_backward(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor dy = MK(g, SG_F32, 2, 3, 4), y = MK(g, SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP0(g, SG_OP_RELU_BACKWARD, (dy, y)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP0(g, SG_OP_SIGMOID_BACKWARD, (dy, y)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP0(g, SG_OP_TANH_BACKWARD, (dy, y)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_CLIP_BACKWARD, (dy, y), SG__AF("min", 0), SG__AF("max", 6)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_GELU_BACKWARD, (dy, y), SG__AI("approximate", 1)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP0(g, SG_OP_GELU_BACKWARD, (dy, y)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_DROPOUT_BACKWARD, (dy, MK(g, SG_U8, 2, 3, 4)), SG__AF("p", 0.1)), SG_F32, 2, 3,
               4);
  EXPECT_SHAPE(g, OP0(g, SG_OP_DROPOUT_BACKWARD, (dy, MK(g, SG_U8, 2, 3, 4))), SG_F32, 2, 3, 4);
  sg_tensor s = MK0(g, SG_BF16);
  EXPECT_SCALAR(g, OP0(g, SG_OP_TANH_BACKWARD, (s, s)), SG_BF16);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g, OP0(g, SG_OP_RELU_BACKWARD, (MK(g, SG_F32, 2, 3), MK(g, SG_F32, 3, 2))), SG_ERR_SHAPE,
              "dy 't0' [2,3] f32 and y 't1' [3,2] f32 must have the same shape");
  EXPECT_FAIL(g, OP0(g, SG_OP_SIGMOID_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_F16, 3))), SG_ERR_DTYPE,
              "y 't1' [3] f16 must be f32, the dtype of dy");
  EXPECT_FAIL(g, OP0(g, SG_OP_TANH_BACKWARD, (MK(g, SG_I32, 3), MK(g, SG_I32, 3))), SG_ERR_DTYPE,
              "dy 't0' [3] i32 must be a float type");
  EXPECT_FAIL(g, OP0(g, SG_OP_TANH_BACKWARD, (MK(g, SG_F32, 3))), SG_ERR_ARITY, "takes 2 inputs, got 1");
  EXPECT_FAIL(
      g, OP(g, SG_OP_CLIP_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_F32, 3)), SG__AF("min", 2), SG__AF("max", 1)),
      SG_ERR_ATTRIBUTE, "min 2 must be <= max 1");
  EXPECT_FAIL(g, OP(g, SG_OP_CLIP_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_F32, 3)), SG__AF("min", 0)),
              SG_ERR_ATTRIBUTE, "required attribute 'max'");
  EXPECT_FAIL(
      g, OP(g, SG_OP_CLIP_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_F32, 4)), SG__AF("min", 0), SG__AF("max", 6)),
      SG_ERR_SHAPE, "x 't1' [4] f32 must have the same shape");
  EXPECT_FAIL(g, OP(g, SG_OP_GELU_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_F32, 3)), SG__AI("approximate", 2)),
              SG_ERR_ATTRIBUTE, "approximate is 2");
  EXPECT_FAIL(g, OP0(g, SG_OP_DROPOUT_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_F32, 3))), SG_ERR_DTYPE,
              "mask 't1' [3] f32 must be u8");
  EXPECT_FAIL(g, OP0(g, SG_OP_DROPOUT_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_U8, 4))), SG_ERR_SHAPE,
              "mask 't1' [4] u8 must have the same shape");
  EXPECT_FAIL(g, OP(g, SG_OP_DROPOUT_BACKWARD, (MK(g, SG_F32, 3), MK(g, SG_U8, 3)), SG__AF("p", 1)),
              SG_ERR_ATTRIBUTE, "p is 1; must be in [0, 1)");
  sg_graph_destroy(g);
}

static void test_pool_backward(void **state) {
  (void)state;
  sg_graph *g = fresh();
  /* ResNet: max 3/2 pad 1 on 112 -> 56. */
  sg_tensor x = MK(g, SG_F32, 2, 64, 112, 112), dy = MK(g, SG_F32, 2, 64, 56, 56);
  EXPECT_SHAPE(g, OP(g, SG_OP_MAX_POOL2D_BACKWARD, (dy, x), INTS("kernel", 3, 3), STRIDE(2), PAD(1)), SG_F32,
               2, 64, 112, 112);
  /* avg 2x2 stride 2 ceil on 7 -> 4; floor on 7 or 6 -> 3. */
  sg_tensor dy4 = MK(g, SG_F32, 1, 1, 4, 4), dy3 = MK(g, SG_F32, 1, 1, 3, 3);
  EXPECT_SHAPE(g,
               OP(g, SG_OP_AVG_POOL2D_BACKWARD, (dy4), INTS("kernel", 2, 2), STRIDE(2),
                  SG__AI("ceil_mode", 1), INTS("input_shape", 1, 1, 7, 7)),
               SG_F32, 1, 1, 7, 7);
  EXPECT_SHAPE(g,
               OP(g, SG_OP_AVG_POOL2D_BACKWARD, (dy3), INTS("kernel", 2, 2), STRIDE(2),
                  INTS("input_shape", 1, 1, 6, 6)),
               SG_F32, 1, 1, 6, 6);
  /* k3 s1 p1 without counting padding keeps the size. */
  EXPECT_SHAPE(g,
               OP(g, SG_OP_AVG_POOL2D_BACKWARD, (MK(g, SG_F16, 1, 2, 4, 4)), INTS("kernel", 3, 3), PAD(1),
                  SG__AI("count_include_pad", 0), INTS("input_shape", 1, 2, 4, 4)),
               SG_F16, 1, 2, 4, 4);
  /* Ceil mode drops a window starting in the trailing padding: k2 s2 p1 on 5 -> 3. */
  EXPECT_SHAPE(g,
               OP(g, SG_OP_MAX_POOL2D_BACKWARD, (MK(g, SG_F32, 1, 1, 3, 3), MK(g, SG_F32, 1, 1, 5, 5)),
                  INTS("kernel", 2, 2), STRIDE(2), PAD(1), SG__AI("ceil_mode", 1)),
               SG_F32, 1, 1, 5, 5);
  sg_op_info info;
  int32_t last = sg_graph_num_ops(g) - 1;
  assert_int_equal(sg_graph_op_info(g, last, &info), SG_OK);
  assert_int_equal(info.n_attrs, 4);
  assert_int_equal(sg_graph_op_info(g, last - 1, &info), SG_OK);
  assert_int_equal(info.n_attrs, 6);
  sg_attr a;
  assert_int_equal(sg_graph_op_attr(g, last - 1, 5, &a), SG_OK);
  assert_string_equal(a.name, "input_shape");
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
#define MAXB(dyd, xd, ...) \
  OP(g, SG_OP_MAX_POOL2D_BACKWARD, (MK(g, SG_F32, UNP dyd), MK(g, SG_F32, UNP xd)), __VA_ARGS__)
  EXPECT_FAIL(g, MAXB((1, 1, 4, 4), (1, 1, 8, 8), INTS("kernel", 3, 3), STRIDE(2)), SG_ERR_SHAPE,
              "dy 't0' [1,1,4,4] f32 must be [1,1,3,3] f32, the pooled shape of x 't1' [1,1,8,8] f32");
  EXPECT_FAIL(g, MAXB((1, 2, 3, 3), (1, 1, 8, 8), INTS("kernel", 3, 3), STRIDE(2)), SG_ERR_SHAPE,
              "pooled shape");
  EXPECT_FAIL(g, MAXB((1, 1, 3, 3), (1, 1, 8, 8), STRIDE(2)), SG_ERR_ATTRIBUTE,
              "required attribute 'kernel'");
  EXPECT_FAIL(g, MAXB((1, 1, 3, 3), (1, 1, 8, 8), INTS("kernel", 3, 3), PAD(2)), SG_ERR_ATTRIBUTE,
              "half the kernel");
  EXPECT_FAIL(g, MAXB((1, 1, 3, 3), (1, 1, 8, 8), INTS("kernel", 0, 3)), SG_ERR_ATTRIBUTE, "kernel (0,3)");
  EXPECT_FAIL(g, MAXB((1, 1, 3, 3), (1, 1, 8, 8), INTS("kernel", 3, 3), SG__AI("ceil_mode", 2)),
              SG_ERR_ATTRIBUTE, "ceil_mode is 2");
  EXPECT_FAIL(g, MAXB((1, 1, 3, 3), (1, 1, 8, 8), INTS("kernel", 3, 3), SG__AI("count_include_pad", 0)),
              SG_ERR_ATTRIBUTE, "unknown attribute 'count_include_pad'");
  EXPECT_FAIL(g, MAXB((1, 1, 1, 1), (1, 1, 2, 2), INTS("kernel", 3, 3)), SG_ERR_SHAPE,
              "larger than padded x");
  EXPECT_FAIL(g, MAXB((1, 3, 3), (1, 8, 8), INTS("kernel", 3, 3)), SG_ERR_SHAPE,
              "x 't1' [1,8,8] f32 must be 4-D");
  EXPECT_FAIL(g,
              OP(g, SG_OP_MAX_POOL2D_BACKWARD, (MK(g, SG_F16, 1, 1, 3, 3), MK(g, SG_F32, 1, 1, 8, 8)),
                 INTS("kernel", 3, 3), STRIDE(2)),
              SG_ERR_DTYPE, "one float dtype");
#undef MAXB
#define AVGB(dyd, ...) OP(g, SG_OP_AVG_POOL2D_BACKWARD, (MK(g, SG_F32, UNP dyd)), __VA_ARGS__)
  EXPECT_FAIL(g, AVGB((1, 1, 4, 4), INTS("kernel", 2, 2), STRIDE(2), INTS("input_shape", 1, 1, 7, 7)),
              SG_ERR_SHAPE, "must be [1,1,3,3] f32, the pooled shape of input_shape [1,1,7,7] f32");
  EXPECT_FAIL(g, AVGB((1, 1, 3, 3), INTS("kernel", 2, 2), STRIDE(2)), SG_ERR_ATTRIBUTE,
              "required attribute 'input_shape'");
  EXPECT_FAIL(g, AVGB((1, 1, 3, 3), INTS("kernel", 2, 2), STRIDE(2), INTS("input_shape", 1, 0, 7, 7)),
              SG_ERR_ATTRIBUTE, "dims >= 1");
  EXPECT_FAIL(g,
              AVGB((1, 1, 3, 3), INTS("kernel", 2, 2), STRIDE(2), SG__AI("count_include_pad", 5),
                   INTS("input_shape", 1, 1, 7, 7)),
              SG_ERR_ATTRIBUTE, "count_include_pad is 5");
  EXPECT_FAIL(g, AVGB((1, 3, 3), INTS("kernel", 2, 2), STRIDE(2), INTS("input_shape", 1, 1, 7, 7)),
              SG_ERR_SHAPE, "pooled shape");
  EXPECT_FAIL(g,
              OP(g, SG_OP_AVG_POOL2D_BACKWARD, (MK(g, SG_I64, 1, 1, 3, 3)), INTS("kernel", 2, 2), STRIDE(2),
                 INTS("input_shape", 1, 1, 7, 7)),
              SG_ERR_DTYPE, "float");
#undef AVGB
  sg_graph_destroy(g);
}

static void test_loss_backward(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor dy = MK(g, SG_F32, 8, 10), y = MK(g, SG_F32, 8, 10);
  EXPECT_SHAPE(g, OP0(g, SG_OP_SOFTMAX_BACKWARD, (dy, y)), SG_F32, 8, 10);
  EXPECT_SHAPE(g, OP(g, SG_OP_LOG_SOFTMAX_BACKWARD, (dy, y), SG__AI("axis", 0)), SG_F32, 8, 10);
  sg_tensor logits = MK(g, SG_F32, 8, 10), labels = MK(g, SG_I64, 8);
  EXPECT_SHAPE(g, OP0(g, SG_OP_CROSS_ENTROPY_BACKWARD, (MK0(g, SG_F32), logits, labels)), SG_F32, 8, 10);
  EXPECT_SHAPE(g,
               OP(g, SG_OP_CROSS_ENTROPY_BACKWARD, (MK0(g, SG_F32), logits, MK(g, SG_I32, 8)),
                  SG__AI("reduction", SG_REDUCTION_SUM)),
               SG_F32, 8, 10);
  EXPECT_SHAPE(g,
               OP(g, SG_OP_CROSS_ENTROPY_BACKWARD, (MK(g, SG_F32, 8), logits, labels),
                  SG__AI("reduction", SG_REDUCTION_NONE)),
               SG_F32, 8, 10);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g,
              OP(g, SG_OP_SOFTMAX_BACKWARD, (MK(g, SG_F32, 8, 10), MK(g, SG_F32, 8, 10)), SG__AI("axis", 2)),
              SG_ERR_ATTRIBUTE, "axis 2 is out of range for y 't1' [8,10] f32");
  EXPECT_FAIL(g, OP0(g, SG_OP_SOFTMAX_BACKWARD, (MK0(g, SG_F32), MK0(g, SG_F32))), SG_ERR_ATTRIBUTE,
              "axis -1");
  EXPECT_FAIL(g, OP0(g, SG_OP_LOG_SOFTMAX_BACKWARD, (MK(g, SG_F32, 8, 10), MK(g, SG_F32, 8, 9))),
              SG_ERR_SHAPE, "must have the same shape");
  EXPECT_FAIL(g, OP0(g, SG_OP_LOG_SOFTMAX_BACKWARD, (MK(g, SG_I32, 8, 10), MK(g, SG_I32, 8, 10))),
              SG_ERR_DTYPE, "one float dtype");
#define CEB(dl, ld, lab, red) \
  OP(g, SG_OP_CROSS_ENTROPY_BACKWARD, (dl, MK(g, SG_F32, 8, 10), MK(g, lab, ld)), SG__AI("reduction", red))
  EXPECT_FAIL(g, CEB(MK(g, SG_F32, 1), 8, SG_I64, SG_REDUCTION_MEAN), SG_ERR_SHAPE,
              "dloss 't0' [1] f32 must be a scalar (reduction mean)");
  EXPECT_FAIL(g, CEB(MK(g, SG_F32, 8), 8, SG_I64, SG_REDUCTION_SUM), SG_ERR_SHAPE,
              "must be a scalar (reduction sum)");
  EXPECT_FAIL(g, CEB(MK0(g, SG_F32), 8, SG_I64, SG_REDUCTION_NONE), SG_ERR_SHAPE,
              "dloss 't0' [] f32 must be [8] (reduction none) to match logits 't1' [8,10] f32");
  EXPECT_FAIL(g, CEB(MK0(g, SG_F32), 7, SG_I64, SG_REDUCTION_MEAN), SG_ERR_SHAPE,
              "labels 't2' [7] i64 must be [8] to match logits");
  EXPECT_FAIL(g, CEB(MK0(g, SG_F32), 8, SG_F32, SG_REDUCTION_MEAN), SG_ERR_DTYPE, "class indices");
  EXPECT_FAIL(g, CEB(MK0(g, SG_F16), 8, SG_I64, SG_REDUCTION_MEAN), SG_ERR_DTYPE,
              "dloss 't0' [] f16 must have the dtype of logits");
  EXPECT_FAIL(g, CEB(MK0(g, SG_F32), 8, SG_I64, 3), SG_ERR_ATTRIBUTE, "reduction is 3");
#undef CEB
  EXPECT_FAIL(
      g, OP0(g, SG_OP_CROSS_ENTROPY_BACKWARD, (MK0(g, SG_F32), MK(g, SG_F32, 8, 10, 2), MK(g, SG_I64, 8))),
      SG_ERR_SHAPE, "logits 't1' [8,10,2] f32 must be 2-D");
  EXPECT_FAIL(g,
              OP0(g, SG_OP_CROSS_ENTROPY_BACKWARD, (MK0(g, SG_I32), MK(g, SG_I32, 8, 10), MK(g, SG_I64, 8))),
              SG_ERR_DTYPE, "logits 't1' [8,10] i32 must be a float type");
  sg_graph_destroy(g);
}

static void test_shape_adjoints(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor x = MK(g, SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_SUM_TO, (x), INTS("shape", 3, 1)), SG_F32, 3, 1);
  EXPECT_SHAPE(g, OP(g, SG_OP_SUM_TO, (x), INTS("shape", 2, 1, 4)), SG_F32, 2, 1, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_SUM_TO, (x), INTS("shape", 2, 3, 4)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_SUM_TO, (x), INTS("shape", 4)), SG_F32, 4);
  EXPECT_SCALAR(g, OP(g, SG_OP_SUM_TO, (x), SG__AS("shape", 0, NULL)), SG_F32);
  EXPECT_SHAPE(g, OP(g, SG_OP_SUM_TO, (MK(g, SG_I64, 5, 2)), INTS("shape", 1, 2)), SG_I64, 1, 2);
  EXPECT_SHAPE(g, OP(g, SG_OP_BROADCAST_TO, (MK(g, SG_F32, 3, 1)), INTS("shape", 2, 3, 4)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, OP(g, SG_OP_BROADCAST_TO, (MK0(g, SG_F16)), INTS("shape", 5)), SG_F16, 5);
  EXPECT_SHAPE(g, OP(g, SG_OP_BROADCAST_TO, (MK(g, SG_U8, 1)), INTS("shape", 2, 3)), SG_U8, 2, 3);
  EXPECT_SHAPE(g, OP(g, SG_OP_BROADCAST_TO, (x), INTS("shape", 2, 3, 4)), SG_F32, 2, 3, 4);
  sg_attr sl[] = {SG__AI("axis", -1), SG__AI("start", 1), SG__AI("length", 2)};
  EXPECT_SHAPE(g, op_out(g, SG_OP_SLICE, 1, &x, 3, sl, 0), SG_F32, 2, 3, 2);
  sl[0].i = 1;
  sl[1].i = 0;
  sl[2].i = 3;
  EXPECT_SHAPE(g, op_out(g, SG_OP_SLICE, 1, T(MK(g, SG_I32, 2, 3, 4)), 3, sl, 0), SG_I32, 2, 3, 4);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g, OP(g, SG_OP_SUM_TO, (MK(g, SG_F32, 2, 3, 4)), INTS("shape", 4, 3)), SG_ERR_SHAPE,
              "shape [4,3] f32 does not broadcast to x 't0' [2,3,4] f32");
  EXPECT_FAIL(g, OP(g, SG_OP_SUM_TO, (MK(g, SG_F32, 3, 4)), INTS("shape", 1, 3, 4)), SG_ERR_SHAPE,
              "does not broadcast to x");
  EXPECT_FAIL(g, OP(g, SG_OP_SUM_TO, (MK(g, SG_F32, 3, 4)), INTS("shape", 0, 4)), SG_ERR_ATTRIBUTE,
              "shape [0,4] f32 must have dims >= 1");
  EXPECT_FAIL(g, OP(g, SG_OP_SUM_TO, (MK(g, SG_BOOL, 3, 4)), INTS("shape", 4)), SG_ERR_DTYPE,
              "float or integer");
  EXPECT_FAIL(g, OP0(g, SG_OP_SUM_TO, (MK(g, SG_F32, 3, 4))), SG_ERR_ATTRIBUTE, "required attribute 'shape'");
  EXPECT_FAIL(g, OP(g, SG_OP_SUM_TO, (MK(g, SG_F32, 3)), INTS("shape", 1, 1, 1, 1, 1, 1, 1, 1, 3)),
              SG_ERR_ATTRIBUTE, "needs 0..8 values, got 9");
  EXPECT_FAIL(g, OP(g, SG_OP_BROADCAST_TO, (MK(g, SG_F32, 2, 3)), INTS("shape", 3, 3)), SG_ERR_SHAPE,
              "x 't0' [2,3] f32 does not broadcast to shape [3,3] f32");
  EXPECT_FAIL(g, OP(g, SG_OP_BROADCAST_TO, (MK(g, SG_F32, 2, 3)), INTS("shape", 3)), SG_ERR_SHAPE,
              "does not broadcast to shape");
  EXPECT_FAIL(g, OP(g, SG_OP_BROADCAST_TO, (MK(g, SG_F32, 1)), SG__AS("shape", 0, NULL)), SG_ERR_SHAPE,
              "x 't0' [1] f32 does not broadcast to shape [] f32");
  EXPECT_FAIL(g, OP(g, SG_OP_BROADCAST_TO, (MK(g, SG_F32, 1)), INTS("shape", 1 << 30, 1 << 30, 1 << 30)),
              SG_ERR_ATTRIBUTE, "at most 2^56 elements");
#define SLICE(xt, ax, st, len) \
  OP(g, SG_OP_SLICE, (xt), SG__AI("axis", ax), SG__AI("start", st), SG__AI("length", len))
  EXPECT_FAIL(g, SLICE(MK(g, SG_F32, 2, 3), 1, 2, 2), SG_ERR_ATTRIBUTE,
              "start 2 and length 2 must give a non-empty range inside dim 1 (size 3) of x 't0' [2,3] f32");
  EXPECT_FAIL(g, SLICE(MK(g, SG_F32, 2, 3), 1, 0, 0), SG_ERR_ATTRIBUTE, "length 0");
  EXPECT_FAIL(g, SLICE(MK(g, SG_F32, 2, 3), 1, -1, 1), SG_ERR_ATTRIBUTE, "start -1");
  EXPECT_FAIL(g, SLICE(MK(g, SG_F32, 2, 3), 0, INT64_MAX, 1), SG_ERR_ATTRIBUTE, "range");
  EXPECT_FAIL(g, SLICE(MK(g, SG_F32, 2, 3), 0, 1, INT64_MAX), SG_ERR_ATTRIBUTE, "range");
  EXPECT_FAIL(g, SLICE(MK(g, SG_F32, 2, 3), 2, 0, 1), SG_ERR_ATTRIBUTE, "axis 2 is out of range");
  EXPECT_FAIL(g, SLICE(MK0(g, SG_F32), 0, 0, 1), SG_ERR_ATTRIBUTE, "axis 0 is out of range");
  EXPECT_FAIL(g, OP(g, SG_OP_SLICE, (MK(g, SG_F32, 2, 3)), SG__AI("axis", 0), SG__AI("start", 0)),
              SG_ERR_ATTRIBUTE, "required attribute 'length'");
#undef SLICE
  sg_graph_destroy(g);
}

/* The table entries: output role, no in-place updates, names; and a graph
 * holding every backward kind survives the .sgg round trip, which re-runs
 * their inference in the reader's verifier. */
static void test_table_and_roundtrip(void **state) {
  (void)state;
  for (int k = SG_OP_CONV2D_BACKWARD_DATA; k <= SG_OP_SLICE; k++) {
    const sg__op_def *def = sg__op_def_get((sg_op_kind)k);
    assert_non_null(def);
    assert_int_equal(def->kind, k);
    /* slice and broadcast_to are forward ops too: their outputs are activations outside backward. */
    assert_int_equal(def->output_role, forward_too((sg_op_kind)k) ? SG_ROLE_ACTIVATION : SG_ROLE_GRADIENT);
    assert_int_equal(def->mutated_inputs, 0);
    assert_int_equal(def->optional_inputs, 0);
    assert_string_not_equal(sg_op_kind_name((sg_op_kind)k), "?");
  }
  assert_string_equal(sg_op_kind_name(SG_OP_SUM_TO), "sum_to");
  assert_string_equal(sg_op_kind_name((sg_op_kind)(SG__OP_KIND_LAST + 1)), "?");
  /* layer_norm_backward (appended later) is a backward op too; its scale is optional. */
  const sg__op_def *ln = sg__op_def_get(SG_OP_LAYER_NORM_BACKWARD);
  assert_int_equal(ln->output_role, SG_ROLE_GRADIENT);
  assert_int_equal(ln->mutated_inputs, 0);
  assert_int_equal(ln->optional_inputs, 1u << 2);

  sg_graph *g = fresh();
  sg_tensor dy4 = MK(g, SG_F32, 1, 4, 6, 6), w = MK(g, SG_F32, 4, 3, 3, 3), x = MK(g, SG_F32, 1, 3, 8, 8);
  OP(g, SG_OP_CONV2D_BACKWARD_DATA, (dy4, w), INTS("input_shape", 1, 3, 8, 8));
  OP(g, SG_OP_CONV2D_BACKWARD_WEIGHT, (dy4, x), INTS("weight_shape", 4, 3, 3, 3));
  sg_tensor c = MK(g, SG_F32, 4);
  OP0(g, SG_OP_BATCH_NORM_BACKWARD, (dy4, dy4, c, c, c));
  OP0(g, SG_OP_RELU_BACKWARD, (dy4, dy4));
  OP(g, SG_OP_CLIP_BACKWARD, (dy4, dy4), SG__AF("min", 0), SG__AF("max", 6));
  OP0(g, SG_OP_GELU_BACKWARD, (dy4, dy4));
  OP0(g, SG_OP_SIGMOID_BACKWARD, (dy4, dy4));
  OP0(g, SG_OP_TANH_BACKWARD, (dy4, dy4));
  sg_tensor dy3 = MK(g, SG_F32, 1, 4, 3, 3);
  OP(g, SG_OP_MAX_POOL2D_BACKWARD, (dy3, dy4), INTS("kernel", 2, 2), STRIDE(2));
  OP(g, SG_OP_AVG_POOL2D_BACKWARD, (dy3), INTS("kernel", 2, 2), STRIDE(2), INTS("input_shape", 1, 4, 6, 6));
  OP0(g, SG_OP_SOFTMAX_BACKWARD, (dy4, dy4));
  OP0(g, SG_OP_LOG_SOFTMAX_BACKWARD, (dy4, dy4));
  OP0(g, SG_OP_CROSS_ENTROPY_BACKWARD, (MK0(g, SG_F32), MK(g, SG_F32, 2, 5), MK(g, SG_I32, 2)));
  OP0(g, SG_OP_DROPOUT_BACKWARD, (dy4, MK(g, SG_U8, 1, 4, 6, 6)));
  OP(g, SG_OP_SUM_TO, (dy4), INTS("shape", 4, 1, 1));
  OP(g, SG_OP_BROADCAST_TO, (c), INTS("shape", 2, 4));
  OP(g, SG_OP_SLICE, (dy4), SG__AI("axis", 1), SG__AI("start", 1), SG__AI("length", 2));
  assert_int_equal(sg_graph_num_ops(g), SG_OP_SLICE - SG_OP_CONV2D_BACKWARD_DATA + 1);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  for (int32_t k = 0; k < sg_graph_num_ops(g); k++) assert_int_equal(sg__op_mutated_inputs(&g->ops[k]), 0);
  void *buf = NULL;
  size_t size = 0;
  assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_OK, NULL);
  sg_graph *h = NULL;
  assert_status(sg_graph_load_from_memory(buf, size, &h), SG_OK, NULL);
  uint64_t ha, hb;
  assert_int_equal(sg_graph_hash(g, SG_HASH_WEIGHTS, &ha), SG_OK);
  assert_int_equal(sg_graph_hash(h, SG_HASH_WEIGHTS, &hb), SG_OK);
  assert_true(ha == hb);
  assert_int_equal(sg_graph_num_ops(h), sg_graph_num_ops(g));
  for (int32_t k = 0; k < sg_graph_num_ops(g); k++) {
    sg_op_info a, b;
    assert_int_equal(sg_graph_op_info(g, k, &a), SG_OK);
    assert_int_equal(sg_graph_op_info(h, k, &b), SG_OK);
    assert_int_equal(a.kind, b.kind);
    assert_int_equal(a.kind, SG_OP_CONV2D_BACKWARD_DATA + k);
    assert_int_equal(a.n_attrs, b.n_attrs);
    for (int o = 0; o < a.n_outputs; o++) {
      sg_tensor_info ti;
      assert_int_equal(sg_graph_tensor_info(h, (sg_tensor){b.outputs[o]}, &ti), SG_OK);
      assert_int_equal(ti.role, forward_too(a.kind) ? SG_ROLE_ACTIVATION : SG_ROLE_GRADIENT);
    }
  }
  sg_free(buf);
  sg_graph_destroy(h);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv2d_backward),     cmocka_unit_test(test_batch_norm_backward),
      cmocka_unit_test(test_activation_backward), cmocka_unit_test(test_pool_backward),
      cmocka_unit_test(test_loss_backward),       cmocka_unit_test(test_shape_adjoints),
      cmocka_unit_test(test_table_and_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
