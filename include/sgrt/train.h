/**
 * @file train.h
 * Turning a forward graph into a training graph: reverse-mode automatic
 * differentiation and optimizers as graph ops. The
 * compiled step is then forward, backward and update as one graph.
 *
 * A worked example: an MLP trained with SGD and momentum.
 *
 * @code
 *   #include <sgrt/sgrt.h>
 *
 *   sg_graph *g;
 *   if (sg_graph_create(&g) != SG_OK) return 1;
 *   int64_t xs[] = {32, 784}, ys[] = {32}, w1s[] = {128, 784}, w2s[] = {10, 128};
 *   sg_tensor x  = sg_input(g, "images", SG_F32, 2, xs);
 *   sg_tensor y  = sg_input(g, "labels", SG_I64, 1, ys);
 *   sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);  // fed every step
 *   sg_tensor w1 = sg_parameter(g, "fc1.weight", SG_F32, 2, w1s, w1_init);
 *   sg_tensor w2 = sg_parameter(g, "fc2.weight", SG_F32, 2, w2s, w2_init);
 *   sg_tensor h  = sg_relu(g, sg_linear(g, x, w1, SG_NO_TENSOR));
 *   sg_tensor loss = sg_cross_entropy(g, sg_linear(g, h, w2, SG_NO_TENSOR), y,
 *                                     SG_REDUCTION_MEAN);
 *   sg_tensor_set_name(g, loss, "loss");
 *   sg_graph_mark_output(g, loss);
 *
 *   // Appends the backward ops: "fc1.weight.grad" and "fc2.weight.grad".
 *   sg_graph_backward(g, loss);
 *   // Appends "fc1.weight.momentum_buffer", ... and one sgd_update per parameter.
 *   sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
 *   sgd.momentum = 0.9;
 *   sg_graph_add_sgd(g, lr, &sgd);
 *
 *   // Errors are sticky, as for every builder call: one check at the end.
 *   if (sg_graph_finalize(g) != SG_OK) {
 *     fprintf(stderr, "graph: %s\n", sg_last_error());
 *     sg_graph_destroy(g);
 *     return 1;
 *   }
 *   sg_tensor gw1;
 *   sg_graph_grad(g, w1, &gw1);  // the gradient tensor of fc1.weight
 * @endcode
 *
 * To read gradients after a step (for a gradient check, or to sync them
 * yourself), mark them as outputs before finalizing:
 * `sg_graph_grad(g, w1, &gw1); sg_graph_mark_output(g, gw1);`.
 *
 * Threads: like every builder call, these functions may be called from one
 * thread at a time per graph; sg_graph_grad() is a read-only query and may
 * run concurrently on a finalized graph. See docs/autodiff.md for the rules
 * per op and the names of everything these functions add.
 */
#ifndef SGRT_TRAIN_H
#define SGRT_TRAIN_H

#include "sgrt/graph.h"
#include "sgrt/ops.h"

SG_EXTERN_C_BEGIN

/**
 * Appends to `g` the ops that compute the gradient of `loss` with respect to
 * every parameter (role SG_ROLE_PARAMETER, float) that `loss` depends on
 * through differentiable inputs.
 *
 * - Only what is needed is computed: gradients flow only into tensors that
 *   depend on a parameter, so there is no gradient for a graph input (the
 *   first convolution gets no conv2d_backward_data) nor for labels, batch-norm
 *   running statistics, dropout masks, constants, state or integer tensors.
 * - The gradient of `loss` is seeded with a constant of ones named
 *   "<loss name>.grad_seed" (role SG_ROLE_CONSTANT).
 * - A tensor consumed by several ops gets the sum of their contributions
 *   (`add` ops, summed in op order).
 * - The gradient of parameter "w" is the tensor "w.grad" (role
 *   SG_ROLE_GRADIENT, shape and dtype of w); find it with sg_graph_grad().
 *   It is consumed by no other backward op, so it can be synchronized or
 *   updated as soon as it exists.
 * - Every tensor the backward pass produces has role SG_ROLE_GRADIENT, also
 *   the outputs of ordinary ops (gemm, mul, reshape, ...) it uses. An op it
 *   appends for forward op "F" is named "F/grad", "F/grad_1", ...; one that
 *   sums or copies the gradient of parameter "w" is named "w/grad", ...
 *   (docs/autodiff.md).
 *
 * @param g     a graph that is not finalized; the ops are appended to it.
 * @param loss  a float tensor of `g` with exactly one element (any rank).
 * @return SG_OK;
 *   SG_ERR_INVALID_ARG if `g` is NULL, `loss` is not a tensor of `g`, or
 *     `loss` depends on no parameter;
 *   SG_ERR_STATE if `g` is finalized (the graph is not changed);
 *   SG_ERR_SHAPE / SG_ERR_DTYPE if `loss` has more than one element or is
 *     not float (the message names it and its shape);
 *   SG_ERR_UNSUPPORTED if an op on the way from a parameter to `loss` has no
 *     gradient ("no gradient for op 'x' (kind)");
 *   SG_ERR_DUPLICATE if a name it must create ("w.grad") is taken (for
 *     instance when backward already ran);
 *   SG_ERR_NO_MEMORY;
 *   or the graph's first builder error if one was recorded before.
 *   Except for SG_ERR_STATE and a NULL graph, a failure is recorded on the
 *   graph like any builder error (sticky, reported again by
 *   sg_graph_finalize()). Arguments are validated before anything is
 *   appended.
 */
SG_API sg_status sg_graph_backward(sg_graph *g, sg_tensor loss);

/**
 * Finds the gradient of `param` computed by sg_graph_backward(): the tensor
 * named "<param name>.grad" with role SG_ROLE_GRADIENT and param's shape.
 * Works on finalized graphs and on graphs loaded from .sgg files.
 * @param grad receives the tensor; SG_NO_TENSOR on error.
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL argument; SG_ERR_RANGE if
 *   `param` is not a tensor of `g`; SG_ERR_NOT_FOUND if there is no such
 *   gradient (param does not affect the loss, or backward was not run).
 *   Never changes the graph. Any thread (read-only).
 */
SG_API sg_status sg_graph_grad(const sg_graph *g, sg_tensor param, sg_tensor *grad);

/**
 * Appends an SGD update (torch.optim.SGD semantics, see ops.h and
 * docs/ops.md) for every parameter that has a gradient ("<param>.grad"),
 * in tensor order. With momentum > 0 each parameter gets a state tensor "<param>.momentum_buffer" (role
 * SG_ROLE_OPTIMIZER_STATE, its shape and dtype) without an initializer: a session starts it at zero, and a
 * checkpoint stores its current value. Call it after sg_graph_backward(), once.
 *
 * @param g   a graph that is not finalized.
 * @param lr  the learning rate: a one-element f32 tensor of `g`, usually an
 *            input (role SG_ROLE_INPUT) so the schedule can change every step.
 * @param p   NULL for the defaults (SG_SGD_PARAMS_INIT: plain SGD).
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL graph, a bad `lr` id or a bad
 *   `p->size`; SG_ERR_SHAPE if `lr` is not one element of f32;
 *   SG_ERR_STATE if `g` is finalized, if no parameter has a gradient (run
 *   sg_graph_backward() first) or a parameter already has an update op;
 *   SG_ERR_DUPLICATE if a state name is taken; SG_ERR_ATTRIBUTE for
 *   out-of-range hyperparameters; SG_ERR_NO_MEMORY; or the graph's first
 *   builder error. Failures other than SG_ERR_STATE are recorded on the
 *   graph (sticky).
 */
SG_API sg_status sg_graph_add_sgd(sg_graph *g, sg_tensor lr, const sg_sgd_params *p);

/**
 * Appends an AdamW update (torch.optim.AdamW semantics) for every parameter
 * that has a gradient, in tensor order. Each parameter gets state like
 * PyTorch's (no initializer; a session starts it at zero): "<param>.exp_avg" and "<param>.exp_avg_sq" (its
 * shape and dtype) and "<param>.step" (a scalar f32: the number of updates done), all with role
 * SG_ROLE_OPTIMIZER_STATE.
 *
 * @param g, lr  as sg_graph_add_sgd().
 * @param p      NULL for the defaults (SG_ADAMW_PARAMS_INIT).
 * @return as sg_graph_add_sgd().
 */
SG_API sg_status sg_graph_add_adamw(sg_graph *g, sg_tensor lr, const sg_adamw_params *p);

SG_EXTERN_C_END

#endif /* SGRT_TRAIN_H */
