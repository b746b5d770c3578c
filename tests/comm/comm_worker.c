/* One rank of the multi-process communication tests, started N times by
 * `sgrt launch` or by tests/comm/run_torchrun.sh (torchrun-style variables set
 * by hand). Each mode exits 0 when its rank saw what it should:
 *   coll [big]  every collective x dtype x reduction x size equals a reference
 *               computed here from every rank's (deterministic) input
 *   timeout     the last rank never arrives; the others fail with SG_ERR_TIMEOUT in time
 *   badtoken    rank 1 holds the wrong token and is refused; rank 0 times out
 *   notoken     (one rank) a master address other than loopback with no job
 *               token is refused (SPEC S3), by sg_comm_create and by
 *               sg_comm_store_serve, with a message that names SG_JOB_TOKEN;
 *               loopback without a token, or any address with one, is not
 *   mismatch    rank 1 publishes another boundary shape hash: every rank fails
 *               with "Gradient topology mismatch"
 *   rma         tagged send/recv, RMA put/get, atomics, active messages, the
 *               store broadcast of NCCL's unique id */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../worker_check.h"
#include "comm/comm_internal.h"
#include "sgrt/sgrt.h"

static int rank_env(void) {
  const char *s = getenv("SG_RANK");
  if (s == NULL) s = getenv("RANK");
  return s ? atoi(s) : 0;
}

static int size_env(void) {
  const char *s = getenv("SG_WORLD_SIZE");
  if (s == NULL) s = getenv("WORLD_SIZE");
  return s ? atoi(s) : 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- reference ------------------------------------------------------------ */

static const sg_dtype dtypes[] = {SG_F32, SG_F16, SG_BF16, SG_I32, SG_I64};
static const sg_reduce_op ops[] = {SG_REDUCE_SUM, SG_REDUCE_AVG, SG_REDUCE_MAX, SG_REDUCE_MIN};

/* Small integers: exact in every dtype, and so are their sums over 4 ranks. */
static long input_value(int rank, size_t i, int salt) {
  return (long)((rank * 31 + i * 7 + (size_t)salt * 3) % 19) - 9;
}

static size_t esize_of(sg_dtype d) { return d == SG_F32 || d == SG_I32 ? 4 : d == SG_I64 ? 8 : 2; }

/* Reference half conversions written out independently of src/comm/reduce.c:
 * exact for the small integers and simple fractions the tests use. */
static uint16_t ref_f16(double v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  v = fabs(v);
  int e;
  double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
  /* f16 normal: 1.f x 2^(e-1), 10 fraction bits; round to nearest even. */
  double f = (m * 2 - 1) * 1024;
  double r = nearbyint(f);
  int ee = e - 1;
  if (r >= 1024) {
    r -= 1024;
    ee++;
  }
  return (uint16_t)(sign | (uint16_t)((ee + 15) << 10) | (uint16_t)r);
}
static uint16_t ref_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t lsb = (u >> 16) & 1;
  return (uint16_t)((u + 0x7fff + lsb) >> 16);
}

static void store_value(void *buf, size_t i, sg_dtype d, double v) {
  switch (d) {
    case SG_F32: ((float *)buf)[i] = (float)v; break;
    case SG_F16: ((uint16_t *)buf)[i] = ref_f16(v); break;
    case SG_BF16: ((uint16_t *)buf)[i] = ref_bf16(v); break;
    case SG_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case SG_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
  }
}

static void fill(void *buf, size_t count, sg_dtype d, int rank, int salt) {
  for (size_t i = 0; i < count; i++) store_value(buf, i, d, (double)input_value(rank, i, salt));
}

/* The expected value of element i reduced over n ranks. */
static double expect_reduced(size_t i, int n, sg_dtype d, sg_reduce_op op, int salt) {
  long acc = input_value(0, i, salt);
  for (int r = 1; r < n; r++) {
    long v = input_value(r, i, salt);
    if (op == SG_REDUCE_MAX) acc = v > acc ? v : acc;
    else if (op == SG_REDUCE_MIN) acc = v < acc ? v : acc;
    else acc += v;
  }
  if (op != SG_REDUCE_AVG) return (double)acc;
  if (d == SG_I32 || d == SG_I64) return (double)(acc / n); /* C division truncates */
  return (double)((float)acc / (float)n);                   /* the f32 division the library does */
}

static void check_equal(const void *got, const void *want, size_t count, sg_dtype d, const char *what) {
  size_t es = esize_of(d);
  if (memcmp(got, want, count * es) == 0) return;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0)
      FAIL("%s: %s element %zu of %zu differs from the reference", what, sg_dtype_name(d), i, count);
}

static void run_coll(sg_comm *c, int big) {
  int n = sg_comm_size(c), me = sg_comm_rank(c);
  size_t sizes_elems[4] = {1, 7, 1009, 0};
  int n_sizes = 4;
  double t0 = now_s();
  size_t cases = 0;
  for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
    sg_dtype d = dtypes[di];
    size_t es = esize_of(d);
    sizes_elems[3] = ((size_t)1 << 20) / es; /* 1 MiB */
    for (int si = 0; si < n_sizes; si++) {
      size_t count = sizes_elems[si];
      size_t bytes = count * es * (size_t)n;
      uint8_t *a = malloc(bytes), *b = malloc(bytes), *want = malloc(bytes);
      if (!a || !b || !want) FAIL("out of memory");
      char what[128];
      for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
        sg_reduce_op op = ops[oi];
        int salt = (int)(di * 16 + oi * 4 + (size_t)si);
        /* allreduce, out of place then in place */
        fill(a, count, d, me, salt);
        for (size_t i = 0; i < count; i++) store_value(want, i, d, expect_reduced(i, n, d, op, salt));
        snprintf(what, sizeof what, "allreduce op %d count %zu", (int)op, count);
        CHECK_OK(sg_comm_allreduce(c, a, b, count, d, op));
        check_equal(b, want, count, d, what);
        CHECK_OK(sg_comm_allreduce(c, a, a, count, d, op));
        check_equal(a, want, count, d, what);
        /* reduce-scatter: input n blocks of count; rank r gets block r */
        for (int r = 0; r < n; r++) fill(a + (size_t)r * count * es, count, d, me, salt + r);
        for (size_t i = 0; i < count; i++) store_value(want, i, d, expect_reduced(i, n, d, op, salt + me));
        snprintf(what, sizeof what, "reduce_scatter op %d count %zu", (int)op, count);
        CHECK_OK(sg_comm_reduce_scatter(c, a, b, count, d, op));
        check_equal(b, want, count, d, what);
        CHECK_OK(sg_comm_reduce_scatter(c, a, a + (size_t)me * count * es, count, d, op));
        check_equal(a + (size_t)me * count * es, want, count, d, what);
        cases += 4;
      }
      /* allgather: block r is rank r's input */
      fill(b, count, d, me, 5);
      for (int r = 0; r < n; r++) fill(want + (size_t)r * count * es, count, d, r, 5);
      snprintf(what, sizeof what, "allgather count %zu", count);
      CHECK_OK(sg_comm_allgather(c, b, a, count, d));
      check_equal(a, want, count * (size_t)n, d, what);
      memset(a, 0, bytes);
      fill(a + (size_t)me * count * es, count, d, me, 5);
      CHECK_OK(sg_comm_allgather(c, a + (size_t)me * count * es, a, count, d));
      check_equal(a, want, count * (size_t)n, d, what);
      /* broadcast from every root */
      for (int root = 0; root < n; root++) {
        fill(a, count, d, me, 9);
        fill(want, count, d, root, 9);
        snprintf(what, sizeof what, "broadcast root %d count %zu", root, count);
        CHECK_OK(sg_comm_broadcast(c, a, count, d, root));
        check_equal(a, want, count, d, what);
      }
      cases += 2 + (size_t)n;
      free(a);
      free(b);
      free(want);
    }
  }
  CHECK_OK(sg_comm_barrier(c));
  if (big) {
    size_t count = ((size_t)64 << 20) / 4;
    float *a = malloc(count * 4), *want = malloc(count * 4);
    if (!a || !want) FAIL("out of memory");
    fill(a, count, SG_F32, me, 1);
    for (size_t i = 0; i < count; i++) want[i] = (float)expect_reduced(i, n, SG_F32, SG_REDUCE_SUM, 1);
    CHECK_OK(sg_comm_allreduce(c, a, a, count, SG_F32, SG_REDUCE_SUM));
    check_equal(a, want, count, SG_F32, "allreduce 64 MiB");
    free(a);
    free(want);
    cases++;
  }
  printf("rank %d: %zu collective cases match the reference (%.2f s)\n", me, cases, now_s() - t0);
}

/* A window of 64 u64 (over calloc'd memory, or allocated by the transport): each rank puts its rank into
 * the right neighbour's slot `me` and gets it back, a put past the end is refused, every rank fetch-adds
 * into rank 0's word 0 and exactly one wins a compare-swap on its word 63. */
static void check_window(sg_comm *c, int me, int n, int left, int right, bool alloc) {
  uint64_t *win_mem = NULL;
  sg_comm_window *w;
  if (alloc) {
    void *base = NULL;
    CHECK_OK(sg_comm_window_alloc(c, 64 * 8, &base, &w));
    if (base == NULL || (uintptr_t)base % 64 != 0) FAIL("sg_comm_window_alloc gave %p", base);
    win_mem = base;
    memset(win_mem, 0, 64 * 8); /* its contents are unspecified */
    CHECK_OK(sg_comm_barrier(c));
  } else {
    win_mem = calloc(64, 8);
    CHECK_OK(sg_comm_window_create(c, win_mem, 64 * 8, &w));
  }
  uint64_t v = 1000 + (uint64_t)me, back = 0;
  CHECK_OK(sg_comm_put(w, right, 8 * (size_t)(me + 1), &v, 8));
  CHECK_OK(sg_comm_window_flush(w));
  CHECK_OK(sg_comm_get(w, right, 8 * (size_t)(me + 1), &back, 8));
  CHECK_OK(sg_comm_window_flush(w));
  if (back != v) FAIL("get returned %llu, put wrote %llu", (unsigned long long)back, (unsigned long long)v);
  if (sg_comm_put(w, right, 64 * 8 - 4, &v, 8) != SG_ERR_RANGE) FAIL("a put past the window was accepted");
  /* atomics: every rank adds rank+1 to rank 0's word 0 */
  uint64_t old;
  CHECK_OK(sg_comm_fetch_add(w, 0, 0, (uint64_t)me + 1, &old));
  CHECK_OK(sg_comm_barrier(c));
  if (me == 0 && win_mem[0] != (uint64_t)(n * (n + 1) / 2))
    FAIL("fetch-add total %llu", (unsigned long long)win_mem[0]);
  if (win_mem[me] != 1000 + (uint64_t)left && me != 0)
    FAIL("put did not land: %llu", (unsigned long long)win_mem[me]);
  /* compare-swap: exactly one rank wins word 63 of rank 0 */
  CHECK_OK(sg_comm_compare_swap(w, 0, 63 * 8, 0, (uint64_t)me + 1, &old));
  int won = old == 0;
  int32_t wins = won;
  CHECK_OK(sg_comm_allreduce(c, &wins, &wins, 1, SG_I32, SG_REDUCE_SUM));
  if (wins != 1) FAIL("%d ranks won the compare-swap", wins);
  CHECK_OK(sg_comm_window_destroy(w)); /* frees an allocated window's memory */
  if (!alloc) free(win_mem);
}

static void run_rma(sg_comm *c) {
  int n = sg_comm_size(c), me = sg_comm_rank(c), right = (me + 1) % n, left = (me + n - 1) % n;
  /* tagged point to point around the ring, and a wrong length is refused */
  int32_t out[5] = {me, me * 2, me * 3, 4, 5}, in[5] = {0};
  if (me % 2 == 0) {
    CHECK_OK(sg_comm_send(c, right, 42, out, sizeof out));
    CHECK_OK(sg_comm_recv(c, left, 42, in, sizeof in));
  } else {
    CHECK_OK(sg_comm_recv(c, left, 42, in, sizeof in));
    CHECK_OK(sg_comm_send(c, right, 42, out, sizeof out));
  }
  if (in[0] != left || in[1] != left * 2 || in[4] != 5) FAIL("point-to-point payload wrong");
  if (me == 0) CHECK_OK(sg_comm_send(c, 1, 7, out, 8));
  if (me == 1) {
    int64_t small[4];
    sg_status st = sg_comm_recv(c, 0, 7, small, sizeof small);
    if (st != SG_ERR_TRUNCATED) FAIL("a message of the wrong length gave %s", sg_status_str(st));
  }
  CHECK_OK(sg_comm_barrier(c));

  /* RMA over the caller's memory, then over memory the transport allocates (shared memory here, which
   * puts reach directly): the same checks. */
  check_window(c, me, n, left, right, false);
  check_window(c, me, n, left, right, true);
  void *none = NULL;
  sg_comm_window *nw = NULL;
  if (sg_comm_window_alloc(c, 64, NULL, &nw) != SG_ERR_INVALID_ARG || nw != NULL)
    FAIL("sg_comm_window_alloc without a base pointer was accepted");
  if (sg_comm_window_alloc(c, 0, &none, &nw) != SG_ERR_INVALID_ARG || none != NULL || nw != NULL)
    FAIL("an empty sg_comm_window_alloc was accepted");

  /* active messages: each rank tells its right neighbour its rank on queue 3 */
  char msg[32];
  snprintf(msg, sizeof msg, "hello from %d", me);
  CHECK_OK(sg_comm_am_send(c, right, 3, msg, strlen(msg) + 1));
  char got[64];
  size_t len = sizeof got;
  int from = -1;
  CHECK_OK(sg_comm_am_recv(c, 3, got, &len, &from, 10000));
  char want[32];
  snprintf(want, sizeof want, "hello from %d", left);
  if (from != left || strcmp(got, want) != 0) FAIL("active message '%s' from %d", got, from);
  CHECK_OK(sg_comm_barrier(c));

  /* The store broadcast that carries NCCL's unique id ("nccl/uid"): rank 0's
   * bytes reach every rank; a length other than expected is refused. */
  uint8_t uid[128];
  for (int i = 0; i < 128; i++) uid[i] = me == 0 ? (uint8_t)(i * 37 + 11) : 0;
  CHECK_OK(sg__comm_begin_all(c, "test"));
  CHECK_OK(sg__comm_store_bcast(c, "test/uid", uid, sizeof uid));
  for (int i = 0; i < 128; i++)
    if (uid[i] != (uint8_t)(i * 37 + 11)) FAIL("store broadcast byte %d is %u", i, uid[i]);
  if (me != 0) {
    sg_status st = sg__comm_store_bcast(c, "test/uid", uid, 64);
    if (st != SG_ERR_FORMAT || strstr(sg_last_error(), "has 128 bytes, expected 64") == NULL)
      FAIL("a 128-byte value read as 64 bytes gave %s", sg_status_str(st));
  }
  CHECK_OK(sg_comm_barrier(c));
  printf("rank %d: point-to-point, RMA, atomics, active messages and store broadcast OK\n", me);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "coll";
  int me = rank_env(), n = size_env();
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c = NULL;
  if (strcmp(mode, "timeout") == 0) {
    if (me == n - 1) return 0; /* never arrives */
    double t0 = now_s();
    sg_status st = sg_comm_create(&cp, &c);
    double dt = now_s() - t0;
    const char *lim = getenv("SG_COMM_TIMEOUT_MS");
    double limit = (lim ? atof(lim) : 60000) / 1000;
    /* Rank 0 hosts the store and gives up at its deadline; a client waiting
     * on it may see the store close a moment before its own deadline, which
     * is SG_ERR_COMM ("store went away"). Either way: failed, in time. */
    if (st != SG_ERR_TIMEOUT && !(me != 0 && st == SG_ERR_COMM))
      FAIL("expected SG_ERR_TIMEOUT, got %s", sg_status_str(st));
    if (dt > limit + 2.0) FAIL("timed out after %.2f s, limit %.2f s", dt, limit);
    printf("rank %d: timed out as expected after %.2f s: %s\n", me, dt, sg_last_error());
    return 0;
  }
  if (strcmp(mode, "notoken") == 0) {
    sg_comm_params remote = SG_COMM_PARAMS_INIT;
    remote.master_addr = "192.0.2.1"; /* TEST-NET-1: never reached, the refusal comes first */
    remote.token = "";
    sg_status st = sg_comm_create(&remote, &c);
    if (st != SG_ERR_DENIED || strstr(sg_last_error(), "SG_JOB_TOKEN") == NULL)
      FAIL("sg_comm_create at 192.0.2.1 without a token gave %s: %s", sg_status_str(st), sg_last_error());
    printf("refused as expected: %s\n", sg_last_error());
    sg_comm_store_server *srv = NULL;
    st = sg_comm_store_serve("0.0.0.0", 0, NULL, &srv);
    if (st != SG_ERR_DENIED || srv != NULL || strstr(sg_last_error(), "SG_JOB_TOKEN") == NULL)
      FAIL("sg_comm_store_serve on 0.0.0.0 without a token gave %s", sg_status_str(st));
    CHECK_OK(sg_comm_store_serve("0.0.0.0", 0, "a-job-token", &srv));
    sg_comm_store_stop(srv);
    CHECK_OK(sg_comm_store_serve("127.0.0.1", 0, "", &srv));
    sg_comm_store_stop(srv);
    return 0;
  }
  if (strcmp(mode, "badtoken") == 0) {
    if (me == 1) cp.token = "not-the-job-token";
    sg_status st = sg_comm_create(&cp, &c);
    sg_status want = me == 1 ? SG_ERR_DENIED : SG_ERR_TIMEOUT;
    if (st != want) FAIL("expected %s, got %s", sg_status_str(want), sg_status_str(st));
    printf("rank %d: %s as expected: %s\n", me, sg_status_str(st), sg_last_error());
    return 0;
  }
  CHECK_OK(sg_comm_create(&cp, &c));
  if (sg_comm_rank(c) != me || sg_comm_size(c) != n)
    FAIL("rank/size %d/%d", sg_comm_rank(c), sg_comm_size(c));
  if (strcmp(mode, "coll") == 0) {
    run_coll(c, argc > 2 && strcmp(argv[2], "big") == 0);
  } else if (strcmp(mode, "rma") == 0) {
    run_rma(c);
  } else if (strcmp(mode, "mismatch") == 0) {
    uint8_t ids[3] = {SG_F32, SG_F32, SG_I64};
    CHECK_OK(sg_comm_check_consistency(c, 0x1234, ids, 3)); /* all agree */
    sg_status st = sg_comm_check_consistency(c, me == 1 ? 0x9999 : 0x1234, ids, 3);
    if (st != SG_ERR_SHAPE || strstr(sg_last_error(), "Gradient topology mismatch") == NULL)
      FAIL("expected a Gradient topology mismatch, got %s", sg_status_str(st));
    printf("rank %d: %s\n", me, sg_last_error());
  } else {
    FAIL("unknown mode '%s'", mode);
  }
  CHECK_OK(sg_comm_destroy(c));
  return 0;
}
