/* gemm and matmul as the oneDNN matmul primitive.
 *
 * Layout decision: operands stay plain. Transposes (gemm's trans_a/trans_b)
 * become strides of the memory descriptors, so no copy is made; batch dims of
 * NumPy matmul become oneDNN's batch dims (size-1 dims broadcast), and 1-D
 * operands are promoted to [1,K] / [K,1], which changes no memory. Weights in
 * a blocked layout (format_tag any) would have to be reordered on every run,
 * because the optimizer rewrites them every step, so plain is used.
 *
 * gemm's alpha is an output scale. beta * c is the primitive's bias when
 * alpha = beta = 1 (the linear-layer case) and otherwise a C epilogue.
 *
 * With matmul_precision bf16 the primitive takes bf16 operands in the layout
 * it picks (format_tag any: the weights packed as its kernel reads them) and
 * sums in f32 into the f32 output; a reorder before it rounds each f32
 * operand to bf16 (to nearest even) and packs it in one pass. The rounding
 * copies cost reads of A and B once per run, against the M*N*K products
 * that the bf16 dot-product instructions then do at twice the f32 rate. */
#include "backend/cpu/dnnl_common.h"

enum { TRANS_A, TRANS_B, ALPHA, BETA };

typedef struct mm_kernel {
  sg__dk dk;
  /* epilogue out[i,j] += beta * c[i*cs0 + j*cs1] when `epilogue` */
  bool epilogue;
  float beta;
  int64_t M, N, cs0, cs1;
} mm_kernel;

static sg_status mm_run(sg__cpu_state *st, sg__kernel *base, void *const *in, void *const *out,
                        const sg__run_ctx *ctx) {
  mm_kernel *k = (mm_kernel *)base;
  SG_CHECK(sg__dk_run(st, base, in, out, ctx));
  if (k->epilogue) {
    float *restrict y = out[0];
    const float *restrict c = in[2];
    const float beta = k->beta;
    for (int64_t i = 0; i < k->M; i++) {
      const float *crow = c + i * k->cs0;
      float *yrow = y + i * k->N;
      if (k->cs1 == 1)
        for (int64_t j = 0; j < k->N; j++) yrow[j] += beta * crow[j];
      else
        for (int64_t j = 0; j < k->N; j++) yrow[j] += beta * crow[0];
    }
  }
  return SG_OK;
}

/* Row-major strides of `dims`. */
static void plain_strides(int nd, const dnnl_dim_t *dims, dnnl_dim_t *strides) {
  dnnl_dim_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

static sg_status build(sg__dk *k, const sg_graph *g, const sg__op *op, sg__exec_mode mode) {
  (void)mode;
  mm_kernel *mk = (mm_kernel *)k;
  const sg__tensor *a = sg__cpu_in(g, op, 0), *b = sg__cpu_in(g, op, 1), *c = sg__cpu_in(g, op, 2);
  int nd;
  dnnl_dim_t ad[DNNL_MAX_NDIMS], as[DNNL_MAX_NDIMS], bd[DNNL_MAX_NDIMS], bs[DNNL_MAX_NDIMS];
  dnnl_dim_t yd[DNNL_MAX_NDIMS], ys[DNNL_MAX_NDIMS];
  float alpha = 1.0f;
  bool bias = false;
  dnnl_memory_desc_t am, bm, ym, cm;
  if (op->kind == SG_OP_GEMM) {
    int ta = (int)sg__attr_i(op, TRANS_A), tb = (int)sg__attr_i(op, TRANS_B);
    double al = sg__attr_f(op, ALPHA), be = sg__attr_f(op, BETA);
    nd = 2;
    int64_t M = a->dims[ta], K = a->dims[1 - ta], N = b->dims[1 - tb];
    ad[0] = M, ad[1] = K;
    /* a is stored [M,K] (strides K,1) or [K,M] (strides 1,M). */
    as[0] = ta ? 1 : K, as[1] = ta ? M : 1;
    bd[0] = K, bd[1] = N;
    bs[0] = tb ? 1 : N, bs[1] = tb ? K : 1;
    yd[0] = M, yd[1] = N;
    ys[0] = N, ys[1] = 1;
    alpha = (float)al;
    if (c && be != 0.0) {
      dnnl_dim_t cd[2] = {c->ndim == 2 ? c->dims[0] : 1, c->ndim >= 1 ? c->dims[c->ndim - 1] : 1};
      if (al == 1.0 && be == 1.0) {
        bias = true;
        sg__dk_plain_md(&cm, 2, cd);
      } else {
        mk->epilogue = true;
        mk->beta = (float)be;
        mk->M = M;
        mk->N = N;
        mk->cs0 = cd[0] == 1 ? 0 : cd[1];
        mk->cs1 = cd[1] == 1 ? 0 : 1;
      }
    }
  } else {
    int abat = a->ndim > 2 ? a->ndim - 2 : 0, bbat = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = abat > bbat ? abat : bbat;
    nd = nb + 2;
    int64_t M = a->ndim == 1 ? 1 : a->dims[a->ndim - 2], K = a->dims[a->ndim - 1];
    int64_t N = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    for (int i = 0; i < nb; i++) {
      int ia = i - (nb - abat), ib = i - (nb - bbat);
      ad[i] = ia >= 0 ? a->dims[ia] : 1;
      bd[i] = ib >= 0 ? b->dims[ib] : 1;
      yd[i] = ad[i] > bd[i] ? ad[i] : bd[i];
    }
    ad[nb] = M, ad[nb + 1] = K;
    bd[nb] = K, bd[nb + 1] = N;
    yd[nb] = M, yd[nb + 1] = N;
    plain_strides(nd, ad, as);
    plain_strides(nd, bd, bs);
    plain_strides(nd, yd, ys);
  }
  sg__dk_strided_md(&am, nd, ad, as);
  sg__dk_strided_md(&bm, nd, bd, bs);
  sg__dk_strided_md(&ym, nd, yd, ys);
  const bool bf16 = k->st->matmul_bf16;
  dnnl_memory_desc_t am16, bm16;
  if (bf16) {
    SG_DNNL(k, dnnl_memory_desc_init_by_tag(&am16, nd, ad, dnnl_bf16, dnnl_format_tag_any), "bf16 operand");
    SG_DNNL(k, dnnl_memory_desc_init_by_tag(&bm16, nd, bd, dnnl_bf16, dnnl_format_tag_any), "bf16 operand");
  }
  dnnl_matmul_desc_t d;
  SG_DNNL(k, dnnl_matmul_desc_init(&d, bf16 ? &am16 : &am, bf16 ? &bm16 : &bm, bias ? &cm : NULL, &ym),
          "matmul descriptor");
  /* alpha scales the matmul's output only: the kernel's shared attributes
   * also make the reorders that round operands to bf16, which would scale
   * each operand by it too. */
  dnnl_primitive_attr_t attr;
  SG_DNNL(k, dnnl_primitive_attr_clone(&attr, k->attr), "matmul attributes");
  dnnl_status_t ds = alpha != 1.0f ? dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) : dnnl_success;
  dnnl_primitive_desc_t pd = NULL;
  if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &d, attr, k->engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (ds != dnnl_success) return sg__dnnl_fail(k->op, ds, bf16 ? "bf16 matmul" : "matmul");
  int ai, bi, yi, ci = -1;
  sg_status st = SG_OK;
  if (bf16) {
    SG_CHECK_GOTO(
        sg__dk_input(k, &am, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), SG__DK_IN(0), &ai), st,
        fail);
    SG_CHECK_GOTO(
        sg__dk_input(k, &bm, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), SG__DK_IN(1), &bi),
        st, fail);
  } else {
    SG_CHECK_GOTO(sg__dk_user(k, &am, SG__DK_IN(0), &ai), st, fail);
    SG_CHECK_GOTO(sg__dk_user(k, &bm, SG__DK_IN(1), &bi), st, fail);
  }
  SG_CHECK_GOTO(sg__dk_user(k, &ym, SG__DK_OUT(0), &yi), st, fail);
  if (bias) SG_CHECK_GOTO(sg__dk_user(k, &cm, SG__DK_IN(2), &ci), st, fail);
  int kinds[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
  int mems[] = {ai, bi, yi, ci};
  return sg__dk_step_add(k, pd, bias ? 4 : 3, kinds, mems);
fail:
  dnnl_primitive_desc_destroy(pd);
  return st;
}

sg_status sg__cpu_create_matmul(sg__cpu_state *st, const sg_graph *g, const sg__op *op, sg__exec_mode mode,
                                sg__kernel **out) {
  return sg__dk_create(st, g, op, mode, sizeof(mm_kernel), mm_run, NULL, build, out);
}
