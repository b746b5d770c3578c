/* Internal core utilities shared by every layer: errors, logging, allocation.
 * Internal non-static names start with sg__. */
#ifndef SG_CORE_INTERNAL_H
#define SG_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sgrt/core.h"
#include "sgrt/status.h"

/* ---- errors -------------------------------------------------------------- */

/* The most negative status this library knows (the enum is append-only). */
#define SG__STATUS_LAST SG_ERR_DEVICE

/* Records `status` and a formatted message as the calling thread's last error
 * and returns `status`, so call sites read `return sg__error(SG_ERR_X, ...)`.
 * The message is also logged at debug level. */
sg_status sg__error(sg_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sg_status sg__verror(sg_status status, const char *fmt, va_list ap);

/* Status of the most recent sg__error on this thread (SG_OK when cleared). */
sg_status sg__last_status(void);

/* ---- logging ------------------------------------------------------------- */

void sg__log(sg_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool sg__log_enabled(sg_log_level level);

#define SG_LOG(level, ...)                                                       \
  do {                                                                           \
    if (sg__log_enabled(level)) sg__log(level, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define SG_ERROR(...) SG_LOG(SG_LOG_ERROR, __VA_ARGS__)
#define SG_WARN(...) SG_LOG(SG_LOG_WARN, __VA_ARGS__)
#define SG_INFO(...) SG_LOG(SG_LOG_INFO, __VA_ARGS__)
#define SG_DEBUG(...) SG_LOG(SG_LOG_DEBUG, __VA_ARGS__)

/* Propagate a failing status, logging "-> STATUS file:line" at debug level so
 * that the log of a failure reads like a backtrace (NCCL's NCCLCHECK). */
#define SG_CHECK(call)                          \
  do {                                          \
    sg_status sg__st = (call);                  \
    if (sg__st != SG_OK) {                      \
      SG_DEBUG("-> %s", sg_status_str(sg__st)); \
      return sg__st;                            \
    }                                           \
  } while (0)

#define SG_CHECK_GOTO(call, st, label)      \
  do {                                      \
    (st) = (call);                          \
    if ((st) != SG_OK) {                    \
      SG_DEBUG("-> %s", sg_status_str(st)); \
      goto label;                           \
    }                                       \
  } while (0)

/* Broken invariants only: aborts with a message. Never for bad input. */
#define SG_ASSERT(cond)                                      \
  do {                                                       \
    if (!(cond)) sg__assert_fail(#cond, __FILE__, __LINE__); \
  } while (0)
_Noreturn void sg__assert_fail(const char *expr, const char *file, int line);

/* ---- allocation ---------------------------------------------------------- */

/* All of sgrt's heap memory goes through these, so that an allocator can be
 * installed and tests can make the Nth allocation fail. They do not set the
 * last error: callers report SG_ERR_NO_MEMORY with their own context. */
void *sg__malloc(size_t bytes);
void *sg__calloc(size_t count, size_t size);
void *sg__realloc(void *ptr, size_t bytes);
void sg__free(void *ptr);
char *sg__strdup(const char *s);

/* Test hook: after `n` more successful allocations, every allocation fails
 * until reset with n < 0. Returns the number of allocations made since the
 * last call, so a test can loop N = 0, 1, 2, ... until an operation succeeds. */
long sg__alloc_fail_after(long n);
/* Number of allocations attempted since process start (for "no allocation in
 * a step" tests). */
unsigned long sg__alloc_count(void);

/* Overflow-checked size arithmetic: false when the result does not fit. */
static inline bool sg__mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool sg__add_size(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

/* Grows a dynamic array so that it holds at least `need` elements. */
sg_status sg__grow(void **items, uint32_t *cap, uint32_t need, size_t elem_size);

/* ---- time and text (clock.c, writer.c) ------------------------------------ */

/* The monotonic clock (CLOCK_MONOTONIC): nanoseconds and milliseconds. */
int64_t sg__now_ns(void);
int64_t sg__now_ms(void);
/* Sleeps `ms` milliseconds (fractions too), resuming after a signal; nothing for ms <= 0. */
void sg__sleep_ms(double ms);

/* An appender into buf[cap] that keeps counting past the end (as snprintf),
 * so the caller learns how big the buffer had to be: len may exceed cap - 1.
 * Zero-initialise len; buf[cap - 1] is always NUL once something was put. */
typedef struct sg__writer {
  char *buf;
  size_t cap, len;
} sg__writer;
void sg__put(sg__writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growing string (reports, generated source): printf-style appends into
 * s (len bytes plus a NUL). An allocation failure is sticky (failed) and
 * later appends do nothing. Zero-initialise; free s with sg__free. */
typedef struct sg__strbuf {
  char *s;
  size_t len, cap;
  bool failed;
} sg__strbuf;
void sg__strbuf_put(sg__strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- hashing (hash.c) ------------------------------------------------------ */

/* 64-bit FNV-1a over bytes: h = (h ^ byte) * 1099511628211 (the FNV-64
 * prime) for each, so a hash over several pieces chains:
 * h = sg__fnv1a64(sg__fnv1a64(SG__FNV1A64_SEED, a, na), b, nb). sgrt's
 * digests start from SG__FNV1A64_SEED = 1469598103934665603, which is not
 * FNV's published offset basis 14695981039346656037 (0xcbf29ce484222325, a
 * digit longer): digests already recorded (params_hash values in the docs,
 * logs and benchmark results) depend on it, so it stays. A checksum for
 * comparing bytes across ranks and runs; content hashes of graphs and .sgg
 * sections are XXH3 (graph/hash.c). */
#define SG__FNV1A64_SEED 1469598103934665603ull
uint64_t sg__fnv1a64(uint64_t h, const void *data, size_t n);

/* ---- files ---------------------------------------------------------------- */

/* Opens a path a user named, for reading or (write: created or truncated,
 * mode 0666 less the umask) for writing, without ever blocking: a FIFO, a
 * device, a socket or a directory is refused (SG_ERR_IO, "'PATH' is a FIFO,
 * not a regular file") instead of hanging on a FIFO's missing other end.
 * The check is made on the opened descriptor (fstat), so the path cannot
 * change in between. *fd_out is a blocking, close-on-exec descriptor of a
 * regular file; the caller closes it. Other errors: SG_ERR_IO naming the
 * path and errno's text. */
sg_status sg__open_regular(const char *path, bool write, int *fd_out);
/* sg__open_regular as a stdio stream ("rb" or "w"); the caller fcloses it. */
sg_status sg__fopen_regular(const char *path, bool write, FILE **out);
/* "a FIFO", "a directory", "a character device", ... of a st_mode. */
const char *sg__file_kind(unsigned mode);

/* Maps a whole regular file read-only (opened with sg__open_regular). An
 * empty file gives *map = NULL and *size = 0. Errors: SG_ERR_IO (cannot
 * open, stat or map; not a regular file), SG_ERR_RANGE (larger than the
 * address space), naming the path. */
sg_status sg__map_file(const char *path, const void **map, size_t *size);
/* Undoes sg__map_file; accepts NULL. */
void sg__unmap_file(const void *map, size_t size);

/* ---- versioned structs (versioned.c) -------------------------------------- */

/* A public struct that starts with `size_t size` (params, configs, reports,
 * stats): its name and initialiser for messages, the size of its first
 * version and this library's size. Fields are only ever appended, so a
 * caller built against an older header has a prefix of today's struct. */
typedef struct sg__versioned {
  const char *type; /* "sg_session_params" */
  const char *init; /* "SG_SESSION_PARAMS_INIT" */
  size_t min_size;  /* the first version: every byte through `first` below */
  size_t max_size;  /* sizeof(type) in this library */
} sg__versioned;

/* The descriptor of struct `type` whose first version ended with field
 * `first` (usually the first field after `size`). */
#define SG__VERSIONED(type, first, init) \
  ((sg__versioned){#type, init, offsetof(type, first) + sizeof(((type *)0)->first), sizeof(type)})

/* Reads a caller's params struct: `dst` holds the defaults (the struct's
 * SG_X_PARAMS_INIT) and receives the first src->size bytes of `src`, so the
 * fields an older caller does not have keep their defaults; dst->size is then
 * this library's size. src NULL: the defaults. A size above this library's
 * (a newer caller) is read up to this library's size, with a warning that
 * the rest is ignored (UCX ignores the field_mask bits it does not know). A
 * size below the first version's is refused: SG_ERR_INVALID_ARG
 * "FN: TYPE.size is N; this library reads TYPE of MIN..MAX bytes (initialise
 * it from INIT)"; dst is left as it was. */
sg_status sg__params_read(const char *fn, sg__versioned v, void *dst, const void *src);

/* Writes an output struct that the library filled completely (`src`, this
 * library's size) into the caller's `dst`: only its first dst->size bytes (at
 * most this library's size), and dst->size becomes the number of bytes
 * written, so a newer caller learns which fields it got. A size below the
 * first version's is refused as in sg__params_read and nothing is written.
 * src NULL: only checks dst->size (before the struct can be filled). */
sg_status sg__out_write(const char *fn, sg__versioned v, void *dst, const void *src);

/* ---- arena --------------------------------------------------------------- */

/* A bump allocator for metadata that lives as long as its owner (a graph):
 * names, shapes, attribute payloads. Freed all at once. */
typedef struct sg__arena_chunk sg__arena_chunk;
typedef struct sg__arena {
  sg__arena_chunk *head;
  size_t bytes_used; /* payload bytes handed out, for reports */
} sg__arena;

void sg__arena_init(sg__arena *a);
void sg__arena_destroy(sg__arena *a);
/* Returns `bytes` zeroed bytes aligned to `align` (a power of two, at most
 * 4096), or NULL when out of memory. */
void *sg__arena_alloc(sg__arena *a, size_t bytes, size_t align);
char *sg__arena_strdup(sg__arena *a, const char *s);
char *sg__arena_strndup(sg__arena *a, const char *s, size_t n);
void *sg__arena_memdup(sg__arena *a, const void *p, size_t bytes, size_t align);

#endif /* SG_CORE_INTERNAL_H */
