/* Paths that are not regular files (a FIFO, a character device, a socket, a
 * directory) given to the loaders and writers of the library: each is refused
 * at once with SG_ERR_IO and a message that names the path and what it is,
 * instead of blocking on the FIFO's missing other end (issue 15, item 4).
 * An alarm turns a hang (the old behaviour) into a failure. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/core.h"
#include "sgrt/onnx.h"
#include "sgrt/partition.h"
#include "test_util.h"

/* Seconds after which a test that blocks is killed (SIGALRM): each call here
 * must return at once. */
#define HANG_LIMIT_S 30

static char dir[64];
static char fifo[128], fifo_onnx[128], sock[128], subdir[128], regular[128];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s/sg-open-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (mkdtemp(dir) == NULL) return -1;
  snprintf(fifo, sizeof fifo, "%s/f.sgg", dir);
  snprintf(fifo_onnx, sizeof fifo_onnx, "%s/f.onnx", dir);
  snprintf(sock, sizeof sock, "%s/s.sgg", dir);
  snprintf(subdir, sizeof subdir, "%s/d.sgg", dir);
  snprintf(regular, sizeof regular, "%s/r.txt", dir);
  if (mkfifo(fifo, 0600) != 0 || mkfifo(fifo_onnx, 0600) != 0 || mkdir(subdir, 0700) != 0) return -1;
  /* A bound UNIX socket leaves a socket file; the descriptor is not needed. */
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (s < 0) return -1;
  int rc = -1;
  if (strlen(sock) < sizeof a.sun_path) {
    memcpy(a.sun_path, sock, strlen(sock) + 1);
    rc = bind(s, (struct sockaddr *)&a, sizeof a);
  }
  close(s);
  return rc == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  unlink(fifo);
  unlink(fifo_onnx);
  unlink(sock);
  unlink(regular);
  rmdir(subdir);
  rmdir(dir);
  return 0;
}

/* The last error names `path` and says what it is ("is a FIFO, not a regular file"). */
static void assert_refused(sg_status st, const char *path, const char *kind) {
  char want[256];
  snprintf(want, sizeof want, "'%s' is %s, not a regular file", path, kind);
  assert_status(st, SG_ERR_IO, want);
}

static void test_graph_load(void **state) {
  (void)state;
  sg_graph *g = (sg_graph *)&g;
  assert_refused(sg_graph_load(fifo, &g), fifo, "a FIFO");
  assert_null(g);
  assert_refused(sg_graph_load(subdir, &g), subdir, "a directory");
  assert_refused(sg_graph_load(sock, &g), sock, "a socket");
  assert_refused(sg_graph_load("/dev/null", &g), "/dev/null", "a character device");
  assert_refused(sg_graph_load("/dev/zero", &g), "/dev/zero", "a character device");
  assert_null(g);
  /* A FIFO whose other end is open (here, by this process) would block the
   * reader for data that never comes: refused all the same. */
  int keep = open(fifo, O_RDWR | O_CLOEXEC);
  assert_true(keep >= 0);
  assert_refused(sg_graph_load(fifo, &g), fifo, "a FIFO");
  close(keep);
  /* A regular file still loads. */
  assert_status(sg_graph_load(sg_test_data("mlp.sgg"), &g), SG_OK, NULL);
  sg_graph_destroy(g);
}

static void test_onnx_import(void **state) {
  (void)state;
  sg_graph *g = (sg_graph *)&g;
  sg_onnx_params p = SG_ONNX_PARAMS_INIT;
  assert_refused(sg_onnx_import(fifo_onnx, &p, &g), fifo_onnx, "a FIFO");
  assert_null(g);
  assert_refused(sg_onnx_import(fifo, &p, &g), fifo, "a FIFO");
  assert_refused(sg_onnx_import(subdir, &p, &g), subdir, "a directory");
  assert_refused(sg_onnx_import(sock, &p, &g), sock, "a socket");
  assert_refused(sg_onnx_import("/dev/zero", &p, &g), "/dev/zero", "a character device");
  assert_null(g);
}

static void test_device_table_load(void **state) {
  (void)state;
  sg_device_table *t = (sg_device_table *)&t;
  char want[256];
  snprintf(want, sizeof want, "device table: '%s' is a FIFO, not a regular file", fifo);
  assert_status(sg_device_table_load(fifo, &t), SG_ERR_IO, want);
  assert_null(t);
  assert_status(sg_device_table_load("/dev/zero", &t), SG_ERR_IO, "is a character device");
  assert_status(sg_device_table_load(subdir, &t), SG_ERR_IO, "is a directory");
  assert_null(t);
}

/* Writers refuse an existing path that is not a regular file: no blocking
 * on a FIFO without a reader, no writing into one with a reader, no
 * writing to a device. "-" stays stdout. */
static void test_writers(void **state) {
  (void)state;
  sg_graph *g = NULL;
  sg_partition *part = NULL;
  assert_status(sg_graph_load(sg_test_data("cnn.sgg"), &g), SG_OK, NULL);
  assert_refused(sg_graph_write_dot(g, fifo), fifo, "a FIFO");
  assert_refused(sg_graph_write_dot(g, "/dev/null"), "/dev/null", "a character device");
  assert_refused(sg_graph_write_dot(g, subdir), subdir, "a directory");
  assert_refused(sg_graph_write_dot(g, sock), sock, "a socket");
  /* A FIFO with a reader: opening it to write would succeed; still refused. */
  int reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  assert_true(reader >= 0);
  assert_refused(sg_graph_write_dot(g, fifo), fifo, "a FIFO");
  char byte;
  assert_int_equal(read(reader, &byte, 1), 0); /* nothing was written into it */
  close(reader);

  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  pp.parts = 2;
  assert_status(sg_partition_create(g, &pp, NULL, &part), SG_OK, NULL);
  assert_refused(sg_partition_write_dot(part, fifo), fifo, "a FIFO");
  assert_refused(sg_partition_write_dot(part, "/dev/null"), "/dev/null", "a character device");

  /* sg_graph_save writes a temporary file and renames it over the path: a
   * FIFO or a device there is refused, not replaced. */
  assert_refused(sg_graph_save(g, fifo), fifo, "a FIFO");
  struct stat fs;
  assert_int_equal(stat(fifo, &fs), 0);
  assert_true(S_ISFIFO(fs.st_mode)); /* still the FIFO */
  assert_refused(sg_graph_save(g, subdir), subdir, "a directory");

  /* A regular file is written (created, then truncated on a second write). */
  assert_status(sg_graph_write_dot(g, regular), SG_OK, NULL);
  struct stat sb;
  assert_int_equal(stat(regular, &sb), 0);
  assert_true(S_ISREG(sb.st_mode) && sb.st_size > 0);
  off_t graph_size = sb.st_size;
  assert_status(sg_partition_write_dot(part, regular), SG_OK, NULL);
  assert_int_equal(stat(regular, &sb), 0);
  assert_true(sb.st_size > 0 && sb.st_size != graph_size);
  sg_partition_destroy(part);
  sg_graph_destroy(g);
}

/* The helper itself: a blocking descriptor of a regular file, or SG_ERR_IO. */
static void test_open_regular_helper(void **state) {
  (void)state;
  int fd = 123;
  assert_status(sg__open_regular(regular, true, &fd), SG_OK, NULL);
  assert_true(fd >= 0);
  int fl = fcntl(fd, F_GETFL);
  assert_true(fl >= 0 && (fl & O_NONBLOCK) == 0 && (fl & O_ACCMODE) == O_WRONLY);
  assert_true((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  assert_int_equal(write(fd, "abc", 3), 3);
  close(fd);
  assert_status(sg__open_regular(regular, false, &fd), SG_OK, NULL);
  fl = fcntl(fd, F_GETFL);
  assert_true(fl >= 0 && (fl & O_NONBLOCK) == 0 && (fl & O_ACCMODE) == O_RDONLY);
  char buf[8];
  assert_int_equal(read(fd, buf, sizeof buf), 3);
  close(fd);

  fd = 123;
  assert_refused(sg__open_regular(fifo, false, &fd), fifo, "a FIFO");
  assert_int_equal(fd, -1);
  assert_refused(sg__open_regular(fifo, true, &fd), fifo, "a FIFO"); /* no reader: ENXIO, worded */
  assert_refused(sg__open_regular(subdir, true, &fd), subdir, "a directory");
  assert_refused(sg__open_regular(sock, false, &fd), sock, "a socket");
  assert_refused(sg__open_regular("/dev/null", true, &fd), "/dev/null", "a character device");
  char missing[160];
  snprintf(missing, sizeof missing, "%s/no/such.sgg", dir);
  assert_status(sg__open_regular(missing, false, &fd), SG_ERR_IO, "No such file");
  assert_status(sg__open_regular(missing, true, &fd), SG_ERR_IO, "for writing");
  assert_int_equal(fd, -1);

  FILE *f = (FILE *)&f;
  assert_refused(sg__fopen_regular(fifo, false, &f), fifo, "a FIFO");
  assert_null(f);
  assert_status(sg__fopen_regular(regular, false, &f), SG_OK, NULL);
  assert_non_null(f);
  assert_int_equal(fgetc(f), 'a');
  assert_int_equal(fclose(f), 0);
  assert_string_equal(sg__file_kind(S_IFIFO), "a FIFO");
  assert_string_equal(sg__file_kind(S_IFBLK), "a block device");
}

int main(void) {
  /* Default SIGALRM action: the process dies, the test fails, nothing hangs. */
  signal(SIGALRM, SIG_DFL);
  alarm(HANG_LIMIT_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graph_load),          cmocka_unit_test(test_onnx_import),
      cmocka_unit_test(test_device_table_load),   cmocka_unit_test(test_writers),
      cmocka_unit_test(test_open_regular_helper),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
