/* Tensor-parallel split plans (SPEC P7): which linear/matmul ops to split by
 * column or by row, as annotations the distributed runtime executes.
 *
 * Megatron-LM's pairing: a column-split op leaves its output split along the
 * last dim; elementwise ops keep it split; a row-split op that consumes it
 * needs no gather and produces partial sums, so the pair costs one
 * all-reduce forward and one backward. An op is row-split when its input
 * arrives split that way, else column-split; one whose dims do not divide
 * by `ways`, or whose weight is small, stays replicated. */
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

/* The annotated column-split op whose output reaches tensor t through
 * single-consumer elementwise ops only, or -1. */
static int32_t column_source(const sg_graph *g, const int32_t *uses, const int32_t *annot,
                             const sg_tp_annotation *a, int32_t t) {
  for (;;) {
    if (uses[t] != 1) return -1;
    int32_t prod = g->tensors[t].producer;
    if (prod < 0) return -1;
    const sg__op *op = &g->ops[prod];
    if (annot[prod] >= 0)
      return a[annot[prod]].split == SG_TP_COLUMN && op->outputs[0] == t ? annot[prod] : -1;
    if (!sg__tp_keeps_split(op->kind) || op->outputs[0] != t || op->n_inputs < 1 || op->inputs[0] < 0)
      return -1;
    t = op->inputs[0];
  }
}

static bool is_forward(const sg_graph *g, const sg__op *op) {
  if (op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE) return false; /* reads every weight */
  for (int i = 0; i < op->n_outputs; i++)
    if (g->tensors[op->outputs[i]].role == SG_ROLE_GRADIENT) return false;
  return true;
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

  sg_tp_plan *plan = sg__calloc(1, sizeof *plan);
  int32_t *uses = sg__calloc((size_t)g->n_tensors + 1, sizeof *uses);
  int32_t *annot = sg__malloc(((size_t)g->n_ops + 1) * sizeof *annot);
  if (plan) plan->a = sg__calloc((size_t)g->n_ops + 1, sizeof *plan->a);
  if (plan) plan->groups = sg__calloc((size_t)g->n_ops + 1, sizeof *plan->groups);
  if (!plan || !plan->a || !plan->groups || !uses || !annot) {
    sg_tp_plan_destroy(plan);
    sg__free(uses);
    sg__free(annot);
    return sg__error(SG_ERR_NO_MEMORY, "sg_tp_plan_create: out of memory");
  }
  plan->g = g;
  /* Forward consumers only: backward ops follow their forward op's split. */
  for (uint32_t k = 0; k < g->n_ops; k++) {
    annot[k] = -1;
    if (!is_forward(g, &g->ops[k])) continue;
    for (int i = 0; i < g->ops[k].n_inputs; i++)
      if (g->ops[k].inputs[i] >= 0) uses[g->ops[k].inputs[i]]++;
  }
  for (uint32_t i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++; /* an output is gathered anyway */

  for (uint32_t k = 0; k < g->n_ops; k++) {
    const sg__op *op = &g->ops[k];
    if ((op->kind != SG_OP_GEMM && op->kind != SG_OP_MATMUL) || !is_forward(g, op)) continue;
    const sg__tensor *x = sg__in(g, op, 0), *w = sg__in(g, op, 1);
    if (x == NULL || w == NULL || w->role != SG_ROLE_PARAMETER || w->ndim != 2) continue;
    sg_tp_annotation *a = &plan->a[plan->n];
    memset(a, 0, sizeof *a);
    a->op = (int32_t)k;
    a->ways = tp.ways;
    a->weight = SG_NO_TENSOR;
    a->weight_axis = -1;
    a->bias = SG_NO_TENSOR;
    a->reason = "";
    plan->groups[plan->n] = 1;
    annot[k] = plan->n++;
    int out_axis = 1, in_axis = 0;
    if (op->kind == SG_OP_GEMM) {
      if (attr_int(op, "trans_a")) {
        a->reason = "trans_a: the input's features are its first dim";
        continue;
      }
      if (attr_int(op, "trans_b")) out_axis = 0, in_axis = 1;
    }
    if (uses[op->inputs[1]] != 1) { /* a slice serves one op: tp_rewrite.c */
      a->reason = "weight shared by several ops (tied)";
      continue;
    }
    if ((double)w->nbytes < tp.min_weight_bytes) {
      a->reason = "weight smaller than min_weight_bytes";
      continue;
    }
    const sg__tensor *bias = op->kind == SG_OP_GEMM ? sg__in(g, op, 2) : NULL;
    int64_t n_out = w->dims[out_axis], n_in = w->dims[in_axis];
    int32_t src = column_source(g, uses, annot, plan->a, op->inputs[0]);
    if (src >= 0 && n_in % tp.ways == 0) {
      /* Row split on an input that arrives split: the pair's one all-reduce. */
      a->split = SG_TP_ROW;
      a->weight_axis = in_axis;
      a->input_sharded = 1;
      a->output_comm = SG_TP_COMM_ALLREDUCE;
      a->backward_comm = SG_TP_COMM_NONE;
      plan->a[src].output_comm = SG_TP_COMM_NONE;
    } else if (n_out % tp.ways == 0) {
      a->split = SG_TP_COLUMN;
      a->weight_axis = out_axis;
      a->output_comm = SG_TP_COMM_ALLGATHER; /* until a row split consumes it */
      a->backward_comm = SG_TP_COMM_ALLREDUCE;
    } else if (n_in % tp.ways == 0) {
      a->split = SG_TP_ROW;
      a->weight_axis = in_axis;
      a->input_sharded = 0;
      a->output_comm = SG_TP_COMM_ALLREDUCE;
      a->backward_comm = SG_TP_COMM_ALLGATHER;
    } else {
      a->reason = "no weight dim divides by ways";
      continue;
    }
    a->weight = (sg_tensor){op->inputs[1]};
    if (bias) a->bias = (sg_tensor){op->inputs[2]};
  }
  sg__free(uses);
  sg__free(annot);
  *out = plan;
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
