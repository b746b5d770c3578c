/**
 * @file sgrt.h
 * sgrt: a runtime for static-graph distributed training. Include this one
 * header to get the whole public API.
 *
 * A worked example: build a two-layer MLP with a loss, save it, load it back.
 *
 * @code
 *   #include <sgrt/sgrt.h>
 *
 *   sg_graph *g;
 *   if (sg_graph_create(&g) != SG_OK) return 1;
 *   int64_t xs[] = {32, 784}, ys[] = {32}, w1s[] = {128, 784}, w2s[] = {10, 128};
 *   sg_tensor x  = sg_input(g, "images", SG_F32, 2, xs);
 *   sg_tensor y  = sg_input(g, "labels", SG_I64, 1, ys);
 *   sg_tensor w1 = sg_parameter(g, "fc1.weight", SG_F32, 2, w1s, NULL);
 *   sg_tensor w2 = sg_parameter(g, "fc2.weight", SG_F32, 2, w2s, NULL);
 *   sg_tensor h  = sg_relu(g, sg_linear(g, x, w1, SG_NO_TENSOR));
 *   sg_tensor loss = sg_cross_entropy(g, sg_linear(g, h, w2, SG_NO_TENSOR), y,
 *                                     SG_REDUCTION_MEAN);
 *   sg_tensor_set_name(g, loss, "loss");
 *   sg_graph_mark_output(g, loss);
 *   // Builder errors are sticky: one check at the end reports the first.
 *   if (sg_graph_finalize(g) != SG_OK) {
 *     fprintf(stderr, "graph: %s\n", sg_last_error());
 *     sg_graph_destroy(g);
 *     return 1;
 *   }
 *   sg_graph_save(g, "mlp.sgg");
 *   sg_graph_destroy(g);
 *
 *   sg_graph *h2;
 *   if (sg_graph_load("mlp.sgg", &h2) == SG_OK) {
 *     uint64_t hash;
 *     sg_graph_hash(h2, 0, &hash);   // same as the graph that was saved
 *     sg_graph_destroy(h2);
 *   }
 * @endcode
 */
#ifndef SGRT_SGRT_H
#define SGRT_SGRT_H

#include "sgrt/comm.h"
#include "sgrt/core.h"
#include "sgrt/dist.h"
#include "sgrt/gmem.h"
#include "sgrt/graph.h"
#include "sgrt/health.h"
#include "sgrt/onnx.h"
#include "sgrt/ops.h"
#include "sgrt/partition.h"
#include "sgrt/session.h"
#include "sgrt/sgg.h"
#include "sgrt/status.h"
#include "sgrt/train.h"

#endif /* SGRT_SGRT_H */
