/* Inputs, steps, evaluation passes, reading and writing tensors. Nothing
 * here allocates: a step only reads the arrays that compile built. */
#include <string.h>

#include "runtime/session_internal.h"

static sg_status need_compiled(const sg_session *s, const char *what) {
  if (s == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: session is NULL", what);
  if (!s->compiled) return sg__error(SG_ERR_STATE, "%s: compile the session first (sg_session_compile)", what);
  return SG_OK;
}

/* Checks a caller's dtype and shape against an input tensor. */
static sg_status check_input(const sg_session *s, const char *what, const char *name, sg_dtype dtype, int ndim,
                             const int64_t *dims, int32_t *id) {
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

sg_status sg_session_bind_input(sg_session *s, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                                void *data) {
  int32_t id;
  SG_CHECK(check_input(s, "sg_session_bind_input", name, dtype, ndim, dims, &id));
  if (data == NULL || ((uintptr_t)data % SG__SLOT_ALIGN) != 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_bind_input: memory for '%s' must be non-NULL and %d-byte aligned",
                     name, SG__SLOT_ALIGN);
  if (strcmp(s->be->name, "cpu") != 0)
    return sg__error(SG_ERR_STATE, "sg_session_bind_input: binding host memory needs the cpu device, not %s",
                     s->be->name);
  s->bound[id] = data;
  s->input_set[id] = true;
  sg__session_wire(s);
  return SG_OK;
}

static sg_status check_inputs_set(const sg_session *s, const char *what) {
  for (uint32_t i = 0; i < s->g->n_inputs; i++) {
    int32_t t = s->g->inputs[i];
    if (s->plan.buf_kind[t] != SG__BUF_NONE && !s->input_set[t])
      return sg__error(SG_ERR_STATE, "%s: input '%s' has not been set (sg_session_set_input)", what,
                       s->g->tensors[t].name);
  }
  return SG_OK;
}

static void poison_after(sg_session *s, uint32_t pos) {
  for (uint32_t j = s->poison_start[pos]; j < s->poison_start[pos + 1]; j++) {
    int32_t t = s->poison_tensor[j];
    /* All-ones bytes: NaN as f32/f64, -1 as integers. Host memory on cpu. */
    memset(s->tensor_ptr[t], 0xff, s->g->tensors[t].nbytes);
  }
}

static sg_status run(sg_session *s, const int32_t *order, uint32_t n, sg__kernel **kernels, bool poison) {
  sg__run_ctx ctx = {s->steps, s->seed};
  for (uint32_t i = 0; i < n; i++) {
    int32_t k = order[i];
    sg_status st = s->be->kernel_run(s->be_state, kernels[i], s->op_in[k], s->op_out[k], &ctx);
    if (st != SG_OK) return st;
    if (poison) poison_after(s, i);
  }
  return s->be->synchronize(s->be_state);
}

sg_status sg_session_step(sg_session *s) {
  SG_CHECK(need_compiled(s, "sg_session_step"));
  SG_CHECK(check_inputs_set(s, "sg_session_step"));
  bool poison = s->poison && strcmp(s->be->name, "cpu") == 0;
  SG_CHECK(run(s, s->plan.order, s->plan.n_order, s->kernels, poison));
  s->steps++;
  return SG_OK;
}

sg_status sg_session_forward(sg_session *s) {
  SG_CHECK(need_compiled(s, "sg_session_forward"));
  SG_CHECK(check_inputs_set(s, "sg_session_forward"));
  return run(s, s->plan.eval_order, s->plan.n_eval, s->eval_kernels, false);
}

/* A tensor the session keeps between calls, with `bytes` its exact size. */
static sg_status kept_tensor(const sg_session *s, const char *what, const char *name, size_t bytes, int32_t *id) {
  SG_CHECK(need_compiled(s, what));
  SG_CHECK(sg__session_tensor(s, name, what, id));
  const sg__tensor *t = &s->g->tensors[*id];
  if (s->plan.buf_kind[*id] != SG__BUF_PERSISTENT)
    return sg__error(SG_ERR_STATE, "%s: tensor '%s' is not kept between steps; mark it as a graph output", what, name);
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
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_write: '%s' is a %s; only parameters and state can be written "
                                         "(inputs: sg_session_set_input)", name, sg_role_name(r));
  return s->be->upload(s->be_state, s->tensor_ptr[id], data, bytes);
}
