/* Managing the compile cache (include/sgrt/cache.h, src/compile/cache_admin.c):
 * entries stored with sg__cache_put into a temporary directory, then
 * sg_cache_get_info's counts and bytes against sizes worked out by hand from
 * the manifest's format, sg_cache_list's and sg_cache_get_entry's fields
 * against the info.txt the test wrote, clearing one entry and all of them
 * (files and directories that are not the cache's stay), refused keys and
 * arguments, a corrupt entry listed as invalid (and left in place), links
 * named like entries never followed, caches of other users or writable by
 * others refused, and allocation failures. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compile/cache.h"
#include "core/core.h"
#include "test_util.h"

static char root[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/sgrt-cache-admin-XXXXXX");
  assert_non_null(mkdtemp(root));
  unsetenv("SG_CACHE");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static const char so_bytes[] = "\x7f"
                               "ELF pretend shared object"; /* 27 bytes with the NUL */
static const char plan_bytes[] = "plan v1";                 /* 8 bytes with the NUL */
static const char info_text[] = "graph 5 ops, 9 tensors\n"
                                "graph_hash 00112233aabbccdd\n"
                                "kernels 2\n"
                                "ops 4\n"
                                "device cpu\n"
                                "compiler /usr/bin/cc\n"
                                "sgrt 0.1.0\n"
                                "created 1700000000\n";

/* A manifest line "NAME SIZE CHECKSUM\n": the name, a space, the size in
 * decimal, a space, 16 hex digits, a newline (docs/compiler.md). */
static uint64_t manifest_line(const char *name, size_t size) {
  char digits[32];
  return strlen(name) + 1 + (uint64_t)snprintf(digits, sizeof digits, "%zu", size) + 1 + 16 + 1;
}
#define MANIFEST_HEADER 19 /* "sgrt-cache-entry 1\n" */

/* Entry A: kernels.so and info.txt, as module.c stores them. */
static uint64_t put_a(sg__cache *c, sg__cache_key k) {
  sg__cache_file f[2] = {{"kernels.so", so_bytes, sizeof so_bytes},
                         {"info.txt", info_text, strlen(info_text)}};
  assert_status(sg__cache_put(c, k, f, 2), SG_OK, NULL);
  return sizeof so_bytes + strlen(info_text) + MANIFEST_HEADER +
         manifest_line("kernels.so", sizeof so_bytes) + manifest_line("info.txt", strlen(info_text));
}

/* Entry B: one file, no info.txt. */
static uint64_t put_b(sg__cache *c, sg__cache_key k) {
  sg__cache_file f[1] = {{"plan.bin", plan_bytes, sizeof plan_bytes}};
  assert_status(sg__cache_put(c, k, f, 1), SG_OK, NULL);
  return sizeof plan_bytes + MANIFEST_HEADER + manifest_line("plan.bin", sizeof plan_bytes);
}

static void make_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static bool exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

typedef struct seen {
  sg_cache_entry e[8];
  int n, stop_after;
} seen;

static int on_entry(const sg_cache_entry *e, void *ctx) {
  seen *s = ctx;
  assert_true(e->size >= sizeof(sg_cache_entry));
  assert_true(s->n < 8);
  s->e[s->n++] = *e;
  return s->stop_after && s->n >= s->stop_after;
}

/* A cache dir with entries A and B, a temporary directory and two things
 * that are not the cache's. */
static void fill(const char *dir, char ka[33], char kb[33], uint64_t *bytes_a, uint64_t *bytes_b) {
  sg__cache *c;
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  sg__cache_key a = sg__cache_key_of("a", 1), b = sg__cache_key_of("b", 1);
  *bytes_a = put_a(c, a);
  *bytes_b = put_b(c, b);
  sg__cache_key_hex(a, ka);
  sg__cache_key_hex(b, kb);
  sg__cache_close(c);
  char p[256];
  snprintf(p, sizeof p, "%s/README", dir);
  make_file(p, "not the cache's\n");
  snprintf(p, sizeof p, "%s/keep", dir);
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(p, sizeof p, "%s/keep/%s", dir, ka); /* named like an entry, but one level down */
  make_file(p, "x");
  snprintf(p, sizeof p, "%s/tmp-%s-AbC123", dir, ka); /* a store that died half way */
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(p, sizeof p, "%s/tmp-%s-AbC123/kernels.so", dir, ka);
  make_file(p, "partial");
}

static void test_info_and_list(void **state) {
  (void)state;
  char dir[128], ka[33], kb[33];
  uint64_t bytes_a, bytes_b;
  snprintf(dir, sizeof dir, "%s/list", root);
  fill(dir, ka, kb, &bytes_a, &bytes_b);
  /* info.txt: 23 + 28 + 10 + 6 + 11 + 21 + 11 + 19 = 129 bytes. A: kernels.so 27 + info.txt 129 +
   * manifest (header 19, "kernels.so 27 " + 16 + 1 = 31, "info.txt 129 " + 16 + 1 = 30) = 236.
   * B: plan.bin 8 + manifest (19 + "plan.bin 8 " + 16 + 1 = 28) = 55. */
  assert_int_equal(strlen(info_text), 129);
  assert_int_equal(bytes_a, 236);
  assert_int_equal(bytes_b, 55);

  sg_cache_info info = SG_CACHE_INFO_INIT;
  assert_status(sg_cache_get_info(dir, &info), SG_OK, NULL);
  assert_int_equal(info.size, sizeof info);
  assert_string_equal(info.dir, dir);
  assert_int_equal(info.enabled, 1);
  assert_int_equal(info.exists, 1);
  assert_int_equal(info.entries, 2);
  assert_int_equal(info.bytes, 236 + 55);
  assert_int_equal(info.temporaries, 1);
  /* NULL: the environment's directory; SG_CACHE=0 only says sessions do not use it. */
  setenv("SG_CACHE_DIR", dir, 1);
  setenv("SG_CACHE", "0", 1);
  sg_cache_info env = SG_CACHE_INFO_INIT;
  assert_status(sg_cache_get_info(NULL, &env), SG_OK, NULL);
  assert_string_equal(env.dir, dir);
  assert_int_equal(env.enabled, 0);
  assert_int_equal(env.entries, 2);
  unsetenv("SG_CACHE");
  unsetenv("SG_CACHE_DIR");

  seen s = {0};
  assert_status(sg_cache_list(dir, on_entry, &s), SG_OK, NULL);
  assert_int_equal(s.n, 2);
  /* Newest first: B's time is its directory's (now), A's is info.txt's (2023). */
  const sg_cache_entry *b = &s.e[0], *a = &s.e[1];
  assert_string_equal(a->key, ka);
  assert_string_equal(b->key, kb);
  assert_int_equal(a->valid, 1);
  assert_string_equal(a->problem, "");
  assert_int_equal(a->bytes, 236);
  assert_int_equal(a->created, 1700000000);
  assert_int_equal(a->graph_ops, 5);
  assert_int_equal(a->graph_tensors, 9);
  assert_string_equal(a->graph_hash, "00112233aabbccdd");
  assert_int_equal(a->kernels, 2);
  assert_int_equal(a->fused_ops, 4);
  assert_string_equal(a->device, "cpu");
  assert_string_equal(a->compiler, "/usr/bin/cc");
  assert_string_equal(a->sgrt_version, "0.1.0");
  assert_int_equal(b->valid, 1);
  assert_int_equal(b->bytes, 55);
  assert_true(llabs((long long)(b->created - (int64_t)time(NULL))) < 600);
  assert_int_equal(b->graph_ops, -1);
  assert_int_equal(b->graph_tensors, -1);
  assert_int_equal(b->kernels, -1);
  assert_int_equal(b->fused_ops, -1);
  assert_string_equal(b->graph_hash, "");
  assert_string_equal(b->device, "");
  /* A callback that says stop gets no further entry. */
  seen one = {.stop_after = 1};
  assert_status(sg_cache_list(dir, on_entry, &one), SG_OK, NULL);
  assert_int_equal(one.n, 1);

  /* One entry; the key in either case. */
  char upper[33];
  for (int i = 0; i < 33; i++) upper[i] = (ka[i] >= 'a' && ka[i] <= 'f') ? (char)(ka[i] - 'a' + 'A') : ka[i];
  sg_cache_entry e = SG_CACHE_ENTRY_INIT;
  assert_status(sg_cache_get_entry(dir, upper, &e), SG_OK, NULL);
  assert_int_equal(e.size, sizeof e);
  assert_string_equal(e.key, ka);
  assert_int_equal(e.valid, 1);
  assert_int_equal(e.bytes, 236);
  assert_string_equal(e.device, "cpu");
  /* An older caller's shorter struct gets what fits; below the first version nothing. */
  sg_cache_entry small = SG_CACHE_ENTRY_INIT;
  small.size = offsetof(sg_cache_entry, key) + sizeof small.key;
  assert_status(sg_cache_get_entry(dir, ka, &small), SG_OK, NULL);
  assert_int_equal(small.size, offsetof(sg_cache_entry, key) + sizeof small.key);
  assert_string_equal(small.key, ka);
  assert_int_equal(small.valid, 0); /* not written */
  small.size = sizeof(size_t);
  assert_status(sg_cache_get_entry(dir, ka, &small), SG_ERR_INVALID_ARG, "SG_CACHE_ENTRY_INIT");
  info.size = 4;
  assert_status(sg_cache_get_info(dir, &info), SG_ERR_INVALID_ARG, "SG_CACHE_INFO_INIT");

  /* A directory that does not exist is an empty cache, and is not created. */
  char none[160];
  snprintf(none, sizeof none, "%s/none/sgrt", root);
  sg_cache_info empty = SG_CACHE_INFO_INIT;
  assert_status(sg_cache_get_info(none, &empty), SG_OK, NULL);
  assert_int_equal(empty.exists, 0);
  assert_int_equal(empty.entries, 0);
  assert_int_equal(empty.bytes, 0);
  seen zero = {0};
  assert_status(sg_cache_list(none, on_entry, &zero), SG_OK, NULL);
  assert_int_equal(zero.n, 0);
  assert_status(sg_cache_get_entry(none, ka, &e), SG_ERR_NOT_FOUND, "no entry");
  size_t removed = 99;
  assert_status(sg_cache_clear(none, NULL, &removed), SG_OK, NULL);
  assert_int_equal(removed, 0);
  assert_false(exists(none));
}

static void test_clear(void **state) {
  (void)state;
  char dir[128], ka[33], kb[33], p[256];
  uint64_t bytes_a, bytes_b;
  snprintf(dir, sizeof dir, "%s/clear", root);
  fill(dir, ka, kb, &bytes_a, &bytes_b);
  size_t removed = 99;
  assert_status(sg_cache_clear(dir, ka, &removed), SG_OK, NULL);
  assert_int_equal(removed, 1);
  snprintf(p, sizeof p, "%s/%s", dir, ka);
  assert_false(exists(p));
  sg_cache_info info = SG_CACHE_INFO_INIT;
  assert_status(sg_cache_get_info(dir, &info), SG_OK, NULL);
  assert_int_equal(info.entries, 1);
  assert_int_equal(info.bytes, bytes_b);
  /* Gone now; the trash directory of the removal is gone too. */
  assert_status(sg_cache_clear(dir, ka, &removed), SG_ERR_NOT_FOUND, ka);
  assert_int_equal(removed, 0);
  assert_int_equal(info.temporaries, 1);

  assert_status(sg_cache_clear(dir, NULL, &removed), SG_OK, NULL);
  assert_int_equal(removed, 1);
  assert_status(sg_cache_get_info(dir, &info), SG_OK, NULL);
  assert_int_equal(info.exists, 1);
  assert_int_equal(info.entries, 0);
  assert_int_equal(info.bytes, 0);
  assert_int_equal(info.temporaries, 0);
  /* What is not the cache's stays. */
  snprintf(p, sizeof p, "%s/README", dir);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/keep/%s", dir, ka);
  assert_true(exists(p));
  char cmd[256];
  snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s' | sort | tr '\\n' ' ')\" = 'README keep '", dir);
  assert_int_equal(system(cmd), 0);
  /* Clearing an empty cache is no error. */
  assert_status(sg_cache_clear(dir, NULL, &removed), SG_OK, NULL);
  assert_int_equal(removed, 0);
}

static void test_bad_arguments(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/args", root);
  sg__cache *c;
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  uint64_t bytes = put_b(c, sg__cache_key_of("b", 1));
  (void)bytes;
  sg__cache_close(c);
  size_t removed;
  sg_cache_entry e = SG_CACHE_ENTRY_INIT;
  const char *bad[] = {"xyz",
                       "",
                       "0123456789abcdef0123456789abcde",   /* 31 digits */
                       "0123456789abcdef0123456789abcdef0", /* 33 */
                       "0123456789abcdef0123456789abcdeg",
                       "../0123456789abcdef0123456789abc",
                       "0123456789abcdef 123456789abcdef"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "key '%s' is not 32 hex digits", bad[i]);
    assert_status(sg_cache_clear(dir, bad[i], &removed), SG_ERR_INVALID_ARG, needle);
    assert_status(sg_cache_get_entry(dir, bad[i], &e), SG_ERR_INVALID_ARG, needle);
  }
  const char *unknown = "00000000000000000000000000000000";
  assert_status(sg_cache_clear(dir, unknown, &removed), SG_ERR_NOT_FOUND, unknown);
  assert_status(sg_cache_get_entry(dir, unknown, &e), SG_ERR_NOT_FOUND, unknown);
  assert_status(sg_cache_clear(dir, NULL, NULL), SG_ERR_INVALID_ARG, "NULL removed");
  assert_status(sg_cache_get_entry(dir, NULL, &e), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_cache_get_entry(dir, unknown, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_cache_get_info(dir, NULL), SG_ERR_INVALID_ARG, "NULL");
  assert_status(sg_cache_list(dir, NULL, NULL), SG_ERR_INVALID_ARG, "NULL callback");
  sg_cache_info info = SG_CACHE_INFO_INIT;
  assert_status(sg_cache_get_info(dir, &info), SG_OK, NULL);
  assert_int_equal(info.entries, 1); /* nothing was removed */
}

/* Flips the byte at `at` of a file. */
static void flip(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char ch;
  assert_int_equal(pread(fd, &ch, 1, at), 1);
  ch ^= 0x40;
  assert_int_equal(pwrite(fd, &ch, 1, at), 1);
  close(fd);
}

static void test_corrupt_entry(void **state) {
  (void)state;
  char dir[128], ka[33], p[256];
  snprintf(dir, sizeof dir, "%s/corrupt", root);
  sg__cache *c;
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  sg__cache_key a = sg__cache_key_of("a", 1);
  uint64_t bytes = put_a(c, a);
  sg__cache_key_hex(a, ka);
  sg__cache_close(c);
  snprintf(p, sizeof p, "%s/%s/kernels.so", dir, ka);
  flip(p, 5);
  seen s = {0};
  assert_status(sg_cache_list(dir, on_entry, &s), SG_OK, NULL);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.e[0].valid, 0);
  assert_non_null(strstr(s.e[0].problem, "'kernels.so' does not match its checksum"));
  assert_int_equal(s.e[0].bytes, bytes);     /* same size, other bytes */
  assert_string_equal(s.e[0].device, "cpu"); /* info.txt itself is intact */
  assert_true(exists(p));                    /* listing removes nothing */
  /* A truncated manifest: the same through sg_cache_get_entry. */
  snprintf(p, sizeof p, "%s/%s/manifest", dir, ka);
  assert_int_equal(truncate(p, 10), 0);
  sg_cache_entry e = SG_CACHE_ENTRY_INIT;
  assert_status(sg_cache_get_entry(dir, ka, &e), SG_OK, NULL);
  assert_int_equal(e.valid, 0);
  assert_non_null(strstr(e.problem, "header is wrong"));
  assert_int_equal(e.bytes, bytes - (MANIFEST_HEADER + manifest_line("kernels.so", sizeof so_bytes) +
                                     manifest_line("info.txt", strlen(info_text)) - 10));
  size_t removed;
  assert_status(sg_cache_clear(dir, NULL, &removed), SG_OK, NULL);
  assert_int_equal(removed, 1);
}

static void test_links_not_followed(void **state) {
  (void)state;
  char dir[128], victim[128], ka[33], kb[33], p[256], link_key[33];
  uint64_t bytes_a, bytes_b;
  snprintf(dir, sizeof dir, "%s/links", root);
  fill(dir, ka, kb, &bytes_a, &bytes_b);
  /* Somebody's directory that looks like an entry (a valid one, even). */
  snprintf(victim, sizeof victim, "%s/victim", root);
  sg__cache *c;
  assert_status(sg__cache_open(victim, &c), SG_OK, NULL);
  sg__cache_key k = sg__cache_key_of("v", 1);
  put_a(c, k);
  sg__cache_close(c);
  sg__cache_key_hex(k, link_key);
  snprintf(p, sizeof p, "%s/precious", victim);
  make_file(p, "keep me\n");
  char target[200];
  snprintf(target, sizeof target, "%s/%s", victim, link_key);
  snprintf(p, sizeof p, "%s/%s", dir, link_key);
  assert_int_equal(symlink(target, p), 0);
  char tmp_link[256];
  snprintf(tmp_link, sizeof tmp_link, "%s/tmp-%s-Zz9999", dir, link_key);
  assert_int_equal(symlink(victim, tmp_link), 0);

  /* Listed as an invalid entry of no bytes, its info.txt not read. */
  seen s = {0};
  assert_status(sg_cache_list(dir, on_entry, &s), SG_OK, NULL);
  assert_int_equal(s.n, 3);
  const sg_cache_entry *l = NULL;
  for (int i = 0; i < s.n; i++)
    if (strcmp(s.e[i].key, link_key) == 0) l = &s.e[i];
  assert_non_null(l);
  assert_int_equal(l->valid, 0);
  assert_int_equal(l->bytes, 0);
  assert_string_equal(l->device, "");
  sg_cache_info info = SG_CACHE_INFO_INIT;
  assert_status(sg_cache_get_info(dir, &info), SG_OK, NULL);
  assert_int_equal(info.entries, 3);
  assert_int_equal(info.bytes, bytes_a + bytes_b);
  assert_int_equal(info.temporaries, 2);

  /* Clearing it by key is refused; clearing all removes the real entries
   * and temporaries, reports the link, and leaves it and its target alone. */
  size_t removed = 99;
  assert_status(sg_cache_clear(dir, link_key, &removed), SG_ERR_DENIED, "is a symbolic link");
  assert_int_equal(removed, 0);
  assert_status(sg_cache_clear(dir, NULL, &removed), SG_ERR_DENIED, "left alone");
  assert_int_equal(removed, 2);
  assert_true(exists(p));
  assert_true(exists(tmp_link));
  snprintf(p, sizeof p, "%s/precious", victim);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/kernels.so", target);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/%s", dir, ka);
  assert_false(exists(p));

  /* A session that meets the link removes the link, never the target's files. */
  assert_status(sg__cache_open(dir, &c), SG_OK, NULL);
  char path[4096];
  assert_int_equal(sg__cache_get(c, k, path, sizeof path), SG_ERR_NOT_FOUND);
  sg__cache_close(c);
  snprintf(p, sizeof p, "%s/%s", dir, link_key);
  assert_false(exists(p));
  snprintf(p, sizeof p, "%s/kernels.so", target);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/precious", victim);
  assert_true(exists(p));
}

static void test_permissions(void **state) {
  (void)state;
  char dir[128], ka[33], kb[33], p[256];
  uint64_t bytes_a, bytes_b;
  snprintf(dir, sizeof dir, "%s/perm", root);
  fill(dir, ka, kb, &bytes_a, &bytes_b);
  size_t removed;
  sg_cache_info info = SG_CACHE_INFO_INIT;
  seen s = {0};
  assert_int_equal(chmod(dir, 0777), 0);
  assert_status(sg_cache_get_info(dir, &info), SG_ERR_DENIED, "may be written by others (mode 777)");
  assert_status(sg_cache_list(dir, on_entry, &s), SG_ERR_DENIED, "may be written by others");
  assert_int_equal(s.n, 0);
  assert_status(sg_cache_clear(dir, NULL, &removed), SG_ERR_DENIED, "may be written by others");
  assert_int_equal(removed, 0);
  snprintf(p, sizeof p, "%s/%s", dir, ka);
  assert_true(exists(p));
  assert_int_equal(chmod(dir, 0700), 0);
  if (geteuid() != 0) {
    print_message("not root: the foreign-owner cases are skipped\n");
    return;
  }
  /* An entry of another user's is left alone; so is a cache of another user's. */
  assert_int_equal(chown(p, 12345, 12345), 0);
  assert_status(sg_cache_clear(dir, ka, &removed), SG_ERR_DENIED, "is owned by user 12345");
  assert_true(exists(p));
  assert_status(sg_cache_clear(dir, NULL, &removed), SG_ERR_DENIED, "is owned by user 12345");
  assert_int_equal(removed, 1); /* B */
  assert_true(exists(p));
  assert_int_equal(chown(dir, 12345, 12345), 0);
  assert_status(sg_cache_get_info(dir, &info), SG_ERR_DENIED, "is owned by user 12345");
  assert_status(sg_cache_clear(dir, NULL, &removed), SG_ERR_DENIED, "is owned by user 12345");
  assert_true(exists(p));
}

/* The Nth allocation fails, for every N until the call succeeds: each
 * failure is SG_ERR_NO_MEMORY with a message (never an entry reported
 * invalid for want of memory), and the callback never ran. */
static void test_alloc_fail(void **state) {
  (void)state;
  char dir[128], ka[33], kb[33];
  uint64_t bytes_a, bytes_b;
  snprintf(dir, sizeof dir, "%s/alloc", root);
  fill(dir, ka, kb, &bytes_a, &bytes_b);
  for (int call = 0; call < 3; call++) {
    long n;
    for (n = 0; n < 1000; n++) {
      seen s = {0};
      sg_cache_info info = SG_CACHE_INFO_INIT;
      sg_cache_entry e = SG_CACHE_ENTRY_INIT;
      sg_clear_error();
      sg__alloc_fail_after(n);
      sg_status st = call == 0   ? sg_cache_list(dir, on_entry, &s)
                     : call == 1 ? sg_cache_get_entry(dir, ka, &e)
                                 : sg_cache_get_info(dir, &info);
      sg__alloc_fail_after(-1);
      if (st == SG_OK) {
        if (call == 0) {
          assert_int_equal(s.n, 2);
          assert_true(s.e[0].valid && s.e[1].valid);
          assert_string_equal(s.e[1].device, "cpu");
        } else if (call == 1) {
          assert_int_equal(e.valid, 1);
          assert_string_equal(e.device, "cpu");
        } else {
          assert_int_equal(info.entries, 2);
        }
        break;
      }
      if (st != SG_ERR_NO_MEMORY) fail_msg("allocation %ld: %s: %s", n, sg_status_str(st), sg_last_error());
      assert_true(sg_last_error()[0] != '\0');
      assert_int_equal(s.n, 0);
    }
    assert_true(n >= 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_info_and_list),      cmocka_unit_test(test_clear),
      cmocka_unit_test(test_bad_arguments),      cmocka_unit_test(test_corrupt_entry),
      cmocka_unit_test(test_links_not_followed), cmocka_unit_test(test_permissions),
      cmocka_unit_test(test_alloc_fail),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
