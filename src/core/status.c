/* Status names, the per-thread last error, and the version string. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

const char *sg_status_str(sg_status status) {
  switch (status) {
#define SG_NAME(x) \
  case x: return #x
    SG_NAME(SG_OK);
    SG_NAME(SG_ERR_INVALID_ARG);
    SG_NAME(SG_ERR_NO_MEMORY);
    SG_NAME(SG_ERR_IO);
    SG_NAME(SG_ERR_FORMAT);
    SG_NAME(SG_ERR_TRUNCATED);
    SG_NAME(SG_ERR_CHECKSUM);
    SG_NAME(SG_ERR_VERSION);
    SG_NAME(SG_ERR_UNSUPPORTED);
    SG_NAME(SG_ERR_SHAPE);
    SG_NAME(SG_ERR_DTYPE);
    SG_NAME(SG_ERR_ARITY);
    SG_NAME(SG_ERR_ATTRIBUTE);
    SG_NAME(SG_ERR_CYCLE);
    SG_NAME(SG_ERR_DUPLICATE);
    SG_NAME(SG_ERR_RANGE);
    SG_NAME(SG_ERR_DANGLING);
    SG_NAME(SG_ERR_NOT_FOUND);
    SG_NAME(SG_ERR_STATE);
    SG_NAME(SG_ERR_INTERNAL);
    SG_NAME(SG_ERR_TIMEOUT);
    SG_NAME(SG_ERR_COMM);
    SG_NAME(SG_ERR_DENIED);
    SG_NAME(SG_ERR_STALE);
    SG_NAME(SG_ERR_COMPILER);
    SG_NAME(SG_ERR_DEVICE);
#undef SG_NAME
  }
  return "SG_ERR_UNKNOWN";
}

/* Thread-local so that concurrent sessions never see each other's messages
 * (NCCL's ncclGetLastError keeps one per communicator for the same reason). */
static _Thread_local char last_message[1024];
static _Thread_local sg_status last_status;

sg_status sg__verror(sg_status status, const char *fmt, va_list ap) {
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  last_status = status;
  SG_DEBUG("%s: %s", sg_status_str(status), last_message);
  return status;
}

sg_status sg__error(sg_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sg__verror(status, fmt, ap);
  va_end(ap);
  return status;
}

sg_status sg__last_status(void) { return last_status; }

const char *sg_last_error(void) { return last_message; }

void sg_clear_error(void) {
  last_message[0] = '\0';
  last_status = SG_OK;
}

#define SG_STR2(x) #x
#define SG_STR(x) SG_STR2(x)
const char *sg_version(void) {
  return SG_STR(SG_VERSION_MAJOR) "." SG_STR(SG_VERSION_MINOR) "." SG_STR(SG_VERSION_PATCH);
}
