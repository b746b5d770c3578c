/* Fused groups after grouping (fuse.c): their place in memory planning
 * (layouts, in-place outputs) and their kernels in the IR.
 *
 * Index space. A group computes over its anchor's output shape (the input
 * shape of an anchor that sums: the kernel then ends in a sum, see
 * kernel_ir.h), reading inputs of other shapes broadcast. A group whose members are all
 * layout-agnostic (SG__OP_LAYOUT_AGNOSTIC: same dims everywhere, zeros to
 * zeros) may instead run over whatever storage layout the backend picked
 * for its operands -- they then share one (the CPU backend joins the
 * operands of such ops into one layout group) -- as a flat array of the
 * slot's elements, padding included. Every other group computes in the
 * plain index space, so its operands must stay plain. */
#include <stdio.h>
#include <string.h>

#include "compile/plan_internal.h"

static const int32_t *members(const sg__plan *p, const sg__fused_group *gr) {
  return p->fused_ops + gr->first_op;
}

static bool same_dims(const sg__tensor *a, const sg__tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Whether every member runs unchanged on any layout its operands share. */
static bool layout_agnostic(const sg_graph *g, const sg__plan *p, const sg__fused_group *gr) {
  for (uint32_t j = 0; j < gr->n_ops; j++) {
    const sg__op *op = &g->ops[members(p, gr)[j]];
    if (!(sg__op_flags(op->kind) & SG__OP_LAYOUT_AGNOSTIC) || op->n_outputs != 1) return false;
    const sg__tensor *y = &g->tensors[op->outputs[0]];
    if (y->dtype != SG_F32) return false;
    for (int i = 0; i < op->n_inputs; i++)
      if (!same_dims(&g->tensors[op->inputs[i]], y) || g->tensors[op->inputs[i]].dtype != SG_F32)
        return false;
  }
  return true;
}

void sg__fuse_layouts(const sg_graph *g, const sg__plan *p, uint8_t *may) {
  for (uint32_t gi = 0; gi < p->n_groups; gi++) {
    const sg__fused_group *gr = &p->groups[gi];
    for (uint32_t j = 0; j < gr->n_ops; j++) {
      const sg__op *op = &g->ops[members(p, gr)[j]];
      if (op->n_outputs > 0) may[op->outputs[0]] = 1; /* an update has none */
    }
    if (layout_agnostic(g, p, gr)) continue;
    for (uint32_t i = 0; i < gr->n_in + gr->n_out; i++) may[p->fused_io[gr->first_io + i]] = 0;
  }
  /* The outputs read outside were set above as member outputs; an operand
   * that is not transient must stay plain whatever its group. */
  for (uint32_t gi = 0; gi < p->n_groups; gi++) {
    const sg__fused_group *gr = &p->groups[gi];
    for (uint32_t i = 0; i < gr->n_in + gr->n_out; i++) {
      int32_t t = p->fused_io[gr->first_io + i];
      if (p->buf_kind[t] != SG__BUF_TRANSIENT) may[t] = 0;
    }
  }
}

uint32_t sg__fuse_inplace(const sg_graph *g, sg__plan *p, int32_t gi, int32_t pos) {
  const sg__fused_group *gr = &p->groups[gi];
  const int32_t *in = p->fused_io + gr->first_io, *out = in + gr->n_in;
  int8_t *over = p->fused_over + gr->first_io + gr->n_in;
  uint32_t n = 0;
  bool taken[SG__KIR_MAX_INPUTS] = {0};
  for (uint32_t o = 0; o < gr->n_out; o++) {
    const sg__tensor *y = &g->tensors[out[o]];
    if (p->buf_kind[out[o]] != SG__BUF_TRANSIENT) continue;
    /* A sum's output has another shape than the elements the kernel walks. */
    if (out[o] == g->ops[gr->anchor].outputs[0] && (sg__op_flags(g->ops[gr->anchor].kind) & SG__OP_SUM))
      continue;
    for (uint32_t i = 0; i < gr->n_in && i < SG__KIR_MAX_INPUTS; i++) {
      const sg__tensor *x = &g->tensors[in[i]];
      if (taken[i] || p->buf_kind[in[i]] != SG__BUF_TRANSIENT || p->last_use[in[i]] != pos) continue;
      if (x->dtype != y->dtype || !same_dims(x, y) || p->bytes[in[i]] != p->bytes[out[o]]) continue;
      taken[i] = true;
      over[o] = (int8_t)i;
      p->alias_of[out[o]] = p->alias_of[in[i]] >= 0 ? p->alias_of[in[i]] : in[i];
      n++;
      break;
    }
  }
  return n;
}

/* Element strides of `t` read over the iteration dims (right-aligned
 * broadcasting: 0 along a dim it lacks or has as 1). */
static void broadcast_strides(const sg__tensor *t, int nd, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    int td = d - (nd - t->ndim);
    if (td < 0 || (t->dims[td] == 1 && dims[d] != 1)) {
      strides[d] = 0;
    } else {
      strides[d] = s;
    }
    if (td >= 0) s *= t->dims[td];
  }
}

/* transpose's input over its output's dims: output dim d walks input dim
 * perm[d], whose contiguous stride it takes. */
static void permuted_strides(const sg__op *op, const sg__tensor *x, int64_t *strides) {
  int64_t s[SG__KIR_MAX_DIMS], acc = 1;
  for (int d = x->ndim - 1; d >= 0; d--) s[d] = acc, acc *= x->dims[d];
  const int64_t *perm = sg__attr_ints(op, 0);
  for (int d = 0; d < x->ndim; d++) strides[d] = s[perm[d]];
}

static sg_status build_one(const sg_graph *g, const sg__plan *p, uint32_t gi, sg__kir_kernel *k) {
  const sg__fused_group *gr = &p->groups[gi];
  const int32_t *mem = members(p, gr), *io = p->fused_io + gr->first_io;
  const sg__op *anchor = &g->ops[gr->anchor];
  char name[SG__KIR_NAME_MAX + 1];
  snprintf(name, sizeof name, "sgk_%u", gi);
  if (gr->n_ops == 1 && sg__fuse_update_rule(g, anchor)) return sg__fuse_update_kernel(g, anchor, name, k);
  sg__kir_sum sum = SG__KIR_SUM_NONE;
  int sum_axis = 0;
  double sum_scale = 1;
  bool sums = sg__fuse_sum_rule(g, anchor, &sum, &sum_axis, &sum_scale);
  const sg__tensor *y = &g->tensors[sums ? anchor->inputs[0] : anchor->outputs[0]];
  /* Flat over the slots when the operands share a backend layout. */
  bool transpose = gr->n_ops == 1 && anchor->kind == SG_OP_TRANSPOSE;
  bool flat = !transpose && layout_agnostic(g, p, gr);
  int64_t n_flat = (int64_t)(p->bytes[io[0]] / sizeof(float));
  for (uint32_t i = 0; flat && i < gr->n_in + gr->n_out; i++) flat = p->bytes[io[i]] == p->bytes[io[0]];
  if (flat) sg__kir_init(k, name, 1, &n_flat);
  else sg__kir_init(k, name, y->ndim, y->dims);
  if (sums) sg__kir_set_sum(k, sum, sum_axis);
  int32_t tensor_of[SG__KIR_MAX_INSTRS < 256 ? SG__KIR_MAX_INSTRS : 256];
  int value_of[sizeof tensor_of / sizeof tensor_of[0]];
  int n_map = 0;
  for (uint32_t i = 0; i < gr->n_in; i++) {
    const sg__tensor *x = &g->tensors[io[i]];
    int64_t strides[SG__KIR_MAX_DIMS];
    if (transpose) permuted_strides(anchor, x, strides);
    else if (!flat) broadcast_strides(x, y->ndim, y->dims, strides);
    sg__kir_input_add(k, x->dtype, flat ? NULL : strides);
  }
  for (uint32_t j = 0; j < gr->n_ops; j++) {
    const sg__op *op = &g->ops[mem[j]];
    int vals[8];
    if (op->n_inputs > 8) return sg__error(SG_ERR_INTERNAL, "fusion: %s has too many inputs", op->name);
    for (int i = 0; i < op->n_inputs; i++) {
      int32_t t = op->inputs[i];
      vals[i] = -1;
      for (int m = 0; m < n_map && vals[i] < 0; m++)
        if (tensor_of[m] == t) vals[i] = value_of[m];
      if (vals[i] >= 0) continue;
      for (uint32_t e = 0; e < gr->n_in && vals[i] < 0; e++)
        if (io[e] == t) vals[i] = sg__kir_load(k, (int)e);
      /* A builder error (out of memory) is sticky: sg__kir_finish reports it. */
      if (k->error != SG_OK) return sg__kir_finish(k);
      if (vals[i] < 0 || n_map >= (int)(sizeof tensor_of / sizeof tensor_of[0]))
        return sg__error(SG_ERR_INTERNAL, "fusion: group %u: operand of %s not found", gi, op->name);
      tensor_of[n_map] = t;
      value_of[n_map++] = vals[i];
    }
    /* The sum's value is its input's, stored summed below. */
    int v = sums && mem[j] == gr->anchor ? vals[0] : sg__fuse_op_expr(k, op, vals);
    if (v < 0 || n_map >= (int)(sizeof tensor_of / sizeof tensor_of[0])) break;
    tensor_of[n_map] = op->outputs[0];
    value_of[n_map++] = v;
  }
  for (uint32_t o = 0; o < gr->n_out && k->error == SG_OK; o++) {
    int v = -1;
    for (int m = 0; m < n_map && v < 0; m++)
      if (tensor_of[m] == io[gr->n_in + o]) v = value_of[m];
    if (sums && io[gr->n_in + o] == anchor->outputs[0]) sg__kir_store_sum(k, v, sum_scale);
    else sg__kir_store(k, v);
    int8_t over = p->fused_over[gr->first_io + gr->n_in + o];
    if (over >= 0) sg__kir_set_inplace(k, (int)o, over);
  }
  return sg__kir_finish(k);
}

void sg__fuse_kernel_text(sg__strbuf *b, const sg__kir_kernel *k, bool with_name) {
  sg__strbuf_put(b, "kernel %s dims", with_name ? k->name : "");
  for (int d = 0; d < k->ndim; d++) sg__strbuf_put(b, " %lld", (long long)k->dims[d]);
  sg__strbuf_put(b, "\n");
  for (int i = 0; i < k->n_in; i++) {
    sg__strbuf_put(b, "in %d", (int)k->in[i].dtype);
    for (int d = 0; d < k->ndim; d++) sg__strbuf_put(b, " %lld", (long long)k->in[i].strides[d]);
    sg__strbuf_put(b, "\n");
  }
  if (k->sum) sg__strbuf_put(b, "sum %d axis %d\n", k->sum, k->sum_axis);
  for (int i = 0; i < k->n_pro; i++)
    sg__strbuf_put(b, "pro %d %d %d %a\n", k->pro[i].op, k->pro[i].a, k->pro[i].b, k->pro[i].imm);
  for (int o = 0; o < k->n_out; o++) {
    sg__strbuf_put(b, "out %d over %d", (int)k->out[o], k->out_over[o]);
    if (k->out_sum[o]) sg__strbuf_put(b, " sum %a", k->out_scale[o]);
    sg__strbuf_put(b, "\n");
  }
  for (uint32_t i = 0; i < k->n_ins; i++) {
    const sg__kir_instr *in = &k->ins[i];
    /* %a: the exact binary value of the immediate. */
    sg__strbuf_put(b, "%d %d %d %d %d %a\n", in->op, in->dtype, in->a, in->b, in->c, in->imm);
  }
}

/* plan.unique: each group's kernel, unless it is the same program as an
 * earlier one's (text without the name equal; hashed first), which it then
 * runs under that one's name. */
static sg_status dedupe(sg__plan *p) {
  p->unique = sg__malloc(p->n_groups * sizeof *p->unique);
  uint64_t *hash = sg__malloc(p->n_groups * sizeof *hash);
  char **text = sg__calloc(p->n_groups, sizeof *text);
  sg_status st = SG_OK;
  if (p->unique == NULL || hash == NULL || text == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
    goto out;
  }
  for (uint32_t gi = 0; gi < p->n_groups; gi++) {
    sg__strbuf b = {0};
    sg__fuse_kernel_text(&b, &p->kernels[gi], false);
    if (b.failed) {
      sg__free(b.s);
      st = sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
      goto out;
    }
    text[gi] = b.s;
    hash[gi] = sg__fnv1a64(SG__FNV1A64_SEED, b.s, b.len);
    uint32_t same = gi;
    for (uint32_t j = 0; j < gi && same == gi; j++)
      if (hash[j] == hash[gi] && strcmp(text[j], text[gi]) == 0) same = j;
    if (same == gi) p->unique[p->n_unique++] = &p->kernels[gi];
    else memcpy(p->kernels[gi].name, p->kernels[same].name, sizeof p->kernels[gi].name);
  }
out:
  for (uint32_t gi = 0; text != NULL && gi < p->n_groups; gi++) sg__free(text[gi]);
  sg__free(text);
  sg__free(hash);
  return st;
}

sg_status sg__fuse_kernels(const sg_graph *g, sg__plan *p) {
  if (p->n_groups == 0) return SG_OK;
  p->kernels = sg__calloc(p->n_groups, sizeof(sg__kir_kernel));
  if (p->kernels == NULL) return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  for (uint32_t gi = 0; gi < p->n_groups; gi++) SG_CHECK(build_one(g, p, gi, &p->kernels[gi]));
  return dedupe(p);
}
