/* sgrt dot FILE [-o OUT] [--batch N] [--dim NAME=N]...: writes the graph of a .sgg file or ONNX
 * model as Graphviz DOT. */
#include <stdio.h>

#include "cli.h"

static int run_dot(const cli_command *cmd, int argc, char **argv) {
  const char *path = NULL, *out = "-", *batch_s = NULL;
  cli_list dim = {{NULL}, 0};
  const cli_option opts[] = {
      {"output", 'o', &out, NULL, NULL}, {"batch", 0, &batch_s, NULL, NULL}, {"dim", 0, NULL, NULL, &dim}};
  int rc = cli_parse(cmd, argc, argv, opts, 3, &path, 1, 1);
  if (rc != CLI_CONTINUE) return rc;
  cli_sizes sz;
  if ((rc = cli_parse_sizes(cmd, batch_s, &dim, &sz)) != CLI_CONTINUE) return rc;

  sg_graph *g = NULL;
  rc = cli_load_model(path, &sz, &g);
  if (rc != CLI_EXIT_OK) return rc;
  sg_status st = sg_graph_write_dot(g, out);
  sg_graph_destroy(g);
  if (st != SG_OK) return cli_fail(st, "cannot write DOT of '%s'", path);
  return CLI_EXIT_OK;
}

const cli_command cli_cmd_dot = {
    .name = "dot",
    .args = "FILE [-o OUT] [--batch N] [--dim NAME=N]...",
    .summary = "Write the graph of a .sgg file or ONNX model as Graphviz DOT.",
    .help = "Ops are boxes labelled with their kind and name; source tensors (inputs, parameters,\n"
            "constants, state) are ellipses with their shape, dtype and role; edges carry the shape\n"
            "of the tensor they pass. Render with e.g. `dot -Tsvg graph.dot -o graph.svg`.\n"
            "\n"
            "options:\n"
            "  -o, --output OUT  write to OUT instead of stdout ('-' is stdout)\n" CLI_SIZES_HELP
            "  -h, --help        show this help\n"
            "\n"
            "exit status: 0 written, 1 unreadable input or write error, 2 bad command line\n",
    .run = run_dot,
};
