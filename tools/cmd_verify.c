/* sgrt verify FILE [--json] [--batch N] [--dim NAME=N]...: loads a .sgg file or imports an ONNX
 * model, which validates every byte and runs the full graph verifier, and
 * says whether it is sound. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int run_verify(const cli_command *cmd, int argc, char **argv) {
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
  char detail[2048];
  /* A model with symbolic input dims is sound whatever size they get: it is checked with those that
   * --dim and --batch do not size at 1. */
  sg_onnx_symbolic_dim sym[CLI_MAX_SYMBOLIC];
  size_t n_sym;
  sg_status st = cli_open_model_symbolic(path, &sz, &g, detail, sizeof detail, sym, &n_sym);
  if (st != SG_OK) {
    cli_error("cannot load '%s': %s: %s", path, sg_status_str(st), detail);
    if (json) {
      cJSON *o = cJSON_CreateObject();
      int ok = o != NULL;
      ok = ok && cli_json_add(o, "file", cli_json_string(path));
      ok = ok && cli_json_add(o, "ok", cJSON_CreateFalse());
      ok = ok && cli_json_add(o, "status", cJSON_CreateString(sg_status_str(st)));
      ok = ok && cli_json_add(o, "error", cli_json_string(detail));
      cli_print_json(cli_json_finish(o, ok));
    }
    return CLI_EXIT_FAIL;
  }

  int32_t n_ops = sg_graph_num_ops(g), n_tensors = sg_graph_num_tensors(g);
  sg_graph_destroy(g);
  if (!json) {
    printf("%s: ok (%d ops, %d tensors", path, (int)n_ops, (int)n_tensors);
    if (n_sym > 0) printf("; %zu symbolic input dim%s, checked at 1", n_sym, n_sym == 1 ? "" : "s");
    printf(")\n");
    return CLI_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  int ok = o != NULL;
  ok = ok && cli_json_add(o, "file", cli_json_string(path));
  ok = ok && cli_json_add(o, "ok", cJSON_CreateTrue());
  ok = ok && cli_json_add(o, "num_ops", cJSON_CreateNumber(n_ops));
  ok = ok && cli_json_add(o, "num_tensors", cJSON_CreateNumber(n_tensors));
  ok = ok && cli_json_add(o, "symbolic_dims", cli_json_symbolic(sym, n_sym));
  return cli_print_json(cli_json_finish(o, ok));
}

const cli_command cli_cmd_verify = {
    .name = "verify",
    .args = "FILE [--json] [--batch N] [--dim NAME=N]...",
    .summary = "Check that a .sgg file or ONNX model is intact and its graph is valid.",
    .help = "Loads FILE, which checks every section's length and checksum, every count and id,\n"
            "and runs the graph verifier (acyclicity, arity, dtypes, shapes, names). An ONNX\n"
            "model (a name ending in .onnx, or any file without the .sgg magic) is imported,\n"
            "which checks its protobuf, every node and initializer, then runs the verifier.\n"
            "\n"
            "options:\n"
            "  --json            print one JSON object as the last line of stdout\n" CLI_SIZES_HELP
            "  -h, --help        show this help\n"
            "\n"
            "exit status: 0 valid, 1 invalid or unreadable, 2 bad command line\n",
    .run = run_verify,
};
