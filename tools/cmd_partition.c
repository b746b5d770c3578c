/* sgrt partition MODEL --parts K [...]: partitions a model's graph across K
 * devices (SPEC P2-P5) and reports the result beside a seeded random
 * partition, as a table or as JSON, optionally as Graphviz DOT coloured by
 * part. With --train it first turns the model into a training graph. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* The ranges of the numeric options (also in the help text and docs/cli.md). */
#define PART_IMBALANCE_MIN 0.01 /* percent */
#define PART_IMBALANCE_MAX 100.0
#define PART_ALPHA_MAX 1e6

/* A name not yet used in g: base, base_1, base_2, ... */
static void unique_name(const sg_graph *g, const char *base, char *buf, size_t cap) {
  sg_tensor t;
  snprintf(buf, cap, "%s", base);
  for (int i = 1; sg_graph_find_tensor(g, buf, &t) == SG_OK; i++) snprintf(buf, cap, "%s_%d", base, i);
}

/* The loss of a cloned graph: a one-element float output, or else a
 * cross-entropy added on its single 2-D float output with a new label
 * input of `batch` rows (0: the output's rows). */
static int find_or_add_loss(const cli_command *cmd, sg_graph *g, long batch, sg_tensor *loss) {
  sg_tensor logits = SG_NO_TENSOR;
  int n2d = 0;
  for (int32_t i = 0; i < sg_graph_num_outputs(g); i++) {
    sg_tensor t = sg_graph_output(g, i);
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, t, &info) != SG_OK) continue;
    bool is_float = info.dtype == SG_F32 || info.dtype == SG_F16 || info.dtype == SG_BF16;
    if (is_float && info.numel == 1) {
      *loss = t;
      return CLI_CONTINUE;
    }
    if (is_float && info.ndim == 2) logits = t, n2d++;
  }
  if (n2d != 1) {
    cli_error("partition --train: the model has no scalar float output to use as the loss, and %d 2-D float "
              "outputs (a cross-entropy loss needs exactly one)",
              n2d);
    return CLI_EXIT_FAIL;
  }
  sg_tensor_info info;
  sg_graph_tensor_info(g, logits, &info);
  if (batch != 0 && batch != info.dims[0])
    return cli_usage_error(cmd, "--batch %ld does not match the %lld rows of the output '%s'", batch,
                           (long long)info.dims[0], info.name);
  char name[64];
  unique_name(g, "labels", name, sizeof name);
  int64_t rows = info.dims[0];
  sg_tensor labels = sg_input(g, name, SG_I64, 1, &rows);
  *loss = sg_cross_entropy(g, logits, labels, SG_REDUCTION_MEAN);
  unique_name(g, "loss", name, sizeof name);
  sg_status st = sg_graph_status(g);
  if (st == SG_OK) st = sg_tensor_set_name(g, *loss, name);
  if (st == SG_OK) st = sg_graph_mark_output(g, *loss);
  if (st != SG_OK) return cli_fail(st, "partition --train: cannot add a cross-entropy loss");
  return CLI_CONTINUE;
}

/* Clone, loss, backward, optimizer with the library's defaults (those of
 * torch.optim.SGD and torch.optim.AdamW), finalize. */
static int make_training_graph(const cli_command *cmd, const sg_graph *g, const char *optimizer, long batch,
                               sg_graph **out) {
  *out = NULL;
  bool sgd = strcmp(optimizer, "sgd") == 0;
  if (!sgd && strcmp(optimizer, "adamw") != 0)
    return cli_usage_error(cmd, "--train must be 'sgd' or 'adamw', got '%s'", optimizer);
  sg_graph *t;
  sg_status st = sg_graph_clone(g, &t);
  if (st != SG_OK) return cli_fail(st, "partition --train: cannot clone the graph");
  sg_tensor loss;
  int rc = find_or_add_loss(cmd, t, batch, &loss);
  if (rc != CLI_CONTINUE) {
    sg_graph_destroy(t);
    return rc;
  }
  char name[64];
  unique_name(t, "lr", name, sizeof name);
  sg_tensor lr = sg_input(t, name, SG_F32, 0, NULL);
  st = sg_graph_backward(t, loss);
  if (st == SG_OK && sgd) {
    st = sg_graph_add_sgd(t, lr, NULL);
  } else if (st == SG_OK) {
    st = sg_graph_add_adamw(t, lr, NULL);
  }
  if (st == SG_OK) st = sg_graph_finalize(t);
  if (st != SG_OK) {
    sg_graph_destroy(t);
    return cli_fail(st, "partition --train %s: cannot build the training graph", optimizer);
  }
  *out = t;
  return CLI_CONTINUE;
}

/* --devices FILE, or a preset name with an optional count ("a100:8"). */
static int load_devices(const cli_command *cmd, const char *spec, int64_t parts, sg_device_table **out) {
  *out = NULL;
  /* stat, not open: opening a FIFO to see whether it exists would block. The
   * library then refuses anything but a regular file. */
  struct stat sb;
  if (stat(spec, &sb) == 0 || errno != ENOENT) {
    sg_status st = sg_device_table_load(spec, out);
    return st == SG_OK ? CLI_CONTINUE : cli_fail(st, "cannot read device table '%s'", spec);
  }
  char preset[64];
  int64_t count = parts;
  const char *colon = strchr(spec, ':');
  size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
  if (len == 0 || len >= sizeof preset)
    return cli_usage_error(cmd, "--devices: no file or preset '%s'", spec);
  memcpy(preset, spec, len);
  preset[len] = '\0';
  if (colon) {
    int rc = cli_int_option(cmd, "--devices count", colon + 1, 1, SG_PARTITION_MAX_PARTS, &count);
    if (rc != CLI_CONTINUE) return rc;
  }
  if (count < 1) count = 1;
  sg_status st = sg_device_table_preset(preset, (int)count, out);
  if (st == SG_ERR_NOT_FOUND) return cli_fail(st, "--devices '%s' is neither a file nor a preset", spec);
  return st == SG_OK ? CLI_CONTINUE : cli_fail(st, "--devices '%s'", spec);
}

static int run_partition(const cli_command *cmd, int argc, char **argv) {
  const char *path = NULL, *parts_s = NULL, *mode_s = "free", *train_s = NULL, *batch_s = NULL,
             *devices_s = NULL, *seed_s = NULL, *imbalance_s = NULL, *alpha_s = NULL, *dot_s = NULL;
  int json = 0, memory_only = 0;
  cli_list dim = {{NULL}, 0};
  const cli_option opts[] = {
      {"parts", 'k', &parts_s, NULL}, {"mode", 'm', &mode_s, NULL},
      {"train", 0, &train_s, NULL},   {"batch", 0, &batch_s, NULL},
      {"dim", 0, NULL, NULL, &dim},   {"devices", 0, &devices_s, NULL},
      {"seed", 0, &seed_s, NULL},     {"imbalance", 0, &imbalance_s, NULL},
      {"alpha", 0, &alpha_s, NULL},   {"dot", 0, &dot_s, NULL},
      {"json", 0, NULL, &json},       {"memory-only", 0, NULL, &memory_only},
  };
  int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), &path, 1, 1);
  if (rc != CLI_CONTINUE) return rc;

  sg_partition_params pp = SG_PARTITION_PARAMS_INIT;
  int64_t parts = 0, seed = 1;
  cli_sizes sz;
  double pct = 5.0;
  if (parts_s &&
      (rc = cli_int_option(cmd, "--parts", parts_s, 1, SG_PARTITION_MAX_PARTS, &parts)) != CLI_CONTINUE)
    return rc;
  if (parts_s == NULL && devices_s == NULL) return cli_usage_error(cmd, "--parts K is required");
  if (strcmp(mode_s, "free") == 0) pp.mode = SG_PARTITION_FREE;
  else if (strcmp(mode_s, "pipeline") == 0) pp.mode = SG_PARTITION_PIPELINE;
  else return cli_usage_error(cmd, "--mode must be 'free' or 'pipeline', got '%s'", mode_s);
  if ((rc = cli_parse_sizes(cmd, batch_s, &dim, &sz)) != CLI_CONTINUE) return rc;
  long batch = sz.batch;
  if (seed_s && (rc = cli_int_option(cmd, "--seed", seed_s, 0, INT64_MAX, &seed)) != CLI_CONTINUE) return rc;
  if (imbalance_s && (rc = cli_real_option(cmd, "--imbalance", imbalance_s, PART_IMBALANCE_MIN,
                                           PART_IMBALANCE_MAX, &pct)) != CLI_CONTINUE)
    return rc;
  if (alpha_s &&
      (rc = cli_real_option(cmd, "--alpha", alpha_s, 0.0, PART_ALPHA_MAX, &pp.alpha)) != CLI_CONTINUE)
    return rc;
  pp.parts = (int)parts;
  pp.seed = (uint64_t)seed;
  pp.imbalance = pct / 100.0;
  pp.balance_compute = !memory_only;

  sg_graph *g = NULL, *train = NULL;
  sg_device_table *devices = NULL;
  sg_partition *part = NULL;
  char *text = NULL;
  /* --batch sizes an ONNX model's symbolic dims; a .sgg file's shapes are
   * static, and there it only sizes an added labels input (--dim is refused). */
  cli_sizes load_sz = {cli_is_sgg_file(path) ? 0 : sz.batch, sz.dims};
  if ((rc = cli_load_model(path, &load_sz, &g)) != CLI_EXIT_OK) return rc;
  rc = CLI_CONTINUE;
  if (train_s) rc = make_training_graph(cmd, g, train_s, batch, &train);
  if (rc == CLI_CONTINUE && devices_s) rc = load_devices(cmd, devices_s, parts, &devices);
  if (rc != CLI_CONTINUE) goto out;
  const sg_graph *target = train ? train : g;
  sg_status st = sg_partition_create(target, &pp, devices, &part);
  if (st != SG_OK) {
    rc = cli_fail(st, "cannot partition '%s'", path);
    goto out;
  }
  if (dot_s && (st = sg_partition_write_dot(part, dot_s)) != SG_OK) {
    rc = cli_fail(st, "cannot write DOT of '%s'", path);
    goto out;
  }
  if (json) {
    st = sg_partition_report_json(part, &text);
    if (st != SG_OK) {
      rc = cli_fail(st, "cannot report on '%s'", path);
      goto out;
    }
    /* The library's object plus what only the tool knows. */
    cJSON *o = cJSON_Parse(text);
    int ok = o != NULL && cli_json_add(o, "file", cli_json_string(path)) &&
             cli_json_add(o, "train", train_s ? cJSON_CreateString(train_s) : cJSON_CreateNull());
    rc = cli_print_json(cli_json_finish(o, ok));
  } else {
    st = sg_partition_report_text(part, &text);
    if (st != SG_OK) {
      rc = cli_fail(st, "cannot report on '%s'", path);
      goto out;
    }
    char buf[512];
    printf("partition of '%s'%s%s\n%s", cli_printable(path, buf, sizeof buf), train_s ? " trained with " : "",
           train_s ? train_s : "", text);
    rc = CLI_EXIT_OK;
  }
out:
  sg_free(text);
  sg_partition_destroy(part);
  sg_device_table_destroy(devices);
  sg_graph_destroy(train);
  sg_graph_destroy(g);
  return rc == CLI_CONTINUE ? CLI_EXIT_FAIL : rc;
}

const cli_command cli_cmd_partition = {
    .name = "partition",
    .args = "MODEL --parts K [--mode free|pipeline] [--train sgd|adamw] [--batch N] [--dim NAME=N]... "
            "[--devices FILE] "
            "[--seed S] "
            "[--json] [--dot OUT]",
    .summary = "Partition a model's graph across devices and report the cut and balance.",
    .help =
        "Places every op on one of K parts with METIS (free mode) or as K pipeline stages whose\n"
        "forward edges only go forward (pipeline mode), balancing memory (parameters, gradients,\n"
        "optimizer state, activations kept for backward) within the tolerance and compute as\n"
        "well as it can, and minimising the bytes that cross parts. The report compares the\n"
        "result with a seeded random partition. See docs/partitioning.md.\n"
        "\n"
        "options:\n"
        "  -k, --parts K         number of parts, 1..1024 (default: one per device of --devices)\n"
        "  -m, --mode MODE       free (default) or pipeline\n"
        "      --train OPT       make a training graph first: sgd or adamw (PyTorch's defaults); the loss\n"
        "                        is the model's scalar output, or a cross-entropy added on its\n"
        "                        single 2-D output with a new 'labels' input\n"
        "      --batch N         rows of that labels input, 1..1000000 (must match the output; default:\n"
        "                        its rows); for an ONNX model, the size of every symbolic input dim\n"
        "                        that --dim does not name\n"
        "      --dim NAME=N      ONNX: size of the symbolic input dims named NAME (dynamic_axes'\n"
        "                        \"seq\"), 1..1000000; repeat for each name\n"
        "      --devices FILE    device table (JSON, a regular file), or a preset: a100, ascend910b,\n"
        "                        cpu, host, optionally with a count 1..1024 (a100:8); default: K host\n"
        "                        devices\n"
        "      --seed S          seed of METIS and of the random partition, 0..9223372036854775807\n"
        "                        (default 1)\n"
        "      --imbalance PCT   tolerated imbalance in percent, 0.01..100 (default 5)\n"
        "      --alpha A         weight of transfer cost in the placement score, 0..1e6 (default 0.3)\n"
        "      --memory-only     balance memory only, not compute\n"
        "      --json            print one JSON object instead of the table\n"
        "      --dot OUT         also write Graphviz DOT coloured by part to OUT ('-': stdout; an\n"
        "                        existing OUT must be a regular file)\n"
        "  -h, --help            show this help\n"
        "\n"
        "Whole numbers are decimal digits only; --imbalance and --alpha also take a fraction or an\n"
        "exponent (2.5, 1e-3). Anything else, or a value outside its range, is a command-line error.\n"
        "\n"
        "exit status: 0 partitioned, 1 unreadable model, bad device table or no fit, 2 bad command line\n",
    .run = run_partition,
};
