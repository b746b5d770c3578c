/* Shape and dtype inference of every op, and each of its failure modes.
 * Expected shapes are computed by hand (and, for convolution and pooling
 * windows, match PyTorch's documented formulas). */
#include <stdio.h>
#include <string.h>

#include "test_util.h"

static int name_counter;

static sg_graph *fresh(void) {
  sg_graph *g = NULL;
  assert_int_equal(sg_graph_create(&g), SG_OK);
  name_counter = 0;
  return g;
}

/* A source tensor with an automatic name; role INPUT unless given. */
static sg_tensor mkr(sg_graph *g, sg_role role, sg_dtype dt, int ndim, const int64_t *dims) {
  char name[32];
  snprintf(name, sizeof name, "t%d", name_counter++);
  return sg_graph_add_tensor(g, name, dt, role, ndim, dims, NULL);
}
#define D(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define MK(g, dt, ...) mkr(g, SG_ROLE_INPUT, dt, NDIM(__VA_ARGS__), D(__VA_ARGS__))
#define MK0(g, dt) mkr(g, SG_ROLE_INPUT, dt, 0, NULL)
#define MKR(g, role, dt, ...) mkr(g, role, dt, NDIM(__VA_ARGS__), D(__VA_ARGS__))

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
}
#define EXPECT_SHAPE(g, t, dt, ...) expect_shape_(g, t, dt, NDIM(__VA_ARGS__), D(__VA_ARGS__), __LINE__)
#define EXPECT_SCALAR(g, t, dt) expect_shape_(g, t, dt, 0, NULL, __LINE__)

/* A builder call that must fail: returns SG_NO_TENSOR, records `status` on
 * the graph with a message containing `needle`. Starts a fresh graph. */
#define EXPECT_FAIL(g, expr, status, needle)           \
  do {                                                 \
    sg_tensor r_ = (expr);                             \
    assert_true(r_.id < 0);                            \
    assert_status(sg_graph_status(g), status, needle); \
    assert_status(sg_graph_finalize(g), status, NULL); \
    sg_graph_destroy(g);                               \
    g = fresh();                                       \
  } while (0)

static sg_conv2d_params conv(int64_t s, int64_t p, int64_t d, int64_t groups) {
  sg_conv2d_params c = SG_CONV2D_PARAMS_INIT;
  c.stride[0] = c.stride[1] = s;
  c.padding[0] = c.padding[1] = c.padding[2] = c.padding[3] = p;
  c.dilation[0] = c.dilation[1] = d;
  c.groups = groups;
  return c;
}

static void test_conv2d(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_conv2d_params p = conv(2, 3, 1, 1);
  /* ResNet stem: 224 -> (224 + 6 - 7) / 2 + 1 = 112. */
  sg_tensor y =
      sg_conv2d(g, MK(g, SG_F32, 2, 3, 224, 224), MK(g, SG_F32, 64, 3, 7, 7), MK(g, SG_F32, 64), &p);
  EXPECT_SHAPE(g, y, SG_F32, 2, 64, 112, 112);
  /* Dilation 2, 3x3, pad 2, stride 1: span 5, (10 + 4 - 5) / 1 + 1 = 10. */
  p = conv(1, 2, 2, 1);
  EXPECT_SHAPE(g, sg_conv2d(g, MK(g, SG_F32, 1, 4, 10, 10), MK(g, SG_F32, 8, 4, 3, 3), SG_NO_TENSOR, &p),
               SG_F32, 1, 8, 10, 10);
  /* Grouped and depthwise. */
  p = conv(1, 1, 1, 2);
  EXPECT_SHAPE(g, sg_conv2d(g, MK(g, SG_F32, 1, 4, 5, 5), MK(g, SG_F32, 6, 2, 3, 3), SG_NO_TENSOR, &p),
               SG_F32, 1, 6, 5, 5);
  p = conv(2, 1, 1, 8);
  EXPECT_SHAPE(g, sg_conv2d(g, MK(g, SG_F16, 3, 8, 9, 7), MK(g, SG_F16, 8, 1, 3, 3), SG_NO_TENSOR, &p),
               SG_F16, 3, 8, 5, 4);
  /* Asymmetric padding and rectangular stride: h (6+1+0-3)/1+1 = 5, w (6+0+2-2)/3+1 = 3. */
  sg_conv2d_params q = {sizeof q, {1, 3}, {1, 0, 0, 2}, {1, 1}, 1};
  EXPECT_SHAPE(g, sg_conv2d(g, MK(g, SG_F32, 1, 1, 6, 6), MK(g, SG_F32, 2, 1, 3, 2), SG_NO_TENSOR, &q),
               SG_F32, 1, 2, 5, 3);
  /* NULL params = defaults. */
  EXPECT_SHAPE(g, sg_conv2d(g, MK(g, SG_F32, 1, 1, 6, 6), MK(g, SG_F32, 2, 1, 3, 3), SG_NO_TENSOR, NULL),
               SG_F32, 1, 2, 4, 4);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  p = conv(1, 0, 1, 1);
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 4, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_SHAPE, "[1,3,8,8] f32 has 3 channels but weight");
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 3, 8, 8), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_SHAPE, "must be 4-D");
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_SHAPE, "weight");
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F16, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_DTYPE, "one dtype");
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_I32, 1, 3, 8, 8), MK(g, SG_I32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 3, 3, 3), MK(g, SG_F32, 5), &p),
              SG_ERR_SHAPE, "bias");
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 2, 2), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_SHAPE, "larger than padded input");
  p = conv(0, 0, 1, 1);
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_ATTRIBUTE, "stride");
  p = conv(1, -1, 1, 1);
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_ATTRIBUTE, "padding");
  p = conv(1, 0, 0, 1);
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_ATTRIBUTE, "dilation");
  p = conv(1, 0, 1, 2);
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 1, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_SHAPE, "groups 2 must divide");
  /* Strides, dilations and groups past 2^30, where the window still fits
   * (a height of 1 and a kernel height of 1): the schema's bounds refuse
   * them before any kernel sees them (oneDNN refused a stride of 2^31). */
  p = conv(1, 0, 1, 1);
  p.stride[0] = (int64_t)1 << 31;
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 1, 8), MK(g, SG_F32, 4, 3, 1, 3), SG_NO_TENSOR, &p),
              SG_ERR_ATTRIBUTE, "stride (2147483648,1): stride[0] is 2147483648; must be in 1..2^30");
  p = conv(1, 0, 1, 1);
  p.dilation[0] = (int64_t)1 << 62;
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 1, 8), MK(g, SG_F32, 4, 3, 1, 3), SG_NO_TENSOR, &p),
              SG_ERR_ATTRIBUTE, "dilation[0] is 4611686018427387904");
  p = conv(1, 0, 1, 1);
  p.stride[1] = (int64_t)1 << 62;
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 3), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_ATTRIBUTE, "stride[1] is 4611686018427387904");
  p = conv(1, 0, 1, 1);
  p.size = 4;
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), MK(g, SG_F32, 4, 3, 3, 3), SG_NO_TENSOR, &p),
              SG_ERR_INVALID_ARG, "SG_CONV2D_PARAMS_INIT");
  /* A missing required input. */
  p = conv(1, 0, 1, 1);
  EXPECT_FAIL(g, sg_conv2d(g, MK(g, SG_F32, 1, 3, 8, 8), SG_NO_TENSOR, SG_NO_TENSOR, &p), SG_ERR_INVALID_ARG,
              "input 1 is missing");
  sg_graph_destroy(g);
}

static void test_batch_norm(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor x = MK(g, SG_F32, 4, 3, 5, 5);
  sg_tensor gm = MKR(g, SG_ROLE_PARAMETER, SG_F32, 3), bt = MKR(g, SG_ROLE_PARAMETER, SG_F32, 3);
  sg_tensor rm = MKR(g, SG_ROLE_STATE, SG_F32, 3), rv = MKR(g, SG_ROLE_STATE, SG_F32, 3);
  sg_batch_norm_params p = SG_BATCH_NORM_PARAMS_INIT;
  sg_tensor y = sg_batch_norm(g, x, gm, bt, rm, rv, &p);
  EXPECT_SHAPE(g, y, SG_F32, 4, 3, 5, 5);
  /* Training form: saved mean and inverse std as outputs 1 and 2. */
  sg_op_info op;
  assert_int_equal(sg_graph_op_info(g, 0, &op), SG_OK);
  assert_int_equal(op.kind, SG_OP_BATCH_NORM);
  assert_int_equal(op.n_outputs, 3);
  EXPECT_SHAPE(g, ((sg_tensor){op.outputs[1]}), SG_F32, 3);
  EXPECT_SHAPE(g, ((sg_tensor){op.outputs[2]}), SG_F32, 3);
  /* Inference form on 2-D input, with parameters as running stats. */
  p.training = 0;
  sg_tensor x2 = MK(g, SG_F32, 7, 3);
  y = sg_batch_norm(g, x2, gm, bt, gm, bt, &p);
  EXPECT_SHAPE(g, y, SG_F32, 7, 3);
  assert_int_equal(sg_graph_op_info(g, 1, &op), SG_OK);
  assert_int_equal(op.n_outputs, 1);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  p.training = 1;
#define BN(xdims, cdim, role, pp)                                                                           \
  sg_batch_norm(g, xdims, MKR(g, SG_ROLE_PARAMETER, SG_F32, cdim), MKR(g, SG_ROLE_PARAMETER, SG_F32, cdim), \
                MKR(g, role, SG_F32, cdim), MKR(g, role, SG_F32, cdim), pp)
  EXPECT_FAIL(g, BN(MK(g, SG_F32, 4, 3, 5, 5), 4, SG_ROLE_STATE, &p), SG_ERR_SHAPE,
              "must be [3], the channels of x");
  EXPECT_FAIL(g, BN(MK(g, SG_F32, 4), 4, SG_ROLE_STATE, &p), SG_ERR_SHAPE, "at least 2 dims");
  EXPECT_FAIL(g, BN(MK(g, SG_I64, 4, 3), 3, SG_ROLE_STATE, &p), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, BN(MK(g, SG_F16, 4, 3), 3, SG_ROLE_STATE, &p), SG_ERR_DTYPE, "dtype of x");
  EXPECT_FAIL(g, BN(MK(g, SG_F32, 4, 3), 3, SG_ROLE_PARAMETER, &p), SG_ERR_INVALID_ARG, "role state");
  p.eps = 0;
  EXPECT_FAIL(g, BN(MK(g, SG_F32, 4, 3), 3, SG_ROLE_STATE, &p), SG_ERR_ATTRIBUTE, "eps");
  p.eps = 1e-5;
  p.momentum = 1.5;
  EXPECT_FAIL(g, BN(MK(g, SG_F32, 4, 3), 3, SG_ROLE_STATE, &p), SG_ERR_ATTRIBUTE, "momentum");
  p.momentum = 0.1;
  p.training = 2;
  EXPECT_FAIL(g, BN(MK(g, SG_F32, 4, 3), 3, SG_ROLE_STATE, &p), SG_ERR_ATTRIBUTE, "training");
#undef BN
  sg_graph_destroy(g);
}

static void test_elementwise(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor x = MK(g, SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_relu(g, x), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_relu6(g, x), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_clip(g, x, -1, 1), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_gelu(g, x, 1), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_sigmoid(g, MK(g, SG_BF16, 5)), SG_BF16, 5);
  EXPECT_SHAPE(g, sg_tanh(g, MK0(g, SG_F16)), SG_F16);
  /* Broadcasting: [2,3,4] + [3,1] -> [2,3,4]; [5,1,7] * [1,6,1] -> [5,6,7]. */
  EXPECT_SHAPE(g, sg_add(g, x, MK(g, SG_F32, 3, 1)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_mul(g, MK(g, SG_F32, 5, 1, 7), MK(g, SG_F32, 1, 6, 1)), SG_F32, 5, 6, 7);
  EXPECT_SHAPE(g, sg_sub(g, MK0(g, SG_I64), MK(g, SG_I64, 4)), SG_I64, 4);
  EXPECT_SHAPE(g, sg_div(g, x, MK0(g, SG_F32)), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_add_scalar(g, MK(g, SG_I32, 3), 2), SG_I32, 3);
  EXPECT_SHAPE(g, sg_mul_scalar(g, x, 0.5), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_pow_scalar(g, x, 2), SG_F32, 2, 3, 4);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g, sg_relu(g, MK(g, SG_I32, 3)), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_sigmoid(g, MK(g, SG_BOOL, 3)), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_clip(g, MK(g, SG_F32, 3), 2, 1), SG_ERR_ATTRIBUTE, "min 2 must be <= max 1");
  EXPECT_FAIL(g, sg_gelu(g, MK(g, SG_F32, 3), 3), SG_ERR_ATTRIBUTE, "approximate");
  EXPECT_FAIL(g, sg_add(g, MK(g, SG_F32, 2, 3), MK(g, SG_F32, 4, 3)), SG_ERR_SHAPE,
              "do not broadcast (dim 0: 2 vs 4)");
  EXPECT_FAIL(g, sg_mul(g, MK(g, SG_F32, 3), MK(g, SG_F16, 3)), SG_ERR_DTYPE, "one float or integer dtype");
  EXPECT_FAIL(g, sg_div(g, MK(g, SG_BOOL, 3), MK(g, SG_BOOL, 3)), SG_ERR_DTYPE, "dtype");
  EXPECT_FAIL(g, sg_add_scalar(g, MK(g, SG_F32, 3), 1.0 / 0.0), SG_ERR_ATTRIBUTE, "finite");
  EXPECT_FAIL(g, sg_pow_scalar(g, MK(g, SG_I32, 3), 2), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_mul_scalar(g, MK(g, SG_U8, 3), 2), SG_ERR_DTYPE, "float or integer");
  sg_graph_destroy(g);
}

static void test_matmul_gemm(void **state) {
  (void)state;
  sg_graph *g = fresh();
  EXPECT_SHAPE(g, sg_matmul(g, MK(g, SG_F32, 3, 4), MK(g, SG_F32, 4, 5)), SG_F32, 3, 5);
  EXPECT_SHAPE(g, sg_matmul(g, MK(g, SG_F32, 4), MK(g, SG_F32, 4, 5)), SG_F32, 5);
  EXPECT_SHAPE(g, sg_matmul(g, MK(g, SG_F32, 3, 4), MK(g, SG_F32, 4)), SG_F32, 3);
  EXPECT_SHAPE(g, sg_matmul(g, MK(g, SG_F32, 4), MK(g, SG_F32, 4)), SG_F32);
  /* Batch dims broadcast: [2,1,3,4] @ [5,4,6] -> [2,5,3,6]. */
  EXPECT_SHAPE(g, sg_matmul(g, MK(g, SG_F32, 2, 1, 3, 4), MK(g, SG_F32, 5, 4, 6)), SG_F32, 2, 5, 3, 6);
  sg_gemm_params p = SG_GEMM_PARAMS_INIT;
  EXPECT_SHAPE(g, sg_gemm(g, MK(g, SG_F32, 3, 4), MK(g, SG_F32, 4, 5), MK(g, SG_F32, 5), &p), SG_F32, 3, 5);
  p.trans_a = 1;
  p.trans_b = 1;
  EXPECT_SHAPE(g, sg_gemm(g, MK(g, SG_F32, 4, 3), MK(g, SG_F32, 5, 4), MK(g, SG_F32, 3, 1), &p), SG_F32, 3,
               5);
  EXPECT_SHAPE(g, sg_linear(g, MK(g, SG_F32, 8, 64), MK(g, SG_F32, 10, 64), MK(g, SG_F32, 10)), SG_F32, 8,
               10);
  EXPECT_SHAPE(g, sg_linear(g, MK(g, SG_F32, 8, 64), MK(g, SG_F32, 10, 64), SG_NO_TENSOR), SG_F32, 8, 10);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g, sg_matmul(g, MK(g, SG_F32, 3, 4), MK(g, SG_F32, 5, 6)), SG_ERR_SHAPE,
              "[3,4] f32 has 4 columns");
  EXPECT_FAIL(g, sg_matmul(g, MK(g, SG_F32, 2, 3, 4), MK(g, SG_F32, 3, 4, 5)), SG_ERR_SHAPE,
              "do not broadcast");
  EXPECT_FAIL(g, sg_matmul(g, MK(g, SG_I32, 3, 4), MK(g, SG_I32, 4, 5)), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_matmul(g, MK0(g, SG_F32), MK(g, SG_F32, 4)), SG_ERR_SHAPE, "at least 1 dim");
  EXPECT_FAIL(g, sg_linear(g, MK(g, SG_F32, 8, 64), MK(g, SG_F32, 10, 63), SG_NO_TENSOR), SG_ERR_SHAPE,
              "(transposed) gives K=63");
  EXPECT_FAIL(g, sg_linear(g, MK(g, SG_F32, 8, 64), MK(g, SG_F32, 10, 64), MK(g, SG_F32, 11)), SG_ERR_SHAPE,
              "broadcast");
  EXPECT_FAIL(g, sg_linear(g, MK(g, SG_F32, 2, 8, 64), MK(g, SG_F32, 10, 64), SG_NO_TENSOR), SG_ERR_SHAPE,
              "must be 2-D");
  EXPECT_FAIL(g, sg_linear(g, MK(g, SG_F32, 8, 64), MK(g, SG_F16, 10, 64), SG_NO_TENSOR), SG_ERR_DTYPE,
              "one float dtype");
  sg_gemm_params bad = SG_GEMM_PARAMS_INIT;
  bad.trans_a = 2;
  EXPECT_FAIL(g, sg_gemm(g, MK(g, SG_F32, 3, 4), MK(g, SG_F32, 4, 5), SG_NO_TENSOR, &bad), SG_ERR_ATTRIBUTE,
              "trans_a");
  bad.trans_a = 0;
  bad.alpha = 0.0 / 0.0;
  EXPECT_FAIL(g, sg_gemm(g, MK(g, SG_F32, 3, 4), MK(g, SG_F32, 4, 5), SG_NO_TENSOR, &bad), SG_ERR_ATTRIBUTE,
              "finite");
  sg_graph_destroy(g);
}

static sg_pool2d_params pool(int64_t k, int64_t s, int64_t pad, int ceil) {
  sg_pool2d_params p = SG_POOL2D_PARAMS_INIT;
  p.kernel[0] = p.kernel[1] = k;
  p.stride[0] = p.stride[1] = s;
  p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = pad;
  p.ceil_mode = ceil;
  return p;
}

static void test_pooling(void **state) {
  (void)state;
  sg_graph *g = fresh();
  /* ResNet: maxpool 3/2 pad 1 on 112 -> 56. */
  sg_pool2d_params p = pool(3, 2, 1, 0);
  EXPECT_SHAPE(g, sg_max_pool2d(g, MK(g, SG_F32, 2, 64, 112, 112), &p), SG_F32, 2, 64, 56, 56);
  /* Stride 0 defaults to the kernel: 2x2 on 7x7 floor -> 3, ceil -> 4. */
  p = pool(2, 0, 0, 0);
  EXPECT_SHAPE(g, sg_avg_pool2d(g, MK(g, SG_F32, 1, 1, 7, 7), &p), SG_F32, 1, 1, 3, 3);
  p.ceil_mode = 1;
  EXPECT_SHAPE(g, sg_avg_pool2d(g, MK(g, SG_F32, 1, 1, 7, 7), &p), SG_F32, 1, 1, 4, 4);
  /* Ceil mode drops a window that would start in the trailing padding:
   * k3 s2 p1 on 6: floor((6+2-3)/2)+1 = 3, ceil -> 4, and (4-1)*2 = 6 < 6+1 keeps 4.
   * k2 s2 p1 on 5: ceil((5+2-2)/2)+1 = 4; (4-1)*2 = 6 >= 5+1 drops it: 3. */
  p = pool(3, 2, 1, 1);
  EXPECT_SHAPE(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 1, 6, 6), &p), SG_F32, 1, 1, 4, 4);
  p = pool(2, 2, 1, 1);
  EXPECT_SHAPE(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 1, 5, 5), &p), SG_F32, 1, 1, 3, 3);
  p = pool(3, 1, 1, 0);
  p.count_include_pad = 0;
  EXPECT_SHAPE(g, sg_avg_pool2d(g, MK(g, SG_F32, 1, 2, 4, 4), &p), SG_F32, 1, 2, 4, 4);
  EXPECT_SHAPE(g, sg_global_avg_pool(g, MK(g, SG_F32, 2, 2048, 7, 7)), SG_F32, 2, 2048, 1, 1);
  EXPECT_SHAPE(g, sg_global_avg_pool(g, MK(g, SG_F32, 2, 8, 9)), SG_F32, 2, 8, 1);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  p = pool(3, 2, 2, 0);
  EXPECT_FAIL(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 1, 8, 8), &p), SG_ERR_ATTRIBUTE, "half the kernel");
  p = pool(5, 1, 0, 0);
  EXPECT_FAIL(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 1, 4, 4), &p), SG_ERR_SHAPE, "larger than padded input");
  p = pool(0, 1, 0, 0);
  EXPECT_FAIL(g, sg_avg_pool2d(g, MK(g, SG_F32, 1, 1, 4, 4), &p), SG_ERR_ATTRIBUTE, "kernel");
  p = pool(1, 1, 0, 0);
  p.stride[0] = (int64_t)1 << 31;
  EXPECT_FAIL(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 1, 1, 4), &p), SG_ERR_ATTRIBUTE,
              "stride (2147483648,1): stride[0] is 2147483648; must be in 1..2^30");
  p = pool(2, 2, 0, 0);
  EXPECT_FAIL(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 4, 4), &p), SG_ERR_SHAPE, "4-D");
  EXPECT_FAIL(g, sg_max_pool2d(g, MK(g, SG_I64, 1, 1, 4, 4), &p), SG_ERR_DTYPE, "float");
  p.ceil_mode = 3;
  EXPECT_FAIL(g, sg_max_pool2d(g, MK(g, SG_F32, 1, 1, 4, 4), &p), SG_ERR_ATTRIBUTE, "ceil_mode");
  p.ceil_mode = 0;
  p.count_include_pad = 5;
  EXPECT_FAIL(g, sg_avg_pool2d(g, MK(g, SG_F32, 1, 1, 4, 4), &p), SG_ERR_ATTRIBUTE, "count_include_pad");
  EXPECT_FAIL(g, sg_global_avg_pool(g, MK(g, SG_F32, 2, 8)), SG_ERR_SHAPE, "spatial");
  EXPECT_FAIL(g, sg_global_avg_pool(g, MK(g, SG_I32, 2, 8, 3, 3)), SG_ERR_DTYPE, "float");
  sg_graph_destroy(g);
}

static void test_shape_ops(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor x = MK(g, SG_F32, 2, 3, 4, 5);
  EXPECT_SHAPE(g, sg_flatten(g, x, 1), SG_F32, 2, 60);
  EXPECT_SHAPE(g, sg_flatten(g, x, 0), SG_F32, 1, 120);
  EXPECT_SHAPE(g, sg_flatten(g, x, 4), SG_F32, 120, 1);
  EXPECT_SHAPE(g, sg_flatten(g, x, -1), SG_F32, 24, 5);
  EXPECT_SHAPE(g, sg_reshape(g, x, 3, D(6, -1, 2)), SG_F32, 6, 10, 2);
  EXPECT_SHAPE(g, sg_reshape(g, x, 2, D(0, -1)), SG_F32, 2, 60);
  EXPECT_SHAPE(g, sg_reshape(g, MK(g, SG_I64, 1), 0, NULL), SG_I64);
  EXPECT_SHAPE(g, sg_transpose(g, x, 4, D(0, 2, 3, 1)), SG_F32, 2, 4, 5, 3);
  sg_tensor parts[] = {MK(g, SG_F32, 2, 3, 4), MK(g, SG_F32, 2, 5, 4), MK(g, SG_F32, 2, 1, 4)};
  EXPECT_SHAPE(g, sg_concat(g, 3, parts, 1), SG_F32, 2, 9, 4);
  EXPECT_SHAPE(g, sg_concat(g, 1, parts, -1), SG_F32, 2, 3, 4);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g, sg_flatten(g, MK(g, SG_F32, 2, 3), 3), SG_ERR_ATTRIBUTE, "axis 3 is out of range");
  EXPECT_FAIL(g, sg_reshape(g, MK(g, SG_F32, 2, 3), 2, D(4, 2)), SG_ERR_SHAPE, "shape [4,2]");
  EXPECT_FAIL(g, sg_reshape(g, MK(g, SG_F32, 2, 3), 2, D(-1, -1)), SG_ERR_ATTRIBUTE, "more than one -1");
  EXPECT_FAIL(g, sg_reshape(g, MK(g, SG_F32, 2, 3), 2, D(4, -1)), SG_ERR_SHAPE, "cannot reshape");
  EXPECT_FAIL(g, sg_reshape(g, MK(g, SG_F32, 2, 3), 2, D(-2, 3)), SG_ERR_ATTRIBUTE, "invalid entry");
  EXPECT_FAIL(g, sg_reshape(g, MK(g, SG_F32, 6), 2, D(3, 0)), SG_ERR_ATTRIBUTE, "0 at index 1");
  EXPECT_FAIL(g, sg_reshape(g, MK(g, SG_F32, 6), 9, D(1, 1, 1, 1, 1, 1, 1, 1, 6)), SG_ERR_ATTRIBUTE,
              "values");
  EXPECT_FAIL(g, sg_transpose(g, MK(g, SG_F32, 2, 3), 2, D(0, 0)), SG_ERR_ATTRIBUTE, "not a permutation");
  EXPECT_FAIL(g, sg_transpose(g, MK(g, SG_F32, 2, 3), 3, D(0, 1, 2)), SG_ERR_ATTRIBUTE, "perm has 3 entries");
  sg_tensor a = MK(g, SG_F32, 2, 3), b = MK(g, SG_F32, 3, 3);
  EXPECT_FAIL(g, sg_concat(g, 2, ((sg_tensor[]){a, b}), 1), SG_ERR_SHAPE, "differ in dim 0");
  a = MK(g, SG_F32, 2, 3), b = MK(g, SG_F16, 2, 3);
  EXPECT_FAIL(g, sg_concat(g, 2, ((sg_tensor[]){a, b}), 0), SG_ERR_DTYPE, "dtype");
  a = MK(g, SG_F32, 2, 3), b = MK(g, SG_F32, 2, 3, 1);
  EXPECT_FAIL(g, sg_concat(g, 2, ((sg_tensor[]){a, b}), 0), SG_ERR_SHAPE, "rank");
  a = MK(g, SG_F32, 2, 3);
  EXPECT_FAIL(g, sg_concat(g, 1, &a, 2), SG_ERR_ATTRIBUTE, "axis");
  EXPECT_FAIL(g, sg_concat(g, 0, NULL, 0), SG_ERR_ARITY, "inputs, got 0");
  sg_graph_destroy(g);
}

static void test_softmax_loss_reduce(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor logits = MK(g, SG_F32, 8, 10), labels = MK(g, SG_I64, 8);
  EXPECT_SHAPE(g, sg_softmax(g, logits, -1), SG_F32, 8, 10);
  EXPECT_SHAPE(g, sg_log_softmax(g, logits, 0), SG_F32, 8, 10);
  EXPECT_SCALAR(g, sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN), SG_F32);
  EXPECT_SCALAR(g, sg_cross_entropy(g, logits, MK(g, SG_I32, 8), SG_REDUCTION_SUM), SG_F32);
  EXPECT_SHAPE(g, sg_cross_entropy(g, logits, labels, SG_REDUCTION_NONE), SG_F32, 8);
  sg_tensor x = MK(g, SG_F32, 2, 3, 4);
  EXPECT_SCALAR(g, sg_reduce_mean(g, x, 0, NULL, 0), SG_F32);
  EXPECT_SHAPE(g, sg_reduce_mean(g, x, 0, NULL, 1), SG_F32, 1, 1, 1);
  EXPECT_SHAPE(g, sg_reduce_sum(g, x, 2, D(0, -1), 0), SG_F32, 3);
  EXPECT_SHAPE(g, sg_reduce_sum(g, x, 1, D(1), 1), SG_F32, 2, 1, 4);
  EXPECT_SHAPE(g, sg_reduce_sum(g, MK(g, SG_I64, 4), 0, NULL, 0), SG_I64);
  EXPECT_SHAPE(g, sg_dropout(g, x, 0.1, 42, 1), SG_F32, 2, 3, 4);
  EXPECT_SHAPE(g, sg_dropout(g, x, 0.1, 42, 0), SG_F32, 2, 3, 4);
  /* Training dropout has a u8 mask as output 1. */
  sg_op_info op;
  assert_int_equal(sg_graph_op_info(g, sg_graph_num_ops(g) - 2, &op), SG_OK);
  assert_int_equal(op.n_outputs, 2);
  EXPECT_SHAPE(g, ((sg_tensor){op.outputs[1]}), SG_U8, 2, 3, 4);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  EXPECT_FAIL(g, sg_softmax(g, MK(g, SG_F32, 8, 10), 2), SG_ERR_ATTRIBUTE, "axis 2 is out of range");
  EXPECT_FAIL(g, sg_log_softmax(g, MK(g, SG_I32, 8, 10), 1), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_cross_entropy(g, MK(g, SG_F32, 8, 10), MK(g, SG_I64, 7), SG_REDUCTION_MEAN), SG_ERR_SHAPE,
              "[7] i64 must be [8] to match logits");
  EXPECT_FAIL(g, sg_cross_entropy(g, MK(g, SG_F32, 8, 10), MK(g, SG_F32, 8), SG_REDUCTION_MEAN), SG_ERR_DTYPE,
              "class indices");
  EXPECT_FAIL(g, sg_cross_entropy(g, MK(g, SG_F32, 8, 10, 2), MK(g, SG_I64, 8), SG_REDUCTION_MEAN),
              SG_ERR_SHAPE, "2-D");
  EXPECT_FAIL(g, sg_cross_entropy(g, MK(g, SG_F32, 8, 10), MK(g, SG_I64, 8), (sg_reduction)7),
              SG_ERR_ATTRIBUTE, "reduction");
  EXPECT_FAIL(g, sg_reduce_mean(g, MK(g, SG_F32, 2, 3), 1, D(2), 0), SG_ERR_ATTRIBUTE,
              "axis 2 is out of range");
  EXPECT_FAIL(g, sg_reduce_mean(g, MK(g, SG_F32, 2, 3), 2, D(1, -1), 0), SG_ERR_ATTRIBUTE, "listed twice");
  EXPECT_FAIL(g, sg_reduce_mean(g, MK(g, SG_I32, 2, 3), 0, NULL, 0), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_reduce_sum(g, MK(g, SG_F32, 2, 3), 0, NULL, 2), SG_ERR_ATTRIBUTE, "keepdims");
  EXPECT_FAIL(g, sg_dropout(g, MK(g, SG_F32, 3), 1.0, 0, 1), SG_ERR_ATTRIBUTE, "p is 1");
  EXPECT_FAIL(g, sg_dropout(g, MK(g, SG_I32, 3), 0.5, 0, 1), SG_ERR_DTYPE, "float");
  EXPECT_FAIL(g, sg_dropout(g, MK(g, SG_F32, 3), 0.5, 0, 3), SG_ERR_ATTRIBUTE, "training");
  sg_graph_destroy(g);
}

static void test_optimizers(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor w = MKR(g, SG_ROLE_PARAMETER, SG_F32, 4, 3), gw = MK(g, SG_F32, 4, 3), lr = MK0(g, SG_F32);
  sg_tensor buf = MKR(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 4, 3);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  sp.momentum = 0.9;
  sp.nesterov = 1;
  sp.weight_decay = 1e-4;
  assert_int_equal(sg_sgd_update(g, w, gw, lr, buf, &sp), SG_OK);
  sg_tensor b = MKR(g, SG_ROLE_PARAMETER, SG_F32, 3), gb = MK(g, SG_F32, 3);
  assert_int_equal(sg_sgd_update(g, b, gb, lr, SG_NO_TENSOR, NULL), SG_OK);
  sg_tensor v = MKR(g, SG_ROLE_PARAMETER, SG_F32, 5), gv = MK(g, SG_F32, 5);
  sg_tensor m1 = MKR(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 5), m2 = MKR(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 5);
  sg_tensor step = MKR(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, 1);
  assert_int_equal(sg_adamw_update(g, v, gv, lr, m1, m2, step, NULL), SG_OK);
  sg_op_info op;
  assert_int_equal(sg_graph_op_info(g, 2, &op), SG_OK);
  assert_int_equal(op.kind, SG_OP_ADAMW_UPDATE);
  assert_int_equal(op.n_outputs, 0);
  sg_attr at;
  assert_int_equal(sg_graph_op_attr(g, 2, 1, &at), SG_OK);
  assert_string_equal(at.name, "beta2");
  assert_true(at.f == 0.999);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  sg_graph_destroy(g);

  g = fresh();
  sg_sgd_params mom = SG_SGD_PARAMS_INIT;
  mom.momentum = 0.9;
#define P(...) MKR(g, SG_ROLE_PARAMETER, SG_F32, __VA_ARGS__)
#define S(...) MKR(g, SG_ROLE_OPTIMIZER_STATE, SG_F32, __VA_ARGS__)
#define FAILS(expr, st, needle)                    \
  do {                                             \
    assert_int_equal((expr), st);                  \
    assert_status(sg_graph_status(g), st, needle); \
    sg_graph_destroy(g);                           \
    g = fresh();                                   \
  } while (0)
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F32, 5), MK0(g, SG_F32), SG_NO_TENSOR, NULL), SG_ERR_SHAPE,
        "must have the shape of param");
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F16, 4), MK0(g, SG_F32), SG_NO_TENSOR, NULL), SG_ERR_DTYPE,
        "dtype of param");
  FAILS(sg_sgd_update(g, MK(g, SG_F32, 4), MK(g, SG_F32, 4), MK0(g, SG_F32), SG_NO_TENSOR, NULL),
        SG_ERR_INVALID_ARG, "role parameter");
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F32, 4), MK(g, SG_F32, 2), SG_NO_TENSOR, NULL), SG_ERR_SHAPE,
        "one-element f32");
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), SG_NO_TENSOR, &mom), SG_ERR_ARITY,
        "needs a momentum buffer");
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), S(4), NULL), SG_ERR_ARITY, "must be absent");
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), P(4), &mom), SG_ERR_INVALID_ARG,
        "role optimizer_state");
  mom.nesterov = 1;
  mom.dampening = 0.5;
  FAILS(sg_sgd_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), S(4), &mom), SG_ERR_ATTRIBUTE,
        "nesterov needs");
  sg_adamw_params ap = SG_ADAMW_PARAMS_INIT;
  ap.beta1 = 1.0;
  FAILS(sg_adamw_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), S(4), S(4), S(1), &ap), SG_ERR_ATTRIBUTE,
        "beta1");
  FAILS(sg_adamw_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), S(4), S(3), S(1), NULL), SG_ERR_SHAPE,
        "[3] f32 must have the shape of param");
  FAILS(sg_adamw_update(g, P(4), MK(g, SG_F32, 4), MK0(g, SG_F32), S(4), S(4), MK0(g, SG_F32), NULL),
        SG_ERR_INVALID_ARG, "step");
  /* Updating one parameter twice is caught by the verifier at finalize. */
  sg_tensor w2 = P(4), g2 = MK(g, SG_F32, 4), lr2 = MK0(g, SG_F32);
  assert_int_equal(sg_sgd_update(g, w2, g2, lr2, SG_NO_TENSOR, NULL), SG_OK);
  assert_int_equal(sg_sgd_update(g, w2, g2, lr2, SG_NO_TENSOR, NULL), SG_OK);
  assert_status(sg_graph_finalize(g), SG_ERR_DUPLICATE, "updated in place by both op");
#undef P
#undef S
#undef FAILS
  sg_graph_destroy(g);
}

/* Errors are sticky: later calls fail quietly, the first message stays, and
 * finalize reports it. Generic-constructor misuse is covered too. */
static void test_sticky_and_generic(void **state) {
  (void)state;
  sg_graph *g = fresh();
  sg_tensor x = MK(g, SG_F32, 2, 3);
  sg_tensor bad = sg_add(g, x, MK(g, SG_F32, 4));
  assert_true(bad.id < 0);
  assert_status(sg_graph_status(g), SG_ERR_SHAPE, "do not broadcast");
  sg_tensor y = sg_relu(g, bad);
  assert_true(y.id < 0);
  assert_non_null(strstr(sg_last_error(), "do not broadcast"));
  assert_status(sg_graph_finalize(g), SG_ERR_SHAPE, NULL);
  sg_graph_destroy(g);

  /* Checking once at the end, as api.md advises: finalize and verify give
   * back the failing builder call's own message (op and shapes), even after
   * other calls have replaced the thread's last error. */
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  assert_true(sg_add(g, x, MK(g, SG_F32, 4)).id < 0);
  char first[1024];
  snprintf(first, sizeof first, "%s", sg_last_error());
  assert_non_null(strstr(first, "add"));
  assert_non_null(strstr(first, "[2,3]"));
  assert_non_null(strstr(first, "[4]"));
  assert_true(sg_relu(g, x).id < 0);
  sg_clear_error();
  assert_int_equal(sg_graph_finalize(NULL), SG_ERR_INVALID_ARG);
  assert_int_equal(sg_graph_verify(g), SG_ERR_SHAPE);
  assert_string_equal(sg_last_error(), first);
  sg_clear_error();
  assert_int_equal(sg_graph_finalize(g), SG_ERR_SHAPE);
  assert_string_equal(sg_last_error(), first);
  sg_graph_destroy(g);

  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  sg_tensor out[2];
  int n = -1;
  assert_status(sg_graph_add_op(g, (sg_op_kind)999, 1, &x, 0, NULL, 1, out, &n), SG_ERR_UNSUPPORTED,
                "unknown op kind 999");
  sg_graph_destroy(g);
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  sg_attr a = {.name = "bogus", .type = SG_ATTR_INT, .i = 1};
  assert_status(sg_graph_add_op(g, SG_OP_RELU, 1, &x, 1, &a, 1, out, &n), SG_ERR_ATTRIBUTE,
                "unknown attribute 'bogus'");
  sg_graph_destroy(g);
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  sg_attr wrong_type = {.name = "axis", .type = SG_ATTR_FLOAT, .f = 1};
  assert_status(sg_graph_add_op(g, SG_OP_SOFTMAX, 1, &x, 1, &wrong_type, 1, out, &n), SG_ERR_ATTRIBUTE,
                "has type");
  sg_graph_destroy(g);
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  assert_status(sg_graph_add_op(g, SG_OP_CLIP, 1, &x, 0, NULL, 1, out, &n), SG_ERR_ATTRIBUTE,
                "required attribute 'min'");
  sg_graph_destroy(g);
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  sg_attr twice[] = {{.name = "axis", .type = SG_ATTR_INT}, {.name = "axis", .type = SG_ATTR_INT}};
  assert_status(sg_graph_add_op(g, SG_OP_SOFTMAX, 1, &x, 2, twice, 1, out, &n), SG_ERR_ATTRIBUTE,
                "given twice");
  sg_graph_destroy(g);
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  assert_status(sg_graph_add_op(g, SG_OP_ADD, 1, &x, 0, NULL, 1, out, &n), SG_ERR_ARITY,
                "add takes 2 inputs, got 1");
  sg_graph_destroy(g);
  g = fresh();
  x = MK(g, SG_F32, 2, 3);
  sg_tensor foreign = {12345};
  assert_status(sg_graph_add_op(g, SG_OP_ADD, 2, ((sg_tensor[]){x, foreign}), 0, NULL, 1, out, &n),
                SG_ERR_INVALID_ARG, "not a tensor of this graph");
  sg_graph_destroy(g);

  /* Batch norm through the generic constructor reports all three outputs. */
  g = fresh();
  sg_tensor in[] = {MK(g, SG_F32, 2, 3), MKR(g, SG_ROLE_PARAMETER, SG_F32, 3),
                    MKR(g, SG_ROLE_PARAMETER, SG_F32, 3), MKR(g, SG_ROLE_STATE, SG_F32, 3),
                    MKR(g, SG_ROLE_STATE, SG_F32, 3)};
  assert_int_equal(sg_graph_add_op(g, SG_OP_BATCH_NORM, 5, in, 0, NULL, 2, out, &n), SG_OK);
  assert_int_equal(n, 3);
  EXPECT_SHAPE(g, out[1], SG_F32, 3);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  /* A finalized graph is frozen. */
  assert_true(sg_relu(g, in[0]).id < 0);
  assert_int_equal(sg_graph_status(g), SG_OK);
  assert_non_null(strstr(sg_last_error(), "finalized"));
  sg_graph_destroy(g);
}

static void test_sources_and_names(void **state) {
  (void)state;
  sg_graph *g = fresh();
  float w[6] = {1, 2, 3, 4, 5, 6};
  sg_tensor c = sg_constant(g, "c", SG_F32, 2, D(2, 3), w);
  sg_tensor_info info;
  assert_int_equal(sg_graph_tensor_info(g, c, &info), SG_OK);
  assert_int_equal(info.nbytes, 24);
  assert_int_equal(info.numel, 6);
  assert_memory_equal(info.data, w, 24);
  assert_true(sg_constant(g, "c", SG_F32, 1, D(1), w).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_DUPLICATE, "'c' is already used");
  sg_graph_destroy(g);

  g = fresh();
  assert_true(sg_input(g, "x", SG_F32, 9, D(1, 1, 1, 1, 1, 1, 1, 1, 1)).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_SHAPE, "rank 9");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_input(g, "x", SG_F32, 2, D(3, 0)).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_SHAPE, "dim 1 is 0");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_input(g, "x", SG_F32, 4, D(1 << 20, 1 << 20, 1 << 20, 1 << 20)).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_RANGE, "2^56");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_input(g, "x", (sg_dtype)77, 1, D(3)).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_DTYPE, "unknown dtype 77");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_graph_add_tensor(g, "x", SG_F32, SG_ROLE_ACTIVATION, 1, D(3), NULL).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_INVALID_ARG, "produced by ops");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_constant(g, "k", SG_F32, 1, D(3), NULL).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_INVALID_ARG, "needs data");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_input(g, "", SG_F32, 1, D(3)).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_INVALID_ARG, "name is empty");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_input(g, "\xc0\x80", SG_F32, 1, D(3)).id < 0); /* overlong NUL */
  assert_status(sg_graph_status(g), SG_ERR_INVALID_ARG, "not valid UTF-8");
  sg_graph_destroy(g);
  g = fresh();
  assert_true(sg_input(g, "tab\there", SG_F32, 1, D(3)).id < 0);
  assert_status(sg_graph_status(g), SG_ERR_INVALID_ARG, "control character");
  sg_graph_destroy(g);
  g = fresh();
  assert_int_equal(sg_input(g,
                            "gr\xc3\xb6\xc3\x9f"
                            "e \xe2\x86\x92 \xf0\x9f\x98\x80",
                            SG_F32, 1, D(3))
                       .id,
                   0);
  sg_graph_destroy(g);

  /* Renaming and lookup; automatic names avoid user names. */
  g = fresh();
  sg_tensor x = sg_input(g, "relu_0", SG_F32, 1, D(3));
  sg_tensor y = sg_relu(g, x);
  assert_int_equal(sg_graph_tensor_info(g, y, &info), SG_OK);
  assert_string_equal(info.name, "relu_0_1");
  assert_int_equal(sg_tensor_set_name(g, y, "act"), SG_OK);
  sg_tensor found;
  assert_int_equal(sg_graph_find_tensor(g, "act", &found), SG_OK);
  assert_int_equal(found.id, y.id);
  assert_status(sg_graph_find_tensor(g, "relu_0_1", &found), SG_ERR_NOT_FOUND, "relu_0_1");
  assert_status(sg_tensor_set_name(g, y, "relu_0"), SG_ERR_DUPLICATE, "already used");
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  assert_int_equal(sg_graph_mark_output(g, y), SG_OK);
  assert_int_equal(sg_graph_num_outputs(g), 1);
  assert_int_equal(sg_graph_num_inputs(g), 1);
  assert_int_equal(sg_graph_input(g, 0).id, x.id);
  assert_int_equal(sg_graph_finalize(g), SG_OK);
  assert_status(sg_tensor_set_name(g, y, "z"), SG_ERR_STATE, "finalized");
  assert_status(sg_graph_tensor_info(g, (sg_tensor){99}, &info), SG_ERR_RANGE, "out of range");
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_batch_norm),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_matmul_gemm),
      cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_shape_ops),
      cmocka_unit_test(test_softmax_loss_reduce),
      cmocka_unit_test(test_optimizers),
      cmocka_unit_test(test_sticky_and_generic),
      cmocka_unit_test(test_sources_and_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
