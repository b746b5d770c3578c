/* Pieces of C text common to the emitters of the kernel IR (the C emitter,
 * cpu/cpu_emit.c, and the CUDA emitter, cuda/cuda_emit.c): types, constants,
 * each instruction's expression, an input's element offset. Both dialects
 * read the same words because every generated program starts with
 * sgk_math.h's text (its helpers sgk_maxf, sgk_div32, ..., and the NaN and
 * infinity constants SGK_NANF, SGK_INFF, SGK_NAN, SGK_INF) and a prelude
 * that defines uint8_t .. int64_t and INT32_MIN, INT64_MIN. */
#ifndef SG_KIR_EMIT_H
#define SG_KIR_EMIT_H

#include "backend/kernel_ir.h"
#include "core/core.h"

/* The C type of a dtype's values: float, int32_t, int64_t, uint8_t (bool). */
const char *sg__kir_ctype(int dtype);
/* "const T vI = <expr>;" for an instruction that is not LOAD, PARAM or
 * STORE (constants written exactly: hexadecimal floats). */
void sg__kir_put_value(sg__strbuf *b, const sg__kir_kernel *k, uint32_t i, const char *indent);
/* "const T vI = <elem>;" for LOAD instruction i reading `elem` (bools
 * normalised to 0 or 1). */
void sg__kir_put_load(sg__strbuf *b, const sg__kir_kernel *k, uint32_t i, const char *indent,
                      const char *elem);
/* The element offset of input j at index `var` of the flattened dims
 * [d0, d1): div/mod by the dims' lengths, times the input's strides
 * ("0" when it reads one element there). */
void sg__kir_put_offset(sg__strbuf *b, const sg__kir_kernel *k, int j, int d0, int d1, const char *var);
/* The loop nest of an elementwise kernel: the trailing dims that every
 * input walks at one fixed step per element (its own: 1 when contiguous, 0
 * when broadcast along them, anything for a strided view) merge into one
 * inner run of `inner` elements, at step[j] for input j; the leading dims
 * [0, split) number the runs. The div/mod arithmetic of broadcasting then
 * happens once per run (C: a row loop the compiler vectorizes) or only on
 * the run's index (CUDA). */
typedef struct sg__kir_nest {
  int split;
  int64_t inner;
  int64_t step[SG__KIR_MAX_INPUTS];
} sg__kir_nest;
void sg__kir_plan_nest(const sg__kir_kernel *k, sg__kir_nest *n);
/* Whether input j's strides over dims [d0, d1) are one fixed step per
 * flattened index (*step; 0: constant there). */
bool sg__kir_merged_step(const sg__kir_kernel *k, int j, int d0, int d1, int64_t *step);
/* One program: `prelude`, then sgk_math.h's text, then emit(k) for every
 * kernel. Checks that every kernel is finished and that no two define one
 * symbol (with pro_symbols, a kernel with a prologue also defines
 * NAME_pro). `who` names the emitter in messages. *src is allocated with
 * sg__malloc. Errors: SG_ERR_INVALID_ARG (a kernel not finished),
 * SG_ERR_DUPLICATE, SG_ERR_NO_MEMORY. */
typedef void (*sg__kir_emit_fn)(sg__strbuf *b, const sg__kir_kernel *k);
sg_status sg__kir_emit_program(const sg__kir_kernel *const *kernels, int n, const char *who,
                               const char *prelude, bool pro_symbols, sg__kir_emit_fn emit, char **src,
                               size_t *len);
/* A double written exactly. */
void sg__kir_put_double(sg__strbuf *b, double x);

#endif /* SG_KIR_EMIT_H */
