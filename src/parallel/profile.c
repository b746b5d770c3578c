/* The profile sampler of SPEC P6: after every completed step the compute
 * thread records its time, and at most every 500 ms (the trigger's sample
 * period; a longer step gives one sample per step) it takes a sample of this
 * rank: CPU utilisation of the threads it computes with (from
 * /proc/self/stat, sg_health_cpu_permille), the p99 step time over the last
 * SG__DIST_PROFILE_WINDOW steps and the steps per second over them;
 * sg_dist_stats reports the latest sample. In a pipeline the samples also go
 * to sg_repartition_trigger (85 % CPU and p99 above 200 ms for 3 samples in
 * a row: a stage that is the bottleneck); a data-parallel or tensor-parallel
 * rank runs the whole graph or an even share of every op, where re-cutting
 * has nothing to move, and a busy CPU there is just training. The
 * thresholds are sg_dist_params.repartition_p99_ms and repartition_cpu; the
 * pipeline strategy acts on a firing (model_pp_replan.c) and restarts the
 * samples after each evaluation (sg__dist_profile_restart), so the next one
 * needs a fresh run of samples. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parallel/dist_internal.h"
#include "sgrt/partition.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The p99 of the window: the value at rank ceil(0.99 n) of the sorted times. */
static double p99(const sg__dist_profile *p) {
  double v[SG__DIST_PROFILE_WINDOW];
  memcpy(v, p->step_ms, (size_t)p->n * sizeof v[0]);
  qsort(v, (size_t)p->n, sizeof v[0], cmp_double);
  int k = (int)ceil(0.99 * p->n) - 1;
  return v[k < 0 ? 0 : k];
}

static void take_sample(sg_dist *d, sg__dist_profile *p, int64_t now) {
  unsigned permille = p->cpu.last_permille;
  if (sg_health_cpu_permille(&p->cpu, &permille) != SG_OK) {
    sg_clear_error(); /* no /proc: the utilisation stays as it was */
    permille = p->cpu.last_permille;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = d->p.threads > 0 ? d->p.threads : 1;
  if (cpus > 0 && threads > cpus) threads = (int)cpus;
  /* per mille of all CPUs -> the share of the CPUs this rank computes on */
  double util = (double)permille / 1000.0 * (double)(cpus > 0 ? cpus : 1) / threads;
  if (util > 1) util = 1;
  int oldest = (p->head - p->n + SG__DIST_PROFILE_WINDOW) % SG__DIST_PROFILE_WINDOW;
  int64_t span = now - p->done_ms[oldest];
  sg_profile_sample s = {.node_id = d->orig_rank,
                         .timestamp_ms = (double)now,
                         .cpu_util = util,
                         .latency_p99_ms = p99(p),
                         .steps_per_s = span > 0 && p->n > 1 ? (p->n - 1) * 1000.0 / (double)span : 0};
  if (p->n_samples == SG__DIST_PROFILE_SAMPLES) {
    memmove(p->samples, p->samples + 1, (SG__DIST_PROFILE_SAMPLES - 1) * sizeof p->samples[0]);
    p->n_samples--;
  }
  p->samples[p->n_samples++] = s;
  d->stats.cpu_util = s.cpu_util;
  d->stats.step_p99_ms = s.latency_p99_ms;
  d->stats.steps_per_s = s.steps_per_s;
  if (d->strategy != &sg__par_pipeline_strategy) return;
  sg_repartition_trigger_params tp = SG_REPARTITION_TRIGGER_PARAMS_INIT;
  if (d->p.repartition_p99_ms > 0) tp.latency_p99_ms = d->p.repartition_p99_ms;
  if (d->p.repartition_cpu > 0) tp.cpu_util = d->p.repartition_cpu;
  /* A sample follows a step: steps longer than the period space the samples by a step, and those are
   * still consecutive (the trigger wants each within 1.5 periods of the one before). */
  if (s.latency_p99_ms > tp.sample_period_ms) tp.sample_period_ms = s.latency_p99_ms;
  int fire = 0;
  int32_t node = -1;
  if (sg_repartition_trigger(p->samples, (size_t)p->n_samples, &tp, &fire, &node) != SG_OK) {
    sg_clear_error(); /* our own samples are valid: never */
    fire = 0;
  }
  d->stats.repartition_due = fire;
  if (fire && !p->said && d->p.repartition_p99_ms < 0) {
    p->said = true;
    fprintf(stderr,
            "sgrt: rank %d: profile: CPU %.0f %% and step p99 %.0f ms for %d samples (thresholds %.0f %%, "
            "%.0f ms): a repartition is due, but repartitioning is off (repartition_p99_ms < 0)\n",
            d->orig_rank, 100 * s.cpu_util, s.latency_p99_ms, tp.sustain_samples, 100 * tp.cpu_util,
            tp.latency_p99_ms);
  }
}

void sg__dist_profile_restart(sg_dist *d, bool window) {
  sg__dist_profile *p = &d->prof;
  p->n_samples = 0;
  d->stats.repartition_due = 0;
  if (window) p->n = 0;
}

void sg__dist_profile_step(sg_dist *d, double step_ms) {
  sg__dist_profile *p = &d->prof;
  int64_t now = sg__now_ms();
  p->step_ms[p->head] = step_ms;
  p->done_ms[p->head] = now;
  p->head = (p->head + 1) % SG__DIST_PROFILE_WINDOW;
  if (p->n < SG__DIST_PROFILE_WINDOW) p->n++;
  if (p->next_ms == 0) { /* the first step: the meter's first sample covers the process's start */
    unsigned ignored;
    if (sg_health_cpu_permille(&p->cpu, &ignored) != SG_OK) sg_clear_error();
  }
  if (now < p->next_ms) return;
  sg_repartition_trigger_params tp = SG_REPARTITION_TRIGGER_PARAMS_INIT;
  p->next_ms = now + (int64_t)tp.sample_period_ms;
  if (p->n >= 2) take_sample(d, p, now);
}
