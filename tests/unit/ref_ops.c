/* Double-precision reference of every op kind (see ref_ops.h). Naive loops
 * written from docs/ops.md and PyTorch's definitions; nothing here calls a
 * backend or shares code with one. */
#include "ref_ops.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct tinfo {
  sg_dtype dtype;
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  int64_t numel;
} tinfo;

typedef struct rctx {
  const sg_graph *g;
  int32_t op;
  sg_op_info info;
  tinfo in[64], out[4];
  double *const *x; /* inputs */
  double *const *y; /* outputs */
  int train;
  uint64_t step, seed;
} rctx;

static void tget(const sg_graph *g, int32_t id, tinfo *t) {
  sg_tensor_info ti;
  memset(t, 0, sizeof *t);
  if (id < 0 || sg_graph_tensor_info(g, (sg_tensor){id}, &ti) != SG_OK) return;
  t->dtype = ti.dtype;
  t->ndim = ti.ndim;
  memcpy(t->dims, ti.dims, sizeof t->dims);
  t->numel = ti.numel;
}

static sg_attr attr(const rctx *c, int i) {
  sg_attr a;
  memset(&a, 0, sizeof a);
  sg_graph_op_attr(c->g, c->op, i, &a);
  return a;
}
static int64_t ai(const rctx *c, int i) { return attr(c, i).i; }
static double af(const rctx *c, int i) { return attr(c, i).f; }
static const int64_t *aints(const rctx *c, int i) { return attr(c, i).ints; }
static int acount(const rctx *c, int i) { return attr(c, i).count; }

static int norm_axis(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

static int64_t prod(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

/* Offset in a tensor of shape (nd, d), broadcast NumPy-style to (ndo, dout),
 * of the output element with multi-index idx. */
static int64_t bcast_off(int ndo, const int64_t *idx, int nd, const int64_t *d) {
  int64_t off = 0;
  for (int i = 0; i < nd; i++) {
    int64_t j = idx[ndo - nd + i];
    off = off * d[i] + (d[i] == 1 ? 0 : j);
  }
  return off;
}

static void unravel(int64_t flat, int nd, const int64_t *d, int64_t *idx) {
  for (int i = nd - 1; i >= 0; i--) {
    idx[i] = flat % d[i];
    flat /= d[i];
  }
}

/* ---- convolution ---------------------------------------------------------- */

typedef struct convp {
  int64_t N, C, H, W, K, R, S, OH, OW, G, sh, sw, pt, pl, dh, dw;
} convp;

static void conv_params(const rctx *c, const int64_t *x, const int64_t *w, const int64_t *y, convp *p) {
  const int64_t *st = aints(c, 0), *pad = aints(c, 1), *dil = aints(c, 2);
  *p = (convp){x[0], x[1],     x[2],  x[3],  w[0],   w[2],   w[3],   y[2],
               y[3], ai(c, 3), st[0], st[1], pad[0], pad[1], dil[0], dil[1]};
}

/* Calls f for every (x, w, y) index triple the convolution connects. */
#define CONV_LOOP(p, BODY)                                                                 \
  for (int64_t n = 0; n < p.N; n++)                                                        \
    for (int64_t k = 0; k < p.K; k++)                                                      \
      for (int64_t oh = 0; oh < p.OH; oh++)                                                \
        for (int64_t ow = 0; ow < p.OW; ow++) {                                            \
          int64_t cg = p.C / p.G, grp = k / (p.K / p.G);                                   \
          int64_t yi = ((n * p.K + k) * p.OH + oh) * p.OW + ow;                            \
          for (int64_t cc = 0; cc < cg; cc++)                                              \
            for (int64_t r = 0; r < p.R; r++)                                              \
              for (int64_t s = 0; s < p.S; s++) {                                          \
                int64_t h = oh * p.sh - p.pt + r * p.dh, w_ = ow * p.sw - p.pl + s * p.dw; \
                if (h < 0 || h >= p.H || w_ < 0 || w_ >= p.W) continue;                    \
                int64_t xi = ((n * p.C + grp * cg + cc) * p.H + h) * p.W + w_;             \
                int64_t wi = ((k * cg + cc) * p.R + r) * p.S + s;                          \
                BODY;                                                                      \
              }                                                                            \
        }

static sg_status ref_conv(const rctx *c) {
  convp p;
  conv_params(c, c->in[0].dims, c->in[1].dims, c->out[0].dims, &p);
  const double *x = c->x[0], *w = c->x[1], *b = c->info.n_inputs > 2 ? c->x[2] : NULL;
  double *y = c->y[0];
  for (int64_t i = 0; i < c->out[0].numel; i++) y[i] = b ? b[(i / (p.OH * p.OW)) % p.K] : 0.0;
  CONV_LOOP(p, y[yi] += x[xi] * w[wi]);
  return SG_OK;
}

static sg_status ref_conv_bwd_data(const rctx *c) { /* dy, w -> dx */
  convp p;
  conv_params(c, c->out[0].dims, c->in[1].dims, c->in[0].dims, &p);
  const double *dy = c->x[0], *w = c->x[1];
  double *dx = c->y[0];
  memset(dx, 0, sizeof(double) * (size_t)c->out[0].numel);
  CONV_LOOP(p, dx[xi] += dy[yi] * w[wi]);
  return SG_OK;
}

static sg_status ref_conv_bwd_weight(const rctx *c) { /* dy, x -> dw */
  convp p;
  conv_params(c, c->in[1].dims, c->out[0].dims, c->in[0].dims, &p);
  const double *dy = c->x[0], *x = c->x[1];
  double *dw = c->y[0];
  memset(dw, 0, sizeof(double) * (size_t)c->out[0].numel);
  CONV_LOOP(p, dw[wi] += dy[yi] * x[xi]);
  return SG_OK;
}

/* ---- batch norm ----------------------------------------------------------- */

static void bn_shape(const tinfo *x, int64_t *N, int64_t *C, int64_t *S) {
  *N = x->dims[0];
  *C = x->dims[1];
  *S = prod(x->ndim - 2, x->dims + 2);
}
#define BN_AT(n, ch, s) (((n)*C + (ch)) * S + (s))

static sg_status ref_batch_norm(const rctx *c) {
  int64_t N, C, S;
  bn_shape(&c->in[0], &N, &C, &S);
  const double *x = c->x[0], *gamma = c->x[1], *beta = c->x[2];
  double *rm = c->x[3], *rv = c->x[4];
  double eps = af(c, 0), mom = af(c, 1);
  bool batch = ai(c, 2) && c->train;
  double cnt = (double)(N * S);
  for (int64_t ch = 0; ch < C; ch++) {
    double mean, var;
    if (batch) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < S; i++) s += x[BN_AT(n, ch, i)];
      mean = s / cnt;
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < S; i++) ss += (x[BN_AT(n, ch, i)] - mean) * (x[BN_AT(n, ch, i)] - mean);
      var = ss / cnt;
      if (c->y[1]) c->y[1][ch] = mean;
      if (c->y[2]) c->y[2][ch] = 1.0 / sqrt(var + eps);
      rm[ch] = (1 - mom) * rm[ch] + mom * mean;
      rv[ch] = (1 - mom) * rv[ch] + mom * ss / (cnt - 1);
    } else {
      mean = rm[ch];
      var = rv[ch];
    }
    double is = 1.0 / sqrt(var + eps);
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < S; i++)
        c->y[0][BN_AT(n, ch, i)] = (x[BN_AT(n, ch, i)] - mean) * is * gamma[ch] + beta[ch];
  }
  return SG_OK;
}

static sg_status ref_batch_norm_bwd(const rctx *c) {
  int64_t N, C, S;
  bn_shape(&c->in[1], &N, &C, &S);
  const double *dy = c->x[0], *x = c->x[1], *gamma = c->x[2], *m = c->x[3], *v = c->x[4];
  double eps = af(c, 0);
  bool training = ai(c, 1) != 0;
  double cnt = (double)(N * S);
  for (int64_t ch = 0; ch < C; ch++) {
    double is = training ? v[ch] : 1.0 / sqrt(v[ch] + eps), sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < S; i++) {
        sdy += dy[BN_AT(n, ch, i)];
        sdyx += dy[BN_AT(n, ch, i)] * (x[BN_AT(n, ch, i)] - m[ch]) * is;
      }
    c->y[1][ch] = sdyx;
    c->y[2][ch] = sdy;
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < S; i++) {
        double xhat = (x[BN_AT(n, ch, i)] - m[ch]) * is, d = dy[BN_AT(n, ch, i)];
        c->y[0][BN_AT(n, ch, i)] =
            training ? gamma[ch] * is / cnt * (cnt * d - sdy - xhat * sdyx) : d * gamma[ch] * is;
      }
  }
  return SG_OK;
}

/* ---- elementwise ------------------------------------------------------------ */

static double gelu(double x, int tanh_form) {
  if (!tanh_form) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  double k = sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x, int tanh_form) {
  if (!tanh_form) return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
  double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static double trunc_div(double a, double b) { return b == 0 ? 0 : trunc(a / b); }

static sg_status ref_unary(const rctx *c) {
  const double *x = c->x[0];
  double *y = c->y[0];
  sg_op_kind kind = c->info.kind;
  for (int64_t i = 0; i < c->out[0].numel; i++) {
    double v = x[i];
    switch (kind) {
      case SG_OP_RELU: y[i] = v > 0 ? v : 0; break;
      case SG_OP_CLIP: y[i] = fmin(fmax(v, af(c, 0)), af(c, 1)); break;
      case SG_OP_GELU: y[i] = gelu(v, (int)ai(c, 0)); break;
      case SG_OP_SIGMOID: y[i] = 1.0 / (1.0 + exp(-v)); break;
      case SG_OP_TANH: y[i] = tanh(v); break;
      case SG_OP_ADD_SCALAR: y[i] = v + af(c, 0); break;
      case SG_OP_MUL_SCALAR: y[i] = v * af(c, 0); break;
      case SG_OP_POW_SCALAR: y[i] = pow(v, af(c, 0)); break;
      default: return SG_ERR_UNSUPPORTED;
    }
  }
  return SG_OK;
}

static sg_status ref_binary(const rctx *c) {
  const tinfo *a = &c->in[0], *b = &c->in[1], *o = &c->out[0];
  bool is_int = a->dtype != SG_F32;
  int64_t idx[SG_MAX_DIMS];
  for (int64_t i = 0; i < o->numel; i++) {
    unravel(i, o->ndim, o->dims, idx);
    double x = c->x[0][bcast_off(o->ndim, idx, a->ndim, a->dims)];
    double z = c->x[1][bcast_off(o->ndim, idx, b->ndim, b->dims)];
    double r;
    switch (c->info.kind) {
      case SG_OP_ADD: r = x + z; break;
      case SG_OP_SUB: r = x - z; break;
      case SG_OP_MUL: r = x * z; break;
      default: r = is_int ? trunc_div(x, z) : x / z; break;
    }
    c->y[0][i] = r;
  }
  return SG_OK;
}

/* dx from (dy, v) for the activation gradients. */
static sg_status ref_act_bwd(const rctx *c) {
  const double *dy = c->x[0], *v = c->x[1];
  double *dx = c->y[0];
  for (int64_t i = 0; i < c->out[0].numel; i++) {
    double d = dy[i], t = v[i];
    switch (c->info.kind) {
      case SG_OP_RELU_BACKWARD: dx[i] = t > 0 ? d : 0; break;
      case SG_OP_SIGMOID_BACKWARD: dx[i] = d * t * (1 - t); break;
      case SG_OP_TANH_BACKWARD: dx[i] = d * (1 - t * t); break;
      case SG_OP_CLIP_BACKWARD: dx[i] = (t > af(c, 0) && t < af(c, 1)) ? d : 0; break;
      case SG_OP_GELU_BACKWARD: dx[i] = d * gelu_grad(t, (int)ai(c, 0)); break;
      case SG_OP_DROPOUT_BACKWARD: dx[i] = d * t / (1.0 - af(c, 0)); break;
      default: return SG_ERR_UNSUPPORTED;
    }
  }
  return SG_OK;
}

/* exp, log, sqrt, reciprocal, neg, abs, sign, erf, sin, cos, acos; max, min; where; cast. */
static sg_status ref_math(const rctx *c) {
  const double *x = c->x[0];
  double *y = c->y[0];
  for (int64_t i = 0; i < c->out[0].numel; i++) {
    double v = x[i];
    switch (c->info.kind) {
      case SG_OP_EXP: y[i] = exp(v); break;
      case SG_OP_LOG: y[i] = log(v); break;
      case SG_OP_SQRT: y[i] = sqrt(v); break;
      case SG_OP_RECIPROCAL: y[i] = 1.0 / v; break;
      case SG_OP_NEG: y[i] = -v; break;
      case SG_OP_ABS: y[i] = fabs(v); break;
      case SG_OP_SIGN: y[i] = v > 0 ? 1 : v < 0 ? -1 : v; break;
      case SG_OP_ERF: y[i] = erf(v); break;
      case SG_OP_SIN: y[i] = sin(v); break;
      case SG_OP_COS: y[i] = cos(v); break;
      case SG_OP_ACOS: y[i] = acos(v); break;
      default: { /* SG_OP_CAST */
        sg_dtype to = (sg_dtype)ai(c, 0);
        if (to == SG_BOOL) y[i] = v != 0;
        else if (to == SG_F32) y[i] = v; /* f32 values are held as doubles */
        else y[i] = isnan(v) ? 0 : trunc(v);
        break;
      }
    }
  }
  return SG_OK;
}

static sg_status ref_select(const rctx *c) {
  const tinfo *o = &c->out[0];
  int64_t idx[SG_MAX_DIMS];
  bool where = c->info.kind == SG_OP_WHERE;
  for (int64_t i = 0; i < o->numel; i++) {
    unravel(i, o->ndim, o->dims, idx);
    double v[3];
    for (int k = 0; k < (where ? 3 : 2); k++)
      v[k] = c->x[k][bcast_off(o->ndim, idx, c->in[k].ndim, c->in[k].dims)];
    if (where) c->y[0][i] = v[0] != 0 ? v[1] : v[2];
    else if (isnan(v[0]) || isnan(v[1])) c->y[0][i] = NAN;
    else c->y[0][i] = c->info.kind == SG_OP_MAX ? fmax(v[0], v[1]) : fmin(v[0], v[1]);
  }
  return SG_OK;
}

/* layer_norm (x, scale, bias) -> (y, mean, invstd) and its backward
 * (dy, x, scale, mean, invstd) -> (dx, dscale, dbias), over rows of the
 * trailing dims from the axis. */
static sg_status ref_layer_norm(const rctx *c) {
  bool fwd = c->info.kind == SG_OP_LAYER_NORM;
  const tinfo *xt = &c->in[fwd ? 0 : 1];
  int axis = norm_axis(ai(c, 0), xt->ndim);
  int64_t R = prod(axis, xt->dims), D = prod(xt->ndim - axis, xt->dims + axis);
  const double *x = c->x[fwd ? 0 : 1], *scale = c->x[fwd ? 1 : 2];
  if (fwd) {
    const double *bias = c->x[2];
    for (int64_t r = 0; r < R; r++) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < D; i++) m += x[r * D + i] / (double)D;
      for (int64_t i = 0; i < D; i++) v += (x[r * D + i] - m) * (x[r * D + i] - m) / (double)D;
      double is = 1.0 / sqrt(v + af(c, 1));
      for (int64_t i = 0; i < D; i++)
        c->y[0][r * D + i] = (x[r * D + i] - m) * is * (scale ? scale[i] : 1) + (bias ? bias[i] : 0);
      if (c->y[1]) c->y[1][r] = m;
      if (c->y[2]) c->y[2][r] = is;
    }
    return SG_OK;
  }
  const double *dy = c->x[0], *mean = c->x[3], *invstd = c->x[4];
  for (int64_t i = 0; i < D; i++) c->y[1][i] = c->y[2][i] = 0;
  for (int64_t r = 0; r < R; r++) {
    double a = 0, b = 0;
    for (int64_t i = 0; i < D; i++) {
      double xh = (x[r * D + i] - mean[r]) * invstd[r], gi = dy[r * D + i] * (scale ? scale[i] : 1);
      a += gi / (double)D;
      b += gi * xh / (double)D;
      c->y[1][i] += dy[r * D + i] * xh;
      c->y[2][i] += dy[r * D + i];
    }
    for (int64_t i = 0; i < D; i++) {
      double xh = (x[r * D + i] - mean[r]) * invstd[r], gi = dy[r * D + i] * (scale ? scale[i] : 1);
      c->y[0][r * D + i] = invstd[r] * (gi - a - xh * b);
    }
  }
  return SG_OK;
}

/* ---- matrix products -------------------------------------------------------- */

static sg_status ref_gemm(const rctx *c) {
  const tinfo *ta = &c->in[0], *tb = &c->in[1];
  int trans_a = (int)ai(c, 0), trans_b = (int)ai(c, 1);
  double alpha = af(c, 2), beta = af(c, 3);
  int64_t M = ta->dims[trans_a], K = ta->dims[1 - trans_a], N = tb->dims[1 - trans_b];
  const double *C = c->info.n_inputs > 2 ? c->x[2] : NULL;
  const tinfo *tc = &c->in[2];
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += c->x[0][trans_a ? k * M + i : i * K + k] * c->x[1][trans_b ? j * K + k : k * N + j];
      double r = alpha * s;
      if (C && beta != 0) {
        int64_t idx[2] = {i, j};
        r += beta * C[bcast_off(2, idx, tc->ndim, tc->dims)];
      }
      c->y[0][i * N + j] = r;
    }
  return SG_OK;
}

static sg_status ref_matmul(const rctx *c) {
  const tinfo *ta = &c->in[0], *tb = &c->in[1];
  /* Promote 1-D operands, then broadcast the batch dims. */
  int64_t ad[SG_MAX_DIMS + 1], bd[SG_MAX_DIMS + 1];
  int an = ta->ndim, bn = tb->ndim;
  memcpy(ad, ta->dims, sizeof(int64_t) * (size_t)an);
  memcpy(bd, tb->dims, sizeof(int64_t) * (size_t)bn);
  if (an == 1) ad[1] = ad[0], ad[0] = 1, an = 2;
  if (bn == 1) bd[1] = 1, bn = 2;
  int64_t M = ad[an - 2], K = ad[an - 1], N = bd[bn - 1];
  int nb = (an > bn ? an : bn) - 2;
  int64_t batch[SG_MAX_DIMS];
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - (an - 2)), ib = i - (nb - (bn - 2));
    int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
    batch[i] = da > db ? da : db;
  }
  int64_t nbatch = prod(nb, batch), idx[SG_MAX_DIMS];
  for (int64_t t = 0; t < nbatch; t++) {
    unravel(t, nb, batch, idx);
    int64_t oa = bcast_off(nb, idx, an - 2, ad) * M * K, ob = bcast_off(nb, idx, bn - 2, bd) * K * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += c->x[0][oa + i * K + k] * c->x[1][ob + k * N + j];
        c->y[0][(t * M + i) * N + j] = s;
      }
  }
  return SG_OK;
}

/* ---- pooling ---------------------------------------------------------------- */

typedef struct poolp {
  int64_t N, C, H, W, OH, OW, kh, kw, sh, sw, pt, pl, pb, pr;
  int include_pad;
} poolp;

static void pool_params(const rctx *c, const int64_t *x, const int64_t *y, poolp *p) {
  const int64_t *k = aints(c, 0), *s = aints(c, 1), *pad = aints(c, 2);
  *p = (poolp){x[0], x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], pad[0], pad[1], pad[2], pad[3], 0};
  if (c->info.kind == SG_OP_AVG_POOL2D || c->info.kind == SG_OP_AVG_POOL2D_BACKWARD)
    p->include_pad = (int)ai(c, 4);
}

/* PyTorch's avg window: [h0,h1) x [w0,w1) clipped to the input, divisor. */
static double avg_window(const poolp *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                         int64_t *w1) {
  int64_t hs = oh * p->sh - p->pt, ws = ow * p->sw - p->pl;
  int64_t he = hs + p->kh < p->H + p->pb ? hs + p->kh : p->H + p->pb;
  int64_t we = ws + p->kw < p->W + p->pr ? ws + p->kw : p->W + p->pr;
  double size = (double)((he - hs) * (we - ws));
  *h0 = hs > 0 ? hs : 0, *w0 = ws > 0 ? ws : 0;
  *h1 = he < p->H ? he : p->H, *w1 = we < p->W ? we : p->W;
  return p->include_pad ? size : (double)((*h1 - *h0) * (*w1 - *w0));
}

/* First maximum of a max window (flat index into the plane), -1 if empty. */
static int64_t max_at(const poolp *p, const double *x, int64_t oh, int64_t ow) {
  int64_t best = -1;
  for (int64_t r = 0; r < p->kh; r++)
    for (int64_t s = 0; s < p->kw; s++) {
      int64_t h = oh * p->sh - p->pt + r, w = ow * p->sw - p->pl + s;
      if (h < 0 || h >= p->H || w < 0 || w >= p->W) continue;
      if (best < 0 || x[h * p->W + w] > x[best]) best = h * p->W + w;
    }
  return best;
}

static sg_status ref_pool(const rctx *c) {
  bool fwd = c->info.kind == SG_OP_MAX_POOL2D || c->info.kind == SG_OP_AVG_POOL2D;
  bool is_max = c->info.kind == SG_OP_MAX_POOL2D || c->info.kind == SG_OP_MAX_POOL2D_BACKWARD;
  poolp p;
  if (fwd) pool_params(c, c->in[0].dims, c->out[0].dims, &p);
  else pool_params(c, c->out[0].dims, c->in[0].dims, &p);
  if (!fwd) memset(c->y[0], 0, sizeof(double) * (size_t)c->out[0].numel);
  for (int64_t nc = 0; nc < p.N * p.C; nc++)
    for (int64_t oh = 0; oh < p.OH; oh++)
      for (int64_t ow = 0; ow < p.OW; ow++) {
        int64_t o = (nc * p.OH + oh) * p.OW + ow;
        if (is_max) {
          const double *x = c->x[fwd ? 0 : 1] + nc * p.H * p.W;
          int64_t at = max_at(&p, x, oh, ow);
          if (fwd) c->y[0][o] = x[at];
          else c->y[0][nc * p.H * p.W + at] += c->x[0][o];
          continue;
        }
        int64_t h0, h1, w0, w1;
        double div = avg_window(&p, oh, ow, &h0, &h1, &w0, &w1), s = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) {
            if (fwd) s += c->x[0][(nc * p.H + h) * p.W + w];
            else c->y[0][(nc * p.H + h) * p.W + w] += c->x[0][o] / div;
          }
        if (fwd) c->y[0][o] = s / div;
      }
  return SG_OK;
}

/* ---- reductions, shapes ------------------------------------------------------ */

/* y[j] = scale * sum of x over the dims where reduced[] is set (the output
 * is x's shape with those dims dropped or kept as 1: same flat order). */
static void reduce(const tinfo *xt, const double *x, const bool *reduced, double scale, double *y,
                   int64_t yn) {
  int64_t idx[SG_MAX_DIMS];
  memset(y, 0, sizeof(double) * (size_t)yn);
  for (int64_t i = 0; i < xt->numel; i++) {
    unravel(i, xt->ndim, xt->dims, idx);
    int64_t o = 0;
    for (int d = 0; d < xt->ndim; d++)
      if (!reduced[d]) o = o * xt->dims[d] + idx[d];
    y[o] += x[i];
  }
  for (int64_t j = 0; j < yn; j++) y[j] *= scale;
}

static sg_status ref_reduce(const rctx *c) {
  const tinfo *xt = &c->in[0];
  bool reduced[SG_MAX_DIMS] = {false};
  int64_t count = 1;
  if (c->info.kind == SG_OP_GLOBAL_AVG_POOL) {
    for (int d = 2; d < xt->ndim; d++) reduced[d] = true;
  } else if (c->info.kind == SG_OP_SUM_TO) {
    const int64_t *shape = aints(c, 0);
    int n = acount(c, 0);
    for (int d = 0; d < xt->ndim; d++) {
      int j = d - (xt->ndim - n);
      reduced[d] = j < 0 || (shape[j] == 1 && xt->dims[d] != 1);
    }
  } else {
    int n = acount(c, 0);
    for (int i = 0; i < n; i++) reduced[norm_axis(aints(c, 0)[i], xt->ndim)] = true;
    if (n == 0)
      for (int d = 0; d < xt->ndim; d++) reduced[d] = true;
  }
  for (int d = 0; d < xt->ndim; d++)
    if (reduced[d]) count *= xt->dims[d];
  bool mean = c->info.kind == SG_OP_REDUCE_MEAN || c->info.kind == SG_OP_GLOBAL_AVG_POOL;
  reduce(xt, c->x[0], reduced, mean ? 1.0 / (double)count : 1.0, c->y[0], c->out[0].numel);
  return SG_OK;
}

static sg_status ref_copy(const rctx *c) {
  memcpy(c->y[0], c->x[0], sizeof(double) * (size_t)c->out[0].numel);
  return SG_OK;
}

static sg_status ref_transpose(const rctx *c) {
  const tinfo *xt = &c->in[0], *yt = &c->out[0];
  const int64_t *perm = aints(c, 0);
  int64_t idx[SG_MAX_DIMS], xi[SG_MAX_DIMS];
  for (int64_t i = 0; i < yt->numel; i++) {
    unravel(i, yt->ndim, yt->dims, idx);
    for (int d = 0; d < yt->ndim; d++) xi[perm[d]] = idx[d];
    int64_t o = 0;
    for (int d = 0; d < xt->ndim; d++) o = o * xt->dims[d] + xi[d];
    c->y[0][i] = c->x[0][o];
  }
  return SG_OK;
}

static sg_status ref_concat_slice(const rctx *c) {
  const tinfo *yt = &c->out[0];
  bool concat = c->info.kind == SG_OP_CONCAT;
  int axis = norm_axis(ai(c, 0), yt->ndim);
  int64_t idx[SG_MAX_DIMS];
  for (int64_t i = 0; i < yt->numel; i++) {
    unravel(i, yt->ndim, yt->dims, idx);
    int src = 0;
    if (concat) {
      while (idx[axis] >= c->in[src].dims[axis]) idx[axis] -= c->in[src++].dims[axis];
    } else {
      idx[axis] += ai(c, 1);
    }
    const tinfo *xt = &c->in[src];
    int64_t o = 0;
    for (int d = 0; d < xt->ndim; d++) o = o * xt->dims[d] + idx[d];
    c->y[0][i] = c->x[src][o];
  }
  return SG_OK;
}

static sg_status ref_broadcast_to(const rctx *c) {
  const tinfo *xt = &c->in[0], *yt = &c->out[0];
  int64_t idx[SG_MAX_DIMS];
  for (int64_t i = 0; i < yt->numel; i++) {
    unravel(i, yt->ndim, yt->dims, idx);
    c->y[0][i] = c->x[0][bcast_off(yt->ndim, idx, xt->ndim, xt->dims)];
  }
  return SG_OK;
}

/* ---- softmax and losses -------------------------------------------------------- */

static sg_status ref_softmax(const rctx *c) {
  const tinfo *xt = &c->in[0];
  int axis = norm_axis(ai(c, 0), xt->ndim);
  int64_t outer = prod(axis, xt->dims), D = xt->dims[axis],
          inner = prod(xt->ndim - axis - 1, xt->dims + axis + 1);
  sg_op_kind kind = c->info.kind;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
#define AT(j) ((o * D + (j)) * inner + in)
      if (kind == SG_OP_SOFTMAX || kind == SG_OP_LOG_SOFTMAX) {
        const double *x = c->x[0];
        double m = x[AT(0)], s = 0;
        for (int64_t j = 1; j < D; j++) m = fmax(m, x[AT(j)]);
        for (int64_t j = 0; j < D; j++) s += exp(x[AT(j)] - m);
        for (int64_t j = 0; j < D; j++)
          c->y[0][AT(j)] = kind == SG_OP_SOFTMAX ? exp(x[AT(j)] - m) / s : x[AT(j)] - m - log(s);
      } else {
        const double *dy = c->x[0], *y = c->x[1];
        double s = 0;
        for (int64_t j = 0; j < D; j++)
          s += kind == SG_OP_SOFTMAX_BACKWARD ? dy[AT(j)] * y[AT(j)] : dy[AT(j)];
        for (int64_t j = 0; j < D; j++)
          c->y[0][AT(j)] =
              kind == SG_OP_SOFTMAX_BACKWARD ? y[AT(j)] * (dy[AT(j)] - s) : dy[AT(j)] - exp(y[AT(j)]) * s;
      }
#undef AT
    }
  return SG_OK;
}

static sg_status ref_cross_entropy(const rctx *c) {
  bool fwd = c->info.kind == SG_OP_CROSS_ENTROPY;
  const tinfo *lt = &c->in[fwd ? 0 : 1];
  const double *x = c->x[fwd ? 0 : 1], *labels = c->x[fwd ? 1 : 2];
  int64_t N = lt->dims[0], C = lt->dims[1];
  int red = (int)ai(c, 0);
  double total = 0;
  for (int64_t i = 0; i < N; i++) {
    double l = labels[i];
    if (l < 0 || l >= (double)C || l != floor(l)) return SG_ERR_RANGE;
    double m = x[i * C], s = 0;
    for (int64_t j = 1; j < C; j++) m = fmax(m, x[i * C + j]);
    for (int64_t j = 0; j < C; j++) s += exp(x[i * C + j] - m);
    double lse = m + log(s);
    if (fwd) {
      double loss = lse - x[i * C + (int64_t)l];
      if (red == 0) c->y[0][i] = loss;
      total += loss;
    } else {
      double g = red == 0 ? c->x[0][i] : red == 1 ? c->x[0][0] / (double)N : c->x[0][0];
      for (int64_t j = 0; j < C; j++) c->y[0][i * C + j] = (exp(x[i * C + j] - lse) - (j == (int64_t)l)) * g;
    }
  }
  if (fwd && red != 0) c->y[0][0] = red == 1 ? total / (double)N : total;
  return SG_OK;
}

/* ---- embedding ------------------------------------------------------------------ */

/* Forward: y[i] = table[ids[i]]; backward: dtable[v] = sum of dy[i] over
 * ids[i] = v (torch.nn.Embedding). An id outside 0..V-1 is SG_ERR_RANGE. */
static sg_status ref_embedding(const rctx *c) {
  bool fwd = c->info.kind == SG_OP_EMBEDDING;
  const tinfo *tt = fwd ? &c->in[0] : &c->out[0];
  const double *src = c->x[0], *ids = c->x[1];
  int64_t V = tt->dims[0], C = tt->dims[1], n = c->in[1].numel;
  if (!fwd)
    for (int64_t e = 0; e < V * C; e++) c->y[0][e] = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = ids[i];
    if (v < 0 || v >= (double)V || v != floor(v)) return SG_ERR_RANGE;
    for (int64_t j = 0; j < C; j++) {
      if (fwd) c->y[0][i * C + j] = src[(int64_t)v * C + j];
      else c->y[0][(int64_t)v * C + j] += src[i * C + j];
    }
  }
  return SG_OK;
}

/* cumsum by definition: y[j] sums x[i] over i <= j (exclusive i < j; reverse i >= j, or i > j). */
static sg_status ref_cumsum(const rctx *c) {
  const tinfo *t = &c->in[0];
  int axis = norm_axis(ai(c, 0), t->ndim), ex = ai(c, 1) != 0, rev = ai(c, 2) != 0;
  int64_t L = t->dims[axis], inner = prod(t->ndim - axis - 1, t->dims + axis + 1);
  for (int64_t e = 0; e < t->numel; e++) {
    c->y[0][e] = 0;
    for (int64_t i = 0, j = e / inner % L; i < L; i++)
      if (rev ? i > j - !ex : i < j + !ex) c->y[0][e] += c->x[0][e + (i - j) * inner];
  }
  return SG_OK;
}

/* ---- attention ------------------------------------------------------------------ */

/* Per head (an index of the leading dims): p = softmax(q k^T scale) with
 * the causal mask (query i sees keys 0..i), y = p v, lse = log sum exp of
 * the scaled scores; scale 0 is 1/sqrt(d). The backward from the
 * definition, with p recomputed from q and k (not from lse): dv = p^T dy,
 * dp = dy v^T, ds = p (dp - rowsum(p dp)), dq = scale ds k, dk = scale
 * ds^T q. */
static sg_status ref_attention(const rctx *c) {
  bool fwd = c->info.kind == SG_OP_ATTENTION;
  const int f = fwd ? 0 : 1, n = c->in[f].ndim;
  const int64_t H = prod(n - 2, c->in[f].dims), Tq = c->in[f].dims[n - 2], d = c->in[f].dims[n - 1];
  const int64_t Tk = c->in[f + 1].dims[n - 2], dv = c->in[f + 2].dims[n - 1];
  const double scale = af(c, 0) != 0 ? af(c, 0) : 1.0 / sqrt((double)d);
  const bool causal = ai(c, 1) != 0;
  double *p = malloc(sizeof(double) * (size_t)(Tq * Tk)), *dp = malloc(sizeof(double) * (size_t)(Tq * Tk));
  double *lse = malloc(sizeof(double) * (size_t)Tq);
  if (p == NULL || dp == NULL || lse == NULL) {
    free(p), free(dp), free(lse);
    return SG_ERR_NO_MEMORY;
  }
  for (int64_t h = 0; h < H; h++) {
    const double *q = c->x[f] + h * Tq * d, *k = c->x[f + 1] + h * Tk * d, *v = c->x[f + 2] + h * Tk * dv;
    for (int64_t i = 0; i < Tq; i++) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < Tk; j++) {
        double s = 0;
        for (int64_t e = 0; e < d; e++) s += q[i * d + e] * k[j * d + e];
        p[i * Tk + j] = causal && j > i ? -INFINITY : s * scale;
        mx = fmax(mx, p[i * Tk + j]);
      }
      for (int64_t j = 0; j < Tk; j++) sum += exp(p[i * Tk + j] - mx);
      lse[i] = mx + log(sum);
      for (int64_t j = 0; j < Tk; j++) p[i * Tk + j] = exp(p[i * Tk + j] - lse[i]);
    }
    if (fwd) {
      for (int64_t i = 0; i < Tq; i++) {
        for (int64_t e = 0; e < dv; e++) {
          double y = 0;
          for (int64_t j = 0; j < Tk; j++) y += p[i * Tk + j] * v[j * dv + e];
          c->y[0][(h * Tq + i) * dv + e] = y;
        }
        if (c->y[1]) c->y[1][h * Tq + i] = lse[i];
      }
      continue;
    }
    const double *dy = c->x[0] + h * Tq * dv;
    double *dq = c->y[0] + h * Tq * d, *dk = c->y[1] + h * Tk * d, *dvv = c->y[2] + h * Tk * dv;
    for (int64_t i = 0; i < Tq; i++) {
      double rs = 0;
      for (int64_t j = 0; j < Tk; j++) {
        double s = 0;
        for (int64_t e = 0; e < dv; e++) s += dy[i * dv + e] * v[j * dv + e];
        dp[i * Tk + j] = s;
        rs += p[i * Tk + j] * s;
      }
      for (int64_t j = 0; j < Tk; j++) dp[i * Tk + j] = p[i * Tk + j] * (dp[i * Tk + j] - rs) * scale;
    }
    for (int64_t i = 0; i < Tq; i++)
      for (int64_t e = 0; e < d; e++) {
        double s = 0;
        for (int64_t j = 0; j < Tk; j++) s += dp[i * Tk + j] * k[j * d + e];
        dq[i * d + e] = s;
      }
    for (int64_t j = 0; j < Tk; j++) {
      for (int64_t e = 0; e < d; e++) {
        double s = 0;
        for (int64_t i = 0; i < Tq; i++) s += dp[i * Tk + j] * q[i * d + e];
        dk[j * d + e] = s;
      }
      for (int64_t e = 0; e < dv; e++) {
        double s = 0;
        for (int64_t i = 0; i < Tq; i++) s += p[i * Tk + j] * dy[i * dv + e];
        dvv[j * dv + e] = s;
      }
    }
  }
  free(p), free(dp), free(lse);
  return SG_OK;
}

/* ---- dropout -------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int ref_dropout_keep(uint64_t op_seed, uint64_t session_seed, uint64_t step, uint64_t i, double p) {
  uint64_t key = mix64(mix64(mix64(op_seed) ^ session_seed) ^ step);
  uint64_t bits = mix64(key ^ mix64(i)) >> 40;
  return (double)bits >= ceil(p * 16777216.0);
}

static sg_status ref_dropout(const rctx *c) {
  double p = af(c, 0);
  bool active = ai(c, 2) && c->train;
  for (int64_t i = 0; i < c->out[0].numel; i++) {
    if (!active) {
      c->y[0][i] = c->x[0][i];
      continue;
    }
    int keep = ref_dropout_keep((uint64_t)ai(c, 1), c->seed, c->step, (uint64_t)i, p);
    c->y[0][i] = keep ? c->x[0][i] / (1.0 - p) : 0.0;
    if (c->y[1]) c->y[1][i] = keep;
  }
  return SG_OK;
}

/* ---- optimizers ------------------------------------------------------------------ */

static sg_status ref_sgd(const rctx *c) {
  double mom = af(c, 0), damp = af(c, 1), wd = af(c, 2);
  int nesterov = (int)ai(c, 3);
  double *p = c->x[0], *buf = c->info.n_inputs > 3 ? c->x[3] : NULL, lr = c->x[2][0];
  const double *g = c->x[1];
  for (int64_t i = 0; i < c->in[0].numel; i++) {
    double d = g[i] + wd * p[i];
    if (mom != 0) {
      buf[i] = c->step == 0 ? d : mom * buf[i] + (1 - damp) * d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
  return SG_OK;
}

static sg_status ref_adamw(const rctx *c) {
  double b1 = af(c, 0), b2 = af(c, 1), eps = af(c, 2), wd = af(c, 3);
  double *p = c->x[0], *m = c->x[3], *v = c->x[4], lr = c->x[2][0];
  const double *g = c->x[1];
  double t = (c->x[5][0] += 1.0);
  for (int64_t i = 0; i < c->in[0].numel; i++) {
    p[i] *= 1 - lr * wd;
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
    p[i] -= lr * mhat / (sqrt(vhat) + eps);
  }
  return SG_OK;
}

/* ---- dispatch --------------------------------------------------------------------- */

sg_status ref_run_op(const sg_graph *g, int32_t op, int train, double *const *in, double *const *out,
                     uint64_t step, uint64_t seed) {
  rctx c = {.g = g, .op = op, .x = in, .y = out, .train = train, .step = step, .seed = seed};
  if (sg_graph_op_info(g, op, &c.info) != SG_OK) return SG_ERR_INVALID_ARG;
  if (c.info.n_inputs > 64 || c.info.n_outputs > 4) return SG_ERR_UNSUPPORTED;
  for (int i = 0; i < c.info.n_inputs; i++) tget(g, c.info.inputs[i], &c.in[i]);
  for (int i = 0; i < c.info.n_outputs; i++) tget(g, c.info.outputs[i], &c.out[i]);
  switch (c.info.kind) {
    case SG_OP_CONV2D: return ref_conv(&c);
    case SG_OP_CONV2D_BACKWARD_DATA: return ref_conv_bwd_data(&c);
    case SG_OP_CONV2D_BACKWARD_WEIGHT: return ref_conv_bwd_weight(&c);
    case SG_OP_BATCH_NORM: return ref_batch_norm(&c);
    case SG_OP_BATCH_NORM_BACKWARD: return ref_batch_norm_bwd(&c);
    case SG_OP_RELU:
    case SG_OP_CLIP:
    case SG_OP_GELU:
    case SG_OP_SIGMOID:
    case SG_OP_TANH:
    case SG_OP_ADD_SCALAR:
    case SG_OP_MUL_SCALAR:
    case SG_OP_POW_SCALAR: return ref_unary(&c);
    case SG_OP_ADD:
    case SG_OP_SUB:
    case SG_OP_MUL:
    case SG_OP_DIV: return ref_binary(&c);
    case SG_OP_RELU_BACKWARD:
    case SG_OP_CLIP_BACKWARD:
    case SG_OP_GELU_BACKWARD:
    case SG_OP_SIGMOID_BACKWARD:
    case SG_OP_TANH_BACKWARD:
    case SG_OP_DROPOUT_BACKWARD: return ref_act_bwd(&c);
    case SG_OP_MATMUL: return ref_matmul(&c);
    case SG_OP_GEMM: return ref_gemm(&c);
    case SG_OP_MAX_POOL2D:
    case SG_OP_AVG_POOL2D:
    case SG_OP_MAX_POOL2D_BACKWARD:
    case SG_OP_AVG_POOL2D_BACKWARD: return ref_pool(&c);
    case SG_OP_GLOBAL_AVG_POOL:
    case SG_OP_REDUCE_MEAN:
    case SG_OP_REDUCE_SUM:
    case SG_OP_SUM_TO: return ref_reduce(&c);
    case SG_OP_FLATTEN:
    case SG_OP_RESHAPE: return ref_copy(&c);
    case SG_OP_TRANSPOSE: return ref_transpose(&c);
    case SG_OP_CONCAT:
    case SG_OP_SLICE: return ref_concat_slice(&c);
    case SG_OP_BROADCAST_TO: return ref_broadcast_to(&c);
    case SG_OP_SOFTMAX:
    case SG_OP_LOG_SOFTMAX:
    case SG_OP_SOFTMAX_BACKWARD:
    case SG_OP_LOG_SOFTMAX_BACKWARD: return ref_softmax(&c);
    case SG_OP_CROSS_ENTROPY:
    case SG_OP_CROSS_ENTROPY_BACKWARD: return ref_cross_entropy(&c);
    case SG_OP_DROPOUT: return ref_dropout(&c);
    case SG_OP_SGD_UPDATE: return ref_sgd(&c);
    case SG_OP_ADAMW_UPDATE: return ref_adamw(&c);
    case SG_OP_EXP:
    case SG_OP_LOG:
    case SG_OP_SQRT:
    case SG_OP_RECIPROCAL:
    case SG_OP_NEG:
    case SG_OP_ABS:
    case SG_OP_SIGN:
    case SG_OP_ERF:
    case SG_OP_SIN:
    case SG_OP_COS:
    case SG_OP_ACOS:
    case SG_OP_CAST: return ref_math(&c);
    case SG_OP_MAX:
    case SG_OP_MIN:
    case SG_OP_WHERE: return ref_select(&c);
    case SG_OP_LAYER_NORM:
    case SG_OP_LAYER_NORM_BACKWARD: return ref_layer_norm(&c);
    case SG_OP_EMBEDDING:
    case SG_OP_EMBEDDING_BACKWARD: return ref_embedding(&c);
    case SG_OP_ATTENTION:
    case SG_OP_ATTENTION_BACKWARD: return ref_attention(&c);
    case SG_OP_CUMSUM: return ref_cumsum(&c);
    case SG_OP_REDUCE_MAX: /* their reference is in test_ops_reduce_max.c (this file is full) */
    case SG_OP_REDUCE_MIN:
    case SG_OP_REDUCE_MAX_BACKWARD: break;
    case SG_OP_TOPK: /* in test_ops_topk.c */
    case SG_OP_TOPK_BACKWARD: break;
  }
  return SG_ERR_UNSUPPORTED;
}

/* ---- whole graphs ------------------------------------------------------------------ */

sg_status ref_values_create(const sg_graph *g, ref_values **out) {
  int32_t n = sg_graph_num_tensors(g);
  ref_values *rv = calloc(1, sizeof *rv);
  if (rv == NULL) return SG_ERR_NO_MEMORY;
  rv->n = n;
  rv->v = calloc((size_t)n + 1, sizeof(double *));
  rv->numel = calloc((size_t)n + 1, sizeof(int64_t));
  if (rv->v == NULL || rv->numel == NULL) {
    ref_values_destroy(rv);
    return SG_ERR_NO_MEMORY;
  }
  for (int32_t t = 0; t < n; t++) {
    sg_tensor_info ti;
    sg_graph_tensor_info(g, (sg_tensor){t}, &ti);
    rv->numel[t] = ti.numel;
    rv->v[t] = calloc((size_t)ti.numel, sizeof(double));
    if (rv->v[t] == NULL) {
      ref_values_destroy(rv);
      return SG_ERR_NO_MEMORY;
    }
    for (int64_t i = 0; ti.data && i < ti.numel; i++) {
      switch (ti.dtype) {
        case SG_F32: rv->v[t][i] = ((const float *)ti.data)[i]; break;
        case SG_I32: rv->v[t][i] = ((const int32_t *)ti.data)[i]; break;
        case SG_I64: rv->v[t][i] = (double)((const int64_t *)ti.data)[i]; break;
        case SG_U8:
        case SG_BOOL: rv->v[t][i] = ((const uint8_t *)ti.data)[i]; break;
        default: break;
      }
    }
  }
  *out = rv;
  return SG_OK;
}

void ref_values_destroy(ref_values *rv) {
  if (rv == NULL) return;
  for (int32_t t = 0; rv->v && t < rv->n; t++) free(rv->v[t]);
  free(rv->v);
  free(rv->numel);
  free(rv);
}

sg_status ref_values_clone(const ref_values *rv, ref_values **out) {
  ref_values *c = calloc(1, sizeof *c);
  if (c == NULL) return SG_ERR_NO_MEMORY;
  c->n = rv->n;
  c->v = calloc((size_t)rv->n + 1, sizeof(double *));
  c->numel = calloc((size_t)rv->n + 1, sizeof(int64_t));
  if (c->v == NULL || c->numel == NULL) {
    ref_values_destroy(c);
    return SG_ERR_NO_MEMORY;
  }
  for (int32_t t = 0; t < rv->n; t++) {
    c->numel[t] = rv->numel[t];
    c->v[t] = malloc(sizeof(double) * (size_t)(rv->numel[t] ? rv->numel[t] : 1));
    if (c->v[t] == NULL) {
      ref_values_destroy(c);
      return SG_ERR_NO_MEMORY;
    }
    memcpy(c->v[t], rv->v[t], sizeof(double) * (size_t)rv->numel[t]);
  }
  *out = c;
  return SG_OK;
}

void ref_values_set_f32(ref_values *rv, sg_tensor t, const float *data) {
  for (int64_t i = 0; i < rv->numel[t.id]; i++) rv->v[t.id][i] = data[i];
}

void ref_values_set_i64(ref_values *rv, sg_tensor t, const int64_t *data) {
  for (int64_t i = 0; i < rv->numel[t.id]; i++) rv->v[t.id][i] = (double)data[i];
}

sg_status ref_run_graph(const sg_graph *g, int train, uint64_t step, uint64_t seed, ref_values *rv) {
  int32_t nops = sg_graph_num_ops(g);
  for (int32_t o = 0; o < nops; o++) {
    sg_op_info info;
    sg_graph_op_info(g, o, &info);
    double *in[64], *out[4];
    if (info.n_inputs > 64 || info.n_outputs > 4) return SG_ERR_UNSUPPORTED;
    for (int i = 0; i < info.n_inputs; i++) in[i] = info.inputs[i] >= 0 ? rv->v[info.inputs[i]] : NULL;
    for (int i = 0; i < info.n_outputs; i++) out[i] = rv->v[info.outputs[i]];
    sg_status s = ref_run_op(g, o, train, in, out, step, seed);
    if (s != SG_OK) return s;
  }
  return SG_OK;
}
