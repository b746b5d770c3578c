/* A single session's timeline (sg_session_params.trace) and its Chrome trace
 * JSON, in the form a distributed job writes for each rank
 * (src/parallel/trace.c): so that a one-process run and a job look alike in
 * chrome://tracing and Perfetto. Events go into a ring: a long run keeps its
 * latest trace_events. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "runtime/session_internal.h"

void sg__session_trace(sg_session *s, int64_t t0_ns, int32_t pos, bool eval) {
  sg__session_event *e = &s->tr[s->tr_n % s->tr_cap];
  *e = (sg__session_event){.t0_ns = t0_ns, .t1_ns = sg__now_ns(), .step = s->steps, .pos = pos, .eval = eval};
  s->tr_n++;
}

static const char *op_category(const sg_graph *g, const sg__op *op) {
  if (op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE) return "update";
  for (int i = 0; i < op->n_outputs; i++)
    if (g->tensors[op->outputs[i]].role == SG_ROLE_GRADIENT) return "backward";
  return "forward";
}

static cJSON *meta(const char *what, int tid, const char *name) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", 0);
  if (tid >= 0) cJSON_AddNumberToObject(e, "tid", tid);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "args"), "name", name);
  return e;
}

/* One event as a complete ("X") event; NULL when it names no op of the plan. */
static cJSON *event(const sg_session *s, const sg__session_event *e, int64_t origin_ns) {
  const sg__plan *pl = &s->plan;
  char name[128];
  const char *cat;
  cJSON *args = cJSON_CreateObject();
  if (e->pos < 0) { /* a step is named by its number; an evaluation pass comes after `step` steps */
    if (e->eval) snprintf(name, sizeof name, "evaluation pass");
    else snprintf(name, sizeof name, "step %llu", (unsigned long long)e->step + 1);
    cat = e->eval ? "evaluation" : "step";
  } else {
    uint32_t n = e->eval ? pl->n_eval : pl->n_order;
    if ((uint32_t)e->pos >= n) {
      cJSON_Delete(args);
      return NULL;
    }
    const sg__op *op = &s->g->ops[(e->eval ? pl->eval_order : pl->order)[e->pos]];
    snprintf(name, sizeof name, "%s", op->name);
    cat = e->eval ? "forward" : op_category(s->g, op);
    cJSON_AddStringToObject(args, "kind", sg_op_kind_name(op->kind));
    cJSON_AddNumberToObject(args, "pos", e->pos);
  }
  cJSON_AddNumberToObject(args, "step", (double)e->step + (e->eval ? 0 : 1));
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddStringToObject(o, "cat", cat);
  cJSON_AddStringToObject(o, "ph", "X");
  cJSON_AddNumberToObject(o, "ts", (double)(e->t0_ns - origin_ns) * 1e-3);
  cJSON_AddNumberToObject(o, "dur", (double)(e->t1_ns - e->t0_ns) * 1e-3);
  cJSON_AddNumberToObject(o, "pid", 0);
  cJSON_AddNumberToObject(o, "tid", 0);
  cJSON_AddItemToObject(o, "args", args);
  return o;
}

sg_status sg_session_write_trace(const sg_session *s, const char *path) {
  if (s == NULL || path == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_session_write_trace: NULL argument");
  if (s->tr == NULL)
    return sg__error(SG_ERR_STATE,
                     "sg_session_write_trace: tracing is off; set sg_session_params.trace at create");
  uint64_t n = s->tr_n < s->tr_cap ? s->tr_n : s->tr_cap, first = s->tr_n - n;
  /* A step's event is recorded after its ops: the earliest start is the origin. */
  int64_t origin = 0;
  for (uint64_t i = 0; i < n; i++) {
    int64_t t = s->tr[(first + i) % s->tr_cap].t0_ns;
    if (i == 0 || t < origin) origin = t;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON *list = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
  bool ok = list != NULL;
  if (ok) {
    cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
    cJSON_AddItemToArray(list, meta("process_name", -1, "session"));
    cJSON_AddItemToArray(list, meta("thread_name", 0, "compute"));
  }
  for (uint64_t i = 0; ok && i < n; i++) {
    cJSON *o = event(s, &s->tr[(first + i) % s->tr_cap], origin);
    if (o != NULL) ok = cJSON_AddItemToArray(list, o);
  }
  char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (text == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_session_write_trace: out of memory");
  /* A FIFO, a device or a directory is refused, not waited on. */
  FILE *f = NULL;
  sg_status st = sg__fopen_regular(path, true, &f);
  if (st != SG_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_last_error());
    st = sg__error(st, "sg_session_write_trace: %s", why);
  } else {
    size_t len = strlen(text);
    bool wrote = fwrite(text, 1, len, f) == len;
    wrote = (fclose(f) == 0) && wrote;
    if (!wrote) st = sg__error(SG_ERR_IO, "sg_session_write_trace: writing '%s' failed", path);
  }
  cJSON_free(text);
  return st;
}
