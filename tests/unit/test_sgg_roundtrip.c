/* .sgg round trips (SPEC G4, G8): write -> read gives the same graph, field
 * by field and by content hash; files and buffers hold the same bytes; the
 * layout matches docs/format.md; the committed sample files still load and
 * hash like freshly built graphs. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/graph_internal.h"
#include "sample_graphs.h"
#include "sgg_edit.h"
#include "test_util.h"

typedef sg_status (*builder)(sg_graph **);
static const struct {
  const char *name;
  builder build;
} samples[] = {
    {"mlp", sample_build_mlp},
    {"cnn", sample_build_cnn},
    {"zoo", sample_build_zoo},
    {"tiny", sample_build_tiny},
};
enum { N_SAMPLES = sizeof samples / sizeof samples[0] };

static sg_graph *build(builder b) {
  sg_graph *g = NULL;
  sg_status st = b(&g);
  if (st != SG_OK) fprintf(stderr, "building a sample failed: %s\n", sg_last_error());
  assert_int_equal(st, SG_OK);
  return g;
}

/* Field-by-field equality through the public API; `loaded` must have every
 * initializer 64-byte aligned. */
static void assert_same_graph(const sg_graph *a, const sg_graph *loaded) {
  assert_int_equal(sg_graph_num_tensors(a), sg_graph_num_tensors(loaded));
  assert_int_equal(sg_graph_num_ops(a), sg_graph_num_ops(loaded));
  assert_int_equal(sg_graph_num_inputs(a), sg_graph_num_inputs(loaded));
  assert_int_equal(sg_graph_num_outputs(a), sg_graph_num_outputs(loaded));
  assert_true(sg_graph_is_finalized(loaded));
  for (int32_t t = 0; t < sg_graph_num_tensors(a); t++) {
    sg_tensor_info x, y;
    assert_status(sg_graph_tensor_info(a, (sg_tensor){t}, &x), SG_OK, NULL);
    assert_status(sg_graph_tensor_info(loaded, (sg_tensor){t}, &y), SG_OK, NULL);
    assert_string_equal(x.name, y.name);
    assert_int_equal(x.dtype, y.dtype);
    assert_int_equal(x.role, y.role);
    assert_int_equal(x.ndim, y.ndim);
    for (int d = 0; d < x.ndim; d++) assert_int_equal(x.dims[d], y.dims[d]);
    assert_int_equal(x.numel, y.numel);
    assert_int_equal(x.nbytes, y.nbytes);
    assert_int_equal(x.producer, y.producer);
    assert_int_equal(x.data == NULL, y.data == NULL);
    if (x.data) {
      assert_memory_equal(x.data, y.data, x.nbytes);
      assert_int_equal((uintptr_t)y.data % 64, 0);
    }
  }
  for (int32_t k = 0; k < sg_graph_num_ops(a); k++) {
    sg_op_info x, y;
    assert_status(sg_graph_op_info(a, k, &x), SG_OK, NULL);
    assert_status(sg_graph_op_info(loaded, k, &y), SG_OK, NULL);
    assert_int_equal(x.kind, y.kind);
    assert_string_equal(x.name, y.name);
    assert_int_equal(x.n_inputs, y.n_inputs);
    assert_int_equal(x.n_outputs, y.n_outputs);
    assert_int_equal(x.n_attrs, y.n_attrs);
    for (int i = 0; i < x.n_inputs; i++) assert_int_equal(x.inputs[i], y.inputs[i]);
    for (int i = 0; i < x.n_outputs; i++) assert_int_equal(x.outputs[i], y.outputs[i]);
    for (int i = 0; i < x.n_attrs; i++) {
      sg_attr p, q;
      assert_status(sg_graph_op_attr(a, k, i, &p), SG_OK, NULL);
      assert_status(sg_graph_op_attr(loaded, k, i, &q), SG_OK, NULL);
      assert_string_equal(p.name, q.name);
      assert_int_equal(p.type, q.type);
      assert_int_equal(p.i, q.i);
      assert_memory_equal(&p.f, &q.f, sizeof p.f); /* bit-exact, NaN included */
      assert_int_equal(p.count, q.count);
      for (int j = 0; j < p.count; j++) assert_int_equal(p.ints[j], q.ints[j]);
    }
  }
  for (int32_t i = 0; i < sg_graph_num_inputs(a); i++)
    assert_int_equal(sg_graph_input(a, i).id, sg_graph_input(loaded, i).id);
  for (int32_t i = 0; i < sg_graph_num_outputs(a); i++)
    assert_int_equal(sg_graph_output(a, i).id, sg_graph_output(loaded, i).id);
}

static void assert_same_hash(const sg_graph *a, const sg_graph *b) {
  uint64_t ha, hb;
  assert_status(sg_graph_hash(a, 0, &ha), SG_OK, NULL);
  assert_status(sg_graph_hash(b, 0, &hb), SG_OK, NULL);
  assert_int_equal(ha, hb);
  assert_status(sg_graph_hash(a, SG_HASH_WEIGHTS, &ha), SG_OK, NULL);
  assert_status(sg_graph_hash(b, SG_HASH_WEIGHTS, &hb), SG_OK, NULL);
  assert_int_equal(ha, hb);
}

static void test_memory_round_trip(void **state) {
  (void)state;
  for (int s = 0; s < N_SAMPLES; s++) {
    sg_graph *g = build(samples[s].build);
    void *buf;
    size_t size;
    assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_OK, NULL);
    sg_graph *h;
    assert_status(sg_graph_load_from_memory(buf, size, &h), SG_OK, NULL);
    assert_same_graph(g, h);
    assert_same_hash(g, h);
    /* The loaded graph owns its copy: the caller's buffer may go away. */
    memset(buf, 0xa5, size);
    sg_free(buf);
    assert_same_graph(g, h);
    sg_graph_destroy(h);
    sg_graph_destroy(g);
  }
}

/* A scratch directory per test run, removed at the end. */
static char tmpdir[256];
static int make_tmpdir(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/sgg_test_XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}
static int remove_tmpdir(void **state) {
  (void)state;
  DIR *d = opendir(tmpdir);
  if (d) {
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(tmpdir);
  return 0;
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void test_file_round_trip(void **state) {
  (void)state;
  char path[512];
  for (int s = 0; s < N_SAMPLES; s++) {
    snprintf(path, sizeof path, "%s/%s.sgg", tmpdir, samples[s].name);
    sg_graph *g = build(samples[s].build);
    assert_status(sg_graph_save(g, path), SG_OK, NULL);
    /* Saving over an existing file replaces it, leaving no temporary behind. */
    assert_status(sg_graph_save(g, path), SG_OK, NULL);
    assert_int_equal(count_files(tmpdir), s + 1);
    void *buf;
    size_t size, fsize;
    assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_OK, NULL);
    unsigned char *file = sg_test_read_file(path, &fsize);
    assert_int_equal(size, fsize);
    assert_memory_equal(buf, file, size);
    sg_graph *h;
    assert_status(sg_graph_load(path, &h), SG_OK, NULL);
    assert_same_graph(g, h);
    assert_same_hash(g, h);
    /* Builders refuse to touch a loaded (finalized) graph. */
    int64_t one[] = {1};
    assert_int_equal(sg_input(h, "another", SG_F32, 1, one).id, -1);
    assert_int_equal(sg_last_error()[0] != '\0', 1);
    free(file);
    sg_free(buf);
    sg_graph_destroy(h);
    sg_graph_destroy(g);
  }
}

/* The layout promised by docs/format.md, read back with the test's own
 * decoder rather than the library's. */
static void test_layout_matches_docs(void **state) {
  (void)state;
  sg_graph *g = build(sample_build_mlp);
  void *buf;
  size_t size;
  assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_OK, NULL);
  const uint8_t *f = buf;
  assert_memory_equal(f, "\x89SGG\r\n\x1a\n", 8);
  assert_int_equal(sgg_get16(f + 8), SG_SGG_VERSION_MAJOR);
  assert_int_equal(sgg_get16(f + 10), SG_SGG_VERSION_MINOR);
  assert_int_equal(sgg_get32(f + 12), 0);
  assert_int_equal(sgg_get32(f + 16), 6);
  assert_int_equal(sgg_get32(f + 20), 0);
  assert_int_equal(sgg_get64(f + 24), 64);
  assert_int_equal(sgg_get64(f + 32), size);
  assert_int_equal(sgg_get64(f + 40), 0);
  for (uint32_t type = 1; type <= 6; type++) {
    size_t len, off = sgg_edit_find(f, type, &len);
    assert_true(off >= 64 + 6 * 32);
    assert_int_equal(off % (type == SGG_EDIT_DATA ? 64 : 8), 0);
    assert_true(off + len <= size);
  }
  /* Tensor records in id order; each initializer 64-byte aligned in the file
   * and byte-identical to the graph's. */
  size_t data = sgg_edit_find(f, SGG_EDIT_DATA, NULL);
  size_t tensors = sgg_edit_find(f, SGG_EDIT_TENSORS, NULL);
  assert_int_equal(sgg_get32(f + tensors), (uint32_t)sg_graph_num_tensors(g));
  for (int32_t t = 0; t < sg_graph_num_tensors(g); t++) {
    sg_tensor_info info;
    assert_status(sg_graph_tensor_info(g, (sg_tensor){t}, &info), SG_OK, NULL);
    const uint8_t *r = f + sgg_edit_record(f, SGG_EDIT_TENSORS, (uint32_t)t);
    assert_int_equal(sgg_get16(r + 4), info.dtype);
    assert_int_equal(sgg_get16(r + 6), info.role);
    assert_int_equal(sgg_get32(r + 8), (uint32_t)info.ndim);
    assert_int_equal(sgg_get32(r + 12), info.data ? 1 : 0);
    for (int d = 0; d < 8; d++)
      assert_int_equal(sgg_get64(r + 16 + 8 * d), d < info.ndim ? (uint64_t)info.dims[d] : 0);
    if (info.data) {
      uint64_t off = sgg_get64(r + 80);
      assert_int_equal(sgg_get64(r + 88), info.nbytes);
      assert_int_equal((data + off) % 64, 0);
      assert_memory_equal(f + data + off, info.data, info.nbytes);
    }
  }
  sg_free(buf);
  sg_graph_destroy(g);
}

/* The committed samples are what the CLI tests and users' old files look
 * like: they must keep loading, and to the same graphs. */
static void test_committed_samples(void **state) {
  (void)state;
  static const struct {
    const char *file;
    builder build;
  } committed[] = {{"mlp.sgg", sample_build_mlp}, {"cnn.sgg", sample_build_cnn}};
  for (size_t i = 0; i < sizeof committed / sizeof committed[0]; i++) {
    sg_graph *fresh = build(committed[i].build), *loaded;
    sg_status st = sg_graph_load(sg_test_data(committed[i].file), &loaded);
    if (st != SG_OK)
      fprintf(stderr,
              "%s no longer loads (%s); if the format changed on purpose, regenerate it with "
              "`cmake --build build --target sgg_samples`\n",
              committed[i].file, sg_last_error());
    assert_int_equal(st, SG_OK);
    assert_same_hash(fresh, loaded);
    assert_same_graph(fresh, loaded);
    /* Writing is deterministic: the loaded graph saves to the fresh one's bytes. */
    void *a, *b;
    size_t na, nb;
    assert_status(sg_graph_save_to_memory(fresh, &a, &na), SG_OK, NULL);
    assert_status(sg_graph_save_to_memory(loaded, &b, &nb), SG_OK, NULL);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    sg_free(a);
    sg_free(b);
    sg_graph_destroy(loaded);
    sg_graph_destroy(fresh);
  }
}

static void test_api_errors(void **state) {
  (void)state;
  sg_graph *g, *out = (sg_graph *)&out;
  void *buf = (void *)&buf;
  size_t size = 1;
  assert_status(sg_graph_create(&g), SG_OK, NULL);
  int64_t dims[] = {4};
  sg_relu(g, sg_input(g, "x", SG_F32, 1, dims));
  assert_status(sg_graph_save_to_memory(g, &buf, &size), SG_ERR_STATE, "not finalized");
  assert_null(buf);
  assert_int_equal(size, 0);
  assert_status(sg_graph_save(g, "/tmp/never.sgg"), SG_ERR_STATE, "not finalized");
  assert_status(sg_graph_finalize(g), SG_OK, NULL);
  assert_status(sg_graph_save(g, "/nonexistent-dir/x.sgg"), SG_ERR_IO, "/nonexistent-dir/x.sgg");
  assert_status(sg_graph_save(g, NULL), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_save(NULL, "/tmp/x.sgg"), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_save_to_memory(g, NULL, &size), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_save_to_memory(NULL, &buf, &size), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_load("/nonexistent-dir/x.sgg", &out), SG_ERR_IO, "/nonexistent-dir/x.sgg");
  assert_null(out);
  assert_status(sg_graph_load("/tmp", &out), SG_ERR_IO, "not a regular file");
  assert_status(sg_graph_load(NULL, &out), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_load(sg_test_data("mlp.sgg"), NULL), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_load_from_memory(NULL, 10, &out), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_graph_load_from_memory(NULL, 0, &out), SG_ERR_TRUNCATED, NULL);
  assert_status(sg_graph_load_from_memory("", 0, NULL), SG_ERR_INVALID_ARG, NULL);
  sg_free(NULL);
  sg_graph_destroy(g);
}

static void test_empty_file(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/empty.sgg", tmpdir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fclose(f);
  sg_graph *g = (sg_graph *)&g;
  assert_status(sg_graph_load(path, &g), SG_ERR_TRUNCATED, "empty.sgg");
  assert_null(g);
  unlink(path);
}

/* docs/format.md is the normative description: keep its numbers in step with
 * the code's. */
static void test_format_md_matches_constants(void **state) {
  (void)state;
  char path[4096], row[128];
  snprintf(path, sizeof path, "%s/../../docs/format.md", SG_TEST_DATA_DIR);
  size_t n;
  char *doc = (char *)sg_test_read_file(path, &n);
  doc[n] = '\0';
#define MENTIONS(...)                                                         \
  do {                                                                        \
    snprintf(row, sizeof row, __VA_ARGS__);                                   \
    if (strstr(doc, row) == NULL) fail_msg("docs/format.md lacks '%s'", row); \
  } while (0)
  MENTIONS("`SG_SGG_VERSION_MAJOR` = %d", SG_SGG_VERSION_MAJOR);
  MENTIONS("`SG_SGG_VERSION_MINOR` = %d", SG_SGG_VERSION_MINOR);
  static const char *const sections[] = {"STRINGS", "TENSORS", "OPS", "ATTRS", "GRAPH_IO", "DATA"};
  for (int i = 0; i < 6; i++) MENTIONS("| %d | `%s` |", i + 1, sections[i]);
  for (int d = SG_F32; d <= SG_BOOL; d++) MENTIONS("%d %s", d, sg_dtype_name((sg_dtype)d));
  for (int r = SG_ROLE_INPUT; r <= SG_ROLE_STATE; r++) MENTIONS("%d %s", r, sg_role_name((sg_role)r));
  MENTIONS("1 `%s` … %d `%s`", sg_op_kind_name((sg_op_kind)1), SG__OP_KIND_LAST,
           sg_op_kind_name(SG__OP_KIND_LAST));
  assert_int_equal(sg_op_kind_name((sg_op_kind)(SG__OP_KIND_LAST + 1))[0], '?');
  MENTIONS("1 INT, 2 FLOAT, 3 INTS");
  assert_int_equal(SG_ATTR_INT, 1);
  assert_int_equal(SG_ATTR_INTS, 3);
  /* The limits table. */
  assert_int_equal(SG__MAX_TENSORS, 1u << 24);
  assert_int_equal(SG__MAX_OPS, 1u << 24);
  MENTIONS("| tensors | 2^24 |");
  MENTIONS("| ops | 2^24 |");
  MENTIONS("| inputs or outputs of one op | %d |", SG__MAX_OP_IO);
  MENTIONS("| values of one INTS attribute | %d |", SG__MAX_ATTR_INTS);
  MENTIONS("| name length | %d bytes |", SG__MAX_NAME - 1);
  MENTIONS("| rank | %d |", SG_MAX_DIMS);
  assert_int_equal(SG__MAX_NUMEL, (int64_t)1 << 56);
#undef MENTIONS
  free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory_round_trip),
      cmocka_unit_test(test_file_round_trip),
      cmocka_unit_test(test_layout_matches_docs),
      cmocka_unit_test(test_committed_samples),
      cmocka_unit_test(test_api_errors),
      cmocka_unit_test(test_empty_file),
      cmocka_unit_test(test_format_md_matches_constants),
  };
  return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
