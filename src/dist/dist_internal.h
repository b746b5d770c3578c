/* Internal pieces of the data-parallel runtime (src/dist). Two threads share
 * an sg_dist: the compute thread (the caller of sg_dist_step, which runs the
 * session and its hooks) and the scheduler thread (scheduler.c, which owns
 * the communicator). What they share is guarded by `mu` unless marked
 * otherwise; everything set up by sg_dist_create before the first step is
 * read-only afterwards. */
#ifndef SG_DIST_INTERNAL_H
#define SG_DIST_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "runtime/hooks.h"
#include "sgrt/dist.h"

/* ---- gradient buckets (buckets.c) ---------------------------------------- */

typedef struct sg__dist_grad {
  int32_t param, grad; /* tensor ids */
  uint32_t pos;        /* schedule position of the op that produces the gradient */
  void *addr;          /* its slot (host memory), valid from compile to destroy */
  size_t bytes;        /* slot bytes: a backend layout may pad; padding stays zero under avg */
} sg__dist_grad;

/* A gradient at least this large is averaged in its slot; smaller ones are
 * packed into one buffer per bucket (scheduler.c). */
#define SG__DIST_INPLACE_BYTES ((size_t)1 << 20)

typedef struct sg__dist_bucket {
  uint32_t first, count; /* range of sg_dist.grads */
  size_t bytes;          /* sum of the slots' bytes, a multiple of 4 (f32) */
  uint32_t ready_pos;    /* all its gradients exist after the op at this position */
} sg__dist_bucket;

/* The plan: which gradients, in which buckets, and where the hooks go. */
typedef struct sg__dist_plan {
  sg__dist_grad *grads; /* in the order backward produces them */
  uint32_t n_grads;
  sg__dist_bucket *buckets;
  uint32_t n_buckets;
  uint32_t n_order;       /* schedule length */
  uint32_t *posted_after; /* per position: buckets complete once the op there ran */
  uint8_t *after_at;      /* positions where a bucket becomes complete */
  uint8_t *before_at;     /* the position that waits for every bucket */
  uint32_t wait_pos;      /* first op that reads a synced gradient, or n_order: after the step */
  size_t flat_bytes;      /* the most any bucket packs: the scheduler's flat buffer */
  size_t total_bytes;
  uint64_t topology_hash; /* SPEC M5: params and grads, the buckets, what the broadcast moves */
  uint8_t *dtype_ids;     /* one per gradient, for the consistency check's message */
} sg__dist_plan;

/* Builds the plan from a compiled session's schedule. Errors name the
 * tensor: SG_ERR_UNSUPPORTED for a non-f32 gradient, SG_ERR_INVALID_ARG when
 * no parameter has a gradient in the schedule, SG_ERR_NO_MEMORY. */
sg_status sg__dist_plan_build(const sg_session *s, size_t bucket_bytes, sg__dist_plan *out);
void sg__dist_plan_free(sg__dist_plan *p);

/* ---- timeline (trace.c) --------------------------------------------------- */

typedef enum sg__dist_ev_kind {
  SG__EV_OP = 1,     /* compute: the op at schedule position id */
  SG__EV_WAIT = 2,   /* compute: waiting for the gradient buckets */
  SG__EV_STEP = 3,   /* compute: a whole sg_dist_step */
  SG__EV_BUCKET = 4, /* scheduler: allreduce of bucket id (copies included) */
  SG__EV_BCAST = 5,  /* scheduler: broadcast of parameters and state from rank 0 */
  SG__EV_CHECK = 6,  /* scheduler: the consistency check */
  SG__EV_HEALTH = 7, /* scheduler, instant: id = healthy ranks now */
} sg__dist_ev_kind;

/* Fixed layout: events travel between ranks as bytes (same build everywhere). */
typedef struct sg__dist_event {
  int64_t t0_ns, t1_ns; /* since the trace origin */
  int32_t id;
  uint32_t step;
  uint8_t kind, tid;
  uint8_t pad[6];
} sg__dist_event;

/* A ring that keeps the latest `cap` events; one writer thread each. */
typedef struct sg__dist_ring {
  sg__dist_event *ev;
  uint64_t cap, n; /* n: events written so far */
} sg__dist_ring;

sg_status sg__dist_ring_init(sg__dist_ring *r, uint64_t cap);
void sg__dist_ring_free(sg__dist_ring *r);
static inline void sg__dist_ring_put(sg__dist_ring *r, const sg__dist_event *e) {
  if (r->cap) r->ev[r->n++ % r->cap] = *e;
}

/* ---- the handle ------------------------------------------------------------ */

/* Something the compute thread asks the scheduler thread to run (it owns
 * the communicator): joining, the consistency check, the broadcast, the
 * trace gather. The compute thread waits for it. */
typedef struct sg__dist_job {
  sg_status (*fn)(sg_dist *d, void *arg);
  void *arg;
  sg_status status;
  char message[1024]; /* the scheduler thread's last error, handed over */
  bool done;
} sg__dist_job;

struct sg_dist {
  /* Set by create, read-only afterwards. */
  const sg_graph *g;
  sg_session *s;
  sg_dist_params p;
  sg_comm_params comm_params;
  int rank, size;
  sg__dist_plan plan;
  int32_t loss;     /* tensor id of a one-element f32 output named "loss", or -1 */
  float *loss_addr; /* its slot */
  void *flat;       /* scheduler's staging buffer: a bucket's small gradients, plus the loss */
  bool tracing;
  char *trace_path;
  int64_t origin_ns; /* trace origin (CLOCK_MONOTONIC) */

  /* Owned by the scheduler thread. */
  sg_comm *comm;
  sg__dist_ring sched_ring; /* written by the scheduler; read under mu */
  int last_healthy;

  /* Owned by the compute thread. */
  sg__dist_ring compute_ring;
  int64_t op_t0;
  uint32_t posted_local; /* buckets handed over this step */
  bool broadcast_done;
  sg_dist_stats stats;

  /* Shared, under mu. */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t wake_sched;   /* work for the scheduler: a bucket, a job, stop */
  pthread_cond_t wake_compute; /* a bucket done, a job done, a failure */
  uint64_t step;               /* the step being run, 1-based */
  uint32_t posted, done;       /* buckets handed over / allreduced in this step */
  bool busy;                   /* the scheduler is inside a bucket's allreduce */
  sg__dist_job *job;
  bool stop;
  sg_status failed; /* sticky: the job failed (SG_OK while healthy) */
  int failed_flag;  /* atomic copy of failed != SG_OK, for a glance without mu */
  char fail_msg[1024];
  float loss_mean;
  double comm_ms; /* this step's allreduce time */
  int healthy;    /* atomic: also read without mu */
  sg_status comm_destroy_status;
};

/* ---- scheduler.c ------------------------------------------------------------ */

/* Starts the scheduler thread, which creates the communicator; waits for
 * it. On failure the thread has exited and the error is set. */
sg_status sg__dist_sched_start(sg_dist *d);
/* Stops the thread (it destroys the communicator) and joins it. */
void sg__dist_sched_stop(sg_dist *d);
/* Runs fn on the scheduler thread and waits; its error (status and
 * message) becomes the caller's. */
sg_status sg__dist_run_job(sg_dist *d, sg_status (*fn)(sg_dist *d, void *arg), void *arg);
/* Records the job's failure (the first one wins), aborts the communicator
 * and wakes the compute thread. Either thread; takes mu. */
void sg__dist_fail(sg_dist *d, sg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The failure as the calling thread's error: SG_ERR_COMM and the message. */
sg_status sg__dist_failure(sg_dist *d);

/* Jobs run on the scheduler thread. */
sg_status sg__dist_job_check(sg_dist *d, void *arg);
sg_status sg__dist_job_broadcast(sg_dist *d, void *arg);

int64_t sg__dist_now_ns(void);

/* ---- step.c ----------------------------------------------------------------- */

/* Installs the session hooks of the plan (every position when tracing). */
sg_status sg__dist_install_hooks(sg_dist *d);

/* ---- trace.c ---------------------------------------------------------------- */

/* Writes the timeline (gathers it on rank 0 while healthy). Compute thread. */
sg_status sg__dist_write_trace(sg_dist *d, const char *path);

#endif /* SG_DIST_INTERNAL_H */
