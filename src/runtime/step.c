/* Inputs, steps and the passes of hooks.h, evaluation passes, reading and
 * writing tensors. Nothing here allocates: a step only reads the arrays that
 * compile built. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/session_internal.h"

/* ---- SG_PROFILE: per-op times (debug, off by default) ------------------- */

typedef struct sg__profile {
  uint64_t report_after; /* print after this many steps */
  uint64_t steps;        /* profiled steps so far (the first is warm-up) */
  double *op_s;          /* per position of plan.order: seconds, summed over steps 2.. */
  /* Wall time, or with SG_PROFILE_CPU=1 the process's CPU time: on a shared
   * machine, CPU time at one thread measures an op's own work whatever else
   * runs. */
  clockid_t clock;
} sg__profile;

sg_status sg__profile_init(sg_session *s) {
  const char *v = getenv("SG_PROFILE");
  long n = v ? strtol(v, NULL, 10) : 0;
  if (n <= 0) return SG_OK;
  s->profile = sg__calloc(1, sizeof *s->profile);
  if (s->profile == NULL) return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  s->profile->op_s = sg__calloc(s->plan.n_order ? s->plan.n_order : 1, sizeof(double));
  if (s->profile->op_s == NULL) {
    sg__free(s->profile);
    s->profile = NULL;
    return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  }
  s->profile->report_after = (uint64_t)n;
  const char *cpu = getenv("SG_PROFILE_CPU");
  s->profile->clock = cpu && strcmp(cpu, "1") == 0 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
  return SG_OK;
}

void sg__profile_free(sg_session *s) {
  if (s->profile) sg__free(s->profile->op_s);
  sg__free(s->profile);
  s->profile = NULL;
}

static double seconds_now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Per kind: ops per step, ms per step, share; then the slowest ops. Printing
 * is debug output, so it goes straight to stderr. */
static void profile_report(const sg_session *s) {
  const sg__profile *pr = s->profile;
  const sg_graph *g = s->g;
  double steps = pr->steps > 1 ? (double)(pr->steps - 1) : 1.0, total = 0;
  /* Kinds, and one more row for the generated kernels of fused groups. */
  enum { FUSED = SG__OP_KIND_LAST + 1 };
  double kind_s[FUSED + 1] = {0};
  int kind_n[FUSED + 1] = {0};
  for (uint32_t i = 0; i < s->plan.n_order; i++) {
    int32_t op = s->plan.order[i];
    int k = s->plan.group_of && s->plan.group_of[op] >= 0 ? FUSED : (int)g->ops[op].kind;
    kind_s[k] += pr->op_s[i];
    kind_n[k]++;
    total += pr->op_s[i];
  }
  fprintf(
      stderr, "sgrt profile: %u ops per step, %.1f ms per step (%s, mean of %.0f steps after the first)\n",
      s->plan.n_order, 1e3 * total / steps, pr->clock == CLOCK_MONOTONIC ? "wall time" : "CPU time", steps);
  fprintf(stderr, "  %-28s %6s %10s %6s\n", "op kind", "ops", "ms/step", "share");
  for (;;) {
    int best = 0;
    for (int k = 1; k <= FUSED; k++)
      if (kind_n[k] > 0 && (best == 0 || kind_s[k] > kind_s[best])) best = k;
    if (best == 0) break;
    fprintf(stderr, "  %-28s %6d %10.2f %5.1f%%\n",
            best == FUSED ? "(generated kernels)" : sg_op_kind_name((sg_op_kind)best), kind_n[best],
            1e3 * kind_s[best] / steps, total > 0 ? 100.0 * kind_s[best] / total : 0.0);
    kind_n[best] = 0;
  }
  /* The 12 slowest single ops, with their first output's shape. */
  fprintf(stderr, "  slowest ops:\n");
  int32_t top[12];
  int n_top = 0;
  for (uint32_t i = 0; i < s->plan.n_order; i++) {
    int j;
    if (n_top < 12) {
      j = n_top++;
    } else { /* full: op i replaces the 12th only if it is slower */
      if (pr->op_s[top[11]] >= pr->op_s[i]) continue;
      j = 11;
    }
    while (j > 0 && pr->op_s[top[j - 1]] < pr->op_s[i]) {
      top[j] = top[j - 1];
      j--;
    }
    top[j] = (int32_t)i;
  }
  for (int j = 0; j < n_top; j++) {
    const sg__op *op = &g->ops[s->plan.order[top[j]]];
    char shape[SG__SHAPE_STR] = "";
    int32_t t = op->n_outputs > 0 ? op->outputs[0] : (op->n_inputs > 0 ? op->inputs[0] : -1);
    if (t >= 0) sg__shape_str(shape, g->tensors[t].dtype, g->tensors[t].ndim, g->tensors[t].dims);
    bool fused = s->plan.group_of && s->plan.group_of[s->plan.order[top[j]]] >= 0;
    fprintf(stderr, "    %8.2f ms  %-24s %s %s\n", 1e3 * pr->op_s[top[j]] / steps,
            fused ? "(generated, ends at)" : sg_op_kind_name(op->kind), op->name ? op->name : "?", shape);
  }
}

static sg_status need_compiled(const sg_session *s, const char *what) {
  if (s == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: session is NULL", what);
  if (!s->compiled)
    return sg__error(SG_ERR_STATE, "%s: compile the session first (sg_session_compile)", what);
  return SG_OK;
}

/* Checks a caller's dtype and shape against an input tensor. */
static sg_status check_input(const sg_session *s, const char *what, const char *name, sg_dtype dtype,
                             int ndim, const int64_t *dims, int32_t *id) {
  SG_CHECK(need_compiled(s, what));
  SG_CHECK(sg__session_tensor(s, name, what, id));
  const sg__tensor *t = &s->g->tensors[*id];
  char want[SG__SHAPE_STR], got[SG__SHAPE_STR];
  sg__shape_str(want, t->dtype, t->ndim, t->dims);
  if (t->role != SG_ROLE_INPUT)
    return sg__error(SG_ERR_INVALID_ARG, "%s: '%s' is a %s, not an input", what, name, sg_role_name(t->role));
  if (ndim < 0 || ndim > SG_MAX_DIMS || (ndim > 0 && dims == NULL))
    return sg__error(SG_ERR_INVALID_ARG, "%s: input '%s': bad rank %d or NULL dims", what, name, ndim);
  sg__shape_str(got, dtype, ndim, dims);
  if (dtype != t->dtype)
    return sg__error(SG_ERR_DTYPE, "%s: input '%s' is %s, given %s", what, name, want, got);
  bool same = ndim == t->ndim;
  for (int i = 0; same && i < ndim; i++) same = dims[i] == t->dims[i];
  if (!same) return sg__error(SG_ERR_SHAPE, "%s: input '%s' is %s, given %s", what, name, want, got);
  return SG_OK;
}

sg_status sg_session_set_input(sg_session *s, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                               const void *data) {
  int32_t id;
  SG_CHECK(check_input(s, "sg_session_set_input", name, dtype, ndim, dims, &id));
  if (data == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_session_set_input: data for '%s' is NULL", name);
  const sg__tensor *t = &s->g->tensors[id];
  SG_CHECK(s->be->upload(s->be_state, s->tensor_ptr[id], data, t->nbytes));
  if (s->bound[id]) {
    s->bound[id] = NULL;
    sg__session_wire(s);
  }
  s->input_set[id] = true;
  return SG_OK;
}

sg_status sg_session_bind_input(sg_session *s, const char *name, sg_dtype dtype, int ndim,
                                const int64_t *dims, void *data) {
  int32_t id;
  SG_CHECK(check_input(s, "sg_session_bind_input", name, dtype, ndim, dims, &id));
  if (data == NULL || ((uintptr_t)data % SG__SLOT_ALIGN) != 0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_session_bind_input: memory for '%s' must be non-NULL and %d-byte aligned", name,
                     SG__SLOT_ALIGN);
  if (!s->be->is_host(s->be_state))
    return sg__error(SG_ERR_STATE, "sg_session_bind_input: binding host memory needs the cpu device, not %s",
                     s->be->name);
  s->bound[id] = data;
  s->input_set[id] = true;
  sg__session_wire(s);
  return SG_OK;
}

/* Every input that an op of `order` reads must have been set: an
 * evaluation pass does not need the learning rate, a step does. */
static sg_status check_inputs_set(const sg_session *s, const char *what, const int32_t *order, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const int32_t *in, *out;
    int n_in, n_out;
    sg__plan_io(&s->plan, s->g, order[i], &in, &n_in, &out, &n_out);
    for (int k = 0; k < n_in; k++) {
      int32_t t = in[k];
      if (t >= 0 && s->g->tensors[t].role == SG_ROLE_INPUT && !s->input_set[t])
        return sg__error(SG_ERR_STATE, "%s: input '%s' has not been set (sg_session_set_input)", what,
                         s->g->tensors[t].name);
    }
  }
  return SG_OK;
}

static void poison_after(sg_session *s, uint32_t pos) {
  for (uint32_t j = s->poison_start[pos]; j < s->poison_start[pos + 1]; j++) {
    int32_t t = s->poison_tensor[j];
    /* All-ones bytes: NaN as f32/f64, -1 as integers. Host memory on cpu. */
    memset(s->tensor_ptr[t], 0xff, s->plan.bytes[t]);
  }
}

/* The run context of a pass, in the backend's terms: the pass's dropout
 * stream picks the subsequence of random draws, and a pass with frozen
 * statistics runs batch norm on the batch statistics only. */
static sg__run_ctx run_ctx(const sg_session *s, const sg__session_pass *p) {
  return (sg__run_ctx){
      .step = s->steps, .seed = s->seed, .rng_subsequence = p->stream, .batch_stats_only = p->freeze_stats};
}

/* An evaluation pass: no hooks, no poisoning. */
static sg_status run(sg_session *s, const int32_t *order, uint32_t n, sg__kernel **kernels) {
  sg__run_ctx ctx = {.step = s->steps, .seed = s->seed};
  int64_t t_pass = s->tr ? sg__now_ns() : 0;
  for (uint32_t i = 0; i < n; i++) {
    int32_t k = order[i];
    int64_t t0 = s->tr ? sg__now_ns() : 0;
    SG_CHECK(s->be->kernel_run(s->be_state, kernels[i], s->op_in[k], s->op_out[k], &ctx));
    if (s->tr) { /* timed to the end of its work */
      SG_CHECK(s->be->synchronize(s->be_state));
      sg__session_trace(s, t0, (int32_t)i, true);
    }
  }
  SG_CHECK(s->be->synchronize(s->be_state));
  if (s->tr) sg__session_trace(s, t_pass, -1, true);
  return SG_OK;
}

/* Schedule positions [begin, end) with the hooks, if any. The backend is
 * synchronized before each `after` hook, so that what the hook reads (a
 * gradient to allreduce, a time stamp) is complete. */
static sg_status run_range(sg_session *s, const sg__session_pass *p, bool poison) {
  const sg__step_hooks *h = p->hooks;
  sg__run_ctx ctx = run_ctx(s, p);
  for (uint32_t i = p->begin; i < p->end; i++) {
    int32_t k = s->plan.order[i];
    if (h && h->before && (h->before_at == NULL || h->before_at[i])) SG_CHECK(h->before(h->ctx, i));
    int64_t t0 = s->tr ? sg__now_ns() : 0;
    SG_CHECK(s->be->kernel_run(s->be_state, s->kernels[i], s->op_in[k], s->op_out[k], &ctx));
    if (s->tr) { /* timed to the end of its work */
      SG_CHECK(s->be->synchronize(s->be_state));
      sg__session_trace(s, t0, (int32_t)i, false);
    }
    if (poison) poison_after(s, i);
    if (h && h->after && (h->after_at == NULL || h->after_at[i])) {
      SG_CHECK(s->be->synchronize(s->be_state));
      SG_CHECK(h->after(h->ctx, i));
    }
  }
  return s->be->synchronize(s->be_state);
}

/* A whole training step with every kernel timed (SG_PROFILE). */
static sg_status run_profiled(sg_session *s, const sg__session_pass *p, bool poison) {
  sg__profile *pr = s->profile;
  sg__run_ctx ctx = run_ctx(s, p);
  for (uint32_t i = 0; i < s->plan.n_order; i++) {
    int32_t k = s->plan.order[i];
    double t0 = seconds_now(pr->clock);
    sg_status st = s->be->kernel_run(s->be_state, s->kernels[i], s->op_in[k], s->op_out[k], &ctx);
    if (st == SG_OK) st = s->be->synchronize(s->be_state);
    if (st != SG_OK) return st;
    if (pr->steps > 0 || pr->report_after == 1) pr->op_s[i] += seconds_now(pr->clock) - t0;
    if (poison) poison_after(s, i);
  }
  if (++pr->steps == pr->report_after) profile_report(s);
  return SG_OK;
}

/* A pass of a compiled session (sg_session_step's is the whole schedule, counted). */
static sg_status run_pass(sg_session *s, const char *what, const sg__session_pass *p) {
  if (p->begin > p->end || p->end > s->plan.n_order)
    return sg__error(SG_ERR_RANGE, "%s: pass [%u, %u) outside the %u scheduled ops", what, p->begin, p->end,
                     s->plan.n_order);
  SG_CHECK(check_inputs_set(s, what, s->plan.order + p->begin, p->end - p->begin));
  /* Poisoning and profiling assume whole steps (a slot dies at its last
   * reader of the step; times are per step), so a part of one does without. */
  bool whole = p->begin == 0 && p->end == s->plan.n_order;
  bool poison = whole && s->poison && s->be->is_host(s->be_state);
  bool hooked = p->hooks && (p->hooks->before || p->hooks->after);
  int64_t t0 = s->tr ? sg__now_ns() : 0;
  if (whole && !hooked && s->profile && !s->tr) SG_CHECK(run_profiled(s, p, poison));
  else if (p->begin < p->end) SG_CHECK(run_range(s, p, poison));
  if (s->tr && p->count_step) sg__session_trace(s, t0, -1, false);
  if (p->count_step) s->steps++;
  return SG_OK;
}

sg_status sg_session_step(sg_session *s) {
  SG_CHECK(need_compiled(s, "sg_session_step"));
  sg__session_pass p = {.begin = 0, .end = s->plan.n_order, .count_step = true};
  return run_pass(s, "sg_session_step", &p);
}

sg_status sg__session_run_pass(sg_session *s, const sg__session_pass *p) {
  if (s == NULL || p == NULL) return sg__error(SG_ERR_INVALID_ARG, "session: pass: NULL session or pass");
  if (!s->compiled) return sg__error(SG_ERR_STATE, "session: a pass needs a compiled session");
  return run_pass(s, "session: pass", p);
}

sg_status sg_session_forward(sg_session *s) {
  SG_CHECK(need_compiled(s, "sg_session_forward"));
  SG_CHECK(check_inputs_set(s, "sg_session_forward", s->plan.eval_order, s->plan.n_eval));
  return run(s, s->plan.eval_order, s->plan.n_eval, s->eval_kernels);
}

/* A tensor the session keeps between calls, with `bytes` its exact size. */
static sg_status kept_tensor(const sg_session *s, const char *what, const char *name, size_t bytes,
                             int32_t *id) {
  SG_CHECK(need_compiled(s, what));
  SG_CHECK(sg__session_tensor(s, name, what, id));
  const sg__tensor *t = &s->g->tensors[*id];
  if (s->plan.buf_kind[*id] != SG__BUF_PERSISTENT)
    return sg__error(SG_ERR_STATE, "%s: tensor '%s' is not kept between steps; mark it as a graph output",
                     what, name);
  if (s->tensor_ptr[*id] == NULL && s->bound[*id] == NULL && strcmp(what, "sg_session_bind_state") != 0)
    return sg__error(SG_ERR_STATE,
                     "%s: tensor '%s' has no memory in this session (state its creator left unbacked, "
                     "such as the optimizer state of a parameter that another rank updates)",
                     what, name);
  if (bytes != t->nbytes) {
    char sh[SG__SHAPE_STR];
    return sg__error(SG_ERR_SHAPE, "%s: tensor '%s' is %s (%zu bytes), given %zu bytes", what, name,
                     sg__shape_str(sh, t->dtype, t->ndim, t->dims), t->nbytes, bytes);
  }
  return SG_OK;
}

sg_status sg_session_read(const sg_session *s, const char *name, void *out, size_t bytes) {
  int32_t id;
  SG_CHECK(kept_tensor(s, "sg_session_read", name, bytes, &id));
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_session_read: out is NULL");
  const void *src = s->bound[id] ? s->bound[id] : s->tensor_ptr[id];
  if (s->bound[id]) {
    memcpy(out, src, bytes);
    return SG_OK;
  }
  return s->be->download(s->be_state, out, src, bytes);
}

sg_status sg_session_write(sg_session *s, const char *name, const void *data, size_t bytes) {
  int32_t id;
  SG_CHECK(kept_tensor(s, "sg_session_write", name, bytes, &id));
  if (data == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_session_write: data is NULL");
  sg_role r = s->g->tensors[id].role;
  if (r != SG_ROLE_PARAMETER && r != SG_ROLE_STATE && r != SG_ROLE_OPTIMIZER_STATE)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_session_write: '%s' is a %s; only parameters and state can be written "
                     "(inputs: sg_session_set_input)",
                     name, sg_role_name(r));
  return s->be->upload(s->be_state, s->tensor_ptr[id], data, bytes);
}

sg_status sg_session_bind_state(sg_session *s, const char *name, void *data, size_t bytes) {
  int32_t id;
  SG_CHECK(kept_tensor(s, "sg_session_bind_state", name, bytes, &id));
  const sg__tensor *t = &s->g->tensors[id];
  if (t->role != SG_ROLE_PARAMETER && t->role != SG_ROLE_STATE && t->role != SG_ROLE_OPTIMIZER_STATE)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_session_bind_state: '%s' is a %s; only parameters and state can be bound", name,
                     sg_role_name(t->role));
  if (data == NULL || ((uintptr_t)data % SG__SLOT_ALIGN) != 0)
    return sg__error(SG_ERR_INVALID_ARG,
                     "sg_session_bind_state: memory for '%s' must be non-NULL and %d-byte aligned", name,
                     SG__SLOT_ALIGN);
  if (!s->be->is_host(s->be_state))
    return sg__error(SG_ERR_STATE, "sg_session_bind_state: binding host memory needs the cpu device, not %s",
                     s->be->name);
  /* A backend layout wider than the plain tensor would make the caller's
   * buffer too small; parameters and state are kept plain today. */
  if (s->plan.bytes[id] != t->nbytes)
    return sg__error(SG_ERR_STATE,
                     "sg_session_bind_state: '%s' is kept in a %zu-byte device layout, not %zu bytes", name,
                     s->plan.bytes[id], t->nbytes);
  if (data != s->tensor_ptr[id]) {
    /* State left without memory at compile (sg__session_set_unbacked) starts at zero, as a session
     * starts every state tensor without initializer. */
    if (s->tensor_ptr[id] == NULL) memset(data, 0, bytes);
    else memmove(data, s->tensor_ptr[id], bytes);
    s->tensor_ptr[id] = data;
    sg__session_wire(s);
  }
  return SG_OK;
}
