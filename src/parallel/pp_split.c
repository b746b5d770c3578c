/* Cutting a forward graph into pipeline stages (pp.h): stage k's training
 * graph is rebuilt op by op with the builder (so shape inference re-derives
 * every shape from the micro-batch inputs), every tensor under its original
 * name.
 *
 * Why boundary inputs are parameters: autodiff gives no gradient to a graph
 * input, yet the gradient of a stage's boundary input is exactly what must
 * go back to the previous stage. As a parameter without an initializer it
 * gets "<name>.grad" like any weight; the runner writes each micro-batch's
 * received activations into it and never runs its update.
 *
 * Why a surrogate loss: a stage k < K-1 does not see the loss, only the
 * gradient g_j of each tensor out_j it sends. For L_k = sum_j sum(out_j * g_j)
 * with g_j held constant, dL_k/dout_j = g_j, so the chain rule inside the
 * stage yields exactly the parameter gradients of the real loss;
 * sg_graph_backward(L_k) does the rest.
 *
 * Why a weight read on several stages is copied (tied weights, GPT-2's
 * token embedding that is also its output layer): the gradient of a weight is
 * the sum of its uses' contributions, and each stage's backward computes its
 * own uses' part. So every stage that reads it holds a copy with the same
 * initial value, and the runner adds the holders' parts before the update
 * (pp_run.c), as Megatron-LM does with its embedding group. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "parallel/pp.h"
#include "sgrt/train.h"

typedef struct cut {
  const sg_graph *src;
  const int *stage_of; /* per op */
  int k, stages, m;
  bool forward_only; /* sg__pp_micro_forward: no backward */
  int64_t batch;
  sg_graph *g;
  int32_t *map;   /* source tensor -> stage graph tensor, -1 */
  bool *batched;  /* source tensor -> follows the batch (micro_dims) */
  int *last_use;  /* source tensor -> the last stage that reads it, -1 */
  int *first_use; /* source tensor -> the first stage that reads it, -1 */
  sg__pp_stage *st;
} cut;

static int producer_stage(const cut *c, int32_t t) {
  int32_t p = c->src->tensors[t].producer;
  return p < 0 ? -1 : c->stage_of[p];
}

/* The micro-batch shape of source tensor t: the first dim of a tensor that
 * follows the batch shrinks by M. A tensor follows the batch when it is an
 * input whose first dim is the batch, or is computed from one, and its first
 * dim is a multiple of the batch: [batch, ...] and also [batch * seq, ...],
 * the rows of a transformer's activations (a reshape of [batch, seq, ...]).
 * Everything built from the micro-batch inputs must come out that way.
 * Weights, running statistics and constants never follow the batch, even
 * when a dim happens to equal it (16 channels at batch 16). */
static void micro_dims(const cut *c, int32_t t, int64_t *dims) {
  const sg__tensor *x = &c->src->tensors[t];
  memcpy(dims, x->dims, sizeof(int64_t) * SG_MAX_DIMS);
  if (c->batched[t] && x->ndim >= 1 && x->dims[0] % c->batch == 0) dims[0] = x->dims[0] / c->m;
}

/* Which source tensors derive from the batch (micro_dims): the inputs of
 * batch rows, then, in op order, every output of an op that reads one. */
static void find_batched(cut *c) {
  const sg_graph *s = c->src;
  for (uint32_t t = 0; t < s->n_tensors; t++) {
    const sg__tensor *x = &s->tensors[t];
    c->batched[t] = x->producer < 0 && x->role == SG_ROLE_INPUT && x->ndim >= 1 && x->dims[0] == c->batch;
  }
  for (uint32_t k = 0; k < s->n_ops; k++) {
    const sg__op *op = &s->ops[k];
    bool any = false;
    for (int i = 0; i < op->n_inputs; i++) any |= op->inputs[i] >= 0 && c->batched[op->inputs[i]];
    for (int i = 0; i < op->n_outputs; i++) c->batched[op->outputs[i]] = any;
  }
}

static sg_status check_graph(const cut *c, sg_tensor loss) {
  const sg_graph *s = c->src;
  bool *used = sg__calloc((size_t)c->stages, sizeof *used);
  int32_t *param_stage = sg__malloc(sizeof(int32_t) * (s->n_tensors + 1));
  sg_status st = SG_OK;
  if (used == NULL || param_stage == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
    goto out;
  }
  for (uint32_t t = 0; t < s->n_tensors; t++) param_stage[t] = -1;
  for (uint32_t k = 0; k < s->n_ops && st == SG_OK; k++) {
    const sg__op *op = &s->ops[k];
    int sk = c->stage_of[k];
    used[sk] = true;
    for (int i = 0; i < op->n_inputs && st == SG_OK; i++) {
      int32_t t = op->inputs[i];
      if (t < 0) continue;
      const sg__tensor *x = &s->tensors[t];
      int ps = producer_stage(c, t);
      if (ps > sk)
        st = sg__error(SG_ERR_INVALID_ARG,
                       "sg__pp_split: the stages are not acyclic: op '%s' (stage %d) reads '%s' from op "
                       "'%s' (stage %d)",
                       op->name, sk, x->name, s->ops[x->producer].name, ps);
      else if (ps >= 0 && ps < sk && x->dtype != SG_F32)
        st = sg__error(SG_ERR_UNSUPPORTED, "sg__pp_split: boundary tensor '%s' is %s; only f32 is sent",
                       x->name, sg_dtype_name(x->dtype));
      else if (x->role == SG_ROLE_STATE) {
        /* Running statistics move in the forward pass of the stage that owns them: copies on two stages
         * would each see other activations. A parameter is tied instead (its gradients add up). */
        if (param_stage[t] >= 0 && param_stage[t] != sk)
          st = sg__error(SG_ERR_UNSUPPORTED,
                         "sg__pp_split: %s '%s' is used on stages %d and %d (only a parameter may be read "
                         "on several stages: a tied weight)",
                         sg_role_name(x->role), x->name, param_stage[t], sk);
        param_stage[t] = sk;
      }
    }
  }
  for (int k = 0; k < c->stages && st == SG_OK; k++)
    if (!used[k])
      st = sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: stage %d has no op (stages must be 0..%d, each used)",
                     k, c->stages - 1);
  if (st == SG_OK) {
    const sg__tensor *l = &s->tensors[loss.id];
    if (l->producer < 0 || c->stage_of[l->producer] != c->stages - 1 || sg__numel(l->ndim, l->dims) != 1 ||
        !sg__is_float(l->dtype))
      st = sg__error(SG_ERR_INVALID_ARG,
                     "sg__pp_split: loss '%s' must be one float element produced on the last stage (%d)",
                     l->name, c->stages - 1);
  }
out:
  sg__free(used);
  sg__free(param_stage);
  return st;
}

/* An op that sg_graph_backward() or an optimizer appended: autodiff gives
 * everything it appends role GRADIENT (graph.h's grad_mode), an optimizer
 * writes the parameters. By role, not by kind: forward ops (slice, sum_to,
 * broadcast_to) also serve as backward ones, and kinds are numbered in the
 * order they were added, forward and backward mixed. */
static bool training_op(const sg_graph *g, const sg__op *op) {
  if (op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE) return true;
  for (int i = 0; i < op->n_outputs; i++) {
    sg_role r = g->tensors[op->outputs[i]].role;
    if (r == SG_ROLE_GRADIENT || r == SG_ROLE_OPTIMIZER_STATE) return true;
  }
  return false;
}

static sg_status check_args(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int32_t n_ops,
                            int stages, int stage, int m) {
  if (fwd == NULL || stage_of_op == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: NULL %s", fwd == NULL ? "graph" : "stage_of_op");
  if (!fwd->finalized) return sg__error(SG_ERR_STATE, "sg__pp_split: the graph is not finalized");
  if (stages < 1 || stages > SG__PP_MAX_STAGES || stage < 0 || stage >= stages)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: stage %d of %d stages (stages must be 1..%d)", stage,
                     stages, SG__PP_MAX_STAGES);
  if (m < 1 || m > SG__PP_MAX_MICRO)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: %d micro-batches (must be 1..%d)", m,
                     SG__PP_MAX_MICRO);
  if (n_ops != (int32_t)fwd->n_ops)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: %d stage entries for a graph of %u ops", n_ops,
                     fwd->n_ops);
  if (loss.id < 0 || (uint32_t)loss.id >= fwd->n_tensors)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: loss id %d is not a tensor of the graph", loss.id);
  for (int32_t k = 0; k < n_ops; k++) {
    if (stage_of_op[k] < 0 || stage_of_op[k] >= stages)
      return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: op '%s' has stage %d (must be 0..%d)",
                       fwd->ops[k].name, stage_of_op[k], stages - 1);
    sg_op_kind kd = fwd->ops[k].kind;
    if (training_op(fwd, &fwd->ops[k]))
      return sg__error(SG_ERR_STATE,
                       "sg__pp_split: op '%s' (%s): give the forward graph, without backward "
                       "or optimizer ops",
                       fwd->ops[k].name, sg_op_kind_name(kd));
  }
  return SG_OK;
}

/* The batch: the first dim of the first input of rank >= 1. */
static sg_status find_batch(cut *c) {
  for (uint32_t i = 0; i < c->src->n_inputs; i++) {
    const sg__tensor *x = &c->src->tensors[c->src->inputs[i]];
    if (x->ndim < 1) continue;
    c->batch = x->dims[0];
    if (c->batch % c->m != 0)
      return sg__error(SG_ERR_INVALID_ARG,
                       "sg__pp_split: the batch of %lld (first dim of input '%s') does "
                       "not divide into %d micro-batches",
                       (long long)c->batch, x->name, c->m);
    return SG_OK;
  }
  return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: the graph has no input with a batch dim");
}

static sg_status push_id(int32_t **arr, int *n, int32_t id) {
  int32_t *a = sg__realloc(*arr, sizeof(int32_t) * (size_t)(*n + 1));
  if (a == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
  a[(*n)++] = id;
  *arr = a;
  return SG_OK;
}

/* Brings source tensor t into the stage graph as a source. */
static sg_status add_source(cut *c, int32_t t) {
  const sg__tensor *x = &c->src->tensors[t];
  int64_t dims[SG_MAX_DIMS];
  micro_dims(c, t, dims);
  bool boundary = x->producer >= 0; /* checked: produced on stage k-1 */
  sg_role role = boundary ? SG_ROLE_PARAMETER : x->role;
  const void *data = boundary || x->role == SG_ROLE_INPUT ? NULL : x->data;
  sg_tensor n = sg_graph_add_tensor(c->g, x->name, x->dtype, role, x->ndim, dims, data);
  if (n.id < 0) return sg_graph_status(c->g);
  c->map[t] = n.id;
  sg__pp_stage *st = c->st;
  if (boundary) return push_id(&st->recv, &st->n_recv, t);
  if (x->role != SG_ROLE_INPUT) return SG_OK;
  int before = st->n_inputs;
  SG_CHECK(push_id(&st->inputs, &st->n_inputs, n.id));
  uint8_t *b = sg__realloc(st->batched, (size_t)st->n_inputs);
  if (b == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
  b[before] = x->ndim >= 1 && x->dims[0] == c->batch;
  st->batched = b;
  return SG_OK;
}

static sg_status add_op(cut *c, uint32_t k) {
  const sg__op *op = &c->src->ops[k];
  sg_tensor in[16];
  if (op->n_inputs > 16)
    return sg__error(SG_ERR_UNSUPPORTED, "sg__pp_split: op '%s' has %d inputs (at most 16 here)", op->name,
                     op->n_inputs);
  for (int i = 0; i < op->n_inputs; i++) {
    int32_t t = op->inputs[i];
    if (t >= 0 && c->map[t] < 0) SG_CHECK(add_source(c, t));
    in[i] = (sg_tensor){t < 0 ? -1 : c->map[t]};
  }
  /* A reshape to batch rows ([batch * seq, width]) names its rows in its
   * attribute: the micro-batch's. */
  sg_attr attrs[1];
  int64_t shape[SG_MAX_DIMS];
  const sg_attr *use = op->attrs;
  if (op->kind == SG_OP_RESHAPE && op->n_attrs == 1 && c->batched[op->outputs[0]]) {
    micro_dims(c, op->outputs[0], shape);
    attrs[0] = op->attrs[0];
    attrs[0].ints = shape;
    attrs[0].count = c->src->tensors[op->outputs[0]].ndim;
    use = attrs;
  }
  sg_tensor outs[SG__MAX_OUTPUTS];
  int n_outs = 0;
  SG_CHECK(
      sg_graph_add_op(c->g, op->kind, op->n_inputs, in, op->n_attrs, use, SG__MAX_OUTPUTS, outs, &n_outs));
  if (n_outs != op->n_outputs)
    return sg__error(SG_ERR_INTERNAL, "sg__pp_split: op '%s' rebuilt with %d outputs, not %d", op->name,
                     n_outs, op->n_outputs);
  for (int i = 0; i < n_outs; i++) {
    const sg__tensor *x = &c->src->tensors[op->outputs[i]];
    SG_CHECK(sg_tensor_set_name(c->g, outs[i], x->name));
    c->map[op->outputs[i]] = outs[i].id;
    /* Micro-batching must scale exactly the batch dim: an op that mixes
     * samples or fixes the batch in an attribute (a reshape to [16, -1])
     * would compute something else per micro-batch. */
    int64_t want[SG_MAX_DIMS];
    micro_dims(c, op->outputs[i], want);
    const sg__tensor *y = &c->g->tensors[outs[i].id];
    /* A per-channel vector (batch norm's saved mean) whose size equals the
     * batch keeps its size: it does not depend on the batch either. */
    bool same = x->ndim == 1 && y->ndim == 1 && y->dims[0] == x->dims[0];
    if (!same && (y->ndim != x->ndim || memcmp(y->dims, want, sizeof(int64_t) * (size_t)x->ndim) != 0)) {
      char a[SG__SHAPE_STR], b[SG__SHAPE_STR];
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg__pp_split: op '%s' gives '%s' the shape %s per micro-batch, expected %s: its "
                       "shape does not follow the batch",
                       op->name, x->name, sg__shape_str(a, y->dtype, y->ndim, y->dims),
                       sg__shape_str(b, x->dtype, x->ndim, want));
    }
  }
  return SG_OK;
}

void sg__pp_tensor_holders(const sg_graph *fwd, const int *stage_of, int stages, int32_t t, uint8_t *holds) {
  memset(holds, 0, (size_t)stages);
  const sg__tensor *x = &fwd->tensors[t];
  if (x->producer >= 0) holds[stage_of[x->producer]] = 1;
  for (uint32_t o = 0; o < fwd->n_ops; o++)
    for (int i = 0; i < fwd->ops[o].n_inputs; i++)
      if (fwd->ops[o].inputs[i] == t) holds[stage_of[o]] = 1;
}

/* A parameter that ops of two stages or more read. */
static bool tied_weight(const cut *c, uint32_t t) {
  const sg__tensor *x = &c->src->tensors[t];
  return x->role == SG_ROLE_PARAMETER && x->producer < 0 && c->first_use[t] >= 0 &&
         c->first_use[t] != c->last_use[t];
}

/* The tied weights this stage holds, with their keys (every tied weight's place in the source graph,
 * whether held here or not) and holders. */
static sg_status add_tied(cut *c) {
  sg__pp_stage *st = c->st;
  const sg_graph *s = c->src;
  uint8_t *holds = sg__malloc((size_t)c->stages);
  if (holds == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
  int key = 0, n_key = 0, n_off = 0, n_holders = 0;
  sg_status rc = SG_OK;
  for (uint32_t t = 0; t < s->n_tensors && rc == SG_OK; t++) {
    if (!tied_weight(c, t)) continue;
    if (key == SG__PP_MAX_TIED) {
      rc = sg__error(SG_ERR_UNSUPPORTED, "sg__pp_split: more than %d weights tied across stages ('%s')",
                     SG__PP_MAX_TIED, s->tensors[t].name);
      break;
    }
    int k = key++;
    if (c->map[t] < 0) continue;
    if (st->tied_off == NULL) rc = push_id(&st->tied_off, &n_off, 0);
    if (rc == SG_OK) rc = push_id(&st->tied, &st->n_tied, c->map[t]);
    if (rc == SG_OK) rc = push_id(&st->tied_key, &n_key, k);
    sg__pp_tensor_holders(s, c->stage_of, c->stages, (int32_t)t, holds);
    for (int j = 0; j < c->stages && rc == SG_OK; j++)
      if (holds[j]) rc = push_id(&st->tied_holders, &n_holders, j);
    if (rc == SG_OK) rc = push_id(&st->tied_off, &n_off, n_holders);
  }
  sg__free(holds);
  return rc;
}

/* Non-last stages: L = sum_j reduce_sum(send_j * send_grad_j). */
static sg_status add_surrogate(cut *c) {
  sg__pp_stage *st = c->st;
  sg_tensor total = SG_NO_TENSOR;
  st->send_grad = sg__calloc((size_t)st->n_send + 1, sizeof(int32_t));
  if (st->send_grad == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
  for (int j = 0; j < st->n_send; j++) {
    const sg__tensor *x = &c->g->tensors[st->send[j]];
    char name[SG__MAX_NAME];
    if ((size_t)snprintf(name, sizeof name, "%s.pp_grad", x->name) >= sizeof name)
      return sg__error(SG_ERR_RANGE, "sg__pp_split: tensor name '%s' is too long", x->name);
    sg_tensor gin = sg_input(c->g, name, x->dtype, x->ndim, x->dims);
    st->send_grad[j] = gin.id;
    sg_tensor s = sg_reduce_sum(c->g, sg_mul(c->g, (sg_tensor){st->send[j]}, gin), 0, NULL, 0);
    total = j == 0 ? s : sg_add(c->g, total, s);
  }
  if (total.id < 0) return sg_graph_status(c->g);
  SG_CHECK(sg_tensor_set_name(c->g, total, "pp.surrogate_loss"));
  st->loss = total.id;
  return SG_OK;
}

static sg_status build(cut *c, sg_tensor loss) {
  sg__pp_stage *st = c->st;
  const sg_graph *s = c->src;
  for (uint32_t k = 0; k < s->n_ops; k++)
    if (c->stage_of[k] == c->k) SG_CHECK(add_op(c, k));
  /* A tensor from an earlier stage that a later one reads passes through
   * this one (messages go to the next stage only): it is received like any
   * boundary input and sent on; the surrogate loss hands its gradient back
   * unchanged, plus whatever this stage's own uses add. */
  for (uint32_t t = 0; t < s->n_tensors; t++) {
    int ps = producer_stage(c, (int32_t)t);
    if (ps >= 0 && ps < c->k && c->last_use[t] > c->k && c->map[t] < 0) SG_CHECK(add_source(c, (int32_t)t));
  }
  /* What the next stage receives: everything from here or before that is
   * read after this stage, in source tensor order (the next stage derives
   * the same set and order from the same source graph). */
  for (uint32_t t = 0; t < s->n_tensors && c->k + 1 < c->stages; t++) {
    int ps = producer_stage(c, (int32_t)t);
    if (ps >= 0 && ps <= c->k && c->last_use[t] > c->k) SG_CHECK(push_id(&st->send, &st->n_send, c->map[t]));
  }
  if (st->n_send > SG__PP_MAX_BOUNDARY || st->n_recv > SG__PP_MAX_BOUNDARY)
    return sg__error(SG_ERR_UNSUPPORTED, "sg__pp_split: stage %d has %d/%d boundary tensors (at most %d)",
                     c->k, st->n_recv, st->n_send, SG__PP_MAX_BOUNDARY);
  if (c->k + 1 < c->stages) {
    if (st->n_send == 0)
      return sg__error(SG_ERR_UNSUPPORTED, "sg__pp_split: stage %d sends nothing to stage %d", c->k,
                       c->k + 1);
    SG_CHECK(add_surrogate(c));
  } else {
    st->loss = c->map[loss.id];
  }
  /* recv holds source ids until here, in the order this stage first read
   * them; the previous stage sends in source tensor order, and tensors of
   * one shape would otherwise swap unnoticed. From here on: ids of g. */
  for (int j = 1; j < st->n_recv; j++)
    for (int i = j; i > 0 && st->recv[i - 1] > st->recv[i]; i--) {
      int32_t t = st->recv[i];
      st->recv[i] = st->recv[i - 1];
      st->recv[i - 1] = t;
    }
  for (int j = 0; j < st->n_recv; j++) st->recv[j] = c->map[st->recv[j]];
  SG_CHECK(add_tied(c));
  /* A stage of tensor groups plans this forward graph (pp_tp.c), and its plan sees only this stage's use of
   * a tied weight, which it might split; the holders' gradient sum needs every share to hold it whole. A
   * tensor plan keeps a graph output whole and a weight read twice replicated (tp_plan.c counts an output
   * as a use), so the tied weights are marked outputs here, where every plan of the stage (the share's,
   * the checkpoint's, the heal's) gets its graph. */
  for (int i = 0; i < st->n_tied && c->forward_only; i++)
    SG_CHECK(sg_graph_mark_output(c->g, (sg_tensor){st->tied[i]}));
  SG_CHECK(sg_graph_mark_output(c->g, (sg_tensor){st->loss}));
  for (int j = 0; j < st->n_send; j++) SG_CHECK(sg_graph_mark_output(c->g, (sg_tensor){st->send[j]}));
  if (c->forward_only) return SG_OK;
  return sg__pp_stage_backward(st);
}

sg_status sg__pp_stage_backward(sg__pp_stage *st) {
  SG_CHECK(sg_graph_backward(st->g, (sg_tensor){st->loss}));
  st->recv_grad = sg__calloc((size_t)st->n_recv + 1, sizeof(int32_t));
  if (st->recv_grad == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
  for (int j = 0; j < st->n_recv; j++) {
    sg_tensor gr;
    if (sg_graph_grad(st->g, (sg_tensor){st->recv[j]}, &gr) != SG_OK)
      return sg__error(SG_ERR_UNSUPPORTED,
                       "sg__pp_split: stage %d's loss does not depend on its boundary input '%s' (no "
                       "gradient to send back)",
                       st->stage, st->g->tensors[st->recv[j]].name);
    st->recv_grad[j] = gr.id;
    /* Kept between calls, so the runner can send it after the pass. */
    SG_CHECK(sg_graph_mark_output(st->g, gr));
  }
  return SG_OK;
}

void sg__pp_stage_destroy(sg__pp_stage *st) {
  if (st == NULL) return;
  sg_graph_destroy(st->g);
  sg__free(st->recv);
  sg__free(st->recv_grad);
  sg__free(st->send);
  sg__free(st->send_grad);
  sg__free(st->inputs);
  sg__free(st->batched);
  sg__free(st->tied);
  sg__free(st->tied_key);
  sg__free(st->tied_off);
  sg__free(st->tied_holders);
  sg__free(st);
}

static sg_status split(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int32_t n_ops, int stages,
                       int stage, int micro_batches, bool forward_only, sg__pp_stage **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg__pp_split: out is NULL");
  *out = NULL;
  SG_CHECK(check_args(fwd, loss, stage_of_op, n_ops, stages, stage, micro_batches));
  for (uint32_t t = 0; t < fwd->n_tensors; t++)
    if (fwd->tensors[t].role == SG_ROLE_GRADIENT || fwd->tensors[t].role == SG_ROLE_OPTIMIZER_STATE)
      return sg__error(SG_ERR_STATE, "sg__pp_split: tensor '%s' is a %s: give the forward graph",
                       fwd->tensors[t].name, sg_role_name(fwd->tensors[t].role));
  cut c = {.src = fwd,
           .stage_of = stage_of_op,
           .k = stage,
           .stages = stages,
           .m = micro_batches,
           .forward_only = forward_only};
  SG_CHECK(find_batch(&c));
  SG_CHECK(check_graph(&c, loss));
  sg_status st = SG_OK;
  c.st = sg__calloc(1, sizeof *c.st);
  c.map = sg__malloc(sizeof(int32_t) * (fwd->n_tensors + 1));
  c.last_use = sg__malloc(sizeof(int) * (fwd->n_tensors + 1));
  c.first_use = sg__malloc(sizeof(int) * (fwd->n_tensors + 1));
  c.batched = sg__malloc(fwd->n_tensors + 1);
  if (c.st == NULL || c.map == NULL || c.last_use == NULL || c.first_use == NULL || c.batched == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg__pp_split: out of memory");
    goto fail;
  }
  for (uint32_t t = 0; t < fwd->n_tensors; t++) c.map[t] = c.last_use[t] = c.first_use[t] = -1;
  find_batched(&c);
  for (uint32_t k = 0; k < fwd->n_ops; k++)
    for (int i = 0; i < fwd->ops[k].n_inputs; i++) {
      int32_t t = fwd->ops[k].inputs[i];
      if (t >= 0 && stage_of_op[k] > c.last_use[t]) c.last_use[t] = stage_of_op[k];
      if (t >= 0 && (c.first_use[t] < 0 || stage_of_op[k] < c.first_use[t])) c.first_use[t] = stage_of_op[k];
    }
  *c.st = (sg__pp_stage){.stage = stage,
                         .stages = stages,
                         .micro_batches = micro_batches,
                         .batch = c.batch,
                         .micro_batch = c.batch / micro_batches,
                         .loss = -1};
  SG_CHECK_GOTO(sg_graph_create(&c.st->g), st, fail);
  c.g = c.st->g;
  SG_CHECK_GOTO(build(&c, loss), st, fail);
  sg__free(c.map);
  sg__free(c.last_use);
  sg__free(c.first_use);
  sg__free(c.batched);
  *out = c.st;
  return SG_OK;
fail:
  sg__free(c.map);
  sg__free(c.last_use);
  sg__free(c.first_use);
  sg__free(c.batched);
  sg__pp_stage_destroy(c.st);
  return st;
}

sg_status sg__pp_split(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int32_t n_ops, int stages,
                       int stage, int micro_batches, sg__pp_stage **out) {
  return split(fwd, loss, stage_of_op, n_ops, stages, stage, micro_batches, false, out);
}

sg_status sg__pp_split_forward(const sg_graph *fwd, sg_tensor loss, const int *stage_of_op, int32_t n_ops,
                               int stages, int stage, int micro_batches, sg__pp_stage **out) {
  SG_CHECK(split(fwd, loss, stage_of_op, n_ops, stages, stage, micro_batches, true, out));
  sg_status st = sg_graph_finalize((*out)->g);
  if (st != SG_OK) {
    sg__pp_stage_destroy(*out);
    *out = NULL;
  }
  return st;
}

/* One stage of everything, without backward: the same rebuild at the
 * micro-batch shapes, and the same checks that the shapes follow the batch. */
sg_status sg__pp_micro_forward(const sg_graph *fwd, sg_tensor loss, int micro_batches, sg_graph **out,
                               int64_t *batch) {
  if (out == NULL || fwd == NULL || batch == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_micro_forward: NULL argument");
  *out = NULL;
  int *zero = sg__calloc(fwd->n_ops + 1, sizeof *zero);
  if (zero == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__pp_micro_forward: out of memory");
  sg__pp_stage *st = NULL;
  sg_status s = split(fwd, loss, zero, (int32_t)fwd->n_ops, 1, 0, micro_batches, true, &st);
  sg__free(zero);
  SG_CHECK(s);
  if ((s = sg_graph_finalize(st->g)) == SG_OK) {
    *out = st->g;
    *batch = st->batch;
    st->g = NULL;
  }
  sg__pp_stage_destroy(st);
  return s;
}

sg_status sg__pp_stages_from_partition(const sg_partition *p, int32_t n_ops, int *stage_of_op) {
  if (p == NULL || stage_of_op == NULL || n_ops != sg_graph_num_ops(sg_partition_graph(p)))
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg__pp_stages_from_partition: NULL argument or %d ops for a graph of %d", n_ops,
                     p ? sg_graph_num_ops(sg_partition_graph(p)) : -1);
  int parts = sg_partition_num_parts(p), order[SG__PP_MAX_STAGES], pos[SG__PP_MAX_STAGES];
  if (parts < 1 || parts > SG__PP_MAX_STAGES)
    return sg__error(SG_ERR_INVALID_ARG, "sg__pp_stages_from_partition: %d parts (at most %d stages)", parts,
                     SG__PP_MAX_STAGES);
  /* A free-mode partition may still be a pipeline: its stage order says
   * (SG_ERR_CYCLE when it is not). */
  SG_CHECK(sg_partition_stage_order(p, order, parts));
  for (int i = 0; i < parts; i++) {
    if (order[i] < 0 || order[i] >= parts)
      return sg__error(SG_ERR_INTERNAL, "sg__pp_stages_from_partition: stage order names part %d", order[i]);
    pos[order[i]] = i;
  }
  for (int32_t k = 0; k < n_ops; k++) {
    int part;
    SG_CHECK(sg_partition_op_part(p, k, &part));
    stage_of_op[k] = pos[part];
  }
  return SG_OK;
}
