/* The sample graphs behind the tests/data .sgg files, built through the public
 * builder API. Shared by the generator (gen_samples.c) and the tests, so that
 * a test can compare a committed file with a freshly built graph. */
#ifndef SG_SAMPLE_GRAPHS_H
#define SG_SAMPLE_GRAPHS_H

#include "sgrt/sgrt.h"

/* Each builds and finalizes one graph into *out. On failure the partial graph
 * is destroyed, *out is NULL and the builder's first error is returned (under
 * allocation-failure injection, SG_ERR_NO_MEMORY). */

/* MLP: x [8,64] f32, labels [8] i64 -> linear 64->32, relu, linear 32->10,
 * cross_entropy (mean) -> "loss"; SGD with momentum updates every parameter
 * from gradients fed as inputs ("<param>.grad") with a scalar f32 "lr". */
sg_status sample_build_mlp(sg_graph **out);

/* CNN: x [2,3,16,16] -> conv 3x3 pad 1 + batch_norm (training, running stats
 * of role STATE) + relu + max_pool 2 + conv 3x3 stride 2 groups 2 (no bias)
 * + global_avg_pool + flatten + linear -> cross_entropy "loss". */
sg_status sample_build_cnn(sg_graph **out);

/* Every op kind once or more, with non-default attributes of every type;
 * exercises the format, not a model. */
sg_status sample_build_zoo(sg_graph **out);

/* A single relu: the smallest useful graph (fuzzing seed). */
sg_status sample_build_tiny(sg_graph **out);

#endif
