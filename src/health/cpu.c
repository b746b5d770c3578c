/* CPU use for check-ins (SPEC H2), from /proc/self/stat. Kept apart from the
 * monitor: this is the one file of src/health that reads files and clocks.
 * Parsing and arithmetic are separate pure functions so tests can feed them
 * hand-written lines. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "health/health_internal.h"

#define MIN_INTERVAL_MS 100 /* ten 10-ms ticks: below that the answer is mostly rounding */

/* One unsigned decimal field; advances *p past it. */
static bool field(const char **p, const char *end, uint64_t *out) {
  while (*p < end && **p == ' ') (*p)++;
  if (*p >= end || **p < '0' || **p > '9') return false;
  uint64_t v = 0;
  for (; *p < end && **p >= '0' && **p <= '9'; (*p)++) {
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (uint64_t)(**p - '0');
  }
  *out = v;
  return true;
}

/* Skips one field of any content (the state letter, signed numbers). */
static bool skip(const char **p, const char *end) {
  while (*p < end && **p == ' ') (*p)++;
  if (*p >= end) return false;
  while (*p < end && **p != ' ' && **p != '\n') (*p)++;
  return true;
}

sg_status sg__health_parse_stat(const char *text, size_t len, uint64_t *cpu_ticks, uint64_t *start_ticks) {
  /* The command name (field 2) is in parentheses and may itself hold spaces
   * and ')': the fields that follow start after the LAST ')'. */
  const char *close = NULL;
  for (size_t i = 0; i < len; i++)
    if (text[i] == ')') close = text + i;
  if (close == NULL) return sg__error(SG_ERR_FORMAT, "/proc/self/stat: no ')' after the command name");
  const char *p = close + 1, *end = text + len;
  uint64_t utime, stime, start;
  /* Fields 3..13 go before utime (14) and stime (15); 16..21 before starttime (22). */
  for (int f = 3; f <= 13; f++)
    if (!skip(&p, end)) goto bad;
  if (!field(&p, end, &utime) || !field(&p, end, &stime)) goto bad;
  for (int f = 16; f <= 21; f++)
    if (!skip(&p, end)) goto bad;
  if (!field(&p, end, &start)) goto bad;
  *cpu_ticks = utime + stime;
  *start_ticks = start;
  return SG_OK;
bad:
  return sg__error(SG_ERR_FORMAT, "/proc/self/stat: cannot read utime, stime and starttime");
}

unsigned sg__health_permille(uint64_t ticks, int64_t wall_ms, long ticks_per_s, long ncpu) {
  if (wall_ms <= 0 || ticks_per_s <= 0 || ncpu <= 0) return 0;
  /* (ticks / hz) s of CPU over (wall_ms / 1000) s x ncpu CPUs, in per mille;
   * in long double, as ticks x 10^6 could overflow for a long-lived process. */
  long double v =
      (long double)ticks * 1e6L / ((long double)ticks_per_s * (long double)wall_ms * (long double)ncpu);
  return v >= 1000 ? 1000 : (unsigned)(v + 0.5L);
}

sg_status sg_health_cpu_permille(sg_cpu_meter *m, unsigned *permille) {
  if (m == NULL || permille == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_health_cpu_permille: NULL argument");
  char text[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sg__error(SG_ERR_IO, "cannot open /proc/self/stat: %s", strerror(errno));
  ssize_t n = read(fd, text, sizeof text);
  int saved = errno;
  close(fd);
  if (n <= 0)
    return sg__error(SG_ERR_IO, "cannot read /proc/self/stat: %s", n < 0 ? strerror(saved) : "empty");
  uint64_t ticks, start;
  SG_CHECK(sg__health_parse_stat(text, (size_t)n, &ticks, &start));
  long hz = sysconf(_SC_CLK_TCK), ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  struct timespec ts;
  if (hz <= 0 || ncpu <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
    return sg__error(SG_ERR_IO, "sg_health_cpu_permille: no clock tick rate, CPU count or boot clock");
  /* starttime counts ticks since boot, as CLOCK_BOOTTIME does. */
  int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int64_t since_ms = m->valid ? m->wall_ms : (int64_t)(start * 1000 / (uint64_t)hz);
  uint64_t since_ticks = m->valid ? m->cpu_ticks : 0;
  if (m->valid && now_ms - since_ms < MIN_INTERVAL_MS) {
    *permille = m->last_permille;
    return SG_OK;
  }
  unsigned v =
      sg__health_permille(ticks >= since_ticks ? ticks - since_ticks : 0, now_ms - since_ms, hz, ncpu);
  *m = (sg_cpu_meter){now_ms, ticks, v, 1};
  *permille = v;
  return SG_OK;
}
