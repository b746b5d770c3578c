/* What compile did, in the training examples' --json summaries: fusion and
 * the compile cache (docs/compiler.md). */
#ifndef EXAMPLE_REPORT_H
#define EXAMPLE_REPORT_H

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

/* Adds ops_fused, fused_kernels, kernels_generated, compiler_invocations,
 * cache_hits and cache_misses from `rep` to the object `j`. */
void example_compile_json(cJSON *j, const sg_compile_report *rep);

#endif /* EXAMPLE_REPORT_H */
