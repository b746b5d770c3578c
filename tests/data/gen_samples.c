/* Writes the sample .sgg files: mlp.sgg and cnn.sgg in tests/data (used by the unit
 * and CLI tests) and, given a second directory, the fuzzing seeds of
 * tests/fuzz/corpus/sgg. Run by the `sgg_samples` build target; its output is
 * committed, and test_sgg_roundtrip checks that the committed files still
 * load and hash like freshly built graphs.
 *
 *   gen_samples <data_dir> [<corpus_dir>] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_graphs.h"
#include "sgg_edit.h"

static int save(sg_status (*build)(sg_graph **), const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  sg_graph *g;
  sg_status st = build(&g);
  if (st == SG_OK) st = sg_graph_save(g, path);
  sg_graph_destroy(g);
  if (st != SG_OK) {
    fprintf(stderr, "gen_samples: %s: %s: %s\n", path, sg_status_str(st), sg_last_error());
    return 1;
  }
  printf("wrote %s\n", path);
  return 0;
}

static int write_bytes(const char *dir, const char *name, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "gen_samples: cannot write %s\n", path);
    return 1;
  }
  printf("wrote %s\n", path);
  return 0;
}

/* Small crafted seeds: the tiny graph, cut short, and with an extra optional
 * section, so the fuzzer starts from both sides of each check. */
static int crafted(const char *dir) {
  sg_graph *g;
  void *buf;
  size_t size;
  if (sample_build_tiny(&g) != SG_OK || sg_graph_save_to_memory(g, &buf, &size) != SG_OK) {
    fprintf(stderr, "gen_samples: tiny graph: %s\n", sg_last_error());
    sg_graph_destroy(g);
    return 1;
  }
  sg_graph_destroy(g);
  int rc = write_bytes(dir, "tiny_header_only.sgg", buf, 64);
  rc |= write_bytes(dir, "tiny_truncated.sgg", buf, size / 2);
  static const char note[] = "an optional section that readers skip";
  size_t n2;
  uint8_t *with = sgg_edit_add_section(buf, size, 1000, 0, note, sizeof note, &n2);
  if (with) rc |= write_bytes(dir, "tiny_optional_section.sgg", with, n2);
  else rc = 1;
  free(with);
  sg_free(buf);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: gen_samples <data_dir> [<corpus_dir>]\n");
    return 2;
  }
  int rc = save(sample_build_mlp, argv[1], "mlp.sgg");
  rc |= save(sample_build_cnn, argv[1], "cnn.sgg");
  if (argc == 3) {
    rc |= save(sample_build_tiny, argv[2], "tiny.sgg");
    rc |= save(sample_build_zoo, argv[2], "zoo.sgg");
    rc |= crafted(argv[2]);
  }
  return rc;
}
