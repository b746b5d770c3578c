/* TensorBoard event files (example_tfevents.h): TFRecords of Event
 * protobufs, written by hand so that no TensorFlow or protobuf library is
 * needed. A record is [length u64][masked CRC-32C of the length u32][data]
 * [masked CRC-32C of the data u32], little-endian; the first Event holds
 * file_version "brain.Event:2", each later one a Summary of scalar values
 * (tensorboard/compat/proto/event.proto and summary.proto:
 * Event{1: wall_time double, 2: step int64, 3: file_version string,
 * 5: summary}, Summary{1: repeated Value}, Value{1: tag string,
 * 2: simple_value float}). */
#include "example_tfevents.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct example_tfevents {
  FILE *f;
};

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit per byte from a table. */
static uint32_t crc32c(const uint8_t *p, size_t n) {
  static uint32_t table[256];
  static int ready;
  if (!ready) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      table[i] = c;
    }
    ready = 1;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* TFRecord's masking, so that a CRC of data that holds CRCs stays well distributed. */
static uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_le(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A protobuf message being built in a fixed buffer (an Event of a few scalars fits). */
typedef struct pb {
  uint8_t b[4096];
  size_t n;
  int overflow;
} pb;

static void pb_bytes(pb *m, const void *p, size_t n) {
  if (m->n + n > sizeof m->b) {
    m->overflow = 1;
    return;
  }
  memcpy(m->b + m->n, p, n);
  m->n += n;
}

static void pb_varint(pb *m, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  pb_bytes(m, b, n);
}

static void pb_key(pb *m, unsigned field, unsigned wire) { pb_varint(m, (uint64_t)field << 3 | wire); }

static void pb_len(pb *m, unsigned field, const void *p, size_t n) {
  pb_key(m, field, 2);
  pb_varint(m, n);
  pb_bytes(m, p, n);
}

static void pb_double(pb *m, unsigned field, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  uint8_t b[8];
  put_le(b, u, 8);
  pb_key(m, field, 1);
  pb_bytes(m, b, 8);
}

static void pb_float(pb *m, unsigned field, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  uint8_t b[4];
  put_le(b, u, 4);
  pb_key(m, field, 5);
  pb_bytes(m, b, 4);
}

static double wall_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int write_record(example_tfevents *w, const pb *m) {
  if (m->overflow) return -1;
  uint8_t head[12], tail[4];
  put_le(head, m->n, 8);
  put_le(head + 8, masked(crc32c(head, 8)), 4);
  put_le(tail, masked(crc32c(m->b, m->n)), 4);
  if (fwrite(head, 1, 12, w->f) != 12 || fwrite(m->b, 1, m->n, w->f) != m->n || fwrite(tail, 1, 4, w->f) != 4)
    return -1;
  return fflush(w->f) == 0 ? 0 : -1;
}

int example_tfevents_open(const char *dir, example_tfevents **out, char *err, size_t cap) {
  *out = NULL;
  char host[HOST_NAME_MAX + 1] = "localhost", path[4096];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  /* TensorBoard finds files whose name holds "tfevents"; the pid keeps two runs in one second apart. */
  snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s.%d", dir, (long long)time(NULL), host,
           (int)getpid());
  example_tfevents *w = calloc(1, sizeof *w);
  if (w == NULL || (w->f = fopen(path, "wb")) == NULL) {
    snprintf(err, cap, "cannot write '%s': %s", path, w ? strerror(errno) : "out of memory");
    free(w);
    return -1;
  }
  pb m = {.n = 0};
  pb_double(&m, 1, wall_time());
  static const char version[] = "brain.Event:2";
  pb_len(&m, 3, version, sizeof version - 1);
  if (write_record(w, &m) != 0) {
    snprintf(err, cap, "cannot write '%s': %s", path, strerror(errno));
    example_tfevents_close(w);
    return -1;
  }
  *out = w;
  return 0;
}

int example_tfevents_scalars(example_tfevents *w, int64_t step, const char *const *tags, const double *values,
                             int n) {
  pb summary = {.n = 0};
  for (int i = 0; i < n; i++) {
    pb value = {.n = 0};
    pb_len(&value, 1, tags[i], strlen(tags[i]));
    pb_float(&value, 2, (float)values[i]);
    if (value.overflow) return -1;
    pb_len(&summary, 1, value.b, value.n);
  }
  if (summary.overflow) return -1;
  pb event = {.n = 0};
  pb_double(&event, 1, wall_time());
  pb_key(&event, 2, 0);
  pb_varint(&event, (uint64_t)step);
  pb_len(&event, 5, summary.b, summary.n);
  return write_record(w, &event);
}

void example_tfevents_close(example_tfevents *w) {
  if (w == NULL) return;
  if (w->f != NULL) fclose(w->f);
  free(w);
}
