/* Storage layouts of the CPU backend (cpu_internal.h): the plan_layouts
 * pass that keeps activations channel-blocked between oneDNN's
 * convolution, batch-norm and pooling kernels, and the layout adapter that
 * lets every other kernel run on blocked operands.
 *
 * The pass. oneDNN's fast convolutions work on nChw8c (AVX2) or nChw16c
 * (AVX-512) activations; with plain NCHW tensors between ops every
 * convolution reorders its input in and its output out, and batch norm and
 * pooling run their slower plain-layout kernels. Elementwise ops that keep
 * zeros at zero (relu, its backward, add/sub/mul of same-shape tensors,
 * mul_scalar) do not care about the layout as long as all their operands
 * share it, so the pass joins their operands into groups (union-find) and
 * makes a group blocked when
 *   - one of its tensors is an activation operand of a convolution,
 *     batch-norm or pooling op (forward or backward), and
 *   - every tensor in it is a 4-D f32 tensor of the transient region (the
 *     session reads and writes the others as plain bytes).
 * In ResNet-50 that is every activation and activation gradient from the
 * first convolution's output to the last block's relu; only the images
 * (an input), the global-average-pool and the classifier stay plain.
 *
 * Padding. A blocked tensor whose channel count is not a multiple of the
 * block has zero-filled padding channels: oneDNN's primitives and reorders
 * write them as zero, and the elementwise ops above map zeros to zeros, so
 * the padding stays zero whichever op wrote the slot; the planner sizes the
 * slot with the padding.
 *
 * The adapter. Any op with a blocked operand whose kernel family does not
 * take that layout (sg__cpu_layout_native) gets its ordinary kernel, created
 * as if all operands were plain, wrapped: blocked inputs are reordered into
 * plain copies in the state's second workspace `ws2` before it runs, and its
 * plain results reordered into the blocked outputs after. All input copies
 * are made before the kernel runs and all outputs written after it, so an
 * output that shares its input's slot stays correct. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/dnnl_common.h"

/* ---- the block oneDNN picks -------------------------------------------- */

void sg__cpu_layout_init(sg__cpu_state *st) {
  /* Ask oneDNN what a typical ResNet convolution (64 -> 64 channels, 3x3)
   * wants for its activations; use that block if it is a plain channel
   * block (nChw<b>c), else keep everything plain. */
  st->block = 0;
  const char *env = getenv("SG_CPU_LAYOUT"); /* "plain": the plain layout everywhere (for comparisons) */
  if (env != NULL && strcmp(env, "plain") == 0) return;
  dnnl_dims_t xd = {2, 64, 14, 14}, wd = {64, 64, 3, 3}, yd = {2, 64, 14, 14};
  dnnl_dims_t strides = {1, 1}, dil = {0, 0}, pad = {1, 1};
  dnnl_memory_desc_t xm, wm, ym;
  if (dnnl_memory_desc_init_by_tag(&xm, 4, xd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&wm, 4, wd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&ym, 4, yd, dnnl_f32, dnnl_format_tag_any) != dnnl_success)
    return;
  dnnl_convolution_desc_t d;
  dnnl_primitive_desc_t pd;
  if (dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &xm, &wm,
                                                 NULL, &ym, strides, dil, pad, pad) != dnnl_success ||
      dnnl_primitive_desc_create(&pd, &d, NULL, st->engine, NULL) != dnnl_success)
    return;
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if (md != NULL && md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 1 &&
      md->format_desc.blocking.inner_idxs[0] == 1) {
    int b = (int)md->format_desc.blocking.inner_blks[0];
    if (b == 8 || b == 16) st->block = b;
  }
  dnnl_primitive_desc_destroy(pd);
}

void sg__cpu_layout_fini(sg__cpu_state *st) {
  sg__free(st->lay);
  sg__cpu_aligned_free(st->ws2);
  st->lay = NULL;
  st->ws2 = NULL;
  st->n_lay = 0;
  st->ws2_size = 0;
  st->lay_graph = NULL;
}

sg__cpu_layout sg__cpu_tensor_layout(const sg__cpu_state *st, const sg_graph *g, int32_t t) {
  if (t < 0 || st->plain_only || st->lay_graph != (const void *)g || (uint32_t)t >= st->n_lay)
    return SG__CPU_PLAIN;
  return (sg__cpu_layout)st->lay[t];
}

void sg__dk_blocked_md(dnnl_memory_desc_t *md, const dnnl_dim_t *dims, int block) {
  dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
  dnnl_status_t s =
      dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, block == 16 ? dnnl_nChw16c : dnnl_nChw8c);
  SG_ASSERT(s == dnnl_success);
}

void sg__dk_tensor_md(sg__dk *k, const sg_graph *g, int32_t t, int ndims, const dnnl_dim_t *dims,
                      dnnl_memory_desc_t *md) {
  if (sg__cpu_tensor_layout(k->st, g, t) == SG__CPU_BLOCKED) {
    SG_ASSERT(ndims == 4);
    sg__dk_blocked_md(md, dims, k->st->block);
  } else {
    sg__dk_plain_md(md, ndims, dims);
  }
}

void sg__dk_compute_md(const sg__dk *k, int ndims, const dnnl_dim_t *dims, dnnl_memory_desc_t *md) {
  if (ndims == 4 && k->st->block > 0 && !k->st->plain_only) sg__dk_blocked_md(md, dims, k->st->block);
  else sg__dk_plain_md(md, ndims, dims);
}

static size_t blocked_bytes(const sg__tensor *t, int block) {
  dnnl_memory_desc_t md;
  dnnl_dim_t d[4] = {t->dims[0], t->dims[1], t->dims[2], t->dims[3]};
  sg__dk_blocked_md(&md, d, block);
  return dnnl_memory_desc_get_size(&md);
}

int64_t sg__cpu_tensor_flat(const sg__cpu_state *st, const sg_graph *g, int32_t t) {
  const sg__tensor *x = &g->tensors[t];
  if (sg__cpu_tensor_layout(st, g, t) == SG__CPU_BLOCKED) return (int64_t)(blocked_bytes(x, st->block) / 4);
  return sg__cpu_numel(x);
}

/* ---- the pass -------------------------------------------------------------- */

static int32_t find(int32_t *parent, int32_t t) {
  while (parent[t] != t) {
    parent[t] = parent[parent[t]];
    t = parent[t];
  }
  return t;
}

static void unite(int32_t *parent, int32_t a, int32_t b) {
  if (a < 0 || b < 0) return;
  a = find(parent, a);
  b = find(parent, b);
  if (a != b) parent[a < b ? b : a] = a < b ? a : b;
}

static bool same_dims(const sg__tensor *a, const sg__tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Elementwise kinds that map zero to zero and work on any layout shared by
 * all their operands (SG__OP_LAYOUT_AGNOSTIC; see the top of the file), on
 * f32 operands that all have the output's dims. */
static bool layout_agnostic(const sg_graph *g, const sg__op *op) {
  if (!(sg__op_flags(op->kind) & SG__OP_LAYOUT_AGNOSTIC)) return false;
  if (op->n_outputs < 1 || op->n_inputs < 1 || op->inputs[0] < 0) return false;
  const sg__tensor *y = &g->tensors[op->outputs[0]];
  if (g->tensors[op->inputs[0]].dtype != SG_F32) return false;
  for (int i = 0; i < op->n_inputs; i++)
    if (op->inputs[i] < 0 || !same_dims(&g->tensors[op->inputs[i]], y)) return false;
  return true;
}

/* Marks the activation operands (not weights) of the kinds whose oneDNN
 * kernels run fastest blocked. */
static void mark_wanted(const sg_graph *g, const sg__op *op, uint8_t *wants) {
  int ins[3] = {-1, -1, -1}, outs = -1;
  switch (op->kind) {
    case SG_OP_CONV2D: ins[0] = 0, outs = 0; break;                          /* x -> y */
    case SG_OP_CONV2D_BACKWARD_DATA: ins[0] = 0, outs = 0; break;            /* dy, w -> dx */
    case SG_OP_CONV2D_BACKWARD_WEIGHT: ins[0] = 0, ins[1] = 1; break;        /* dy, x -> dw */
    case SG_OP_BATCH_NORM: ins[0] = 0, outs = 0; break;                      /* x -> y */
    case SG_OP_BATCH_NORM_BACKWARD: ins[0] = 0, ins[1] = 1, outs = 0; break; /* dy, x -> dx */
    case SG_OP_MAX_POOL2D:
    case SG_OP_AVG_POOL2D:
      if (sg__cpu_pool_uses_c(g, op)) return;
      ins[0] = 0, outs = 0;
      break;
    case SG_OP_MAX_POOL2D_BACKWARD: /* dy, x -> dx */
    case SG_OP_AVG_POOL2D_BACKWARD: /* dy -> dx */
      if (sg__cpu_pool_uses_c(g, op)) return;
      ins[0] = 0, ins[1] = op->kind == SG_OP_MAX_POOL2D_BACKWARD ? 1 : -1, outs = 0;
      break;
    default: return;
  }
  for (int i = 0; i < 3; i++)
    if (ins[i] >= 0 && ins[i] < op->n_inputs && op->inputs[ins[i]] >= 0) wants[op->inputs[ins[i]]] = 1;
  if (outs >= 0 && op->n_outputs > outs) wants[op->outputs[outs]] = 1;
}

sg_status sg__cpu_plan_layouts(void *state, const sg_graph *g, const uint8_t *may_relayout, size_t *bytes) {
  sg__cpu_state *st = state;
  if (st == NULL || g == NULL || may_relayout == NULL || bytes == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "cpu plan_layouts: NULL argument");
  uint32_t nt = g->n_tensors;
  size_t n = nt ? nt : 1;
  uint8_t *lay = sg__calloc(n, 1);
  int32_t *parent = sg__malloc(n * sizeof(int32_t));
  uint8_t *wants = sg__calloc(n, 1), *ok = sg__malloc(n);
  if (!lay || !parent || !wants || !ok) {
    sg__free(lay);
    sg__free(parent);
    sg__free(wants);
    sg__free(ok);
    return sg__error(SG_ERR_NO_MEMORY, "cpu plan_layouts: out of memory");
  }
  for (uint32_t t = 0; t < nt; t++) parent[t] = (int32_t)t;
  if (st->block > 0) {
    for (uint32_t k = 0; k < g->n_ops; k++) {
      const sg__op *op = &g->ops[k];
      mark_wanted(g, op, wants);
      if (!layout_agnostic(g, op)) continue;
      for (int i = 0; i < op->n_inputs; i++) unite(parent, op->inputs[i], op->outputs[0]);
    }
    /* A group is blocked when it wants to be and all its tensors may be. */
    memset(ok, 1, n);
    for (uint32_t t = 0; t < nt; t++) {
      const sg__tensor *x = &g->tensors[t];
      bool cand = may_relayout[t] && x->ndim == 4 && x->dtype == SG_F32;
      int32_t r = find(parent, (int32_t)t);
      if (!cand) ok[r] = 0;
      if (wants[t]) wants[r] = 1;
    }
    for (uint32_t t = 0; t < nt; t++) {
      int32_t r = find(parent, (int32_t)t);
      if (ok[r] && wants[r]) lay[t] = SG__CPU_BLOCKED;
    }
  }
  uint32_t n_blocked = 0;
  for (uint32_t t = 0; t < nt; t++) {
    bytes[t] = g->tensors[t].nbytes;
    if (lay[t] == SG__CPU_BLOCKED) {
      bytes[t] = blocked_bytes(&g->tensors[t], st->block);
      n_blocked++;
    }
  }
  sg__free(parent);
  sg__free(wants);
  sg__free(ok);
  sg__free(st->lay);
  st->lay = lay;
  st->n_lay = nt;
  st->lay_graph = g;
  SG_DEBUG("cpu backend: %u of %u tensors in layout nChw%dc", n_blocked, nt, st->block);
  return SG_OK;
}

/* ---- which kernels take blocked operands ---------------------------------- */

bool sg__cpu_layout_native(const sg__cpu_state *st, const sg_graph *g, const sg__op *op) {
  bool any = false, same = true;
  sg__cpu_layout first = SG__CPU_PLAIN;
  int n = 0;
  for (int i = 0; i < op->n_inputs + op->n_outputs; i++) {
    int32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
    if (t < 0) continue;
    sg__cpu_layout l = sg__cpu_tensor_layout(st, g, t);
    if (n++ == 0) first = l;
    any |= l != SG__CPU_PLAIN;
    same &= l == first;
  }
  if (!any) return true;
  switch (op->kind) {
    case SG_OP_CONV2D:
    case SG_OP_CONV2D_BACKWARD_DATA:
    case SG_OP_CONV2D_BACKWARD_WEIGHT:
    case SG_OP_BATCH_NORM:
    case SG_OP_BATCH_NORM_BACKWARD: return true;
    case SG_OP_MAX_POOL2D:
    case SG_OP_AVG_POOL2D:
    case SG_OP_MAX_POOL2D_BACKWARD:
    case SG_OP_AVG_POOL2D_BACKWARD: return !sg__cpu_pool_uses_c(g, op);
    default: return same && layout_agnostic(g, op);
  }
}

/* ---- the adapter ------------------------------------------------------------ */

typedef struct adapt_conv {
  int index;     /* operand: input index, or n_inputs + output index */
  bool to_plain; /* an input (or an updated input): reorder before */
  bool to_block; /* an output (or an updated input): reorder after */
  size_t off;    /* plain copy in ws2 */
  dnnl_memory_t blk, pln;
  dnnl_primitive_t in_prim, out_prim;
} adapt_conv;

typedef struct adapt_kernel {
  sg__kernel base;
  sg__kernel *inner;
  int n_in, n_out, nconv;
  adapt_conv *conv; /* one per blocked operand (room for all operands) */
  void **in, **out; /* the inner kernel's operand arrays, filled per run */
  dnnl_stream_t stream;
} adapt_kernel;

static void adapt_destroy(sg__kernel *base) {
  adapt_kernel *k = (adapt_kernel *)base;
  if (k->inner) {
    if (k->inner->destroy) k->inner->destroy(k->inner);
    sg__free(k->inner);
  }
  for (int i = 0; k->conv != NULL && i < k->nconv; i++) {
    adapt_conv *c = &k->conv[i];
    if (c->in_prim) dnnl_primitive_destroy(c->in_prim);
    if (c->out_prim) dnnl_primitive_destroy(c->out_prim);
    if (c->blk) dnnl_memory_destroy(c->blk);
    if (c->pln) dnnl_memory_destroy(c->pln);
  }
  sg__free(k->conv);
  sg__free(k->in);
}

static sg_status reorder_exec(adapt_kernel *k, dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  if (dnnl_primitive_execute(p, k->stream, 2, args) != dnnl_success)
    return sg__error(SG_ERR_INTERNAL, "%s '%s': oneDNN layout reorder failed", sg_op_kind_name(k->base.kind),
                     k->base.name);
  return SG_OK;
}

static sg_status adapt_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                           const sg__run_ctx *ctx) {
  adapt_kernel *k = (adapt_kernel *)base;
  memcpy(k->in, in, (size_t)k->n_in * sizeof(void *));
  memcpy(k->out, out, (size_t)k->n_out * sizeof(void *));
  for (int i = 0; i < k->nconv; i++) {
    adapt_conv *c = &k->conv[i];
    void *user = c->index < k->n_in ? in[c->index] : out[c->index - k->n_in], *copy = st->ws2 + c->off;
    if (user == NULL)
      return sg__error(SG_ERR_INVALID_ARG, "%s '%s': buffer of operand %d is NULL",
                       sg_op_kind_name(base->kind), base->name, c->index);
    if (dnnl_memory_set_data_handle(c->blk, user) != dnnl_success ||
        dnnl_memory_set_data_handle(c->pln, copy) != dnnl_success)
      return sg__error(SG_ERR_INTERNAL, "%s '%s': oneDNN could not bind a buffer",
                       sg_op_kind_name(base->kind), base->name);
    if (c->to_plain) SG_CHECK(reorder_exec(k, c->in_prim, c->blk, c->pln));
    if (c->index < k->n_in) k->in[c->index] = copy;
    else k->out[c->index - k->n_in] = copy;
  }
  SG_CHECK(k->inner->run(st, k->inner, k->in, k->out, ctx));
  for (int i = 0; i < k->nconv; i++)
    if (k->conv[i].to_block) SG_CHECK(reorder_exec(k, k->conv[i].out_prim, k->conv[i].pln, k->conv[i].blk));
  return SG_OK;
}

static sg_status make_reorder(const sg__op *op, dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                              const dnnl_memory_desc_t *to, dnnl_primitive_t *out) {
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL);
  if (s == dnnl_success) {
    s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
  }
  if (s != dnnl_success) {
    *out = NULL;
    return sg__dnnl_fail(op, s, "layout reorder creation");
  }
  return SG_OK;
}

static sg_status adapt_build(adapt_kernel *k, sg__cpu_state *st, const sg_graph *g, const sg__op *op) {
  uint32_t mutated = sg__op_mutated_inputs(op);
  size_t ws = 0;
  for (int i = 0; i < op->n_inputs + op->n_outputs; i++) {
    int32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
    if (sg__cpu_tensor_layout(st, g, t) == SG__CPU_PLAIN) continue;
    const sg__tensor *x = &g->tensors[t];
    adapt_conv *c = &k->conv[k->nconv++];
    c->index = i;
    bool input = i < op->n_inputs, updated = input && i < 32 && (mutated >> i & 1u);
    c->to_plain = input;
    c->to_block = !input || updated;
    c->off = ws;
    if (!sg__add_size(ws, (x->nbytes + 63) & ~(size_t)63, &ws))
      return sg__op_error(op, SG_ERR_NO_MEMORY, "scratch size overflows");
    dnnl_dim_t d[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
    dnnl_memory_desc_t bm, pm;
    sg__dk_blocked_md(&bm, d, st->block);
    sg__dk_plain_md(&pm, 4, d);
    if (dnnl_memory_create(&c->blk, &bm, st->engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&c->pln, &pm, st->engine, DNNL_MEMORY_NONE) != dnnl_success)
      return sg__op_error(op, SG_ERR_NO_MEMORY, "could not create oneDNN memories");
    if (c->to_plain) SG_CHECK(make_reorder(op, st->engine, &bm, &pm, &c->in_prim));
    if (c->to_block) SG_CHECK(make_reorder(op, st->engine, &pm, &bm, &c->out_prim));
  }
  if (ws > st->ws2_size) {
    unsigned char *p = sg__cpu_aligned_alloc(ws);
    if (p == NULL)
      return sg__op_error(op, SG_ERR_NO_MEMORY, "out of memory for %zu bytes of layout scratch", ws);
    sg__cpu_aligned_free(st->ws2);
    st->ws2 = p;
    st->ws2_size = ws;
  }
  return SG_OK;
}

sg_status sg__cpu_create_adapted(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                 sg_status (*create)(sg__cpu_state *, const sg_graph *, const sg__op *,
                                                     sg__exec_mode, sg__kernel **),
                                 sg__kernel **out) {
  sg__kernel *base;
  SG_CHECK(sg__cpu_kernel_new(op, sizeof(adapt_kernel), adapt_run, &base));
  adapt_kernel *k = (adapt_kernel *)base;
  base->destroy = adapt_destroy;
  k->stream = st->stream;
  k->n_in = op->n_inputs;
  k->n_out = op->n_outputs;
  k->in = sg__calloc((size_t)op->n_inputs + (size_t)op->n_outputs + 1, sizeof(void *));
  k->conv = sg__calloc((size_t)op->n_inputs + (size_t)op->n_outputs + 1, sizeof(adapt_conv));
  sg_status s =
      k->in && k->conv ? SG_OK : sg__op_error(op, SG_ERR_NO_MEMORY, "out of memory creating its kernel");
  if (s == SG_OK) {
    k->out = k->in + op->n_inputs;
    s = adapt_build(k, st, g, op);
  }
  if (s == SG_OK) {
    st->plain_only = true;
    s = create(st, g, op, mode, &k->inner);
    st->plain_only = false;
  }
  if (s != SG_OK) {
    adapt_destroy(base);
    sg__free(base);
    return s;
  }
  SG_DEBUG("cpu backend: %s '%s' runs behind a layout adapter (%d blocked operands)",
           sg_op_kind_name(op->kind), op->name ? op->name : "?", k->nconv);
  *out = base;
  return SG_OK;
}
