/* Watching a training example while it runs (SPEC O4): one JSON line per step
 * in a file (--metrics-file F), Prometheus text on http://HOST:PORT/metrics
 * (--metrics-port P, or SG_METRICS_PORT), served by a thread of its own from
 * the latest step's figures, and TensorBoard scalars (--tensorboard DIR,
 * example_tfevents.h). docs/examples.md "Metrics" lists the names. */
#ifndef EXAMPLE_METRICS_H
#define EXAMPLE_METRICS_H

#include <stdint.h>

#define EXAMPLE_METRICS_MAX_RANKS 256

/* One step's figures. */
typedef struct example_step {
  int step;               /* 1-based */
  double loss;            /* NaN: none */
  double images_per_s;    /* of the whole job */
  double step_ms;         /* wall time */
  double exposed_comm_ms; /* the part spent waiting for communication (the rest is compute) */
  double allreduce_bytes; /* bytes this rank allreduced in the step */
  int world, healthy, degraded, unreachable;
  int recoveries; /* in total */
  double rto_ms;  /* of the latest recovery (0: none) */
  /* Per original rank: how long ago this rank's health monitor last heard from it (a heartbeat or a check-in,
   * which come every second), ms (< 0: unknown, or this rank). */
  int n_ranks;
  double heartbeat_age_ms[EXAMPLE_METRICS_MAX_RANKS];
} example_step;

typedef struct example_metrics example_metrics;

/* Opens the metrics file (NULL: none), the TensorBoard event file in
 * tensorboard_dir (NULL: none) and starts serving on port (0: none; it says
 * where on stderr). Returns 0, or 2 after saying what failed on stderr (a
 * file cannot be written, the port cannot be bound). *out NULL when none was
 * asked for. */
int example_metrics_open(const char *prog, const char *file, int port, const char *tensorboard_dir,
                         example_metrics **out);
/* Records a step: a line in the file (flushed), and the figures served from now on. NULL: nothing. */
void example_metrics_step(example_metrics *m, const example_step *s);
/* Stops serving and closes the file. Accepts NULL. */
void example_metrics_close(example_metrics *m);
/* The port from SG_METRICS_PORT, 0 when unset; -1 (after a message) when it is not 1..65535. */
int example_metrics_env_port(const char *prog);

#endif /* EXAMPLE_METRICS_H */
