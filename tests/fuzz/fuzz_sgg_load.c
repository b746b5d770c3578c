/* libFuzzer target for the .sgg reader (SPEC S1, S2). Any input must give an
 * error status with a message (never one that shows "(null)") or a valid
 * graph; never a crash, an out-of-bounds access, a leak or a hang. A graph
 * that loads must also survive the round trip: saving it gives a file that
 * loads to a graph with the same hash and saves to the same bytes again.
 *
 * Random mutations almost never keep XXH64 checksums valid, so each input is
 * tried twice: as given (exercising the container checks) and, when its
 * section table lies inside it, with every checksum recomputed (exercising
 * the section decoders and the verifier behind them). */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "graph/graph_internal.h"
#include "sgrt/sgrt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
  if (!ok) abort();
}

/* A NULL string printed with %s shows as "(null)": no message may contain
 * it, unless the input has "(null" (a name in the file may be "(null)", or
 * end in "(null" where the message closes a parenthesis after it). */
static int null_in_message(const uint8_t *data, size_t size) {
  static const char pat[] = "(null";
  if (strstr(sg_last_error(), "(null)") == NULL) return 0;
  for (size_t i = 0; i + sizeof pat - 1 <= size; i++)
    if (memcmp(data + i, pat, sizeof pat - 1) == 0) return 0;
  return 1;
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* Recomputes the checksums of a copy of `data` (see docs/format.md); NULL
 * when the table or a section is not inside the input. */
static uint8_t *fix_checksums(const uint8_t *data, size_t size) {
  if (size < 64) return NULL;
  uint32_t count = rd32(data + 16);
  uint64_t table = rd64(data + 24);
  if (count > 1024 || table > size || 32ull * count > size - table) return NULL;
  uint8_t *f = malloc(size);
  if (f == NULL) return NULL;
  memcpy(f, data, size);
  for (uint32_t i = 0; i < count; i++) {
    uint8_t *e = f + table + 32ull * i;
    uint64_t off = rd64(e + 8), len = rd64(e + 16);
    if (off > size || len > size - off) {
      free(f);
      return NULL;
    }
    wr64(e + 24, XXH64(f + off, (size_t)len, 0));
  }
  wr64(f + 48, XXH64(f + table, 32ull * count, 0));
  wr64(f + 56, XXH64(f, 56, 0));
  return f;
}

static void load_and_round_trip(const uint8_t *data, size_t size) {
  sg_graph *g = NULL;
  if (sg_graph_load_from_memory(data, size, &g) != SG_OK) {
    check(g == NULL);
    check(sg_last_error()[0] != '\0');
    check(!null_in_message(data, size));
    return;
  }
  check(sg_graph_is_finalized(g));
  uint64_t h1 = 0, h2 = 0, w1 = 0, w2 = 0;
  check(sg_graph_hash(g, 0, &h1) == SG_OK);
  check(sg_graph_hash(g, SG_HASH_WEIGHTS, &w1) == SG_OK);
  void *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  check(sg_graph_save_to_memory(g, &a, &na) == SG_OK);
  sg_graph *g2 = NULL;
  check(sg_graph_load_from_memory(a, na, &g2) == SG_OK);
  check(sg_graph_hash(g2, 0, &h2) == SG_OK);
  check(sg_graph_hash(g2, SG_HASH_WEIGHTS, &w2) == SG_OK);
  check(h1 == h2 && w1 == w2);
  check(sg_graph_save_to_memory(g2, &b, &nb) == SG_OK);
  check(na == nb && memcmp(a, b, na) == 0);
  sg_free(a);
  sg_free(b);
  sg_graph_destroy(g2);
  sg_graph_destroy(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_and_round_trip(data, size);
  uint8_t *fixed = fix_checksums(data, size);
  if (fixed) {
    load_and_round_trip(fixed, size);
    free(fixed);
  }
  return 0;
}
