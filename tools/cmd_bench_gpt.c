/* sgrt bench gpt: the global page table (SPEC A6, docs/gmem.md). Launches N
 * local ranks (default 2, as `sgrt bench allreduce`); rank 0 times
 *   - local translation, TLB hit (a batch over 256 warm pages) and miss (the
 *     page's slot dropped first), and CAS updates of a local entry -- on a
 *     page table of its own, before the ranks connect, since none of these
 *     communicate and the other rank's polling would share the CPU;
 *   - UCX round trips to rank 1 for scale (an 8-byte get, a fetch-add);
 *   - remote translation: a table-page fetch from rank 1 by RMA get (three
 *     gets, sequence-locked); then hits in the same table page;
 *   - CAS updates of an entry of rank 1 (UCX atomics), cold and with the
 *     entry translated;
 * then every rank updates an entry of its right neighbour at once, for the
 * aggregate CAS throughput. Single-operation times are medians. A rank that
 * is not measuring waits in a collective, which serves the one-sided traffic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_launch_ranks(int n, int restarts, int prefix, char **argv); /* cmd_launch.c */
int cli_bench_gpt(const cli_command *cmd, const char *np, const char *iters_s, int json, int is_worker);

enum { HOT = 256, PAGES = 4096 };
/* The ranges of -n and --iters (also in `sgrt bench --help` and docs/cli.md). */
enum { GPT_NP_MAX = 64, GPT_ITERS_MAX = 1000000, GPT_ITERS_DEFAULT = 2000 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

typedef struct results {
  double hit_ns, hit_rate, miss_ns, cas_local_ns;                                 /* this process alone */
  double get_ns, get4k_ns, amo_ns, remote_ns, remote_hit_ns, cas_cold_ns, cas_ns; /* rank 0 -> rank 1 */
  double cas_mops;                                                                /* all ranks at once */
} results;

/* An entry no allocation uses (the bench's CAS target on node `node`), and
 * the mapping its value v stands for: frame v of the node's DRAM tier. */
static sg_gva cas_target(int node) {
  return sg_gva_make((uint16_t)node, (uint64_t)(PAGES + 100) * SG_GMEM_PAGE_SIZE);
}
static sg_gmem_pte cas_value(int node, uint64_t v) {
  sg_gmem_pte p = {(uint16_t)node, 0, 0, SG_GMEM_LOC(SG_GMEM_DRAM, 0, (v % 1024) * SG_GMEM_PAGE_SIZE)};
  return p;
}

/* Times `iters` CAS updates of node's target entry; *ns gets the median. */
static sg_status time_cas(sg_gmem *gm, int node, int iters, double *t, double *ns) {
  sg_gmem_pte cur;
  sg_status st = sg_gmem_pte_read(gm, cas_target(node), &cur);
  if (st != SG_OK) return st;
  for (int i = 0; i < iters; i++) {
    sg_gmem_pte want = cas_value(node, (uint64_t)i + 1), got;
    double t0 = now_ns();
    st = sg_gmem_pte_cas(gm, cas_target(node), cur.version, &want, &got);
    t[i] = now_ns() - t0;
    if (st != SG_OK) return st;
    cur = got;
  }
  *ns = median(t, iters);
  return SG_OK;
}

/* Local translation, on a page table of this process alone: the hit and
 * miss paths never communicate, and measuring them before the ranks connect
 * keeps the other rank's polling off the CPU meanwhile. */
static sg_status measure_local(int iters, double *t, results *r) {
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  gp.table_pages = 2 * PAGES;
  gp.dram_bytes = (size_t)PAGES * SG_GMEM_PAGE_SIZE;
  sg_gmem *gm;
  sg_gva base;
  sg_gmem_loc loc;
  sg_status st = sg_gmem_create(NULL, &gp, &gm);
  if (st != SG_OK) return st;
  st = sg_gmem_alloc(gm, SG_GMEM_DRAM, (size_t)PAGES * SG_GMEM_PAGE_SIZE, SG_GMEM_READ, &base);
  /* TLB hits: warm, then a long batch; the stats say how many really hit. */
  for (int i = 0; i < HOT && st == SG_OK; i++)
    st = sg_gmem_translate(gm, sg_gva_make(0, base.lo + (uint64_t)i * SG_GMEM_PAGE_SIZE), SG_GMEM_READ, &loc);
  sg_gmem_stats s0 = SG_GMEM_STATS_INIT, s1 = SG_GMEM_STATS_INIT;
  sg_gmem_stats_get(gm, &s0);
  long batch = (long)iters * 1000;
  uint64_t sink = 0;
  double t0 = now_ns();
  for (long k = 0; k < batch && st == SG_OK; k++) {
    sg_gva g = sg_gva_make(0, base.lo + (uint64_t)(k % HOT) * SG_GMEM_PAGE_SIZE + (uint64_t)(k & 63) * 64);
    st = sg_gmem_translate(gm, g, SG_GMEM_READ, &loc);
    sink += loc.tier_offset;
  }
  r->hit_ns = (now_ns() - t0) / (double)batch;
  sg_gmem_stats_get(gm, &s1);
  r->hit_rate = (double)(s1.tlb_hits - s0.tlb_hits) / (double)batch;
  if (sink == 1) puts(""); /* keeps the loop's results alive */
  /* TLB misses: each translation first loses its slot. */
  for (int i = 0; i < iters && st == SG_OK; i++) {
    sg_gva g = sg_gva_make(0, base.lo + (uint64_t)(i % PAGES) * SG_GMEM_PAGE_SIZE);
    sg_gmem_tlb_invalidate(gm, g);
    double a = now_ns();
    st = sg_gmem_translate(gm, g, SG_GMEM_READ, &loc);
    t[i] = now_ns() - a;
  }
  if (st == SG_OK) r->miss_ns = median(t, iters);
  if (st == SG_OK) st = time_cas(gm, 0, iters, t, &r->cas_local_ns);
  sg_status ds = sg_gmem_destroy(gm);
  return st != SG_OK ? st : ds;
}

/* UCX round trips to rank 1 for scale: gets of 8 bytes and of a table page
 * (4 KiB), and a 64-bit atomic. */
static sg_status measure_rtt(sg_comm *c, int iters, double *t, results *r) {
  static uint64_t page[512], got_page[512];
  uint64_t got;
  sg_comm_window *w;
  sg_status st = sg_comm_window_create(c, page, sizeof page, &w);
  if (st != SG_OK) return st;
  if (sg_comm_rank(c) == 0) {
    for (int k = 0; k < 2; k++) {
      for (int i = 0; i < iters && st == SG_OK; i++) {
        double a = now_ns();
        st = k == 0 ? sg_comm_get(w, 1, 0, &got, 8) : sg_comm_get(w, 1, 0, got_page, sizeof got_page);
        if (st == SG_OK) st = sg_comm_window_flush(w);
        t[i] = now_ns() - a;
      }
      if (st == SG_OK) *(k == 0 ? &r->get_ns : &r->get4k_ns) = median(t, iters);
    }
    for (int i = 0; i < iters && st == SG_OK; i++) {
      double a = now_ns();
      st = sg_comm_fetch_add(w, 1, 0, 1, &got);
      t[i] = now_ns() - a;
    }
    if (st == SG_OK) r->amo_ns = median(t, iters);
  }
  sg_status ds = sg_comm_window_destroy(w); /* collective: rank 1 serves us in here */
  return st != SG_OK ? st : ds;
}

static sg_status measure_remote(sg_gmem *gm, sg_comm *c, const sg_gva *pages, int iters, double *t,
                                results *r) {
  int me = sg_comm_rank(c), n = sg_comm_size(c);
  sg_status st = SG_OK;
  sg_gmem_loc loc;
  if (me == 0) {
    /* Remote translation: every one a table-page fetch from rank 1. */
    for (int i = 0; i < iters && st == SG_OK; i++) {
      sg_gva g = sg_gva_make(1, pages[1].lo + (uint64_t)(i % PAGES) * SG_GMEM_PAGE_SIZE);
      sg_gmem_tlb_invalidate(gm, g);
      double a = now_ns();
      st = sg_gmem_translate(gm, g, SG_GMEM_READ, &loc);
      t[i] = now_ns() - a;
    }
    if (st == SG_OK) r->remote_ns = median(t, iters);
    /* After a fetch, the rest of that table page hits locally. */
    for (int i = 0; i < iters && st == SG_OK; i++) {
      sg_gva g = sg_gva_make(1, pages[1].lo + (uint64_t)(i % 200) * SG_GMEM_PAGE_SIZE);
      double a = now_ns();
      st = sg_gmem_translate(gm, g, SG_GMEM_READ, &loc);
      t[i] = now_ns() - a;
    }
    if (st == SG_OK) r->remote_hit_ns = median(t, iters);
    /* CAS on rank 1's entry: cold (no translation of it here), then warm
     * (the updater translates the entry, as a user of it would). */
    if (st == SG_OK) st = time_cas(gm, 1, iters, t, &r->cas_cold_ns);
    if (st == SG_OK) st = sg_gmem_translate(gm, cas_target(1), 0, &loc);
    if (st == SG_OK) st = time_cas(gm, 1, iters, t, &r->cas_ns);
  }
  /* The others serve rank 0 from inside this barrier. */
  sg_status bs = sg_comm_barrier(c);
  if (st == SG_OK) st = bs;
  /* Throughput: everyone updates its right neighbour's entry at once. */
  int right = (me + 1) % n;
  sg_gmem_pte cur, first = cas_value(right, 5);
  if (st == SG_OK) st = sg_gmem_pte_read(gm, cas_target(right), &cur);
  /* The first update maps the entry (it may be fresh); then translate it. */
  if (st == SG_OK) st = sg_gmem_pte_cas(gm, cas_target(right), cur.version, &first, &cur);
  if (st == SG_OK) st = sg_gmem_translate(gm, cas_target(right), 0, &loc);
  double t0 = now_ns();
  for (int i = 0; i < iters && st == SG_OK; i++) {
    sg_gmem_pte want = cas_value(right, (uint64_t)i + 7), got;
    st = sg_gmem_pte_cas(gm, cas_target(right), cur.version, &want, &got);
    cur = got;
  }
  int64_t mine = (int64_t)((double)iters / ((now_ns() - t0) * 1e-9)), total = 0;
  /* Stay in the barrier's progress until everyone is done updating. */
  bs = sg_comm_barrier(c);
  if (st == SG_OK) st = bs;
  if (st == SG_OK) st = sg_comm_allreduce(c, &mine, &total, 1, SG_I64, SG_REDUCE_SUM);
  r->cas_mops = (double)total / 1e6;
  return st;
}

static void print_results(const results *r, int n, int iters, int json) {
  if (json) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "np", n) && cJSON_AddNumberToObject(o, "iters", iters);
    ok = ok && cJSON_AddNumberToObject(o, "local_hit_ns", r->hit_ns) &&
         cJSON_AddNumberToObject(o, "local_mops", 1e3 / r->hit_ns) &&
         cJSON_AddNumberToObject(o, "local_hit_rate", r->hit_rate) &&
         cJSON_AddNumberToObject(o, "local_miss_ns", r->miss_ns) &&
         cJSON_AddNumberToObject(o, "cas_local_ns", r->cas_local_ns);
    if (n > 1)
      ok = ok && cJSON_AddNumberToObject(o, "rma_get_ns", r->get_ns) &&
           cJSON_AddNumberToObject(o, "rma_get_4k_ns", r->get4k_ns) &&
           cJSON_AddNumberToObject(o, "rma_atomic_ns", r->amo_ns) &&
           cJSON_AddNumberToObject(o, "remote_ns", r->remote_ns) &&
           cJSON_AddNumberToObject(o, "remote_hit_ns", r->remote_hit_ns) &&
           cJSON_AddNumberToObject(o, "cas_ns", r->cas_ns) &&
           cJSON_AddNumberToObject(o, "cas_cold_ns", r->cas_cold_ns) &&
           cJSON_AddNumberToObject(o, "cas_mops", r->cas_mops);
    else ok = ok && cJSON_AddNullToObject(o, "remote_ns") && cJSON_AddNullToObject(o, "cas_ns");
    cli_print_json(cli_json_finish(o, ok));
    return;
  }
  printf("global page table, %d rank%s (medians of %d; hits: mean over %d x 1000)\n", n, n > 1 ? "s" : "",
         iters, iters);
  printf("  local translation, TLB hit    %9.1f ns  %7.2f Mops/s  (hit rate %.4f)\n", r->hit_ns,
         1e3 / r->hit_ns, r->hit_rate);
  printf("  local translation, TLB miss   %9.1f ns\n", r->miss_ns);
  printf("  CAS update, local entry       %9.1f ns\n", r->cas_local_ns);
  if (n < 2) return;
  printf("  UCX round trip: get 8 B / get 4 KiB / atomic  %.1f / %.1f / %.1f ns\n", r->get_ns, r->get4k_ns,
         r->amo_ns);
  printf("  remote translation (3 gets)   %9.1f ns\n", r->remote_ns);
  printf("  remote, same table page       %9.1f ns  (the fetch filled the TLB)\n", r->remote_hit_ns);
  printf("  CAS update, remote entry      %9.1f ns  (cold: %.1f ns)\n", r->cas_ns, r->cas_cold_ns);
  printf("  CAS throughput, %d ranks       %9.3f Mops/s\n", n, r->cas_mops);
}

static int worker(int iters, int json) {
  results r = {0};
  double *t = malloc((size_t)iters * sizeof *t);
  if (t == NULL) return cli_fail(SG_ERR_NO_MEMORY, "bench gpt: out of memory");
  const char *rank = getenv("SG_RANK");
  sg_status st = SG_OK;
  if (rank != NULL && strcmp(rank, "0") == 0) st = measure_local(iters, t, &r);
  if (st != SG_OK) {
    free(t);
    return cli_fail(st, "bench gpt: %s", sg_last_error());
  }
  sg_comm_params cp = SG_COMM_PARAMS_INIT;
  sg_comm *c;
  if (sg_comm_create(&cp, &c) != SG_OK) {
    free(t);
    return cli_fail(SG_ERR_COMM, "bench gpt: %s", sg_last_error());
  }
  int n = sg_comm_size(c), me = sg_comm_rank(c);
  sg_gmem_params gp = SG_GMEM_PARAMS_INIT;
  gp.table_pages = 2 * PAGES;
  gp.dram_bytes = (size_t)PAGES * SG_GMEM_PAGE_SIZE;
  sg_gmem *gm = NULL;
  sg_gva mine = {0, 0}, *pages = calloc((size_t)n, sizeof *pages);
  uint64_t rec[2], *all = calloc((size_t)n * 2, sizeof *all);
  st = pages && all ? SG_OK : SG_ERR_NO_MEMORY;
  if (st == SG_OK && n > 1) st = measure_rtt(c, iters, t, &r);
  if (st == SG_OK) st = sg_gmem_create(c, &gp, &gm);
  /* PAGES pages on every rank: the translation targets. */
  if (st == SG_OK)
    st = sg_gmem_alloc(gm, SG_GMEM_DRAM, (size_t)PAGES * SG_GMEM_PAGE_SIZE, SG_GMEM_READ, &mine);
  rec[0] = mine.hi;
  rec[1] = mine.lo;
  if (st == SG_OK) st = sg_comm_allgather(c, rec, all, 2, SG_I64);
  for (int i = 0; i < n && st == SG_OK; i++) pages[i] = (sg_gva){all[2 * i], all[2 * i + 1]};
  if (st == SG_OK && n > 1) st = measure_remote(gm, c, pages, iters, t, &r);
  int rc = CLI_EXIT_OK;
  if (st != SG_OK) rc = cli_fail(st, "bench gpt: %s", sg_last_error());
  else if (me == 0) print_results(&r, n, iters, json);
  free(pages);
  free(all);
  free(t);
  sg_status ds = sg_gmem_destroy(gm);
  if (rc == CLI_EXIT_OK && ds != SG_OK) rc = cli_fail(ds, "bench gpt: %s", sg_last_error());
  ds = sg_comm_destroy(c);
  if (rc == CLI_EXIT_OK && ds != SG_OK) rc = cli_fail(ds, "bench gpt: %s", sg_last_error());
  return rc;
}

int cli_bench_gpt(const cli_command *cmd, const char *np, const char *iters_s, int json, int is_worker) {
  int64_t n, iters = GPT_ITERS_DEFAULT;
  int rc = cli_int_option(cmd, "-n", np, 1, GPT_NP_MAX, &n);
  if (rc == CLI_CONTINUE && iters_s) rc = cli_int_option(cmd, "--iters", iters_s, 1, GPT_ITERS_MAX, &iters);
  if (rc != CLI_CONTINUE) return rc;
  if (is_worker) return worker((int)iters, json);
  char exe[] = "/proc/self/exe", iters_arg[32];
  snprintf(iters_arg, sizeof iters_arg, "%lld", (long long)iters);
  char *args[] = {exe, "bench", "gpt", "--worker", "--iters", iters_arg, json ? "--json" : NULL, NULL};
  return cli_launch_ranks((int)n, 0, 0, args);
}
