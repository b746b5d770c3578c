/* The optimizer updates as generated kernels (docs/compiler.md, "Optimizer
 * updates"): sgd_update and adamw_update, each one kernel of the IR over its
 * parameter's elements, written over the parameter and its state in place,
 * with the per-step scalars (the learning rate read from its tensor, AdamW's
 * step count and bias corrections) in the kernel's prologue. The arithmetic
 * is cpu_optim.c's operation for operation -- the same f32 operations in
 * the same order, the scalars computed in double and rounded to f32 once --
 * so a generated update and the hand-written one agree bitwise. What the
 * generated one adds is the host's vector ISA: the library's kernels are
 * built for any x86-64, and the update's division and square root run one
 * element at a time there.
 *
 * The fusion pass gives each update a kernel of its own (a group of one op):
 * its inputs are the op's, its outputs are declared in place over the
 * parameter and the state, which the graph lists only as inputs. */
#include "compile/plan_internal.h"

enum { MOMENTUM, DAMPENING, WEIGHT_DECAY, NESTEROV };
enum { BETA1, BETA2, EPS, ADAM_WEIGHT_DECAY };
enum { PARAM, GRAD, LR, STATE0, STATE1, STEP };

#define C(v) sg__kir_const(k, SG_F32, (double)(float)(v))
#define ADD(a, b) sg__kir_binary(k, SG__KIR_ADD, (a), (b))
#define MUL(a, b) sg__kir_binary(k, SG__KIR_MUL, (a), (b))
#define DIV(a, b) sg__kir_binary(k, SG__KIR_DIV, (a), (b))
#define P(op, a, b) sg__kir_pro_op(k, SG__KIR_P_##op, (a), (b))

bool sg__fuse_update_rule(const sg_graph *g, const sg__op *op) {
  if (op->kind != SG_OP_SGD_UPDATE && op->kind != SG_OP_ADAMW_UPDATE) return false;
  for (int i = 0; i < op->n_inputs; i++)
    if (op->inputs[i] >= 0 && g->tensors[op->inputs[i]].dtype != SG_F32) return false;
  /* SGD with momentum and dampening takes the gradient itself as the buffer
   * on the session's first step (cpu_optim.c): a rule of the run, not of
   * the elements; that update keeps its own kernel. */
  if (op->kind == SG_OP_SGD_UPDATE && sg__attr_f(op, MOMENTUM) != 0 && sg__attr_f(op, DAMPENING) != 0)
    return false;
  return g->tensors[op->inputs[PARAM]].nbytes > 0;
}

/* p -= lr (g + wd p), with momentum: buf = momentum buf + (1 - dampening) d,
 * d = nesterov ? d + momentum buf : buf. */
static void sgd(sg__kir_kernel *k, const sg__op *op) {
  float wd = (float)sg__attr_f(op, WEIGHT_DECAY), mom = (float)sg__attr_f(op, MOMENTUM);
  int neg_lr = sg__kir_pro_param(k, P(MUL, sg__kir_pro_const(k, -1), sg__kir_pro_load(k, LR)));
  int p = sg__kir_load(k, PARAM), d = sg__kir_load(k, GRAD);
  if (wd != 0.0f) d = ADD(d, MUL(C(wd), p));
  if (mom != 0.0f) {
    int buf = ADD(MUL(sg__kir_load(k, STATE0), C(mom)), MUL(C(1.0 - sg__attr_f(op, DAMPENING)), d));
    sg__kir_set_inplace(k, sg__kir_store(k, buf), STATE0);
    d = sg__attr_i(op, NESTEROV) ? ADD(d, MUL(C(mom), buf)) : buf;
  }
  sg__kir_set_inplace(k, sg__kir_store(k, ADD(p, MUL(sg__kir_param(k, neg_lr), d))), PARAM);
}

/* step += 1 (kept in its tensor); p = p (1 - lr wd);
 * m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 * p += -(lr / (1 - b1^step)) m / (sqrt(v) / sqrt(1 - b2^step) + eps). */
static void adamw(sg__kir_kernel *k, const sg__op *op) {
  double b1 = sg__attr_f(op, BETA1), b2 = sg__attr_f(op, BETA2);
  int one = sg__kir_pro_const(k, 1), lr = sg__kir_pro_load(k, LR);
  int step = P(F32, P(ADD, sg__kir_pro_load(k, STEP), one), 0);
  sg__kir_pro_write(k, step, STEP);
  int bc1 = P(SUB, one, P(POW, sg__kir_pro_const(k, b1), step));
  int bc2 = P(SUB, one, P(POW, sg__kir_pro_const(k, b2), step));
  int decay =
      sg__kir_pro_param(k, P(SUB, one, P(MUL, lr, sg__kir_pro_const(k, sg__attr_f(op, ADAM_WEIGHT_DECAY)))));
  int neg_step = sg__kir_pro_param(k, P(MUL, sg__kir_pro_const(k, -1), P(DIV, lr, bc1)));
  int bc2_sqrt = sg__kir_pro_param(k, P(SQRT, bc2, 0));
  int p = sg__kir_load(k, PARAM), g = sg__kir_load(k, GRAD);
  int m = ADD(MUL(sg__kir_load(k, STATE0), C(b1)), MUL(g, C(1.0 - b1)));
  int v = ADD(MUL(sg__kir_load(k, STATE1), C(b2)), MUL(MUL(C(1.0 - b2), g), g));
  int denom = ADD(DIV(sg__kir_unary(k, SG__KIR_SQRT, v), sg__kir_param(k, bc2_sqrt)), C(sg__attr_f(op, EPS)));
  int pn = ADD(MUL(p, sg__kir_param(k, decay)), MUL(sg__kir_param(k, neg_step), DIV(m, denom)));
  sg__kir_set_inplace(k, sg__kir_store(k, m), STATE0);
  sg__kir_set_inplace(k, sg__kir_store(k, v), STATE1);
  sg__kir_set_inplace(k, sg__kir_store(k, pn), PARAM);
}

sg_status sg__fuse_update_kernel(const sg_graph *g, const sg__op *op, const char *name, sg__kir_kernel *k) {
  int64_t n = (int64_t)(g->tensors[op->inputs[PARAM]].nbytes / sizeof(float));
  sg__kir_init(k, name, 1, &n);
  /* The op's inputs in order (SGD's absent buffer is last): their numbers
   * are the op's. Scalars are read through stride 0. */
  for (int i = 0; i < op->n_inputs && op->inputs[i] >= 0; i++) {
    int64_t zero = 0;
    bool scalar = i == LR || (op->kind == SG_OP_ADAMW_UPDATE && i == STEP);
    sg__kir_input_add(k, SG_F32, scalar ? &zero : NULL);
  }
  if (op->kind == SG_OP_SGD_UPDATE) sgd(k, op);
  else adamw(k, op);
  return sg__kir_finish(k);
}
