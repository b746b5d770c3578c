/* The health monitor's state (include/sgrt/health.h), shared by the files of
 * src/health: monitor.c (inputs, timeouts, log), graph.c (dependencies) and
 * diagnose.c (hang diagnosis). */
#ifndef SG_HEALTH_INTERNAL_H
#define SG_HEALTH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "sgrt/health.h"

/* The largest job a monitor covers; far above any launcher's world. */
#define SG__HEALTH_MAX_WORLD 65536

/* One neighbour in the health graph. */
typedef struct sg__health_adj {
  int rank;
  unsigned kinds; /* OR of sg_edge_kind */
} sg__health_adj;

typedef struct sg__health_peer {
  sg_health_peer pub; /* what sg_health_peer_info() copies */
  bool member;
  bool missed;            /* DEGRADED because of missed check-ins */
  bool slow;              /* DEGRADED because too slow */
  int64_t checkin_gap_ms; /* between the last two check-ins: the log says how long they had stopped */
  sg__health_adj *adj;    /* neighbours, ascending by rank */
  uint32_t n_adj, cap_adj;
} sg__health_peer;

struct sg_health {
  int world_size, self;
  uint32_t epoch;
  sg_health_config cfg;
  int64_t now_ms; /* the latest time any input carried: time never goes back */
  sg__health_peer *peers;
  uint32_t median_ms; /* median step time found by the last tick; check-ins are judged against it */
  uint32_t *scratch;  /* world_size entries: the median's step times, reset_epoch's marks */
  /* The transition log: a ring of log_capacity entries. */
  sg_health_transition *log;
  size_t log_head, log_size;
  uint64_t log_total;
  sg_health_callback callback;
  void *callback_ctx;
  bool in_callback; /* mutating calls from the callback would reorder transitions */
};

/* Field checks shared by the encoders, the decoders and the monitor's inputs
 * (which do not trust a struct the caller filled in either). `what` starts
 * the message ("heartbeat", "sg_health_checkin"). */
sg_status sg__heartbeat_validate(const sg_heartbeat *hb, int world_size, const char *what);
sg_status sg__checkin_validate(const sg_checkin *ci, int world_size, const char *what);

/* The pure halves of sg_health_cpu_permille() (cpu.c), for tests: utime +
 * stime and starttime, in clock ticks, from the text of /proc/PID/stat; and
 * CPU ticks over a wall interval as per mille of ncpu CPUs (at most 1000). */
sg_status sg__health_parse_stat(const char *text, size_t len, uint64_t *cpu_ticks, uint64_t *start_ticks);
unsigned sg__health_permille(uint64_t ticks, int64_t wall_ms, long ticks_per_s, long ncpu);

/* Checks h, that rank is in 0..world_size-1, naming `fn` in the message. */
sg_status sg__health_check_rank(const sg_health *h, int rank, const char *fn);

#endif /* SG_HEALTH_INTERNAL_H */
