/* The memory half of the cost model (SPEC P1) and the graph model the
 * solver sees: which ops move together, what each group keeps in memory,
 * and how many bytes flow between groups.
 *
 * Groups. Every forward op leads a group. A backward op named "F/grad",
 * "F/grad_1", ... (docs/autodiff.md) joins forward op F's group; one named
 * "w/grad..." (it sums or copies parameter w's gradient) and every update op
 * of w join the group that owns w: the group of w's first forward consumer.
 * So a pipeline judged on the forward graph carries gradients back along
 * the same stages (SPEC P4).
 *
 * Memory of a group: the source tensors it owns (parameters, their
 * optimizer state, state, inputs and constants go to their first consumer),
 * the gradients of its parameters, and its share of the forward activations
 * its backward ops read (kept for the backward pass: a tensor read by the
 * backward ops of several groups is shared equally, one copy when they sit
 * together). A graph without backward ops counts every forward output on
 * its producer instead.
 *
 * Edges: a tensor produced in group a and consumed in group b != a adds its
 * bytes to edge (a, b), once per consuming group; in a training graph the
 * matching gradient is a tensor of its own flowing from b's backward ops to
 * a's, so it adds its bytes as well. */
#include <stdio.h>
#include <string.h>

#include "partition/partition_internal.h"

/* "F/grad" or "F/grad_<digits>": length of F, or -1. */
static int64_t grad_prefix(const char *name) {
  size_t len = strlen(name);
  size_t end = len;
  if (len > 0 && name[len - 1] >= '0' && name[len - 1] <= '9') {
    while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') end--;
    if (end == 0 || name[end - 1] != '_') return -1;
    end--;
  }
  if (end < 6 || memcmp(name + end - 5, "/grad", 5) != 0) return -1;
  return (int64_t)(end - 5);
}

static bool outputs_are_gradients(const sg_graph *g, const sg__op *op) {
  if (op->n_outputs == 0) return false;
  for (int i = 0; i < op->n_outputs; i++)
    if (g->tensors[op->outputs[i]].role != SG_ROLE_GRADIENT) return false;
  return true;
}

static bool is_source_role(sg_role r) {
  return r == SG_ROLE_INPUT || r == SG_ROLE_PARAMETER || r == SG_ROLE_CONSTANT || r == SG_ROLE_STATE ||
         r == SG_ROLE_OPTIMIZER_STATE;
}

typedef struct builder {
  const sg_graph *g;
  sg__pmodel *m;
  int32_t n_groups;
  int32_t *cons_x, *cons; /* tensor -> consumer ops (CSR) */
} builder;

static sg_status consumers(builder *b) {
  const sg_graph *g = b->g;
  uint32_t nt = g->n_tensors;
  b->cons_x = sg__calloc((size_t)nt + 1, sizeof *b->cons_x);
  size_t total = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) total += (size_t)g->ops[k].n_inputs;
  b->cons = sg__malloc((total + 1) * sizeof *b->cons);
  int32_t *fill = sg__calloc((size_t)nt + 1, sizeof *fill);
  if (!b->cons_x || !b->cons || !fill) {
    sg__free(fill);
    return SG_ERR_NO_MEMORY;
  }
  for (uint32_t k = 0; k < g->n_ops; k++)
    for (int i = 0; i < g->ops[k].n_inputs; i++)
      if (g->ops[k].inputs[i] >= 0) b->cons_x[g->ops[k].inputs[i] + 1]++;
  for (uint32_t t = 0; t < nt; t++) b->cons_x[t + 1] += b->cons_x[t];
  for (uint32_t k = 0; k < g->n_ops; k++)
    for (int i = 0; i < g->ops[k].n_inputs; i++) {
      int32_t t = g->ops[k].inputs[i];
      if (t < 0) continue;
      /* An op that reads a tensor twice counts once. */
      bool dup = false;
      for (int32_t c = b->cons_x[t]; c < b->cons_x[t] + fill[t]; c++) dup = dup || b->cons[c] == (int32_t)k;
      if (!dup) b->cons[b->cons_x[t] + fill[t]++] = (int32_t)k;
    }
  /* Compact away the duplicates' slots. */
  int32_t out = 0;
  for (uint32_t t = 0; t < nt; t++) {
    int32_t start = b->cons_x[t];
    b->cons_x[t] = out;
    for (int32_t c = 0; c < fill[t]; c++) b->cons[out++] = b->cons[start + c];
  }
  b->cons_x[nt] = out;
  sg__free(fill);
  return SG_OK;
}

/* Classes and groups of every op, and the owner of every source tensor. */
static sg_status assign_groups(builder *b) {
  const sg_graph *g = b->g;
  sg__pmodel *m = b->m;
  int32_t n = (int32_t)g->n_ops;
  char name[SG__MAX_NAME + 1];
  for (int32_t k = 0; k < n; k++) {
    const sg__op *op = &g->ops[k];
    m->op_group[k] = -1;
    if (op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE) m->op_class[k] = SG__PART_UPDATE;
    else if (outputs_are_gradients(g, op)) m->op_class[k] = SG__PART_BACKWARD;
    else m->op_class[k] = SG__PART_FORWARD;
    if (m->op_class[k] == SG__PART_FORWARD) {
      m->leader[b->n_groups] = k;
      m->op_group[k] = b->n_groups++;
    }
  }
  /* Parameters (and every source) first belong to their first forward
   * consumer. */
  for (int32_t k = 0; k < n; k++) {
    if (m->op_class[k] != SG__PART_FORWARD) continue;
    const sg__op *op = &g->ops[k];
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t >= 0 && g->tensors[t].producer < 0 && m->tensor_group[t] < 0) m->tensor_group[t] = m->op_group[k];
    }
  }
  for (int32_t k = 0; k < n; k++) {
    if (m->op_class[k] == SG__PART_FORWARD) continue;
    const sg__op *op = &g->ops[k];
    int32_t grp = -1;
    if (m->op_class[k] == SG__PART_UPDATE) {
      if (op->n_inputs > 0 && op->inputs[0] >= 0) grp = m->tensor_group[op->inputs[0]];
    } else {
      int64_t len = grad_prefix(op->name);
      if (len > 0 && len <= SG__MAX_NAME) {
        memcpy(name, op->name, (size_t)len);
        name[len] = '\0';
        int32_t f = sg__op_lookup(g, name);
        if (f >= 0 && m->op_class[f] == SG__PART_FORWARD) grp = m->op_group[f];
        if (grp < 0) {
          int32_t t = sg__tensor_lookup(g, name);
          if (t >= 0 && g->tensors[t].role == SG_ROLE_PARAMETER) grp = m->tensor_group[t];
        }
      }
      /* Not named after anything: where its first computed input was made. */
      for (int i = 0; grp < 0 && i < op->n_inputs; i++) {
        int32_t t = op->inputs[i];
        if (t >= 0 && g->tensors[t].producer >= 0) grp = m->op_group[g->tensors[t].producer];
      }
    }
    if (grp < 0) {
      /* Nothing to follow (an update of an unused parameter, a backward op
       * of sources only): a group of its own. */
      m->leader[b->n_groups] = k;
      grp = b->n_groups++;
    }
    m->op_group[k] = grp;
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      if (t >= 0 && g->tensors[t].producer < 0 && m->tensor_group[t] < 0) m->tensor_group[t] = grp;
    }
  }
  return SG_OK;
}

sg_status sg__pmodel_build(const sg_graph *g, const double *op_seconds, double seconds_to_flops,
                           sg__pmodel *m) {
  memset(m, 0, sizeof *m);
  builder b = {g, m, 0, NULL, NULL};
  int32_t n = (int32_t)g->n_ops;
  uint32_t nt = g->n_tensors;
  sg_status st = SG_ERR_NO_MEMORY;
  double *mem = NULL, *flops = NULL, *traffic = NULL, *persist = NULL;
  sg__pedge *edges = NULL;
  int32_t *net_x = NULL, *net_pin = NULL;
  double *net_w = NULL;
  int32_t *stamp = NULL;
  uint8_t *kept = NULL;
  m->n_ops = n;
  m->op_group = sg__malloc(((size_t)n + 1) * sizeof *m->op_group);
  m->leader = sg__malloc(((size_t)n + 1) * sizeof *m->leader);
  m->op_class = sg__malloc((size_t)n + 1);
  m->op_flops = sg__calloc((size_t)n + 1, sizeof *m->op_flops);
  m->op_traffic = sg__calloc((size_t)n + 1, sizeof *m->op_traffic);
  m->tensor_group = sg__malloc(((size_t)nt + 1) * sizeof *m->tensor_group);
  if (!m->op_group || !m->leader || !m->op_class || !m->op_flops || !m->op_traffic || !m->tensor_group)
    goto out;
  for (uint32_t t = 0; t < nt; t++) m->tensor_group[t] = -1;
  if ((st = consumers(&b)) != SG_OK) goto out;
  if ((st = assign_groups(&b)) != SG_OK) goto out;
  st = SG_ERR_NO_MEMORY;
  int32_t ng = b.n_groups;
  mem = sg__calloc((size_t)ng + 1, sizeof *mem);
  flops = sg__calloc((size_t)ng + 1, sizeof *flops);
  traffic = sg__calloc((size_t)ng + 1, sizeof *traffic);
  persist = sg__calloc((size_t)ng + 1, sizeof *persist);
  stamp = sg__malloc(((size_t)ng + 1) * sizeof *stamp);
  kept = sg__calloc((size_t)nt + 1, 1);
  if (!mem || !flops || !traffic || !persist || !stamp || !kept) goto out;

  /* Compute. */
  for (int32_t k = 0; k < n; k++) {
    m->training = m->training || m->op_class[k] == SG__PART_BACKWARD;
    sg__op_cost c = sg__op_cost_of(g, &g->ops[k]);
    m->op_flops[k] = c.flops;
    m->op_traffic[k] = c.traffic;
    if (op_seconds) {
      flops[m->op_group[k]] += op_seconds[k] * seconds_to_flops;
    } else {
      flops[m->op_group[k]] += c.flops;
      traffic[m->op_group[k]] += c.traffic;
    }
  }

  /* Memory: sources to their owners, parameter gradients to the
   * parameter's owner, kept activations to their producer. */
  for (uint32_t t = 0; t < nt; t++) {
    const sg__tensor *x = &g->tensors[t];
    int32_t grp = m->tensor_group[t];
    if (x->producer >= 0 || grp < 0 || !is_source_role(x->role)) continue;
    mem[grp] += (double)x->nbytes;
    if (x->role == SG_ROLE_PARAMETER || x->role == SG_ROLE_OPTIMIZER_STATE || x->role == SG_ROLE_STATE)
      persist[grp] += (double)x->nbytes;
    if (x->role == SG_ROLE_PARAMETER) {
      char name[SG__MAX_NAME + 8];
      snprintf(name, sizeof name, "%s.grad", x->name);
      int32_t d = sg__tensor_lookup(g, name);
      if (d >= 0 && g->tensors[d].role == SG_ROLE_GRADIENT && g->tensors[d].producer >= 0) {
        mem[grp] += (double)g->tensors[d].nbytes;
        kept[d] = 1; /* counted here, not again */
      }
    }
  }
  for (uint32_t i = 0; i < g->n_outputs; i++) kept[g->outputs[i]] |= 2;
  for (int32_t v = 0; v < ng; v++) stamp[v] = -1;
  for (uint32_t t = 0; t < nt; t++) {
    const sg__tensor *x = &g->tensors[t];
    if (x->producer < 0 || m->op_class[x->producer] != SG__PART_FORWARD || (kept[t] & 1)) continue;
    if (!m->training) {
      mem[m->op_group[x->producer]] += (double)x->nbytes;
      continue;
    }
    /* Saved for backward: shared by the groups whose backward ops read it
     * (one copy when they sit together). */
    int32_t readers = 0;
    for (int32_t c = b.cons_x[t]; c < b.cons_x[t + 1]; c++) {
      int32_t grp = m->op_group[b.cons[c]];
      if (m->op_class[b.cons[c]] == SG__PART_FORWARD || stamp[grp] == (int32_t)t) continue;
      stamp[grp] = (int32_t)t;
      readers++;
    }
    if (readers == 0) {
      if (kept[t] & 2) mem[m->op_group[x->producer]] += (double)x->nbytes; /* a graph output stays alive */
      continue;
    }
    for (int32_t c = b.cons_x[t]; c < b.cons_x[t + 1]; c++) {
      int32_t grp = m->op_group[b.cons[c]];
      if (m->op_class[b.cons[c]] == SG__PART_FORWARD || stamp[grp] != (int32_t)t) continue;
      stamp[grp] = -2 - (int32_t)t; /* counted */
      mem[grp] += (double)x->nbytes / readers;
    }
  }

  /* Edges, once per consuming group; the edges of one tensor are one net. */
  size_t n_edges = 0;
  int32_t n_nets = 0;
  edges = sg__malloc(((size_t)b.cons_x[nt] + 1) * sizeof *edges);
  net_x = sg__malloc(((size_t)nt + 2) * sizeof *net_x);
  net_w = sg__malloc(((size_t)nt + 1) * sizeof *net_w);
  net_pin = sg__malloc(((size_t)b.cons_x[nt] + (size_t)nt + 1) * sizeof *net_pin);
  if (edges == NULL || net_x == NULL || net_w == NULL || net_pin == NULL) goto out;
  net_x[0] = 0;
  for (int32_t v = 0; v < ng; v++) stamp[v] = -1;
  for (uint32_t t = 0; t < nt; t++) {
    const sg__tensor *x = &g->tensors[t];
    if (x->producer < 0) continue;
    int32_t a = m->op_group[x->producer];
    bool fwd_producer = m->op_class[x->producer] == SG__PART_FORWARD;
    size_t first = n_edges;
    for (int32_t c = b.cons_x[t]; c < b.cons_x[t + 1]; c++) {
      int32_t op = b.cons[c], grp = m->op_group[op];
      bool fwd = fwd_producer && m->op_class[op] == SG__PART_FORWARD;
      if (grp == a) continue;
      if (stamp[grp] == (int32_t)t) {
        /* Already an edge to this group: it becomes forward if any
         * forward consumer there reads it. */
        for (size_t e = first; e < n_edges; e++)
          if (edges[e].v == grp) edges[e].forward = edges[e].forward || fwd;
        continue;
      }
      stamp[grp] = (int32_t)t;
      edges[n_edges++] = (sg__pedge){a, grp, (double)x->nbytes, fwd};
    }
    if (n_edges > first) {
      int32_t pin = net_x[n_nets];
      net_pin[pin++] = a;
      for (size_t e = first; e < n_edges; e++) net_pin[pin++] = edges[e].v;
      net_w[n_nets] = (double)x->nbytes;
      net_x[++n_nets] = pin;
    }
  }
  st = sg__pgraph_init(&m->pg, ng, mem, flops, traffic, persist, n_edges, edges);
  if (st == SG_OK) st = sg__pgraph_set_nets(&m->pg, n_nets, net_x, net_pin, net_w);
out: /* the scratch goes on success and failure alike; the model only on failure */
  if (st == SG_ERR_NO_MEMORY) sg__error(st, "partition: out of memory building the cost model");
  sg__free(mem);
  sg__free(flops);
  sg__free(traffic);
  sg__free(persist);
  sg__free(edges);
  sg__free(net_x);
  sg__free(net_pin);
  sg__free(net_w);
  sg__free(stamp);
  sg__free(kept);
  sg__free(b.cons_x);
  sg__free(b.cons);
  if (st != SG_OK) sg__pmodel_free(m);
  return st;
}

void sg__pmodel_free(sg__pmodel *m) {
  if (m == NULL) return;
  sg__pgraph_free(&m->pg);
  sg__free(m->op_group);
  sg__free(m->leader);
  sg__free(m->op_class);
  sg__free(m->op_flops);
  sg__free(m->op_traffic);
  sg__free(m->tensor_group);
  memset(m, 0, sizeof *m);
}
