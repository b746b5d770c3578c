/**
 * @file core.h
 * Logging control, allocation hooks, and sg_free() for the memory sgrt hands
 * to the caller. Every public header that returns such memory includes it.
 */
#ifndef SGRT_CORE_H
#define SGRT_CORE_H

#include <stddef.h>

#include "sgrt/export.h"
#include "sgrt/status.h"

SG_EXTERN_C_BEGIN

/** Log verbosity. The initial level comes from the SG_LOG_LEVEL environment
 * variable ("none", "error", "warn", "info", "debug", "trace" or 0-5);
 * the default is SG_LOG_WARN. Messages go to stderr. */
typedef enum sg_log_level {
  SG_LOG_NONE = 0,
  SG_LOG_ERROR = 1,
  SG_LOG_WARN = 2,
  SG_LOG_INFO = 3,
  SG_LOG_DEBUG = 4,
  SG_LOG_TRACE = 5,
} sg_log_level;

/** Sets the process-wide log level (overrides SG_LOG_LEVEL). Any thread. */
SG_API void sg_log_set_level(sg_log_level level);
/** Current process-wide log level. Any thread. */
SG_API sg_log_level sg_log_get_level(void);

/**
 * Memory allocator used for all of sgrt's heap memory. Functions receive
 * `user` as their last argument. realloc_fn(NULL, n) must behave as malloc;
 * free_fn(NULL) must be a no-op.
 */
typedef struct sg_allocator {
  size_t size; /**< sizeof(sg_allocator), for forward compatibility */
  void *(*malloc_fn)(size_t bytes, void *user);
  void *(*realloc_fn)(void *ptr, size_t bytes, void *user);
  void (*free_fn)(void *ptr, void *user);
  void *user;
} sg_allocator;

/**
 * Installs an allocator (NULL restores the C library's). Call it before any
 * sgrt object exists and not concurrently with other sgrt calls: memory is
 * always freed by the allocator that allocated it.
 * @return SG_OK, or SG_ERR_INVALID_ARG if a function pointer is missing or
 *         `size` is not a size of the struct this library knows (every
 *         field of the first version is required: there are no defaults).
 */
SG_API sg_status sg_set_allocator(const sg_allocator *allocator);

/**
 * Frees memory that sgrt returned to the caller: buffers of
 * sg_graph_save_to_memory(), the strings of sg_partition_report_json(),
 * sg_partition_report_text() and sg_tp_plan_json(). It goes back to the
 * allocator that made it. Accepts NULL. Any thread.
 */
SG_API void sg_free(void *ptr);

SG_EXTERN_C_END

#endif /* SGRT_CORE_H */
