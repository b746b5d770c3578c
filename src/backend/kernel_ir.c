/* The kernel IR's builder and validator (kernel_ir.h). One rule table,
 * check_instr, serves both: every instruction is checked as it is added and
 * the whole kernel again by sg__kir_finish, so an emitter only ever sees a
 * well-typed program whose operands come before their uses. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/kernel_ir.h"
#include "core/core.h"

static const char *const op_names[SG__KIR_OP_COUNT] = {
    [SG__KIR_LOAD] = "load",   [SG__KIR_CONST] = "const",     [SG__KIR_NEG] = "neg",
    [SG__KIR_ABS] = "abs",     [SG__KIR_EXP] = "exp",         [SG__KIR_LOG] = "log",
    [SG__KIR_SQRT] = "sqrt",   [SG__KIR_RECIP] = "recip",     [SG__KIR_TANH] = "tanh",
    [SG__KIR_ERF] = "erf",     [SG__KIR_SIGMOID] = "sigmoid", [SG__KIR_SIN] = "sin",
    [SG__KIR_COS] = "cos",     [SG__KIR_ACOS] = "acos",       [SG__KIR_CAST] = "cast",
    [SG__KIR_NOT] = "not",     [SG__KIR_ADD] = "add",         [SG__KIR_SUB] = "sub",
    [SG__KIR_MUL] = "mul",     [SG__KIR_DIV] = "div",         [SG__KIR_MAX] = "max",
    [SG__KIR_MIN] = "min",     [SG__KIR_POW] = "pow",         [SG__KIR_LT] = "lt",
    [SG__KIR_LE] = "le",       [SG__KIR_EQ] = "eq",           [SG__KIR_AND] = "and",
    [SG__KIR_OR] = "or",       [SG__KIR_SELECT] = "select",   [SG__KIR_STORE] = "store",
    [SG__KIR_PARAM] = "param",
};

const char *sg__kir_op_name(sg__kir_op op) {
  return op > 0 && op < SG__KIR_OP_COUNT && op_names[op] ? op_names[op] : "?";
}

static bool value_dtype(int d) { return d == SG_F32 || d == SG_I32 || d == SG_I64 || d == SG_BOOL; }
static bool numeric(int d) { return d == SG_F32 || d == SG_I32 || d == SG_I64; }

static sg_status fail(sg__kir_kernel *k, sg_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static sg_status fail(sg__kir_kernel *k, sg_status st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  sg_status got = sg__error(st, "kernel '%s': %s", k->name, msg);
  if (k->error == SG_OK) {
    k->error = got;
    snprintf(k->error_msg, sizeof k->error_msg, "%s", sg_last_error());
  }
  return got;
}

void sg__kir_init(sg__kir_kernel *k, const char *name, int ndim, const int64_t *dims) {
  memset(k, 0, sizeof *k);
  snprintf(k->name, sizeof k->name, "%s", name ? name : "");
  bool ident = name != NULL && name[0] != '\0' && strlen(name) <= SG__KIR_NAME_MAX &&
               !(name[0] >= '0' && name[0] <= '9');
  for (const char *c = name; ident && *c; c++)
    ident = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_';
  if (!ident) {
    fail(k, SG_ERR_INVALID_ARG, "the name is not a C identifier of 1..%d bytes", SG__KIR_NAME_MAX);
    return;
  }
  if (ndim < 0 || ndim > SG__KIR_MAX_DIMS || (ndim > 0 && dims == NULL)) {
    fail(k, SG_ERR_INVALID_ARG, "%d dims (0..%d)", ndim, SG__KIR_MAX_DIMS);
    return;
  }
  k->ndim = ndim;
  k->numel = 1;
  for (int d = 0; d < ndim; d++) {
    if (dims[d] < 0 || __builtin_mul_overflow(k->numel, dims[d], &k->numel)) {
      fail(k, SG_ERR_RANGE, "dim %d is %lld: negative, or the shape overflows", d, (long long)dims[d]);
      return;
    }
    k->dims[d] = dims[d];
  }
}

void sg__kir_free(sg__kir_kernel *k) {
  if (k == NULL) return;
  sg__free(k->ins);
  k->ins = NULL;
  k->n_ins = k->cap_ins = 0;
}

int sg__kir_input_add(sg__kir_kernel *k, sg_dtype dtype, const int64_t *strides) {
  if (k->error != SG_OK) return -1;
  if (k->n_in >= SG__KIR_MAX_INPUTS)
    return fail(k, SG_ERR_RANGE, "more than %d inputs", SG__KIR_MAX_INPUTS), -1;
  if (!value_dtype(dtype)) return fail(k, SG_ERR_UNSUPPORTED, "input of dtype %d", (int)dtype), -1;
  sg__kir_input *in = &k->in[k->n_in];
  memset(in, 0, sizeof *in);
  in->dtype = dtype;
  int64_t s = 1;
  for (int d = k->ndim - 1; d >= 0; d--) {
    in->strides[d] = strides ? strides[d] : s;
    if (in->strides[d] < 0)
      return fail(k, SG_ERR_INVALID_ARG, "input %d: negative stride on dim %d", k->n_in, d), -1;
    s *= k->dims[d];
  }
  return k->n_in++;
}

/* Checks instruction i (operands, dtypes, numbers) against the kernel so
 * far; why[cap] says what is wrong. */
static bool check_instr(const sg__kir_kernel *k, uint32_t i, char *why, size_t cap) {
  const sg__kir_instr *x = &k->ins[i];
  int op = x->op, t = x->dtype;
  const sg__kir_instr *v[3] = {NULL, NULL, NULL};
  int arity = op == SG__KIR_SELECT                     ? 3
              : op >= SG__KIR_ADD && op <= SG__KIR_OR  ? 2
              : op == SG__KIR_STORE                    ? 1
              : op >= SG__KIR_NEG && op <= SG__KIR_NOT ? 1
                                                       : 0;
  if (op <= 0 || op >= SG__KIR_OP_COUNT) return snprintf(why, cap, "unknown op %d", op), false;
  const int32_t ops[3] = {x->a, x->b, x->c};
  for (int j = 0; j < arity; j++) {
    if (ops[j] < 0 || (uint32_t)ops[j] >= i || k->ins[ops[j]].op == SG__KIR_STORE)
      return snprintf(why, cap, "%s: operand %d (value %d) is not an earlier value", sg__kir_op_name(op), j,
                      ops[j]),
             false;
    v[j] = &k->ins[ops[j]];
  }
  if (!value_dtype(t)) return snprintf(why, cap, "%s of dtype %d", sg__kir_op_name(op), t), false;
  switch (op) {
    case SG__KIR_LOAD:
      if (x->a < 0 || x->a >= k->n_in)
        return snprintf(why, cap, "load of input %d (of %d)", x->a, k->n_in), false;
      if (t != (int)k->in[x->a].dtype)
        return snprintf(why, cap, "load: dtype differs from input %d's", x->a), false;
      return true;
    case SG__KIR_CONST:
      if (t == SG_F32) return true;
      if (x->imm != floor(x->imm) || (t == SG_BOOL && x->imm != 0 && x->imm != 1) ||
          (t == SG_I32 && (x->imm < -2147483648.0 || x->imm > 2147483647.0)) ||
          (t == SG_I64 && (x->imm < -9223372036854775808.0 || x->imm >= 9223372036854775808.0)))
        return snprintf(why, cap, "const %g does not fit its dtype", x->imm), false;
      return true;
    case SG__KIR_NEG:
    case SG__KIR_ABS:
      if (!numeric(t) || v[0]->dtype != t)
        return snprintf(why, cap, "%s needs a number of its own dtype", sg__kir_op_name(op)), false;
      return true;
    case SG__KIR_NOT:
      if (t != SG_BOOL || v[0]->dtype != SG_BOOL) return snprintf(why, cap, "not needs a bool"), false;
      return true;
    case SG__KIR_CAST: return true;
    case SG__KIR_STORE:
      if (x->b < 0 || x->b >= k->n_out || t != v[0]->dtype || t != (int)k->out[x->b])
        return snprintf(why, cap, "store into output %d (of %d) of another dtype", x->b, k->n_out), false;
      if (k->out_sum[x->b] && t != SG_F32) return snprintf(why, cap, "a summed output is f32 only"), false;
      return true;
    case SG__KIR_PARAM:
      if (t != SG_F32 || x->imm != floor(x->imm) || x->imm < 0 || x->imm >= k->n_params)
        return snprintf(why, cap, "param %g (of %d) is not an f32 parameter", x->imm, k->n_params), false;
      return true;
    case SG__KIR_SELECT:
      if (v[0]->dtype != SG_BOOL || v[1]->dtype != t || v[2]->dtype != t)
        return snprintf(why, cap, "select needs a bool and two values of its dtype"), false;
      return true;
    default: break;
  }
  if (op >= SG__KIR_EXP && op <= SG__KIR_ACOS) {
    if (t != SG_F32 || v[0]->dtype != SG_F32)
      return snprintf(why, cap, "%s is f32 only", sg__kir_op_name(op)), false;
    return true;
  }
  /* binary */
  if (v[0]->dtype != v[1]->dtype) return snprintf(why, cap, "%s of two dtypes", sg__kir_op_name(op)), false;
  int in = v[0]->dtype;
  bool ok;
  switch (op) {
    case SG__KIR_POW: ok = in == SG_F32 && t == SG_F32; break;
    case SG__KIR_LT:
    case SG__KIR_LE: ok = numeric(in) && t == SG_BOOL; break;
    case SG__KIR_EQ: ok = t == SG_BOOL; break;
    case SG__KIR_AND:
    case SG__KIR_OR: ok = in == SG_BOOL && t == SG_BOOL; break;
    default: ok = numeric(in) && t == in; break;
  }
  if (!ok) return snprintf(why, cap, "%s does not take these dtypes", sg__kir_op_name(op)), false;
  return true;
}

static int append(sg__kir_kernel *k, sg__kir_instr x) {
  if (k->error != SG_OK) return -1;
  if (k->n_ins >= SG__KIR_MAX_INSTRS)
    return fail(k, SG_ERR_RANGE, "more than %d instructions", SG__KIR_MAX_INSTRS), -1;
  if (sg__grow((void **)&k->ins, &k->cap_ins, k->n_ins + 1, sizeof *k->ins) != SG_OK)
    return fail(k, SG_ERR_NO_MEMORY, "out of memory"), -1;
  k->ins[k->n_ins] = x;
  char why[256];
  if (!check_instr(k, k->n_ins, why, sizeof why))
    return fail(k, SG_ERR_INVALID_ARG, "instruction %u: %s", k->n_ins, why), -1;
  return (int)k->n_ins++;
}

static int dtype_of(const sg__kir_kernel *k, int v) {
  return v >= 0 && (uint32_t)v < k->n_ins ? k->ins[v].dtype : 0;
}

int sg__kir_load(sg__kir_kernel *k, int input) {
  int t = input >= 0 && input < k->n_in ? (int)k->in[input].dtype : SG_F32;
  return append(k, (sg__kir_instr){.op = SG__KIR_LOAD, .dtype = (uint8_t)t, .a = input});
}

int sg__kir_const(sg__kir_kernel *k, sg_dtype dtype, double value) {
  return append(k, (sg__kir_instr){.op = SG__KIR_CONST, .dtype = (uint8_t)dtype, .imm = value});
}

int sg__kir_unary(sg__kir_kernel *k, sg__kir_op op, int a) {
  if (op < SG__KIR_NEG || op > SG__KIR_NOT || op == SG__KIR_CAST) {
    if (k->error == SG_OK) fail(k, SG_ERR_INVALID_ARG, "%s is not a unary op", sg__kir_op_name(op));
    return -1;
  }
  return append(k, (sg__kir_instr){.op = (uint8_t)op, .dtype = (uint8_t)dtype_of(k, a), .a = a});
}

int sg__kir_cast(sg__kir_kernel *k, sg_dtype to, int a) {
  return append(k, (sg__kir_instr){.op = SG__KIR_CAST, .dtype = (uint8_t)to, .a = a});
}

int sg__kir_binary(sg__kir_kernel *k, sg__kir_op op, int a, int b) {
  if (op < SG__KIR_ADD || op > SG__KIR_OR) {
    if (k->error == SG_OK) fail(k, SG_ERR_INVALID_ARG, "%s is not a binary op", sg__kir_op_name(op));
    return -1;
  }
  int t = op == SG__KIR_LT || op == SG__KIR_LE || op == SG__KIR_EQ ? SG_BOOL : dtype_of(k, a);
  return append(k, (sg__kir_instr){.op = (uint8_t)op, .dtype = (uint8_t)t, .a = a, .b = b});
}

int sg__kir_select(sg__kir_kernel *k, int cond, int a, int b) {
  return append(
      k, (sg__kir_instr){.op = SG__KIR_SELECT, .dtype = (uint8_t)dtype_of(k, a), .a = cond, .b = a, .c = b});
}

static int store(sg__kir_kernel *k, int v, bool sum, double scale) {
  if (k->error != SG_OK) return -1;
  if (k->n_out >= SG__KIR_MAX_OUTPUTS)
    return fail(k, SG_ERR_RANGE, "more than %d outputs", SG__KIR_MAX_OUTPUTS), -1;
  if (sum && k->sum == SG__KIR_SUM_NONE)
    return fail(k, SG_ERR_INVALID_ARG, "a summed output without a sum"), -1;
  int t = dtype_of(k, v);
  k->out_over[k->n_out] = -1;
  k->out_sum[k->n_out] = sum;
  k->out_scale[k->n_out] = sum ? scale : 1;
  k->out[k->n_out++] = (sg_dtype)t;
  if (append(k, (sg__kir_instr){.op = SG__KIR_STORE, .dtype = (uint8_t)t, .a = v, .b = k->n_out - 1}) < 0) {
    k->n_out--;
    return -1;
  }
  return k->n_out - 1;
}

int sg__kir_store(sg__kir_kernel *k, int v) { return store(k, v, false, 1); }

int sg__kir_store_sum(sg__kir_kernel *k, int v, double scale) { return store(k, v, true, scale); }

int sg__kir_set_sum(sg__kir_kernel *k, sg__kir_sum kind, int axis) {
  if (k->error != SG_OK) return -1;
  if (k->sum != SG__KIR_SUM_NONE) return fail(k, SG_ERR_INVALID_ARG, "the sum is set twice"), -1;
  if ((kind != SG__KIR_SUM_INNER && kind != SG__KIR_SUM_OUTER) || axis < 0 || axis > k->ndim)
    return fail(k, SG_ERR_INVALID_ARG, "sum %d at axis %d of %d dims", (int)kind, axis, k->ndim), -1;
  k->sum = (uint8_t)kind;
  k->sum_axis = axis;
  return 0;
}

int64_t sg__kir_span(const sg__kir_kernel *k, int d0, int d1) {
  int64_t n = 1;
  for (int d = d0; d < d1; d++) n *= k->dims[d];
  return n;
}

int64_t sg__kir_range(const sg__kir_kernel *k, int64_t *per) {
  int64_t rows = sg__kir_span(k, 0, k->sum_axis), cols = sg__kir_span(k, k->sum_axis, k->ndim);
  switch ((sg__kir_sum)k->sum) {
    case SG__KIR_SUM_INNER: *per = cols; return rows;
    case SG__KIR_SUM_OUTER: *per = rows; return cols;
    default: *per = 1; return k->numel;
  }
}

int sg__kir_set_inplace(sg__kir_kernel *k, int out, int input) {
  if (k->error != SG_OK) return -1;
  if (out < 0 || out >= k->n_out || input < 0 || input >= k->n_in)
    return fail(k, SG_ERR_INVALID_ARG, "in place: output %d over input %d (of %d, %d)", out, input, k->n_out,
                k->n_in),
           -1;
  if (k->out_sum[out]) return fail(k, SG_ERR_INVALID_ARG, "in place: output %d is a sum", out), -1;
  for (int o = 0; o < k->n_out; o++)
    if (o != out && k->out_over[o] == input)
      return fail(k, SG_ERR_INVALID_ARG, "in place: input %d already holds output %d", input, o), -1;
  if (k->in[input].dtype != k->out[out] || !sg__kir_input_contiguous(k, input))
    return fail(k, SG_ERR_INVALID_ARG, "in place: output %d and input %d differ in dtype or layout", out,
                input),
           -1;
  k->out_over[out] = (int8_t)input;
  return out;
}

/* ---- the prologue ------------------------------------------------------- */

static int pro_arity(int op) {
  if (op == SG__KIR_P_LOAD || op == SG__KIR_P_CONST) return 0;
  if (op == SG__KIR_P_SQRT || op == SG__KIR_P_F32 || op == SG__KIR_P_PARAM || op == SG__KIR_P_WRITE) return 1;
  return 2;
}

/* Whether input j is a scalar f32 (every stride 0 over the iteration). */
static bool scalar_f32_input(const sg__kir_kernel *k, int j) {
  return j >= 0 && j < k->n_in && k->in[j].dtype == SG_F32 && sg__kir_input_scalar(k, j);
}

static bool check_pro(const sg__kir_kernel *k, int i, int n_params, char *why, size_t cap) {
  const sg__kir_instr *x = &k->pro[i];
  if (x->op <= 0 || x->op >= SG__KIR_P_COUNT)
    return snprintf(why, cap, "unknown prologue op %d", x->op), false;
  int arity = pro_arity(x->op);
  const int32_t ops[2] = {x->a, x->b};
  for (int j = 0; j < arity; j++)
    if (ops[j] < 0 || ops[j] >= i || k->pro[ops[j]].op == SG__KIR_P_PARAM ||
        k->pro[ops[j]].op == SG__KIR_P_WRITE)
      return snprintf(why, cap, "operand %d (value %d) is not an earlier value", j, ops[j]), false;
  if (x->op == SG__KIR_P_LOAD && !scalar_f32_input(k, x->a))
    return snprintf(why, cap, "load of input %d, which is not a scalar f32 input", x->a), false;
  if (x->op == SG__KIR_P_WRITE && !scalar_f32_input(k, x->b))
    return snprintf(why, cap, "write to input %d, which is not a scalar f32 input", x->b), false;
  if (x->op == SG__KIR_P_PARAM && (x->b < 0 || x->b >= n_params))
    return snprintf(why, cap, "parameter %d of %d", x->b, n_params), false;
  return true;
}

static int pro_append(sg__kir_kernel *k, sg__kir_instr x) {
  if (k->error != SG_OK) return -1;
  if (k->n_pro >= SG__KIR_MAX_PROLOGUE)
    return fail(k, SG_ERR_RANGE, "more than %d prologue instructions", SG__KIR_MAX_PROLOGUE), -1;
  k->pro[k->n_pro] = x;
  char why[256];
  if (!check_pro(k, k->n_pro, x.op == SG__KIR_P_PARAM ? k->n_params + 1 : k->n_params, why, sizeof why))
    return fail(k, SG_ERR_INVALID_ARG, "prologue %d: %s", k->n_pro, why), -1;
  return k->n_pro++;
}

int sg__kir_pro_load(sg__kir_kernel *k, int input) {
  return pro_append(k, (sg__kir_instr){.op = SG__KIR_P_LOAD, .a = input});
}

int sg__kir_pro_const(sg__kir_kernel *k, double value) {
  return pro_append(k, (sg__kir_instr){.op = SG__KIR_P_CONST, .imm = value});
}

int sg__kir_pro_op(sg__kir_kernel *k, sg__kir_pop op, int a, int b) {
  if (op < SG__KIR_P_ADD || op > SG__KIR_P_F32) {
    if (k->error == SG_OK) fail(k, SG_ERR_INVALID_ARG, "prologue op %d is not an operation", (int)op);
    return -1;
  }
  return pro_append(k, (sg__kir_instr){.op = (uint8_t)op, .a = a, .b = pro_arity(op) == 2 ? b : 0});
}

int sg__kir_pro_param(sg__kir_kernel *k, int v) {
  if (k->error != SG_OK) return -1;
  if (k->n_params >= SG__KIR_MAX_PARAMS)
    return fail(k, SG_ERR_RANGE, "more than %d parameters", SG__KIR_MAX_PARAMS), -1;
  if (pro_append(k, (sg__kir_instr){.op = SG__KIR_P_PARAM, .a = v, .b = k->n_params}) < 0) return -1;
  return k->n_params++;
}

int sg__kir_pro_write(sg__kir_kernel *k, int v, int input) {
  return pro_append(k, (sg__kir_instr){.op = SG__KIR_P_WRITE, .a = v, .b = input});
}

int sg__kir_param(sg__kir_kernel *k, int index) {
  return append(k, (sg__kir_instr){.op = SG__KIR_PARAM, .dtype = SG_F32, .imm = index});
}

void sg__kir_prologue_run(const sg__kir_kernel *k, void *const *in, float *params) {
  double v[SG__KIR_MAX_PROLOGUE];
  for (int i = 0; i < k->n_pro; i++) {
    const sg__kir_instr *x = &k->pro[i];
    double a = pro_arity(x->op) >= 1 ? v[x->a] : 0, b = pro_arity(x->op) == 2 ? v[x->b] : 0;
    switch ((sg__kir_pop)x->op) {
      case SG__KIR_P_LOAD: v[i] = *(const float *)in[x->a]; break;
      case SG__KIR_P_CONST: v[i] = x->imm; break;
      case SG__KIR_P_ADD: v[i] = a + b; break;
      case SG__KIR_P_SUB: v[i] = a - b; break;
      case SG__KIR_P_MUL: v[i] = a * b; break;
      case SG__KIR_P_DIV: v[i] = a / b; break;
      case SG__KIR_P_POW: v[i] = pow(a, b); break;
      case SG__KIR_P_SQRT: v[i] = sqrt(a); break;
      case SG__KIR_P_F32: v[i] = (float)a; break;
      case SG__KIR_P_PARAM: params[x->b] = (float)a, v[i] = 0; break;
      case SG__KIR_P_WRITE: *(float *)in[x->b] = (float)a, v[i] = 0; break;
      default: v[i] = 0; break; /* unreachable: finished kernels are checked */
    }
  }
}

sg_status sg__kir_finish(sg__kir_kernel *k) {
  if (k->error != SG_OK) return sg__error(k->error, "%s", k->error_msg);
  if (k->n_out == 0) return fail(k, SG_ERR_INVALID_ARG, "no output");
  uint32_t stored[SG__KIR_MAX_OUTPUTS] = {0};
  char why[256];
  for (uint32_t i = 0; i < k->n_ins; i++) {
    if (!check_instr(k, i, why, sizeof why)) return fail(k, SG_ERR_INVALID_ARG, "instruction %u: %s", i, why);
    if (k->ins[i].op == SG__KIR_STORE) stored[k->ins[i].b]++;
  }
  for (int i = 0, params = 0; i < k->n_pro; i++) {
    params += k->pro[i].op == SG__KIR_P_PARAM;
    if (!check_pro(k, i, params, why, sizeof why))
      return fail(k, SG_ERR_INVALID_ARG, "prologue %d: %s", i, why);
  }
  for (int o = 0; o < k->n_out; o++) {
    if (stored[o] != 1) return fail(k, SG_ERR_INVALID_ARG, "output %d is stored %u times", o, stored[o]);
    if (k->out_sum[o] && (k->sum == SG__KIR_SUM_NONE || k->out_over[o] >= 0))
      return fail(k, SG_ERR_INVALID_ARG, "output %d: a sum without a geometry, or in place", o);
  }
  return SG_OK;
}

bool sg__kir_input_contiguous(const sg__kir_kernel *k, int input) {
  int64_t s = 1;
  for (int d = k->ndim - 1; d >= 0; d--) {
    if (k->dims[d] != 1 && k->in[input].strides[d] != s) return false;
    s *= k->dims[d];
  }
  return true;
}

bool sg__kir_input_scalar(const sg__kir_kernel *k, int input) {
  for (int d = 0; d < k->ndim; d++)
    if (k->dims[d] != 1 && k->in[input].strides[d] != 0) return false;
  return true;
}
