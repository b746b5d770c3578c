/* ResNet-50 as torchvision 0.14 defines it (torchvision.models.resnet50),
 * built with sgrt's builder API: v1.5 (the stride sits on the bottleneck's
 * 3x3 convolution), bottlenecks [3, 4, 6, 3] with expansion 4, a 1x1
 * convolution + batch norm as downsample where the shape changes, global
 * average pooling and a linear classifier with bias.
 *
 * Tensor names are torchvision's state_dict keys ("conv1.weight",
 * "layer1.0.downsample.1.running_var", "fc.bias", ...), so weights can be
 * copied by name from a torchvision model or an ONNX export of one. The
 * batch-norm running statistics are state (SG_ROLE_STATE), not parameters;
 * torchvision's num_batches_tracked counters are not modelled (they only
 * matter when momentum is None). */
#ifndef RESNET50_MODEL_H
#define RESNET50_MODEL_H

#include <stdint.h>

#include <sgrt/sgrt.h>

typedef struct resnet50_config {
  int64_t batch;      /* N of the images input */
  int64_t image_size; /* H = W; >= 32 keeps layer4 at >= 1x1 */
  int64_t classes;    /* outputs of fc; torchvision's default is 1000 */
  /* torchvision's width_per_group: the bottleneck's inner width is
   * planes * width / 64. 64 is resnet50, 128 wide_resnet50_2. */
  int64_t width;
  int bn_training; /* 1: batch norm in training form (batch statistics) */
} resnet50_config;

#define RESNET50_CONFIG_INIT \
  { 8, 224, 1000, 64, 1 }

/* Appends ResNet-50 to `g`, reading `images` ([batch, 3, H, W] f32), and
 * returns the logits [batch, classes] through *logits. Parameters and
 * running statistics are created without initializers (a session starts
 * them at zero): set them with resnet50_init_session(), or copy trained
 * weights in with sg_session_write(). Errors are the builder's (sticky on
 * the graph); SG_ERR_INVALID_ARG for a bad configuration. */
sg_status resnet50_build(sg_graph *g, const resnet50_config *cfg, sg_tensor images, sg_tensor *logits);

/* The training graph of the examples: inputs "images" [batch, 3, H, W] f32,
 * "labels" [batch] i64 and "lr" (scalar f32), ResNet-50, mean cross-entropy
 * "loss" (a graph output; "logits" too when mark_logits), backward, and
 * `optimizer` "adamw" (AdamW defaults) or anything else: SGD with momentum
 * 0.9. Finalized; the caller destroys it. */
sg_status resnet50_build_training(const resnet50_config *cfg, const char *optimizer, int mark_logits,
                                  sg_graph **out);

/* torchvision's initial value of one tensor of a graph built by
 * resnet50_build(), by its name and shape: convolution weights
 * kaiming_normal_(mode="fan_out", nonlinearity="relu"), i.e. N(0, 2/fan_out)
 * with fan_out = out_channels * kh * kw; batch-norm weight 1 (0 for the
 * last batch norm of each bottleneck, "layer<i>.<j>.bn3.weight", as
 * torchvision's zero_init_residual=True: every block starts as the
 * identity and training is stable from the first step), bias 0,
 * running_mean 0, running_var 1; fc weight and bias U(-1/sqrt(in),
 * 1/sqrt(in)) (nn.Linear's default). Each tensor draws from its own stream,
 * seeded by `seed` and a hash of its name, so the values do not depend on
 * the order tensors are initialised in. `out` holds info->numel floats.
 * Returns 0, or -1 for a tensor it does not know. */
int resnet50_init_values(const sg_tensor_info *info, uint64_t seed, float *out);

/* Writes the initial value of every parameter and running statistic of `g`
 * into the compiled session `s` (sg_session_write). */
sg_status resnet50_init_session(const sg_graph *g, sg_session *s, uint64_t seed);

/* Number of parameter elements (role SG_ROLE_PARAMETER) of a graph:
 * torchvision's sum(p.numel() for p in model.parameters()). */
int64_t resnet50_count_parameters(const sg_graph *g);

#endif /* RESNET50_MODEL_H */
