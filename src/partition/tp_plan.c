/* Tensor-parallel split plans (SPEC P7): which linear/matmul ops to split by
 * column or by row, as annotations the distributed runtime executes.
 *
 * Megatron-LM's pairing: a column-split op leaves its output split along the
 * last dim; the ops sg__tp_flow allows carry the cut on (elementwise ops for
 * an MLP; for attention the slicing of q, k and v, the reshape to heads,
 * the batched matmuls and the softmax, with the heads cut); a row-split op
 * that consumes it needs no gather and produces partial sums, so the pair
 * costs one all-reduce forward and one backward. An op is row-split when its
 * input arrives split that way, else column-split; one whose dims do not
 * divide by `ways`, whose weight is small or shared (tied), stays
 * replicated. A column split whose cut reaches an op that cannot run cut (a
 * reduction over it, the loss) has its output gathered instead. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition_internal.h"

struct sg_tp_plan {
  const sg_graph *g;
  int32_t n;
  sg_tp_annotation *a;
  int32_t *groups; /* per annotation: equal blocks of the weight's split axis (sg_tp_plan_tensor_split) */
};

sg_tp_params sg_tp_params_init(void) { return (sg_tp_params)SG_TP_PARAMS_INIT; }

bool sg__tp_keeps_split(sg_op_kind kind) {
  const uint32_t want = SG__OP_ELEMENTWISE | SG__OP_UNARY;
  return (sg__op_flags(kind) & want) == want;
}

static int64_t attr_int(const sg__op *op, const char *name) {
  for (int i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0 && op->attrs[i].type == SG_ATTR_INT) return op->attrs[i].i;
  return 0;
}

static bool is_forward(const sg_graph *g, const sg__op *op) {
  if (op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE) return false; /* reads every weight */
  for (int i = 0; i < op->n_outputs; i++)
    if (g->tensors[op->outputs[i]].role == SG_ROLE_GRADIENT) return false;
  return true;
}

typedef struct planner {
  const sg_graph *g;
  sg_tp_plan *plan;
  int ways;
  int32_t *uses;  /* tensor -> forward uses (a graph output counts) */
  int32_t *annot; /* op -> annotation, or -1 */
  int8_t
      *out_axis;  /* annotation -> the weight's output-feature axis; -1: replicated for a reason of its own */
  bool *gathered; /* annotation -> its column split's output is gathered: its region could not run split */
  sg__tp_cut *cut; /* tensor -> how this pass cuts it */
  int32_t *region; /* tensor -> the column split whose cut reaches it, or -1 */
} planner;

static int64_t gcd64(int64_t a, int64_t b) {
  while (b != 0) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* The blocks a column split's output (its last axis, n features) is read in:
 * when every consumer slices whole runs of it (q, k and v out of a fused
 * projection), the largest common block that still divides by ways, so
 * that each rank gets its heads of each; else 1. */
static int32_t column_groups(const planner *p, int32_t y) {
  const sg_graph *g = p->g;
  const sg__tensor *t = &g->tensors[y];
  int64_t n = t->dims[t->ndim - 1], block = n;
  int consumers = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    bool reads = false;
    for (int i = 0; i < op->n_inputs; i++) reads |= op->inputs[i] == y;
    if (!reads || !is_forward(g, op)) continue;
    int axis;
    if (op->kind != SG_OP_SLICE || !sg__norm_axis(sg__attr_i(op, 0), t->ndim, &axis) || axis != t->ndim - 1)
      return 1;
    int64_t start = sg__attr_i(op, 1);
    block = gcd64(block, gcd64(start < 0 ? start + n : start, sg__attr_i(op, 2)));
    consumers++;
  }
  if (consumers == 0 || block <= 0 || block % p->ways != 0 || consumers != p->uses[y]) return 1;
  return (int32_t)(n / block);
}

static void set_split(sg_tp_annotation *a, sg_tp_split split, int axis, int sharded, sg_tp_comm out,
                      sg_tp_comm back) {
  a->split = split;
  a->weight_axis = axis;
  a->input_sharded = sharded;
  a->output_comm = out;
  a->backward_comm = back;
}

/* Annotation i for op k in this pass, given how its input arrives. Returns
 * the region to gather when the input arrives cut in a way no split takes,
 * else -1. */
static int32_t plan_op(planner *p, uint32_t k, int32_t i) {
  const sg_graph *g = p->g;
  const sg__op *op = &g->ops[k];
  sg_tp_annotation *a = &p->plan->a[i];
  const sg__tensor *x = sg__in(g, op, 0), *w = sg__in(g, op, 1);
  int out_axis = p->out_axis[i], in_axis = 1 - out_axis;
  int64_t n_out = w->dims[out_axis], n_in = w->dims[in_axis];
  sg__tp_cut in = p->cut[op->inputs[0]];
  p->plan->groups[i] = 1;
  if (in.axis >= 0) {
    /* Row split on an input that arrives split: the pair's one all-reduce. */
    if (in.axis != x->ndim - 1 || in.groups != 1 || n_in % p->ways != 0) return p->region[op->inputs[0]];
    set_split(a, SG_TP_ROW, in_axis, 1, SG_TP_COMM_ALLREDUCE, SG_TP_COMM_NONE);
  } else if (n_out % p->ways == 0) {
    int32_t y = op->outputs[0];
    bool gather = p->gathered[i];
    set_split(a, SG_TP_COLUMN, out_axis, 0, gather ? SG_TP_COMM_ALLGATHER : SG_TP_COMM_NONE,
              SG_TP_COMM_ALLREDUCE);
    if (!gather) {
      p->plan->groups[i] = column_groups(p, y);
      p->cut[y] = (sg__tp_cut){(int8_t)(g->tensors[y].ndim - 1), p->plan->groups[i]};
      p->region[y] = i;
    }
  } else if (n_in % p->ways == 0) {
    set_split(a, SG_TP_ROW, in_axis, 0, SG_TP_COMM_ALLREDUCE, SG_TP_COMM_ALLGATHER);
  } else {
    set_split(a, SG_TP_REPLICATE, -1, 0, SG_TP_COMM_NONE, SG_TP_COMM_NONE);
    a->reason = "no weight dim divides by ways";
    return -1;
  }
  a->reason = "";
  return -1;
}

/* Ops with more inputs (a long concat) never take a cut one. */
#define FLOW_MAX_INPUTS 16

/* One pass over the forward ops: each column split's cut is followed
 * through the ops sg__tp_flow allows to the row splits that end it. Returns
 * a column split whose region reaches an op that cannot run cut (or a
 * graph output, read whole), to be gathered in the next pass; -1 when the
 * plan holds. */
static int32_t plan_pass(planner *p) {
  const sg_graph *g = p->g;
  for (uint32_t t = 0; t < g->n_tensors; t++) p->cut[t] = (sg__tp_cut){-1, 1}, p->region[t] = -1;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    if (!is_forward(g, op)) continue;
    int32_t i = p->annot[k];
    if (i >= 0 && p->out_axis[i] >= 0) {
      int32_t blocked = plan_op(p, k, i);
      if (blocked >= 0) return blocked;
      continue;
    }
    sg__tp_cut in[FLOW_MAX_INPUTS], out[SG__MAX_OUTPUTS];
    int32_t region = -1;
    for (int j = 0; j < op->n_inputs; j++) {
      int32_t t = op->inputs[j];
      if (j < FLOW_MAX_INPUTS) in[j] = t >= 0 ? p->cut[t] : (sg__tp_cut){-1, 1};
      if (t < 0 || p->cut[t].axis < 0) continue;
      if (region >= 0 && p->region[t] != region) return region; /* two regions meet: one is gathered */
      region = p->region[t];
    }
    if (region >= 0 && op->n_inputs > FLOW_MAX_INPUTS) return region;
    if (region < 0) continue;
    if (!sg__tp_flow(g, op, p->ways, in, out)) return region;
    for (int j = 0; j < op->n_outputs; j++) {
      p->cut[op->outputs[j]] = out[j];
      p->region[op->outputs[j]] = out[j].axis >= 0 ? region : -1;
    }
  }
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (p->cut[g->outputs[i]].axis >= 0) return p->region[g->outputs[i]];
  return -1;
}

/* The annotations that do not depend on the pass: which ops are candidates,
 * and why the others stay replicated. */
static void plan_candidates(planner *p, const sg_tp_params *tp) {
  const sg_graph *g = p->g;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    if ((op->kind != SG_OP_GEMM && op->kind != SG_OP_MATMUL) || !is_forward(g, op)) continue;
    const sg__tensor *x = sg__in(g, op, 0), *w = sg__in(g, op, 1);
    if (x == NULL || w == NULL || w->role != SG_ROLE_PARAMETER || w->ndim != 2) continue;
    int32_t i = p->plan->n++;
    sg_tp_annotation *a = &p->plan->a[i];
    memset(a, 0, sizeof *a);
    a->op = (int32_t)k;
    a->ways = tp->ways;
    a->weight_axis = -1;
    a->reason = "";
    p->plan->groups[i] = 1;
    p->annot[k] = i;
    p->out_axis[i] = -1;
    if (op->kind == SG_OP_GEMM && attr_int(op, "trans_a"))
      a->reason = "trans_a: the input's features are its first dim";
    else if (p->uses[op->inputs[1]] != 1) /* a slice serves one op: tp_rewrite.c */
      a->reason = "weight shared by several ops (tied)";
    else if ((double)w->nbytes < tp->min_weight_bytes) a->reason = "weight smaller than min_weight_bytes";
    else p->out_axis[i] = op->kind == SG_OP_GEMM && attr_int(op, "trans_b") ? 0 : 1;
  }
}

static void planner_free(planner *p) {
  sg__free(p->uses);
  sg__free(p->annot);
  sg__free(p->out_axis);
  sg__free(p->gathered);
  sg__free(p->cut);
  sg__free(p->region);
}

sg_status sg_tp_plan_create(const sg_graph *g, const sg_tp_params *params, sg_tp_plan **out) {
  if (out) *out = NULL;
  if (g == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_tp_plan_create: NULL argument");
  sg_tp_params tp = sg_tp_params_init();
  SG_CHECK(sg__params_read("sg_tp_plan_create", SG__VERSIONED(sg_tp_params, ways, "SG_TP_PARAMS_INIT"), &tp,
                           params));
  if (tp.ways < 2 || tp.ways > SG_PARTITION_MAX_PARTS)
    return sg__error(SG_ERR_INVALID_ARG, "sg_tp_plan_create: params.ways is %d; it must be in 2..%d", tp.ways,
                     SG_PARTITION_MAX_PARTS);
  if (!(tp.min_weight_bytes >= 0.0))
    return sg__error(SG_ERR_INVALID_ARG, "sg_tp_plan_create: params.min_weight_bytes is %g",
                     tp.min_weight_bytes);
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_tp_plan_create: the graph is not finalized");

  size_t nt = (size_t)g->n_tensors + 1, no = (size_t)g->n_ops + 1;
  planner p = {.g = g, .ways = tp.ways};
  p.plan = sg__calloc(1, sizeof *p.plan);
  if (p.plan) p.plan->a = sg__calloc(no, sizeof *p.plan->a);
  if (p.plan) p.plan->groups = sg__calloc(no, sizeof *p.plan->groups);
  p.uses = sg__calloc(nt, sizeof *p.uses);
  p.annot = sg__malloc(no * sizeof *p.annot);
  p.out_axis = sg__malloc(no);
  p.gathered = sg__calloc(no, sizeof *p.gathered);
  p.cut = sg__malloc(nt * sizeof *p.cut);
  p.region = sg__malloc(nt * sizeof *p.region);
  if (!p.plan || !p.plan->a || !p.plan->groups || !p.uses || !p.annot || !p.out_axis || !p.gathered ||
      !p.cut || !p.region) {
    sg_tp_plan_destroy(p.plan);
    planner_free(&p);
    return sg__error(SG_ERR_NO_MEMORY, "sg_tp_plan_create: out of memory");
  }
  p.plan->g = g;
  /* Forward consumers only: backward ops follow their forward op's split. */
  for (uint32_t k = 0; k < g->n_ops; k++) {
    p.annot[k] = -1;
    if (!is_forward(g, &g->ops[k])) continue;
    for (int i = 0; i < g->ops[k].n_inputs; i++)
      if (g->ops[k].inputs[i] >= 0) p.uses[g->ops[k].inputs[i]]++;
  }
  for (uint32_t i = 0; i < g->n_outputs; i++) p.uses[g->outputs[i]]++; /* an output is read whole */
  plan_candidates(&p, &tp);
  /* Each pass that fails gathers one more column split, so this ends. */
  for (int32_t blocked; (blocked = plan_pass(&p)) >= 0;) p.gathered[blocked] = true;
  for (int32_t i = 0; i < p.plan->n; i++) {
    sg_tp_annotation *a = &p.plan->a[i];
    const sg__op *op = &g->ops[a->op];
    bool split = a->split != SG_TP_REPLICATE;
    a->weight = split ? (sg_tensor){op->inputs[1]} : SG_NO_TENSOR;
    a->bias = split && op->kind == SG_OP_GEMM && op->n_inputs > 2 && op->inputs[2] >= 0
                  ? (sg_tensor){op->inputs[2]}
                  : SG_NO_TENSOR;
  }
  planner_free(&p);
  *out = p.plan;
  return SG_OK;
}

void sg_tp_plan_destroy(sg_tp_plan *plan) {
  if (plan == NULL) return;
  sg__free(plan->a);
  sg__free(plan->groups);
  sg__free(plan);
}

int32_t sg_tp_plan_count(const sg_tp_plan *plan) { return plan ? plan->n : 0; }

sg_status sg_tp_plan_get(const sg_tp_plan *plan, int32_t i, sg_tp_annotation *out) {
  if (plan == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_tp_plan_get: NULL argument");
  if (i < 0 || i >= plan->n)
    return sg__error(SG_ERR_RANGE, "sg_tp_plan_get: annotation %d of %d", (int)i, (int)plan->n);
  *out = plan->a[i];
  return SG_OK;
}

sg_status sg_tp_plan_tensor_split(const sg_tp_plan *plan, sg_tensor t, int *axis, int *groups) {
  if (plan == NULL || axis == NULL || groups == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_tp_plan_tensor_split: NULL argument");
  if (t.id < 0 || (uint32_t)t.id >= plan->g->n_tensors)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_tp_plan_tensor_split: tensor %d is not in the planned graph (%u tensors)", (int)t.id,
                     plan->g->n_tensors);
  *axis = -1;
  *groups = 1;
  for (int32_t i = 0; i < plan->n; i++) {
    const sg_tp_annotation *a = &plan->a[i];
    if (a->split == SG_TP_REPLICATE) continue;
    if (a->weight.id == t.id) *axis = a->weight_axis;
    else if (a->split == SG_TP_COLUMN && a->bias.id == t.id && plan->g->tensors[t.id].ndim >= 1 &&
             plan->g->tensors[t.id].dims[plan->g->tensors[t.id].ndim - 1] > 1)
      *axis = plan->g->tensors[t.id].ndim - 1;
    else continue;
    *groups = a->split == SG_TP_COLUMN ? plan->groups[i] : 1;
    return SG_OK;
  }
  return SG_OK;
}

static const char *split_name(sg_tp_split s) {
  return s == SG_TP_COLUMN ? "column" : s == SG_TP_ROW ? "row" : "replicate";
}

static const char *comm_name(sg_tp_comm c) {
  return c == SG_TP_COMM_ALLGATHER ? "allgather" : c == SG_TP_COMM_ALLREDUCE ? "allreduce" : "none";
}

sg_status sg_tp_plan_json(const sg_tp_plan *plan, char **out) {
  if (out) *out = NULL;
  if (plan == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_tp_plan_json: NULL argument");
  cJSON *arr = cJSON_CreateArray();
  bool ok = arr != NULL;
  for (int32_t i = 0; ok && i < plan->n; i++) {
    const sg_tp_annotation *a = &plan->a[i];
    cJSON *e = cJSON_CreateObject();
    ok = e && cJSON_AddItemToArray(arr, e);
    if (!ok) {
      cJSON_Delete(e);
      break;
    }
    const sg_graph *g = plan->g;
    ok = cJSON_AddNumberToObject(e, "op", a->op) && cJSON_AddStringToObject(e, "name", g->ops[a->op].name) &&
         cJSON_AddStringToObject(e, "split", split_name(a->split)) &&
         cJSON_AddNumberToObject(e, "ways", a->ways) &&
         (a->weight.id < 0 ? cJSON_AddNullToObject(e, "weight") != NULL
                           : cJSON_AddStringToObject(e, "weight", g->tensors[a->weight.id].name) != NULL) &&
         cJSON_AddNumberToObject(e, "weight_axis", a->weight_axis) &&
         cJSON_AddNumberToObject(e, "groups", a->split == SG_TP_COLUMN ? plan->groups[i] : 1) &&
         (a->bias.id < 0 ? cJSON_AddNullToObject(e, "bias") != NULL
                         : cJSON_AddStringToObject(e, "bias", g->tensors[a->bias.id].name) != NULL) &&
         cJSON_AddBoolToObject(e, "input_sharded", a->input_sharded) &&
         cJSON_AddStringToObject(e, "output_comm", comm_name(a->output_comm)) &&
         cJSON_AddStringToObject(e, "backward_comm", comm_name(a->backward_comm)) &&
         cJSON_AddStringToObject(e, "reason", a->reason);
  }
  char *text = ok ? cJSON_PrintUnformatted(arr) : NULL;
  cJSON_Delete(arr);
  if (text == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_tp_plan_json: out of memory");
  *out = sg__strdup(text);
  free(text);
  return *out ? SG_OK : sg__error(SG_ERR_NO_MEMORY, "sg_tp_plan_json: out of memory");
}
