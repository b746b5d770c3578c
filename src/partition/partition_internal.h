/* Internals of the partitioner (src/partition): the cost model, the weighted
 * graph the algorithms work on, device tables, targets and the solver.
 * metis.c is the only file that includes metis.h. */
#ifndef SG_PARTITION_INTERNAL_H
#define SG_PARTITION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "graph/graph.h"
#include "partition/partition.h"
#include "sgrt/partition.h"

/* ---- cost model (cost.c) ------------------------------------------------ */

/* Compute estimate of one op: FLOPs and bytes read plus written (the
 * roofline's two axes). Update ops read and write their mutated inputs. */
typedef struct sg__op_cost {
  double flops;
  double traffic;
} sg__op_cost;

sg__op_cost sg__op_cost_of(const sg_graph *g, const sg__op *op);

/* ---- the weighted graph (pgraph.c) -------------------------------------- */

/* An edge between two vertices: `w` bytes flow between them per step.
 * `forward` edges also orient the graph (u before v): pipeline stages must
 * respect them. Duplicates are merged; self loops are dropped. */
typedef struct sg__pedge {
  int32_t u, v;
  double w;
  bool forward;
} sg__pedge;

/* One vertex per placement unit (a forward op with its backward and update
 * ops). Everything the algorithms need and nothing about sg_graph, so tests
 * can build one directly. */
typedef struct sg__pgraph {
  int32_t n;
  double *mem;     /* bytes (P1) */
  double *flops;   /* compute (P1) */
  double *traffic; /* bytes read and written (roofline) */
  double *persist; /* bytes of state that migrate with the vertex (P6) */
  /* Undirected adjacency, symmetric and merged (CSR). */
  int32_t *xadj, *adj;
  double *adjw;
  /* Forward edges, merged: successors and predecessors (CSR). */
  int32_t *sxadj, *succ;
  int32_t *pxadj, *pred;
  int32_t *topo;  /* a topological order of the forward edges, smallest index first */
  int32_t *level; /* longest forward path from a source */
  double total_mem, total_flops, total_w;
  /* The tensors behind the edges (optional, n_nets 0 without them): net i
   * is net_pin[net_x[i]] (its producer) and the vertices that read it,
   * net_pin[net_x[i] + 1 .. net_x[i + 1]), carrying net_w[i] bytes. An edge
   * counts a tensor once per reading vertex; a report once per reading
   * part (sg__pgraph_cut_bytes). */
  int32_t n_nets;
  int32_t *net_x, *net_pin;
  double *net_w;
} sg__pgraph;

/* Copies the vertex arrays (NULL: zeros) and builds the adjacency.
 * SG_ERR_CYCLE if the forward edges have a cycle, SG_ERR_RANGE for an edge
 * endpoint out of range or a negative or non-finite weight. */
sg_status sg__pgraph_init(sg__pgraph *pg, int32_t n, const double *mem, const double *flops,
                          const double *traffic, const double *persist, size_t n_edges,
                          const sg__pedge *edges);
void sg__pgraph_free(sg__pgraph *pg);
/* Attaches the nets (copied); SG_ERR_NO_MEMORY, SG_ERR_RANGE for a pin out
 * of range or a negative weight. */
sg_status sg__pgraph_set_nets(sg__pgraph *pg, int32_t n_nets, const int32_t *net_x, const int32_t *net_pin,
                              const double *net_w);

/* ---- devices (devices.c) ------------------------------------------------ */

typedef struct sg__device {
  char *name; /* owned */
  sg_device_kind kind;
  double peak;     /* FLOP/s */
  double memory;   /* bytes; INFINITY when unlimited */
  double bw;       /* memory bandwidth, bytes/s */
  double link_bw;  /* bytes/s */
  double link_lat; /* s */
} sg__device;

struct sg_device_table {
  int n;
  sg__device *dev;
};

/* The "host" preset's device, unnamed (name NULL). */
sg__device sg__device_host(void);
/* Deep copy of `n` devices; SG_ERR_NO_MEMORY. */
sg_status sg__devices_copy(const sg__device *src, int n, sg__device **out);
void sg__devices_free(sg__device *dev, int n);
/* The public view of d (sg_device_table_get, sg_partition_device): its name
 * is borrowed; unlimited memory reads as 0. */
void sg__device_info_of(const sg__device *d, sg_device_info *out);

/* ---- the solver (solve.c and friends) ----------------------------------- */

/* Names vertex v for messages ("op 'layer1.0.conv1'"). */
typedef const char *(*sg__vertex_name_fn)(const void *ctx, int32_t v, char *buf, size_t cap);

typedef struct sg__solve {
  /* inputs */
  const sg__pgraph *pg;
  int k;
  const sg__device *dev; /* k devices, part p on dev[p] */
  bool pipeline;
  bool balance_compute;
  double eps;         /* tolerated imbalance */
  double mem_eps;     /* of memory, when it differs (0: eps) */
  bool compute_first; /* balance compute before polishing memory (repartition) */
  int search_rounds;  /* free mode, two constraints: rounds of the iterated local search (0: none) */
  double alpha;
  uint64_t seed;
  sg__vertex_name_fn vertex_name; /* may be NULL */
  const void *name_ctx;
  /* Repartitioning (P6): moving vertex v off home[v] costs
   * migration_cost x persist[v]; NULL when nothing is placed yet. */
  const int32_t *home;
  double migration_cost;
  /* targets (targets.c): absolute loads each part aims at */
  double *mem_target;  /* k, sums to total_mem */
  double *comp_target; /* k, sums to total_flops */
  double *cap;         /* k, INFINITY when unlimited */
  double *mem_bound;   /* k: min((1 + eps) * target, cap) */
} sg__solve;

/* Running loads of a partition under construction. */
typedef struct sg__loads {
  int k;
  double *mem, *comp;
  int32_t *count;
} sg__loads;

sg_status sg__loads_init(sg__loads *l, const sg__solve *s, const int32_t *part);
void sg__loads_free(sg__loads *l);
void sg__loads_move(sg__loads *l, const sg__pgraph *pg, int32_t v, int from, int to);

/* Roofline time of vertex v on device d. */
double sg__vertex_time(const sg__pgraph *pg, int32_t v, const sg__device *d);

/* Targets and the capacity checks that can fail before any work:
 * SG_ERR_RANGE "needs ... has ..." when the graph or one vertex cannot fit. */
sg_status sg__targets_init(sg__solve *s);
void sg__targets_free(sg__solve *s);

/* Partitions pg into s->k parts: part[v] in 0..k-1 for every vertex.
 * Deterministic for a given input. SG_ERR_RANGE when memory capacities
 * cannot be met. */
sg_status sg__solve_run(sg__solve *s, int32_t *part);

/* METIS k-way or recursive bisection over pg with the solver's targets.
 * ncon 1 (memory) or 2 (memory, compute); ubvec is 1 + ub_scale x the
 * tolerances. Writes part. The only place METIS
 * codes are translated. */
typedef enum { SG__METIS_KWAY, SG__METIS_RECURSIVE } sg__metis_method;
sg_status sg__metis_partition(const sg__solve *s, sg__metis_method method, int ncon, double ub_scale,
                              uint64_t seed, int32_t *part);
/* Memory tolerance of a solve: mem_eps, or eps. */
static inline double sg__mem_eps(const sg__solve *s) { return s->mem_eps > 0.0 ? s->mem_eps : s->eps; }

/* Edge-cut of an assignment over pg (undirected weights). */
double sg__pgraph_cut(const sg__pgraph *pg, const int32_t *part);
/* The bytes a report counts: every net's weight once per part, other than
 * its producer's, that reads it; the edge-cut when pg has no nets. */
double sg__pgraph_cut_bytes(const sg__pgraph *pg, const int32_t *part);
/* 1 when the quotient graph of the forward edges has no cycle; when `order`
 * is not NULL it receives the parts in a topological order. */
bool sg__quotient_acyclic(const sg__pgraph *pg, const int32_t *part, int k, int *order);
/* 1 when every forward edge goes from a part to the same or a later one. */
bool sg__pipeline_monotone(const sg__pgraph *pg, const int32_t *part);

/* Balance polishing: among results whose cut is within this fraction of
 * the best one found, the better balanced wins. */
#define SG__CUT_SLACK 0.05

/* Max over parts of load / target (1.0 = perfect); parts with a zero target
 * and a zero load count as 1. */
double sg__max_ratio(const double *load, const double *target, int k);

/* Greedy refinement (refine.c). Moves boundary vertices to cut edge weight,
 * keeping every part's memory within s->mem_bound and its compute within
 * comp_limit x target; in pipeline mode only to stages between the vertex's
 * forward predecessors and successors, so acyclicity holds. */
void sg__refine_cut(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, int passes);
/* Fiduccia-Mattheyses passes: best moves first, also those that lose, each
 * vertex once per pass, then back to the best prefix; same bounds and
 * legality as sg__refine_cut. */
void sg__refine_fm(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, int passes);
/* As sg__refine_cut (then sg__refine_fm), without raising the largest memory load / target
 * ratio above what it is (balance polishing is kept). */
void sg__refine_cut_balanced(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, int passes);
/* Moves vertices off parts above their memory bound (or, with
 * `with_compute`, above comp_limit x their compute target) while that
 * lowers the load spread; pipeline moves respect the stage order. Returns
 * true when every part ends within its memory bound. */
bool sg__rebalance(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit, bool with_compute);
/* Heterogeneous devices: moves boundary vertices to a neighbouring part
 * whose device gives them a higher placement score, within the bounds. */
void sg__refine_score(const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit);

/* Exchange refinement (exchange.c), free mode on graphs of at most
 * SG__EXCHANGE_MAX_VERTICES vertices: moves to any part and exchanges of
 * two vertices between parts, with scratch for n vertices and k parts
 * reused across calls (create: NULL when out of memory). Repair brings
 * every part within its memory bound and comp_limit x its compute target,
 * adding the least cut per unit of excess removed; false when it could not
 * (the assignment is then somewhere on the way). Refine lowers the cut
 * within those bounds. `work` (may be NULL) adds the moves and pairs priced. */
#define SG__EXCHANGE_MAX_VERTICES 600
/* sg_partition_create's search_rounds (free.c's iterated local search). */
#define SG__SEARCH_ROUNDS 150
typedef struct sg__exchange sg__exchange;
sg__exchange *sg__exchange_create(int32_t n, int k);
void sg__exchange_destroy(sg__exchange *x);
bool sg__exchange_repair(sg__exchange *x, const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit,
                         uint64_t *work);
void sg__exchange_refine(sg__exchange *x, const sg__solve *s, int32_t *part, sg__loads *l, double comp_limit,
                         uint64_t *work);

/* Placement score of v on part p's device given `part` (placement.c). */
double sg__placement_score(const sg__solve *s, const int32_t *part, int32_t v, int p);

/* Pipeline mode (pipeline.c): stages in topological order. */
sg_status sg__pipeline_solve(const sg__solve *s, int32_t *part);
/* Free mode (free.c). */
sg_status sg__free_solve(const sg__solve *s, int32_t *part);

/* Seeded random assignment (random.c): vertex v to part p with probability
 * proportional to p's compute target. */
void sg__random_partition(const sg__solve *s, uint64_t seed, int32_t *part);

/* Small deterministic PRNG (splitmix64). */
typedef struct sg__rng {
  uint64_t state;
} sg__rng;
uint64_t sg__rng_next(sg__rng *r);
/* Uniform in [0, n). */
uint32_t sg__rng_below(sg__rng *r, uint32_t n);
double sg__rng_unit(sg__rng *r); /* [0, 1) */

/* ---- the model of an sg_graph (model.c) --------------------------------- */

enum { SG__PART_FORWARD = 0, SG__PART_BACKWARD = 1, SG__PART_UPDATE = 2 };

typedef struct sg__pmodel {
  sg__pgraph pg;
  int32_t n_ops;
  int32_t *op_group; /* op -> vertex */
  int32_t *leader;   /* vertex -> the op it is named after */
  uint8_t *op_class; /* SG__PART_FORWARD, _BACKWARD or _UPDATE */
  double *op_flops, *op_traffic;
  int32_t *tensor_group; /* source tensor -> owning vertex; -1 for produced tensors and unused ones */
  bool training;         /* the graph has backward ops */
} sg__pmodel;

/* Builds the model. `op_seconds` (NULL: the cost model's FLOPs) replaces
 * the compute weight by measured times scaled by `seconds_to_flops`. */
sg_status sg__pmodel_build(const sg_graph *g, const double *op_seconds, double seconds_to_flops,
                           sg__pmodel *m);
void sg__pmodel_free(sg__pmodel *m);

/* ---- the partition handle (partition.c, report.c) ----------------------- */

typedef struct sg__boundary {
  int32_t tensor;
  int from;
  double bytes;
  int32_t to_off, n_to; /* into sg_partition.boundary_to */
} sg__boundary;

typedef struct sg__part_stats {
  int32_t ops;
  double mem, comp, est_seconds, send, recv, score;
} sg__part_stats;

struct sg_partition {
  const sg_graph *g;
  sg__pmodel *model; /* owned unless this is a baseline (then the parent's) */
  bool owns_model;
  sg_partition_params params;
  int k;
  sg__device *dev; /* k, owned */
  sg__solve solve; /* its targets are owned */
  int32_t *group_part;
  int32_t *op_part;
  double seconds;
  /* figures (report.c) */
  sg_partition_report report;
  sg__part_stats *parts;
  sg__boundary *boundary;
  int32_t n_boundary;
  int *boundary_to;
  sg_partition *baseline; /* NULL for a baseline */
};

/* Computes p->report, p->parts and the boundary list from p->op_part. */
sg_status sg__partition_compute_report(sg_partition *p);
void sg__partition_free_report(sg_partition *p);

/* A partition of g over `dev` (copied) from a model it takes over: the
 * solver's result, or `fixed` (group -> part) when not NULL; `home` (group ->
 * part, may be NULL) makes moves cost migration_cost x the bytes of state
 * they migrate (P6). Adds the random baseline. */
sg_status sg__partition_make_migrating(const sg_graph *g, sg__pmodel *model, const sg_partition_params *pp,
                                       const sg__device *dev, int k, const int32_t *fixed,
                                       const int32_t *home, double migration_cost, sg_partition **out);

/* The per-part device list for a table and K (a table of one device stands
 * for K copies; NULL: K host devices without a memory limit). */
sg_status sg__partition_devices(const sg_device_table *t, int k, sg__device **out);

#endif /* SG_PARTITION_INTERNAL_H */
