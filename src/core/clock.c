/* Monotonic time for timeouts, deadlines and durations everywhere in the
 * library (one clock, so that times taken in different layers compare). */
#include <errno.h>
#include <math.h>
#include <time.h>

#include "core/core.h"

int64_t sg__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sg__now_ms(void) { return sg__now_ns() / 1000000; }

void sg__sleep_ms(double ms) {
  if (!(ms > 0)) return;
  struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) continue;
}
