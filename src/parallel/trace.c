/* The timeline (SPEC O2): events recorded by both threads into rings, and
 * written as Chrome trace JSON (chrome://tracing, Perfetto) with one process
 * per rank: thread 0 computes, thread 1 is the scheduler. While the job is
 * healthy the ranks' events are gathered on rank 0 into one file. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "graph/graph.h"
#include "parallel/dist_internal.h"

/* A user tag of the dist's own communicator that nothing else uses. */
#define TRACE_TAG 0x7ffffff0u

sg_status sg__dist_ring_init(sg__dist_ring *r, uint64_t cap) {
  r->ev = sg__calloc((size_t)cap, sizeof(sg__dist_event));
  if (r->ev == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_create: out of memory for the trace");
  r->cap = cap;
  r->n = 0;
  return SG_OK;
}

void sg__dist_ring_free(sg__dist_ring *r) {
  sg__free(r->ev);
  *r = (sg__dist_ring){0};
}

static uint64_t ring_len(const sg__dist_ring *r) { return r->n < r->cap ? r->n : r->cap; }

/* Oldest first. */
static void ring_copy(const sg__dist_ring *r, sg__dist_event *out) {
  uint64_t len = ring_len(r), start = r->n - len;
  for (uint64_t i = 0; i < len; i++) out[i] = r->ev[(start + i) % r->cap];
}

/* ---- gathering on rank 0 ---------------------------------------------------- */

typedef struct gathered {
  sg__dist_event **ev; /* per rank */
  uint64_t *n;
} gathered;

/* Scheduler thread. The compute thread is blocked in the job, so its ring is
 * still; the scheduler's ring is its own. */
static sg_status gather_job(sg_dist *d, void *arg) {
  gathered *out = arg;
  uint64_t n = ring_len(&d->compute_ring) + ring_len(&d->sched_ring);
  sg__dist_event *mine = sg__malloc((size_t)(n ? n : 1) * sizeof(sg__dist_event));
  if (mine == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_write_trace: out of memory");
  ring_copy(&d->compute_ring, mine);
  ring_copy(&d->sched_ring, mine + ring_len(&d->compute_ring));
  sg_status st = SG_OK;
  if (d->rank != 0) {
    st = sg_comm_send(d->comm, 0, TRACE_TAG, &n, sizeof n);
    if (st == SG_OK && n) st = sg_comm_send(d->comm, 0, TRACE_TAG, mine, (size_t)n * sizeof(sg__dist_event));
    sg__free(mine);
    return st;
  }
  out->ev[0] = mine;
  out->n[0] = n;
  for (int r = 1; r < d->size && st == SG_OK; r++) {
    st = sg_comm_recv(d->comm, r, TRACE_TAG, &out->n[r], sizeof out->n[r]);
    if (st != SG_OK) break;
    if (out->n[r] > ((uint64_t)1 << 32))
      return sg__error(SG_ERR_FORMAT, "sg_dist_write_trace: rank %d announces %llu events", r,
                       (unsigned long long)out->n[r]);
    out->ev[r] = sg__malloc((size_t)(out->n[r] ? out->n[r] : 1) * sizeof(sg__dist_event));
    if (out->ev[r] == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_write_trace: out of memory");
    if (out->n[r])
      st = sg_comm_recv(d->comm, r, TRACE_TAG, out->ev[r], (size_t)out->n[r] * sizeof(sg__dist_event));
  }
  return st;
}

/* ---- JSON ---------------------------------------------------------------------- */

static const char *op_category(const sg_graph *g, const sg__op *op) {
  if (op->kind == SG_OP_SGD_UPDATE || op->kind == SG_OP_ADAMW_UPDATE) return "update";
  for (int i = 0; i < op->n_outputs; i++)
    if (g->tensors[op->outputs[i]].role == SG_ROLE_GRADIENT) return "backward";
  return "forward";
}

static cJSON *meta(int pid, int tid, const char *what, const char *name) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", pid);
  if (tid >= 0) cJSON_AddNumberToObject(e, "tid", tid);
  cJSON *args = cJSON_AddObjectToObject(e, "args");
  cJSON_AddStringToObject(args, "name", name);
  return e;
}

static void add_events(const sg_dist *d, cJSON *list, int pid, const sg__dist_event *ev, uint64_t n) {
  uint32_t n_order;
  const int32_t *order = sg__session_order(d->s, &n_order);
  char pname[32];
  snprintf(pname, sizeof pname, "rank %d", pid);
  cJSON_AddItemToArray(list, meta(pid, -1, "process_name", pname));
  cJSON_AddItemToArray(list, meta(pid, 0, "thread_name", "compute"));
  cJSON_AddItemToArray(list, meta(pid, 1, "thread_name", "scheduler"));
  for (uint64_t i = 0; i < n; i++) {
    const sg__dist_event *e = &ev[i];
    char name[96];
    const char *cat = "comm";
    cJSON *o = cJSON_CreateObject(), *args = NULL;
    switch ((sg__dist_ev_kind)e->kind) {
      case SG__EV_OP:
        if (e->id < 0 || (uint32_t)e->id >= n_order) {
          cJSON_Delete(o);
          continue;
        }
        {
          const sg__op *op = &d->g->ops[order[e->id]];
          snprintf(name, sizeof name, "%s", op->name);
          cat = op_category(d->g, op);
          args = cJSON_CreateObject();
          cJSON_AddStringToObject(args, "kind", sg_op_kind_name(op->kind));
          cJSON_AddNumberToObject(args, "pos", e->id);
        }
        break;
      case SG__EV_WAIT: snprintf(name, sizeof name, "wait for gradients"); break;
      case SG__EV_STEP:
        snprintf(name, sizeof name, "step %u", e->step);
        cat = "step";
        break;
      case SG__EV_BUCKET:
        snprintf(name, sizeof name, "allreduce bucket %d", e->id);
        if (d->strategy == &sg__par_data_strategy && e->id >= 0 && (uint32_t)e->id < DP(d)->plan.n_buckets) {
          args = cJSON_CreateObject();
          cJSON_AddNumberToObject(args, "bytes", (double)DP(d)->plan.buckets[e->id].bytes);
          cJSON_AddNumberToObject(args, "gradients", DP(d)->plan.buckets[e->id].count);
        }
        break;
      case SG__EV_BCAST: snprintf(name, sizeof name, "broadcast from rank 0"); break;
      case SG__EV_CHECK: snprintf(name, sizeof name, "consistency check"); break;
      case SG__EV_XFER: {
        static const char *const ops[] = {"send to", "receive from", "allreduce", "allgather", "broadcast"};
        static const char *const modes[] = {"pipeline", "tensor", "loss", "replica", "checkpoint"};
        unsigned mode = (unsigned)e->id >> 24 & 0xffu, op = (unsigned)e->id >> 16 & 0xffu;
        int peer = (int)((unsigned)e->id & 0xffffu) - 1;
        if (mode > 4 || op > 4) {
          cJSON_Delete(o);
          continue;
        }
        if (peer >= 0) snprintf(name, sizeof name, "%s %s rank %d", modes[mode], ops[op], peer);
        else snprintf(name, sizeof name, "%s %s", modes[mode], ops[op]);
        break;
      }
      case SG__EV_HEALTH:
        cJSON_AddStringToObject(o, "name", "healthy ranks");
        cJSON_AddStringToObject(o, "ph", "C");
        cJSON_AddNumberToObject(o, "ts", (double)e->t0_ns * 1e-3);
        cJSON_AddNumberToObject(o, "pid", pid);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "args"), "healthy", e->id);
        cJSON_AddItemToArray(list, o);
        continue;
      default: cJSON_Delete(o); continue;
    }
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "cat", cat);
    cJSON_AddStringToObject(o, "ph", "X");
    cJSON_AddNumberToObject(o, "ts", (double)e->t0_ns * 1e-3);
    cJSON_AddNumberToObject(o, "dur", (double)(e->t1_ns - e->t0_ns) * 1e-3);
    cJSON_AddNumberToObject(o, "pid", pid);
    cJSON_AddNumberToObject(o, "tid", e->tid);
    if (args == NULL) args = cJSON_CreateObject();
    cJSON_AddNumberToObject(args, "step", e->step);
    cJSON_AddItemToObject(o, "args", args);
    cJSON_AddItemToArray(list, o);
  }
}

/* ev[i], n[i]: the events of rank first + i. */
static sg_status write_json(const sg_dist *d, const char *path, sg__dist_event *const *ev, const uint64_t *n,
                            int first, int count) {
  cJSON *root = cJSON_CreateObject();
  cJSON *list = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
  if (list == NULL) {
    cJSON_Delete(root);
    return sg__error(SG_ERR_NO_MEMORY, "sg_dist_write_trace: out of memory");
  }
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  for (int i = 0; i < count; i++) add_events(d, list, first + i, ev[i], n[i]);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (text == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_dist_write_trace: out of memory");
  /* A FIFO, a device or a directory is refused, not waited on. */
  FILE *f = NULL;
  sg_status st = sg__fopen_regular(path, true, &f);
  if (st != SG_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_last_error());
    st = sg__error(st, "sg_dist_write_trace: %s", why);
  } else {
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok) st = sg__error(SG_ERR_IO, "sg_dist_write_trace: writing '%s' failed", path);
  }
  cJSON_free(text);
  return st;
}

/* "trace.json" -> "trace.rank2.json"; anything else gets ".rank2" appended. */
static char *rank_path(const char *path, int rank) {
  size_t n = strlen(path);
  const char *ext = n >= 5 && strcmp(path + n - 5, ".json") == 0 ? path + n - 5 : path + n;
  size_t cap = n + 32;
  char *out = sg__malloc(cap);
  if (out) snprintf(out, cap, "%.*s.rank%d%s", (int)(ext - path), path, rank, ext);
  return out;
}

static sg_status write_local(sg_dist *d, const char *path) {
  sg_status st = SG_OK;
  char *p = rank_path(path, d->rank);
  uint64_t n = ring_len(&d->compute_ring);
  pthread_mutex_lock(&d->mu); /* the scheduler may still be recording */
  uint64_t m = ring_len(&d->sched_ring);
  sg__dist_event *ev = sg__malloc((size_t)(n + m + 1) * sizeof(sg__dist_event));
  if (ev) {
    ring_copy(&d->compute_ring, ev);
    ring_copy(&d->sched_ring, ev + n);
  }
  pthread_mutex_unlock(&d->mu);
  if (p == NULL || ev == NULL) st = sg__error(SG_ERR_NO_MEMORY, "sg_dist_write_trace: out of memory");
  else {
    uint64_t total = n + m;
    st = write_json(d, p, &ev, &total, d->rank, 1);
  }
  sg__free(ev);
  sg__free(p);
  return st;
}

sg_status sg__dist_write_trace(sg_dist *d, const char *path) {
  if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE)) return write_local(d, path);
  gathered gv = {sg__calloc((size_t)d->size, sizeof(sg__dist_event *)),
                 sg__calloc((size_t)d->size, sizeof(uint64_t))};
  sg_status st;
  if (gv.ev == NULL || gv.n == NULL) st = sg__error(SG_ERR_NO_MEMORY, "sg_dist_write_trace: out of memory");
  else st = sg__dist_run_job(d, gather_job, &gv);
  if (st != SG_OK) {
    /* The others are (or were) in the gather too: fail them now rather than
     * at their timeout. */
    if (__atomic_load_n(&d->failed_flag, __ATOMIC_ACQUIRE) == 0)
      sg__dist_fail(d, SG_ERR_COMM, "rank %d: gathering the trace failed: %s", d->rank, sg_last_error());
  } else if (d->rank == 0) {
    st = write_json(d, path, gv.ev, gv.n, 0, d->size);
  }
  for (int r = 0; gv.ev && r < d->size; r++) sg__free(gv.ev[r]);
  sg__free(gv.ev);
  sg__free(gv.n);
  return st;
}
