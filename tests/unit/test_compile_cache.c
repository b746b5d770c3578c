/* The compile cache (src/compile/cache.c): an entry written and read back;
 * every file of an entry truncated, extended or with a flipped byte is a
 * miss (and the entry is gone, so the caller's rebuild can store it again);
 * a cache directory or entry another user owns, or others may write to, is
 * refused; four processes storing one key at once all succeed and leave one
 * valid entry; SG_CACHE=0 turns it off; the key depends on every byte. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/cache.h"
#include "core/core.h"
#include "test_util.h"

static char root[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/sgrt-cache-test-XXXXXX");
  assert_non_null(mkdtemp(root));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static const char so_bytes[] = "\x7f"
                               "ELF pretend shared object";
static const char plan_bytes[] = "plan v1: 3 kernels";

static void put_two(sg__cache *c, sg__cache_key k) {
  sg__cache_file f[2] = {{"kernels.so", so_bytes, sizeof so_bytes},
                         {"plan.bin", plan_bytes, sizeof plan_bytes}};
  assert_status(sg__cache_put(c, k, f, 2), SG_OK, NULL);
}

static void test_round_trip(void **state) {
  (void)state;
  char dir[128], path[4096];
  snprintf(dir, sizeof dir, "%s/a/b/sgrt", root); /* missing parents are created */
  sg__cache *c;
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  struct stat sb;
  assert_int_equal(stat(dir, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0700);
  sg__cache_key k = sg__cache_key_of("graph", 5);
  assert_int_equal(sg__cache_get(c, k, path, sizeof path), SG_ERR_NOT_FOUND);
  put_two(c, k);
  assert_status(sg__cache_get(c, k, path, sizeof path), SG_OK, NULL);
  char file[4200];
  snprintf(file, sizeof file, "%s/plan.bin", path);
  FILE *f = fopen(file, "rb");
  char buf[64] = {0};
  assert_non_null(f);
  assert_int_equal(fread(buf, 1, sizeof buf, f), sizeof plan_bytes);
  fclose(f);
  assert_memory_equal(buf, plan_bytes, sizeof plan_bytes);
  /* Storing it again (a second process that also missed) keeps one valid entry. */
  put_two(c, k);
  assert_status(sg__cache_get(c, k, path, sizeof path), SG_OK, NULL);
  /* The key depends on every byte. */
  sg__cache_key k2 = sg__cache_key_of("grapi", 5);
  assert_true(k.hi != k2.hi || k.lo != k2.lo);
  assert_int_equal(sg__cache_get(c, k2, path, sizeof path), SG_ERR_NOT_FOUND);
  sg__cache_close(c);
}

/* Damages one file of a fresh entry in one way; the entry must be a miss. */
static void damage(const char *file, int how) {
  int fd = open(file, O_RDWR);
  assert_true(fd >= 0);
  struct stat sb;
  assert_int_equal(fstat(fd, &sb), 0);
  if (how == 0) assert_int_equal(ftruncate(fd, sb.st_size / 2), 0);
  if (how == 1) assert_int_equal(pwrite(fd, "x", 1, sb.st_size), 1);
  if (how == 2) {
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, sb.st_size / 2), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, sb.st_size / 2), 1);
  }
  close(fd);
}

static void test_corruption(void **state) {
  (void)state;
  char dir[128], path[4096], file[4200];
  snprintf(dir, sizeof dir, "%s/corrupt", root);
  sg__cache *c;
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  const char *names[] = {"kernels.so", "plan.bin", "manifest"};
  for (int n = 0; n < 3; n++)
    for (int how = 0; how < 3; how++) {
      sg__cache_key k = sg__cache_key_of(&how, sizeof how);
      k.lo ^= (uint64_t)n;
      put_two(c, k);
      assert_status(sg__cache_get(c, k, path, sizeof path), SG_OK, NULL);
      snprintf(file, sizeof file, "%s/%s", path, names[n]);
      damage(file, how);
      if (sg__cache_get(c, k, path, sizeof path) != SG_ERR_NOT_FOUND)
        fail_msg("%s damaged (%s) was still a hit", names[n],
                 how == 0   ? "truncated"
                 : how == 1 ? "extended"
                            : "flipped");
      struct stat sb;
      assert_int_equal(stat(path, &sb), -1); /* removed, so a rebuild can store it */
      put_two(c, k);
      assert_status(sg__cache_get(c, k, path, sizeof path), SG_OK, NULL);
    }
  /* A file replaced by a link to one elsewhere is not followed. */
  sg__cache_key k = sg__cache_key_of("link", 4);
  put_two(c, k);
  assert_status(sg__cache_get(c, k, path, sizeof path), SG_OK, NULL);
  snprintf(file, sizeof file, "%s/plan.bin", path);
  assert_int_equal(unlink(file), 0);
  assert_int_equal(symlink("/etc/hostname", file), 0);
  assert_int_equal(sg__cache_get(c, k, path, sizeof path), SG_ERR_NOT_FOUND);
  sg__cache_close(c);
}

static void test_permissions(void **state) {
  (void)state;
  char dir[128], path[4096];
  snprintf(dir, sizeof dir, "%s/perm", root);
  sg__cache *c;
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  sg__cache_key k = sg__cache_key_of("p", 1);
  put_two(c, k);
  sg__cache_close(c);
  assert_int_equal(chmod(dir, 0777), 0);
  assert_status(sg__cache_open(dir, &c), SG_ERR_DENIED, "may be written by others (mode 777)");
  assert_null(c);
  assert_int_equal(chmod(dir, 0700), 0);
  if (geteuid() != 0) {
    print_message("not root: the foreign-owner cases are skipped\n");
    return;
  }
  /* An entry another user owns is a miss; so is the whole cache. */
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  assert_status(sg__cache_get(c, k, path, sizeof path), SG_OK, NULL);
  assert_int_equal(chown(path, 12345, 12345), 0);
  assert_int_equal(sg__cache_get(c, k, path, sizeof path), SG_ERR_NOT_FOUND);
  sg__cache_close(c);
  assert_int_equal(chown(dir, 12345, 12345), 0);
  assert_status(sg__cache_open(dir, &c), SG_ERR_DENIED, "is owned by user 12345");
}

/* Four processes store one key at once; all succeed, one entry remains. */
static void test_concurrent_writers(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/race", root);
  sg__cache_key k = sg__cache_key_of("race", 4);
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    kids[i] = fork();
    assert_true(kids[i] >= 0);
    if (kids[i] == 0) {
      sg__cache *c;
      char path[4096];
      if (sg__cache_open(dir, &c) != SG_OK) _exit(1);
      sg__cache_file f[2] = {{"kernels.so", so_bytes, sizeof so_bytes},
                             {"plan.bin", plan_bytes, sizeof plan_bytes}};
      if (sg__cache_get(c, k, path, sizeof path) != SG_OK && sg__cache_put(c, k, f, 2) != SG_OK) _exit(2);
      _exit(sg__cache_get(c, k, path, sizeof path) == SG_OK ? 0 : 3);
    }
  }
  for (int i = 0; i < 4; i++) {
    int status;
    assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  char cmd[256];
  snprintf(cmd, sizeof cmd, "test $(ls '%s' | wc -l) -eq 1", dir); /* no temporary directories left */
  assert_int_equal(system(cmd), 0);
}

static void test_off_and_bad_names(void **state) {
  (void)state;
  sg__cache *c = (sg__cache *)&c;
  setenv("SG_CACHE", "0", 1);
  assert_status(sg__cache_open(NULL, &c), SG_OK, NULL);
  assert_null(c);
  unsetenv("SG_CACHE");
  char dir[128];
  snprintf(dir, sizeof dir, "%s/names", root);
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  sg__cache_file f[1] = {{"../escape", "x", 1}};
  assert_status(sg__cache_put(c, sg__cache_key_of("n", 1), f, 1), SG_ERR_INVALID_ARG, "bad name");
  f[0].name = "manifest";
  assert_status(sg__cache_put(c, sg__cache_key_of("n", 1), f, 1), SG_ERR_INVALID_ARG, "bad name");
  sg__cache_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_corruption),
      cmocka_unit_test(test_permissions),       cmocka_unit_test(test_concurrent_writers),
      cmocka_unit_test(test_off_and_bad_names),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
