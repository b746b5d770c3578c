/* oneDNN plumbing: engine and stream, status translation, and the generic
 * "memories + steps" kernel (see dnnl_common.h). */
#include <stdio.h>
#include <string.h>

#include "backend/cpu/dnnl_common.h"

sg_status sg__dnnl_state_init(sg__cpu_state *st) {
  dnnl_engine_t eng = NULL;
  dnnl_stream_t stream = NULL;
  if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
    return sg__error(SG_ERR_INTERNAL, "cpu backend: oneDNN could not create a CPU engine");
  if (dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success) {
    dnnl_engine_destroy(eng);
    return sg__error(SG_ERR_INTERNAL, "cpu backend: oneDNN could not create a stream");
  }
  st->engine = eng;
  st->stream = stream;
  return SG_OK;
}

bool sg__dnnl_native_bf16(void) {
  /* oneDNN's effective ISA honours ONEDNN_MAX_CPU_ISA, so a run that imitates
   * an AVX2 machine is refused as that machine would be. The ISA values are
   * nested bit masks: AMX includes avx512_core_bf16. */
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

void sg__dnnl_state_fini(sg__cpu_state *st) {
  if (st->stream) dnnl_stream_destroy(st->stream);
  if (st->engine) dnnl_engine_destroy(st->engine);
  st->stream = st->engine = NULL;
}

sg_status sg__dnnl_state_wait(sg__cpu_state *st) {
  if (dnnl_stream_wait(st->stream) != dnnl_success)
    return sg__error(SG_ERR_INTERNAL, "cpu backend: oneDNN stream wait failed");
  return SG_OK;
}

static const char *dnnl_status_name(dnnl_status_t s) {
  switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "no implementation";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
  }
  return "unknown status";
}

sg_status sg__dnnl_fail(const sg__op *op, dnnl_status_t s, const char *what) {
  sg_status st = s == dnnl_out_of_memory   ? SG_ERR_NO_MEMORY
                 : s == dnnl_unimplemented ? SG_ERR_UNSUPPORTED
                                           : SG_ERR_INTERNAL;
  if (op == NULL) return sg__error(st, "cpu backend: oneDNN %s failed: %s", what, dnnl_status_name(s));
  return sg__op_error(op, st, "oneDNN %s failed: %s", what, dnnl_status_name(s));
}

static void dk_destroy(sg__kernel *base) {
  sg__dk *k = (sg__dk *)base;
  if (k->fini) k->fini(k);
  for (int i = 0; i < k->nsteps; i++)
    if (k->steps[i].prim) dnnl_primitive_destroy(k->steps[i].prim);
  for (int i = 0; i < k->nmems; i++)
    if (k->mems[i]) dnnl_memory_destroy(k->mems[i]);
  if (k->attr) dnnl_primitive_attr_destroy(k->attr);
}

sg_status sg__dk_new(sg__cpu_state *st, const sg__op *op, size_t size, sg__cpu_run_fn run,
                     void (*fini)(sg__dk *k), sg__dk **out) {
  sg__kernel *base;
  SG_CHECK(sg__cpu_kernel_new(op, size, run, &base));
  sg__dk *k = (sg__dk *)base;
  base->destroy = dk_destroy;
  k->st = st;
  k->engine = st->engine;
  k->stream = st->stream;
  k->op = op;
  k->fini = fini;
  dnnl_status_t s = dnnl_primitive_attr_create(&k->attr);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(k->attr, dnnl_scratchpad_mode_user);
  if (s != dnnl_success) {
    dk_destroy(base);
    sg__free(base);
    return sg__dnnl_fail(op, s, "attribute creation");
  }
  *out = k;
  return SG_OK;
}

sg_status sg__dk_create(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                        size_t size, sg__cpu_run_fn run, void (*fini)(sg__dk *k), sg__dk_build_fn build,
                        sg__kernel **out) {
  for (int i = 0; i < op->n_inputs + op->n_outputs; i++) {
    int32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
    if (t >= 0 && g->tensors[t].dtype != SG_F32) {
      char why[SG__MAX_NAME < 200 ? SG__MAX_NAME : 200];
      snprintf(why, sizeof why, " (tensor '%.100s' is %s; this kernel needs f32)", g->tensors[t].name,
               sg_dtype_name(g->tensors[t].dtype));
      return sg__cpu_unsupported(g, op, why);
    }
  }
  sg__dk *k;
  SG_CHECK(sg__dk_new(st, op, size, run, fini, &k));
  sg_status s = build(k, g, op, mode);
  if (s == SG_OK) s = sg__cpu_ws_reserve(st, k->ws_need);
  k->op = NULL;
  if (s != SG_OK) {
    sg__dk_free(k);
    return s;
  }
  *out = &k->base;
  return SG_OK;
}

void sg__dk_plain_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims) {
  dnnl_dim_t strides[DNNL_MAX_NDIMS];
  dnnl_dim_t s = 1;
  for (int i = ndims - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
  sg__dk_strided_md(md, ndims, dims, strides);
}

void sg__dk_strided_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dim_t *dims, const dnnl_dim_t *strides) {
  /* oneDNN reads whole dnnl_dims_t arrays. */
  dnnl_dims_t d = {0}, s_ = {0};
  for (int i = 0; i < ndims; i++) d[i] = dims[i], s_[i] = strides[i];
  /* Cannot fail for valid f32 dims (checked by the graph verifier). */
  dnnl_status_t s = dnnl_memory_desc_init_by_strides(md, ndims, d, dnnl_f32, s_);
  SG_ASSERT(s == dnnl_success);
}

static sg_status mem_add(sg__dk *k, const dnnl_memory_desc_t *md, int bind, int *idx) {
  if (k->nmems >= SG__DK_MAX_MEMS)
    return sg__op_error(k->op, SG_ERR_INTERNAL, "too many oneDNN memories in one kernel");
  int i = k->nmems;
  dnnl_status_t s = dnnl_memory_create(&k->mems[i], md, k->engine, DNNL_MEMORY_NONE);
  if (s != dnnl_success) {
    k->mems[i] = NULL;
    return sg__dnnl_fail(k->op, s, "memory creation");
  }
  k->bind[i] = bind;
  if (bind == SG__DK_SCRATCH) {
    /* 64-byte aligned slices of the workspace, one after the other. */
    size_t bytes = (dnnl_memory_desc_get_size(md) + 63) & ~(size_t)63;
    k->off[i] = k->ws_need;
    if (!sg__add_size(k->ws_need, bytes, &k->ws_need))
      return sg__op_error(k->op, SG_ERR_NO_MEMORY, "scratch size overflows");
  }
  k->nmems++;
  *idx = i;
  return SG_OK;
}

sg_status sg__dk_user(sg__dk *k, const dnnl_memory_desc_t *md, int bind, int *idx) {
  SG_ASSERT(bind != SG__DK_SCRATCH);
  return mem_add(k, md, bind, idx);
}

sg_status sg__dk_scratch(sg__dk *k, const dnnl_memory_desc_t *md, int *idx) {
  return mem_add(k, md, SG__DK_SCRATCH, idx);
}

static sg_status reorder_step(sg__dk *k, int src, int dst) {
  const dnnl_memory_desc_t *smd, *dmd;
  SG_DNNL(k, dnnl_memory_get_memory_desc(k->mems[src], &smd), "memory query");
  SG_DNNL(k, dnnl_memory_get_memory_desc(k->mems[dst], &dmd), "memory query");
  dnnl_primitive_desc_t pd;
  SG_DNNL(k, dnnl_reorder_primitive_desc_create(&pd, smd, k->engine, dmd, k->engine, k->attr),
          "reorder creation");
  int kinds[] = {DNNL_ARG_FROM, DNNL_ARG_TO};
  int mems[] = {src, dst};
  return sg__dk_step_add(k, pd, 2, kinds, mems);
}

sg_status sg__dk_input(sg__dk *k, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, int bind,
                       int *idx) {
  int u = 0;
  SG_CHECK(sg__dk_user(k, user, bind, &u));
  if (dnnl_memory_desc_equal(user, want)) {
    *idx = u;
    return SG_OK;
  }
  int w;
  SG_CHECK(sg__dk_scratch(k, want, &w));
  SG_CHECK(reorder_step(k, u, w));
  *idx = w;
  return SG_OK;
}

sg_status sg__dk_output(sg__dk *k, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *want, int bind,
                        int *idx) {
  int u = 0;
  SG_CHECK(sg__dk_user(k, user, bind, &u));
  if (dnnl_memory_desc_equal(user, want)) {
    *idx = u;
    return SG_OK;
  }
  if (k->npost >= 4) return sg__op_error(k->op, SG_ERR_INTERNAL, "too many output reorders");
  int w;
  SG_CHECK(sg__dk_scratch(k, want, &w));
  k->post_src[k->npost] = w;
  k->post_dst[k->npost] = u;
  k->npost++;
  *idx = w;
  return SG_OK;
}

sg_status sg__dk_step_add(sg__dk *k, dnnl_primitive_desc_t pd, int nargs, const int *arg_kinds,
                          const int *mem_idx) {
  sg_status st = SG_OK;
  if (k->nsteps >= SG__DK_MAX_STEPS || nargs + 1 > SG__DK_MAX_ARGS) {
    dnnl_primitive_desc_destroy(pd);
    return sg__op_error(k->op, SG_ERR_INTERNAL, "too many oneDNN steps or arguments in one kernel");
  }
  sg__dk_step *s = &k->steps[k->nsteps];
  for (int i = 0; i < nargs; i++) {
    s->args[i].arg = arg_kinds[i];
    s->args[i].memory = k->mems[mem_idx[i]];
  }
  s->nargs = nargs;
  const dnnl_memory_desc_t *spd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (spd != NULL && dnnl_memory_desc_get_size(spd) > 0) {
    int sp;
    SG_CHECK_GOTO(sg__dk_scratch(k, spd, &sp), st, out);
    s->args[s->nargs].arg = DNNL_ARG_SCRATCHPAD;
    s->args[s->nargs].memory = k->mems[sp];
    s->nargs++;
  }
  dnnl_status_t ds = dnnl_primitive_create(&s->prim, pd);
  if (ds != dnnl_success) {
    s->prim = NULL;
    st = sg__dnnl_fail(k->op, ds, "primitive creation");
    goto out;
  }
  k->nsteps++;
out:
  dnnl_primitive_desc_destroy(pd);
  return st;
}

sg_status sg__dk_step_user(sg__dk *k, dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *md, int n_in,
                           const int *arg_kinds) {
  int mems[SG__DK_MAX_ARGS];
  sg_status st = SG_OK;
  SG_ASSERT(n_in >= 0 && n_in < SG__DK_MAX_ARGS);
  for (int i = 0; i <= n_in; i++)
    SG_CHECK_GOTO(sg__dk_user(k, md, i < n_in ? SG__DK_IN(i) : SG__DK_OUT(0), &mems[i]), st, fail);
  return sg__dk_step_add(k, pd, n_in + 1, arg_kinds, mems);
fail:
  dnnl_primitive_desc_destroy(pd);
  return st;
}

sg_status sg__dk_finish(sg__dk *k) {
  for (int i = 0; i < k->npost; i++) SG_CHECK(reorder_step(k, k->post_src[i], k->post_dst[i]));
  k->npost = 0;
  return SG_OK;
}

sg_status sg__dk_bind(sg__dk *k, void *const *in, void *const *out) {
  for (int i = 0; i < k->nmems; i++) {
    int b = k->bind[i];
    void *p = b == SG__DK_SCRATCH ? (void *)(k->st->ws + k->off[i]) : b >= 1000 ? out[b - 1000] : in[b];
    if (p == NULL)
      return sg__error(SG_ERR_INVALID_ARG, "%s '%s': buffer for %s %d is NULL", sg_op_kind_name(k->base.kind),
                       k->base.name, b >= 1000 ? "output" : "input", b >= 1000 ? b - 1000 : b);
    if (dnnl_memory_set_data_handle(k->mems[i], p) != dnnl_success)
      return sg__error(SG_ERR_INTERNAL, "%s '%s': oneDNN could not bind a buffer",
                       sg_op_kind_name(k->base.kind), k->base.name);
  }
  return SG_OK;
}

sg_status sg__dk_exec(sg__dk *k, int first, int last) {
  for (int i = first; i < last; i++) {
    dnnl_status_t s =
        dnnl_primitive_execute(k->steps[i].prim, k->stream, k->steps[i].nargs, k->steps[i].args);
    if (s != dnnl_success)
      return sg__error(SG_ERR_INTERNAL, "%s '%s': oneDNN execution of step %d failed: %s",
                       sg_op_kind_name(k->base.kind), k->base.name, i, dnnl_status_name(s));
  }
  return SG_OK;
}

sg_status sg__dk_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                     const sg__run_ctx *ctx) {
  (void)st;
  (void)ctx;
  sg__dk *k = (sg__dk *)base;
  SG_CHECK(sg__dk_bind(k, in, out));
  return sg__dk_exec(k, 0, k->nsteps);
}
