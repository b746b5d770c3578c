/* libFuzzer target for the ONNX importer (SPEC S1, S2). Any input must give
 * an error status with a message (never one that shows "(null)"), or a
 * finalized graph that verifies and survives a .sgg round trip with the
 * same hash; never a crash, an out-of-bounds access, a leak or a hang.
 * Each input is imported twice: as exported (with a batch size for symbolic
 * dims) and in training form, which exercise different converters for batch
 * norm and dropout. */
#include <stdlib.h>
#include <string.h>

#include "sgrt/sgrt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
  if (!ok) abort();
}

/* A NULL string printed with %s shows as "(null)": no message may contain
 * it, unless the input has "(null" (a name in the file may be "(null)", or
 * end in "(null" where the message closes a parenthesis after it: op type
 * "X_(null" gives "node 'n1' (X_(null): ..."). */
static int null_in_message(const uint8_t *data, size_t size) {
  static const char pat[] = "(null";
  if (strstr(sg_last_error(), "(null)") == NULL) return 0;
  for (size_t i = 0; i + sizeof pat - 1 <= size; i++)
    if (memcmp(data + i, pat, sizeof pat - 1) == 0) return 0;
  return 1;
}

static void import_once(const uint8_t *data, size_t size, int64_t batch, int training) {
  sg_onnx_params p = sg_onnx_params_init();
  p.batch = batch;
  p.training = training;
  sg_graph *g = NULL;
  sg_status st = sg_onnx_import_from_memory(data, size, &p, &g);
  if (st != SG_OK) {
    check(g == NULL);
    check(sg_last_error()[0] != '\0');
    check(!null_in_message(data, size));
    return;
  }
  check(sg_graph_is_finalized(g));
  check(sg_graph_verify(g) == SG_OK);
  uint64_t h1 = 0, h2 = 0;
  check(sg_graph_hash(g, SG_HASH_WEIGHTS, &h1) == SG_OK);
  void *sgg = NULL;
  size_t n = 0;
  check(sg_graph_save_to_memory(g, &sgg, &n) == SG_OK);
  sg_graph *g2 = NULL;
  check(sg_graph_load_from_memory(sgg, n, &g2) == SG_OK);
  check(sg_graph_hash(g2, SG_HASH_WEIGHTS, &h2) == SG_OK);
  check(h1 == h2);
  sg_free(sgg);
  sg_graph_destroy(g2);
  sg_graph_destroy(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  import_once(data, size, 2, SG_ONNX_TRAINING_AS_EXPORTED);
  import_once(data, size, 0, 1);
  return 0;
}
