/* The rendezvous store and the bootstrap environment (SPEC M1, S1, S3):
 * set/get/add, waits that time out, a wrong token refused, a process without
 * the token unable to read or inject, malformed frames dropped, and rank and
 * size read from each launcher's variables with bad values rejected. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "test_util.h"

static void test_set_get_add(void **state) {
  (void)state;
  int port = sg_test_free_port();
  sg__store_server *srv;
  sg__store *c;
  assert_status(sg__store_server_start("127.0.0.1", port, "tok", &srv), SG_OK, NULL);
  assert_status(sg__store_connect("127.0.0.1", port, "tok", 2000, &c), SG_OK, NULL);
  assert_status(sg__store_set(c, "a", "hello", 5), SG_OK, NULL);
  void *v;
  size_t n;
  assert_status(sg__store_wait_get(c, "a", 1000, &v, &n), SG_OK, NULL);
  assert_int_equal(n, 5);
  assert_memory_equal(v, "hello", 5);
  sg__free(v);
  assert_status(sg__store_set(c, "a", "", 0), SG_OK, NULL); /* overwrite with an empty value */
  assert_status(sg__store_wait_get(c, "a", 1000, &v, &n), SG_OK, NULL);
  assert_int_equal(n, 0);
  sg__free(v);
  int64_t r;
  assert_status(sg__store_add(c, "ctr", 5, &r), SG_OK, NULL);
  assert_int_equal(r, 5);
  assert_status(sg__store_add(c, "ctr", -7, &r), SG_OK, NULL);
  assert_int_equal(r, -2);
  /* ADD on a key holding a non-counter is refused */
  assert_status(sg__store_add(c, "a", 1, &r), SG_ERR_FORMAT, "rejected");
  sg__store_close(c);
  sg__store_server_stop(srv);
}

/* Port 0: the kernel picks the port as the server binds it (no race with
 * other processes for a port chosen earlier); the getter reports it and a
 * client reaches the server there. Ports outside 0..65535 are refused. */
static void test_serve_any_port(void **state) {
  (void)state;
  sg_comm_store_server *pub = NULL;
  assert_status(sg_comm_store_serve("127.0.0.1", -1, "t", &pub), SG_ERR_INVALID_ARG, "-1");
  assert_status(sg_comm_store_serve("127.0.0.1", 65536, "t", &pub), SG_ERR_INVALID_ARG, "65536");
  assert_null(pub);
  assert_int_equal(sg_comm_store_server_port(NULL), -1);
  sg_comm_store_server *a = NULL, *b = NULL;
  assert_status(sg_comm_store_serve("127.0.0.1", 0, "t", &a), SG_OK, NULL);
  assert_status(sg_comm_store_serve("127.0.0.1", 0, "t", &b), SG_OK, NULL);
  int pa = sg_comm_store_server_port(a), pb = sg_comm_store_server_port(b);
  assert_true(pa > 0 && pa <= 65535 && pb > 0 && pb <= 65535);
  assert_int_not_equal(pa, pb);
  /* the chosen port is really the listening one, and is now taken */
  sg__store *c;
  assert_status(sg__store_connect("127.0.0.1", pa, "t", 2000, &c), SG_OK, NULL);
  int64_t r;
  assert_status(sg__store_add(c, "n", 3, &r), SG_OK, NULL);
  assert_int_equal(r, 3);
  sg__store_close(c);
  sg_comm_store_server *dup = NULL;
  assert_status(sg_comm_store_serve("127.0.0.1", pa, "t", &dup), SG_ERR_COMM, "cannot listen");
  sg_comm_store_stop(a);
  sg_comm_store_stop(b);
}

static void test_wait_times_out(void **state) {
  (void)state;
  int port = sg_test_free_port();
  sg__store_server *srv;
  sg__store *c;
  assert_status(sg__store_server_start("127.0.0.1", port, "", &srv), SG_OK, NULL);
  assert_status(sg__store_connect("127.0.0.1", port, "", 2000, &c), SG_OK, NULL);
  int64_t t0 = sg__now_ms();
  void *v;
  size_t n;
  assert_status(sg__store_wait_get(c, "never", 300, &v, &n), SG_ERR_TIMEOUT, "'never'");
  int64_t dt = sg__now_ms() - t0;
  assert_true(dt >= 290 && dt < 1500);
  sg__store_close(c);
  sg__store_server_stop(srv);
  /* nobody listening: connect gives up in time */
  t0 = sg__now_ms();
  assert_status(sg__store_connect("127.0.0.1", port, "", 300, &c), SG_ERR_TIMEOUT, "rank 0");
  assert_true(sg__now_ms() - t0 < 1500);
}

static void test_token(void **state) {
  (void)state;
  int port = sg_test_free_port();
  sg__store_server *srv;
  sg__store *good, *bad;
  assert_status(sg__store_server_start("127.0.0.1", port, "secret", &srv), SG_OK, NULL);
  assert_status(sg__store_connect("127.0.0.1", port, "wrong", 2000, &bad), SG_ERR_DENIED, "wrong job token");
  assert_status(sg__store_connect("127.0.0.1", port, "secre", 2000, &bad), SG_ERR_DENIED, NULL);
  assert_status(sg__store_connect("127.0.0.1", port, "secrett", 2000, &bad), SG_ERR_DENIED, NULL);
  assert_status(sg__store_connect("127.0.0.1", port, "secret", 2000, &good), SG_OK, NULL);

  /* A raw client that skips HELLO cannot inject a key. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  uint8_t frame[16 + 8] = {'S', 'G', 'S', 'T', 2 /* SET */, 0,   0,   0,   0,   0,   0,   4,
                           0,   0,   0,   4,   'e',         'v', 'i', 'l', 'b', 'a', 'd', '!'};
  assert_int_equal(send(fd, frame, sizeof frame, 0), (ssize_t)sizeof frame);
  uint8_t reply[12];
  assert_int_equal(recv(fd, reply, sizeof reply, MSG_WAITALL), 12);
  assert_int_equal(reply[4], 2); /* DENIED */
  char c;
  assert_true(recv(fd, &c, 1, 0) <= 0); /* and the connection is closed (or reset) */
  close(fd);
  /* Garbage (a bad magic, an oversized length) is dropped without a crash. */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  uint8_t junk[16] = {'S', 'G', 'S', 'T', 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  assert_int_equal(recv(fd, reply, sizeof reply, MSG_WAITALL), 12);
  assert_int_equal(reply[4], 3); /* BAD */
  close(fd);

  void *v;
  size_t n;
  assert_status(sg__store_wait_get(good, "evil", 100, &v, &n), SG_ERR_TIMEOUT, NULL);
  sg__store_close(good);
  sg__store_server_stop(srv);
}

static void clear_env(void) {
  const char *vars[] = {
      "SG_RANK",       "SG_WORLD_SIZE",        "SG_LOCAL_RANK",        "RANK",
      "WORLD_SIZE",    "LOCAL_RANK",           "SLURM_PROCID",         "SLURM_NTASKS",
      "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
      "MASTER_ADDR",   "MASTER_PORT",          "SG_JOB_TOKEN",         "SG_COMM_TIMEOUT_MS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_env(void **state) {
  (void)state;
  sg_comm_params p = sg_comm_params_init();
  sg__comm_env e;
  clear_env();
  assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, "no rank");
  struct {
    const char *r, *n, *l, *src;
  } src[] = {{"SG_RANK", "SG_WORLD_SIZE", "SG_LOCAL_RANK", "SG"},
             {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
             {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"},
             {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi"}};
  for (size_t i = 0; i < 4; i++) {
    clear_env();
    setenv(src[i].r, "2", 1);
    setenv(src[i].n, "4", 1);
    setenv(src[i].l, "1", 1);
    assert_status(sg__comm_env_resolve(&p, &e), SG_OK, NULL);
    assert_int_equal(e.rank, 2);
    assert_int_equal(e.world_size, 4);
    assert_int_equal(e.local_rank, 1);
    assert_string_equal(e.source, src[i].src);
    assert_string_equal(e.master_addr, "127.0.0.1"); /* loopback by default */
    assert_int_equal(e.master_port, 29500);
    setenv(src[i].r, "4", 1); /* rank outside the world */
    assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, "rank 4");
    setenv(src[i].r, "1x", 1);
    assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, src[i].r);
    unsetenv(src[i].r);
    assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, "only one");
  }
  clear_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "localhost", 1);
  setenv("MASTER_PORT", "70000", 1);
  assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, "MASTER_PORT");
  setenv("MASTER_PORT", "1234", 1);
  setenv("SG_JOB_TOKEN", "abc", 1);
  setenv("SG_COMM_TIMEOUT_MS", "-5", 1);
  assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, "SG_COMM_TIMEOUT_MS");
  setenv("SG_COMM_TIMEOUT_MS", "1500", 1);
  assert_status(sg__comm_env_resolve(&p, &e), SG_OK, NULL);
  assert_string_equal(e.master_addr, "localhost");
  assert_int_equal(e.master_port, 1234);
  assert_string_equal(e.token, "abc");
  assert_int_equal(e.timeout_ms, 1500);
  p.size = 3;
  assert_status(sg__comm_env_resolve(&p, &e), SG_ERR_INVALID_ARG, "SG_COMM_PARAMS_INIT");
  clear_env();
}

/* A world of one needs no peer: create, collectives, destroy, all SG_OK. */
static void test_world_of_one(void **state) {
  (void)state;
  clear_env();
  sg_comm_params p = sg_comm_params_init();
  p.rank = 0;
  p.world_size = 1;
  p.master_port = sg_test_free_port();
  p.timeout_ms = 5000;
  sg_comm *c;
  assert_status(sg_comm_create(&p, &c), SG_OK, NULL);
  float x[3] = {1, 2, 3};
  assert_status(sg_comm_allreduce(c, x, x, 3, SG_F32, SG_REDUCE_AVG), SG_OK, NULL);
  assert_true(x[2] == 3.0f);
  assert_status(sg_comm_allreduce(c, x, x, 3, SG_U8, SG_REDUCE_SUM), SG_ERR_DTYPE, "dtype");
  assert_status(sg_comm_broadcast(c, x, 3, SG_F32, 1), SG_ERR_INVALID_ARG, "root 1");
  assert_status(sg_comm_barrier(c), SG_OK, NULL);
  assert_status(sg_comm_destroy(c), SG_OK, NULL);
  assert_status(sg_comm_destroy(NULL), SG_OK, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_get_add),
      cmocka_unit_test(test_serve_any_port),
      cmocka_unit_test(test_wait_times_out),
      cmocka_unit_test(test_token),
      cmocka_unit_test(test_env),
      cmocka_unit_test(test_world_of_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
