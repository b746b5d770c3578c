#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sg_test_assert_status(sg_status got, sg_status expected, const char *needle, const char *file,
                           int line) {
  if (got != expected) {
    fprintf(stderr, "%s:%d: expected %s, got %s (last error: %s)\n", file, line, sg_status_str(expected),
            sg_status_str(got), sg_last_error());
    _fail(file, line);
  }
  /* printf prints a NULL string as "(null)": a message built from a missing
   * name. No error path may do that (every test's errors pass here). */
  if (strstr(sg_last_error(), "(null)")) {
    fprintf(stderr, "%s:%d: %s: message '%s' contains '(null)'\n", file, line, sg_status_str(got),
            sg_last_error());
    _fail(file, line);
  }
  if (expected != SG_OK) {
    const char *msg = sg_last_error();
    if (msg[0] == '\0' || (needle && strstr(msg, needle) == NULL)) {
      fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'\n", file, line, sg_status_str(got), msg,
              needle ? needle : "(anything)");
      _fail(file, line);
    }
  }
}

unsigned char *sg_test_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    fail();
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)n + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return p;
}

const char *sg_test_data(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", SG_TEST_DATA_DIR, name);
  return buf;
}

void sg_test_fill(float *p, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    p[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

int sg_test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}
