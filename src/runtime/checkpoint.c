/* Checkpoints: the graph as .sgg with parameters, state and optimizer state
 * replaced by the session's current values. */
#include <string.h>

#include "runtime/session_internal.h"
#include "sgrt/sgg.h"

/* The session's step count travels with the checkpoint as one extra state
 * tensor, so that a resumed session draws the same dropout masks and applies
 * the same first-step rules as one that never stopped. */
#define STEPS_TENSOR "sgrt.session.steps"

static bool is_checkpointed(sg_role r) {
  return r == SG_ROLE_PARAMETER || r == SG_ROLE_STATE || r == SG_ROLE_OPTIMIZER_STATE;
}

sg_status sg__checkpoint_write(const sg_graph *g, const void *const *values, uint64_t steps, const char *fn,
                               const char *path) {
  if (sg__tensor_lookup(g, STEPS_TENSOR) >= 0)
    return sg__error(SG_ERR_DUPLICATE, "%s: the graph already has a tensor named '%s'", fn, STEPS_TENSOR);
  sg__tensor *tensors = sg__malloc(((size_t)g->n_tensors + 1) * sizeof *tensors);
  if (tensors == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", fn);
  memcpy(tensors, g->tensors, g->n_tensors * sizeof *tensors);
  for (uint32_t t = 0; t < g->n_tensors; t++)
    if (is_checkpointed(tensors[t].role) && values[t] != NULL) tensors[t].data = values[t];
  /* The writer only reads the graph: a view that differs in the tensor
   * array (the initializers) is written like the graph itself. */
  int64_t n = (int64_t)steps;
  tensors[g->n_tensors] = (sg__tensor){.name = STEPS_TENSOR,
                                       .dtype = SG_I64,
                                       .role = SG_ROLE_STATE,
                                       .ndim = 0,
                                       .producer = -1,
                                       .data = &n,
                                       .nbytes = sizeof n};
  sg_graph view = *g;
  view.tensors = tensors;
  view.n_tensors = g->n_tensors + 1;
  view.mapping = NULL;
  sg_status st = sg_graph_save(&view, path);
  sg__free(tensors);
  return st;
}

sg_status sg_session_save_checkpoint(const sg_session *s, const char *path) {
  static const char *const FN = "sg_session_save_checkpoint";
  if (s == NULL || path == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL argument", FN);
  if (!s->compiled) return sg__error(SG_ERR_STATE, "%s: compile the session first", FN);
  const sg_graph *g = s->g;
  void **host = sg__calloc(g->n_tensors ? g->n_tensors : 1, sizeof(void *));
  if (host == NULL) return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", FN);
  sg_status st = SG_OK;
  for (uint32_t t = 0; t < g->n_tensors && st == SG_OK; t++) {
    const sg__tensor *x = &g->tensors[t];
    /* State without memory (left unbacked, hooks.h: another rank keeps it, say) is saved without a value. */
    if (!is_checkpointed(x->role) || s->plan.buf_kind[t] != SG__BUF_PERSISTENT || s->tensor_ptr[t] == NULL)
      continue;
    if ((host[t] = sg__malloc(x->nbytes)) == NULL)
      st = sg__error(SG_ERR_NO_MEMORY, "%s: out of memory copying '%s'", FN, x->name);
    else st = s->be->download(s->be_state, host[t], s->tensor_ptr[t], x->nbytes);
  }
  if (st == SG_OK) st = sg__checkpoint_write(g, (const void *const *)host, s->steps, FN, path);
  for (uint32_t t = 0; t < g->n_tensors; t++) sg__free(host[t]);
  sg__free(host);
  return st;
}

sg_status sg_session_load_checkpoint(sg_session *s, const char *path) {
  if (s == NULL || path == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_load_checkpoint: NULL argument");
  if (!s->compiled) return sg__error(SG_ERR_STATE, "sg_session_load_checkpoint: compile the session first");
  sg_graph *ck = NULL;
  SG_CHECK(sg_graph_load(path, &ck));
  const sg_graph *g = s->g;
  sg_status st = SG_OK;
  /* Check everything before changing anything, so a bad checkpoint leaves
   * the session as it was. */
  for (int pass = 0; pass < 2 && st == SG_OK; pass++) {
    for (uint32_t t = 0; t < g->n_tensors && st == SG_OK; t++) {
      const sg__tensor *x = &g->tensors[t];
      if (!is_checkpointed(x->role) || s->plan.buf_kind[t] != SG__BUF_PERSISTENT) continue;
      int32_t c = sg__tensor_lookup(ck, x->name);
      const sg__tensor *y = c >= 0 ? &ck->tensors[c] : NULL;
      if (y == NULL || y->data == NULL) {
        st = sg__error(SG_ERR_NOT_FOUND, "checkpoint '%s' has no value for %s '%s'", path,
                       sg_role_name(x->role), x->name);
        break;
      }
      bool same = y->dtype == x->dtype && y->ndim == x->ndim;
      for (int d = 0; same && d < x->ndim; d++) same = y->dims[d] == x->dims[d];
      if (!same) {
        char a[SG__SHAPE_STR], b[SG__SHAPE_STR];
        st = sg__error(SG_ERR_SHAPE, "checkpoint '%s': '%s' is %s there but %s in the session's graph", path,
                       x->name, sg__shape_str(a, y->dtype, y->ndim, y->dims),
                       sg__shape_str(b, x->dtype, x->ndim, x->dims));
        break;
      }
      if (pass == 1 && s->tensor_ptr[t] != NULL)
        st = s->be->upload(s->be_state, s->tensor_ptr[t], y->data, x->nbytes);
    }
  }
  if (st == SG_OK) {
    int32_t c = sg__tensor_lookup(ck, STEPS_TENSOR);
    const sg__tensor *y = c >= 0 ? &ck->tensors[c] : NULL;
    if (y && y->dtype == SG_I64 && y->ndim == 0 && y->data) {
      int64_t steps;
      memcpy(&steps, y->data, sizeof steps);
      s->steps = steps > 0 ? (uint64_t)steps : 0;
    }
  }
  sg_graph_destroy(ck);
  return st;
}
