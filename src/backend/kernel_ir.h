/* The kernel IR: one fused elementwise kernel (or an optimizer update) as
 * a straight-line program over one index space, independent of the
 * device. It is built from
 * the fusion rules (compile/fuse_rules.c) by the fusion pass that groups a
 * graph's ops into kernels (compile/fuse.c); each backend has an emitter
 * (C for the CPU, cpu/cpu_emit.c; CUDA C, cuda/cuda_emit.c) — only the emitter differs
 * between devices.
 *
 * A kernel has an iteration shape (ndim dims, at most SG__KIR_MAX_DIMS,
 * row-major), inputs read through their own element strides over that
 * shape (0 where an input is broadcast; all 0 for a scalar), and outputs
 * of exactly the iteration shape, contiguous (but summed ones, below). Its body is a list of
 * instructions in SSA form: each defines value number = its position, and
 * operands name earlier values. A value has one dtype (f32, i32, i64 or
 * bool); arithmetic takes operands of one dtype, comparisons give bool,
 * CAST converts.
 *
 * A kernel may end in a sum (the reductions that close a chain: reduce_sum,
 * reduce_mean, sum_to). Its geometry splits the iteration dims at `axis`
 * into rows [0, axis) and columns [axis, ndim); an output stored with
 * sg__kir_store_sum receives the sum of its value over the columns of
 * each row (SG__KIR_SUM_INNER: one element per row) or over the rows of
 * each column (SG__KIR_SUM_OUTER: one element per column), accumulated in
 * double (a row's columns in the eight lanes of sgk_math.h's row sums, a
 * column's rows in order), multiplied by its scale and rounded to f32
 * once: cpu_reduce.c's arithmetic, so that a fused sum is bit-identical to
 * the op it replaces. The other outputs of
 * such a kernel are written as usual.
 *
 * A kernel may start with a prologue: scalar work done once per run, on
 * the host, in double, before any element -- an optimizer's per-step
 * scalars (the learning rate read from its tensor, bias corrections from
 * the step count). It reads scalar f32 inputs, computes, rounds values to
 * f32 into the run's parameters (read in the body by SG__KIR_PARAM) and may
 * write a scalar input back (a step count kept in its tensor). Every
 * backend runs it the same way (sg__kir_prologue_run); the body sees only
 * f32 constants per run.
 *
 * Semantics are the reference ops' (docs/compiler.md has the table):
 * IEEE-754 f32 as C computes it, no contraction into FMA, NaN propagated
 * by MAX/MIN; integer add/sub/mul wrap, integer div truncates with x/0 = 0
 * and MIN/-1 = MIN (as cpu_binary.c). Building never fails halfway
 * silently: the first error is kept (sticky, as the graph builder's) and
 * sg__kir_finish reports it. */
#ifndef SG_KERNEL_IR_H
#define SG_KERNEL_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/graph.h"
#include "sgrt/status.h"

/* Bumped whenever the generated code for the same IR changes: part of the
 * compile cache's key. */
#define SG__CODEGEN_VERSION 6
#define SG__CODEGEN_VERSION_STR "6"

#define SG__KIR_MAX_DIMS 8
#define SG__KIR_MAX_INPUTS 32
#define SG__KIR_MAX_OUTPUTS 8
#define SG__KIR_MAX_INSTRS 4096
#define SG__KIR_NAME_MAX 47
#define SG__KIR_MAX_PARAMS 16
#define SG__KIR_MAX_PROLOGUE 64

typedef enum sg__kir_op {
  SG__KIR_LOAD = 1, /* a: input number */
  SG__KIR_CONST,    /* imm, in the instruction's dtype */
  /* unary: a */
  SG__KIR_NEG,
  SG__KIR_ABS,
  SG__KIR_EXP, /* f32 only, as are the rest of the transcendental ones */
  SG__KIR_LOG,
  SG__KIR_SQRT,
  SG__KIR_RECIP,
  SG__KIR_TANH,
  SG__KIR_ERF,
  SG__KIR_SIGMOID,
  SG__KIR_SIN,
  SG__KIR_COS,
  SG__KIR_ACOS,
  SG__KIR_CAST, /* a to the instruction's dtype (f32 -> int truncates; NaN/out of range -> 0) */
  SG__KIR_NOT,  /* bool */
  /* binary: a, b of one dtype */
  SG__KIR_ADD,
  SG__KIR_SUB,
  SG__KIR_MUL,
  SG__KIR_DIV,
  SG__KIR_MAX,
  SG__KIR_MIN,
  SG__KIR_POW, /* f32 */
  SG__KIR_LT,  /* comparisons: bool result */
  SG__KIR_LE,
  SG__KIR_EQ,
  SG__KIR_AND, /* bool */
  SG__KIR_OR,
  SG__KIR_SELECT, /* a (bool) ? b : c, b and c of the instruction's dtype */
  SG__KIR_STORE,  /* a: value, b: output number */
  SG__KIR_PARAM,  /* f32: per-run parameter number imm, set by the prologue */
  SG__KIR_OP_COUNT
} sg__kir_op;

/* Prologue instructions (kernel.pro, SSA over their own numbering; values
 * are doubles). */
typedef enum sg__kir_pop {
  SG__KIR_P_LOAD = 1, /* a: a scalar f32 input, its element 0 */
  SG__KIR_P_CONST,    /* imm */
  SG__KIR_P_ADD,      /* a, b */
  SG__KIR_P_SUB,
  SG__KIR_P_MUL,
  SG__KIR_P_DIV,
  SG__KIR_P_POW,   /* C's pow */
  SG__KIR_P_SQRT,  /* a */
  SG__KIR_P_F32,   /* a rounded to f32 (and back to double) */
  SG__KIR_P_PARAM, /* a rounded to f32 into parameter b */
  SG__KIR_P_WRITE, /* a rounded to f32 into element 0 of scalar input b */
  SG__KIR_P_COUNT
} sg__kir_pop;

typedef struct sg__kir_instr {
  uint8_t op;      /* sg__kir_op */
  uint8_t dtype;   /* sg_dtype of the value defined (STORE: the output's) */
  int32_t a, b, c; /* operands: value numbers (LOAD: input; STORE b: output) */
  double imm;      /* CONST */
} sg__kir_instr;

typedef struct sg__kir_input {
  sg_dtype dtype;
  int64_t strides[SG__KIR_MAX_DIMS]; /* in elements, per iteration dim; 0 = broadcast */
} sg__kir_input;

typedef enum sg__kir_sum {
  SG__KIR_SUM_NONE = 0,
  SG__KIR_SUM_INNER, /* over the columns [axis, ndim): one output element per row */
  SG__KIR_SUM_OUTER, /* over the rows [0, axis): one output element per column */
} sg__kir_sum;

typedef struct sg__kir_kernel {
  char name[SG__KIR_NAME_MAX + 1]; /* a C identifier: the exported symbol */
  int ndim;
  int64_t dims[SG__KIR_MAX_DIMS];
  int64_t numel;
  int n_in, n_out;
  sg__kir_input in[SG__KIR_MAX_INPUTS];
  sg_dtype out[SG__KIR_MAX_OUTPUTS];
  int8_t out_over[SG__KIR_MAX_OUTPUTS];    /* the input an output is written over (in place), or -1 */
  uint8_t out_sum[SG__KIR_MAX_OUTPUTS];    /* a summed output (sg__kir_store_sum) */
  double out_scale[SG__KIR_MAX_OUTPUTS];   /* and the factor its sum is multiplied by */
  uint8_t sum;                             /* sg__kir_sum: the geometry of the summed outputs */
  int sum_axis;                            /* rows are dims [0, sum_axis), columns the rest */
  sg__kir_instr pro[SG__KIR_MAX_PROLOGUE]; /* the prologue (sg__kir_pop) */
  int n_pro;
  int n_params; /* per-run parameters the prologue sets */
  sg__kir_instr *ins;
  uint32_t n_ins, cap_ins;
  sg_status error;     /* sticky: the first builder error */
  char error_msg[320]; /* and its message */
} sg__kir_kernel;

/* Starts a kernel over dims[ndim] (ndim 0: one element); name must be a C
 * identifier of at most SG__KIR_NAME_MAX bytes. Free with sg__kir_free. */
void sg__kir_init(sg__kir_kernel *k, const char *name, int ndim, const int64_t *dims);
void sg__kir_free(sg__kir_kernel *k);
/* An input read with `strides` (ndim of them; NULL: contiguous over the
 * iteration shape). Returns its number, -1 on error (kept in k->error). */
int sg__kir_input_add(sg__kir_kernel *k, sg_dtype dtype, const int64_t *strides);
/* Instructions; each returns the value number, -1 on error (sticky). */
int sg__kir_load(sg__kir_kernel *k, int input);
int sg__kir_const(sg__kir_kernel *k, sg_dtype dtype, double value);
int sg__kir_unary(sg__kir_kernel *k, sg__kir_op op, int a);
int sg__kir_cast(sg__kir_kernel *k, sg_dtype to, int a);
int sg__kir_binary(sg__kir_kernel *k, sg__kir_op op, int a, int b);
int sg__kir_select(sg__kir_kernel *k, int cond, int a, int b);
/* Stores value v into a new output; returns the output's number. */
int sg__kir_store(sg__kir_kernel *k, int v);
/* Sets the kernel's sum geometry (once, before sg__kir_store_sum). */
int sg__kir_set_sum(sg__kir_kernel *k, sg__kir_sum kind, int axis);
/* Stores f32 value v, summed as the geometry says and multiplied by
 * `scale`, into a new output; returns the output's number. */
int sg__kir_store_sum(sg__kir_kernel *k, int v, double scale);
/* Declares that output `out` is written over input `input` (the same
 * buffer, in place): both contiguous, of one dtype. Every other pair of
 * buffers is distinct — the emitter may tell the compiler so. */
int sg__kir_set_inplace(sg__kir_kernel *k, int out, int input);
/* The builder's first error, or SG_OK when the kernel is complete (at least
 * one output); re-checks every instruction (a kernel read back from a
 * cache file is validated the same way). */
sg_status sg__kir_finish(sg__kir_kernel *k);

/* What the exported function's [begin, end) counts: iteration elements
 * (no sum), rows (SG__KIR_SUM_INNER) or columns (SG__KIR_SUM_OUTER); and
 * in *per, how many iteration elements one unit of it is. */
int64_t sg__kir_range(const sg__kir_kernel *k, int64_t *per);
/* Elements of the dims [d0, d1). */
int64_t sg__kir_span(const sg__kir_kernel *k, int d0, int d1);

/* The prologue, each returning its value number (-1 on error, sticky):
 * a load of scalar f32 input `input`, a constant, an op of sg__kir_pop on
 * earlier values (b unused for SQRT and F32). */
int sg__kir_pro_load(sg__kir_kernel *k, int input);
int sg__kir_pro_const(sg__kir_kernel *k, double value);
int sg__kir_pro_op(sg__kir_kernel *k, sg__kir_pop op, int a, int b);
/* Rounds prologue value v to f32 into a new parameter; returns its number. */
int sg__kir_pro_param(sg__kir_kernel *k, int v);
/* Writes prologue value v (as f32) into element 0 of scalar f32 input
 * `input` when the prologue runs (state kept in a tensor). */
int sg__kir_pro_write(sg__kir_kernel *k, int v, int input);
/* Parameter `index` in the body (f32, the same for every element). */
int sg__kir_param(sg__kir_kernel *k, int index);
/* Runs the prologue over the inputs' buffers (in[0..n_in)) into
 * params[n_params]; done by the backend once per run, on the host. */
void sg__kir_prologue_run(const sg__kir_kernel *k, void *const *in, float *params);

/* "add", "erf", ...; "?" for other values. */
const char *sg__kir_op_name(sg__kir_op op);
/* Whether an input is contiguous over the iteration shape / a scalar. */
bool sg__kir_input_contiguous(const sg__kir_kernel *k, int input);
bool sg__kir_input_scalar(const sg__kir_kernel *k, int input);

#endif /* SG_KERNEL_IR_H */
