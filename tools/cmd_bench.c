/* sgrt bench allreduce: times sg_comm_allreduce (f32 sum, in place) on N local
 * ranks the way nccl-tests does: algbw = bytes / time, busbw = algbw x 2(n-1)/n,
 * with the median time over the timed iterations. With one rank nothing moves:
 * no algbw (null), busbw 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_number.h"

/* The ranges of the options (also in the help text and docs/cli.md). */
#define BENCH_NP_MAX 256
#define BENCH_ITERS_MAX 100000
#define BENCH_BYTES_MIN 4ull
#define BENCH_BYTES_MAX (1ull << 34) /* 16 GiB */

int cli_launch_ranks(int n, int restarts, int prefix, char **argv); /* cmd_launch.c */
int cli_bench_gpt(const cli_command *cmd, const char *np, const char *iters_s, int json,
                  int is_worker); /* cmd_bench_gpt.c */

/* --bytes: decimal digits (cli_number_u64), then an optional binary unit
 * K, M or G (either case) with an optional "i", and an optional "B":
 * 1048576, 16M, 64MiB, 1024B. */
static int parse_size(const char *s, unsigned long long *out) {
  size_t n = strspn(s, "0123456789");
  char digits[24];
  if (n == 0 || n >= sizeof digits) return -1;
  memcpy(digits, s, n);
  digits[n] = '\0';
  const char *unit = s + n;
  unsigned long long mul = 1;
  if (*unit == 'K' || *unit == 'k') mul = 1ull << 10, unit++;
  else if (*unit == 'M' || *unit == 'm') mul = 1ull << 20, unit++;
  else if (*unit == 'G' || *unit == 'g') mul = 1ull << 30, unit++;
  if (mul > 1 && *unit == 'i') unit++;
  if (*unit == 'B') unit++;
  uint64_t v;
  if (*unit != '\0' || !cli_number_u64(digits, 1, BENCH_BYTES_MAX / mul, &v) || v * mul < BENCH_BYTES_MIN)
    return -1;
  *out = v * mul;
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int worker(unsigned long long bytes, int iters, int json) {
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c;
  if (sg_comm_create(&cp, &c) != SG_OK) return cli_fail(SG_ERR_COMM, "bench: %s", sg_last_error());
  size_t count = (size_t)(bytes / 4);
  float *buf = malloc(count * sizeof *buf);
  double *t = malloc((size_t)iters * sizeof *t);
  if (buf == NULL || t == NULL) {
    free(buf);
    free(t);
    sg_comm_destroy(c);
    return cli_fail(SG_ERR_NO_MEMORY, "bench: out of memory");
  }
  for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
  sg_status st = SG_OK;
  for (int i = 0; i < 3 && st == SG_OK; i++)
    st = sg_comm_allreduce(c, buf, buf, count, SG_F32, SG_REDUCE_SUM);
  for (int i = 0; i < iters && st == SG_OK; i++) {
    st = sg_comm_barrier(c);
    double t0 = now_s();
    if (st == SG_OK) st = sg_comm_allreduce(c, buf, buf, count, SG_F32, SG_REDUCE_SUM);
    t[i] = now_s() - t0;
  }
  int rc = CLI_EXIT_OK;
  if (st != SG_OK) {
    rc = cli_fail(st, "bench: %s", sg_last_error());
  } else if (sg_comm_rank(c) == 0) {
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    int n = sg_comm_size(c);
    double algbw = (double)count * 4 / med / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
    if (n == 1) {
      /* One rank: the allreduce moves nothing, so bytes / time is no bandwidth (it read 12,192 GB/s). */
      if (json)
        printf("{\"np\": 1, \"bytes\": %llu, \"ms\": %.4f, \"algbw_gbs\": null, \"busbw_gbs\": 0, \"note\": "
               "\"one rank: nothing crosses a link, no bandwidth to report\"}\n",
               (unsigned long long)count * 4, med * 1e3);
      else
        printf("allreduce f32 sum  np 1  bytes %llu  time %.3f ms (median of %d)  algbw -  busbw 0 GB/s  "
               "(one rank: "
               "nothing crosses a link; use -n 2 or more)\n",
               (unsigned long long)count * 4, med * 1e3, iters);
    } else if (json)
      printf("{\"np\": %d, \"bytes\": %llu, \"ms\": %.4f, \"algbw_gbs\": %.3f, \"busbw_gbs\": %.3f}\n", n,
             (unsigned long long)count * 4, med * 1e3, algbw, busbw);
    else
      printf("allreduce f32 sum  np %d  bytes %llu  time %.3f ms (median of %d)  algbw %.2f GB/s  busbw %.2f "
             "GB/s\n",
             n, (unsigned long long)count * 4, med * 1e3, iters, algbw, busbw);
  }
  free(buf);
  free(t);
  sg_status dst = sg_comm_destroy(c);
  if (rc == CLI_EXIT_OK && dst != SG_OK) rc = cli_fail(dst, "bench: %s", sg_last_error());
  return rc;
}

static int run_bench(const cli_command *cmd, int argc, char **argv) {
  const char *np = "2", *bytes_s = NULL, *iters_s = NULL, *pos[1] = {NULL};
  int json = 0, is_worker = 0;
  const cli_option opts[] = {
      {"np", 'n', &np, NULL},   {"bytes", 'b', &bytes_s, NULL},  {"iters", 'i', &iters_s, NULL},
      {"json", 0, NULL, &json}, {"worker", 0, NULL, &is_worker},
  };
  int rc = cli_parse(cmd, argc, argv, opts, 5, pos, 1, 1);
  if (rc != CLI_CONTINUE) return rc;
  if (strcmp(pos[0], "gpt") == 0) return cli_bench_gpt(cmd, np, iters_s, json, is_worker);
  if (strcmp(pos[0], "allreduce") != 0)
    return cli_usage_error(cmd, "unknown benchmark '%s' (try allreduce or gpt)", pos[0]);
  if (iters_s == NULL) iters_s = "20";
  int64_t n, iters;
  if ((rc = cli_int_option(cmd, "-n", np, 1, BENCH_NP_MAX, &n)) != CLI_CONTINUE) return rc;
  if ((rc = cli_int_option(cmd, "--iters", iters_s, 1, BENCH_ITERS_MAX, &iters)) != CLI_CONTINUE) return rc;
  unsigned long long bytes;
  if (bytes_s == NULL)
    return cli_usage_error(cmd, "--bytes B is required (a size such as 1048576, 16M or 64MiB)");
  if (parse_size(bytes_s, &bytes) != 0)
    return cli_usage_error(
        cmd,
        "--bytes '%s' is not a size in [%llu, %llu] bytes (digits, then optionally K, M or "
        "G, i, B: 1048576, 16M, 64MiB)",
        bytes_s, BENCH_BYTES_MIN, BENCH_BYTES_MAX);
  if (is_worker) return worker(bytes, (int)iters, json);
  char exe[] = "/proc/self/exe";
  char bytes_arg[32], iters_arg[32];
  snprintf(bytes_arg, sizeof bytes_arg, "%llu", bytes);
  snprintf(iters_arg, sizeof iters_arg, "%lld", (long long)iters);
  char *args[] = {exe,        "bench",   "allreduce",
                  "--worker", "--bytes", bytes_arg,
                  "--iters",  iters_arg, json ? "--json" : NULL,
                  NULL};
  return cli_launch_ranks((int)n, 0, 0, args);
}

const cli_command cli_cmd_bench = {
    "bench",
    "allreduce -n N --bytes B [--iters I] [--json] | gpt [-n N] [--iters I] [--json]",
    "time allreduce on N local ranks (algbw and busbw, as nccl-tests), or the global page table",
    "  -n, --np N        ranks, 1..256 (default 2; gpt: 1..64)\n"
    "  -b, --bytes B     message size, 4 bytes..16 GiB: bytes, or with a K/M/G (binary) suffix\n"
    "  -i, --iters I     timed iterations, 1..100000 (default 20; the median is reported;\n"
    "                    gpt: 1..1000000, default 2000)\n"
    "  --json            one JSON line: np, bytes, ms, algbw_gbs, busbw_gbs\n"
    "                    (gpt: local_hit_ns, local_mops, local_miss_ns, remote_ns, cas_ns, cas_mops, ...)\n",
    run_bench,
};
