/* Session lifecycle and compilation: plan, device memory, initial values,
 * constant folding, kernels. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/session_internal.h"

sg_session_params sg_session_params_init(void) { return (sg_session_params)SG_SESSION_PARAMS_INIT; }

bool sg__session_matmul_bf16(const sg_session *s) { return s->matmul_bf16; }

/* SG_MATMUL_DEFAULT comes from the environment's SG_MATMUL_PRECISION (as
 * SG_FUSION does for fusion), so that a distributed program's sessions, which
 * it does not create itself, can be switched too. The variable's message has
 * no function name: sg_dist_create_model reads it too. */
sg_status sg__matmul_precision_resolve(int asked, int *out) {
  if (asked == SG_MATMUL_F32 || asked == SG_MATMUL_BF16) {
    *out = asked;
    return SG_OK;
  }
  if (asked != SG_MATMUL_DEFAULT)
    return sg__error(
        SG_ERR_INVALID_ARG,
        "sg_session_create: matmul_precision is %d (0 default, 1 SG_MATMUL_F32, 2 SG_MATMUL_BF16)", asked);
  const char *env = getenv("SG_MATMUL_PRECISION");
  if (env == NULL || *env == '\0' || strcmp(env, "f32") == 0) *out = SG_MATMUL_F32;
  else if (strcmp(env, "bf16") == 0) *out = SG_MATMUL_BF16;
  else
    return sg__error(SG_ERR_INVALID_ARG, "SG_MATMUL_PRECISION is '%s' in the environment (f32 or bf16)", env);
  return SG_OK;
}

sg_status sg_session_create(const sg_graph *g, const sg_session_params *p, sg_session **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_session_create: out is NULL");
  *out = NULL;
  if (g == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_session_create: graph is NULL");
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_session_create: finalize the graph first");
  sg_session_params d = SG_SESSION_PARAMS_INIT;
  SG_CHECK(sg__params_read("sg_session_create",
                           SG__VERSIONED(sg_session_params, device, "SG_SESSION_PARAMS_INIT"), &d, p));
  p = &d;
  const sg__backend_i *be;
  int device;
  SG_CHECK(sg__backend_parse("sg_session_create", p->device ? p->device : "cpu", &be, &device));
  if (p->threads < 0) return sg__error(SG_ERR_INVALID_ARG, "sg_session_create: threads is %d", p->threads);
  if (p->fusion < -1 || p->fusion > 1)
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_create: fusion is %d (0 default, 1 on, -1 off)",
                     p->fusion);
  int matmul_precision = SG_MATMUL_F32;
  SG_CHECK(sg__matmul_precision_resolve(p->matmul_precision, &matmul_precision));
  int threads = p->threads;
  if (threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n > 0 ? (int)n : 1;
  }
  sg_session *s = sg__calloc(1, sizeof *s);
  if (s == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_session_create: out of memory");
  s->g = g;
  s->be = be;
  s->threads = threads;
  s->seed = p->seed;
  s->poison = p->poison;
  s->matmul_bf16 = matmul_precision == SG_MATMUL_BF16;
  /* SG_FUSION=0 turns fusion off for comparisons, whatever the parameters say. */
  const char *env = getenv("SG_FUSION");
  s->fusion = p->fusion >= 0 && !(env && strcmp(env, "0") == 0);
  if (p->trace != 0 && p->trace != 1) {
    sg__free(s);
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_create: trace is %d (0 off, 1 on)", p->trace);
  }
  if (p->trace) {
    s->tr_cap = p->trace_events ? p->trace_events : 262144;
    if (s->tr_cap > ((size_t)1 << 26)) {
      sg__free(s);
      return sg__error(SG_ERR_INVALID_ARG, "sg_session_create: trace_events is %zu; at most 2^26", s->tr_cap);
    }
    s->tr = sg__calloc(s->tr_cap, sizeof *s->tr);
    if (s->tr == NULL) {
      sg__free(s);
      return sg__error(SG_ERR_NO_MEMORY, "sg_session_create: out of memory for the timeline");
    }
  }
  sg__backend_config cfg = {threads, p->seed, device, matmul_precision == SG_MATMUL_BF16};
  sg_status st = be->create(&cfg, &s->be_state);
  if (st != SG_OK) {
    sg__free(s->tr);
    sg__free(s);
    return st;
  }
  /* Poisoning writes dead slots from the host. */
  if (s->poison && !be->is_host(s->be_state)) {
    be->destroy(s->be_state);
    sg__free(s->tr);
    sg__free(s);
    return sg__error(SG_ERR_UNSUPPORTED,
                     "sg_session_create: poison needs device 'cpu' (host memory), not '%s'", be->name);
  }
  *out = s;
  return SG_OK;
}

static void destroy_kernels(sg_session *s) {
  if (s->kernels)
    for (uint32_t i = 0; i < s->plan.n_order; i++) s->be->kernel_destroy(s->be_state, s->kernels[i]);
  if (s->eval_kernels)
    for (uint32_t i = 0; i < s->plan.n_eval; i++) s->be->kernel_destroy(s->be_state, s->eval_kernels[i]);
  sg__free(s->kernels);
  sg__free(s->eval_kernels);
  s->kernels = s->eval_kernels = NULL;
}

/* Frees everything compile made, leaving the session as created. */
static void release_compiled(sg_session *s) {
  destroy_kernels(s);
  sg__session_views_free(s);
  if (s->module) s->be->module_free(s->be_state, s->module);
  s->module = NULL;
  s->be->buffer_free(s->be_state, s->persistent);
  s->be->buffer_free(s->be_state, s->transient);
  s->persistent = s->transient = NULL;
  sg__plan_free(&s->plan);
  sg__free(s->tensor_ptr);
  sg__free(s->bound);
  sg__free(s->input_set);
  sg__free(s->op_in);
  sg__free(s->op_out);
  sg__free(s->flat);
  sg__free(s->poison_start);
  sg__free(s->poison_tensor);
  s->tensor_ptr = s->bound = s->flat = NULL;
  s->input_set = NULL;
  s->op_in = s->op_out = NULL;
  s->poison_start = NULL;
  s->poison_tensor = NULL;
  sg__profile_free(s);
  s->compiled = false;
}

void sg_session_destroy(sg_session *s) {
  if (s == NULL) return;
  release_compiled(s);
  s->be->destroy(s->be_state);
  sg__free(s->unbacked);
  sg__free(s->fuse_barrier);
  sg__free(s->tr);
  sg__free(s);
}

void sg__session_wire(sg_session *s) {
  const sg_graph *g = s->g;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    const int32_t *in, *out;
    int n_in, n_out;
    sg__plan_io(&s->plan, g, (int32_t)k, &in, &n_in, &out, &n_out);
    for (int i = 0; i < n_in; i++) {
      int32_t t = in[i];
      s->op_in[k][i] = t < 0 ? NULL : s->bound[t] ? s->bound[t] : s->tensor_ptr[t];
    }
    for (int i = 0; i < n_out; i++) s->op_out[k][i] = s->tensor_ptr[out[i]];
  }
}

sg_status sg__session_tensor(const sg_session *s, const char *name, const char *what, int32_t *id) {
  if (name == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: name is NULL", what);
  *id = sg__tensor_lookup(s->g, name);
  if (*id < 0) return sg__error(SG_ERR_NOT_FOUND, "%s: the graph has no tensor named '%s'", what, name);
  return SG_OK;
}

/* Device memory for every slot, and the initial values of the sources. */
static sg_status allocate(sg_session *s) {
  const sg_graph *g = s->g;
  size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1, n_io = 0;
  const int32_t *in, *out;
  int n_in, n_out;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    sg__plan_io(&s->plan, g, (int32_t)k, &in, &n_in, &out, &n_out);
    n_io += (size_t)n_in + (size_t)n_out;
  }
  s->tensor_ptr = sg__calloc(nt, sizeof(void *));
  s->bound = sg__calloc(nt, sizeof(void *));
  s->input_set = sg__calloc(nt, sizeof(bool));
  s->op_in = sg__calloc(no, sizeof(void **));
  s->op_out = sg__calloc(no, sizeof(void **));
  s->flat = sg__calloc(n_io ? n_io : 1, sizeof(void *));
  if (!s->tensor_ptr || !s->bound || !s->input_set || !s->op_in || !s->op_out || !s->flat)
    return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  size_t at = 0;
  for (uint32_t k = 0; k < g->n_ops; k++) {
    sg__plan_io(&s->plan, g, (int32_t)k, &in, &n_in, &out, &n_out);
    s->op_in[k] = s->flat + at;
    at += (size_t)n_in;
    s->op_out[k] = s->flat + at;
    at += (size_t)n_out;
  }
  SG_CHECK(s->be->buffer_alloc(s->be_state, s->plan.persistent_bytes, &s->persistent));
  SG_CHECK(s->be->buffer_alloc(s->be_state, s->plan.transient_bytes, &s->transient));
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (s->plan.buf_kind[t] == SG__BUF_PERSISTENT && s->plan.offset[t] != SG__NO_OFFSET)
      s->tensor_ptr[t] = (char *)s->persistent + s->plan.offset[t];
    else if (s->plan.buf_kind[t] == SG__BUF_TRANSIENT)
      s->tensor_ptr[t] = (char *)s->transient + s->plan.offset[t];
    const sg__tensor *x = &g->tensors[t];
    if (s->tensor_ptr[t] && x->data && x->producer < 0)
      SG_CHECK(s->be->upload(s->be_state, s->tensor_ptr[t], x->data, x->nbytes));
  }
  sg__session_wire(s);
  return SG_OK;
}

/* Folds op k on the CPU backend for a device backend without a kernel of
 * its own for it (CUDA's elementwise ops run only as generated kernels,
 * which folded ops never join): its inputs downloaded, the CPU kernel run
 * on host copies, its outputs uploaded. Once, at compile time. */
static sg_status fold_on_host(sg_session *s, int32_t k, const sg__run_ctx *ctx) {
  const sg__backend_i *cpu = &sg__cpu_backend;
  const sg__op *op = &s->g->ops[k];
  sg__backend_config cfg = {1, s->seed, 0};
  void *cs = NULL;
  SG_CHECK(cpu->create(&cfg, &cs));
  int n_io = op->n_inputs + op->n_outputs;
  void **in = sg__calloc((size_t)(n_io > 0 ? n_io : 1), sizeof *in), **out = in + op->n_inputs;
  sg__kernel *kern = NULL;
  sg_status st = in ? cpu->kernel_create(cs, s->g, k, SG__MODE_TRAIN, &kern)
                    : sg__error(SG_ERR_NO_MEMORY, "compile: out of memory folding '%s'", op->name);
  for (int i = 0; st == SG_OK && i < op->n_inputs; i++) {
    if (op->inputs[i] < 0) continue;
    size_t n = s->g->tensors[op->inputs[i]].nbytes;
    st = cpu->buffer_alloc(cs, n, &in[i]);
    if (st == SG_OK) st = s->be->download(s->be_state, in[i], s->op_in[k][i], n);
  }
  for (int o = 0; st == SG_OK && o < op->n_outputs; o++)
    st = cpu->buffer_alloc(cs, s->g->tensors[op->outputs[o]].nbytes, &out[o]);
  if (st == SG_OK) st = cpu->kernel_run(cs, kern, in, out, ctx);
  for (int o = 0; st == SG_OK && o < op->n_outputs; o++)
    if (s->op_out[k][o] != NULL)
      st = s->be->upload(s->be_state, s->op_out[k][o], out[o], s->g->tensors[op->outputs[o]].nbytes);
  cpu->kernel_destroy(cs, kern);
  for (int i = 0; in != NULL && i < n_io; i++) cpu->buffer_free(cs, in[i]);
  sg__free(in);
  cpu->destroy(cs);
  return st;
}

/* Runs the ops whose inputs are all constant, once; then drops their kernels. */
static sg_status fold_constants(sg_session *s) {
  sg__run_ctx ctx = {.step = 0, .seed = s->seed};
  for (uint32_t i = 0; i < s->plan.n_fold; i++) {
    int32_t k = s->plan.fold_order[i];
    if (!s->be->is_host(s->be_state) && !s->be->supports_op(s->be_state, s->g->ops[k].kind)) {
      SG_CHECK(s->be->synchronize(s->be_state));
      SG_CHECK(fold_on_host(s, k, &ctx));
      continue;
    }
    sg__kernel *kern = NULL;
    SG_CHECK(s->be->kernel_create(s->be_state, s->g, k, SG__MODE_TRAIN, &kern));
    sg_status st = s->be->kernel_run(s->be_state, kern, s->op_in[k], s->op_out[k], &ctx);
    s->be->kernel_destroy(s->be_state, kern);
    SG_CHECK(st);
  }
  return s->be->synchronize(s->be_state);
}

/* Op k's kernel, or its group's generated one when k anchors a group. */
static sg_status create_kernel(sg_session *s, int32_t k, sg__exec_mode mode, sg__kernel **out) {
  int32_t gi = s->plan.group_of ? s->plan.group_of[k] : -1;
  if (gi < 0) return s->be->kernel_create(s->be_state, s->g, k, mode, out);
  return s->be->module_kernel(s->be_state, s->module, &s->plan.kernels[gi], s->g->ops[k].name, out);
}

static sg_status create_kernels(sg_session *s) {
  const sg__plan *p = &s->plan;
  s->kernels = sg__calloc(p->n_order ? p->n_order : 1, sizeof(sg__kernel *));
  s->eval_kernels = sg__calloc(p->n_eval ? p->n_eval : 1, sizeof(sg__kernel *));
  if (!s->kernels || !s->eval_kernels) return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  for (uint32_t i = 0; i < p->n_order; i++)
    SG_CHECK(create_kernel(s, p->order[i], SG__MODE_TRAIN, &s->kernels[i]));
  for (uint32_t i = 0; i < p->n_eval; i++)
    SG_CHECK(create_kernel(s, p->eval_order[i], SG__MODE_EVAL, &s->eval_kernels[i]));
  return SG_OK;
}

/* For the poisoning debug mode: after position i, the slots of the groups
 * whose last reader ran at i. */
static sg_status plan_poison(sg_session *s) {
  const sg_graph *g = s->g;
  const sg__plan *p = &s->plan;
  int32_t *group_last = sg__malloc((g->n_tensors ? g->n_tensors : 1) * sizeof(int32_t));
  s->poison_start = sg__calloc((size_t)p->n_order + 1, sizeof(uint32_t));
  s->poison_tensor = sg__malloc((g->n_tensors ? g->n_tensors : 1) * sizeof(int32_t));
  if (!group_last || !s->poison_start || !s->poison_tensor) {
    sg__free(group_last);
    return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  }
  for (uint32_t t = 0; t < g->n_tensors; t++) group_last[t] = -1;
  for (uint32_t t = 0; t < g->n_tensors; t++) {
    if (p->buf_kind[t] != SG__BUF_TRANSIENT) continue;
    int32_t root = p->alias_of[t] >= 0 ? p->alias_of[t] : (int32_t)t;
    if (p->last_use[t] > group_last[root]) group_last[root] = p->last_use[t];
  }
  /* Counting sort of the roots by the position after which they die. */
  for (uint32_t t = 0; t < g->n_tensors; t++)
    if (group_last[t] >= 0) s->poison_start[group_last[t] + 1]++;
  for (uint32_t i = 0; i < p->n_order; i++) s->poison_start[i + 1] += s->poison_start[i];
  uint32_t *fill = sg__malloc(((size_t)p->n_order + 1) * sizeof(uint32_t));
  if (fill == NULL) {
    sg__free(group_last);
    return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  }
  memcpy(fill, s->poison_start, ((size_t)p->n_order + 1) * sizeof(uint32_t));
  for (uint32_t t = 0; t < g->n_tensors; t++)
    if (group_last[t] >= 0) s->poison_tensor[fill[group_last[t]]++] = (int32_t)t;
  sg__free(fill);
  sg__free(group_last);
  return SG_OK;
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The plan, with fusion when it is on and its kernels build; a compiler
 * that is missing or fails costs only the fusion (a warning, then the plan
 * again without it). */
static sg_status plan(sg_session *s) {
  /* A session laid out for a runtime's passes (updates last: src/parallel)
   * fuses only when the runtime has named the tensors its hooks touch
   * between ops (sg__session_set_fuse_barrier): fusion would otherwise keep
   * them inside generated kernels, and move their producers to a group's
   * position. */
  s->plan_options.fuse = s->fusion && (!s->plan_options.updates_last || s->fuse_barrier != NULL);
  double t0 = seconds_now();
  SG_CHECK(sg__plan_build(s->g, s->be, s->be_state, &s->plan_options, &s->plan));
  SG_DEBUG("planned in %.1f ms: %u generated kernels", 1e3 * (seconds_now() - t0), s->plan.n_groups);
  sg_status st =
      sg__compile_module(s->g, &s->plan, &s->plan_options, s->be, s->be_state, &s->module, &s->cstats);
  if (st == SG_OK || st == SG_ERR_NO_MEMORY) return st;
  char why[512];
  snprintf(why, sizeof why, "%s", sg_last_error());
  sg__plan_free(&s->plan);
  s->plan_options.fuse = false;
  SG_CHECK(sg__plan_build(s->g, s->be, s->be_state, &s->plan_options, &s->plan));
  /* A backend that runs some ops only as generated kernels (CUDA's
   * elementwise ops) has no unfused fallback. */
  if (s->plan.n_groups > 0) {
    sg__plan_free(&s->plan);
    return sg__error(st, "%s (the %s backend runs elementwise ops only as generated kernels)", why,
                     s->be->name);
  }
  SG_WARN("fusion is off for this session: %s; running the unfused kernels", why);
  return SG_OK;
}

sg_status sg_session_compile(sg_session *s) {
  if (s == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_session_compile: session is NULL");
  if (s->compiled) return sg__error(SG_ERR_STATE, "sg_session_compile: the session is already compiled");
  sg_status st;
  double t0 = seconds_now();
  s->cstats = (sg__compile_stats){0};
  SG_CHECK_GOTO(plan(s), st, fail);
  SG_CHECK_GOTO(allocate(s), st, fail);
  SG_CHECK_GOTO(fold_constants(s), st, fail);
  SG_CHECK_GOTO(create_kernels(s), st, fail);
  if (s->poison) SG_CHECK_GOTO(plan_poison(s), st, fail);
  SG_CHECK_GOTO(sg__profile_init(s), st, fail);
  SG_CHECK_GOTO(sg__session_views_init(s), st, fail);
  s->compiled = true;
  s->compile_seconds = seconds_now() - t0;
  SG_INFO("compiled in %.2f s: %u ops per step (%u eliminated, %u folded, %u in place, %u in %u "
          "generated kernels of %u distinct programs), planned peak %zu bytes of %zu",
          s->compile_seconds, s->plan.n_order + s->plan.n_fused_ops - s->plan.n_groups, s->plan.n_eliminated,
          s->plan.n_fold, s->plan.n_inplace, s->plan.n_fused_ops, s->plan.n_groups, s->plan.n_unique,
          s->plan.persistent_bytes + s->plan.transient_bytes, s->plan.sum_tensor_bytes);
  return SG_OK;
fail:
  /* Leave the session as created, so destroy (or another compile) is safe. */
  release_compiled(s);
  return st;
}

sg_status sg_session_compile_report(const sg_session *s, sg_compile_report *out) {
  if (s == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_compile_report: NULL argument");
  sg__versioned v = SG__VERSIONED(sg_compile_report, planned_peak_bytes, "SG_COMPILE_REPORT_INIT");
  SG_CHECK(sg__out_write("sg_session_compile_report", v, out, NULL));
  if (!s->compiled) return sg__error(SG_ERR_STATE, "sg_session_compile_report: compile the session first");
  const sg__plan *p = &s->plan;
  /* Ops count once whether they run alone or inside a generated kernel. */
  uint32_t n_eval_fused = 0;
  for (uint32_t i = 0; i < p->n_groups; i++) n_eval_fused += p->groups[i].eval ? p->groups[i].n_ops - 1 : 0;
  sg_compile_report r = {sizeof r,
                         p->persistent_bytes + p->transient_bytes,
                         p->persistent_bytes,
                         p->transient_bytes,
                         p->sum_tensor_bytes,
                         (int32_t)(p->n_order + p->n_fused_ops - p->n_groups),
                         (int32_t)(p->n_eval + n_eval_fused),
                         (int32_t)p->n_eliminated,
                         (int32_t)p->n_fold,
                         (int32_t)p->n_inplace,
                         (int32_t)p->n_fused_ops,
                         (int32_t)p->n_groups,
                         s->compile_seconds,
                         (int32_t)s->cstats.kernels_generated,
                         (int32_t)s->cstats.compiler_invocations,
                         (int32_t)s->cstats.cache_hits,
                         (int32_t)s->cstats.cache_misses};
  return sg__out_write("sg_session_compile_report", v, out, &r);
}

uint64_t sg_session_steps(const sg_session *s) { return s ? s->steps : 0; }

/* ---- hooks.h: the layout and the slots (passes: step.c) -------------------- */

sg_status sg__session_set_updates_last(sg_session *s, bool updates_last) {
  if (s->compiled) return sg__error(SG_ERR_STATE, "session: schedule options must be set before compile");
  s->plan_options.updates_last = updates_last;
  return SG_OK;
}

sg_status sg__session_set_unbacked(sg_session *s, const uint8_t *mask) {
  if (s->compiled) return sg__error(SG_ERR_STATE, "session: unbacked state must be set before compile");
  const sg_graph *g = s->g;
  uint8_t *copy = NULL;
  if (mask != NULL) {
    for (uint32_t t = 0; t < g->n_tensors; t++) {
      sg_role r = g->tensors[t].role;
      if (mask[t] && r != SG_ROLE_PARAMETER && r != SG_ROLE_STATE && r != SG_ROLE_OPTIMIZER_STATE)
        return sg__error(SG_ERR_INVALID_ARG,
                         "session: only parameters and state may be left without memory, not '%s' (%s)",
                         g->tensors[t].name, sg_role_name(r));
    }
    copy = sg__malloc(g->n_tensors ? g->n_tensors : 1);
    if (copy == NULL) return sg__error(SG_ERR_NO_MEMORY, "session: out of memory");
    memcpy(copy, mask, g->n_tensors);
  }
  sg__free(s->unbacked);
  s->unbacked = copy;
  s->plan_options.no_memory = copy;
  return SG_OK;
}

sg_status sg__session_set_fuse_barrier(sg_session *s, const uint8_t *mask) {
  if (s->compiled) return sg__error(SG_ERR_STATE, "session: the fusion barrier must be set before compile");
  uint8_t *copy = NULL;
  if (mask != NULL) {
    copy = sg__malloc(s->g->n_tensors ? s->g->n_tensors : 1);
    if (copy == NULL) return sg__error(SG_ERR_NO_MEMORY, "session: out of memory");
    memcpy(copy, mask, s->g->n_tensors);
  }
  sg__free(s->fuse_barrier);
  s->fuse_barrier = copy;
  s->plan_options.fuse_barrier = copy;
  return SG_OK;
}

const int32_t *sg__session_order(const sg_session *s, uint32_t *n) {
  *n = s->compiled ? s->plan.n_order : 0;
  return s->compiled ? s->plan.order : NULL;
}

const sg_graph *sg__session_graph(const sg_session *s) { return s->g; }

void sg__session_set_steps(sg_session *s, uint64_t steps) { s->steps = steps; }

void sg__session_fail_device(sg_session *s, const char *why) { s->be->fail(s->be_state, why); }

void *sg__session_tensor_addr(const sg_session *s, int32_t t, size_t *bytes) {
  if (!s->compiled || t < 0 || (uint32_t)t >= s->g->n_tensors || s->tensor_ptr[t] == NULL) {
    if (bytes) *bytes = 0;
    return NULL;
  }
  if (bytes) *bytes = s->plan.bytes[t];
  return s->tensor_ptr[t];
}
