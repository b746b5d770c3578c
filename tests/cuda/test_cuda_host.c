/* What of the CUDA backend runs without a GPU (this machine has the CUDA
 * toolkit but no GPU and no driver): device strings and the error a
 * session gets when there is no GPU to use (or, on a machine with GPUs,
 * for a device number past the last), a distributed job refusing what it
 * does not support on a GPU, and the cuDNN operation graph of
 * every convolution of ResNet-50's training graph (forward, backward data,
 * backward weight; batch 32 at 224 x 224) built and finalized, with
 * cuDNN's heuristics finalized on it -- everything short of a handle; the
 * loss kernels' program compiled by NVRTC for sm_80 and sm_90; the plans
 * of CUDA sessions for MLPs and ResNet-50 leaving no op without a kernel. The
 * kernels themselves run in test_cuda_gpu (exit 77 here) and
 * scripts/gpu-check.sh. */
#include <stdlib.h>
#include <string.h>

#include "../../examples/resnet50/resnet50_model.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "compile/plan.h"
#include "test_util.h"

static sg_graph *relu_graph(void) {
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t d[] = {4};
  assert_status(sg_graph_mark_output(g, sg_relu(g, sg_input(g, "x", SG_F32, 1, d))), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

static void test_device_strings(void **state) {
  (void)state;
  sg_graph *g = relu_graph();
  sg_session_params p = sg_session_params_init();
  sg_session *s = NULL;
  const char *bad[] = {"cuda:x", "cuda:", "cpu:0", "cuda:-1", "cuda:1x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    p.device = bad[i];
    assert_status(sg_session_create(g, &p, &s), SG_ERR_INVALID_ARG, "is not 'cpu', 'cuda' or 'cuda:N'");
  }
  p.device = "tpu";
  assert_status(sg_session_create(g, &p, &s), SG_ERR_NOT_FOUND, "available: cpu, cuda, cuda:N");
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    p.device = "cuda";
    assert_status(sg_session_create(g, &p, &s), SG_ERR_DEVICE, "no usable GPU");
    p.device = "cuda:3";
    assert_status(sg_session_create(g, &p, &s), SG_ERR_DEVICE, "no usable GPU");
  } else {
    p.device = "cuda:999";
    assert_status(sg_session_create(g, &p, &s), SG_ERR_DEVICE, "no device cuda:999");
  }
  assert_null(s);
  /* Data parallelism runs on GPUs, but not yet with sharded or offloaded
   * optimizer state, nor pipeline or tensor parallelism: refused, and said. */
  sg_dist_params dp = SG_DIST_PARAMS_INIT;
  dp.device = "cuda";
  dp.zero = 1;
  sg_dist *d = NULL;
  assert_status(sg_dist_create(g, &dp, &d), SG_ERR_UNSUPPORTED,
                "zero 1 (sharded optimizer state) on device 'cuda'");
  dp.zero = 0;
  dp.offload = "dram";
  assert_status(sg_dist_create(g, &dp, &d), SG_ERR_UNSUPPORTED, "offload on device 'cuda'");
  dp.offload = NULL;
  dp.pipeline = 2;
  assert_status(sg_dist_create_model(g, (sg_tensor){0}, NULL, &dp, &d), SG_ERR_UNSUPPORTED,
                "runs on device 'cpu' only");
  assert_null(d);
  sg_graph_destroy(g);
}

/* Every convolution of ResNet-50 (batch 32, 224 x 224) as a finalized cuDNN
 * operation graph, and heuristics finalized on it. */
static void test_conv_graphs(void **state) {
  (void)state;
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = 32;
  sg_graph *g = NULL;
  assert_status(resnet50_build_training(&cfg, "sgd", 0, &g), SG_OK, NULL);
  int count[3] = {0};
  void *ds = calloc(1, sg__cuda_conv_descs_size());
  for (uint32_t i = 0; i < g->n_ops; i++) {
    const sg__op *op = &g->ops[i];
    int dir = op->kind == SG_OP_CONV2D                   ? 0
              : op->kind == SG_OP_CONV2D_BACKWARD_DATA   ? 1
              : op->kind == SG_OP_CONV2D_BACKWARD_WEIGHT ? 2
                                                         : -1;
    if (dir < 0) continue;
    cudnnBackendDescriptor_t graph, heur;
    sg_status st = sg__cuda_conv_graph(g, op, NULL, ds, &graph);
    if (st != SG_OK) fail_msg("%s (%s): %s", op->name, sg_op_kind_name(op->kind), sg_last_error());
    int64_t engines = 0, n = 0;
    assert_int_equal(cudnnBackendGetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                              CUDNN_TYPE_INT64, 1, &n, &engines),
                     CUDNN_STATUS_SUCCESS);
    if (engines < 1) fail_msg("%s: cuDNN offers no engine at all", op->name);
    assert_int_equal(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur),
                     CUDNN_STATUS_SUCCESS);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    assert_int_equal(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(
        cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode),
        CUDNN_STATUS_SUCCESS);
    if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS)
      fail_msg("%s: heuristics do not finalize", op->name);
    cudnnBackendDestroyDescriptor(heur);
    sg__cuda_conv_descs_free(ds);
    count[dir]++;
  }
  free(ds);
  /* 53 convolutions; the stem's input gradient is never needed. */
  assert_int_equal(count[0], 53);
  assert_int_equal(count[1], 52);
  assert_int_equal(count[2], 53);
  sg_graph_destroy(g);
}

/* An embedding (ids [4, 6] into a [10, 8] table) added to x, layer norm,
 * softmax, log_softmax (over the last axis and a middle one), dropout and
 * concat in a small training graph (SGD). */
static sg_graph *norm_softmax_graph(void) {
  sg_graph *g;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t xd[] = {4, 6, 8}, sd[] = {8}, wd[] = {8, 8};
  float ones[8], w[80]; /* w: the [10, 8] table, and the first 64 or 8 for the others */
  for (int i = 0; i < 80; i++) w[i] = 0.01f * (float)(i % 7);
  for (int i = 0; i < 8; i++) ones[i] = 1.0f;
  sg_tensor x = sg_input(g, "x", SG_F32, 3, xd), lr = sg_input(g, "lr", SG_F32, 0, NULL);
  int64_t id_dims[] = {4, 6}, td[] = {10, 8};
  sg_tensor wte = sg_parameter(g, "wte", SG_F32, 2, td, w), ids = sg_input(g, "ids", SG_I64, 2, id_dims);
  x = sg_add(g, x, sg_embedding(g, wte, ids));
  sg_tensor h = sg_layer_norm(g, x, sg_parameter(g, "ln.scale", SG_F32, 1, sd, ones),
                              sg_parameter(g, "ln.bias", SG_F32, 1, sd, w), -1, 1e-5);
  sg_tensor z = sg_matmul(g, h, sg_parameter(g, "w", SG_F32, 2, wd, w));
  sg_tensor p = sg_mul(g, sg_softmax(g, z, -1), sg_log_softmax(g, sg_dropout(g, z, 0.1, 5, 1), 1));
  sg_tensor two[] = {p, z}; /* concat, and slices in its backward */
  p = sg_concat(g, 2, two, 1);
  assert_status(sg_graph_backward(g, sg_reduce_sum(g, p, 0, NULL, 0)), SG_OK, NULL);
  sg_sgd_params sp = SG_SGD_PARAMS_INIT;
  assert_status(sg_graph_add_sgd(g, lr, &sp), SG_OK, NULL);
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  return g;
}

/* The plan a CUDA session makes (the CPU backend's table with the CUDA
 * backend's supports_op: no GPU needed) for the MLPs, ResNet-50 and a graph
 * of embedding, layer norm and softmax, with
 * fusion on and off: every scheduled op either anchors a generated kernel
 * or has a kernel of the CUDA backend's own -- nothing the backend would
 * refuse at compile time -- and NVRTC compiles each plan's program for
 * sm_90. */
static void test_cuda_plans(void **state) {
  (void)state;
  resnet50_config cfg = RESNET50_CONFIG_INIT;
  cfg.batch = 4, cfg.image_size = 64, cfg.classes = 10;
  sg_graph *graphs[5] = {sg_test_mlp_training(false), sg_test_mlp_training(true), NULL, NULL,
                         norm_softmax_graph()};
  assert_status(resnet50_build_training(&cfg, "sgd", 0, &graphs[2]), SG_OK, NULL);
  assert_status(resnet50_build_training(&cfg, "adamw", 0, &graphs[3]), SG_OK, NULL);
  for (int i = 0; i < 5; i++)
    for (int fuse = 0; fuse < 2; fuse++) {
      const sg_graph *g = graphs[i];
      sg__plan p;
      sg_test_plan_with(g, sg__cuda_backend.supports_op, fuse, &p);
      for (uint32_t j = 0; j < p.n_order; j++) {
        int32_t k = p.order[j];
        if (p.group_of[k] >= 0) continue;
        if (!sg__cuda_backend.supports_op(NULL, g->ops[k].kind))
          fail_msg("graph %d, fusion %d: op '%s' (%s) has neither a generated kernel nor a CUDA kernel", i,
                   fuse, g->ops[k].name, sg_op_kind_name(g->ops[k].kind));
      }
      assert_true(p.n_unique > 0);
      char *src;
      size_t len;
      assert_status(sg__cuda_emit(p.unique, (int)p.n_unique, &src, &len), SG_OK, NULL);
      void *cubin = NULL;
      size_t size = 0;
      if (sg__cuda_nvrtc_compile(src, "plan.cu", 90, &cubin, &size) != SG_OK)
        fail_msg("graph %d, fusion %d: %s", i, fuse, sg_last_error());
      sg__free(cubin);
      sg__free(src);
      sg__plan_free(&p);
    }
  for (int i = 0; i < 5; i++) sg_graph_destroy(graphs[i]);
}

/* sgrt's own kernels (cuda_kernels.c) compile for the GPUs this backend
 * targets, alone and after a generated program (as cuda_module.c joins
 * them). */
static void test_library_program(void **state) {
  (void)state;
  sg__kir_kernel k;
  int64_t n = 100;
  sg__kir_init(&k, "neg", 1, &n);
  sg__kir_store(&k, sg__kir_unary(&k, SG__KIR_NEG, sg__kir_load(&k, sg__kir_input_add(&k, SG_F32, NULL))));
  assert_status(sg__kir_finish(&k), SG_OK, NULL);
  const sg__kir_kernel *ks[] = {&k};
  char *gen;
  size_t len;
  assert_status(sg__cuda_emit(ks, 1, &gen, &len), SG_OK, NULL);
  const char *loss = sg__cuda_library_program();
  assert_non_null(loss);
  char *both = malloc(len + strlen(loss) + 2);
  sprintf(both, "%s\n%s", gen, loss);
  const int archs[] = {80, 90};
  for (int i = 0; i < 4; i++) {
    void *cubin = NULL;
    size_t size = 0;
    sg_status st =
        sg__cuda_nvrtc_compile(i < 2 ? loss : both, "sgrt_library.cu", archs[i % 2], &cubin, &size);
    if (st != SG_OK) fail_msg("sm_%d: %s", archs[i % 2], sg_last_error());
    assert_true(size > 4 && memcmp(cubin, "\177ELF", 4) == 0);
    sg__free(cubin);
  }
  free(both);
  sg__free(gen);
  sg__kir_free(&k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_strings),
      cmocka_unit_test(test_conv_graphs),
      cmocka_unit_test(test_library_program),
      cmocka_unit_test(test_cuda_plans),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
