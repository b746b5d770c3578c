/* Internal pieces of the data-parallel runtime (src/parallel). Two threads share
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

#include "comm/comm.h"
#include "core/core.h"
#include "parallel/offload.h"
#include "runtime/hooks.h"
#include "sgrt/dist.h"
#include "sgrt/gmem.h"
#include "sgrt/health.h"
#include "sgrt/partition.h"

/* ---- gradient buckets (buckets.c) ---------------------------------------- */

typedef struct sg__dist_grad {
  int32_t param, grad; /* tensor ids */
  uint32_t pos;        /* schedule position of the op that produces the gradient */
  void *addr;          /* its host view (sg__session_tensor_host), valid from compile to destroy */
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
 * no parameter has a gradient in the schedule, SG_ERR_NO_MEMORY. With zero
 * (ZeRO-1) the topology covers no optimizer state (each rank keeps its own
 * share, which the broadcast does not move) but the flag itself. */
sg_status sg__dist_plan_build(sg_session *s, size_t bucket_bytes, bool zero, sg__dist_plan *out);
void sg__dist_plan_free(sg__dist_plan *p);
/* A fusion barrier (runtime/hooks.h) of g's tensors marking every
 * parameter's gradient: what the buckets average (after the op that
 * produced it, read by the updates after the wait) and micro-batches sum
 * from its slot. The model strategies mark more in it. sg__free it; NULL
 * when out of memory. */
uint8_t *sg__dist_grad_barrier(const sg_graph *g);

/* ---- timeline (trace.c) --------------------------------------------------- */

typedef enum sg__dist_ev_kind {
  SG__EV_OP = 1,     /* compute: the op at schedule position id */
  SG__EV_WAIT = 2,   /* compute: waiting for the gradient buckets */
  SG__EV_STEP = 3,   /* compute: a whole sg_dist_step */
  SG__EV_BUCKET = 4, /* scheduler: allreduce of bucket id (copies included) */
  SG__EV_BCAST = 5,  /* scheduler: broadcast of parameters and state from rank 0 */
  SG__EV_CHECK = 6,  /* scheduler: the consistency check */
  SG__EV_HEALTH = 7, /* scheduler, instant: id = healthy ranks now */
  SG__EV_XFER = 8,   /* scheduler: a transfer of sg_dist_create_model's modes, id = sg__dist_xfer_id() */
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

/* The id of an SG__EV_XFER event: what moved (0 send, 1 receive, 2 allreduce, 3 allgather,
 * 4 broadcast), for which group (0 pipeline, 1 tensor, 2 the loss, 3 replicas, 4 a checkpoint) and the peer
 * (or -1). */
static inline int32_t sg__dist_xfer_id(int op, int mode, int peer) {
  return (int32_t)(((uint32_t)mode << 24) | ((uint32_t)op << 16) | ((uint32_t)(peer + 1) & 0xffffu));
}

/* ---- rollback snapshots (snapshot.c) ---------------------------------------- */

/* Parameters, state and optimizer state as they were after `label` steps.
 * Two slots: a rank is at most one step ahead of any other (it cannot finish
 * step s+1 unless every rank took part in its allreduces, so every rank
 * started s+1), so the members' common rollback point is always in one of
 * the two latest snapshots. The tensors lie in the slot in tensor order. */
typedef struct sg__dist_snap {
  uint32_t n;  /* tensors */
  void **addr; /* their host views (sg__session_tensor_host) */
  int32_t *tensor;
  size_t *bytes;
  size_t *off; /* offset in a snapshot slot */
  bool *sync;  /* state: copied by the compute thread before the step */
  size_t total;
  char *slot[2];
  uint64_t label[2];
  bool valid[2]; /* complete */
  /* The scheduler's copy in progress, under mu: */
  bool pending;
  int busy_slot;
  size_t cursor;   /* slot offset reached */
  int64_t copy_ns; /* its time so far */
} sg__dist_snap;

sg_status sg__dist_snap_init(sg_dist *d);
void sg__dist_snap_free(sg__dist_snap *s);
/* Compute thread, before step `label` (0-based index = steps completed):
 * copies the state (pulled from the device first) and hands the rest to the
 * scheduler; nothing when the slot already holds this label (a redone
 * step). Errors: the device's, when a pull fails. */
sg_status sg__dist_snap_begin(sg_dist *d, uint64_t label);
/* Scheduler thread, mu held (released while copying): the next chunk. */
void sg__dist_snap_chunk_locked(sg_dist *d);
/* Compute thread: waits until the scheduler's copy is complete. */
void sg__dist_snap_wait(sg_dist *d);
/* Compute thread: puts back the state after `label` steps (and pushes it to
 * the device): SG_OK, SG_ERR_NOT_FOUND when neither slot has it, or the
 * device's error. */
sg_status sg__dist_snap_restore(sg_dist *d, uint64_t label);

/* ---- fault injection (inject.c) ----------------------------------------------- */

/* The fault plan of sg_dist_params.inject, else of SG_INJECT / SG_INJECT_SEED (create):
 * SG_ERR_INVALID_ARG naming where it came from; SG_ERR_UNSUPPORTED for SG_INJECT in a library
 * built without SG_FAULT_INJECTION. */
sg_status sg__dist_inject_init(sg_dist *d);
/* The same plan into *out (NULL when there is none): the pipeline mode's (slow faults only). */
sg_status sg__dist_inject_parse(sg_dist *d, sg_fault_plan **out);
/* SG_INJECT when set and not empty, else NULL (for the modes that refuse faults). */
const char *sg__dist_inject_env(void);
/* Fires this rank's faults due at the start of 0-based step `step` (once per step, not again when the
 * step is redone). A device fault returns its error; the others return SG_OK (or never return). */
sg_status sg__dist_inject_step(sg_dist *d, uint64_t step);
/* Fires this rank's recovery faults (kill:rank=R,recovery=PHASE) on reaching
 * `phase` of a recovery; any thread. */
sg_status sg__dist_inject_recovery(sg_dist *d, sg_recovery_phase phase);

/* ---- recovery (membership.c, recovery.c) --------------------------------------- */

#define SG__DIST_MAX_RANKS 256

/* What the compute thread hands to the recovery job and gets back. */
typedef struct sg__dist_heal {
  uint64_t committed; /* in: steps this rank completed */
  uint64_t rollback;  /* out: the step every member restores (min of the members' committed) */
  uint64_t forward;   /* out: the most any member completed (rollback or rollback + 1) */
  int donor;          /* out: rank (new epoch) of a member that completed `forward` steps */
  bool excluded;      /* out: this rank is not a member of the new epoch */
  int retries;        /* out: best-effort: the collective retried over the same members after this many
                         probes of the cut links (0: not a retry) */
  int probes;         /* out: best-effort: the probes this recovery made (a member's most) */
  double detection_ms;
} sg__dist_heal;

/* Liveness of a recovery's members through the store (heal_watch.c). */
typedef struct sg__heal_watch {
  sg__store *st; /* the recovery's own store connection (no key prefix) */
  int me, n;     /* this original rank; the members watched */
  int orig[SG__DIST_MAX_RANKS];
  int64_t seen[SG__DIST_MAX_RANKS];    /* their counters as last read; -1 none yet */
  int64_t changed[SG__DIST_MAX_RANKS]; /* when each last moved (or the watch began), ms */
  int64_t beats, next_beat, next_look;
  int hb_ms, dead_ms;
  int dead; /* the original rank found dead, -1 */
} sg__heal_watch;

void sg__heal_watch_init(sg__heal_watch *w, sg__store *st, int me, int heartbeat_ms, int dead_ms);
/* (Re)starts watching these original ranks: each must beat within dead_ms. */
void sg__heal_watch_members(sg__heal_watch *w, const int *orig, int n);
/* Bumps this rank's counter when a heartbeat period has passed. */
sg_status sg__heal_beat(sg__heal_watch *w);
/* Beats, then (every half period) reads the watched counters: SG_ERR_COMM
 * naming a member that stood still for dead_ms (w->dead set). */
sg_status sg__heal_watch_check(sg__heal_watch *w);

/* On the scheduler thread: agrees on the members of the next epoch through
 * the store and builds its communicator (membership.c). */
sg_status sg__dist_job_recover(sg_dist *d, void *arg);
/* Compute thread, a recovery's start: "recovering from: <the failure> (detected N ms ago)" on stderr; the
 * detection's time (monotonic ns; now when none was recorded). */
int64_t sg__dist_announce_recovery(sg_dist *d);
/* On the compute thread after a failure: recovery job, rollback; the caller redoes the steps. */
sg_status sg__dist_recover(sg_dist *d);
/* Whether the current failure can be healed (a peer's failure, a feed callback, QoS allows). */
bool sg__dist_healable(sg_dist *d);
/* Compute thread, a step that failed with `failed`, an error no recovery heals (a malformed message): the
 * exclusion, when the others already went on without this rank (the store holds the next epoch's decision
 * and it does not list this rank; stats.excluded set); else `failed` itself. Why a left-out rank gets there:
 * a send the members gave up when they left it out (it was silent, not dead) can still deliver, and a
 * rendezvous reads the sender's buffer when the receiver matches it, long after the members reused that
 * memory. */
sg_status sg__dist_left_out(sg_dist *d, sg_status failed);

/* ---- shards: micro-batches and recovery (micro.c) ------------------------------- */

/* Shards of a step's global batch: the original world size times micro_batches. */
int sg__dist_n_shards(const sg_dist *d);
/* This rank's shards of the step, in order, into out (sg__dist_n_shards of room); 0 without feed. */
int sg__dist_my_shards(const sg_dist *d, int *out);
/* 0: the allreduce averages; > 0: it sums and divides by this (the shards run by all members). */
int sg__dist_sum_div(const sg_dist *d);

/* ---- rejoin (rejoin.c, membership.c) ------------------------------------------ */

/* An admission decision (store key "rejoin/adm/<index>", fixed layout): at
 * the boundary where `step` steps are complete, the members of epoch `epoch`
 * and the joiners build epoch + 1 together. */
typedef struct sg__dist_adm {
  int64_t index, epoch, step;       /* decision index; the members' epoch; the admission step */
  int64_t nreq;                     /* the request counter when it was decided */
  int32_t n, n_join;                /* ranks of epoch + 1; joiners among them */
  int32_t orig[SG__DIST_MAX_RANKS]; /* their original ranks, ascending (dense ranks in this order) */
  int64_t inc[SG__DIST_MAX_RANKS];  /* a joiner's incarnation (>= 1); 0 for a member */
} sg__dist_adm;

/* A rank's part in rejoins. `joining` is set by create before the scheduler
 * starts and read-only afterwards; the rest belongs to the compute thread
 * (the joiner's admission job fills `adm` while the compute thread waits). */
typedef struct sg__dist_rejoin {
  bool joining;                 /* SG_REJOIN=1: this process joins a running job */
  bool off;                     /* the store was unreachable: no more polls (reported once) */
  sg__store *store;             /* the compute thread's connection (arrivals), opened when first needed */
  struct sg__dist_watch *watch; /* the thread that looks at the store during the steps (rejoin.c) */
  int64_t next;                 /* index of the next decision (the same on every member) */
  int64_t nreq_seen;            /* the request counter at the last look; -1: look at the requests again */
  int seen_epoch;               /* epoch of the last look (a recovery makes earlier refusals stale) */
  bool pending;                 /* adm is a decision for a later step */
  sg__dist_adm adm;
  double poll_ms; /* the compute thread's time in the polls, in total */
  double look_ms; /* the looks' time (on the watcher thread, during the steps), in total */
  uint64_t polls, looks;
  double wait_ms; /* a joiner: from its request to its communicator */
} sg__dist_rejoin;

/* Create, before the scheduler starts: SG_REJOIN ("1", "0" or unset; needs a feed callback). */
sg_status sg__dist_rejoin_init(sg_dist *d);
/* The joiner's first scheduler job, instead of joining epoch 0: asks to join,
 * waits to be admitted, builds the new epoch's communicator. */
sg_status sg__dist_rejoin_join(sg_dist *d);
/* Create, after prepare: the joiner receives the step counter, parameters,
 * state and optimizer state from a member. SG_OK at once on other ranks. */
sg_status sg__dist_rejoin_receive(sg_dist *d);
/* Compute thread, at each step boundary of a member: admits waiting joiners
 * when it is time. SG_OK also when the admission was abandoned, or failed in a
 * way the job heals (failed_flag is then set). */
sg_status sg__dist_rejoin_poll(sg_dist *d);
void sg__dist_rejoin_free(sg_dist *d);
/* Scheduler thread (membership.c): makes c (rank idx of n, original ranks
 * orig) the communicator of `epoch`; the old one joins old_comms. */
sg_status sg__dist_install_epoch(sg_dist *d, sg_comm *c, int idx, int n, int epoch, const int *orig);
/* membership.c: the parameters of epoch `epoch`'s communicator, rank idx of
 * n, joining through the job's store with the job's comm params. */
void sg__dist_epoch_params(const sg_dist *d, int idx, int n, int epoch, sg_comm_params *out);
/* membership.c: a new epoch's communicator that failed to come up (c NULL
 * when it was never created) is aborted with the calling thread's error
 * message, which is copied to msg[0..cap), and destroyed. */
void sg__dist_discard_comm(sg_comm *c, char *msg, size_t cap);

/* ---- copies in the global page table (gmem_slots.c) ------------------------------- */

/* Two versioned slots per rank for the copy of another rank's state (ZeRO-1's buddy replicas, the model
 * strategies' copies): this rank holds one copy (held_*) and writes its own into rank `target`'s (push_*).
 * The sg_gmem, over the communicator of the setup, and every call are the scheduler thread's. A slot is a
 * header page, whose entry's version is the label of the copy it holds + 2, and a payload. */
typedef struct sg__slots {
  const char *what;                /* names the copies in messages and in the communicator's label */
  sg_gmem *gm;                     /* NULL: none */
  sg_comm *comm;                   /* its communicator, polled while a large copy is written */
  sg_gva held_hdr[2];              /* slot k: the copies with label mod 2 == k */
  sg_gva held_pay[2];              /*   payload (node 0:0 when held_bytes is 0) */
  size_t held_bytes;               /*   payload bytes */
  const unsigned char *held_at[2]; /*   local pointers to the payloads (NULL when held_bytes is 0) */
  int target;                      /* the rank holding this rank's copies; -1: none */
  sg_gva push_hdr[2];              /* its slots */
  sg_gva push_pay[2];
  size_t push_cap;         /*   payload bytes */
  sg_gmem_pte push_pte[2]; /*   header entries as this rank (their only writer) last committed them */
} sg__slots;

/* The version of a slot holding `label`. */
uint32_t sg__slots_version(uint64_t label);
/* Collective over comm: a new sg_gmem (the old one freed locally first: its communicator may be aborted),
 * this rank's two slots of held_bytes, the target's slots (an allgather). next: the first label written. */
sg_status sg__slots_setup(sg__slots *s, sg_comm *comm, int target, size_t held_bytes, uint64_t next);
/* Collective while the communicator is healthy, a local free once it is aborted. */
void sg__slots_fini(sg__slots *s);
/* Writing copy `label` into the target's slot label mod 2: close it, write the payload (bytes at off, any
 * pieces), open it naming the payload's size. */
sg_status sg__slots_close(sg__slots *s, uint64_t label);
sg_status sg__slots_write(sg__slots *s, uint64_t label, size_t off, const void *src, size_t bytes);
sg_status sg__slots_open(sg__slots *s, uint64_t label, uint64_t bytes);
/* As holder: the latest label a readable slot has (UINT64_MAX, slot -1: none); the slot holding `label`
 * read at its version, and the size its writer named (SG_ERR_STALE: it holds another); a local pointer
 * into a slot's payload. */
sg_status sg__slots_latest(sg__slots *s, uint64_t *label, int *slot);
sg_status sg__slots_check(sg__slots *s, uint64_t label, int *slot, uint64_t *bytes);
sg_status sg__slots_held_ptr(sg__slots *s, int slot, size_t off, size_t bytes, const void **out);
/* Whether p points into one of this rank's slots (any thread: no page-table access). */
bool sg__slots_holds(const sg__slots *s, const void *p);

/* ---- ZeRO-1: sharded optimizer state (zero.c) ----------------------------------- */

typedef struct sg__dist_zero {
  bool on;
  int rank, size;       /* the layout's: the current epoch's */
  uint32_t *first;      /* per rank: its range is plan.grads [first[r], first[r+1]) (size + 1 entries) */
  int *owner;           /* per gradient: the rank that updates its parameter */
  size_t *off;          /* per gradient: its offset in floats in its owner's segment */
  uint32_t *update_pos; /* per gradient: schedule position of its parameter's update */
  void **param_addr;    /* per gradient: its parameter's slot */
  uint32_t *runs;       /* this rank's update positions as [begin, end) pairs */
  uint32_t n_runs;
  size_t count;         /* floats per rank's segment: the largest range + 1 (the loss) */
  float *buf;           /* size * count: reduce-scatter in, allgather out, in place */
  int64_t rs_ns, ag_ns; /* the last step's reduce-scatter (scheduler) and allgather (copies included) */
  /* Buddy replicas (replica.c, replica_gmem.c), with a feed callback: slots in the global page table
   * (labels: steps), as buddy of rank (rank-1) mod size, pushing to rank (rank+1) mod size; slots.gm NULL:
   * no replicas. held_bytes is known before the setup (the owner's range). */
  sg__slots slots;
  uint32_t n_rep;       /* this rank's state tensors, pushed to the buddy: */
  size_t *rep_snap_off; /*   offset in a snapshot slot */
  size_t *rep_bytes;
  size_t *rep_pay_off;  /*   offset in the buddy's slot payload */
  size_t replica_bytes; /* this rank's state pushed each step */
  sg__arena arena;      /* memory for state a recovery made this rank own */
  /* Under mu: */
  uint64_t rep_label; /* the step whose snapshot to push */
  bool rep_pending;   /* a push is asked for */
  bool rep_busy;      /* the scheduler is pushing */
  int64_t rep_ns;     /* the last push's time */
} sg__dist_zero;

/* Before compile: leaves the optimizer state of the parameters other ranks
 * own without memory in d->s (sg__session_set_unbacked), cut from the
 * schedule the session will run. */
sg_status sg__dist_zero_unback(sg_dist *d);
/* After the plan: the updates' positions, the layout for this rank; checks the unbacked state's cut. */
sg_status sg__dist_zero_init(sg_dist *d);
/* The ranges cut over `size` ranks, this rank `rank` (again after a recovery). */
sg_status sg__dist_zero_layout(sg_dist *d, int rank, int size);
void sg__dist_zero_free(sg__dist_zero *z);
/* Optimizer state this rank has memory for, and the whole model's. */
void sg__dist_zero_state_stats(const sg_dist *d, size_t *keep, size_t *total);
/* Scheduler thread, a bucket ready: packs it; the last one reduce-scatters (instead of the allreduce). */
sg_status sg__dist_zero_bucket(sg_dist *d, uint32_t b, float *loss_mean);
/* Scheduler job: allgathers the updated parameters (arg: the 1-based step, for messages). */
sg_status sg__dist_zero_job_gather(sg_dist *d, void *arg);
/* Compute thread, after the reduce-scatter: this rank's updates, the allgather; counts the step. */
sg_status sg__dist_zero_update(sg_dist *d);

/* Buddy replicas (replica.c). Collective (scheduler jobs): the slots in the global page table for the
 * current layout and communicator; frees the arrays of the last layout. */
sg_status sg__dist_replica_init(sg_dist *d);
void sg__dist_replica_free(sg__dist_zero *z);
/* Compute thread: push the snapshot of `label` (after sg__dist_snap_begin); wait for the last push. */
void sg__dist_replica_begin(sg_dist *d, uint64_t label);
void sg__dist_replica_wait(sg_dist *d);
/* Compute thread, recovery: waits for a push in progress and drops a pending one. */
void sg__dist_replica_quiesce(sg_dist *d);
/* Scheduler thread, mu held: the push; the snapshot, then the push (before the reduce-scatter). */
void sg__dist_replica_push_locked(sg_dist *d);
void sg__dist_replica_flush_locked(sg_dist *d);
/* Compute thread: what this rank registers as committed for recovery: at most the latest step a
 * replica it holds as buddy has. */
sg_status sg__dist_replica_committed(sg_dist *d, uint64_t committed, uint64_t *out);
/* Compute thread, after the rollback: restores lost ranges from replicas, cuts the ranges over the
 * members, moves the state to the new owners, rebuilds the snapshot and the window. */
sg_status sg__dist_zero_recover(sg_dist *d, const int *old_members, int old_size, uint64_t rollback);

/* The slots in the global page table (replica_gmem.c, over gmem_slots.c). */
/* Compute thread, collective: a new sg_gmem over d->comm, the slots; `next`: the next step pushed. */
sg_status sg__dist_replica_gmem_setup(sg_dist *d, uint64_t next);
/* Scheduler thread, at exit: destroys the sg_gmem. */
void sg__dist_replica_gmem_fini(sg_dist *d);
/* Scheduler thread: writes `from` (a snapshot slot of `step`) to the buddy's slot step mod 2. */
sg_status sg__dist_replica_gmem_push(sg_dist *d, uint64_t step, const char *from);
/* Compute thread (scheduler jobs): the latest step a readable held slot has (UINT64_MAX: none); the
 * slot holding `step`, read at its version (SG_ERR_STALE: it holds another). Scheduler thread: a local
 * pointer into a held slot's payload. */
sg_status sg__dist_replica_latest(sg_dist *d, uint64_t *step);
sg_status sg__dist_replica_check(sg_dist *d, uint64_t step, int *slot);
sg_status sg__dist_replica_held_ptr(sg_dist *d, int slot, size_t off, size_t bytes, const void **out);
/* For tests: both slots as this rank sees them, as owner (push_*) and as buddy (held_*). */
typedef struct sg__dist_replica_probe {
  int push_node[2], push_pay_node[2]; /* node of the header entry, and the payload's translation */
  uint32_t push_version[2];
  bool push_open[2];
  bool push_matches[2]; /* the payload read back equals this rank's snapshot of the slot's step */
  char push_gva[2][SG_GVA_STR_MAX];
  int held_node[2];
  uint32_t held_version[2];
  sg_status held_read[2];  /* sg_gmem_read_at of the header at its version */
  uint64_t held_step[2];   /* the step it read */
  sg_status held_stale[2]; /* sg_gmem_read_at at version + 2 */
} sg__dist_replica_probe;
sg_status sg__dist_replica_probe_get(sg_dist *d, sg__dist_replica_probe *out);

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

/* What a create hands to its strategy (sg__par_create): the checked
 * parameters and, per mode, the graph. */
/* Synchronized batch norm (sync_bn.c): one batch norm of the rewritten forward graph, by its tensors'
 * names (they outlive backward and the optimizer, which append to the graph). */
typedef struct sg__sync_bn {
  char *sum, *sqdev;                /* the sync points: summed over the ranks right after they are computed */
  char *mean, *var;                 /* the global batch's statistics (the variance biased) */
  char *running_mean, *running_var; /* its state, updated after forward */
  double momentum, count;           /* count: elements per channel over every rank */
} sg__sync_bn;

/* The forward graph with every training-form batch norm spelled out in ops whose statistics are summed
 * over `ranks` data-parallel ranks (*bns: one per batch norm, in op order). SG_ERR_INVALID_ARG when there
 * is none; SG_ERR_UNSUPPORTED for a batch norm it cannot spell out (naming it); SG_ERR_NO_MEMORY. */
sg_status sg__sync_bn_rewrite(const sg_graph *fwd, int ranks, sg_graph **out, sg__sync_bn **bns, int *n_bns);
void sg__sync_bn_free(sg__sync_bn *bns, int n);

typedef struct sg__par_create_args {
  const char *fn;               /* "sg_dist_create", "sg_dist_create_model": for messages */
  const sg_dist_params *p;      /* checked (sg__par_check_params and the strategy's own) */
  const sg_graph *g;            /* data: the training graph; pipeline, tensor: the forward graph */
  sg_tensor loss;               /* pipeline, tensor: the loss in g */
  const sg_dist_optimizer *opt; /* pipeline, tensor */
  int data, pipeline, tensor;   /* the degrees, resolved against the world size */
  const sg__sync_bn *sync_bn;   /* data: sg_dist_create_model's synchronized batch norms, or NULL */
  int n_sync_bn;
} sg__par_create_args;

/* How this rank runs its part of the job: data, pipeline or tensor
 * parallelism (with data-parallel replicas around the latter two), as a
 * table of functions in the manner of ggml's backend interface. The public
 * functions of lifecycle.c and sg_dist_step dispatch through it; the
 * scheduler thread, the membership, the failure state, the trace and the
 * statistics are the shared core, struct sg_dist's. Each strategy keeps its
 * own state in d->impl. */
typedef struct sg__par_strategy {
  const char *name;  /* "data", "pipeline", "tensor" */
  uint8_t id;        /* in the consistency check: every rank of a job runs the same strategy */
  size_t impl_bytes; /* its state (d->impl), zeroed by create */
  /* optional: create, before the scheduler thread starts (checks that need d, the environment). */
  sg_status (*init)(sg_dist *d, const sg__par_create_args *a);
  /* Create, after joining (compute thread): builds and compiles this rank's part (d->s and d->g set),
   * checks with the peers that they run the same job. */
  sg_status (*build)(sg_dist *d, const sg__par_create_args *a);
  /* sg_dist_set_input (copy) and sg_dist_bind_input. */
  sg_status (*set_input)(sg_dist *d, const char *name, sg_dtype dtype, int ndim, const int64_t *dims,
                         void *data, bool copy);
  /* One training step (compute thread); d->away is handled by the caller. */
  sg_status (*step)(sg_dist *d);
  sg_status (*read)(const sg_dist *d, const char *name, void *out, size_t bytes);
  sg_status (*params_hash)(const sg_dist *d, uint64_t *out);
  /* optional: destroy, before the scheduler thread stops: releases what still runs scheduler jobs. */
  void (*quiesce)(sg_dist *d);
  /* Frees the strategy's state (not d->impl itself): the scheduler thread stopped or never ran. */
  void (*free)(sg_dist *d);
  /* optional: the health monitor of the original ranks (NULL when the strategy does not heal). */
  const sg_health *(*health)(const sg_dist *d);
  /* optional: the scheduler's first job, joining the job (NULL: sg__par_join, epoch 0). */
  sg_status (*join)(sg_dist *d);
  /* optional: scheduler thread, mu held: runs one piece of the strategy's own work (a bucket's
   * allreduce, a snapshot chunk) and returns true, or returns false when there is none. */
  bool (*sched_work_locked)(sg_dist *d);
  /* optional: scheduler thread, mu held: after each idle poll of a healthy communicator. */
  void (*sched_poll_locked)(sg_dist *d);
  /* optional: scheduler thread, at its exit, before the communicator is destroyed. */
  void (*sched_fini)(sg_dist *d);
  /* optional: mu held, a recovery or rejoin installed a new epoch's communicator (sg__dist_install_epoch):
   * forget what the old one had in flight. */
  void (*epoch_installed_locked)(sg_dist *d);
} sg__par_strategy;

extern const sg__par_strategy sg__par_data_strategy, sg__par_pipeline_strategy, sg__par_tensor_strategy;

/* The profile sampler (profile.c): the compute thread's record of the last
 * steps and its samples. */
#define SG__DIST_PROFILE_WINDOW 64 /* steps of the p99 and steps/s window */
#define SG__DIST_PROFILE_SAMPLES 8 /* samples kept for the trigger */
typedef struct sg__dist_profile {
  double step_ms[SG__DIST_PROFILE_WINDOW];  /* a ring of the last steps' times */
  int64_t done_ms[SG__DIST_PROFILE_WINDOW]; /* ... and when each completed */
  int head, n;
  int64_t next_ms; /* the next sample: 0 before the first step */
  sg_cpu_meter cpu;
  sg_profile_sample samples[SG__DIST_PROFILE_SAMPLES];
  int n_samples;
  bool said; /* the trigger's firing was reported */
} sg__dist_profile;

/* After every completed step (sg_dist_step): records it and takes a sample
 * when one is due; the latest sample and the trigger's answer go to
 * d->stats. Compute thread. */
void sg__dist_profile_step(sg_dist *d, double step_ms);
/* Forgets the trigger's samples (a re-cut was evaluated: the next evaluation
 * needs a fresh run of them) and, with `window`, the step window too (the
 * stages changed: steps/s and p99 from then on are the new cut's). */
void sg__dist_profile_restart(sg_dist *d, bool window);

/* Check-ins (checkin.c): the scheduler sends this rank's and queues the
 * peers' (under mu); the compute thread feeds them to the health monitor
 * between steps. */
#define SG__DIST_CHECKIN_QUEUE 256
typedef struct sg__dist_checkin_rx {
  int64_t at_ms; /* arrival (sg__now_ms) */
  sg_checkin ci; /* decoded and validated */
} sg__dist_checkin_rx;
typedef struct sg__dist_checkins {
  uint64_t instance; /* this process's id in its check-ins, nonzero */
  /* Scheduler thread: */
  int64_t next_ms; /* the next send */
  sg_cpu_meter cpu;
  /* Under mu: */
  double busy_sum;         /* busy time (compute, not waiting) of the steps since the last check-in */
  uint32_t busy_n;         /* and their number (both from the compute thread) */
  uint32_t busy_ms;        /* the mean sent last */
  bool muted;              /* an injected drop-checkins fault: nothing goes to the peers */
  sg__dist_checkin_rx *rx; /* SG__DIST_CHECKIN_QUEUE of room */
  int n_rx;
  uint64_t rx_dropped, sent, received, rejected;
  /* Compute thread: */
  int64_t fed_ms;     /* the monitor's clock: its last now */
  uint64_t log_seen;  /* monitor transitions already reported */
  int64_t ring_epoch; /* the epoch whose ring the health graph has; -1: none yet */
} sg__dist_checkins;

sg_status sg__dist_checkins_init(sg_dist *d);
void sg__dist_checkins_free(sg_dist *d);
/* Scheduler thread, mu held: sends this rank's check-in when due, queues the arrived ones. */
void sg__dist_checkins_poll_locked(sg_dist *d);
/* Compute thread, between steps: the queue into the monitor, a tick, DEGRADED changes on stderr,
 * stats.degraded_ranks. */
void sg__dist_checkins_feed(sg_dist *d);
/* Compute thread, after a completed step: its busy time, for the next check-ins. */
void sg__dist_checkins_step_done(sg_dist *d, double busy_ms);

/* What every strategy's healing and fault injection keep (membership.c,
 * recovery.c, inject.c, checkin.c, rejoin.c; the pipeline's pp_heal.c). */
typedef struct sg__dist_healing {
  /* Set by create: */
  int qos;               /* sg_qos */
  sg__comm_env env;      /* resolved bootstrap: the store's address and token */
  sg_fault_plan *inject; /* SG_INJECT, or NULL */
  sg_health *health;     /* original ranks' states: failures and epochs (recovery job only), or NULL;
                            the compute thread's */
  sg__dist_checkins ci;  /* check-ins that feed it (checkin.c; data parallelism) */
  /* Compute thread: */
  uint64_t inject_next;   /* faults of steps below this have fired */
  uint64_t inject_behind; /* 1-based step an injected 'behind' fault gives up before its updates; 0: none */
  double slow_factor;     /* an injected 'slow' fault: compute takes this many times longer (0 or 1: none) */
  unsigned inject_phases_fired; /* bit per sg_recovery_phase whose faults fired */
  /* Scheduler thread (the injected cut and the recovery job): until when this rank's link to an original
   * rank is down (a partition's ms=; INT64_MAX: for good; 0: up), on the plain ms clock. */
  int64_t link_down_until_ms[SG__DIST_MAX_RANKS];
  /* Best-effort (qos): the retries of the failure streak being healed, and when it began (ms; 0: none).
   * The recovery job counts them, a completed step ends the streak (the compute thread, between jobs). */
  int be_retries;
  int64_t be_t0_ms;
  /* A model strategy with several copies keeps every copy's layout alike: the recovery's decision also
   * leaves out the live ranks in the lost ones' places in the other copies (released: they leave as if
   * excluded). keep(d, alive, orig): whether original rank `orig` stays, given the survivors `alive` (by
   * original rank); the installed communicator's layout is the strategy's. NULL: every survivor stays. */
  bool (*keep)(const sg_dist *d, const bool *alive, int orig);
} sg__dist_healing;

struct sg_dist {
  const sg__par_strategy *strategy;
  void *impl; /* the strategy's state: sg__par_data (DP()), model.h's sg__par_pipeline or sg__par_tensor */
  /* Set by create, read-only afterwards. */
  const sg_graph *g;
  sg_session *s;
  sg_dist_params p;
  sg_comm_params comm_params;
  int rank, size;
  bool tracing;
  char *trace_path;
  int64_t origin_ns; /* trace origin (CLOCK_MONOTONIC) */

  /* Owned by the scheduler thread. */
  sg_comm *comm;
  sg__dist_ring sched_ring; /* written by the scheduler; read under mu */
  int last_healthy;

  /* Owned by the compute thread. */
  sg__dist_ring compute_ring;
  sg_dist_stats stats;
  sg__dist_profile prof;

  /* Shared, under mu. */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t wake_sched;   /* work for the scheduler: a job, the strategy's work, stop */
  pthread_cond_t wake_compute; /* a job done, the strategy's work done, a failure */
  uint64_t step;               /* the step being run, 1-based */
  sg__dist_job *job;
  bool stop;
  sg_status failed; /* sticky: the job failed (SG_OK while healthy) */
  int failed_flag;  /* atomic copy of failed != SG_OK, for a glance without mu */
  char fail_msg[1024];
  int healthy; /* atomic: also read without mu */
  int away;    /* atomic: 1 outside sg_dist_step (set by the compute thread, handed to the comm by the
                  scheduler: sg__comm_set_away) */
  sg_status comm_destroy_status;
  int64_t fail_ns;        /* monotonic time the current failure was detected; 0 while healthy */
  int64_t pause_until_ns; /* the scheduler does nothing until then (fault injection: a hung
                             communication thread) */

  /* The membership: the communicator's ranks as original (epoch 0) ranks.
   * Changed by a recovery job while the compute thread waits for it. */
  int orig_rank, orig_size;
  int epoch;
  int members[SG__DIST_MAX_RANKS]; /* original rank of each current rank */
  sg_comm **old_comms;             /* aborted communicators of earlier epochs, destroyed at the end */
  int n_old;
  sg__dist_healing heal;
};

/* Synchronized batch norm in a data-parallel step (sync_bn.c): the sync points at their schedule
 * positions, and each batch norm's statistics and state. */
typedef struct sg__dist_sync_point {
  uint32_t pos; /* summed over the ranks after the op at this position */
  float *addr;
  size_t count;
} sg__dist_sync_point;
/* A running statistic of a batch norm, updated from the global batch's right after the op at `pos` computed
 * it (its slot is reused later in the step). */
typedef struct sg__dist_sync_stat {
  uint32_t pos;
  const float *batch; /* the global mean or (biased) variance */
  float *running;
  size_t channels;
  double momentum, scale; /* scale: n / (n - 1) for the variance (unbiased, as the op), else 1 */
} sg__dist_sync_stat;
typedef struct sg__dist_sync_bns {
  sg__dist_sync_point *pts; /* forward's and backward's, in schedule order */
  int n_pts;
  sg__dist_sync_stat *stats;
  int n_stats;
  int n_bns;
} sg__dist_sync_bns;

/* Marks what the sync points touch (the sums, their gradients, the statistics) in a fusion barrier of
 * g's tensors. */
void sg__dist_sync_bn_barrier(const sg_graph *g, const sg__sync_bn *bns, int n, uint8_t *mask);
/* After the plan is built: the sync points' positions and slots, the statistics' slots; the plan's hooks
 * run after those positions. */
sg_status sg__dist_sync_bn_start(sg_dist *d, const sg__sync_bn *bns, int n);
/* Compute thread, after the op at `pos`: the sync points there, each summed over the ranks once the
 * buckets posted so far are done (the scheduler then runs the collectives in one order on every rank), and
 * the running statistics computed there, updated as the batch norm op does (the variance unbiased). */
sg_status sg__dist_sync_bn_after(sg_dist *d, uint32_t pos);
void sg__dist_sync_bn_free(sg__dist_sync_bns *s);

/* The data strategy's state (data.c, step.c, data_sched.c, buckets.c,
 * micro.c, zero.c, snapshot.c, replica*.c, recovery.c, membership.c,
 * rejoin.c, inject.c): gradient buckets, sharded optimizer state, the
 * healing machinery. */
typedef struct sg__par_data {
  sg_graph *owned_graph;    /* sg_dist_create_model's training graph (data parallelism), freed last */
  sg__dist_offload offload; /* optimizer state in a memory tier, or zeroed */
  sg__dist_zero zero;       /* ZeRO-1; its layout changes only in a recovery (compute thread waiting) */
  sg__dist_plan plan;
  int32_t loss;     /* tensor id of a one-element f32 output named "loss", or -1 */
  float *loss_addr; /* its host view */
  void *flat;       /* scheduler's staging buffer: a bucket's small gradients, plus the loss */
  /* Compute thread. */
  int64_t op_t0;
  uint32_t posted_local; /* buckets handed over this step */
  bool broadcast_done;
  /* Shared, under the job's mu. */
  uint32_t posted, done; /* buckets handed over / allreduced in this step */
  bool busy;             /* the scheduler is inside a bucket's allreduce */
  float loss_mean;
  double comm_ms; /* this step's allreduce time */
  sg__dist_snap snap;
  int *shards;        /* the shards this rank runs in a step (micro.c), sg__dist_n_shards of room */
  float *accum;       /* gradients of this step's earlier shards (plan order), or NULL */
  size_t *accum_off;  /* per gradient: its offset in accum, in floats */
  int64_t heal_t0_ns; /* detection of the failure being healed; 0 when none */
  /* Handed to the scheduler with the buckets (set before the step, read by run_bucket): */
  bool partial;  /* a shard's forward+backward only: the hooks post nothing */
  bool accum_on; /* add accum (and accum_loss) before each bucket's allreduce */
  float accum_loss;
  int sum_div;   /* > 0: allreduce SUM, then divide by this (the shards); 0: AVG */
  bool excluded; /* a recovery left this rank out */
  /* Graceful-degrade without a redo (QoS, recovery.c "re-reduce"): the step's own gradients are kept
   * before each bucket's allreduce, so that a step whose allreduces failed is averaged again over the
   * survivors instead of being redone. */
  bool keep_local;     /* set by create: graceful-degrade, plain data parallelism with a feed */
  float *local;        /* the gradients as backward left them (before accumulation), at accum_off */
  uint8_t *started;    /* per bucket, under mu: its allreduce began this step (its slots may be partial) */
  uint64_t local_step; /* compute thread: the 1-based step whose backward this rank completed; 0 none */
  bool rr_accum_on;    /* the step's accum_on, for the re-reduce */
  uint64_t rr_stream;  /* the step's last shard's stream */
  bool rereduce;       /* set by a recovery: average the step again over the members, then update */
  int rr_div;          /* the shards the members ran in that step */
  /* Rejoin (rejoin.c): */
  sg__dist_rejoin rj;
  sg__dist_sync_bns sbn; /* synchronized batch norm (sync_bn.c); n_bns 0: off */
} sg__par_data;

/* Graceful-degrade (step.c): after a recovery that chose to re-reduce,
 * averages the failed step's gradients again over the members from the kept
 * copies, runs the updates and counts the step. Compute thread. */
sg_status sg__dist_rereduce_step(sg_dist *d);

/* The data strategy's state of a job the data strategy runs. */
#define DP(d) ((sg__par_data *)(d)->impl)

/* ---- the lifecycle every strategy shares (lifecycle.c) ------------------------- */

/* sg_dist_create's, with sg_dist_create_model's synchronized batch norms (sync_bn.c); bns may be NULL. */
sg_status sg__dist_create_data(const sg_graph *g, const sg_dist_params *p, const sg__sync_bn *bns, int n_bns,
                               sg_dist **out);

/* Reads the caller's params (NULL: the defaults) as far as its size goes,
 * and the communicator's params they point to, into p and comm (p->comm
 * points to comm). `fn` names the create in messages. */
sg_status sg__par_read_params(const char *fn, const sg_dist_params *given, sg_dist_params *p,
                              sg_comm_params *comm);
/* Whether the job runs on a device other than the CPU, or as if it did
 * (SG_HOST_MIRROR=1: the session's host views are copies, hooks.h). */
bool sg__par_on_device(const sg_dist_params *p);
/* The checks of sg_dist_params that hold in every mode (sizes, degrees,
 * threads, heartbeats, hang diagnosis, QoS, tracing); the strategies check
 * what only they read. `fn` names the create in messages. */
sg_status sg__par_check_params(const sg_dist_params *p, const char *fn);
/* Creates the job: the handle and the strategy's state, the scheduler
 * thread (which joins the job), then the strategy's build. On failure the
 * peers are told, everything is freed, and the error is the caller's. */
sg_status sg__par_create(const sg__par_strategy *s, const sg__par_create_args *a, sg_dist **out);
/* Scheduler thread (a job): the consistency check of a new job or epoch
 * (sg_comm_check_consistency over the hash and the ids); the ranks leave it
 * together, which makes it the origin of their timelines. `what`: when set,
 * a mismatch's message says what the hash covers. */
typedef struct sg__par_check {
  uint64_t hash;
  const uint8_t *ids;
  uint32_t n_ids;
  const char *what;
} sg__par_check;
sg_status sg__par_job_check(sg_dist *d, void *check);
/* A step after the job failed and cannot heal: SG_ERR_COMM "the job failed
 * earlier" with the failure's message. */
sg_status sg__par_failed_earlier(sg_dist *d);
/* Compute thread: an event of the timeline (when tracing), in the step being run. */
void sg__par_record(sg_dist *d, sg__dist_ev_kind kind, int64_t t0, int64_t t1, int32_t id);

/* ---- scheduler.c ------------------------------------------------------------ */

/* Starts the scheduler thread, which creates the communicator; waits for
 * it. On failure the thread has exited and the error is set. */
sg_status sg__dist_sched_start(sg_dist *d);
/* Stops the thread (it destroys the communicator) and joins it. */
void sg__dist_sched_stop(sg_dist *d);
/* The scheduler sends and reads nothing (no heartbeats, no jobs) for `ns`; a stop is still
 * honoured. Fault injection's hung communication thread. Any thread. */
void sg__dist_sched_pause(sg_dist *d, int64_t ns);
/* Scheduler thread: joins epoch 0 (sg_comm_create with the job's params, liveness on). */
sg_status sg__par_join(sg_dist *d);
/* Under mu: records the first failure (later ones are its echoes) and wakes the compute thread. */
void sg__dist_fail_locked(sg_dist *d, sg_status st, const char *msg);
/* Under mu: a scheduler-thread event of the trace (when tracing). */
void sg__dist_record_locked(sg_dist *d, sg__dist_ev_kind kind, int64_t t0, int64_t t1, int32_t id);
/* Runs fn on the scheduler thread and waits; its error (status and
 * message) becomes the caller's. */
sg_status sg__dist_run_job(sg_dist *d, sg_status (*fn)(sg_dist *d, void *arg), void *arg);
/* Records the job's failure (the first one wins), aborts the communicator
 * and wakes the compute thread. Either thread; takes mu. */
void sg__dist_fail(sg_dist *d, sg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The failure as the calling thread's error: SG_ERR_COMM and the message. */
sg_status sg__dist_failure(sg_dist *d);

/* The data strategy's work on the scheduler thread (data_sched.c): a bucket, a snapshot chunk, a
 * replica push; false when there is none. mu held. */
bool sg__par_data_sched_work_locked(sg_dist *d);
/* Adds the accumulated gradients of earlier shards to gradients [first, first+count) of the plan. */
void sg__dist_add_accum(const sg_dist *d, uint32_t first, uint32_t count);

/* Jobs run on the scheduler thread. */
sg_status sg__dist_job_broadcast(sg_dist *d, void *arg);

/* ---- step.c ----------------------------------------------------------------- */

/* The data strategy's step: the buckets' allreduces during backward, the
 * recovery and redo of a failed step, rejoins at the step boundary. */
sg_status sg__par_data_step(sg_dist *d);
/* The hooks of a data-parallel pass: at the plan's positions (every
 * position when tracing), bucket hand-off and the wait before the updates. */
sg__step_hooks sg__dist_step_hooks(sg_dist *d);

/* ---- trace.c ---------------------------------------------------------------- */

/* Writes the timeline (gathers it on rank 0 while healthy). Compute thread. */
sg_status sg__dist_write_trace(sg_dist *d, const char *path);

#endif /* SG_DIST_INTERNAL_H */
