/* Host views of a session's slots (hooks.h), for the parallel runtime's
 * collectives, snapshots and broadcasts, which move bytes in host memory.
 *
 * On the CPU a tensor's host view is its slot, and pulling or pushing it
 * does nothing. On a device (CUDA) the view is a host buffer of the slot's
 * size, allocated the first time it is asked for and kept until the session
 * is destroyed; the slot stays the truth, and the caller pulls a view before
 * it reads it and pushes it after it wrote it -- as a data-parallel step on
 * GPUs without NCCL does with each gradient bucket (device -> host ->
 * collective -> host -> device).
 *
 * SG_HOST_MIRROR=1 in the environment keeps separate views on the CPU too,
 * so that the device path of the parallel runtime runs, and is tested,
 * where there is no GPU: a pull or push it forgot shows as a different
 * result. */
#include <stdlib.h>
#include <string.h>

#include "runtime/session_internal.h"

bool sg__session_host_mirror_env(void) {
  const char *env = getenv("SG_HOST_MIRROR");
  return env != NULL && strcmp(env, "1") == 0;
}

bool sg__session_views_separate(const sg_session *s) { return s->host_views != NULL; }

sg_status sg__session_views_init(sg_session *s) {
  if (s->be->is_host(s->be_state) && !sg__session_host_mirror_env()) return SG_OK;
  s->host_views = sg__calloc(s->g->n_tensors ? s->g->n_tensors : 1, sizeof *s->host_views);
  if (s->host_views == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_session_compile: out of memory");
  return SG_OK;
}

void sg__session_views_free(sg_session *s) {
  if (s->host_views == NULL) return;
  for (uint32_t t = 0; t < s->g->n_tensors; t++) sg__free(s->host_views[t]);
  sg__free(s->host_views);
  s->host_views = NULL;
}

void *sg__session_tensor_host(sg_session *s, int32_t t, size_t *bytes) {
  void *slot = sg__session_tensor_addr(s, t, bytes);
  if (slot == NULL || s->host_views == NULL) return slot;
  if (s->host_views[t] == NULL) {
    s->host_views[t] = sg__calloc(1, s->plan.bytes[t] ? s->plan.bytes[t] : 1);
    if (s->host_views[t] == NULL) {
      sg__error(SG_ERR_NO_MEMORY, "out of host memory for a copy of '%s' (%zu bytes)", s->g->tensors[t].name,
                s->plan.bytes[t]);
      if (bytes) *bytes = 0;
      return NULL;
    }
  }
  return s->host_views[t];
}

/* A view that exists and is separate from its slot: what pull and push copy. */
static bool separate(const sg_session *s, int32_t t) {
  return s->host_views != NULL && t >= 0 && (uint32_t)t < s->g->n_tensors && s->host_views[t] != NULL &&
         s->tensor_ptr[t] != NULL;
}

sg_status sg__session_pull(sg_session *s, int32_t t) {
  if (!separate(s, t)) return SG_OK;
  sg_status st = s->be->download(s->be_state, s->host_views[t], s->tensor_ptr[t], s->plan.bytes[t]);
  if (st != SG_OK)
    return sg__error(st, "reading '%s' from the %s device: %s", s->g->tensors[t].name, s->be->name,
                     sg_last_error());
  return SG_OK;
}

sg_status sg__session_push(sg_session *s, int32_t t) {
  if (!separate(s, t)) return SG_OK;
  sg_status st = s->be->upload(s->be_state, s->tensor_ptr[t], s->host_views[t], s->plan.bytes[t]);
  if (st != SG_OK)
    return sg__error(st, "writing '%s' to the %s device: %s", s->g->tensors[t].name, s->be->name,
                     sg_last_error());
  return SG_OK;
}
