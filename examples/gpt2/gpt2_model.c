/* GPT-2 with the builder API (gpt2_model.h). The residual stream is kept as
 * [batch * seq, width] so that every linear layer is one gemm; attention
 * reshapes it to [batch, heads, seq, head_dim] for the batched matmuls. */
#include "gpt2_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpt2_preset(const char *name, gpt2_config *out) {
  gpt2_config c = {256, 64, 2, 4, 64, 4, 64, 0.0, 0, 0};
  if (name == NULL || out == NULL) return -1;
  if (strcmp(name, "tiny") == 0) {
  } else if (strcmp(name, "mini") == 0) {
    c.context = 256, c.layers = 6, c.heads = 6, c.width = 384;
  } else if (strcmp(name, "small") == 0) {
    c.vocab = 50257, c.context = 1024, c.layers = 12, c.heads = 12, c.width = 768;
  } else {
    return -1;
  }
  c.seq = c.context;
  *out = c;
  return 0;
}

int gpt2_configure(const char *name, int layers, int heads, int width, int context, int seq, gpt2_config *c,
                   char *err, size_t cap) {
  if (gpt2_preset(name, c) != 0) {
    snprintf(err, cap, "--preset '%s' is not tiny, mini or small", name);
    return -1;
  }
  if (layers) c->layers = layers;
  if (heads) c->heads = heads;
  if (width) c->width = width;
  if (context) c->context = c->seq = context;
  if (seq) c->seq = seq;
  return 0;
}

int gpt2_parse_attention(const char *name, int *fused, char *err, size_t cap) {
  if (name != NULL && (strcmp(name, "fused") == 0 || strcmp(name, "unfused") == 0)) {
    *fused = strcmp(name, "fused") == 0;
    return 0;
  }
  snprintf(err, cap, "--attention '%s' is not fused or unfused", name ? name : "");
  return -1;
}

int gpt2_check(const gpt2_config *c, char *err, size_t cap) {
  const struct {
    const char *name;
    int64_t v;
  } sizes[] = {{"vocab", c->vocab}, {"context", c->context}, {"layers", c->layers}, {"heads", c->heads},
               {"width", c->width}, {"batch", c->batch},     {"seq", c->seq}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (sizes[i].v < 1 || sizes[i].v > (int64_t)1 << 30) {
      snprintf(err, cap, "%s is %lld; it must be in [1, 2^30]", sizes[i].name, (long long)sizes[i].v);
      return -1;
    }
  if (c->width % c->heads != 0) {
    snprintf(err, cap, "width %lld is not a multiple of heads %lld", (long long)c->width,
             (long long)c->heads);
    return -1;
  }
  if (c->seq > c->context) {
    snprintf(err, cap, "seq %lld exceeds the context %lld", (long long)c->seq, (long long)c->context);
    return -1;
  }
  if (!(c->dropout >= 0 && c->dropout < 1)) {
    snprintf(err, cap, "dropout %g is not in [0, 1)", c->dropout);
    return -1;
  }
  return 0;
}

typedef struct builder {
  sg_graph *g;
  const gpt2_config *c;
  int64_t rows;      /* batch * seq */
  uint64_t dropouts; /* dropout layers so far: each gets its own seed */
  int init;          /* 1: every parameter gets gpt2_init_values(init_seed) as its initializer */
  uint64_t init_seed;
} builder;

static sg_tensor param(builder *b, const char *name, int ndim, const int64_t *dims) {
  if (!b->init) return sg_parameter(b->g, name, SG_F32, ndim, dims, NULL);
  sg_tensor_info info = {.name = name, .dtype = SG_F32, .role = SG_ROLE_PARAMETER, .ndim = ndim, .numel = 1};
  for (int i = 0; i < ndim; i++) info.dims[i] = dims[i], info.numel *= dims[i];
  info.nbytes = (size_t)info.numel * sizeof(float);
  float *v = malloc(info.nbytes);
  if (v == NULL || gpt2_init_values(&info, b->c->layers, b->init_seed, v) != 0) {
    free(v);
    return SG_NO_TENSOR; /* the graph's status then says which op lacks an input */
  }
  sg_tensor t = sg_parameter(b->g, name, SG_F32, ndim, dims, v);
  free(v);
  return t;
}

static sg_tensor linear(builder *b, const char *prefix, sg_tensor x, int64_t in, int64_t out) {
  char wn[128], bn[128];
  snprintf(wn, sizeof wn, "%s.weight", prefix);
  snprintf(bn, sizeof bn, "%s.bias", prefix);
  int64_t wd[] = {out, in}, bd[] = {out};
  return sg_linear(b->g, x, param(b, wn, 2, wd), param(b, bn, 1, bd));
}

static sg_tensor layer_norm(builder *b, const char *prefix, sg_tensor x) {
  char wn[128], bn[128];
  snprintf(wn, sizeof wn, "%s.weight", prefix);
  snprintf(bn, sizeof bn, "%s.bias", prefix);
  int64_t d[] = {b->c->width};
  return sg_layer_norm(b->g, x, param(b, wn, 1, d), param(b, bn, 1, d), -1, 1e-5);
}

/* The seed of the next dropout layer: the same sequence whichever form the attention takes, so the fused
 * and the unfused model draw the same masks. */
static uint64_t next_seed(builder *b) { return b->c->seed + 0x9E3779B97F4A7C15ull * ++b->dropouts; }

static sg_tensor dropout(builder *b, sg_tensor x) {
  if (b->c->dropout <= 0) return x;
  return sg_dropout(b->g, x, b->c->dropout, next_seed(b), 1);
}

/* Head h's columns of q, k or v from qkv [rows, 3 * width]: part 0, 1 or 2, as [batch, heads, seq, d]
 * (for the unfused attention k as [batch, heads, d, seq], ready for q @ k^T). */
static sg_tensor heads_of(builder *b, sg_tensor qkv, int part) {
  const gpt2_config *c = b->c;
  int64_t d = c->width / c->heads;
  sg_tensor x = sg_slice(b->g, qkv, 1, part * c->width, c->width);
  int64_t shape[] = {c->batch, c->seq, c->heads, d};
  x = sg_reshape(b->g, x, 4, shape);
  int64_t qv[] = {0, 2, 1, 3}, k[] = {0, 2, 3, 1};
  return sg_transpose(b->g, x, 4, part == 1 && !c->fused_attention ? k : qv);
}

/* Causal self-attention of block `prefix` on x [rows, width]. The mask is an additive constant: 0 on and
 * below the diagonal, -1e9 above (a finite value: exp gives an exact 0 after the row's max is taken off,
 * as PyTorch's -inf does, without infinities in the graph). */
static sg_tensor attention(builder *b, const char *prefix, sg_tensor x, sg_tensor mask) {
  const gpt2_config *c = b->c;
  char name[128];
  snprintf(name, sizeof name, "%s.c_attn", prefix);
  sg_tensor qkv = linear(b, name, x, c->width, 3 * c->width);
  sg_tensor q = heads_of(b, qkv, 0), k = heads_of(b, qkv, 1), v = heads_of(b, qkv, 2), y;
  if (c->fused_attention) { /* the scores are recomputed in backward, never kept; so are the masks */
    y = c->dropout > 0 ? sg_attention_dropout(b->g, q, k, v, 0.0, 1, c->dropout, next_seed(b))
                       : sg_attention(b->g, q, k, v, 0.0, 1);
  } else {
    sg_tensor att = sg_mul_scalar(b->g, sg_matmul(b->g, q, k), 1.0 / sqrt((double)(c->width / c->heads)));
    att = dropout(b, sg_softmax(b->g, sg_add(b->g, att, mask), -1));
    y = sg_matmul(b->g, att, v); /* [batch, heads, seq, d] */
  }
  int64_t perm[] = {0, 2, 1, 3}, rows[] = {b->rows, c->width};
  y = sg_reshape(b->g, sg_transpose(b->g, y, 4, perm), 2, rows);
  snprintf(name, sizeof name, "%s.c_proj", prefix);
  return linear(b, name, y, c->width, c->width);
}

static sg_tensor mlp(builder *b, const char *prefix, sg_tensor x) {
  const gpt2_config *c = b->c;
  char name[128];
  snprintf(name, sizeof name, "%s.c_fc", prefix);
  sg_tensor h = sg_gelu(b->g, linear(b, name, x, c->width, 4 * c->width), 1);
  snprintf(name, sizeof name, "%s.c_proj", prefix);
  return linear(b, name, h, 4 * c->width, c->width);
}

static sg_tensor causal_mask(builder *b) {
  int64_t T = b->c->seq, dims[] = {T, T};
  float *m = malloc((size_t)(T * T) * sizeof *m);
  if (m == NULL) return SG_NO_TENSOR;
  for (int64_t i = 0; i < T; i++)
    for (int64_t j = 0; j < T; j++) m[i * T + j] = j <= i ? 0.0f : -1e9f;
  sg_tensor t = sg_constant(b->g, "causal_mask", SG_F32, 2, dims, m);
  free(m);
  return t;
}

/* GPT-2 reading tokens, appended to b.g: the logits. */
static sg_status build(builder b, sg_tensor tokens, sg_tensor *logits) {
  sg_graph *g = b.g;
  const gpt2_config *c = b.c;
  int64_t wte_d[] = {c->vocab, c->width}, wpe_d[] = {c->context, c->width}, pos_d[] = {c->seq};
  sg_tensor wte = param(&b, "transformer.wte.weight", 2, wte_d);
  sg_tensor wpe = param(&b, "transformer.wpe.weight", 2, wpe_d);
  int64_t *pos = malloc((size_t)c->seq * sizeof *pos);
  if (pos == NULL) return SG_ERR_NO_MEMORY;
  for (int64_t i = 0; i < c->seq; i++) pos[i] = i;
  sg_tensor positions = sg_constant(g, "positions", SG_I64, 1, pos_d, pos);
  free(pos);
  /* [batch, seq, width] + [seq, width], then the stream as rows. */
  sg_tensor x = sg_add(g, sg_embedding(g, wte, tokens), sg_embedding(g, wpe, positions));
  int64_t rows[] = {b.rows, c->width};
  x = dropout(&b, sg_reshape(g, x, 2, rows));
  sg_tensor mask = c->fused_attention ? SG_NO_TENSOR : causal_mask(&b);
  for (int64_t l = 0; l < c->layers; l++) {
    char p[96], q[112];
    snprintf(p, sizeof p, "transformer.h.%lld", (long long)l);
    snprintf(q, sizeof q, "%s.ln_1", p);
    sg_tensor a = layer_norm(&b, q, x);
    snprintf(q, sizeof q, "%s.attn", p);
    x = sg_add(g, x, dropout(&b, attention(&b, q, a, mask)));
    snprintf(q, sizeof q, "%s.ln_2", p);
    sg_tensor m = layer_norm(&b, q, x);
    snprintf(q, sizeof q, "%s.mlp", p);
    x = sg_add(g, x, dropout(&b, mlp(&b, q, m)));
  }
  x = layer_norm(&b, "transformer.ln_f", x);
  sg_tensor head = wte; /* lm_head: the tied embedding */
  if (c->untied) {
    int64_t head_d[] = {c->vocab, c->width};
    head = param(&b, "lm_head.weight", 2, head_d);
  }
  *logits = sg_linear(g, x, head, SG_NO_TENSOR);
  return sg_graph_status(g);
}

static sg_status check_args(const char *fn, const gpt2_config *c) {
  char err[160];
  if (gpt2_check(c, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", fn, err);
    return SG_ERR_INVALID_ARG;
  }
  return SG_OK;
}

sg_status gpt2_build(sg_graph *g, const gpt2_config *c, sg_tensor tokens, sg_tensor *logits) {
  if (g == NULL || c == NULL || logits == NULL) return SG_ERR_INVALID_ARG;
  sg_status st = check_args("gpt2_build", c);
  if (st != SG_OK) return st;
  builder b = {g, c, c->batch * c->seq, 0, 0, 0};
  return build(b, tokens, logits);
}

sg_status gpt2_build_forward(const gpt2_config *c, uint64_t init_seed, sg_graph **out, sg_tensor *loss) {
  if (c == NULL || out == NULL || loss == NULL) return SG_ERR_INVALID_ARG;
  *out = NULL;
  sg_status st = check_args("gpt2_build_forward", c);
  sg_graph *g = NULL;
  if (st == SG_OK) st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t td[] = {c->batch, c->seq}, flat[] = {c->batch * c->seq};
  sg_tensor tokens = sg_input(g, "tokens", SG_I64, 2, td), targets = sg_input(g, "targets", SG_I64, 2, td);
  builder b = {g, c, c->batch * c->seq, 0, 1, init_seed};
  sg_tensor logits;
  st = build(b, tokens, &logits);
  if (st == SG_OK) st = sg_tensor_set_name(g, logits, "logits");
  if (st == SG_OK) {
    *loss = sg_cross_entropy(g, logits, sg_reshape(g, targets, 1, flat), SG_REDUCTION_MEAN);
    st = sg_tensor_set_name(g, *loss, "loss");
  }
  if (st == SG_OK) st = sg_graph_mark_output(g, *loss);
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

void gpt2_adamw_params(const gpt2_train_options *o, sg_adamw_params *out) {
  gpt2_train_options d = GPT2_TRAIN_OPTIONS_INIT;
  if (o == NULL) o = &d;
  *out = (sg_adamw_params)SG_ADAMW_PARAMS_INIT;
  out->beta1 = o->beta1, out->beta2 = o->beta2, out->eps = o->eps, out->weight_decay = o->weight_decay;
  out->decay_min_ndim = 2;
}

sg_status gpt2_build_training(const gpt2_config *c, const gpt2_train_options *o, sg_graph **out) {
  gpt2_train_options d = GPT2_TRAIN_OPTIONS_INIT;
  if (o == NULL) o = &d;
  if (c == NULL || out == NULL) return SG_ERR_INVALID_ARG;
  *out = NULL;
  sg_graph *g;
  sg_status st = sg_graph_create(&g);
  if (st != SG_OK) return st;
  int64_t td[] = {c->batch, c->seq}, flat[] = {c->batch * c->seq};
  sg_tensor tokens = sg_input(g, "tokens", SG_I64, 2, td);
  sg_tensor logits;
  st = gpt2_build(g, c, tokens, &logits);
  if (st == SG_OK) st = sg_tensor_set_name(g, logits, "logits");
  if (st == SG_OK && (o->mark_logits || !o->training)) st = sg_graph_mark_output(g, logits);
  if (st == SG_OK && o->training) {
    sg_tensor targets = sg_input(g, "targets", SG_I64, 2, td);
    sg_tensor lr = sg_input(g, "lr", SG_F32, 0, NULL);
    sg_tensor loss = sg_cross_entropy(g, logits, sg_reshape(g, targets, 1, flat), SG_REDUCTION_MEAN);
    st = sg_tensor_set_name(g, loss, "loss");
    if (st == SG_OK) st = sg_graph_mark_output(g, loss);
    if (st == SG_OK) st = sg_graph_backward(g, loss);
    for (int32_t i = 0; st == SG_OK && o->mark_grads && i < sg_graph_num_tensors(g); i++) {
      sg_tensor_info info;
      sg_tensor grad;
      if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
      if (sg_graph_grad(g, (sg_tensor){i}, &grad) == SG_OK) st = sg_graph_mark_output(g, grad);
    }
    sg_adamw_params ap;
    gpt2_adamw_params(o, &ap);
    if (st == SG_OK) st = sg_graph_add_adamw(g, lr, &ap);
  }
  if (st == SG_OK) st = sg_graph_finalize(g);
  if (st != SG_OK) {
    sg_graph_destroy(g);
    return st;
  }
  *out = g;
  return SG_OK;
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

int gpt2_init_values(const sg_tensor_info *info, int64_t layers, uint64_t seed, float *out) {
  if (info == NULL || out == NULL || info->dtype != SG_F32 || info->role != SG_ROLE_PARAMETER) return -1;
  uint64_t s = seed ^ 0x243F6A8885A308D3ull;
  for (const char *c = info->name; *c; c++) s = (s ^ (unsigned char)*c) * 1099511628211ull;
  int64_t n = info->numel;
  if (info->ndim == 2 && ends_with(info->name, ".weight")) {
    double std = ends_with(info->name, ".c_proj.weight") ? 0.02 / sqrt(2.0 * (double)layers) : 0.02;
    for (int64_t i = 0; i < n; i += 2) {
      double r = sqrt(-2.0 * log(uniform01(&s))), a = 6.283185307179586 * uniform01(&s);
      out[i] = (float)(std * r * cos(a));
      if (i + 1 < n) out[i + 1] = (float)(std * r * sin(a));
    }
    return 0;
  }
  float v;
  if (info->ndim == 1 && ends_with(info->name, ".bias")) v = 0.0f;
  else if (info->ndim == 1 && (strstr(info->name, ".ln_") != NULL) && ends_with(info->name, ".weight"))
    v = 1.0f;
  else return -1;
  for (int64_t i = 0; i < n; i++) out[i] = v;
  return 0;
}

sg_status gpt2_init_session(const sg_graph *g, sg_session *s, int64_t layers, uint64_t seed) {
  sg_status st = SG_OK;
  float *buf = NULL;
  size_t cap = 0;
  for (int32_t i = 0; st == SG_OK && i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_PARAMETER) continue;
    if (info.nbytes > cap) {
      float *nb = realloc(buf, info.nbytes);
      if (nb == NULL) {
        st = SG_ERR_NO_MEMORY;
        break;
      }
      buf = nb, cap = info.nbytes;
    }
    if (gpt2_init_values(&info, layers, seed, buf) != 0) {
      fprintf(stderr, "gpt2_init_session: no initial value for '%s'\n", info.name);
      st = SG_ERR_NOT_FOUND;
      break;
    }
    st = sg_session_write(s, info.name, buf, info.nbytes);
  }
  free(buf);
  return st;
}

int64_t gpt2_count_parameters(const sg_graph *g) {
  int64_t n = 0;
  for (int32_t i = 0; i < sg_graph_num_tensors(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) == SG_OK && info.role == SG_ROLE_PARAMETER)
      n += info.numel;
  }
  return n;
}
