/**
 * @file status.h
 * Status codes, the per-thread last error message, and the library version.
 *
 * Every sgrt call that can fail returns an ::sg_status. SG_OK is zero and
 * every error is negative. The enum is append-only: a code, once released,
 * keeps its value forever so that programs and the Python shim can compare
 * numbers across versions.
 */
#ifndef SGRT_STATUS_H
#define SGRT_STATUS_H

#include "sgrt/export.h"

SG_EXTERN_C_BEGIN

/** Result of every fallible call. Append-only; never renumber. */
typedef enum sg_status {
  SG_OK = 0,
  SG_ERR_INVALID_ARG = -1, /**< an API argument is NULL, out of range or inconsistent */
  SG_ERR_NO_MEMORY = -2,   /**< an allocation failed */
  SG_ERR_IO = -3,          /**< open/read/write/mmap of a file failed */
  SG_ERR_FORMAT = -4,      /**< a file or message is malformed */
  SG_ERR_TRUNCATED = -5,   /**< a file or message ends before its declared contents */
  SG_ERR_CHECKSUM = -6,    /**< a stored checksum does not match the contents */
  SG_ERR_VERSION = -7,     /**< a file needs a newer reader (format major version) */
  SG_ERR_UNSUPPORTED = -8, /**< an unknown op kind, dtype or required section */
  SG_ERR_SHAPE = -9,       /**< shapes of an op's tensors are incompatible */
  SG_ERR_DTYPE = -10,      /**< dtypes of an op's tensors are incompatible */
  SG_ERR_ARITY = -11,      /**< an op has the wrong number of inputs or outputs */
  SG_ERR_ATTRIBUTE = -12,  /**< an op attribute is missing, unknown or out of range */
  SG_ERR_CYCLE = -13,      /**< the graph is not acyclic */
  SG_ERR_DUPLICATE = -14,  /**< two tensors or ops share a name, or a tensor has two producers */
  SG_ERR_RANGE = -15,      /**< an id, count or length is outside what is valid */
  SG_ERR_DANGLING = -16,   /**< a tensor is neither produced nor a source (input, parameter, ...) */
  SG_ERR_NOT_FOUND = -17,  /**< a named tensor, op or file does not exist */
  SG_ERR_STATE = -18,      /**< the call is not valid in the object's current state */
  SG_ERR_INTERNAL = -19,   /**< a bug in sgrt; please report it */
  SG_ERR_TIMEOUT = -20,    /**< a wait (peer, rendezvous, message) ran past its deadline */
  SG_ERR_COMM = -21,       /**< the transport failed, or a peer went away (see the message) */
  SG_ERR_DENIED = -22,     /**< refused: wrong job token, or a permission the object does not grant */
  SG_ERR_STALE = -23, /**< the data changed under us: a newer version exists (global memory, docs/gmem.md) */
  SG_ERR_COMPILER =
      -24, /**< the system C compiler is missing or failed on generated kernels (see the message) */
  SG_ERR_DEVICE = -25, /**< no usable GPU, or the GPU failed (a sticky CUDA error); the message says which */
} sg_status;

/** Short constant name of a status, e.g. "SG_ERR_SHAPE". Never NULL. Any thread. */
SG_API const char *sg_status_str(sg_status status);

/**
 * The message of the last error raised on the calling thread, with its context
 * (op, tensor, file offset, ...). Empty string when there was none. The pointer
 * stays valid until the next sgrt call on this thread. Any thread.
 */
SG_API const char *sg_last_error(void);

/** Clears the calling thread's last error message. */
SG_API void sg_clear_error(void);

#define SG_VERSION_MAJOR 0
#define SG_VERSION_MINOR 1
#define SG_VERSION_PATCH 0

/** Library version string, e.g. "0.1.0", of the library actually loaded. */
SG_API const char *sg_version(void);

SG_EXTERN_C_END

#endif /* SGRT_STATUS_H */
