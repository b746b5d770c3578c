/* Helpers of the ONNX tests against PyTorch (test_onnx_transformer.c,
 * test_onnx_dynamo.c): the committed models and references under
 * tests/data/onnx, and the parity check of a transformer export: PyTorch's
 * logits, every parameter's gradient and the losses of three SGD steps. */
#ifndef SG_TEST_ONNX_PARITY_H
#define SG_TEST_ONNX_PARITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgrt/sgrt.h"

/* tests/data/onnx/NAME (a static buffer, overwritten by the next call). */
const char *onnx_test_path(const char *name);
/* The whole file tests/data/onnx/NAME, which must hold `bytes` bytes. */
void *onnx_test_read(const char *name, size_t bytes);
/* tests/data/onnx/NAME imported with the default params (must succeed). */
sg_graph *onnx_test_import(const char *name);
/* The same with sg_onnx_params.dims (NULL-terminated "NAME=SIZE"; NULL: none). */
sg_graph *onnx_test_import_dims(const char *name, const char *const *dims);
/* A compiled session on 2 threads. */
sg_session *onnx_test_session(const sg_graph *g);
int onnx_test_count_ops(const sg_graph *g, sg_op_kind kind);
/* SG_TEST_VERBOSE is set: print the figures. */
bool onnx_test_verbose(void);
/* Relative L2 error of got against ref. */
double onnx_rel_l2(const float *got, const float *ref, size_t n);

typedef struct transformer_case {
  const char *file, *ref; /* the export; PyTorch's logits, gradients, losses */
  const char *input;
  sg_dtype dtype;
  int ndim;
  int64_t dims[3];
  const void *x;
  const char *input2; /* a second input, or NULL */
  sg_dtype dtype2;
  int ndim2;
  int64_t dims2[4];
  const void *x2;
  const int64_t *labels;
  int64_t rows, classes; /* the logits seen as [rows, classes] */
  int n_params;          /* PyTorch's named_parameters() */
  size_t n_weights;      /* their elements */
  /* The import's parameters are not PyTorch's by name (an optimised dynamo
   * export stores weights folded and renamed): the gradients are not
   * compared one by one; the logits, count and losses still are. */
  bool no_gradients;
  /* The output holding the logits; NULL: "logits". */
  const char *output;
  /* Pairs {import's name, PyTorch's name}, NULL-terminated, for parameters
   * the export names otherwise (a tied weight written under its other
   * name): the reference orders gradients by PyTorch's names. */
  const char *const *renames;
  /* sg_onnx_params.dims of the import (symbolic dims by name), or NULL. */
  const char *const *sym_dims;
} transformer_case;

#define MAX_PARAMS 64

/* A graph input for onnx_forward_matches. */
typedef struct onnx_input {
  const char *name;
  sg_dtype dtype;
  int ndim;
  int64_t dims[4];
  const void *data;
} onnx_input;

/* The forward output `output` of g on the inputs against tests/data/onnx/
 * ref_file (n floats): max |diff| <= 1e-5. */
void onnx_forward_matches(const sg_graph *g, int n_inputs, const onnx_input *inputs, const char *output,
                          const char *ref_file, size_t n);

/* A forward pass of g on the inputs, then each named float32 output against ref_file (the outputs'
 * values in order, counts[i] floats each, none over 512): relative error to max(1, |ref|) <= tol,
 * else the test fails naming the output and element. `what` names the model in messages. */
void onnx_outputs_match(const sg_graph *g, const char *what, int n_inputs, const onnx_input *inputs, int n,
                        const char *const *names, const size_t *counts, const char *ref_file, double tol);

/* Files that must be refused with a status and words in the message. */
typedef struct onnx_refusal {
  const char *file;
  sg_status st;
  const char *needle;
} onnx_refusal;

/* Imports each file of bad[] (default params) and checks its refusal. */
void onnx_expect_refusals(const onnx_refusal *bad, size_t n);

/* The parity of k's export with PyTorch's reference file (k->ref: the
 * logits [rows, classes], the gradients in sorted-name order, 3 losses):
 * logits max |diff| <= 1e-5, each gradient relative L2 <= 1e-4, each loss
 * relative <= 1e-4 (cross entropy, SGD lr 0.1, momentum 0.9). */
void transformer_parity(const transformer_case *k);

#endif
