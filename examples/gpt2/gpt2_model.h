/* GPT-2 (Radford et al. 2019) as nanoGPT and llm.c write it, built with
 * sgrt's builder API: token and position embeddings, `layers` pre-LayerNorm
 * blocks (causal self-attention with `heads` heads, an MLP 4x wide with GELU
 * in its tanh form), a final LayerNorm, and logits through the token
 * embedding itself (weight tying: the output projection is wte, so its
 * gradient is the sum of both uses).
 *
 * Tensor names are nanoGPT's state_dict keys ("transformer.wte.weight",
 * "transformer.h.0.attn.c_attn.weight", "transformer.ln_f.bias", ...;
 * linear weights [out, in] as nn.Linear keeps them), so weights can be
 * copied by name from a nanoGPT-style PyTorch module. lm_head.weight is not
 * a tensor of its own: it is transformer.wte.weight. */
#ifndef GPT2_MODEL_H
#define GPT2_MODEL_H

#include <stdint.h>

#include <sgrt/sgrt.h>

typedef struct gpt2_config {
  int64_t vocab;   /* 256 for bytes; GPT-2's tokenizer has 50257 */
  int64_t context; /* positions the model knows (rows of wpe) */
  int64_t layers, heads, width;
  int64_t batch, seq;  /* B and T of the tokens input; T <= context */
  double dropout;      /* on the attention weights and after each residual branch, 0 (default) for none */
  uint64_t seed;       /* the dropout masks' */
  int untied;          /* 1: the logits through a parameter of their own, "lm_head.weight" [vocab, width]
                          (GPT-2 ties them to transformer.wte.weight: 0, the default) */
  int fused_attention; /* 1: attention as the fused op (sg_attention: the T x T scores and dropout masks
                          recomputed in backward, never kept); 0: matmuls, an additive causal mask, softmax
                          and a dropout op (the same masks) */
} gpt2_config;

/* The presets: "tiny" (tests: 2 layers, 4 heads, width 64, context 64, bytes), "mini" (6 layers, 6
 * heads, width 384, context 256, bytes: the parity and benchmark model, 10.8 M parameters) and "small"
 * (GPT-2 small: 12 layers, 12 heads, width 768, context 1024, vocabulary 50257: 124,439,808 parameters).
 * batch 4 and seq = context. Returns 0, or -1 for an unknown name. */
int gpt2_preset(const char *name, gpt2_config *out);

/* The preset `name` with every size that is not 0 set over it (a context sets seq too unless seq is
 * given), for the examples' options. Returns 0, or -1 with a message in err for an unknown preset. */
int gpt2_configure(const char *name, int layers, int heads, int width, int context, int seq, gpt2_config *out,
                   char *err, size_t cap);

/* The attention of the examples' --attention option: "fused" (1) or "unfused" (0) into *fused. Returns 0,
 * or -1 with a message in err for another name. */
int gpt2_parse_attention(const char *name, int *fused, char *err, size_t cap);

/* Checks a configuration: every size positive, width divisible by heads, seq <= context. Returns 0, or
 * -1 with a message naming the field in err. */
int gpt2_check(const gpt2_config *cfg, char *err, size_t cap);

/* Appends GPT-2 to `g`, reading `tokens` ([batch, seq], i64 or i32 ids below vocab), and returns the
 * logits [batch * seq, vocab] through *logits. Parameters are created without initializers (a session
 * starts them at zero): set them with gpt2_init_session(), or copy weights in with sg_session_write().
 * Errors are the builder's (sticky on the graph); SG_ERR_INVALID_ARG for a bad configuration. */
sg_status gpt2_build(sg_graph *g, const gpt2_config *cfg, sg_tensor tokens, sg_tensor *logits);

typedef struct gpt2_train_options {
  double weight_decay;      /* AdamW's, on matrices and embeddings only (decay_min_ndim 2); default 0.1 */
  double beta1, beta2, eps; /* default 0.9, 0.95, 1e-8 (nanoGPT's betas) */
  int mark_logits;          /* 1: "logits" is a graph output */
  int mark_grads;           /* 1: every parameter's gradient is a graph output (parity checks) */
  int training;             /* 0: forward only ("logits" marked, no loss, no backward, no optimizer) */
} gpt2_train_options;
#define GPT2_TRAIN_OPTIONS_INIT \
  { 0.1, 0.9, 0.95, 1e-8, 0, 0, 1 }

/* The graph of the examples: inputs "tokens" and "targets" ([batch, seq] i64) and "lr" (scalar f32,
 * fed every step: warm-up and cosine decay are the caller's schedule), GPT-2, the mean cross-entropy
 * "loss" over every position (a graph output), backward, and AdamW with weight decay on the matrices and
 * embeddings only. Finalized; the caller destroys it. With opts->training 0: "tokens" and the "logits"
 * output only (sampling). */
sg_status gpt2_build_training(const gpt2_config *cfg, const gpt2_train_options *opts, sg_graph **out);

/* The forward graph of sg_dist_create_model (pipeline and tensor parallelism): inputs "tokens" and
 * "targets" ([batch, seq] i64), GPT-2 with every parameter's initial value (gpt2_init_values with
 * `init_seed`) as its initializer, so that whatever part of the model a rank builds starts from one
 * process's weights (the tensor-parallel rewrite slices the initializers of what it splits), and the mean
 * cross-entropy "loss" (a graph output). No "lr", backward or optimizer: sg_dist_create_model adds them to
 * each part. Finalized; the caller destroys it. Errors as gpt2_build_training's. */
sg_status gpt2_build_forward(const gpt2_config *cfg, uint64_t init_seed, sg_graph **out, sg_tensor *loss);

/* The AdamW of gpt2_build_training with `opts` (NULL: GPT2_TRAIN_OPTIONS_INIT): its betas, eps and weight
 * decay on the matrices and embeddings only (decay_min_ndim 2), for a job's sg_dist_optimizer. */
void gpt2_adamw_params(const gpt2_train_options *opts, sg_adamw_params *out);

/* nanoGPT's initial value of one parameter, by its name and shape: N(0, 0.02) for linear weights and
 * both embeddings, N(0, 0.02 / sqrt(2 * layers)) for each residual branch's output projection
 * ("*.c_proj.weight", GPT-2's scaled init), 0 for biases, 1 for LayerNorm weights. Each tensor draws
 * from its own stream, seeded by `seed` and a hash of its name. `out` holds info->numel floats. Returns
 * 0, or -1 for a tensor it does not know. */
int gpt2_init_values(const sg_tensor_info *info, int64_t layers, uint64_t seed, float *out);

/* Writes the initial value of every parameter of `g` into the compiled session `s`. */
sg_status gpt2_init_session(const sg_graph *g, sg_session *s, int64_t layers, uint64_t seed);

/* Number of parameter elements of a graph (tied weights counted once, as
 * sum(p.numel() for p in model.parameters()) does). */
int64_t gpt2_count_parameters(const sg_graph *g);

#endif /* GPT2_MODEL_H */
