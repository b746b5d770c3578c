/* Gradient buckets (SPEC C5): which gradients a data-parallel step averages,
 * grouped in the order backward produces them, and the schedule positions
 * where the session's hooks hand a bucket to the scheduler thread and wait
 * for all of them. */
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "graph/graph.h"
#include "parallel/dist_internal.h"
#include "sgrt/train.h"

uint8_t *sg__dist_grad_barrier(const sg_graph *g) {
  uint8_t *mask = sg__calloc(g->n_tensors ? g->n_tensors : 1, 1);
  if (mask == NULL) return NULL;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    sg_tensor grad;
    if (g->tensors[t].role == SG_ROLE_PARAMETER && sg_graph_grad(g, (sg_tensor){(int32_t)t}, &grad) == SG_OK)
      mask[grad.id] = 1;
  }
  return mask;
}

void sg__dist_plan_free(sg__dist_plan *p) {
  sg__free(p->grads);
  sg__free(p->buckets);
  sg__free(p->posted_after);
  sg__free(p->after_at);
  sg__free(p->before_at);
  sg__free(p->dtype_ids);
  *p = (sg__dist_plan){0};
}

/* Production order; ties (one op producing several gradients) in tensor
 * order, so every rank sorts the same way. */
static int by_pos(const void *a, const void *b) {
  const sg__dist_grad *x = a, *y = b;
  if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
  return (x->param > y->param) - (x->param < y->param);
}

/* Every parameter gradient the schedule computes, with its slot. */
static sg_status collect(sg_session *s, const int32_t *order, uint32_t n_order, sg__dist_plan *p) {
  const sg_graph *g = sg__session_graph(s);
  int32_t *pos_of_op = sg__malloc((g->n_ops ? g->n_ops : 1) * sizeof(int32_t));
  p->grads = sg__malloc((g->n_tensors ? g->n_tensors : 1) * sizeof(sg__dist_grad));
  if (pos_of_op == NULL || p->grads == NULL) {
    sg__free(pos_of_op);
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  }
  for (uint32_t k = 0; k < g->n_ops; k++) pos_of_op[k] = -1;
  for (uint32_t i = 0; i < n_order; i++) pos_of_op[order[i]] = (int32_t)i;
  sg_status st = SG_OK;
  for (uint32_t t = 0; t < g->n_tensors && st == SG_OK; t++) {
    if (g->tensors[t].role != SG_ROLE_PARAMETER) continue;
    sg_tensor grad;
    if (sg_graph_grad(g, (sg_tensor){(int32_t)t}, &grad) != SG_OK) continue; /* not trained */
    const sg__tensor *gt = &g->tensors[grad.id];
    /* A gradient that no kept op produces (dead code) is never used. */
    if (gt->producer < 0 || pos_of_op[gt->producer] < 0) continue;
    size_t bytes;
    void *addr = sg__session_tensor_host(s, grad.id, &bytes);
    if (addr == NULL && sg__session_tensor_addr(s, grad.id, NULL) != NULL)
      st = SG_ERR_NO_MEMORY; /* reported */
    if (addr == NULL) continue;
    if (gt->dtype != SG_F32 || bytes % 4 != 0)
      st = sg__error(
          SG_ERR_UNSUPPORTED,
          "sg_dist_create: gradient '%s' is %s; data parallelism averages f32 gradients only (for now)",
          gt->name, sg_dtype_name(gt->dtype));
    else
      p->grads[p->n_grads++] =
          (sg__dist_grad){(int32_t)t, grad.id, (uint32_t)pos_of_op[gt->producer], addr, bytes};
  }
  sg__free(pos_of_op);
  if (st == SG_OK && p->n_grads == 0)
    st = sg__error(
        SG_ERR_INVALID_ARG,
        "sg_dist_create: no parameter of the graph has a gradient that a step computes; build it with "
        "sg_graph_backward() and an optimizer");
  return st;
}

/* PyTorch DDP's rule: a bucket closes once it holds at least bucket_bytes,
 * so a gradient larger than the cap gets a bucket of its own. */
static sg_status group(sg__dist_plan *p, size_t bucket_bytes) {
  p->buckets = sg__calloc(p->n_grads, sizeof(sg__dist_bucket));
  if (p->buckets == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  sg__dist_bucket *b = NULL;
  size_t packed = 0; /* bytes of this bucket's gradients that go through the flat buffer */
  for (uint32_t i = 0; i < p->n_grads; i++) {
    if (b == NULL) {
      b = &p->buckets[p->n_buckets++];
      b->first = i;
      packed = 0;
    }
    b->count++;
    b->bytes += p->grads[i].bytes;
    b->ready_pos = p->grads[i].pos;
    p->total_bytes += p->grads[i].bytes;
    if (p->grads[i].bytes < SG__DIST_INPLACE_BYTES) packed += p->grads[i].bytes;
    if (packed > p->flat_bytes) p->flat_bytes = packed;
    if (b->bytes >= bucket_bytes) b = NULL;
  }
  return SG_OK;
}

/* Where the hooks go: after each bucket's last gradient, and before the
 * first op that reads a synced gradient. That op waits for every bucket, not
 * only its own: then no update runs unless all gradients were averaged, and
 * a failed step leaves the parameters as they were. With updates last
 * (hooks.h) the first update reads the bucket finished last anyway (buckets
 * run last layers first, updates in graph order), so nothing is lost. */
static sg_status place_hooks(const sg_session *s, const int32_t *order, uint32_t n_order, sg__dist_plan *p) {
  const sg_graph *g = sg__session_graph(s);
  size_t n = n_order ? n_order : 1;
  p->n_order = n_order;
  p->posted_after = sg__calloc(n, sizeof(uint32_t));
  p->after_at = sg__calloc(n, 1);
  p->before_at = sg__calloc(n, 1);
  uint8_t *synced = sg__calloc(g->n_tensors ? g->n_tensors : 1, 1);
  if (!p->posted_after || !p->after_at || !p->before_at || !synced) {
    sg__free(synced);
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  }
  for (uint32_t b = 0; b < p->n_buckets; b++) p->after_at[p->buckets[b].ready_pos] = 1;
  for (uint32_t i = 0, b = 0; i < n_order; i++) {
    while (b < p->n_buckets && p->buckets[b].ready_pos <= i) b++;
    p->posted_after[i] = b;
  }
  for (uint32_t i = 0; i < p->n_grads; i++) synced[p->grads[i].grad] = 1;
  p->wait_pos = n_order;
  const char *reader = NULL;
  for (uint32_t i = 0; i < n_order && p->wait_pos == n_order; i++) {
    const sg__op *op = &g->ops[order[i]];
    for (int k = 0; k < op->n_inputs; k++)
      if (op->inputs[k] >= 0 && synced[op->inputs[k]]) {
        p->wait_pos = i;
        reader = op->name;
        break;
      }
  }
  sg__free(synced);
  uint32_t last_ready = p->buckets[p->n_buckets - 1].ready_pos;
  if (p->wait_pos <= last_ready)
    return sg__error(
        SG_ERR_UNSUPPORTED,
        "sg_dist_create: op '%s' reads a parameter gradient before backward has produced all of them "
        "(position %u of the schedule, the last gradient at %u); data parallelism needs every "
        "reader of a gradient after the backward pass",
        reader, p->wait_pos, last_ready);
  /* Every op before the wait looks at the job's failure flag (step.c,
   * before_op): a rank lost in forward or backward is given up at the next
   * op, not when the step reaches its first allreduce. A before hook costs
   * no device synchronization, unlike an after hook. */
  for (uint32_t i = 0; i <= p->wait_pos && i < n_order; i++) p->before_at[i] = 1;
  return SG_OK;
}

/* SPEC M5: what every rank must agree on before the first allreduce, or the
 * collectives would pair buffers of different sizes (and the precision of
 * the products, or the copies would drift apart). */
static sg_status fingerprint(const sg_session *s, bool zero, sg__dist_plan *p) {
  const sg_graph *g = sg__session_graph(s);
  p->dtype_ids = sg__malloc(p->n_grads);
  if (p->dtype_ids == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory");
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  uint64_t v[2 + 2 * (2 + SG_MAX_DIMS)];
  v[0] = p->n_grads;
  v[1] = p->n_buckets;
  v[2] = zero; /* ZeRO-1 on some ranks only would pair different collectives */
  /* Copies whose products round differently (SG_MATMUL_PRECISION set on some
   * ranks only) would average gradients of different arithmetics and drift
   * apart without an error. */
  v[3] = sg__session_matmul_bf16(s);
  XXH3_64bits_update(&st, v, 4 * sizeof v[0]);
  for (uint32_t i = 0; i < p->n_grads; i++) {
    size_t k = 0;
    const int32_t ids[2] = {p->grads[i].param, p->grads[i].grad};
    for (int j = 0; j < 2; j++) {
      const sg__tensor *t = &g->tensors[ids[j]];
      v[k++] = (uint64_t)t->dtype;
      v[k++] = (uint64_t)t->ndim;
      for (int d = 0; d < t->ndim; d++) v[k++] = (uint64_t)t->dims[d];
    }
    v[k++] = p->grads[i].bytes;
    XXH3_64bits_update(&st, v, k * sizeof v[0]);
    p->dtype_ids[i] = (uint8_t)g->tensors[p->grads[i].grad].dtype;
  }
  for (uint32_t b = 0; b < p->n_buckets; b++) {
    v[0] = p->buckets[b].count;
    v[1] = p->buckets[b].bytes;
    XXH3_64bits_update(&st, v, 2 * sizeof v[0]);
  }
  /* The first step broadcasts these, one collective each, in tensor order. */
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    sg_role r = g->tensors[t].role;
    size_t bytes;
    if (r != SG_ROLE_PARAMETER && r != SG_ROLE_STATE && (r != SG_ROLE_OPTIMIZER_STATE || zero)) continue;
    if (sg__session_tensor_addr(s, (int32_t)t, &bytes) == NULL) continue;
    v[0] = (uint64_t)r;
    v[1] = bytes;
    XXH3_64bits_update(&st, v, 2 * sizeof v[0]);
  }
  p->topology_hash = XXH3_64bits_digest(&st);
  return SG_OK;
}

sg_status sg__dist_plan_build(sg_session *s, size_t bucket_bytes, bool zero, sg__dist_plan *out) {
  *out = (sg__dist_plan){0};
  uint32_t n_order;
  const int32_t *order = sg__session_order(s, &n_order);
  if (order == NULL) return sg__error(SG_ERR_INTERNAL, "sg_dist_create: the session is not compiled");
  sg_status st;
  SG_CHECK_GOTO(collect(s, order, n_order, out), st, fail);
  qsort(out->grads, out->n_grads, sizeof(sg__dist_grad), by_pos);
  SG_CHECK_GOTO(group(out, bucket_bytes), st, fail);
  SG_CHECK_GOTO(place_hooks(s, order, n_order, out), st, fail);
  SG_CHECK_GOTO(fingerprint(s, zero, out), st, fail);
  return SG_OK;
fail:
  sg__dist_plan_free(out);
  return st;
}
