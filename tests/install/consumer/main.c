/* Uses an installed sgrt through its public header only: builds a tiny graph,
 * saves it to argv[1], loads it back and compares content hashes. Prints one
 * line "consumer: ok ..." and exits 0 on success. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sgrt/sgrt.h>

static int fail(const char *what, sg_status st) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, sg_status_str(st), sg_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer OUT.sgg\n");
    return 2;
  }
  /* The header and the loaded library must agree. */
  char header_version[32];
  snprintf(header_version, sizeof header_version, "%d.%d.%d", SG_VERSION_MAJOR, SG_VERSION_MINOR,
           SG_VERSION_PATCH);
  if (strcmp(header_version, sg_version()) != 0) {
    fprintf(stderr, "consumer: header version %s but library %s\n", header_version, sg_version());
    return 1;
  }

  sg_graph *g = NULL, *back = NULL;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return fail("create", st);
  const int64_t xdims[2] = {4, 3}, wdims[2] = {2, 3};
  const float w[6] = {0.5f, -1.0f, 0.25f, 2.0f, 0.0f, -0.5f};
  sg_tensor x = sg_input(g, "x", SG_F32, 2, xdims);
  sg_tensor wt = sg_parameter(g, "w", SG_F32, 2, wdims, w);
  sg_tensor y = sg_relu(g, sg_linear(g, x, wt, SG_NO_TENSOR));
  int rc = 1;
  if ((st = sg_graph_mark_output(g, y)) != SG_OK || (st = sg_graph_finalize(g)) != SG_OK) {
    rc = fail("build", st);
    goto out;
  }
  uint64_t h1, h2;
  if ((st = sg_graph_hash(g, SG_HASH_WEIGHTS, &h1)) != SG_OK || (st = sg_graph_save(g, argv[1])) != SG_OK ||
      (st = sg_graph_load(argv[1], &back)) != SG_OK ||
      (st = sg_graph_hash(back, SG_HASH_WEIGHTS, &h2)) != SG_OK) {
    rc = fail("round trip", st);
    goto out;
  }
  if (h1 != h2 || sg_graph_num_ops(back) != 2) {
    fprintf(stderr, "consumer: round trip changed the graph (%016" PRIx64 " vs %016" PRIx64 ")\n", h1, h2);
    goto out;
  }
  printf("consumer: ok (sgrt %s, %d ops, hash %016" PRIx64 ")\n", sg_version(), (int)sg_graph_num_ops(back),
         h2);
  rc = 0;
out:
  sg_graph_destroy(back);
  sg_graph_destroy(g);
  return rc;
}
