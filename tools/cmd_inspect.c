/* sgrt inspect FILE [--json] [--batch N] [--dim NAME=N]...: what a .sgg file or ONNX model
 * holds — format (and .sgg version), content hashes, op and tensor counts,
 * ops by kind, parameter and state sizes, graph inputs and outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct kind_count {
  sg_op_kind kind;
  int32_t count;
} kind_count;

/* Count, elements and bytes of the tensors of one role. */
typedef struct role_total {
  int32_t count;
  int64_t elements;
  uint64_t bytes;
} role_total;

typedef struct summary {
  int onnx; /* an ONNX model, imported; else a .sgg file */
  unsigned version_major, version_minor;
  char hash[17], hash_weights[17];
  int32_t n_tensors, n_ops;
  kind_count *kinds; /* sorted by count, then name */
  int n_kinds;
  role_total parameters, state, optimizer_state, constants;
} summary;

static int by_count_then_name(const void *pa, const void *pb) {
  const kind_count *a = pa, *b = pb;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  return strcmp(sg_op_kind_name(a->kind), sg_op_kind_name(b->kind));
}

static int summarize(const sg_graph *g, const char *path, summary *s) {
  memset(s, 0, sizeof *s);
  uint64_t h;
  sg_status st = sg_graph_hash(g, 0, &h);
  if (st != SG_OK) return cli_fail(st, "cannot hash '%s'", path);
  cli_hex64(h, s->hash);
  st = sg_graph_hash(g, SG_HASH_WEIGHTS, &h);
  if (st != SG_OK) return cli_fail(st, "cannot hash '%s' with weights", path);
  cli_hex64(h, s->hash_weights);
  s->onnx = !cli_is_sgg_file(path);
  if (!s->onnx && cli_sgg_version(path, &s->version_major, &s->version_minor) != CLI_EXIT_OK)
    return CLI_EXIT_FAIL;

  s->n_tensors = sg_graph_num_tensors(g);
  s->n_ops = sg_graph_num_ops(g);
  /* Distinct kinds are few (dozens); a linear search per op is plenty. */
  s->kinds = calloc(s->n_ops > 0 ? (size_t)s->n_ops : 1, sizeof *s->kinds);
  if (s->kinds == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAIL;
  }
  for (int32_t i = 0; i < s->n_ops; i++) {
    sg_op_info op;
    st = sg_graph_op_info(g, i, &op);
    if (st != SG_OK) return cli_fail(st, "cannot read op %d of '%s'", (int)i, path);
    int k = 0;
    while (k < s->n_kinds && s->kinds[k].kind != op.kind) k++;
    if (k == s->n_kinds) s->kinds[s->n_kinds++].kind = op.kind;
    s->kinds[k].count++;
  }
  qsort(s->kinds, (size_t)s->n_kinds, sizeof *s->kinds, by_count_then_name);

  for (int32_t i = 0; i < s->n_tensors; i++) {
    sg_tensor_info t;
    st = sg_graph_tensor_info(g, (sg_tensor){i}, &t);
    if (st != SG_OK) return cli_fail(st, "cannot read tensor %d of '%s'", (int)i, path);
    role_total *r = t.role == SG_ROLE_PARAMETER         ? &s->parameters
                    : t.role == SG_ROLE_STATE           ? &s->state
                    : t.role == SG_ROLE_OPTIMIZER_STATE ? &s->optimizer_state
                    : t.role == SG_ROLE_CONSTANT        ? &s->constants
                                                        : NULL;
    if (r == NULL) continue;
    r->count++;
    r->elements += t.numel;
    r->bytes += t.nbytes;
  }
  return CLI_EXIT_OK;
}

/* ---- text ---------------------------------------------------------------- */

static void print_total(const char *label, const role_total *r) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)r->bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, u++;
  printf("%-17s%d tensors, %lld elements, %llu bytes", label, (int)r->count, (long long)r->elements,
         (unsigned long long)r->bytes);
  if (u > 0) printf(" (%.1f %s)", v, units[u]);
  putchar('\n');
}

/* A symbolic dim of an input is shown by its name ("batch"; "?" without one). */
static void print_tensor_line(const sg_graph *g, sg_tensor t, const sg_onnx_symbolic_dim *sym, size_t n_sym) {
  sg_tensor_info info;
  if (sg_graph_tensor_info(g, t, &info) != SG_OK) return;
  char name[256];
  printf("  %-24s %-5s [", cli_printable(info.name, name, sizeof name), sg_dtype_name(info.dtype));
  for (int i = 0; i < info.ndim; i++) {
    const sg_onnx_symbolic_dim *s = NULL;
    for (size_t k = 0; k < n_sym && s == NULL; k++)
      if (sym[k].dim == i && strcmp(sym[k].input, info.name) == 0) s = &sym[k];
    if (s != NULL) printf("%s%s", i ? "," : "", s->name[0] ? cli_printable(s->name, name, sizeof name) : "?");
    else printf("%s%lld", i ? "," : "", (long long)info.dims[i]);
  }
  printf("]\n");
}

static void print_text(const sg_graph *g, const char *path, const summary *s, const sg_onnx_symbolic_dim *sym,
                       size_t n_sym) {
  char file[1024];
  printf("%-17s%s\n", "file:", cli_printable(path, file, sizeof file));
  if (s->onnx) printf("%-17sonnx\n", "format:");
  else printf("%-17ssgg %u.%u\n", "format:", s->version_major, s->version_minor);
  printf("%-17s%s\n", "hash:", s->hash);
  printf("%-17s%s\n", "hash (weights):", s->hash_weights);
  printf("%-17s%d\n", "tensors:", (int)s->n_tensors);
  printf("%-17s%d\n", "ops:", (int)s->n_ops);
  printf("%-17s", "ops by kind:");
  for (int k = 0; k < s->n_kinds; k++)
    printf("%s%s %d", k ? ", " : "", sg_op_kind_name(s->kinds[k].kind), (int)s->kinds[k].count);
  putchar('\n');
  print_total("parameters:", &s->parameters);
  print_total("state:", &s->state);
  print_total("optimizer state:", &s->optimizer_state);
  print_total("constants:", &s->constants);
  printf("inputs (%d):\n", (int)sg_graph_num_inputs(g));
  for (int32_t i = 0; i < sg_graph_num_inputs(g); i++) print_tensor_line(g, sg_graph_input(g, i), sym, n_sym);
  printf("outputs (%d):\n", (int)sg_graph_num_outputs(g));
  for (int32_t i = 0; i < sg_graph_num_outputs(g); i++) print_tensor_line(g, sg_graph_output(g, i), NULL, 0);
  if (n_sym > 0)
    printf(
        "symbolic dims:   %zu (shown by name; sized 1 in the outputs and totals; --dim NAME=N or --batch N "
        "sizes them)\n",
        n_sym);
}

/* ---- JSON ---------------------------------------------------------------- */

static cJSON *json_total(const role_total *r) {
  cJSON *o = cJSON_CreateObject();
  int ok = o != NULL;
  ok = ok && cli_json_add(o, "count", cJSON_CreateNumber(r->count));
  ok = ok && cli_json_add(o, "elements", cJSON_CreateNumber((double)r->elements));
  ok = ok && cli_json_add(o, "bytes", cJSON_CreateNumber((double)r->bytes));
  return cli_json_finish(o, ok);
}

static cJSON *json_tensors(const sg_graph *g, int outputs) {
  cJSON *arr = cJSON_CreateArray();
  int ok = arr != NULL;
  int32_t n = outputs ? sg_graph_num_outputs(g) : sg_graph_num_inputs(g);
  for (int32_t i = 0; ok && i < n; i++)
    ok = cli_json_add(arr, NULL, cli_json_tensor(g, outputs ? sg_graph_output(g, i) : sg_graph_input(g, i)));
  return cli_json_finish(arr, ok);
}

static cJSON *json_summary(const sg_graph *g, const char *path, const summary *s,
                           const sg_onnx_symbolic_dim *sym, size_t n_sym) {
  char version[32];
  snprintf(version, sizeof version, "%u.%u", s->version_major, s->version_minor);
  cJSON *kinds = cJSON_CreateObject();
  int ok = kinds != NULL;
  for (int k = 0; ok && k < s->n_kinds; k++)
    ok = cli_json_add(kinds, sg_op_kind_name(s->kinds[k].kind), cJSON_CreateNumber(s->kinds[k].count));
  kinds = cli_json_finish(kinds, ok);

  cJSON *o = cJSON_CreateObject();
  ok = o != NULL;
  ok = ok && cli_json_add(o, "file", cli_json_string(path));
  ok = ok && cli_json_add(o, "format", cJSON_CreateString(s->onnx ? "onnx" : "sgg"));
  ok = ok && cli_json_add(o, "format_version", s->onnx ? cJSON_CreateNull() : cJSON_CreateString(version));
  ok = ok && cli_json_add(o, "hash", cJSON_CreateString(s->hash));
  ok = ok && cli_json_add(o, "hash_with_weights", cJSON_CreateString(s->hash_weights));
  ok = ok && cli_json_add(o, "num_tensors", cJSON_CreateNumber(s->n_tensors));
  ok = ok && cli_json_add(o, "num_ops", cJSON_CreateNumber(s->n_ops));
  if (ok) ok = cli_json_add(o, "ops_by_kind", kinds);
  else cJSON_Delete(kinds);
  ok = ok && cli_json_add(o, "parameters", json_total(&s->parameters));
  ok = ok && cli_json_add(o, "state", json_total(&s->state));
  ok = ok && cli_json_add(o, "optimizer_state", json_total(&s->optimizer_state));
  ok = ok && cli_json_add(o, "constants", json_total(&s->constants));
  ok = ok && cli_json_add(o, "inputs", json_tensors(g, 0));
  ok = ok && cli_json_add(o, "outputs", json_tensors(g, 1));
  /* Sized 1 in the shapes above when neither --dim nor --batch sized them. */
  ok = ok && cli_json_add(o, "symbolic_dims", cli_json_symbolic(sym, n_sym));
  return cli_json_finish(o, ok);
}

static int run_inspect(const cli_command *cmd, int argc, char **argv) {
  int json = 0;
  const char *path = NULL, *batch_s = NULL;
  cli_list dim = {{NULL}, 0};
  const cli_option opts[] = {
      {"json", 0, NULL, &json, NULL}, {"batch", 0, &batch_s, NULL, NULL}, {"dim", 0, NULL, NULL, &dim}};
  int rc = cli_parse(cmd, argc, argv, opts, 3, &path, 1, 1);
  if (rc != CLI_CONTINUE) return rc;
  cli_sizes sz;
  if ((rc = cli_parse_sizes(cmd, batch_s, &dim, &sz)) != CLI_CONTINUE) return rc;

  sg_graph *g = NULL;
  char msg[2048];
  sg_onnx_symbolic_dim sym[CLI_MAX_SYMBOLIC];
  size_t n_sym;
  sg_status st = cli_open_model_symbolic(path, &sz, &g, msg, sizeof msg, sym, &n_sym);
  if (st != SG_OK) {
    cli_error("cannot load '%s': %s: %s", path, sg_status_str(st), msg);
    return CLI_EXIT_FAIL;
  }
  summary s;
  rc = summarize(g, path, &s);
  if (rc == CLI_EXIT_OK) {
    if (json) rc = cli_print_json(json_summary(g, path, &s, sym, n_sym));
    else print_text(g, path, &s, sym, n_sym);
  }
  free(s.kinds);
  sg_graph_destroy(g);
  return rc;
}

const cli_command cli_cmd_inspect = {
    .name = "inspect",
    .args = "FILE [--json] [--batch N] [--dim NAME=N]...",
    .summary = "Describe a .sgg file or ONNX model: format, hashes, ops by kind, sizes, inputs, outputs.",
    .help = "The hash is the graph's content hash (structure, names, attributes, shapes, dtypes,\n"
            "roles); 'hash (weights)' also covers the initializer bytes. Both are equal for a\n"
            "graph and its .sgg round trip. FILE is a .sgg file or an ONNX model (a name ending\n"
            "in .onnx, or any file without the .sgg magic), imported as docs/onnx.md describes.\n"
            "\n"
            "options:\n"
            "  --json            print one JSON object as the last line of stdout (fields:\n"
            "                    docs/cli.md)\n" CLI_SIZES_HELP "  -h, --help        show this help\n"
            "\n"
            "exit status: 0 ok, 1 unreadable or invalid file, 2 bad command line\n",
    .run = run_inspect,
};
