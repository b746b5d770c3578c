/* Device tables (SPEC P3): presets with the seed's figures, the JSON format,
 * and bad tables -- negative memory, no devices, an unknown kind, malformed
 * JSON and more -- rejected with an error that names the field. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

static void test_presets(void **state) {
  (void)state;
  sg_device_table *t;
  sg_device_info d;
  /* The seed's table (sec. 2.2): A100 624 TFLOP/s, 2 TB/s, 1.2 us;
   * Ascend 910B 512 TFLOP/s, 1.2 TB/s, 8.7 us over 40 GB/s PCIe 4.0. */
  assert_int_equal(sg_device_table_preset("a100", 8, &t), SG_OK);
  assert_int_equal(sg_device_table_count(t), 8);
  assert_int_equal(sg_device_table_get(t, 7, &d), SG_OK);
  assert_string_equal(d.name, "a100-7");
  assert_int_equal(d.kind, SG_DEVICE_GPU);
  assert_float_equal(d.peak_flops, 624e12, 0.0);
  assert_float_equal(d.memory_bandwidth, 2e12, 0.0);
  assert_float_equal(d.link_latency, 1.2e-6, 1e-18);
  assert_float_equal(d.memory_bytes, 80e9, 0.0);
  assert_status(sg_device_table_get(t, 8, &d), SG_ERR_RANGE, "device 8");
  sg_device_table_destroy(t);
  assert_int_equal(sg_device_table_preset("ascend910b", 1, &t), SG_OK);
  assert_int_equal(sg_device_table_get(t, 0, &d), SG_OK);
  assert_int_equal(d.kind, SG_DEVICE_NPU);
  assert_float_equal(d.peak_flops, 512e12, 0.0);
  assert_float_equal(d.memory_bandwidth, 1.2e12, 0.0);
  assert_float_equal(d.link_bandwidth, 40e9, 0.0);
  assert_float_equal(d.link_latency, 8.7e-6, 1e-18);
  sg_device_table_destroy(t);
  /* This machine: its cores and memory. */
  assert_int_equal(sg_device_table_preset("host", 2, &t), SG_OK);
  assert_int_equal(sg_device_table_get(t, 1, &d), SG_OK);
  assert_int_equal(d.kind, SG_DEVICE_CPU);
  assert_float_equal(d.peak_flops, 125e9 * (double)sysconf(_SC_NPROCESSORS_ONLN), 1.0);
  assert_float_equal(d.memory_bytes, (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE), 1.0);
  sg_device_table_destroy(t);
  assert_int_equal(sg_device_table_preset("cpu", 1, &t), SG_OK);
  sg_device_table_destroy(t);
  assert_status(sg_device_table_preset("tpu", 1, &t), SG_ERR_NOT_FOUND, "a100, ascend910b, cpu, host");
  assert_status(sg_device_table_preset("a100", 0, &t), SG_ERR_INVALID_ARG, "count");
  assert_null(t);
  assert_string_equal(sg_device_kind_name(SG_DEVICE_NPU), "npu");
  assert_string_equal(sg_device_kind_name((sg_device_kind)99), "?");
  sg_device_table_destroy(NULL);
  assert_int_equal(sg_device_table_count(NULL), 0);
}

static void test_json(void **state) {
  (void)state;
  const char *json =
      "{\"comment\": \"two kinds\", \"devices\": ["
      " {\"name\": \"gpu\", \"kind\": \"gpu\", \"peak_flops\": 312e12, \"memory_bytes\": 80e9,"
      "  \"memory_bandwidth\": 2e12, \"link_bandwidth\": 300e9, \"link_latency_us\": 1.5, \"count\": 2},"
      " {\"preset\": \"ascend910b\", \"memory_bytes\": 32e9},"
      " {\"preset\": \"cpu\", \"kind\": \"cpu\"}]}";
  sg_device_table *t;
  assert_status(sg_device_table_parse(json, &t), SG_OK, NULL);
  assert_int_equal(sg_device_table_count(t), 4);
  sg_device_info d;
  const char *names[] = {"gpu-0", "gpu-1", "npu2", "cpu3"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(sg_device_table_get(t, i, &d), SG_OK);
    assert_string_equal(d.name, names[i]);
  }
  assert_int_equal(sg_device_table_get(t, 1, &d), SG_OK);
  assert_float_equal(d.link_latency, 1.5e-6, 1e-18);
  assert_float_equal(d.peak_flops, 312e12, 0.0);
  /* A preset's fields, overridden where the entry says so. */
  assert_int_equal(sg_device_table_get(t, 2, &d), SG_OK);
  assert_float_equal(d.memory_bytes, 32e9, 0.0);
  assert_float_equal(d.peak_flops, 512e12, 0.0);
  sg_device_table_destroy(t);
  /* A bare array is a table too. */
  assert_status(sg_device_table_parse("[{\"preset\": \"a100\"}]", &t), SG_OK, NULL);
  assert_int_equal(sg_device_table_count(t), 1);
  sg_device_table_destroy(t);
}

/* Each bad table fails with SG_ERR_FORMAT (or NOT_FOUND for an unknown
 * preset) and a message naming the field. */
static void test_bad_tables(void **state) {
  (void)state;
  static const struct {
    const char *json;
    sg_status st;
    const char *needle;
  } cases[] = {
      {"{\"devices\": [{\"kind\": \"gpu\", \"peak_flops\": 1e12, \"memory_bytes\": -1, \"memory_bandwidth\": "
       "1e11,"
       " \"link_bandwidth\": 1e10, \"link_latency_us\": 1}]}",
       SG_ERR_FORMAT, "devices[0].memory_bytes: must be > 0, got -1"},
      {"{\"devices\": []}", SG_ERR_FORMAT, "devices: is empty (no devices)"},
      {"{}", SG_ERR_FORMAT, "devices: missing"},
      {"[]", SG_ERR_FORMAT, "devices: is empty"},
      {"{\"devices\": [{\"preset\": \"a100\"}, {\"preset\": \"a100\", \"kind\": \"tpu\"}]}", SG_ERR_FORMAT,
       "devices[1].kind: unknown kind 'tpu'"},
      {"{\"devices\": [{\"preset\": \"a100\"}", SG_ERR_FORMAT, "malformed JSON"},
      {"not json", SG_ERR_FORMAT, "malformed JSON at byte"},
      {"{\"devices\": [{\"preset\": \"a100\"}]} trailing", SG_ERR_FORMAT, "malformed JSON"},
      {"{\"devices\": {\"preset\": \"a100\"}}", SG_ERR_FORMAT, "devices: must be an array"},
      {"{\"devices\": [3]}", SG_ERR_FORMAT, "devices[0]: must be an object"},
      {"{\"devices\": [{\"preset\": \"tpu9\"}]}", SG_ERR_NOT_FOUND,
       "devices[0].preset: unknown preset 'tpu9'"},
      {"{\"devices\": [{\"preset\": \"a100\", \"memory\": 5}]}", SG_ERR_FORMAT,
       "devices[0].memory: unknown field"},
      {"{\"device\": []}", SG_ERR_FORMAT, "device: unknown field"},
      {"{\"devices\": [{\"kind\": \"cpu\"}]}", SG_ERR_FORMAT, "devices[0].peak_flops: missing"},
      {"{\"devices\": [{\"peak_flops\": 1}]}", SG_ERR_FORMAT, "devices[0].kind: missing"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"peak_flops\": \"fast\"}]}", SG_ERR_FORMAT,
       "devices[0].peak_flops: must be a finite number"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"peak_flops\": 0}]}", SG_ERR_FORMAT,
       "devices[0].peak_flops: must be > 0"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"link_latency_us\": -2}]}", SG_ERR_FORMAT,
       "devices[0].link_latency_us: must be >= 0"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"memory_bandwidth\": -5}]}", SG_ERR_FORMAT,
       "devices[0].memory_bandwidth"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"count\": 0}]}", SG_ERR_FORMAT, "devices[0].count"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"count\": 1.5}]}", SG_ERR_FORMAT, "devices[0].count"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"count\": 1000}, {\"preset\": \"cpu\", \"count\": 100}]}",
       SG_ERR_FORMAT, "devices[1].count: more than 1024 devices"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"name\": \"a\"}, {\"preset\": \"cpu\", \"name\": \"a\"}]}",
       SG_ERR_FORMAT, "devices[1].name: 'a' is used twice"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"name\": 7}]}", SG_ERR_FORMAT,
       "devices[0].name: not a valid name"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"name\": \"bad\\nname\"}]}", SG_ERR_FORMAT, "devices[0].name"},
      {"{\"devices\": [{\"preset\": 5}]}", SG_ERR_FORMAT, "devices[0].preset: must be a string"},
      {"{\"devices\": [{\"preset\": \"cpu\", \"kind\": 1}]}", SG_ERR_FORMAT,
       "devices[0].kind: must be a string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sg_device_table *t = (sg_device_table *)&t; /* must be reset to NULL */
    sg_status st = sg_device_table_parse(cases[i].json, &t);
    if (st != cases[i].st || strstr(sg_last_error(), cases[i].needle) == NULL)
      fail_msg("case %zu (%s): %s '%s', expected %s with '%s'", i, cases[i].json, sg_status_str(st),
               sg_last_error(), sg_status_str(cases[i].st), cases[i].needle);
    assert_null(t);
  }
  sg_device_table *t;
  assert_status(sg_device_table_parse(NULL, &t), SG_ERR_INVALID_ARG, NULL);
  assert_status(sg_device_table_parse("{}", NULL), SG_ERR_INVALID_ARG, NULL);
}

static void test_files(void **state) {
  (void)state;
  char path[] = "/tmp/sgrt-devices-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *good = "{\"devices\": [{\"preset\": \"a100\", \"count\": 4}]}\n";
  assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
  close(fd);
  sg_device_table *t;
  assert_status(sg_device_table_load(path, &t), SG_OK, NULL);
  assert_int_equal(sg_device_table_count(t), 4);
  sg_device_table_destroy(t);
  /* A bad field keeps its name and gains the path. */
  FILE *f = fopen(path, "w");
  fputs("{\"devices\": [{\"preset\": \"a100\", \"memory_bytes\": -3}]}", f);
  fclose(f);
  assert_status(sg_device_table_load(path, &t), SG_ERR_FORMAT, "devices[0].memory_bytes");
  assert_non_null(strstr(sg_last_error(), path));
  unlink(path);
  assert_status(sg_device_table_load(path, &t), SG_ERR_IO, path);
  assert_null(t);
  assert_status(sg_device_table_load("/", &t), SG_ERR_IO, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_bad_tables),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
