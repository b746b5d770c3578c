/* Name -> id maps for tensors and ops (open addressing, linear probing). */
#include <string.h>
#include <xxhash.h>

#include "graph/graph_internal.h"

static const char *name_of(const sg_graph *g, bool ops, int32_t id) {
  return ops ? g->ops[id].name : g->tensors[id].name;
}

static int32_t lookup(const sg_graph *g, bool ops, const char *name) {
  const sg__name_map *m = ops ? &g->op_names : &g->tensor_names;
  if (m->cap == 0 || name == NULL) return -1;
  uint32_t mask = m->cap - 1;
  for (uint32_t i = (uint32_t)XXH3_64bits(name, strlen(name)) & mask;; i = (i + 1) & mask) {
    int32_t id = m->slots[i];
    if (id < 0) return -1;
    if (strcmp(name_of(g, ops, id), name) == 0) return id;
  }
}

int32_t sg__tensor_lookup(const sg_graph *g, const char *name) { return lookup(g, false, name); }
int32_t sg__op_lookup(const sg_graph *g, const char *name) { return lookup(g, true, name); }

static void place(const sg_graph *g, bool ops, sg__name_map *m, int32_t id) {
  const char *name = name_of(g, ops, id);
  uint32_t mask = m->cap - 1;
  uint32_t i = (uint32_t)XXH3_64bits(name, strlen(name)) & mask;
  while (m->slots[i] >= 0) i = (i + 1) & mask;
  m->slots[i] = id;
  m->count++;
}

sg_status sg__names_insert(sg_graph *g, bool ops, int32_t id) {
  sg__name_map *m = ops ? &g->op_names : &g->tensor_names;
  if (lookup(g, ops, name_of(g, ops, id)) >= 0) return SG_ERR_DUPLICATE;
  /* Keep the load factor under 1/2 so probes stay short. */
  if ((uint64_t)(m->count + 1) * 2 > m->cap) {
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    int32_t *slots = sg__malloc((size_t)cap * sizeof *slots);
    if (slots == NULL) return SG_ERR_NO_MEMORY;
    memset(slots, 0xff, (size_t)cap * sizeof *slots);
    sg__name_map grown = {slots, cap, 0};
    for (uint32_t i = 0; i < m->cap; i++)
      if (m->slots[i] >= 0) place(g, ops, &grown, m->slots[i]);
    sg__free(m->slots);
    *m = grown;
  }
  place(g, ops, m, id);
  return SG_OK;
}

void sg__names_clear(sg__name_map *m) {
  sg__free(m->slots);
  *m = (sg__name_map){NULL, 0, 0};
}
