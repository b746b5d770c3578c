/**
 * @file sgrt.h
 * sgrt: a runtime for static-graph distributed training. Include this one
 * header to get the whole public API; link -lsgrt (pkg-config sgrt, or CMake
 * find_package(sgrt) and sgrt::sgrt).
 *
 * The headers, in the order a program meets them:
 *
 *   status.h     sg_status, the per-thread sg_last_error(), sg_version()
 *   core.h       log level, the allocator, sg_free() for memory sgrt returns
 *   graph.h      the graph: tensors (dtype, static shape, role) and ops; queries,
 *                content hash, Graphviz DOT
 *   ops.h        the builder: one function per op (sg_conv2d, sg_linear, ...),
 *                shapes and dtypes inferred at each call
 *   sgg.h        save and load graphs in sgrt's own .sgg format
 *   onnx.h       import ONNX models (torchvision ResNets, MLPs)
 *   train.h      the backward pass (sg_graph_backward) and optimizers as ops
 *   devices.h    the devices a session runs on: cpu, the GPUs (cuda:N)
 *   session.h    compile a graph and run steps in one process
 *   cache.h      the on-disk compile cache: its entries, clearing them
 *   partition.h  split a graph over devices: METIS, pipeline stages, device
 *                tables, reports, tensor-parallel plans
 *   comm.h       communicators: bootstrap, collectives, RMA, liveness, hang
 *                diagnosis
 *   dist.h       training over ranks: data, pipeline and tensor parallelism,
 *                self-healing
 *   gmem.h       global memory: addresses, a page table, memory tiers
 *   offload.h    a session's optimizer state kept in a memory tier
 *   health.h     the health monitor, heartbeat payloads, QoS tiers, fault plans
 *
 * The path of a model:
 *
 *   graph     built with ops.h (or loaded with sgg.h, imported with onnx.h),
 *             then sg_graph_finalize(): verified and immutable
 *     -> train    a copy (sg_graph_clone) gets sg_graph_backward() and an
 *                 optimizer (sg_graph_add_sgd, sg_graph_add_adamw): forward,
 *                 backward and update are one graph
 *     -> session  sg_session_create + sg_session_compile plan memory and
 *                 kernels once; sg_session_step runs a training step
 *     -> parallel sg_dist_create_model() takes the forward graph and runs it
 *                 over ranks (data parallel by default; pipeline and tensor
 *                 parallel by degree), launched with `sgrt launch -n N`
 *
 * Conventions (docs/api.md has them in full):
 * - Every call that can fail returns sg_status (SG_OK is 0, errors are
 *   negative); sg_last_error() says what went wrong and where.
 * - Builder errors are sticky: a failing builder call returns SG_NO_TENSOR,
 *   later calls fail quietly, and sg_graph_finalize() returns the first error.
 * - Params structs start with `size_t size` and are initialised from their
 *   SG_X_PARAMS_INIT macro (or sg_X_params_init()); NULL means the defaults.
 *   A program built against an older, shorter struct gets the defaults for
 *   the fields it lacks. Output structs (reports, stats) also start with
 *   `size`, set by the caller, and are filled only up to it.
 * - Lifecycles are sg_X_create() / sg_X_destroy(); destroy accepts NULL.
 *   Memory sgrt hands to the caller is freed with sg_free().
 *
 * The worked example below trains a small MLP, first in one process, then
 * the same model with sg_dist; it is compiled and run as part of sgrt's
 * tests (as a job of one rank and under `sgrt launch -n 2`).
 *
 * @code
 * #include <stdio.h>
 * #include <stdlib.h>
 *
 * #include <sgrt/sgrt.h>
 *
 * enum { BATCH = 32, IN = 16, HIDDEN = 32, CLASSES = 4, STEPS = 30 };
 *
 * // Uniform numbers in [-scale/2, scale/2) from a seed (an LCG).
 * static void fill(float *v, int n, float scale, unsigned seed) {
 *   for (int i = 0; i < n; i++) {
 *     seed = seed * 1664525u + 1013904223u;
 *     v[i] = scale * ((float)(seed >> 8) / 16777216.0f - 0.5f);
 *   }
 * }
 *
 * // A toy task: a row's class is the position of its largest entry among the
 * // first CLASSES. `seed` picks the batch (a rank's shard).
 * static void make_batch(unsigned seed, float *x, int64_t *y) {
 *   fill(x, BATCH * IN, 1.0f, seed);
 *   for (int i = 0; i < BATCH; i++) {
 *     y[i] = 0;
 *     for (int j = 1; j < CLASSES; j++)
 *       if (x[i * IN + j] > x[i * IN + y[i]]) y[i] = j;
 *   }
 * }
 *
 * // The forward graph: x -> linear -> relu -> linear -> cross entropy with y.
 * static sg_status build_mlp(sg_graph **out, sg_tensor *loss) {
 *   static float w1[HIDDEN * IN], b1[HIDDEN], w2[CLASSES * HIDDEN], b2[CLASSES];
 *   fill(w1, HIDDEN * IN, 0.5f, 1);
 *   fill(w2, CLASSES * HIDDEN, 0.5f, 2);
 *   sg_graph *g;
 *   sg_status st = sg_graph_create(&g);
 *   if (st != SG_OK) return st;
 *   int64_t xs[] = {BATCH, IN}, ys[] = {BATCH}, w1s[] = {HIDDEN, IN}, b1s[] = {HIDDEN};
 *   int64_t w2s[] = {CLASSES, HIDDEN}, b2s[] = {CLASSES};
 *   sg_tensor x = sg_input(g, "x", SG_F32, 2, xs);
 *   sg_tensor y = sg_input(g, "y", SG_I64, 1, ys);
 *   sg_tensor h = sg_relu(g, sg_linear(g, x, sg_parameter(g, "fc1.weight", SG_F32, 2, w1s, w1),
 *                                      sg_parameter(g, "fc1.bias", SG_F32, 1, b1s, b1)));
 *   sg_tensor logits = sg_linear(g, h, sg_parameter(g, "fc2.weight", SG_F32, 2, w2s, w2),
 *                                sg_parameter(g, "fc2.bias", SG_F32, 1, b2s, b2));
 *   *loss = sg_cross_entropy(g, logits, y, SG_REDUCTION_MEAN);
 *   sg_tensor_set_name(g, *loss, "loss");
 *   sg_graph_mark_output(g, *loss);
 *   st = sg_graph_finalize(g); // builder errors are sticky: one check here
 *   if (st != SG_OK) {
 *     sg_graph_destroy(g);
 *     return st;
 *   }
 *   *out = g;
 *   return SG_OK;
 * }
 *
 * // One process: backward and SGD appended to a copy, then a session.
 * static sg_status train_alone(const sg_graph *fwd, sg_tensor loss) {
 *   sg_graph *g;
 *   sg_status st = sg_graph_clone(fwd, &g); // a finalized graph is immutable
 *   if (st != SG_OK) return st;
 *   sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
 *   sg_graph_backward(g, loss); // adds "fc1.weight.grad", ...
 *   sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
 *   sgd.momentum = 0.9;
 *   sg_graph_add_sgd(g, lr, &sgd); // one sgd_update op per parameter
 *   st = sg_graph_finalize(g);
 *   sg_session *s = NULL;
 *   if (st == SG_OK) st = sg_session_create(g, NULL, &s); // NULL: the default params
 *   if (st == SG_OK) st = sg_session_compile(s);
 *   float x[BATCH * IN], rate = 0.2f, value = 0;
 *   int64_t y[BATCH], xd[] = {BATCH, IN}, yd[] = {BATCH};
 *   for (int step = 0; st == SG_OK && step < STEPS; step++) {
 *     make_batch((unsigned)step, x, y);
 *     sg_session_set_input(s, "x", SG_F32, 2, xd, x);
 *     sg_session_set_input(s, "y", SG_I64, 1, yd, y);
 *     sg_session_set_input(s, "lr", SG_F32, 0, NULL, &rate);
 *     st = sg_session_step(s); // forward, backward and update
 *     if (st == SG_OK) st = sg_session_read(s, "loss", &value, sizeof value);
 *     if (st == SG_OK && step % 10 == 0) printf("alone: step %d loss %.4f\n", step, value);
 *   }
 *   sg_session_destroy(s);
 *   sg_graph_destroy(g);
 *   return st;
 * }
 *
 * // The same model, data parallel: run the program once per rank with
 * // `sgrt launch -n 4 ./example`; started alone, it is a job of one rank.
 * static sg_status train_distributed(const sg_graph *fwd, sg_tensor loss) {
 *   sg_comm_params cp = SG_COMM_PARAMS_INIT; // rank, size, master: from the environment
 *   if (getenv("SG_WORLD_SIZE") == NULL && getenv("WORLD_SIZE") == NULL) {
 *     cp.rank = 0; // not launched: a world of one
 *     cp.world_size = 1;
 *   }
 *   sg_dist_params dp = SG_DIST_PARAMS_INIT;
 *   dp.comm = &cp;
 *   dp.threads = 1;
 *   sg_sgd_params sgd = SG_SGD_PARAMS_INIT;
 *   sgd.momentum = 0.9;
 *   sg_dist_optimizer opt = SG_DIST_OPTIMIZER_INIT; // SGD; the learning rate is the input "lr"
 *   opt.sgd = &sgd;
 *   sg_dist *d;
 *   // Collective (every rank calls it): copies the graph, appends backward and
 *   // the optimizer, compiles, and checks that every rank has the same model.
 *   sg_status st = sg_dist_create_model(fwd, loss, &opt, &dp, &d);
 *   if (st != SG_OK) return st;
 *   float x[BATCH * IN], rate = 0.2f;
 *   int64_t y[BATCH], xd[] = {BATCH, IN}, yd[] = {BATCH};
 *   for (int step = 0; st == SG_OK && step < STEPS; step++) {
 *     make_batch((unsigned)(1000 * step + sg_dist_rank(d)), x, y); // this rank's shard
 *     sg_dist_set_input(d, "x", SG_F32, 2, xd, x);
 *     sg_dist_set_input(d, "y", SG_I64, 1, yd, y);
 *     sg_dist_set_input(d, "lr", SG_F32, 0, NULL, &rate);
 *     st = sg_dist_step(d); // gradients averaged over the ranks before the update
 *     sg_dist_stats stats = SG_DIST_STATS_INIT;
 *     if (st == SG_OK) st = sg_dist_get_stats(d, &stats);
 *     if (st == SG_OK && step % 10 == 0 && sg_dist_rank(d) == 0)
 *       printf("rank 0 of %d: step %d loss %.4f (mean over the ranks)\n", sg_dist_size(d), step,
 *              stats.loss_mean);
 *   }
 *   sg_status end = sg_dist_destroy(d); // collective unless the job failed
 *   return st != SG_OK ? st : end;
 * }
 *
 * int main(void) {
 *   sg_graph *fwd = NULL;
 *   sg_tensor loss;
 *   sg_status st = build_mlp(&fwd, &loss);
 *   if (st == SG_OK) st = train_alone(fwd, loss);
 *   if (st == SG_OK) st = train_distributed(fwd, loss);
 *   if (st != SG_OK) fprintf(stderr, "%s: %s\n", sg_status_str(st), sg_last_error());
 *   sg_graph_destroy(fwd);
 *   return st == SG_OK ? 0 : 1;
 * }
 * @endcode
 */
#ifndef SGRT_SGRT_H
#define SGRT_SGRT_H

#include "sgrt/cache.h"
#include "sgrt/comm.h"
#include "sgrt/core.h"
#include "sgrt/devices.h"
#include "sgrt/dist.h"
#include "sgrt/gmem.h"
#include "sgrt/graph.h"
#include "sgrt/health.h"
#include "sgrt/offload.h"
#include "sgrt/onnx.h"
#include "sgrt/ops.h"
#include "sgrt/partition.h"
#include "sgrt/session.h"
#include "sgrt/sgg.h"
#include "sgrt/status.h"
#include "sgrt/train.h"

#endif /* SGRT_SGRT_H */
