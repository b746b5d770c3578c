/* C text common to the kernel IR's emitters (kir_emit.h). Semantics are
 * the reference kernels' (cpu_binary.c and friends): integer add/sub/mul
 * wrap through unsigned arithmetic, integer division is sgk_math.h's total
 * one, f32 max/min propagate NaN, casts from f32 to integers give 0 for NaN
 * and out-of-range values. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "backend/kir_emit.h"
#include "sgk_math_text.h" /* sgk_math_text: sgk_math.h as a string (src/CMakeLists.txt) */

const char *sg__kir_ctype(int dtype) {
  switch (dtype) {
    case SG_F32: return "float";
    case SG_I32: return "int32_t";
    case SG_I64: return "int64_t";
    default: return "uint8_t"; /* bool: 0 or 1 */
  }
}
static const char *utype(int dtype) { return dtype == SG_I32 ? "uint32_t" : "uint64_t"; }
static const char *suffix(int dtype) { return dtype == SG_I32 ? "32" : "64"; }

static void put_const(sg__strbuf *b, const sg__kir_instr *x) {
  if (x->dtype == SG_F32) {
    float f = (float)x->imm;
    if (isnan(f)) sg__strbuf_put(b, "SGK_NANF");
    else if (isinf(f)) sg__strbuf_put(b, "%sSGK_INFF", f < 0 ? "-" : "");
    else sg__strbuf_put(b, "%af", (double)f);
  } else if (x->dtype == SG_I64 && x->imm <= -9223372036854775808.0) {
    sg__strbuf_put(b, "INT64_MIN");
  } else if (x->dtype == SG_I32 && x->imm <= -2147483648.0) {
    sg__strbuf_put(b, "INT32_MIN");
  } else {
    sg__strbuf_put(b, "((%s)%" PRId64 "LL)", sg__kir_ctype(x->dtype), (int64_t)x->imm);
  }
}

void sg__kir_put_double(sg__strbuf *b, double x) {
  if (isnan(x)) sg__strbuf_put(b, "SGK_NAN");
  else if (isinf(x)) sg__strbuf_put(b, "%sSGK_INF", x < 0 ? "-" : "");
  else sg__strbuf_put(b, "%a", x);
}

static void put_cast(sg__strbuf *b, int to, int from, uint32_t a) {
  if (to == from) sg__strbuf_put(b, "v%u", a);
  else if (to == SG_BOOL) sg__strbuf_put(b, "(uint8_t)(v%u != 0)", a);
  else if (from == SG_F32 && to != SG_F32) sg__strbuf_put(b, "sgk_f2i%s(v%u)", suffix(to), a);
  else if (to == SG_I32 && from == SG_I64)
    sg__strbuf_put(b, "(int32_t)(uint32_t)(uint64_t)v%u", a); /* wraps */
  else sg__strbuf_put(b, "(%s)v%u", sg__kir_ctype(to), a);
}

/* The expression of instruction i (not LOAD, CONST, PARAM or STORE). */
static void put_expr(sg__strbuf *b, const sg__kir_kernel *k, uint32_t i) {
  const sg__kir_instr *x = &k->ins[i];
  uint32_t a = (uint32_t)x->a, c = (uint32_t)x->b, e = (uint32_t)x->c;
  int t = k->ins[a].dtype; /* operand dtype */
  bool f = t == SG_F32;
  const char *ct = sg__kir_ctype(t);
  switch ((sg__kir_op)x->op) {
    case SG__KIR_NEG:
      if (f) sg__strbuf_put(b, "-v%u", a);
      else sg__strbuf_put(b, "(%s)(0u - (%s)v%u)", ct, utype(t), a);
      return;
    case SG__KIR_ABS:
      if (f) sg__strbuf_put(b, "fabsf(v%u)", a);
      else sg__strbuf_put(b, "(v%u < 0 ? (%s)(0u - (%s)v%u) : v%u)", a, ct, utype(t), a, a);
      return;
    case SG__KIR_EXP: sg__strbuf_put(b, "sgk_expf(v%u)", a); return;
    case SG__KIR_LOG: sg__strbuf_put(b, "logf(v%u)", a); return;
    case SG__KIR_SQRT: sg__strbuf_put(b, "sqrtf(v%u)", a); return;
    case SG__KIR_RECIP: sg__strbuf_put(b, "(1.0f / v%u)", a); return;
    case SG__KIR_TANH: sg__strbuf_put(b, "sgk_tanhf(v%u)", a); return;
    case SG__KIR_ERF: sg__strbuf_put(b, "sgk_erff(v%u)", a); return;
    case SG__KIR_SIGMOID: sg__strbuf_put(b, "sgk_sigmoidf(v%u)", a); return;
    case SG__KIR_SIN: sg__strbuf_put(b, "sinf(v%u)", a); return;
    case SG__KIR_COS: sg__strbuf_put(b, "cosf(v%u)", a); return;
    case SG__KIR_ACOS: sg__strbuf_put(b, "acosf(v%u)", a); return;
    case SG__KIR_CAST: put_cast(b, x->dtype, t, a); return;
    case SG__KIR_NOT: sg__strbuf_put(b, "(uint8_t)!v%u", a); return;
    case SG__KIR_ADD:
    case SG__KIR_SUB:
    case SG__KIR_MUL: {
      char o = x->op == SG__KIR_ADD ? '+' : x->op == SG__KIR_SUB ? '-' : '*';
      if (f) sg__strbuf_put(b, "(v%u %c v%u)", a, o, c);
      else sg__strbuf_put(b, "(%s)((%s)v%u %c (%s)v%u)", ct, utype(t), a, o, utype(t), c);
      return;
    }
    case SG__KIR_DIV:
      if (f) sg__strbuf_put(b, "(v%u / v%u)", a, c);
      else sg__strbuf_put(b, "sgk_div%s(v%u, v%u)", suffix(t), a, c);
      return;
    case SG__KIR_MAX:
      if (f) sg__strbuf_put(b, "sgk_maxf(v%u, v%u)", a, c);
      else sg__strbuf_put(b, "(v%u > v%u ? v%u : v%u)", a, c, a, c);
      return;
    case SG__KIR_MIN:
      if (f) sg__strbuf_put(b, "sgk_minf(v%u, v%u)", a, c);
      else sg__strbuf_put(b, "(v%u < v%u ? v%u : v%u)", a, c, a, c);
      return;
    case SG__KIR_POW: sg__strbuf_put(b, "powf(v%u, v%u)", a, c); return;
    case SG__KIR_LT: sg__strbuf_put(b, "(uint8_t)(v%u < v%u)", a, c); return;
    case SG__KIR_LE: sg__strbuf_put(b, "(uint8_t)(v%u <= v%u)", a, c); return;
    case SG__KIR_EQ: sg__strbuf_put(b, "(uint8_t)(v%u == v%u)", a, c); return;
    case SG__KIR_AND: sg__strbuf_put(b, "(uint8_t)(v%u & v%u)", a, c); return;
    case SG__KIR_OR: sg__strbuf_put(b, "(uint8_t)(v%u | v%u)", a, c); return;
    case SG__KIR_SELECT: sg__strbuf_put(b, "(v%u ? v%u : v%u)", a, c, e); return;
    default: sg__strbuf_put(b, "0 /* unreachable */"); return;
  }
}

void sg__kir_put_value(sg__strbuf *b, const sg__kir_kernel *k, uint32_t i, const char *indent) {
  const sg__kir_instr *x = &k->ins[i];
  sg__strbuf_put(b, "%sconst %s v%u = ", indent, sg__kir_ctype(x->dtype), i);
  if (x->op == SG__KIR_CONST) put_const(b, x);
  else put_expr(b, k, i);
  sg__strbuf_put(b, ";\n");
}

void sg__kir_put_load(sg__strbuf *b, const sg__kir_kernel *k, uint32_t i, const char *indent,
                      const char *elem) {
  const sg__kir_instr *x = &k->ins[i];
  sg__strbuf_put(b, "%sconst %s v%u = ", indent, sg__kir_ctype(x->dtype), i);
  if (x->dtype == SG_BOOL) sg__strbuf_put(b, "(uint8_t)(%s != 0);\n", elem);
  else sg__strbuf_put(b, "%s;\n", elem);
}

void sg__kir_put_offset(sg__strbuf *b, const sg__kir_kernel *k, int j, int d0, int d1, const char *var) {
  int64_t inner = 1;
  bool any = false;
  int outer = d0; /* the first dim of more than one element: needs no modulo */
  while (outer < d1 && k->dims[outer] == 1) outer++;
  for (int d = d1 - 1; d >= d0; d--) {
    int64_t s = k->in[j].strides[d], len = k->dims[d];
    if (len != 1 && s != 0) {
      sg__strbuf_put(b, "%s", any ? " + " : "");
      any = true;
      if (inner == 1) {
        if (d == outer) sg__strbuf_put(b, "%s", var);
        else sg__strbuf_put(b, "(%s %% %" PRId64 ")", var, len);
      } else if (d == outer) {
        sg__strbuf_put(b, "(%s / %" PRId64 ")", var, inner);
      } else {
        sg__strbuf_put(b, "((%s / %" PRId64 ") %% %" PRId64 ")", var, inner, len);
      }
      if (s != 1) sg__strbuf_put(b, " * %" PRId64, s);
    }
    inner *= len;
  }
  if (!any) sg__strbuf_put(b, "0");
}

void sg__kir_plan_nest(const sg__kir_kernel *k, sg__kir_nest *n) {
  memset(n, 0, sizeof *n);
  n->split = k->ndim;
  n->inner = 1;
  bool first = true;
  for (int d = k->ndim - 1; d >= 0; d--) {
    int64_t len = k->dims[d];
    if (len == 1) {
      n->split = d; /* a dim of one element is walked by nobody */
      continue;
    }
    if (first) {
      for (int j = 0; j < k->n_in; j++) n->step[j] = k->in[j].strides[d];
      first = false;
    } else {
      for (int j = 0; j < k->n_in; j++)
        if (k->in[j].strides[d] != n->step[j] * n->inner) return;
    }
    n->inner *= len;
    n->split = d;
  }
}

bool sg__kir_merged_step(const sg__kir_kernel *k, int j, int d0, int d1, int64_t *step) {
  int64_t inner = 1, st = 0;
  bool first = true;
  for (int d = d1 - 1; d >= d0; d--) {
    int64_t len = k->dims[d], s = k->in[j].strides[d];
    if (len == 1) continue;
    if (first) st = s, first = false;
    else if (s != st * inner) return false;
    inner *= len;
  }
  *step = st;
  return true;
}

/* Whether a is b's prologue symbol, b + "_pro". */
static bool is_pro_of(const char *a, const char *b) {
  size_t l = strlen(b);
  return strncmp(a, b, l) == 0 && strcmp(a + l, "_pro") == 0;
}

sg_status sg__kir_emit_program(const sg__kir_kernel *const *kernels, int n, const char *who,
                               const char *prelude, bool pro_symbols, sg__kir_emit_fn emit, char **src,
                               size_t *len) {
  *src = NULL;
  *len = 0;
  for (int i = 0; i < n; i++) {
    const sg__kir_kernel *k = kernels[i];
    if (k->error != SG_OK || k->n_out == 0)
      return sg__error(SG_ERR_INVALID_ARG, "%s: kernel '%s' is not finished", who, k->name);
    for (int j = 0; j < i; j++) {
      const char *o = kernels[j]->name;
      if (strcmp(o, k->name) == 0)
        return sg__error(SG_ERR_DUPLICATE, "%s: two kernels are named '%s'", who, k->name);
      if (pro_symbols &&
          ((is_pro_of(o, k->name) && k->n_pro > 0) || (is_pro_of(k->name, o) && kernels[j]->n_pro > 0)))
        return sg__error(SG_ERR_DUPLICATE, "%s: kernels '%s' and '%s' clash (a prologue is NAME_pro)", who, o,
                         k->name);
    }
  }
  sg__strbuf b = {0};
  sg__strbuf_put(&b, "%s%s", prelude, sgk_math_text);
  for (int i = 0; i < n; i++) emit(&b, kernels[i]);
  if (b.failed) {
    sg__free(b.s);
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", who);
  }
  *src = b.s;
  *len = b.len;
  return SG_OK;
}
