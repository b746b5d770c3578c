/* The compile report's fusion and cache figures as JSON (example_report.h). */
#include "example_report.h"

void example_compile_json(cJSON *j, const sg_compile_report *rep) {
  cJSON_AddNumberToObject(j, "ops_fused", rep->ops_fused);
  cJSON_AddNumberToObject(j, "fused_kernels", rep->fused_kernels);
  cJSON_AddNumberToObject(j, "kernels_generated", rep->kernels_generated);
  cJSON_AddNumberToObject(j, "compiler_invocations", rep->compiler_invocations);
  cJSON_AddNumberToObject(j, "cache_hits", rep->cache_hits);
  cJSON_AddNumberToObject(j, "cache_misses", rep->cache_misses);
}
