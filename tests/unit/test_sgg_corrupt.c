/* Damaged and hostile .sgg files (SPEC G4, S1): every truncation and every
 * sampled byte flip is an error, never a crash; crafted files (checksums
 * fixed up so that the reader gets past them) get the most specific status
 * and a message that says where. Runs under ASan/UBSan/LSan in CI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sample_graphs.h"
#include "sgg_edit.h"
#include "test_util.h"

/* A writable copy of a file image. */
typedef struct image {
  uint8_t *f;
  size_t n;
} image;

static image committed(const char *name) {
  image im;
  im.f = sg_test_read_file(sg_test_data(name), &im.n);
  return im;
}

static image saved(sg_status (*build)(sg_graph **), sg_graph **graph) {
  sg_graph *g;
  assert_int_equal(build(&g), SG_OK);
  void *buf;
  size_t n;
  assert_int_equal(sg_graph_save_to_memory(g, &buf, &n), SG_OK);
  image im = {malloc(n), n};
  assert_non_null(im.f);
  memcpy(im.f, buf, n);
  sg_free(buf);
  if (graph) *graph = g;
  else sg_graph_destroy(g);
  return im;
}

/* Loads, destroys the graph on success, and returns the status. */
static sg_status load(const uint8_t *f, size_t n) {
  sg_graph *g = (sg_graph *)&g;
  sg_status st = sg_graph_load_from_memory(f, n, &g);
  if (st == SG_OK) {
    assert_non_null(g);
    sg_graph_destroy(g);
  } else {
    assert_null(g);
  }
  return st;
}

static sg_status load_fixed(image im) {
  sgg_edit_fix(im.f, im.n);
  return load(im.f, im.n);
}

/* Index of the first op of `kind` in g. */
static int32_t find_op(const sg_graph *g, sg_op_kind kind) {
  for (int32_t k = 0; k < sg_graph_num_ops(g); k++) {
    sg_op_info info;
    assert_int_equal(sg_graph_op_info(g, k, &info), SG_OK);
    if (info.kind == kind) return k;
  }
  fail_msg("no op of kind %d", (int)kind);
  return -1;
}

static int32_t tensor_id(const sg_graph *g, const char *name) {
  sg_tensor t;
  assert_int_equal(sg_graph_find_tensor(g, name, &t), SG_OK);
  return t.id;
}

/* Entry of the section table that describes `type`. */
static uint8_t *table_entry(image im, uint32_t type) {
  uint32_t n = sgg_get32(im.f + 16);
  uint8_t *t = im.f + sgg_get64(im.f + 24);
  for (uint32_t i = 0; i < n; i++)
    if (sgg_get32(t + 32 * i) == type) return t + 32 * i;
  fail_msg("no section of type %u", type);
  return NULL;
}

/* ---- damage without fix-ups ------------------------------------------- */

static void truncate_everywhere(const char *name) {
  image im = committed(name);
  for (size_t n = 0; n < im.n; n++) {
    sg_status st = load(im.f, n);
    if (st != SG_ERR_TRUNCATED)
      fail_msg("%s cut to %zu bytes: %s (%s)", name, n, sg_status_str(st), sg_last_error());
  }
  assert_status(load(im.f, im.n), SG_OK, NULL);
  /* And through the mmap path, at a sample of offsets. */
  char path[256];
  snprintf(path, sizeof path, "/tmp/sgg_trunc_%ld.sgg", (long)getpid());
  for (size_t n = 0; n < im.n; n += 97) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(im.f, 1, n, f), n);
    fclose(f);
    sg_graph *g = (sg_graph *)&g;
    assert_status(sg_graph_load(path, &g), SG_ERR_TRUNCATED, path);
    assert_null(g);
  }
  unlink(path);
  free(im.f);
}

static void test_truncated_everywhere(void **state) {
  (void)state;
  truncate_everywhere("mlp.sgg");
  truncate_everywhere("cnn.sgg");
}

/* Every byte is covered by a checksum or checked to be zero padding, so a
 * flipped byte anywhere must be reported. */
static void test_byte_flips(void **state) {
  (void)state;
  static const uint8_t masks[] = {0x01, 0x80, 0xff};
  image im = committed("mlp.sgg");
  size_t positions = im.n < 1500 ? im.n : 1500;
  int by_status[32] = {0};
  for (size_t i = 0; i < positions; i++) {
    size_t pos = i * im.n / positions;
    for (size_t m = 0; m < sizeof masks; m++) {
      im.f[pos] ^= masks[m];
      sg_status st = load(im.f, im.n);
      if (st == SG_OK) fail_msg("flipping byte %zu with 0x%02x went unnoticed", pos, masks[m]);
      assert_true(sg_last_error()[0] != '\0');
      by_status[-st & 31]++;
      im.f[pos] ^= masks[m];
    }
  }
  assert_status(load(im.f, im.n), SG_OK, NULL);
  printf("byte flips: %zu positions x %zu masks; CHECKSUM %d, VERSION %d, FORMAT %d, other %d\n", positions,
         sizeof masks, by_status[-SG_ERR_CHECKSUM], by_status[-SG_ERR_VERSION], by_status[-SG_ERR_FORMAT],
         (int)(positions * sizeof masks) - by_status[-SG_ERR_CHECKSUM] - by_status[-SG_ERR_VERSION] -
             by_status[-SG_ERR_FORMAT]);
  free(im.f);
}

/* The same flips with the checksums recomputed reach the section decoders
 * and the verifier: any status is acceptable (a flipped weight is still a
 * valid file), a crash, sanitizer report or leak is not. */
static void test_byte_flips_behind_checksums(void **state) {
  (void)state;
  image orig = committed("mlp.sgg");
  image im = {malloc(orig.n), orig.n};
  assert_non_null(im.f);
  int ok = 0, failed = 0;
  for (size_t pos = 0; pos < orig.n; pos += (pos < 4096 ? 1 : 7)) {
    for (int m = 0; m < 2; m++) {
      memcpy(im.f, orig.f, orig.n);
      im.f[pos] ^= m ? 0xff : 0x01;
      sg_status st = load_fixed(im);
      if (st == SG_OK) ok++;
      else failed++;
    }
  }
  printf("flips behind fixed checksums: %d loaded, %d rejected\n", ok, failed);
  assert_true(failed > 0);
  free(im.f);
  free(orig.f);
}

static void test_checksum_mismatch(void **state) {
  (void)state;
  image im = committed("mlp.sgg");
  im.f[sgg_edit_record(im.f, SGG_EDIT_TENSORS, 2) + 20] ^= 4;
  assert_status(load(im.f, im.n), SG_ERR_CHECKSUM, "tensors section");
  free(im.f);
}

/* ---- header ------------------------------------------------------------ */

static void test_magic(void **state) {
  (void)state;
  image im = committed("mlp.sgg");
  im.f[1] = 'X';
  assert_status(load(im.f, im.n), SG_ERR_FORMAT, "magic");
  assert_status(load((const uint8_t *)"hello", 5), SG_ERR_FORMAT, "magic");
  free(im.f);
  /* A text-mode copy turns CR LF into LF. */
  im = committed("mlp.sgg");
  memmove(im.f + 4, im.f + 5, im.n - 5);
  assert_status(load(im.f, im.n - 1), SG_ERR_FORMAT, "text mode");
  free(im.f);
}

static void test_versions(void **state) {
  (void)state;
  image im = committed("mlp.sgg");
  sgg_put16(im.f + 8, SG_SGG_VERSION_MAJOR + 1);
  assert_status(load_fixed(im), SG_ERR_VERSION, "newer sgrt");
  sgg_put16(im.f + 8, 0);
  assert_status(load_fixed(im), SG_ERR_VERSION, "version 0.");
  /* A higher minor version only adds what old readers may skip. */
  sgg_put16(im.f + 8, SG_SGG_VERSION_MAJOR);
  sgg_put16(im.f + 10, SG_SGG_VERSION_MINOR + 7);
  assert_status(load_fixed(im), SG_OK, NULL);
  free(im.f);
}

static void test_header_fields(void **state) {
  (void)state;
  image im = committed("mlp.sgg");
  sgg_put32(im.f + 12, 4);
  assert_status(load_fixed(im), SG_ERR_UNSUPPORTED, "feature flags 0x4");
  sgg_put32(im.f + 12, 0);
  sgg_put32(im.f + 20, 1);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "reserved");
  sgg_put32(im.f + 20, 0);
  sgg_put32(im.f + 16, 5000);
  assert_status(load_fixed(im), SG_ERR_RANGE, "section count 5000");
  sgg_put32(im.f + 16, 6);
  sgg_put64(im.f + 24, 12);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "section table offset");
  sgg_put64(im.f + 24, 64);
  sgg_edit_fix(im.f, im.n);
  im.f[60] ^= 1;
  assert_status(load(im.f, im.n), SG_ERR_CHECKSUM, "header checksum mismatch");
  im.f[60] ^= 1;
  im.f[50] ^= 1; /* the table's checksum, with the header's fixed up */
  sgg_edit_fix_header(im.f);
  assert_status(load(im.f, im.n), SG_ERR_CHECKSUM, "section table (file offset 0x40) checksum mismatch");
  free(im.f);

  /* One byte more than the header declares. */
  im = committed("mlp.sgg");
  uint8_t *longer = calloc(1, im.n + 1);
  assert_non_null(longer);
  memcpy(longer, im.f, im.n);
  assert_status(load(longer, im.n + 1), SG_ERR_FORMAT, "trailing");
  free(longer);
  free(im.f);
}

/* ---- section table ----------------------------------------------------- */

static void test_section_table(void **state) {
  (void)state;
  image im = committed("mlp.sgg");
  uint8_t *e = table_entry(im, SGG_EDIT_TENSORS);
  uint8_t saved_entry[32];
  memcpy(saved_entry, e, 32);

  sgg_put64(e + 16, (uint64_t)1 << 63);
  assert_status(load_fixed(im), SG_ERR_RANGE, "extends past the end of the file");
  memcpy(e, saved_entry, 32);
  sgg_put64(e + 8, ~(uint64_t)0 - 7);
  assert_status(load_fixed(im), SG_ERR_RANGE, "extends past the end of the file");
  memcpy(e, saved_entry, 32);
  sgg_put64(e + 8, sgg_get64(e + 8) + 4);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "not a multiple of 8");
  memcpy(e, saved_entry, 32);
  sgg_put64(e + 8, sgg_get64(table_entry(im, SGG_EDIT_STRINGS) + 8));
  assert_status(load_fixed(im), SG_ERR_FORMAT, "overlaps");
  memcpy(e, saved_entry, 32);
  sgg_put64(e + 8, 32);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "overlaps the header");
  memcpy(e, saved_entry, 32);
  sgg_put32(e + 4, 3);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "unknown flags 0x3");
  memcpy(e, saved_entry, 32);

  e = table_entry(im, SGG_EDIT_GRAPH_IO);
  sgg_put32(e, SGG_EDIT_STRINGS);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "second strings section");
  sgg_put32(e, 77);
  sgg_put32(e + 4, 0);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "no graph_io section");
  sgg_put32(e + 4, 1);
  assert_status(load_fixed(im), SG_ERR_UNSUPPORTED, "section type 77");
  free(im.f);
}

static void test_extra_sections(void **state) {
  (void)state;
  sg_graph *fresh;
  image im = saved(sample_build_mlp, &fresh);
  static const char payload[] = "written by a newer minor version";
  size_t n;
  /* An optional section that this reader does not know is skipped... */
  uint8_t *opt = sgg_edit_add_section(im.f, im.n, 4242, 0, payload, sizeof payload, &n);
  assert_non_null(opt);
  sg_graph *g;
  assert_status(sg_graph_load_from_memory(opt, n, &g), SG_OK, NULL);
  uint64_t h1, h2;
  assert_int_equal(sg_graph_hash(fresh, SG_HASH_WEIGHTS, &h1), SG_OK);
  assert_int_equal(sg_graph_hash(g, SG_HASH_WEIGHTS, &h2), SG_OK);
  assert_int_equal(h1, h2);
  sg_graph_destroy(g);
  /* ...but still checksummed, */
  opt[n - 3] ^= 1;
  assert_status(load(opt, n), SG_ERR_CHECKSUM, "checksum mismatch");
  opt[n - 3] ^= 1;
  /* and the bytes it left behind (the old table) must stay zero. */
  opt[64 + 5] = 1;
  assert_status(load(opt, n), SG_ERR_FORMAT, "nonzero padding byte at file offset 0x45");
  free(opt);
  /* A required one is refused. */
  uint8_t *req = sgg_edit_add_section(im.f, im.n, 4242, 1, payload, sizeof payload, &n);
  assert_non_null(req);
  assert_status(load(req, n), SG_ERR_UNSUPPORTED, "section type 4242 is unknown and marked required");
  free(req);
  free(im.f);
  sg_graph_destroy(fresh);
}

/* ---- section contents -------------------------------------------------- */

static void test_strings(void **state) {
  (void)state;
  image im = committed("mlp.sgg");
  size_t len, s = sgg_edit_find(im.f, SGG_EDIT_STRINGS, &len);
  uint32_t count = sgg_get32(im.f + s);
  uint32_t saved_off = sgg_get32(im.f + s + 8 + 4 * 3);
  sgg_put32(im.f + s + 8 + 4 * 3, 0x7fffffff);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "strings section, string 3 (file offset 0x");
  sgg_put32(im.f + s + 8 + 4 * 3, saved_off);
  sgg_put32(im.f + s, 0x40000000);
  assert_status(load_fixed(im), SG_ERR_RANGE, "string offsets do not fit");
  sgg_put32(im.f + s, count);
  im.f[s + len - 1] = 'z'; /* the last string loses its NUL */
  assert_status(load_fixed(im), SG_ERR_FORMAT, "not NUL-terminated");
  im.f[s + len - 1] = 0;
  im.f[s + 8 + 4 * count] = 0; /* the first string becomes empty */
  assert_status(load_fixed(im), SG_ERR_FORMAT, "empty name");
  free(im.f);
}

static void test_tensor_records(void **state) {
  (void)state;
  sg_graph *g;
  image orig = saved(sample_build_mlp, &g);
  image im = {malloc(orig.n), orig.n};
  assert_non_null(im.f);
  uint32_t x = (uint32_t)tensor_id(g, "x"), w = (uint32_t)tensor_id(g, "fc1.weight");
  size_t rx = sgg_edit_record(orig.f, SGG_EDIT_TENSORS, x), rw = sgg_edit_record(orig.f, SGG_EDIT_TENSORS, w);
#define RESET() memcpy(im.f, orig.f, orig.n)
  RESET();
  sgg_put32(im.f + sgg_get64(table_entry(im, SGG_EDIT_TENSORS) + 8), 1u << 31);
  assert_status(load_fixed(im), SG_ERR_RANGE, "tensor count 2147483648 exceeds");
  RESET();
  sgg_put32(im.f + sgg_get64(table_entry(im, SGG_EDIT_TENSORS) + 8),
            sgg_get32(orig.f + sgg_edit_find(orig.f, 2, NULL)) + 1);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "the section has");
  RESET();
  sgg_put64(im.f + rx + 16, (uint64_t)1 << 32);
  sgg_put64(im.f + rx + 24, (uint64_t)1 << 31); /* 2^63 elements */
  assert_status(load_fixed(im), SG_ERR_RANGE, "element count exceeds 2^56");
  RESET();
  sgg_put64(im.f + rx + 24, (uint64_t)-5);
  char msg[128];
  snprintf(msg, sizeof msg, "tensors section, record %u (file offset 0x%zx): tensor 'x': dim 1 is -5", x, rx);
  assert_status(load_fixed(im), SG_ERR_RANGE, msg);
  RESET();
  sgg_put32(im.f + rx + 8, 9);
  assert_status(load_fixed(im), SG_ERR_RANGE, "ndim 9 exceeds 8");
  RESET();
  sgg_put64(im.f + rx + 40, 3); /* a dim past ndim */
  assert_status(load_fixed(im), SG_ERR_FORMAT, "unused dim 3 is 3");
  RESET();
  sgg_put16(im.f + rx + 4, 99);
  assert_status(load_fixed(im), SG_ERR_UNSUPPORTED, "unknown dtype 99");
  RESET();
  sgg_put16(im.f + rx + 6, 42);
  assert_status(load_fixed(im), SG_ERR_UNSUPPORTED, "unknown role 42");
  RESET();
  sgg_put32(im.f + rx + 12, 2);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "unknown flags 0x2");
  RESET();
  sgg_put16(im.f + rx + 6, SG_ROLE_CONSTANT);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "constant 'x' has no data");
  RESET();
  sgg_put32(im.f + rx, 1000000);
  assert_status(load_fixed(im), SG_ERR_RANGE, "name string id 1000000 is out of range");
  RESET();
  sgg_put32(im.f + rw, sgg_get32(orig.f + rx)); /* fc1.weight renamed to x */
  assert_status(load_fixed(im), SG_ERR_DUPLICATE, "tensor name 'x' is already used");
  RESET();
  sgg_put64(im.f + rw + 88, sgg_get64(orig.f + rw + 88) + 4);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "does not match its shape");
  RESET();
  sgg_put64(im.f + rw + 80, sgg_get64(orig.f + rw + 80) + 64);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "data offset");
  RESET();
  sgg_put32(im.f + rw + 12, 0); /* weight without data but with an offset */
  assert_status(load_fixed(im), SG_ERR_FORMAT, "no data but a data offset");
  RESET();
  sgg_put32(im.f + rx + 12, 1); /* an input with data */
  assert_status(load_fixed(im), SG_ERR_FORMAT, "role input cannot have data");
  RESET();
  /* A shape that the ops no longer agree with: found by the verifier. */
  sgg_put64(im.f + rx + 24, 65);
  assert_status(load_fixed(im), SG_ERR_SHAPE, NULL);
#undef RESET
  free(im.f);
  free(orig.f);
  sg_graph_destroy(g);
}

static void test_op_records(void **state) {
  (void)state;
  sg_graph *g;
  image orig = saved(sample_build_mlp, &g);
  image im = {malloc(orig.n), orig.n};
  assert_non_null(im.f);
  int32_t k_relu = find_op(g, SG_OP_RELU);
  sg_op_info relu;
  assert_int_equal(sg_graph_op_info(g, k_relu, &relu), SG_OK);
  size_t r = sgg_edit_record(orig.f, SGG_EDIT_OPS, (uint32_t)k_relu);
  size_t in0 = sgg_edit_io(orig.f, sgg_get32(orig.f + r + 8));
  size_t out0 = sgg_edit_io(orig.f, sgg_get32(orig.f + r + 16));
  char msg[256];
#define RESET() memcpy(im.f, orig.f, orig.n)
  RESET();
  sgg_put32(im.f + r, 99);
  snprintf(msg, sizeof msg, "op '%s' has unknown op kind 99", relu.name);
  assert_status(load_fixed(im), SG_ERR_UNSUPPORTED, msg);
  RESET();
  sgg_put32(im.f + in0, 5000);
  assert_status(load_fixed(im), SG_ERR_RANGE, "input 0 is tensor id 5000, out of range");
  RESET();
  sgg_put32(im.f + out0, 0xfffffffe);
  assert_status(load_fixed(im), SG_ERR_RANGE, "output 0 is tensor id 4294967294");
  RESET();
  sgg_put32(im.f + in0, 0xffffffff);
  assert_status(load_fixed(im), SG_ERR_ARITY, "input 0 is absent but not optional");
  RESET();
  sgg_put32(im.f + out0, (uint32_t)tensor_id(g, "logits")); /* logits would have two producers */
  assert_status(load_fixed(im), SG_ERR_DUPLICATE, "also produced by op");
  RESET();
  sgg_put32(im.f + r + 12, 5000);
  assert_status(load_fixed(im), SG_ERR_RANGE, "5000 inputs");
  RESET();
  sgg_put32(im.f + r + 8, sgg_get32(orig.f + r + 8) + 1);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "stored back to back");
  RESET();
  sgg_put32(im.f + r + 28, 3);
  assert_status(load_fixed(im), SG_ERR_ATTRIBUTE, "has 3 attributes; relu has 0");
  RESET();
  sgg_put32(im.f + sgg_edit_find(im.f, SGG_EDIT_OPS, NULL), 1u << 30);
  assert_status(load_fixed(im), SG_ERR_RANGE, "op count 1073741824 exceeds");
  RESET();
  /* Both ops renamed alike. */
  sgg_put32(im.f + sgg_edit_record(im.f, SGG_EDIT_OPS, 0) + 4, sgg_get32(orig.f + r + 4));
  snprintf(msg, sizeof msg, "op name '%s' is already used", relu.name);
  assert_status(load_fixed(im), k_relu == 0 ? SG_OK : SG_ERR_DUPLICATE, msg);
  RESET();
  /* The relu's output listed twice as a graph output. */
  size_t io = sgg_edit_find(im.f, SGG_EDIT_GRAPH_IO, NULL);
  sgg_put32(im.f + io + 12, sgg_get32(im.f + io + 8));
  assert_status(load_fixed(im), SG_ERR_DUPLICATE, "is listed twice");
  RESET();
  sgg_put32(im.f + io + 8, 77777);
  assert_status(load_fixed(im), SG_ERR_RANGE, "graph_io section, output 0");
#undef RESET
  free(im.f);
  free(orig.f);
  sg_graph_destroy(g);
}

static void test_attr_records(void **state) {
  (void)state;
  sg_graph *g;
  image orig = saved(sample_build_cnn, &g);
  image im = {malloc(orig.n), orig.n};
  assert_non_null(im.f);
  /* The first conv's attributes: stride, padding, dilation (INTS), groups. */
  int32_t k = find_op(g, SG_OP_CONV2D);
  size_t r = sgg_edit_record(orig.f, SGG_EDIT_OPS, (uint32_t)k);
  uint32_t first = sgg_get32(orig.f + r + 24);
  size_t a0 = sgg_edit_record(orig.f, SGG_EDIT_ATTRS, first);
  sg_attr attr0;
  assert_int_equal(sg_graph_op_attr(g, k, 0, &attr0), SG_OK);
  assert_int_equal(attr0.type, SG_ATTR_INTS);
#define RESET() memcpy(im.f, orig.f, orig.n)
  RESET();
  sgg_put32(im.f + a0 + 4, 9);
  assert_status(load_fixed(im), SG_ERR_UNSUPPORTED, "unknown type 9");
  RESET();
  sgg_put32(im.f + a0 + 4, SG_ATTR_INT);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "is a scalar but has a count");
  RESET();
  sgg_put32(im.f + a0, sgg_get32(orig.f + sgg_edit_record(orig.f, SGG_EDIT_TENSORS, 0)));
  assert_status(load_fixed(im), SG_ERR_ATTRIBUTE, "unknown attribute 'images'");
  RESET();
  sgg_put32(im.f + a0 + 8, 5000);
  assert_status(load_fixed(im), SG_ERR_RANGE, "has 5000 values");
  RESET();
  sgg_put32(im.f + a0 + 8, 3); /* stride with 3 values; the next list shifts */
  assert_status(load_fixed(im), SG_ERR_FORMAT, "lists are stored back to back");
  RESET();
  /* A conv with 0 attributes takes the defaults, and the unused records
   * left over are reported. */
  sgg_put32(im.f + r + 28, 0);
  assert_status(load_fixed(im), SG_ERR_FORMAT, "stored back to back");
  RESET();
  /* Stride 0 passes the format and the schema; the verifier rejects it. */
  sgg_put64(im.f + sgg_edit_find(im.f, SGG_EDIT_ATTRS, NULL) + 8 +
                24 * (size_t)sgg_get32(im.f + sgg_edit_find(im.f, SGG_EDIT_ATTRS, NULL)) +
                8 * (size_t)sgg_get32(im.f + a0 + 12),
            0);
  sg_status st = load_fixed(im);
  assert_true(st != SG_OK);
#undef RESET
  free(im.f);
  free(orig.f);
  sg_graph_destroy(g);
}

/* Two ops that consume each other's outputs: well-formed records, ids in
 * range, one producer per tensor, and still not a DAG. */
static void test_cycle(void **state) {
  (void)state;
  sg_graph *g;
  image im = saved(sample_build_zoo, &g);
  /* relu -> clip -> gelu -> sigmoid -> tanh all keep the shape; feed tanh's
   * output back into relu. */
  int32_t k_relu = find_op(g, SG_OP_RELU), k_tanh = find_op(g, SG_OP_TANH);
  sg_op_info tanh_op;
  assert_int_equal(sg_graph_op_info(g, k_tanh, &tanh_op), SG_OK);
  size_t r = sgg_edit_record(im.f, SGG_EDIT_OPS, (uint32_t)k_relu);
  sgg_put32(im.f + sgg_edit_io(im.f, sgg_get32(im.f + r + 8)), (uint32_t)tanh_op.outputs[0]);
  assert_status(load_fixed(im), SG_ERR_CYCLE, NULL);
  free(im.f);
  sg_graph_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_truncated_everywhere),
      cmocka_unit_test(test_byte_flips),
      cmocka_unit_test(test_byte_flips_behind_checksums),
      cmocka_unit_test(test_checksum_mismatch),
      cmocka_unit_test(test_magic),
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_header_fields),
      cmocka_unit_test(test_section_table),
      cmocka_unit_test(test_extra_sections),
      cmocka_unit_test(test_strings),
      cmocka_unit_test(test_tensor_records),
      cmocka_unit_test(test_op_records),
      cmocka_unit_test(test_attr_records),
      cmocka_unit_test(test_cycle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
