/**
 * @file partition.h
 * Partitioning a graph across devices: a cost model per op,
 * METIS k-way partitioning with memory and compute as constraints, acyclic
 * pipeline stages, heterogeneous device tables, reports (table, JSON, DOT),
 * profile-guided repartitioning and tensor-parallel split plans.
 * docs/partitioning.md describes the model and the algorithms.
 *
 * A worked example: a training graph into 4 pipeline stages.
 *
 * @code
 *   sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
 *   pp.parts = 4;
 *   pp.mode = SG_PARTITION_PIPELINE;
 *   sg_partition *part;
 *   if (sg_partition_create(g, &pp, NULL, &part) != SG_OK) {  // g: finalized
 *     fprintf(stderr, "partition: %s\n", sg_last_error());
 *     return 1;
 *   }
 *   for (int32_t op = 0; op < sg_graph_num_ops(g); op++) {
 *     int stage;
 *     sg_partition_op_part(part, op, &stage);  // 0..3, in pipeline order
 *   }
 *   char *json;
 *   if (sg_partition_report_json(part, &json) == SG_OK) { puts(json); sg_free(json); }
 *   sg_partition_destroy(part);
 * @endcode
 *
 * The unit of placement is the forward op: every backward op (named
 * "F/grad", "F/grad_1", ... by sg_graph_backward()) goes where forward op F
 * goes, every op that sums a parameter's gradient ("w/grad...") and every
 * update op goes where parameter w's first consumer goes.
 *
 * Threads: a partition is immutable once created; its queries may run
 * concurrently. Device tables likewise.
 */
#ifndef SGRT_PARTITION_H
#define SGRT_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/core.h"
#include "sgrt/export.h"
#include "sgrt/graph.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

/** Largest number of parts (and of devices in a table). */
#define SG_PARTITION_MAX_PARTS 1024

/* ---- device tables -------------------------------------------------------- */

/** Opaque, immutable list of devices: one part goes to each. */
typedef struct sg_device_table sg_device_table;

/** What a device is. Append-only. */
typedef enum sg_device_kind {
  SG_DEVICE_CPU = 1,
  SG_DEVICE_GPU = 2,
  SG_DEVICE_NPU = 3,
} sg_device_kind;

/** One device, in SI units. Fixed layout (docs/api.md "Versions of structs"). */
typedef struct sg_device_info {
  const char *name;        /**< unique within the table; valid while the table lives */
  sg_device_kind kind;     /**< cpu, gpu or npu */
  double peak_flops;       /**< FLOP/s */
  double memory_bytes;     /**< capacity, a hard limit; 0 in a table made by sg_partition_create
                                without one means unlimited */
  double memory_bandwidth; /**< bytes/s */
  double link_bandwidth;   /**< bytes/s to the other devices */
  double link_latency;     /**< seconds per message */
} sg_device_info;

/**
 * Reads a device table from a JSON file (format in docs/partitioning.md):
 * `{"devices": [{"name": "gpu0", "kind": "gpu", "peak_flops": 312e12,
 * "memory_bytes": 80e9, "memory_bandwidth": 2e12, "link_bandwidth": 300e9,
 * "link_latency_us": 1.2}, {"preset": "ascend910b", "count": 2}]}`.
 * An entry may start from a preset ("a100", "ascend910b", "cpu", "host")
 * whose figures its own fields override, and may repeat itself ("count").
 * @param path  file to read.
 * @param out   receives the table; NULL on failure. Free with
 *              sg_device_table_destroy().
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL arguments; SG_ERR_IO if the
 *   file cannot be read; SG_ERR_FORMAT for malformed JSON or a bad field (the
 *   message names it, e.g. "devices[1].memory_bytes: must be > 0, got -1");
 *   SG_ERR_NOT_FOUND for an unknown preset; SG_ERR_NO_MEMORY. Any thread.
 */
SG_API sg_status sg_device_table_load(const char *path, sg_device_table **out);

/** As sg_device_table_load(), from a NUL-terminated JSON text. */
SG_API sg_status sg_device_table_parse(const char *json, sg_device_table **out);

/**
 * A table of `count` identical devices from a built-in preset:
 * "a100" and "ascend910b" (figures in docs/partitioning.md), "cpu" (a typical two-socket
 * server) and "host" (this machine: its core count and physical memory).
 * Devices are named "<preset>-0", "<preset>-1", ...
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL arguments or a count outside
 *   1..SG_PARTITION_MAX_PARTS; SG_ERR_NOT_FOUND for an unknown preset
 *   (the message lists the known ones); SG_ERR_NO_MEMORY.
 */
SG_API sg_status sg_device_table_preset(const char *preset, int count, sg_device_table **out);

/** Destroys a table. Accepts NULL. */
SG_API void sg_device_table_destroy(sg_device_table *t);

/** Number of devices; 0 for NULL. */
SG_API int sg_device_table_count(const sg_device_table *t);

/** Device `i` (0..count-1). SG_ERR_RANGE for a bad index. */
SG_API sg_status sg_device_table_get(const sg_device_table *t, int i, sg_device_info *out);

/** "cpu", "gpu", "npu"; "?" when out of range. */
SG_API const char *sg_device_kind_name(sg_device_kind kind);

/* ---- partitioning --------------------------------------------------------- */

/** Opaque, immutable result of partitioning one graph. */
typedef struct sg_partition sg_partition;

/** Free: METIS k-way, minimum cut. Pipeline: stages whose quotient graph
 * over the forward edges is acyclic, numbered in topological order. */
typedef enum sg_partition_mode {
  SG_PARTITION_FREE = 0,
  SG_PARTITION_PIPELINE = 1,
} sg_partition_mode;

/** Options of sg_partition_create(). Initialise with SG_PARTITION_PARAMS_INIT
 * or sg_partition_params_init(). */
typedef struct sg_partition_params {
  size_t size;            /**< sizeof(sg_partition_params) */
  int parts;              /**< K; 0 = one per device of the table (required without a table) */
  sg_partition_mode mode; /**< default SG_PARTITION_FREE */
  double imbalance;       /**< tolerated imbalance, 0.05 = 5% (default) */
  double alpha;           /**< weight of transfer cost in the placement score, default 0.3 */
  uint64_t seed;          /**< METIS seed and random choices; default 1 */
  int balance_compute;    /**< 1: compute is a second balance constraint (default); 0: memory only */
} sg_partition_params;

#define SG_PARTITION_PARAMS_INIT \
  { sizeof(sg_partition_params), 0, SG_PARTITION_FREE, 0.05, 0.3, 1, 1 }

/** SG_PARTITION_PARAMS_INIT as a function (for ctypes). */
SG_API sg_partition_params sg_partition_params_init(void);

/**
 * Partitions a finalized graph into params->parts parts, one per device.
 *
 * Memory (parameters, their gradients and optimizer state, state, inputs and
 * the activations kept for the backward pass) is balanced within
 * params->imbalance of each part's target whenever the ops allow it; compute
 * (FLOPs) is balanced as well as it can be next to it. Targets follow the
 * devices' speed; memory capacities are never exceeded. The result is
 * deterministic for a given graph, parameters and table.
 *
 * @param g        a finalized graph; it must outlive the partition.
 * @param params   NULL for the defaults (then a table is required).
 * @param devices  NULL: params->parts identical devices with this machine's
 *                 figures and no memory limit. Otherwise one device per
 *                 part (a table of one device stands for parts copies).
 *                 Copied: it may be destroyed afterwards.
 * @param out      receives the partition; NULL on failure.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL arguments, a bad size field,
 *   parts outside 1..SG_PARTITION_MAX_PARTS, a table whose device count
 *   differs from parts, or an imbalance outside (0, 1] or a negative alpha
 *   (the message names the field); SG_ERR_STATE if g is not finalized;
 *   SG_ERR_RANGE for more parts than the graph has ops (a part would be
 *   empty), or when the graph cannot fit the devices' memory (the message
 *   states need and capacity, and names the op when one alone is too big);
 *   SG_ERR_NO_MEMORY; SG_ERR_INTERNAL if METIS fails.
 *   Any thread; g may be shared with other readers.
 */
SG_API sg_status sg_partition_create(const sg_graph *g, const sg_partition_params *params,
                                     const sg_device_table *devices, sg_partition **out);

/** Destroys a partition (and its random baseline). Accepts NULL. */
SG_API void sg_partition_destroy(sg_partition *p);

/** Number of parts; 0 for NULL. */
SG_API int sg_partition_num_parts(const sg_partition *p);

/** The graph a partition belongs to. */
SG_API const sg_graph *sg_partition_graph(const sg_partition *p);

/** Part (pipeline stage) of op `op`. SG_ERR_RANGE for a bad op index. */
SG_API sg_status sg_partition_op_part(const sg_partition *p, int32_t op, int *part);

/** The cost model's estimate of op `op` of a finalized graph: its FLOPs and the bytes it reads and
 * writes (the roofline's two axes; what the partitioner weighs ops by). SG_ERR_INVALID_ARG for NULL,
 * SG_ERR_STATE for a graph not finalized, SG_ERR_RANGE for a bad op index. */
SG_API sg_status sg_partition_op_cost(const sg_graph *g, int32_t op, double *flops, double *bytes);

/**
 * Parts in an order in which every forward tensor flows from an earlier part
 * to a later one (or within one): the pipeline order. In pipeline mode this
 * is 0, 1, ..., K-1. @param order room for sg_partition_num_parts() ints.
 * @return SG_OK; SG_ERR_CYCLE when the parts' quotient graph has a cycle
 *   (possible in free mode); SG_ERR_INVALID_ARG for NULL arguments.
 */
SG_API sg_status sg_partition_stage_order(const sg_partition *p, int *order, int n);

/** Device of part `part`. SG_ERR_RANGE for a bad part. */
SG_API sg_status sg_partition_device(const sg_partition *p, int part, sg_device_info *out);

/** The seeded random partition (same graph, devices and targets) that the
 * reports compare with; NULL when p is itself that baseline. Owned by p. */
SG_API const sg_partition *sg_partition_baseline(const sg_partition *p);

/* ---- reports -------------------------------------------------------------- */

/** Figures of one partition. Cut bytes count each tensor once per part, other
 * than its producer's, that consumes it. Imbalance is max over parts of
 * (load / target) - 1, in percent. */
typedef struct sg_partition_report {
  size_t size;                  /**< set by the caller: sizeof(sg_partition_report) */
  int parts;                    /**< K */
  sg_partition_mode mode;       /**< mode it was made in */
  int32_t ops;                  /**< ops of the graph */
  int32_t groups;               /**< placement units (forward ops and ops without one) */
  int training;                 /**< 1 when the graph has backward ops */
  double total_memory_bytes;    /**< sum of the cost model's memory over all ops */
  double total_flops;           /**< sum of FLOPs over all ops */
  double cut_bytes;             /**< bytes crossing parts per step */
  double imbalance_pct;         /**< memory */
  double compute_imbalance_pct; /**< FLOPs */
  double bottleneck_ratio;      /**< slowest part's estimated time over the ideal (perfect split) */
  int acyclic;                  /**< 1 when the quotient graph of the forward edges is acyclic */
  int32_t boundary_tensors;     /**< tensors consumed outside their producer's part */
  double seconds;               /**< time it took to compute the partition */
} sg_partition_report;

#define SG_PARTITION_REPORT_INIT \
  { .size = sizeof(sg_partition_report) }

/** Fills `out` (out->size must be set; a smaller size from an older caller
 * gets the fields it knows). SG_ERR_INVALID_ARG for NULL or a bad size. */
SG_API sg_status sg_partition_get_report(const sg_partition *p, sg_partition_report *out);

/** Figures of one part. */
typedef struct sg_partition_part_info {
  size_t size;           /**< set by the caller: sizeof(sg_partition_part_info) */
  int32_t ops;           /**< ops placed on it */
  double memory_bytes;   /**< cost-model memory */
  double memory_target;  /**< what balance aims at */
  double capacity_bytes; /**< the device's memory; 0 = unlimited */
  double flops;
  double est_seconds; /**< roofline estimate on its device */
  double send_bytes;  /**< produced here, consumed elsewhere (once per consuming part) */
  double recv_bytes;  /**< produced elsewhere, consumed here */
  double score;       /**< mean placement score of its ops' groups (compute efficiency - alpha x transfer) */
} sg_partition_part_info;

#define SG_PARTITION_PART_INFO_INIT \
  { .size = sizeof(sg_partition_part_info) }

/** Fills `out` for part `part`. SG_ERR_RANGE for a bad part. */
SG_API sg_status sg_partition_part(const sg_partition *p, int part, sg_partition_part_info *out);

/** Number of tensors consumed outside their producer's part. */
SG_API int32_t sg_partition_num_boundary(const sg_partition *p);

/** Boundary tensor `i` (0..num_boundary-1), in tensor order: the tensor, its
 * producer's part, its size, and the parts it goes to (an array owned by p,
 * ascending). SG_ERR_RANGE for a bad index. */
SG_API sg_status sg_partition_boundary(const sg_partition *p, int32_t i, sg_tensor *tensor, int *from,
                                       double *bytes, const int **to, int *n_to);

/**
 * The report as one JSON object (keys in docs/partitioning.md: parts, mode,
 * cut_bytes, imbalance_pct, compute_imbalance_pct, bottleneck_ratio,
 * acyclic, boundary_tensors, seconds, per_part, boundary, devices, and
 * random: the same figures for the baseline). *out is NUL-terminated, on one
 * line; free it with sg_free(). SG_ERR_NO_MEMORY.
 */
SG_API sg_status sg_partition_report_json(const sg_partition *p, char **out);

/** The report as a plain-text table (figures of p and its baseline, then one
 * row per part). Free *out with sg_free(). */
SG_API sg_status sg_partition_report_text(const sg_partition *p, char **out);

/** Writes the graph as Graphviz DOT with every op filled in its part's
 * colour and tensors that cross parts drawn bold with their size; "-" is
 * stdout. SG_ERR_IO on a write error. */
SG_API sg_status sg_partition_write_dot(const sg_partition *p, const char *path);

/**
 * Placement score of op `op` on the device of part `part` given where the
 * other ops are: compute efficiency (its best device's time over
 * this device's, in (0, 1]) minus alpha x transfer cost (time to move the
 * tensors it exchanges with ops on other devices, over that time plus its
 * own compute time, in [0, 1)). Higher is better.
 */
SG_API sg_status sg_partition_placement_score(const sg_partition *p, int32_t op, int part, double *score);

/* ---- profile-guided repartitioning ---------------------------------------- */

/** Options of sg_partition_repartition(). */
typedef struct sg_repartition_params {
  size_t size;             /**< sizeof(sg_repartition_params) */
  double migration_cost;   /**< cost of migrating one byte of state, in units of one cut byte; default 1 */
  double memory_imbalance; /**< memory imbalance tolerated while the measured times are balanced within
                                the partition's tolerance; default 0.25 (capacities always hold) */
} sg_repartition_params;

#define SG_REPARTITION_PARAMS_INIT \
  { sizeof(sg_repartition_params), 1.0, 0.25 }
SG_API sg_repartition_params sg_repartition_params_init(void);

/**
 * A new partition of the same graph over the same devices, with measured
 * op times as the compute weights, minimising cut bytes plus
 * migration_cost x the bytes of state (parameters, optimizer state, state)
 * that change part. The measured times are balanced within the partition's
 * tolerance first; memory within params->memory_imbalance and always within
 * capacity; the mode is `current`'s. Staying put is one of the candidates.
 * @param op_seconds  measured time of every op (n = sg_graph_num_ops()),
 *                    >= 0 and finite.
 * @param out         receives the new partition.
 * @return as sg_partition_create(); SG_ERR_INVALID_ARG for a bad time (the
 *   message names the op) or a wrong count.
 */
SG_API sg_status sg_partition_repartition(const sg_partition *current, const double *op_seconds, int32_t n,
                                          const sg_repartition_params *params, sg_partition **out);

/** Bytes of state (parameters, optimizer state, state) whose part differs
 * between two partitions of the same graph. SG_ERR_INVALID_ARG otherwise. */
SG_API sg_status sg_partition_migration_bytes(const sg_partition *from, const sg_partition *to,
                                              double *bytes);

/** One profile sample of a node, the input of sg_repartition_trigger(). */
typedef struct sg_profile_sample {
  int32_t node_id;
  double timestamp_ms;   /**< when it was taken */
  double cpu_util;       /**< 0..1 */
  double latency_p99_ms; /**< p99 step latency over the sliding window */
  double steps_per_s;
} sg_profile_sample;

/** Thresholds of sg_repartition_trigger(). */
typedef struct sg_repartition_trigger_params {
  size_t size;             /**< sizeof(sg_repartition_trigger_params) */
  double cpu_util;         /**< default 0.85 */
  double latency_p99_ms;   /**< default 200 */
  double sample_period_ms; /**< default 500 */
  int sustain_samples;     /**< consecutive samples above both thresholds; default 3 */
} sg_repartition_trigger_params;

#define SG_REPARTITION_TRIGGER_PARAMS_INIT \
  { sizeof(sg_repartition_trigger_params), 0.85, 200.0, 500.0, 3 }
SG_API sg_repartition_trigger_params sg_repartition_trigger_params_init(void);

/**
 * Decides whether to repartition (a pure function of its arguments). Fires
 * when some node's latest `sustain_samples` samples are consecutive (each
 * within 1.5 sample periods of the previous one) and all have CPU
 * utilisation above `cpu_util` and p99 latency above `latency_p99_ms`.
 * Samples may come in any order and mix nodes.
 * @param fire  1 to repartition, else 0.
 * @param node  the node that fired (the lowest id if several), or -1.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL pointers (samples may be NULL
 *   when n is 0), bad thresholds, or a sample with a non-finite or negative
 *   field or cpu_util above 1 (the message names the sample and field).
 */
SG_API sg_status sg_repartition_trigger(const sg_profile_sample *samples, size_t n,
                                        const sg_repartition_trigger_params *params, int *fire,
                                        int32_t *node);

/* ---- tensor-parallel split plans ------------------------------------------ */

/** How one matmul/linear op is split across `ways` devices. */
typedef enum sg_tp_split {
  SG_TP_REPLICATE = 0, /**< not split */
  SG_TP_COLUMN = 1, /**< weight split along its output features: each device computes a slice of the output */
  SG_TP_ROW = 2,    /**< weight split along its input features: partial outputs are summed */
} sg_tp_split;

/** Communication an annotated op's output (forward) or input gradient
 * (backward) needs before it is used. */
typedef enum sg_tp_comm {
  SG_TP_COMM_NONE = 0,
  SG_TP_COMM_ALLGATHER = 1, /**< gather the slices along the last dim */
  SG_TP_COMM_ALLREDUCE = 2, /**< sum the partial results */
} sg_tp_comm;

/** Options of sg_tp_plan_create(). */
typedef struct sg_tp_params {
  size_t size;             /**< sizeof(sg_tp_params) */
  int ways;                /**< devices per tensor-parallel group, >= 2; default 2 */
  double min_weight_bytes; /**< smaller weights stay replicated; default 0 */
} sg_tp_params;

#define SG_TP_PARAMS_INIT \
  { sizeof(sg_tp_params), 2, 0.0 }
SG_API sg_tp_params sg_tp_params_init(void);

/** One annotation: what the distributed runtime does with one op (a fixed
 * layout, docs/api.md "Versions of structs"). The
 * backward ops of the op ("F/grad...") follow it: a column split's input
 * gradient is all-reduced (backward_comm), a row split's is sliced. */
typedef struct sg_tp_annotation {
  int32_t op; /**< a gemm or matmul of the graph */
  sg_tp_split split;
  int ways;
  sg_tensor weight;  /**< the parameter that is split (SG_NO_TENSOR when replicated) */
  int weight_axis;   /**< axis of weight split into `ways` equal slices; -1 when replicated */
  sg_tensor bias;    /**< column: split along its last axis; row: added once after the all-reduce */
  int input_sharded; /**< row: 1 when the input arrives split (from a column-split op), 0 when the runtime
                        slices it */
  sg_tp_comm output_comm;   /**< forward: what the output needs before its consumers */
  sg_tp_comm backward_comm; /**< backward: what the input gradient needs */
  const char *reason;       /**< why an op stays replicated (static string), else "" */
} sg_tp_annotation;

/** Opaque, immutable plan. */
typedef struct sg_tp_plan sg_tp_plan;

/**
 * Plans column/row splits (Megatron-style: a column split followed by a row
 * split needs one all-reduce for the pair, through elementwise ops for an
 * MLP, through attention with the heads cut for a fused QKV projection) for
 * every gemm and matmul of `g` whose second operand is a 2-D parameter
 * (docs/partitioning.md, docs/tensor_parallel.md).
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL arguments, a bad size or
 *   ways < 2; SG_ERR_STATE if g is not finalized; SG_ERR_NO_MEMORY.
 */
SG_API sg_status sg_tp_plan_create(const sg_graph *g, const sg_tp_params *params, sg_tp_plan **out);
/** Destroys a plan. Accepts NULL. */
SG_API void sg_tp_plan_destroy(sg_tp_plan *plan);
/** Number of annotations (one per gemm/matmul with a parameter weight). */
SG_API int32_t sg_tp_plan_count(const sg_tp_plan *plan);
/** Annotation `i`; its strings live as long as the plan. SG_ERR_RANGE. */
SG_API sg_status sg_tp_plan_get(const sg_tp_plan *plan, int32_t i, sg_tp_annotation *out);
/**
 * How tensor `t` of the planned graph is cut across the group (a split weight
 * or column bias; every other tensor of the graph is whole): *axis is the
 * split axis, -1 when whole; *groups the number of equal blocks that axis
 * consists of, each cut into `ways` equal slices -- 1 for a plain split, 3
 * for a fused QKV weight whose q, k and v blocks are each split by heads.
 * Device k's part is slice k of every block, in block order.
 * @return SG_OK; SG_ERR_INVALID_ARG for NULL or a tensor not in the graph.
 */
SG_API sg_status sg_tp_plan_tensor_split(const sg_tp_plan *plan, sg_tensor t, int *axis, int *groups);
/** The plan as a JSON array on one line; free with sg_free(). */
SG_API sg_status sg_tp_plan_json(const sg_tp_plan *plan, char **out);

SG_EXTERN_C_END

#endif /* SGRT_PARTITION_H */
