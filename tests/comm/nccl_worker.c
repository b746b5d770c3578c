/* One rank of the NCCL device-collective test, started by `sgrt launch -n N`.
 * Everywhere: argument checks of the sg_comm_nccl_* calls. Without CUDA and
 * NCCL in the library, every call must say SG_ERR_UNSUPPORTED and why; with
 * them but without enough GPUs (NCCL wants one device per rank), likewise for
 * the device part. Both end with exit code 77, which CTest reports as
 * skipped. With GPUs: allreduce, allgather, reduce-scatter and broadcast of
 * f32 and i32 on device memory, synchronous (NULL stream) and queued on a
 * caller's stream, each against a reference computed here on the host from
 * every rank's (deterministic) input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sgrt/sgrt.h"
#ifdef SG_TEST_CUDA
#include <cuda_runtime.h>
#endif

#define SKIP 77

static int g_rank;
#define FAIL(...)                                                        \
  do {                                                                   \
    fprintf(stderr, "FAIL rank %d %s:%d: ", g_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                                        \
    fprintf(stderr, " (last error: %s)\n", sg_last_error());             \
    exit(1);                                                             \
  } while (0)
#define CHECK_ST(call, want)                                                                                \
  do {                                                                                                      \
    sg_status st_ = (call);                                                                                 \
    if (st_ != (want)) FAIL("%s returned %s, expected %s", #call, sg_status_str(st_), sg_status_str(want)); \
  } while (0)
#define CHECK_OK(call) CHECK_ST(call, SG_OK)

static void check_arguments(sg_comm *c) {
  float x = 0;
  void *dev = &x; /* never dereferenced: every call below is refused first */
  CHECK_ST(sg_comm_nccl_init(NULL, 0), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_nccl_init(c, -2), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_nccl_allreduce(NULL, dev, dev, 1, SG_F32, SG_REDUCE_SUM, NULL), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_nccl_allreduce(c, dev, dev, 1, SG_U8, SG_REDUCE_SUM, NULL), SG_ERR_DTYPE);
  CHECK_ST(sg_comm_nccl_allreduce(c, dev, dev, 1, SG_F32, (sg_reduce_op)9, NULL), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_nccl_allgather(c, NULL, dev, 1, SG_F32, NULL), SG_ERR_INVALID_ARG);
  CHECK_ST(sg_comm_nccl_broadcast(c, dev, 1, SG_F32, sg_comm_size(c), NULL), SG_ERR_INVALID_ARG);
}

static void check_unsupported(sg_comm *c) {
  float x = 0;
  void *dev = &x;
  sg_status got[5] = {
      sg_comm_nccl_init(c, -1),
      sg_comm_nccl_allreduce(c, dev, dev, 1, SG_F32, SG_REDUCE_SUM, NULL),
      sg_comm_nccl_allgather(c, dev, dev, 1, SG_F32, NULL),
      sg_comm_nccl_reduce_scatter(c, dev, dev, 1, SG_F32, SG_REDUCE_SUM, NULL),
      sg_comm_nccl_broadcast(c, dev, 1, SG_F32, 0, NULL),
  };
  for (int i = 0; i < 5; i++)
    if (got[i] != SG_ERR_UNSUPPORTED) FAIL("call %d returned %s without NCCL", i, sg_status_str(got[i]));
  if (strstr(sg_last_error(), "built without NCCL support") == NULL) FAIL("the message does not say why");
  printf("rank %d: built without NCCL; every call says so: %s\n", g_rank, sg_last_error());
}

#ifdef SG_TEST_CUDA
static long input_value(int rank, size_t i) { return (long)((rank * 31 + i * 7) % 19) - 9; }

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) FAIL("cudaMalloc of %zu bytes", bytes);
  return p;
}
static void to_dev(void *d, const void *h, size_t b) {
  if (cudaMemcpy(d, h, b, cudaMemcpyHostToDevice) != cudaSuccess) FAIL("cudaMemcpy to device");
}
static void to_host(void *h, const void *d, size_t b) {
  if (cudaMemcpy(h, d, b, cudaMemcpyDeviceToHost) != cudaSuccess) FAIL("cudaMemcpy to host");
}

/* f32 and i32 collectives for one size, sync (stream NULL) or on `stream`. */
static void run_size(sg_comm *c, size_t count, cudaStream_t stream) {
  int n = sg_comm_size(c), me = sg_comm_rank(c);
  size_t all = count * (size_t)n;
  float *hf = malloc(all * 4), *want = malloc(all * 4);
  int32_t *hi = malloc(all * 4), *wanti = malloc(all * 4);
  void *d_send = dev_alloc(all * 4), *d_recv = dev_alloc(all * 4);
  if (!hf || !want || !hi || !wanti) FAIL("out of memory");
  void *s = stream;
#define SYNC() \
  if (stream && cudaStreamSynchronize(stream) != cudaSuccess) FAIL("cudaStreamSynchronize")
  /* allreduce f32 sum and i32 max */
  for (size_t i = 0; i < count; i++) {
    hf[i] = (float)input_value(me, i), hi[i] = (int32_t)input_value(me, i);
    float sum = 0;
    int32_t mx = INT32_MIN;
    for (int r = 0; r < n; r++) {
      sum += (float)input_value(r, i);
      if (input_value(r, i) > mx) mx = (int32_t)input_value(r, i);
    }
    want[i] = sum, wanti[i] = mx;
  }
  to_dev(d_send, hf, count * 4);
  CHECK_OK(sg_comm_nccl_allreduce(c, d_send, d_recv, count, SG_F32, SG_REDUCE_SUM, s));
  SYNC();
  to_host(hf, d_recv, count * 4);
  if (memcmp(hf, want, count * 4) != 0) FAIL("f32 allreduce of %zu differs from the reference", count);
  to_dev(d_send, hi, count * 4);
  CHECK_OK(sg_comm_nccl_allreduce(c, d_send, d_send, count, SG_I32, SG_REDUCE_MAX, s)); /* in place */
  SYNC();
  to_host(hi, d_send, count * 4);
  if (memcmp(hi, wanti, count * 4) != 0) FAIL("i32 max allreduce of %zu differs", count);
  /* allgather: block r is rank r's input */
  for (size_t i = 0; i < count; i++) hf[i] = (float)input_value(me, i);
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) want[(size_t)r * count + i] = (float)input_value(r, i);
  to_dev(d_send, hf, count * 4);
  CHECK_OK(sg_comm_nccl_allgather(c, d_send, d_recv, count, SG_F32, s));
  SYNC();
  to_host(hf, d_recv, all * 4);
  if (memcmp(hf, want, all * 4) != 0) FAIL("allgather of %zu differs", count);
  /* reduce-scatter: rank me gets the sum over ranks of block me */
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++)
      hf[(size_t)r * count + i] = (float)input_value(me, (size_t)r * count + i);
  for (size_t i = 0; i < count; i++) {
    float sum = 0;
    for (int r = 0; r < n; r++) sum += (float)input_value(r, (size_t)me * count + i);
    want[i] = sum;
  }
  to_dev(d_send, hf, all * 4);
  CHECK_OK(sg_comm_nccl_reduce_scatter(c, d_send, d_recv, count, SG_F32, SG_REDUCE_SUM, s));
  SYNC();
  to_host(hf, d_recv, count * 4);
  if (memcmp(hf, want, count * 4) != 0) FAIL("reduce-scatter of %zu differs", count);
  /* broadcast from the last rank */
  for (size_t i = 0; i < count; i++)
    hf[i] = (float)input_value(me, i), want[i] = (float)input_value(n - 1, i);
  to_dev(d_send, hf, count * 4);
  CHECK_OK(sg_comm_nccl_broadcast(c, d_send, count, SG_F32, n - 1, s));
  SYNC();
  to_host(hf, d_send, count * 4);
  if (memcmp(hf, want, count * 4) != 0) FAIL("broadcast of %zu differs", count);
#undef SYNC
  cudaFree(d_send);
  cudaFree(d_recv);
  free(hf);
  free(want);
  free(hi);
  free(wanti);
}
#endif

int main(void) {
  const char *r = getenv("SG_RANK");
  g_rank = r ? atoi(r) : 0;
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c = NULL;
  CHECK_OK(sg_comm_create(&cp, &c));
  int rc = 0;
  check_arguments(c);
  if (!sg_comm_nccl_built()) {
    check_unsupported(c);
    rc = SKIP;
  } else {
#ifdef SG_TEST_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < sg_comm_size(c)) {
      /* NCCL needs a device per rank; the library must refuse cleanly. */
      if (devices == 0) CHECK_ST(sg_comm_nccl_init(c, -1), SG_ERR_UNSUPPORTED);
      printf("rank %d: %d CUDA devices for %d ranks: skipping the device part\n", g_rank, devices,
             sg_comm_size(c));
      rc = SKIP;
    } else {
      CHECK_OK(sg_comm_nccl_init(c, -1));
      CHECK_ST(sg_comm_nccl_init(c, -1), SG_ERR_STATE); /* once per communicator */
      cudaStream_t stream;
      if (cudaStreamCreate(&stream) != cudaSuccess) FAIL("cudaStreamCreate");
      size_t sizes[] = {1, 1000, (size_t)1 << 20};
      for (size_t i = 0; i < 3; i++) {
        run_size(c, sizes[i], NULL);
        run_size(c, sizes[i], stream);
      }
      cudaStreamDestroy(stream);
      printf("rank %d: NCCL device collectives match the reference\n", g_rank);
    }
#else
    printf("rank %d: library has NCCL but this test was built without the CUDA runtime: skipping\n", g_rank);
    rc = SKIP;
#endif
  }
  CHECK_OK(sg_comm_destroy(c));
  return rc;
}
