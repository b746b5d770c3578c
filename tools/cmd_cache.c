/* sgrt cache list|info [KEY]|clear [KEY] [--dir DIR] [--json]: the on-disk
 * compile cache (include/sgrt/cache.h, docs/compiler.md "Managing the
 * cache"): its entries as a table, the cache or one entry in detail, and
 * removing one entry or all of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* "236 B", "27.4 KiB", "1.2 MiB", like du -h. */
static const char *human_bytes(uint64_t b, char *buf, size_t cap) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1024) {
    snprintf(buf, cap, "%llu B", (unsigned long long)b);
    return buf;
  }
  double v = (double)b / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) v /= 1024.0, u++;
  snprintf(buf, cap, "%.1f %s", v, units[u]);
  return buf;
}

/* Local time "2024-05-01 12:00:00", or "-" for none. */
static const char *when(int64_t t, char *buf, size_t cap) {
  time_t tt = (time_t)t;
  struct tm tm;
  if (t <= 0 || localtime_r(&tt, &tm) == NULL || strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm) == 0)
    snprintf(buf, cap, "-");
  return buf;
}

static const char *graph_summary(const sg_cache_entry *e, char *buf, size_t cap) {
  if (e->graph_ops < 0 || e->graph_tensors < 0) snprintf(buf, cap, "-");
  else snprintf(buf, cap, "%lld ops, %lld tensors", (long long)e->graph_ops, (long long)e->graph_tensors);
  return buf;
}

static int is_key(const char *s) { return strlen(s) == 32 && strspn(s, "0123456789abcdefABCDEF") == 32; }

/* ---- JSON ------------------------------------------------------------------ */

static cJSON *json_count(int64_t v) { return v < 0 ? cJSON_CreateNull() : cJSON_CreateNumber((double)v); }
static cJSON *json_text(const char *s) { return s[0] ? cli_json_string(s) : cJSON_CreateNull(); }

static cJSON *json_entry(const sg_cache_entry *e) {
  cJSON *o = cJSON_CreateObject();
  int ok = o != NULL;
  ok = ok && cli_json_add(o, "key", cJSON_CreateString(e->key));
  ok = ok && cli_json_add(o, "valid", cJSON_CreateBool(e->valid));
  ok = ok && cli_json_add(o, "problem", e->valid ? cJSON_CreateNull() : cli_json_string(e->problem));
  ok = ok && cli_json_add(o, "bytes", cJSON_CreateNumber((double)e->bytes));
  ok = ok && cli_json_add(o, "created", json_count(e->created));
  ok = ok && cli_json_add(o, "graph_ops", json_count(e->graph_ops));
  ok = ok && cli_json_add(o, "graph_tensors", json_count(e->graph_tensors));
  ok = ok && cli_json_add(o, "graph_hash", json_text(e->graph_hash));
  ok = ok && cli_json_add(o, "kernels", json_count(e->kernels));
  ok = ok && cli_json_add(o, "fused_ops", json_count(e->fused_ops));
  ok = ok && cli_json_add(o, "device", json_text(e->device));
  ok = ok && cli_json_add(o, "compiler", json_text(e->compiler));
  ok = ok && cli_json_add(o, "sgrt_version", json_text(e->sgrt_version));
  return cli_json_finish(o, ok);
}

/* ---- list ------------------------------------------------------------------ */

typedef struct entries {
  sg_cache_entry *e;
  size_t n, cap;
  int out_of_memory;
} entries;

static int collect(const sg_cache_entry *e, void *ctx) {
  entries *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    sg_cache_entry *p = realloc(l->e, cap * sizeof *p);
    if (p == NULL) return l->out_of_memory = 1;
    l->e = p;
    l->cap = cap;
  }
  /* The library's struct may be newer (longer) than ours: copy what we know. */
  memset(&l->e[l->n], 0, sizeof *l->e);
  memcpy(&l->e[l->n], e, e->size < sizeof *e ? e->size : sizeof *e);
  l->n++;
  return 0;
}

static int list(const sg_cache_info *info, int json) {
  entries l = {0};
  sg_status st = sg_cache_list(info->dir, collect, &l);
  if (st != SG_OK) {
    free(l.e);
    return cli_fail(st, "cache list");
  }
  if (l.out_of_memory) {
    free(l.e);
    cli_error("cache list: out of memory");
    return CLI_EXIT_FAIL;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < l.n; i++) total += l.e[i].bytes;
  int rc = CLI_EXIT_OK;
  if (json) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    int ok = o != NULL && arr != NULL;
    for (size_t i = 0; ok && i < l.n; i++) ok = cli_json_add(arr, NULL, json_entry(&l.e[i]));
    ok = ok && cli_json_add(o, "dir", cli_json_string(info->dir));
    ok = ok && cli_json_add(o, "count", cJSON_CreateNumber((double)l.n));
    ok = ok && cli_json_add(o, "bytes", cJSON_CreateNumber((double)total));
    if (ok) ok = cli_json_add(o, "entries", arr);
    else cJSON_Delete(arr);
    rc = cli_print_json(cli_json_finish(o, ok));
  } else {
    char dir[1024], size[32], created[32], graph[64], kernels[24], device[64], problem[300];
    cli_printable(info->dir, dir, sizeof dir);
    if (l.n == 0) {
      printf("no entries in %s\n", dir);
    } else {
      printf("%-32s  %10s  %-19s  %-22s  %7s  %-6s  %s\n", "KEY", "SIZE", "CREATED", "GRAPH", "KERNELS",
             "DEVICE", "STATUS");
      for (size_t i = 0; i < l.n; i++) {
        const sg_cache_entry *e = &l.e[i];
        if (e->kernels < 0) snprintf(kernels, sizeof kernels, "-");
        else snprintf(kernels, sizeof kernels, "%lld", (long long)e->kernels);
        printf("%-32s  %10s  %-19s  %-22s  %7s  %-6s  %s%s\n", e->key,
               human_bytes(e->bytes, size, sizeof size), when(e->created, created, sizeof created),
               graph_summary(e, graph, sizeof graph), kernels,
               e->device[0] ? cli_printable(e->device, device, sizeof device) : "-",
               e->valid ? "ok" : "invalid: ",
               e->valid ? "" : cli_printable(e->problem, problem, sizeof problem));
      }
      printf("%zu %s, %s in %s\n", l.n, l.n == 1 ? "entry" : "entries", human_bytes(total, size, sizeof size),
             dir);
    }
  }
  free(l.e);
  return rc;
}

/* ---- info ------------------------------------------------------------------ */

static int info_cache(const sg_cache_info *info, int json) {
  if (json) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    ok = ok && cli_json_add(o, "dir", cli_json_string(info->dir));
    ok = ok && cli_json_add(o, "enabled", cJSON_CreateBool(info->enabled));
    ok = ok && cli_json_add(o, "exists", cJSON_CreateBool(info->exists));
    ok = ok && cli_json_add(o, "entries", cJSON_CreateNumber((double)info->entries));
    ok = ok && cli_json_add(o, "bytes", cJSON_CreateNumber((double)info->bytes));
    ok = ok && cli_json_add(o, "temporaries", cJSON_CreateNumber((double)info->temporaries));
    return cli_print_json(cli_json_finish(o, ok));
  }
  char dir[1024], size[32];
  printf("%-13s%s\n", "dir:", cli_printable(info->dir, dir, sizeof dir));
  printf("%-13s%s\n", "enabled:", info->enabled ? "yes" : "no (SG_CACHE=0: sessions do not use it)");
  printf("%-13s%s\n",
         "exists:", info->exists ? "yes" : "no (created by the first session that stores an entry)");
  printf("%-13s%llu\n", "entries:", (unsigned long long)info->entries);
  printf("%-13s%llu (%s)\n", "bytes:", (unsigned long long)info->bytes,
         human_bytes(info->bytes, size, sizeof size));
  printf("%-13s%llu\n", "temporaries:", (unsigned long long)info->temporaries);
  return CLI_EXIT_OK;
}

static int info_entry(const sg_cache_info *info, const char *key, int json) {
  sg_cache_entry e = SG_CACHE_ENTRY_INIT;
  sg_status st = sg_cache_get_entry(info->dir, key, &e);
  if (st != SG_OK) return cli_fail(st, "cache info %s", key);
  if (json) {
    cJSON *o = json_entry(&e);
    int ok = o != NULL && cli_json_add(o, "dir", cli_json_string(info->dir));
    return cli_print_json(cli_json_finish(o, ok));
  }
  char buf[1024], size[32], created[32];
  printf("%-13s%s\n", "key:", e.key);
  printf("%-13s%s\n", "dir:", cli_printable(info->dir, buf, sizeof buf));
  if (e.valid) printf("%-13syes\n", "valid:");
  else printf("%-13sno: %s\n", "valid:", cli_printable(e.problem, buf, sizeof buf));
  printf("%-13s%llu (%s)\n", "bytes:", (unsigned long long)e.bytes, human_bytes(e.bytes, size, sizeof size));
  printf("%-13s%s\n", "created:", when(e.created, created, sizeof created));
  printf("%-13s%s\n", "graph:", graph_summary(&e, buf, sizeof buf));
  printf("%-13s%s\n", "graph hash:", e.graph_hash[0] ? cli_printable(e.graph_hash, buf, sizeof buf) : "-");
  if (e.kernels < 0) printf("%-13s-\n", "kernels:");
  else if (e.fused_ops < 0) printf("%-13s%lld\n", "kernels:", (long long)e.kernels);
  else printf("%-13s%lld (%lld ops fused)\n", "kernels:", (long long)e.kernels, (long long)e.fused_ops);
  printf("%-13s%s\n", "device:", e.device[0] ? cli_printable(e.device, buf, sizeof buf) : "-");
  printf("%-13s%s\n", "compiler:", e.compiler[0] ? cli_printable(e.compiler, buf, sizeof buf) : "-");
  printf("%-13s%s\n", "sgrt:", e.sgrt_version[0] ? cli_printable(e.sgrt_version, buf, sizeof buf) : "-");
  return CLI_EXIT_OK;
}

/* ---- clear ----------------------------------------------------------------- */

static int clear(const sg_cache_info *info, const char *key, int json) {
  size_t removed = 0;
  sg_status st = sg_cache_clear(info->dir, key, &removed);
  if (st != SG_OK) {
    char what[96];
    if (key) snprintf(what, sizeof what, "cache clear %s", key);
    else
      snprintf(what, sizeof what, "cache clear (%zu %s removed)", removed,
               removed == 1 ? "entry" : "entries");
    return cli_fail(st, "%s", what);
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    ok = ok && cli_json_add(o, "dir", cli_json_string(info->dir));
    ok = ok && cli_json_add(o, "key", key ? cJSON_CreateString(key) : cJSON_CreateNull());
    ok = ok && cli_json_add(o, "removed", cJSON_CreateNumber((double)removed));
    return cli_print_json(cli_json_finish(o, ok));
  }
  char dir[1024];
  cli_printable(info->dir, dir, sizeof dir);
  if (key) printf("removed entry %s from %s\n", key, dir);
  else printf("removed %zu %s from %s\n", removed, removed == 1 ? "entry" : "entries", dir);
  return CLI_EXIT_OK;
}

static int run_cache(const cli_command *cmd, int argc, char **argv) {
  int json = 0;
  const char *dir = NULL, *pos[2] = {NULL, NULL};
  const cli_option opts[] = {{"json", 0, NULL, &json}, {"dir", 0, &dir, NULL}};
  int rc = cli_parse(cmd, argc, argv, opts, 2, pos, 1, 2);
  if (rc != CLI_CONTINUE) return rc;
  const char *action = pos[0], *key = pos[1];
  if (strcmp(action, "list") != 0 && strcmp(action, "info") != 0 && strcmp(action, "clear") != 0)
    return cli_usage_error(cmd, "unknown action '%s' (list, info or clear)", action);
  if (key && strcmp(action, "list") == 0) return cli_usage_error(cmd, "list takes no KEY ('%s')", key);
  if (key && !is_key(key))
    return cli_usage_error(cmd, "KEY '%s' is not 32 hex digits (the names 'sgrt cache list' shows)", key);
  /* Where the cache is (and whether it may be read) before anything else. */
  sg_cache_info info = SG_CACHE_INFO_INIT;
  sg_status st = sg_cache_get_info(dir, &info);
  if (st != SG_OK) return cli_fail(st, "cache %s", action);
  if (strcmp(action, "list") == 0) return list(&info, json);
  if (strcmp(action, "info") == 0) return key ? info_entry(&info, key, json) : info_cache(&info, json);
  return clear(&info, key, json);
}

const cli_command cli_cmd_cache = {
    .name = "cache",
    .args = "list | info [KEY] | clear [KEY] [--dir DIR] [--json]",
    .summary = "list, describe or clear the on-disk compile cache of generated kernels",
    .help = "  list         every entry: key, size, creation time, graph, kernels, device, and\n"
            "               whether it validates against its manifest (newest first)\n"
            "  info         the cache: directory, whether sessions use it, entries, bytes\n"
            "  info KEY     one entry in detail, validated\n"
            "  clear        remove every entry and temporary directory (nothing else)\n"
            "  clear KEY    remove one entry\n"
            "\n"
            "KEY is an entry's name: 32 hex digits. The cache is $SG_CACHE_DIR, else\n"
            "$XDG_CACHE_HOME/sgrt, else ~/.cache/sgrt (docs/compiler.md).\n"
            "\n"
            "options:\n"
            "  --dir DIR    the cache directory (default: as sessions find it)\n"
            "  --json       print one JSON object as the last line of stdout\n"
            "  -h, --help   show this help\n"
            "\n"
            "exit status: 0 success, 1 failure (no such entry, a refused cache, a file that\n"
            "cannot be removed), 2 bad command line (also a KEY that is not 32 hex digits)\n",
    .run = run_cache,
};
