/**
 * @file onnx.h
 * ONNX import: turns the models that `torch.onnx.export` writes for
 * torchvision's ResNet family and for plain MLPs into a finalized sgrt graph.
 *
 * Both export forms are understood: inference exports (`model.eval()`, batch
 * norm usually folded into the convolutions) and training exports
 * (`training=torch.onnx.TrainingMode.TRAINING`, `do_constant_folding=False`),
 * whose BatchNormalization nodes update their running statistics. Float
 * initializers become parameters (role SG_ROLE_PARAMETER), batch-norm running
 * statistics become state (SG_ROLE_STATE), constants become constants;
 * tensors keep their ONNX names and graph outputs are marked outputs.
 * Shape computations that exporters emit (Shape, Gather, Unsqueeze, Concat,
 * ...) are folded at import time, since every shape is static in sgrt.
 * PyTorch 2's default exporter (dynamo) is read too: its external data file
 * (`<model>.onnx.data`, found next to the model) and the metadata that says
 * which of its initializers are weights (docs/onnx.md "PyTorch 2 exports").
 * docs/onnx.md lists every supported op with its attributes.
 *
 * A worked example: import an exported ResNet, then make a training graph.
 *
 * @code
 *   sg_onnx_params p = SG_ONNX_PARAMS_INIT;
 *   p.batch = 32;  // the value of the symbolic batch dim ("batch_size")
 *   sg_graph *net;
 *   if (sg_onnx_import("resnet50.onnx", &p, &net) != SG_OK) {
 *     fprintf(stderr, "import: %s\n", sg_last_error());
 *     return 1;
 *   }
 *   sg_graph *g;                    // the import is finalized: copy it to edit
 *   sg_graph_clone(net, &g);
 *   sg_graph_destroy(net);
 *   sg_tensor logits, labels, lr;
 *   sg_graph_find_tensor(g, "logits", &logits);
 *   int64_t n = 32;
 *   labels = sg_input(g, "labels", SG_I64, 1, &n);
 *   lr = sg_input(g, "lr", SG_F32, 0, NULL);
 *   sg_tensor loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
 *   sg_tensor_set_name(g, loss, "loss");
 *   sg_graph_mark_output(g, loss);
 *   sg_graph_backward(g, loss);
 *   sg_graph_add_sgd(g, lr, NULL);
 *   if (sg_graph_finalize(g) != SG_OK) { fprintf(stderr, "%s\n", sg_last_error()); return 1; }
 * @endcode
 *
 * Threads: imports may run concurrently on different threads; each builds its
 * own graph.
 */
#ifndef SGRT_ONNX_H
#define SGRT_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "sgrt/graph.h"

SG_EXTERN_C_BEGIN

/** Value of sg_onnx_params.training: follow what the file says. */
#define SG_ONNX_TRAINING_AS_EXPORTED (-1)

/** Options of sg_onnx_import(). Initialise with SG_ONNX_PARAMS_INIT or
 * sg_onnx_params_init() so that fields added later get their defaults. */
typedef struct sg_onnx_params {
  size_t size; /**< sizeof(sg_onnx_params) */
  /** Value for symbolic dims (dim_param or unset dims of graph inputs), such
   * as the batch dim of an export with dynamic_axes, that `dims` does not
   * name. 0 (the default): such a dim is an error (SG_ERR_SHAPE naming the
   * input, the dim and its name). */
  int64_t batch;
  /** Form of BatchNormalization and Dropout nodes.
   * 1: training form: batch norm normalises with batch statistics and updates
   *    its running statistics (role SG_ROLE_STATE) in place; dropout is on.
   *    Use it for training exports, and to train an inference export.
   * 0: inference form: batch norm uses the running statistics (still
   *    imported as SG_ROLE_STATE, so checkpoints keep them); dropout is off.
   * SG_ONNX_TRAINING_AS_EXPORTED (-1, the default): per node, as exported
   *    (BatchNormalization's training_mode, or in opsets before 14 its extra
   *    outputs; Dropout's training_mode input, or before opset 12 its mask
   *    output). */
  int training;
  /** Names of FLOAT initializers to import as constants (never trained), as
   * a NULL-terminated array; NULL (the default) for none. For buffers that
   * arithmetic reads, which the file cannot tell from weights: a rotary
   * embedding's cos/sin tables, a sinusoidal positional encoding, ALiBi's
   * slopes (docs/onnx.md "Tensors"). A name that is no initializer of the
   * model is SG_ERR_NOT_FOUND; a batch norm's running statistic is
   * SG_ERR_INVALID_ARG. The array is read during the import only. */
  const char *const *constants;
  /** Sizes of symbolic dims by name, as "NAME=SIZE" strings in a
   * NULL-terminated array (as onnxruntime's free-dimension overrides by
   * name); NULL (the default) for none. For exports with more than one
   * symbol, such as dynamic batch and sequence:
   * `{"batch=4", "seq=256", NULL}`. Every graph-input dim whose dim_param is
   * NAME gets SIZE; `batch` sizes the rest. An entry that is not NAME=SIZE
   * (split at the last '='), a SIZE outside 1..2^56, a name given twice or
   * more than 64 entries is SG_ERR_INVALID_ARG; a NAME that no graph input
   * has is SG_ERR_NOT_FOUND (listing those it has; sg_onnx_symbolic_dims()
   * lists them too). The array is read during the import only. */
  const char *const *dims;
} sg_onnx_params;

#define SG_ONNX_PARAMS_INIT \
  { sizeof(sg_onnx_params), 0, SG_ONNX_TRAINING_AS_EXPORTED, NULL, NULL }

/** The defaults, for bindings that cannot use the macro (ctypes). Any thread. */
SG_API sg_onnx_params sg_onnx_params_init(void);

/**
 * Imports an ONNX model file (a serialized ModelProto, opsets 7 to 20, the
 * default domain only) into a new graph. Initializers kept in external data
 * files are read from the model's folder (the location must stay inside it).
 *
 * Every byte is validated: the protobuf wire format, then every node, its
 * attributes and inputs, every initializer's type, shape and data size, and
 * finally the whole graph is verified and finalized. Nodes may be listed in
 * any order (they are sorted topologically). Error messages name the node
 * (its name and op_type) or the tensor, and what is wrong with it.
 *
 * @param path  file to read (not kept open).
 * @param p     options; NULL for the defaults (SG_ONNX_PARAMS_INIT).
 * @param out   receives a finalized graph owned by the caller (free it with
 *              sg_graph_destroy()); NULL on failure. To add a loss, backward
 *              pass or optimizer, edit a copy made with sg_graph_clone().
 * @return SG_OK;
 *   SG_ERR_INVALID_ARG for a NULL path or out, or a bad p->size / p->batch /
 *     p->training / p->dims entry;
 *   SG_ERR_IO if the file (or an external data file) cannot be opened,
 *     mapped or read;
 *   SG_ERR_FORMAT for malformed protobuf, a malformed model (no graph, no
 *     opset, an initializer whose data size does not match its shape, an
 *     external data location outside the model's folder or a range past the
 *     file's end, ...);
 *   SG_ERR_TRUNCATED if the protobuf ends inside a field;
 *   SG_ERR_UNSUPPORTED for an op, attribute value, data type or opset this
 *     importer does not handle (the message names the op_type and the node);
 *   SG_ERR_NOT_FOUND for a node input or graph output that no node,
 *     initializer or graph input provides, or a p->constants or p->dims name
 *     that the model lacks;
 *   SG_ERR_CYCLE if the nodes form a cycle;
 *   SG_ERR_DUPLICATE if two nodes (or a node and an initializer) produce the
 *     same tensor name;
 *   SG_ERR_SHAPE for a symbolic dim that neither p->dims nor p->batch sizes, or shapes that do not
 *     fit an op (the message names the node and the shapes);
 *   SG_ERR_RANGE for absurd sizes (rank over 8, more than 2^56 elements,
 *     protobuf nested too deeply, folded constants over the import limit);
 *   SG_ERR_NO_MEMORY;
 *   or another verifier error (SG_ERR_DTYPE, SG_ERR_ATTRIBUTE, ...).
 *   sg_last_error() has the details.
 * Threads: any thread; see the file comment.
 */
SG_API sg_status sg_onnx_import(const char *path, const sg_onnx_params *p, sg_graph **out);

/**
 * As sg_onnx_import(), from a serialized ModelProto in memory. The buffer is
 * only read during the call (the graph copies what it keeps); the caller
 * keeps ownership. A model with external data has no folder to find it in:
 * SG_ERR_UNSUPPORTED (import it by path).
 * @return as sg_onnx_import(), without SG_ERR_IO; SG_ERR_INVALID_ARG for
 *   NULL data with a nonzero size.
 */
SG_API sg_status sg_onnx_import_from_memory(const void *data, size_t size, const sg_onnx_params *p,
                                            sg_graph **out);

/** A symbolic dim of an ONNX graph input: a dim_param (dynamic_axes' "batch"), or a dim without a
 * value. sg_onnx_params.dims gives named ones their size at import, and .batch all the others. */
typedef struct sg_onnx_symbolic_dim {
  char input[256]; /**< the graph input's name (cut to 255 bytes) */
  int dim;         /**< which dim */
  char name[64];   /**< its dim_param (cut to 63 bytes); "" when the dim has neither value nor name */
} sg_onnx_symbolic_dim;

/**
 * Lists the symbolic dims of the graph inputs of the ONNX model at `path`
 * (initializers listed as inputs left out), so that a tool can size them (from
 * the data it will feed, say) or report them, before importing. The file is
 * read and checked as sg_onnx_import() reads it, not converted.
 * @param out    room for `cap` entries (NULL with cap 0: count only)
 * @param count  receives how many symbolic dims there are (may exceed cap; the
 *               first cap are written)
 * @return SG_OK; SG_ERR_INVALID_ARG for a NULL path or count, or NULL out with
 *   cap > 0; SG_ERR_IO, SG_ERR_FORMAT, SG_ERR_NO_MEMORY as sg_onnx_import().
 */
SG_API sg_status sg_onnx_symbolic_dims(const char *path, sg_onnx_symbolic_dim *out, size_t cap,
                                       size_t *count);

SG_EXTERN_C_END

#endif /* SGRT_ONNX_H */
