/* Which shards of a step this rank runs (micro-batches and recovery,
 * docs/dist.md "Micro-batches"). A step's global batch is n = orig_size * M
 * shards (M = sg_dist_params.micro_batches), fixed for the job. One rule
 * covers every case: member i of m runs the shards {k : k mod m == i}, in
 * increasing order; before any failure m is the world size, so rank r runs
 * r, r + size, ..., and after a recovery the members share all n shards
 * (strict QoS: the global batch is kept). Graceful-degrade keeps the rule of
 * the original world for the rank's original index: the lost ranks' shards
 * are skipped. Each shard draws its dropout masks from stream shard + 1,
 * whichever member runs it, so a shard redone elsewhere after a recovery
 * draws the masks of its first attempt. */
#include "parallel/dist_internal.h"

int sg__dist_n_shards(const sg_dist *d) { return d->orig_size * d->p.micro_batches; }

int sg__dist_my_shards(const sg_dist *d, int *out) {
  if (d->p.feed == NULL) return 0; /* the program sets one shard's inputs itself */
  int n_all = sg__dist_n_shards(d), n = 0;
  bool degrade = d->size != d->orig_size && d->heal.qos == SG_QOS_GRACEFUL_DEGRADE;
  int me = degrade ? d->orig_rank : d->rank, of = degrade ? d->orig_size : d->size;
  for (int k = me; k < n_all; k += of) out[n++] = k;
  return n;
}

/* How the step's gradients are reduced over the members: 0 for AVG (one
 * shard per rank and every rank there: the failure-free path of M = 1, kept
 * bitwise as it was), else SUM and a division by the shards run by all
 * members together (each member's earlier shards are accumulated into its
 * own before the allreduce, scheduler.c). */
int sg__dist_sum_div(const sg_dist *d) {
  if (d->p.feed == NULL) return 0;
  bool degrade = d->size != d->orig_size && d->heal.qos == SG_QOS_GRACEFUL_DEGRADE;
  int shards = degrade ? d->size * d->p.micro_batches : sg__dist_n_shards(d);
  return shards == d->size ? 0 : shards;
}
