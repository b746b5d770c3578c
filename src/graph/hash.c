/* Stable content hash of a graph (SPEC G8). Fields are fed to XXH3 in a
 * fixed little-endian encoding, never as in-memory structs, so the hash does
 * not depend on padding, pointer values, host or compiler. */
#include <string.h>
/* Static linking only: the XXH3 state lives on the stack (no allocation). */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "graph/graph_internal.h"

/* Bumped whenever the encoding below changes, so old cache keys never match. */
#define HASH_ENCODING_VERSION 1u

static void put_u64(XXH3_state_t *s, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  XXH3_64bits_update(s, b, 8);
}

static void put_str(XXH3_state_t *s, const char *str) {
  size_t n = strlen(str);
  put_u64(s, n);
  XXH3_64bits_update(s, str, n);
}

static void put_f64(XXH3_state_t *s, double f) {
  uint64_t bits;
  memcpy(&bits, &f, sizeof bits);
  put_u64(s, bits);
}

sg_status sg_graph_hash(const sg_graph *g, unsigned flags, uint64_t *out) {
  if (g == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_hash: NULL argument");
  if (flags & ~(unsigned)SG_HASH_WEIGHTS)
    return sg__error(SG_ERR_INVALID_ARG, "sg_graph_hash: unknown flags 0x%x", flags);
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_graph_hash: finalize the graph first");
  /* XXH3 keeps its state on the stack here; no allocation, no failure. */
  XXH3_state_t s;
  XXH3_64bits_reset(&s);
  put_u64(&s, HASH_ENCODING_VERSION);
  put_u64(&s, flags);
  put_u64(&s, g->n_tensors);
  for (uint32_t i = 0; i < g->n_tensors; i++) {
    const sg__tensor *t = &g->tensors[i];
    put_str(&s, t->name);
    put_u64(&s, (uint64_t)t->dtype);
    put_u64(&s, (uint64_t)t->role);
    put_u64(&s, (uint64_t)t->ndim);
    for (int d = 0; d < t->ndim; d++) put_u64(&s, (uint64_t)t->dims[d]);
    put_u64(&s, t->data != NULL);
    if ((flags & SG_HASH_WEIGHTS) && t->data) XXH3_64bits_update(&s, t->data, t->nbytes);
  }
  put_u64(&s, g->n_ops);
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    put_u64(&s, (uint64_t)op->kind);
    put_str(&s, op->name);
    put_u64(&s, (uint64_t)op->n_inputs);
    for (int i = 0; i < op->n_inputs; i++) put_u64(&s, (uint64_t)(int64_t)op->inputs[i]);
    put_u64(&s, (uint64_t)op->n_outputs);
    for (int i = 0; i < op->n_outputs; i++) put_u64(&s, (uint64_t)(int64_t)op->outputs[i]);
    put_u64(&s, (uint64_t)op->n_attrs);
    for (int a = 0; a < op->n_attrs; a++) {
      const sg_attr *at = &op->attrs[a];
      put_str(&s, at->name);
      put_u64(&s, (uint64_t)at->type);
      switch (at->type) {
        case SG_ATTR_INT: put_u64(&s, (uint64_t)at->i); break;
        case SG_ATTR_FLOAT: put_f64(&s, at->f); break;
        case SG_ATTR_INTS:
          put_u64(&s, (uint64_t)at->count);
          for (int j = 0; j < at->count; j++) put_u64(&s, (uint64_t)at->ints[j]);
          break;
      }
    }
  }
  put_u64(&s, g->n_outputs);
  for (uint32_t i = 0; i < g->n_outputs; i++) put_u64(&s, (uint64_t)(int64_t)g->outputs[i]);
  *out = XXH3_64bits_digest(&s);
  return SG_OK;
}
