/**
 * @file health.h
 * Self-healing building blocks: one rank's view of the
 * health of the job, the heartbeat and check-in payloads, QoS tiers and
 * fault-injection plans. docs/resilience.md has the states, the byte layouts
 * and the syntax.
 *
 * The monitor is pure logic: it owns no thread and reads no clock. The
 * rank's scheduler thread feeds it what arrives (heartbeats, check-ins,
 * transport failures) with the current time of a monotonic clock in
 * milliseconds, and calls sg_health_tick() periodically; the monitor answers
 * with states, a transition log and a callback. The same inputs give the
 * same transitions, so tests drive it with hand-written timelines.
 *
 * @code
 *   sg_health_config cfg = SG_HEALTH_CONFIG_INIT;   // heartbeat 100 ms, unreachable after 1 s
 *   sg_health *h;
 *   if (sg_health_create(world, rank, &cfg, now_ms(), &h) != SG_OK) return 1;
 *   sg_health_set_callback(h, on_transition, ctx);     // e.g. start recovery on UNREACHABLE
 *   sg_health_add_ring(h, NULL, world);                // data parallel: ring neighbours
 *   for (;;) {                                         // the scheduler thread's loop
 *     // a heartbeat message from `peer` arrived:
 *     sg_heartbeat hb;
 *     if (sg_heartbeat_decode(msg, len, world, &hb) == SG_OK) sg_health_heartbeat(h, peer, now_ms(), &hb);
 *     sg_health_tick(h, now_ms());                     // timeouts
 *   }
 *   char why[256];
 *   sg_health_diagnose(h, why, sizeof why, NULL);
 *   // why: "rank 2 is at collective #17 (step 5), the others at #18 (step 5)"
 *   sg_health_destroy(h);
 * @endcode
 *
 * Threads: an sg_health belongs to one thread (the scheduler thread); it has
 * no locks. The callback runs on that thread, inside the call that caused
 * the transition. The payload, QoS and fault-plan functions are reentrant.
 */
#ifndef SGRT_HEALTH_H
#define SGRT_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/export.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

/* ---- payloads ------------------------------------------------------------- */

/** Most dependencies a check-in carries. */
#define SG_CHECKIN_MAX_DEPS 64
/** Bytes of an encoded heartbeat (version 1). */
#define SG_HEARTBEAT_BYTES 32
/** Bytes of an encoded check-in without dependencies; each adds 4. */
#define SG_CHECKIN_BASE_BYTES 48
/** Bytes of the largest encoded check-in. */
#define SG_CHECKIN_MAX_BYTES (SG_CHECKIN_BASE_BYTES + 4 * SG_CHECKIN_MAX_DEPS)

/** A heartbeat: sent every heartbeat_ms; says "alive, and here in the schedule". */
typedef struct sg_heartbeat {
  int rank;              /**< sender, 0..world_size-1 */
  uint32_t epoch;        /**< sender's membership epoch */
  uint64_t step;         /**< sender's current step (at most INT64_MAX) */
  uint32_t collective;   /**< index of the collective in the step's static schedule the sender is in or
                              will enter next (at most INT32_MAX) */
  uint64_t timestamp_ms; /**< sender's clock (at most INT64_MAX); for logs, never compared across ranks */
} sg_heartbeat;

/** A check-in: sent every checkin_ms; says how the sender is doing. */
typedef struct sg_checkin {
  int rank;              /**< sender, 0..world_size-1 */
  uint32_t epoch;        /**< sender's membership epoch */
  uint64_t instance_id;  /**< nonzero id of the sender process; a new one means it restarted */
  uint64_t timestamp_ms; /**< sender's clock (at most INT64_MAX) */
  uint64_t step;         /**< sender's current step (at most INT64_MAX) */
  uint32_t collective;   /**< position in the collective schedule (at most INT32_MAX) */
  uint16_t cpu_permille; /**< CPU use of the sender, 0..1000 of all the machine's CPUs */
  uint32_t step_ms;      /**< the sender's busy time in its last step (compute, not waiting); 0: unknown */
  int n_deps;            /**< 0..SG_CHECKIN_MAX_DEPS */
  int deps[SG_CHECKIN_MAX_DEPS]; /**< ranks the sender depends on: distinct, in range, not itself */
} sg_checkin;

/**
 * Writes a heartbeat in its wire layout (docs/resilience.md) into buf[cap].
 * @return SG_OK with *written = SG_HEARTBEAT_BYTES; SG_ERR_INVALID_ARG for
 *   NULL; SG_ERR_RANGE for a field out of range (named) or cap too small.
 *   Any thread.
 */
SG_API sg_status sg_heartbeat_encode(const sg_heartbeat *hb, void *buf, size_t cap, size_t *written);
/**
 * Parses and validates a heartbeat of `len` bytes from a job of world_size
 * ranks. Never reads past len.
 * @return SG_OK; SG_ERR_TRUNCATED (too short); SG_ERR_FORMAT (bad magic,
 *   trailing bytes, nonzero reserved bits); SG_ERR_VERSION (a newer layout);
 *   SG_ERR_RANGE (rank, step, collective or timestamp out of range);
 *   SG_ERR_INVALID_ARG (NULL, world_size outside 1..65536). The message
 *   names the field.
 *   *out is zeroed on error. Any thread.
 */
SG_API sg_status sg_heartbeat_decode(const void *buf, size_t len, int world_size, sg_heartbeat *out);
/** As sg_heartbeat_encode() for a check-in: SG_CHECKIN_BASE_BYTES + 4 * n_deps bytes. */
SG_API sg_status sg_checkin_encode(const sg_checkin *ci, void *buf, size_t cap, size_t *written);
/**
 * As sg_heartbeat_decode() for a check-in; also SG_ERR_RANGE for more than
 * SG_CHECKIN_MAX_DEPS dependencies, a CPU use over 1000 or a zero instance
 * id, SG_ERR_FORMAT for a dependency out of range, repeated or the sender
 * itself, and for a length that disagrees with the dependency count.
 */
SG_API sg_status sg_checkin_decode(const void *buf, size_t len, int world_size, sg_checkin *out);

/* ---- the health monitor --------------------------------------------------- */

/** A peer's health. */
typedef enum sg_health_state {
  SG_HEALTH_HEALTHY = 0,
  SG_HEALTH_DEGRADED = 1,    /**< missed check-ins, or too slow; recovers by itself */
  SG_HEALTH_UNREACHABLE = 2, /**< dead or silent; terminal until sg_health_reset_epoch() */
} sg_health_state;

/** "HEALTHY", "DEGRADED", "UNREACHABLE"; "?" for other values. Any thread. */
SG_API const char *sg_health_state_str(sg_health_state state);

/** Configuration of sg_health_create(). Initialise from SG_HEALTH_CONFIG_INIT. */
typedef struct sg_health_config {
  size_t size;                  /**< sizeof(sg_health_config) */
  int heartbeat_ms;             /**< heartbeat period, 1 .. 86400000; 100 */
  int checkin_ms;               /**< check-in period, 1 .. 86400000; 1000 */
  int unreachable_ms;           /**< silence that makes a peer UNREACHABLE; > heartbeat_ms, <= 86400000.
                                     1000 suits ranks on one machine; 30000 suits real clusters */
  int degraded_missed_checkins; /**< consecutive check-ins missed for DEGRADED, 1 .. 1000; 2 */
  double slow_factor;           /**< DEGRADED when a step takes more than this times the median; 0 turns the
                                     check off, else 1 < f <= 1000; 3.0 */
  int log_capacity; /**< transitions kept in the log (the oldest are dropped), 1 .. 1048576; 256 */
  int slow_min_ms;  /**< a step is too slow only when it also exceeds the median by this much, 0 .. 86400000;
                         50: a preempted millisecond step is noise, not a slow rank */
} sg_health_config;

#define SG_HEALTH_CONFIG_INIT \
  { sizeof(sg_health_config), 100, 1000, 1000, 2, 3.0, 256, 50 }
SG_API sg_health_config sg_health_config_init(void);

typedef struct sg_health sg_health;

/** Longest reason text of a transition, with its NUL. */
#define SG_HEALTH_REASON_MAX 128

/** One state change of one peer. */
typedef struct sg_health_transition {
  int rank; /**< the peer */
  sg_health_state from, to;
  int64_t at_ms;                     /**< now_ms of the call that found it */
  uint32_t epoch;                    /**< membership epoch it happened in */
  char reason[SG_HEALTH_REASON_MAX]; /**< e.g. "no heartbeat for 1000 ms (timeout 1000 ms)" */
} sg_health_transition;

/** Called for every transition, in the order they happen; must not call a mutating sg_health_* function
 *  on the same monitor (those return SG_ERR_STATE there); queries are fine. */
typedef void (*sg_health_callback)(const sg_health_transition *t, void *ctx);

/**
 * Creates the monitor of rank self_rank in a job of world_size ranks, epoch
 * 0, every rank a member and HEALTHY, as if everyone had been heard at
 * now_ms (so a silent peer becomes UNREACHABLE unreachable_ms later).
 * @param cfg  NULL for SG_HEALTH_CONFIG_INIT.
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL out, world_size outside
 *   1..65536, a self_rank outside it, now_ms < 0, a bad cfg->size or a
 *   config value out of range (the message names the field);
 *   SG_ERR_NO_MEMORY. *out is NULL on error.
 */
SG_API sg_status sg_health_create(int world_size, int self_rank, const sg_health_config *cfg, int64_t now_ms,
                                  sg_health **out);
/** Frees the monitor. Accepts NULL. */
SG_API void sg_health_destroy(sg_health *h);

/**
 * Calls fn(transition, ctx) for every later transition (NULL fn: none).
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL h; SG_ERR_STATE from inside the callback.
 */
SG_API sg_status sg_health_set_callback(sg_health *h, sg_health_callback fn, void *ctx);

/*
 * Inputs. Each takes the caller's monotonic now_ms, which must never
 * decrease from one call to the next (SG_ERR_INVALID_ARG "time went
 * backwards"). Every input returns SG_ERR_INVALID_ARG for a NULL argument or
 * a rank outside the job and SG_ERR_STATE when called from the callback.
 */

/**
 * A heartbeat from `peer` (the sender as the transport knows it): the peer
 * is alive at now_ms, and at (hb->step, hb->collective). Pass this rank's
 * own heartbeats too, so that sg_health_diagnose() includes it.
 * @return SG_OK; SG_ERR_FORMAT when hb->rank is not peer; SG_ERR_STATE (the
 *   heartbeat is ignored) when the peer is not a member, is UNREACHABLE, or
 *   hb->epoch is not the current epoch.
 */
SG_API sg_status sg_health_heartbeat(sg_health *h, int peer, int64_t now_ms, const sg_heartbeat *hb);
/**
 * A check-in from `peer`: also a sign of life. Clears missed check-ins, and
 * judges the peer's step time against the median of the members' (a
 * DEGRADED peer whose check-ins resumed and that is not too slow becomes
 * HEALTHY). A new instance id for a peer already seen in this epoch means it
 * restarted: UNREACHABLE. Pass this rank's own check-ins too, so that the
 * median includes it. Errors as sg_health_heartbeat(), and SG_ERR_FORMAT for
 * a dependency list that is out of range (ci is not trusted).
 */
SG_API sg_status sg_health_checkin(sg_health *h, int peer, int64_t now_ms, const sg_checkin *ci);
/**
 * The transport reported peer's endpoint failed, or the launcher reported
 * its exit: UNREACHABLE at once (a dead peer). `reason` (NULL:
 * "peer failed") goes into the log. Nothing happens for a peer already
 * UNREACHABLE.
 * @return SG_OK; SG_ERR_INVALID_ARG for self_rank; SG_ERR_STATE for a non-member.
 */
SG_API sg_status sg_health_peer_failed(sg_health *h, int peer, int64_t now_ms, const char *reason);
/**
 * Evaluates the timeouts at now_ms, peers in rank order: a member other
 * than self not heard from (heartbeat or check-in) for unreachable_ms or
 * longer becomes UNREACHABLE; one whose last check-in is
 * degraded_missed_checkins x checkin_ms old or older becomes DEGRADED; a
 * member whose latest step time exceeds slow_factor x the median, and the
 * median by slow_min_ms or more, becomes DEGRADED ("too slow"), and HEALTHY again when it no longer does and
 * its check-ins are current. At most one transition per peer per call.
 */
SG_API sg_status sg_health_tick(sg_health *h, int64_t now_ms);
/**
 * Installs membership epoch `epoch` (greater than the current one) with the
 * given member ranks (distinct, in range, self included): every member is
 * HEALTHY again, as if heard from at now_ms, with no heartbeat or check-in
 * data; non-members are left out of every count and query. The health graph
 * is cleared (the caller adds the new plan's edges). Not logged as
 * transitions.
 * @return SG_OK; SG_ERR_INVALID_ARG naming the bad epoch or member.
 */
SG_API sg_status sg_health_reset_epoch(sg_health *h, int64_t now_ms, uint32_t epoch, const int *members,
                                       int n_members);

/* ---- queries (any time, also from the callback) --------------------------- */

SG_API int sg_health_world_size(const sg_health *h); /**< 0 for NULL */
SG_API int sg_health_self(const sg_health *h);       /**< -1 for NULL */
SG_API uint32_t sg_health_epoch(const sg_health *h); /**< 0 for NULL */
/** Whether rank is a member of the current epoch (false for NULL or out of range). */
SG_API bool sg_health_is_member(const sg_health *h, int rank);
/**
 * The state of a rank.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL or a rank outside the job;
 *   SG_ERR_NOT_FOUND for a rank that is not a member of the current epoch.
 */
SG_API sg_status sg_health_state_of(const sg_health *h, int rank, sg_health_state *out);
/** Members in `state` (self included); -1 for NULL or an unknown state. */
SG_API int sg_health_count(const sg_health *h, sg_health_state state);

/** What the monitor knows of one peer. Fixed layout, like the other structs
 * of this header without `size` (docs/api.md "Versions of structs"). */
typedef struct sg_health_peer {
  sg_health_state state;
  int64_t last_heard_ms;   /**< local time of the last heartbeat or check-in (or of create / epoch reset) */
  int64_t last_checkin_ms; /**< local time of the last check-in (or of create / epoch reset) */
  bool has_heartbeat;      /**< a heartbeat arrived in this epoch; then: */
  sg_heartbeat heartbeat;  /**< the latest one */
  bool has_checkin;        /**< a check-in arrived in this epoch; then: */
  sg_checkin checkin;      /**< the latest one */
} sg_health_peer;

/** Copies what is known of rank. Errors as sg_health_state_of(). */
SG_API sg_status sg_health_peer_info(const sg_health *h, int rank, sg_health_peer *out);

/* ---- the transition log --------------------------------------------------- */

/** Transitions kept (at most log_capacity). 0 for NULL. */
SG_API size_t sg_health_log_size(const sg_health *h);
/** Transitions since create, including those the log dropped. 0 for NULL. */
SG_API uint64_t sg_health_log_total(const sg_health *h);
/**
 * The i-th kept transition, 0 the oldest.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL; SG_ERR_RANGE for i >= sg_health_log_size().
 */
SG_API sg_status sg_health_log_get(const sg_health *h, size_t i, sg_health_transition *out);

/* ---- the health graph ----------------------------------------------------- */

/** Kinds of dependency between two ranks; an edge may have several. */
typedef enum sg_edge_kind {
  SG_EDGE_RING = 1,     /**< neighbours in a data-parallel ring */
  SG_EDGE_PIPELINE = 2, /**< adjacent pipeline stages */
} sg_edge_kind;

/**
 * Adds the dependency a <-> b of the given kinds (an OR of sg_edge_kind) to
 * the graph; kinds accumulate on an existing edge. Both must be members.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL, a == b, a rank outside the
 *   job, no or unknown kind bits; SG_ERR_NOT_FOUND for a non-member;
 *   SG_ERR_NO_MEMORY; SG_ERR_STATE from the callback.
 */
SG_API sg_status sg_health_add_edge(sg_health *h, int a, int b, unsigned kinds);
/**
 * Adds SG_EDGE_RING edges between consecutive ranks of a data-parallel
 * group in ring order, last to first: ranks[i] <-> ranks[(i+1) % n]. ranks
 * NULL: 0, 1, ..., n-1. n = 1 adds nothing. Errors as sg_health_add_edge(),
 * and SG_ERR_INVALID_ARG for n < 1 or a rank listed twice; on error no edge
 * is added.
 */
SG_API sg_status sg_health_add_ring(sg_health *h, const int *ranks, int n);
/**
 * Kinds of the edge a <-> b (0: none).
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL or ranks outside the job.
 */
SG_API sg_status sg_health_edge(const sg_health *h, int a, int b, unsigned *kinds);
/**
 * The neighbours of rank in ascending order: *n gets their number and the
 * first min(cap, *n) go to out (out may be NULL when cap is 0).
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL or a rank outside the job.
 */
SG_API sg_status sg_health_neighbors(const sg_health *h, int rank, int *out, size_t cap, size_t *n);
/**
 * The neighbours of rank (self_rank: "my dependencies") that are not
 * HEALTHY, ascending, as sg_health_neighbors().
 */
SG_API sg_status sg_health_unhealthy_deps(const sg_health *h, int rank, int *out, size_t cap, size_t *n);

/* ---- hang diagnosis ------------------------------------------------------- */

/**
 * Names the rank(s) stuck behind the others, from the members' latest
 * heartbeats of this epoch, compared by (step, collective): "rank 2 is at
 * collective #17 (step 5), the others at #18 (step 5)". Several laggards
 * are grouped by position, most behind first ("ranks 1-2, 5 are at ...");
 * members without a heartbeat and UNREACHABLE ones are named too; "all 4
 * ranks are at collective #18 (step 5)" when nobody lags; "no heartbeats
 * yet" without data. Always NUL-terminates when cap > 0.
 * @param n_behind  optional: the number of ranks behind the leaders.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL h or buf or cap 0;
 *   SG_ERR_RANGE when cap is too small (buf holds a cut prefix).
 */
SG_API sg_status sg_health_diagnose(const sg_health *h, char *buf, size_t cap, int *n_behind);

/* ---- CPU use, for check-ins (not part of the pure monitor) --------------- */

/** State of sg_health_cpu_permille() between calls. Initialise from SG_CPU_METER_INIT. */
typedef struct sg_cpu_meter {
  int64_t wall_ms;        /**< CLOCK_BOOTTIME of the previous sample */
  uint64_t cpu_ticks;     /**< utime + stime of the previous sample */
  unsigned last_permille; /**< the previous answer */
  int valid;              /**< a previous sample exists */
} sg_cpu_meter;
#define SG_CPU_METER_INIT \
  { 0, 0, 0, 0 }

/**
 * This process's CPU use since the previous sample on `m` (the first call:
 * since the process started), in per mille of all online CPUs, from
 * /proc/self/stat. The kernel counts CPU time in ticks of 10 ms, so a call
 * less than 100 ms after the previous sample repeats the previous answer and
 * keeps the sample. Reads a file and the clock: call it from the scheduler
 * before a check-in, not from the monitor.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL; SG_ERR_IO when /proc cannot
 *   be read; SG_ERR_FORMAT when it cannot be parsed.
 */
SG_API sg_status sg_health_cpu_permille(sg_cpu_meter *m, unsigned *permille);

/* ---- QoS tiers ------------------------------------------------------------ */

typedef enum sg_qos {
  SG_QOS_STRICT = 0,           /**< fail fast: abort the step, recover, redo it (RPO 0) */
  SG_QOS_BEST_EFFORT = 1,      /**< retry the collective, then recover */
  SG_QOS_GRACEFUL_DEGRADE = 2, /**< carry on with fewer data-parallel replicas or a fallback */
} sg_qos;

/** What a tier does when a collective fails or overruns its budget. */
typedef enum sg_qos_on_failure {
  SG_QOS_ABORT_RECOVER_REDO = 0, /**< abort the step, recover over the survivors, redo the step */
  SG_QOS_RETRY_THEN_RECOVER = 1, /**< retry the collective `retries` times, then as above */
  SG_QOS_CONTINUE_DEGRADED = 2, /**< drop the failed replicas' contribution (or use the fallback) and go on */
} sg_qos_on_failure;

/** A tier's budgets. */
typedef struct sg_qos_budget {
  sg_qos qos;
  const char *name;         /**< "strict", "best-effort", "graceful-degrade" */
  int collective_budget_ms; /**< 50, 200, 800 */
  int retries;              /**< 0, 2, 0 */
  sg_qos_on_failure on_failure;
  const char *on_failure_text; /**< one sentence, for logs and reports */
} sg_qos_budget;

/** "strict", "best-effort", "graceful-degrade"; "?" for other values. Any thread. */
SG_API const char *sg_qos_name(sg_qos qos);
/**
 * Parses a tier name: strict, best-effort or graceful-degrade (case does
 * not matter; '_' may stand for '-').
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL or another value, naming the
 *   accepted ones.
 */
SG_API sg_status sg_qos_parse(const char *text, sg_qos *out);
/**
 * The tier in the SG_QOS environment variable; `fallback` when it is unset or empty.
 * @return SG_OK; SG_ERR_INVALID_ARG ("SG_QOS='x' ...") for a bad value.
 */
SG_API sg_status sg_qos_from_env(sg_qos fallback, sg_qos *out);
/** The budgets of a tier. @return SG_OK; SG_ERR_INVALID_ARG for NULL or an unknown tier. */
SG_API sg_status sg_qos_budget_of(sg_qos qos, sg_qos_budget *out);

/* ---- fault injection ------------------------------------------------------ */

typedef enum sg_fault_kind {
  SG_FAULT_KILL = 1,            /**< "kill": SIGKILL the rank */
  SG_FAULT_STOP = 2,            /**< "stop": SIGSTOP the rank (a hang) */
  SG_FAULT_DROP_HEARTBEATS = 3, /**< "drop-heartbeats": the rank stops sending heartbeats and check-ins */
  SG_FAULT_PARTITION = 4,       /**< "partition": cut the link between two ranks */
  SG_FAULT_DEVICE = 5,          /**< "device": fail the rank's device */
  SG_FAULT_HANG = 6,   /**< "hang": the rank's compute thread stops making progress; its communication
                            thread goes on heartbeating (found by hang diagnosis, not by silence) */
  SG_FAULT_BEHIND = 7, /**< "behind": the rank gives up the step after its gradients were averaged, before
                            its updates, and recovers: the others completed the step, so it is a step
                            behind them (a recovery that must roll it forward) */
  SG_FAULT_DROP_CHECKINS = 8, /**< "drop-checkins": the rank stops sending check-ins; its heartbeats go on
                                   (the others find it DEGRADED, not failed) */
  SG_FAULT_SLOW = 9, /**< "slow": from the step on, the rank computes `factor` times slower (a slow or
                          shared CPU; sg_fault_plan_slow_factor): the others find it DEGRADED, too slow */
} sg_fault_kind;

/** The phases of a recovery (docs/resilience.md "Recovery"), where a
 *  `kill:rank=R,recovery=PHASE` fault fires instead of at a step. */
typedef enum sg_recovery_phase {
  SG_RECOVERY_NONE = 0,     /**< not a recovery fault: it fires at a step */
  SG_RECOVERY_DETECT = 1,   /**< "detect": the rank has detected the failure, before it registers */
  SG_RECOVERY_AGREE = 2,    /**< "agree": registered in the agreement, before the decision is read */
  SG_RECOVERY_BUILD = 3,    /**< "build": the new membership decided, before its communicator is built */
  SG_RECOVERY_TRANSFER = 4, /**< "transfer": the new communicator built, before the state is moved */
  SG_RECOVERY_CREATE = 5,   /**< not a recovery: `kill:rank=R,at=create` fires in sg_dist_create, once the
                                 rank joined, before the first collective (a failure before the first step) */
} sg_recovery_phase;

/** One planned fault. */
typedef struct sg_fault {
  sg_fault_kind kind;
  int rank;     /**< the victim; for a partition, the first rank of the pair */
  int peer;     /**< a partition's second rank; -1 otherwise */
  int64_t step; /**< the step at whose start the fault fires (0-based); INT64_MAX for a recovery fault */
  bool random;  /**< step was drawn ("step=random") */
  sg_recovery_phase phase; /**< a recovery fault: fires when the rank reaches this phase of a recovery */
} sg_fault;

/** "detect", "agree", "build", "transfer", "create"; "none" for SG_RECOVERY_NONE; "?" for other values. */
SG_API const char *sg_recovery_phase_name(sg_recovery_phase phase);

typedef struct sg_fault_plan sg_fault_plan;

/** "kill", "stop", "drop-heartbeats", "partition", "device", "hang", "behind", "drop-checkins", "slow"; "?"
 *  for other values. */
SG_API const char *sg_fault_kind_name(sg_fault_kind kind);

/**
 * Parses a fault-injection spec for a job of world_size ranks: faults joined
 * by ';', each KIND:KEY=VALUE,... (docs/resilience.md):
 *   kill:rank=R,step=S   stop:rank=R,step=S   drop-heartbeats:rank=R,step=S
 *   device:rank=R,step=S hang:rank=R,step=S   partition:ranks=A-B,step=S[,ms=T]
 *   behind:rank=R,step=S drop-checkins:rank=R,step=S slow:rank=R,step=S,factor=F
 *   kill:rank=R,recovery=detect|agree|build|transfer
 *   kill:rank=R,at=create
 * S is a number, "random" (a step drawn from `seed`, uniform in 1..100) or
 * "random(LO-HI)" (uniform in LO..HI); the same seed and spec give the same
 * steps. A kill with recovery=PHASE fires instead when rank R reaches that
 * phase of a recovery (a second failure during one); with at=create, in
 * sg_dist_create before the job's first collective. A partition with ms=T
 * (1..86400000) is transient: the link is down for T ms, then up again
 * (sg_fault_plan_link_ms). A slow fault's factor F is a number in
 * (1, 100] (sg_fault_plan_slow_factor). Spaces around tokens are ignored.
 * @return SG_OK; SG_ERR_INVALID_ARG naming the offending token for an
 *   unknown kind or key, a missing or repeated key, a bad number, a rank
 *   outside the job, a partition of a rank with itself, an empty fault, a
 *   fault listed twice, more than 256 faults or a spec over 64 KiB;
 *   SG_ERR_NO_MEMORY. *out is NULL on error. Any thread.
 */
SG_API sg_status sg_fault_plan_parse(const char *spec, int world_size, uint64_t seed, sg_fault_plan **out);
/** Accepts NULL. */
SG_API void sg_fault_plan_destroy(sg_fault_plan *plan);
/** Number of faults (0 for NULL). */
SG_API size_t sg_fault_plan_count(const sg_fault_plan *plan);
/** The i-th fault in spec order. @return SG_OK; SG_ERR_INVALID_ARG for NULL; SG_ERR_RANGE for i too big. */
SG_API sg_status sg_fault_plan_get(const sg_fault_plan *plan, size_t i, sg_fault *out);
/**
 * The faults that fire for `rank` at the start of `step` (a partition fires
 * for both its ranks), in spec order: returns their number and copies the
 * first min(cap, number) to out (out may be NULL when cap is 0). 0 for NULL.
 */
SG_API size_t sg_fault_plan_due(const sg_fault_plan *plan, int rank, int64_t step, sg_fault *out, size_t cap);
/**
 * The recovery faults (recovery=PHASE) that fire for `rank` when it reaches
 * `phase` of a recovery, in spec order: returns their number and copies the
 * first min(cap, number) to out. 0 for NULL or SG_RECOVERY_NONE.
 */
SG_API size_t sg_fault_plan_due_in_recovery(const sg_fault_plan *plan, int rank, sg_recovery_phase phase,
                                            sg_fault *out, size_t cap);
/** Whether a partition has cut the link a <-> b by `step` (a cut, once made, stays; a transient one,
 *  ms=T, counts too: steps do not measure its duration). false for NULL. */
SG_API bool sg_fault_plan_cuts(const sg_fault_plan *plan, int a, int b, int64_t step);
/** How long the partition of the link a <-> b that fires at `step` lasts: its ms=T, or 0 when it is for
 *  good or there is none. 0 for NULL. */
SG_API int64_t sg_fault_plan_link_ms(const sg_fault_plan *plan, int a, int b, int64_t step);
/** How many times slower `rank` computes at `step`: the factor of the latest slow fault of that rank that
 *  fired at `step` or before, 1 when none has. 1 for NULL. */
SG_API double sg_fault_plan_slow_factor(const sg_fault_plan *plan, int rank, int64_t step);
/** Whether a fault of `kind` on `rank` has fired by `step` (it then stays in effect: a dropped heartbeat
 *  stream stays dropped). For SG_FAULT_PARTITION, whether rank is cut from anyone. false for NULL. */
SG_API bool sg_fault_plan_active(const sg_fault_plan *plan, sg_fault_kind kind, int rank, int64_t step);

SG_EXTERN_C_END

#endif /* SGRT_HEALTH_H */
