/* QoS tiers (SPEC H5): what a job trades when a collective fails or runs
 * over its budget. One table, so the scheduler, the CLI and the report quote
 * the same numbers. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "sgrt/health.h"

static const sg_qos_budget tiers[] = {
    {SG_QOS_STRICT, "strict", 50, 0, SG_QOS_ABORT_RECOVER_REDO,
     "abort the step, recover over the survivors and redo the step: no step is lost (RPO 0)"},
    {SG_QOS_BEST_EFFORT, "best-effort", 200, 2, SG_QOS_RETRY_THEN_RECOVER,
     "retry the collective up to 2 times within the budget, then abort and recover as strict"},
    {SG_QOS_GRACEFUL_DEGRADE, "graceful-degrade", 800, 0, SG_QOS_CONTINUE_DEGRADED,
     "continue on the remaining data-parallel replicas (or a fallback) without the failed ones, "
     "within 800 ms"},
};
#define N_TIERS (sizeof tiers / sizeof tiers[0])
#define ACCEPTED "strict, best-effort, graceful-degrade"

const char *sg_qos_name(sg_qos qos) {
  for (size_t i = 0; i < N_TIERS; i++)
    if (tiers[i].qos == qos) return tiers[i].name;
  return "?";
}

/* Case-insensitive, '_' for '-': "BEST_EFFORT" is what people type in a shell. */
static bool same_name(const char *text, const char *name) {
  for (; *text && *name; text++, name++) {
    char c = *text >= 'A' && *text <= 'Z' ? (char)(*text - 'A' + 'a') : *text;
    if (c == '_') c = '-';
    if (c != *name) return false;
  }
  return *text == '\0' && *name == '\0';
}

static sg_status parse(const char *text, sg_qos *out, const char *what) {
  for (size_t i = 0; i < N_TIERS; i++)
    if (same_name(text, tiers[i].name)) {
      *out = tiers[i].qos;
      return SG_OK;
    }
  return sg__error(SG_ERR_INVALID_ARG, "%s'%.64s%s' is not a QoS tier: accepted values are " ACCEPTED, what,
                   text, strlen(text) > 64 ? "..." : "");
}

sg_status sg_qos_parse(const char *text, sg_qos *out) {
  if (text == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_qos_parse: NULL argument");
  return parse(text, out, "QoS ");
}

sg_status sg_qos_from_env(sg_qos fallback, sg_qos *out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_qos_from_env: out is NULL");
  if (sg_qos_name(fallback)[0] == '?')
    return sg__error(SG_ERR_INVALID_ARG, "sg_qos_from_env: fallback %d is not a QoS tier", (int)fallback);
  const char *v = getenv("SG_QOS");
  if (v == NULL || v[0] == '\0') {
    *out = fallback;
    return SG_OK;
  }
  return parse(v, out, "SG_QOS=");
}

sg_status sg_qos_budget_of(sg_qos qos, sg_qos_budget *out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_qos_budget_of: out is NULL");
  for (size_t i = 0; i < N_TIERS; i++)
    if (tiers[i].qos == qos) {
      *out = tiers[i];
      return SG_OK;
    }
  return sg__error(SG_ERR_INVALID_ARG, "sg_qos_budget_of: %d is not a QoS tier (" ACCEPTED ")", (int)qos);
}
