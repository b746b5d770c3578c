/* sgrt run MODEL --input NAME=FILE.npy ... --output DIR [--threads N] [--batch N] [--dim NAME=N]... [--json]:
 * one evaluation pass (sg_session_forward) of a graph, with inputs read from
 * .npy files and every output the pass computes written as DIR/NAME.npy. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cli.h"
#include "npy.h"

/* File names: at most this many bytes before ".npy" (and a de-duplicating suffix). */
#define RUN_NAME_MAX 200
/* Largest --threads. */
#define RUN_THREADS_MAX 4096

typedef struct run_input {
  const char *spec; /* "NAME=FILE" as given */
  char *name;       /* NAME (malloc'd) */
  const char *file; /* FILE (points into spec) */
  npy_array arr;
} run_input;

typedef struct run_output {
  sg_tensor t;
  char file[RUN_NAME_MAX + 16]; /* NAME.npy, sanitised and unique */
} run_output;

/* A symbolic dim's size found in the input files, as the "NAME=N" that sg_onnx_params.dims takes. */
typedef struct run_found_dim {
  char text[96];    /* NAME=N (names are at most 63 bytes: sg_onnx_symbolic_dim) */
  const char *name; /* into the symbolic dims listed during sizes_from_inputs */
  long size;
  const run_input *from;
  int dim;
} run_found_dim;

typedef struct run_state {
  run_input *inputs;
  int n_inputs;
  run_output *outputs;
  int n_outputs;
  const char **zero_filled; /* names of inputs the pass does not read, set to zeros */
  int n_zero;
  void *buf; /* scratch for reading outputs / zero inputs */
  sg_graph *g;
  sg_session *s;
  char **argv2; /* argv without the --input options */
  run_found_dim found[CLI_MAX_SYMBOLIC];
  const char *dims[CLI_LIST_MAX + CLI_MAX_SYMBOLIC + 1]; /* --dim's entries, then those found */
} run_state;

static void run_state_free(run_state *st) {
  for (int i = 0; i < st->n_inputs; i++) {
    free(st->inputs[i].name);
    npy_free(&st->inputs[i].arr);
  }
  free(st->inputs);
  free(st->outputs);
  free(st->zero_filled);
  free(st->buf);
  free(st->argv2);
  sg_session_destroy(st->s);
  sg_graph_destroy(st->g);
}

/* Takes the repeatable --input/-i options out of argv (cli_parse keeps one
 * value per option), leaving everything else in order for cli_parse. Options
 * that take a value keep theirs, so "--output --input" stays an output dir. */
static int split_inputs(const cli_command *cmd, int argc, char **argv, run_state *st, int *argc2) {
  st->argv2 = calloc((size_t)argc + 1, sizeof(char *));
  st->inputs = calloc((size_t)argc + 1, sizeof(run_input));
  if (st->argv2 == NULL || st->inputs == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAIL;
  }
  static const char *const valued[] = {"--output", "-o", "--threads", "-t", "--batch", "-b", "--dim"};
  int n = 0;
  st->argv2[n++] = argv[0];
  bool only_positional = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *spec = NULL;
    if (only_positional) {
      st->argv2[n++] = argv[i];
      continue;
    }
    if (strcmp(a, "--") == 0) {
      only_positional = true;
      st->argv2[n++] = argv[i];
      continue;
    }
    if (strcmp(a, "--input") == 0 || strcmp(a, "-i") == 0) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "option '--input' needs a value");
      spec = argv[++i];
    } else if (strncmp(a, "--input=", 8) == 0) {
      spec = a + 8;
    } else if (strncmp(a, "-i", 2) == 0 && a[2] != '\0') {
      spec = a + 2;
    } else {
      st->argv2[n++] = argv[i];
      for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
        if (strcmp(a, valued[k]) == 0 && i + 1 < argc) st->argv2[n++] = argv[++i];
      continue;
    }
    const char *eq = strchr(spec, '=');
    if (eq == NULL || eq == spec || eq[1] == '\0')
      return cli_usage_error(cmd, "--input needs NAME=FILE.npy, got '%s'", spec);
    run_input *in = &st->inputs[st->n_inputs];
    in->spec = spec;
    in->name = strndup(spec, (size_t)(eq - spec));
    in->file = eq + 1;
    if (in->name == NULL) {
      cli_error("out of memory");
      return CLI_EXIT_FAIL;
    }
    st->n_inputs++;
    for (int j = 0; j + 1 < st->n_inputs; j++)
      if (strcmp(st->inputs[j].name, in->name) == 0)
        return cli_usage_error(cmd, "input '%s' is given twice", in->name);
  }
  st->argv2[n] = NULL;
  *argc2 = n;
  return CLI_CONTINUE;
}

/* Marks in `needed` (one flag per tensor) the inputs the evaluation pass reads:
 * those behind the outputs that are activations, as the session's plan does. */
static int find_needed_inputs(const sg_graph *g, bool *needed) {
  int32_t n_ops = sg_graph_num_ops(g);
  bool *seen = calloc((size_t)(n_ops > 0 ? n_ops : 1), sizeof(bool));
  int32_t *stack = malloc((size_t)(n_ops > 0 ? n_ops : 1) * sizeof(int32_t));
  if (seen == NULL || stack == NULL) {
    free(seen);
    free(stack);
    return -1;
  }
  int32_t top = 0;
  for (int32_t i = 0; i < sg_graph_num_outputs(g); i++) {
    sg_tensor_info info;
    if (sg_graph_tensor_info(g, sg_graph_output(g, i), &info) != SG_OK) continue;
    if (info.role == SG_ROLE_ACTIVATION && info.producer >= 0 && !seen[info.producer])
      seen[info.producer] = true, stack[top++] = info.producer;
  }
  while (top > 0) {
    sg_op_info op;
    if (sg_graph_op_info(g, stack[--top], &op) != SG_OK) continue;
    for (int k = 0; k < op.n_inputs; k++) {
      if (op.inputs[k] < 0) continue;
      sg_tensor_info info;
      if (sg_graph_tensor_info(g, (sg_tensor){op.inputs[k]}, &info) != SG_OK) continue;
      if (info.role == SG_ROLE_INPUT) needed[op.inputs[k]] = true;
      if (info.producer >= 0 && !seen[info.producer])
        seen[info.producer] = true, stack[top++] = info.producer;
    }
  }
  free(seen);
  free(stack);
  return 0;
}

/* NAME -> a file name: [A-Za-z0-9._-] kept, anything else '_', at most
 * RUN_NAME_MAX bytes, unique among the outputs so far, plus ".npy". */
static void output_file_name(const char *name, const run_output *prev, int n_prev, char *out, size_t cap) {
  char base[RUN_NAME_MAX + 1];
  size_t n = 0;
  for (const char *p = name; *p && n < RUN_NAME_MAX; p++) {
    char c = *p;
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                c == '_' || c == '-';
    base[n++] = keep ? c : '_';
  }
  if (n == 0) base[n++] = '_';
  base[n] = '\0';
  for (unsigned k = 1;; k++) {
    if (k == 1) snprintf(out, cap, "%s.npy", base);
    else snprintf(out, cap, "%s_%u.npy", base, k);
    bool taken = false;
    for (int i = 0; i < n_prev && !taken; i++) taken = strcmp(prev[i].file, out) == 0;
    if (!taken) return;
  }
}

/* mkdir -p */
static int make_dirs(const char *dir) {
  char *p = strdup(dir);
  if (p == NULL) return ENOMEM;
  int rc = 0;
  for (char *s = p + 1;; s++) {
    if (*s == '/' || *s == '\0') {
      char saved = *s;
      *s = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        rc = errno;
        break;
      }
      *s = saved;
      if (saved == '\0') break;
    }
  }
  free(p);
  if (rc != 0) return rc;
  struct stat stt;
  if (stat(dir, &stt) != 0) return errno;
  if (!S_ISDIR(stt.st_mode)) return ENOTDIR;
  return 0;
}

/* bf16 has no .npy type: written as float32 (exactly). */
static void bf16_to_f32(const uint16_t *in, float *out, int64_t n) {
  for (int64_t i = n - 1; i >= 0; i--) {
    uint32_t bits = (uint32_t)in[i] << 16;
    memcpy(&out[i], &bits, sizeof bits);
  }
}

/* Reads every --input file. A bad file is reported before any compile work. */
static int read_inputs(run_state *st) {
  for (int i = 0; i < st->n_inputs; i++) {
    char err[512];
    run_input *in = &st->inputs[i];
    if (npy_read(in->file, &in->arr, err, sizeof err) != 0) {
      cli_error("run: cannot read input '%s' from '%s': %s", in->name, in->file, err);
      return CLI_EXIT_FAIL;
    }
  }
  return CLI_EXIT_OK;
}

/* The size that the input files give symbolic dim k of the model (-1: no file for that input). */
static long size_from_inputs(const run_state *st, const sg_onnx_symbolic_dim *sym, const run_input **from) {
  for (int i = 0; i < st->n_inputs; i++) {
    const run_input *in = &st->inputs[i];
    if (strcmp(in->name, sym->input) != 0 || sym->dim >= in->arr.ndim) continue;
    *from = in;
    return (long)in->arr.dims[sym->dim];
  }
  return -1;
}

/* An ONNX model's symbolic input dims that neither --dim nor --batch sizes take their size from the .npy
 * files given for those inputs (as onnxruntime takes it from the arrays fed): a named dim ("seq") from
 * every input that has it, which must agree, added to sz->dims; unnamed dims likewise among themselves,
 * as sz->batch. */
static int sizes_from_inputs(run_state *st, const char *model, cli_sizes *sz) {
  if (sz->batch > 0) return CLI_EXIT_OK; /* --batch sizes every dim --dim does not */
  sg_onnx_symbolic_dim sym[CLI_MAX_SYMBOLIC];
  size_t n = cli_symbolic_dims(model, sym), n_found = 0, n_dims = 0;
  for (size_t i = 0; sz->dims != NULL && sz->dims[i] != NULL; i++) st->dims[n_dims++] = sz->dims[i];
  const run_input *batch_from = NULL;
  int batch_dim = 0;
  for (size_t k = 0; k < n; k++) {
    const run_input *in = NULL;
    long size = cli_sizes_names(sz, sym[k].name) ? -1 : size_from_inputs(st, &sym[k], &in);
    if (size < 0) continue;
    if (sym[k].name[0] == '\0') { /* unnamed: all of them are the batch */
      if (batch_from != NULL && size != sz->batch) {
        cli_error(
            "run: the unnamed symbolic dims of '%s' get different sizes from the inputs: %ld (dim %d of "
            "'%s' in '%s') and %ld (dim %d of '%s' in '%s'); give one with --batch N",
            model, sz->batch, batch_dim, batch_from->name, batch_from->file, size, sym[k].dim, in->name,
            in->file);
        return CLI_EXIT_FAIL;
      }
      sz->batch = size;
      batch_from = in;
      batch_dim = sym[k].dim;
      continue;
    }
    run_found_dim *f = NULL;
    for (size_t j = 0; j < n_found && f == NULL; j++)
      if (strcmp(st->found[j].name, sym[k].name) == 0) f = &st->found[j];
    if (f != NULL && f->size != size) {
      cli_error(
          "run: the symbolic dim '%s' of '%s' gets different sizes from the inputs: %ld (dim %d of '%s' in "
          "'%s') and %ld (dim %d of '%s' in '%s'); give it with --dim %s=N",
          sym[k].name, model, f->size, f->dim, f->from->name, f->from->file, size, sym[k].dim, in->name,
          in->file, sym[k].name);
      return CLI_EXIT_FAIL;
    }
    if (f != NULL) continue;
    f = &st->found[n_found++];
    snprintf(f->text, sizeof f->text, "%s=%ld", sym[k].name, size);
    f->name = sym[k].name;
    f->size = size;
    f->from = in;
    f->dim = sym[k].dim;
    st->dims[n_dims++] = f->text;
  }
  st->dims[n_dims] = NULL;
  sz->dims = n_dims > 0 ? st->dims : NULL;
  return CLI_EXIT_OK;
}

/* Loads and compiles the model and sets the given inputs. */
static int prepare(run_state *st, const char *model, cli_sizes sz, int64_t threads) {
  if (sizes_from_inputs(st, model, &sz) != CLI_EXIT_OK) return CLI_EXIT_FAIL;
  int rc = cli_load_model(model, &sz, &st->g);
  if (rc != CLI_EXIT_OK) return rc;
  sg_session_params sp = sg_session_params_init();
  sp.threads = (int)threads;
  sg_status s;
  sg_clear_error();
  if ((s = sg_session_create(st->g, &sp, &st->s)) != SG_OK || (s = sg_session_compile(st->s)) != SG_OK)
    return cli_fail(s, "cannot compile '%s'", model);
  for (int i = 0; i < st->n_inputs; i++) {
    const run_input *in = &st->inputs[i];
    sg_clear_error();
    s = sg_session_set_input(st->s, in->name, in->arr.dtype, in->arr.ndim, in->arr.dims, in->arr.data);
    if (s != SG_OK) return cli_fail(s, "run: input '%s' from '%s'", in->name, in->file);
  }
  return CLI_EXIT_OK;
}

/* Inputs that the evaluation pass does not read (a learning rate, fed
 * gradients) must still be set before a pass: zeros. */
static int zero_fill_unread_inputs(run_state *st) {
  int32_t nt = sg_graph_num_tensors(st->g), n_in = sg_graph_num_inputs(st->g);
  bool *needed = calloc((size_t)(nt > 0 ? nt : 1), sizeof(bool));
  st->zero_filled = calloc((size_t)n_in + 1, sizeof(const char *));
  int rc = CLI_EXIT_OK;
  if (needed == NULL || st->zero_filled == NULL || find_needed_inputs(st->g, needed) != 0) {
    cli_error("out of memory");
    rc = CLI_EXIT_FAIL;
  }
  for (int32_t i = 0; i < n_in && rc == CLI_EXIT_OK; i++) {
    sg_tensor t = sg_graph_input(st->g, i);
    sg_tensor_info info;
    if (sg_graph_tensor_info(st->g, t, &info) != SG_OK || needed[t.id]) continue;
    bool given = false;
    for (int k = 0; k < st->n_inputs && !given; k++) given = strcmp(st->inputs[k].name, info.name) == 0;
    if (given) continue;
    void *zeros = calloc(info.nbytes ? info.nbytes : 1, 1);
    if (zeros == NULL) {
      cli_error("out of memory");
      rc = CLI_EXIT_FAIL;
      break;
    }
    sg_clear_error();
    sg_status s = sg_session_set_input(st->s, info.name, info.dtype, info.ndim, info.dims, zeros);
    free(zeros);
    if (s != SG_OK) rc = cli_fail(s, "run: setting unused input '%s' to zeros", info.name);
    else st->zero_filled[st->n_zero++] = info.name; /* owned by the graph */
  }
  free(needed);
  return rc;
}

/* "DIR/FILE" in a new buffer, or NULL. */
static char *join_path(const char *dir, const char *file) {
  size_t len = strlen(dir) + 1 + strlen(file) + 1;
  char *p = malloc(len);
  if (p) snprintf(p, len, "%s/%s", dir, file);
  return p;
}

/* Reads one output and writes it as outdir/o->file. */
static int write_output(run_state *st, const run_output *o, const char *outdir, int json) {
  sg_tensor_info info;
  sg_status s = sg_graph_tensor_info(st->g, o->t, &info);
  if (s != SG_OK) return cli_fail(s, "run: output #%d", (int)o->t.id);
  /* bf16 is widened to f32 in place: room for 4 bytes per element. */
  size_t need = info.dtype == SG_BF16 ? (size_t)info.numel * 4 : info.nbytes;
  free(st->buf);
  st->buf = malloc(need ? need : 1);
  if (st->buf == NULL) {
    cli_error("out of memory reading output '%s'", info.name);
    return CLI_EXIT_FAIL;
  }
  sg_clear_error();
  if ((s = sg_session_read(st->s, info.name, st->buf, info.nbytes)) != SG_OK)
    return cli_fail(s, "run: reading output '%s'", info.name);
  sg_dtype dt = info.dtype;
  if (dt == SG_BF16) {
    bf16_to_f32(st->buf, st->buf, info.numel);
    dt = SG_F32;
  }
  char *path = join_path(outdir, o->file);
  if (path == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAIL;
  }
  char err[512];
  size_t nbytes = (size_t)info.numel * sg_dtype_size(dt);
  int rc = CLI_EXIT_OK;
  if (npy_write(path, dt, info.ndim, info.dims, st->buf, nbytes, err, sizeof err) != 0) {
    cli_error("run: cannot write output '%s' to '%s': %s", info.name, path, err);
    rc = CLI_EXIT_FAIL;
  } else if (!json) {
    char shown[256];
    printf("%s: %s [", path, sg_dtype_name(dt));
    for (int d = 0; d < info.ndim; d++) printf("%s%lld", d ? "," : "", (long long)info.dims[d]);
    printf("]  (output '%s')\n", cli_printable(info.name, shown, sizeof shown));
  }
  free(path);
  return rc;
}

/* Every output the pass computes: all but gradients (a training step's). */
static int write_outputs(run_state *st, const char *outdir, int json) {
  int32_t n_out = sg_graph_num_outputs(st->g);
  st->outputs = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof(run_output));
  if (st->outputs == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAIL;
  }
  int err_no = make_dirs(outdir);
  if (err_no != 0) {
    struct stat sb; /* lstat would call a link to a directory "a symbolic link" */
    if (stat(outdir, &sb) == 0 && !S_ISDIR(sb.st_mode))
      cli_error("run: cannot create output directory '%s': '%s' is %s, not a directory", outdir, outdir,
                cli_file_kind((unsigned)sb.st_mode));
    else cli_error("run: cannot create output directory '%s': %s", outdir, strerror(err_no));
    return CLI_EXIT_FAIL;
  }
  for (int32_t i = 0; i < n_out; i++) {
    sg_tensor t = sg_graph_output(st->g, i);
    sg_tensor_info info;
    if (sg_graph_tensor_info(st->g, t, &info) != SG_OK || info.role == SG_ROLE_GRADIENT) continue;
    bool duplicate = false; /* an output marked twice is written once */
    for (int k = 0; k < st->n_outputs && !duplicate; k++) duplicate = st->outputs[k].t.id == t.id;
    if (duplicate) continue;
    run_output *o = &st->outputs[st->n_outputs];
    o->t = t;
    output_file_name(info.name, st->outputs, st->n_outputs, o->file, sizeof o->file);
    st->n_outputs++;
    int rc = write_output(st, o, outdir, json);
    if (rc != CLI_EXIT_OK) return rc;
  }
  return CLI_EXIT_OK;
}

static cJSON *json_summary(const run_state *st, const char *model, const char *outdir) {
  cJSON *j = cJSON_CreateObject();
  int ok = j != NULL;
  ok = ok && cli_json_add(j, "model", cli_json_string(model));
  ok = ok && cli_json_add(j, "output_dir", cli_json_string(outdir));
  cJSON *ins = ok ? cJSON_CreateArray() : NULL;
  ok = ok && cli_json_add(j, "inputs", ins);
  for (int i = 0; ok && i < st->n_inputs; i++) {
    sg_tensor t;
    if (sg_graph_find_tensor(st->g, st->inputs[i].name, &t) != SG_OK) continue;
    cJSON *o = cli_json_tensor(st->g, t);
    ok = o != NULL && cli_json_add(o, "file", cli_json_string(st->inputs[i].file));
    ok = cli_json_add(ins, NULL, o) && ok;
  }
  cJSON *zeros = ok ? cJSON_CreateArray() : NULL;
  ok = ok && cli_json_add(j, "zero_filled_inputs", zeros);
  for (int i = 0; ok && i < st->n_zero; i++)
    ok = cli_json_add(zeros, NULL, cli_json_string(st->zero_filled[i]));
  cJSON *outs = ok ? cJSON_CreateArray() : NULL;
  ok = ok && cli_json_add(j, "outputs", outs);
  for (int i = 0; ok && i < st->n_outputs; i++) {
    cJSON *o = cli_json_tensor(st->g, st->outputs[i].t);
    sg_tensor_info info;
    ok = o != NULL && sg_graph_tensor_info(st->g, st->outputs[i].t, &info) == SG_OK;
    if (ok && info.dtype == SG_BF16) /* written widened */
      ok = cJSON_ReplaceItemInObject(o, "dtype", cJSON_CreateString(sg_dtype_name(SG_F32)));
    char *path = ok ? join_path(outdir, st->outputs[i].file) : NULL;
    ok = ok && path != NULL && cli_json_add(o, "file", cli_json_string(path));
    free(path);
    ok = ok ? cli_json_add(outs, NULL, o) : (cJSON_Delete(o), 0);
  }
  return cli_json_finish(j, ok);
}

static int run_run(const cli_command *cmd, int argc, char **argv) {
  run_state st;
  memset(&st, 0, sizeof st);
  int json = 0, argc2 = 0;
  const char *model = NULL, *outdir = NULL, *threads_s = NULL, *batch_s = NULL;
  cli_list dim = {{NULL}, 0};
  const cli_option opts[] = {
      {"output", 'o', &outdir, NULL}, {"threads", 't', &threads_s, NULL}, {"batch", 'b', &batch_s, NULL},
      {"dim", 0, NULL, NULL, &dim},   {"json", 0, NULL, &json},
  };
  int64_t threads = 0;
  cli_sizes sz = {0, NULL};
  int rc = split_inputs(cmd, argc, argv, &st, &argc2);
  if (rc == CLI_CONTINUE) rc = cli_parse(cmd, argc2, st.argv2, opts, 5, &model, 1, 1);
  if (rc != CLI_CONTINUE) goto out;
  if (outdir == NULL) rc = cli_usage_error(cmd, "--output DIR is required");
  else if (threads_s) rc = cli_int_option(cmd, "--threads", threads_s, 0, RUN_THREADS_MAX, &threads);
  if (rc == CLI_CONTINUE) rc = cli_parse_sizes(cmd, batch_s, &dim, &sz);
  if (rc == CLI_CONTINUE) rc = read_inputs(&st);
  if (rc == CLI_EXIT_OK) rc = prepare(&st, model, sz, threads);
  if (rc == CLI_EXIT_OK) rc = zero_fill_unread_inputs(&st);
  if (rc == CLI_EXIT_OK) {
    sg_clear_error();
    sg_status s = sg_session_forward(st.s);
    if (s != SG_OK) rc = cli_fail(s, "cannot run '%s'", model);
  }
  if (rc == CLI_EXIT_OK) rc = write_outputs(&st, outdir, json);
  if (rc == CLI_EXIT_OK && json) rc = cli_print_json(json_summary(&st, model, outdir));
out:
  run_state_free(&st);
  return rc;
}

const cli_command cli_cmd_run = {
    .name = "run",
    .args =
        "MODEL --input NAME=FILE.npy ... --output DIR [--threads N] [--batch N] [--dim NAME=N]... [--json]",
    .summary = "Run an evaluation pass of a graph on .npy inputs; write its outputs as .npy files.",
    .help = "Loads MODEL (.sgg, or .onnx with the ONNX importer), compiles it for the CPU, sets each\n"
            "input from a .npy file, runs one evaluation pass (batch norm on running statistics,\n"
            "dropout off, no updates) and writes every graph output except gradients as\n"
            "DIR/NAME.npy (C order; the name with characters outside [A-Za-z0-9._-] replaced by\n"
            "'_', made unique with a _2, _3 ... suffix). Input files must match the input's dtype\n"
            "and shape exactly: float32 '<f4', int64 '<i8', int32 '<i4' (also '<f2', '|u1',\n"
            "'|b1'). Inputs the pass does not read (a learning rate, fed gradients) may be left\n"
            "out: they are set to zeros.\n"
            "\n"
            "options:\n"
            "  -i, --input NAME=FILE  set input NAME from FILE.npy (repeat for each input)\n"
            "  -o, --output DIR       write the outputs into DIR (created if missing; an existing\n"
            "                         DIR/NAME.npy is replaced only if it is a regular file)\n"
            "  -t, --threads N        compute threads, 0..4096 (default 0: every online CPU)\n"
            "  -b, --batch N          ONNX: size of every symbolic input dim that --dim does not name,\n"
            "                         1..1000000\n"
            "  --dim NAME=N           ONNX: size of the symbolic input dims named NAME (dynamic_axes'\n"
            "                         \"seq\"), 1..1000000; repeat for each name. Without --batch, the\n"
            "                         symbolic dims that --dim does not size take their size from the\n"
            "                         input files (each name's must agree)\n"
            "  --json                 print one JSON object (inputs, outputs with name, dtype,\n"
            "                         shape, file) as the last line of stdout\n"
            "  -h, --help             show this help\n"
            "\n"
            "exit status: 0 outputs written, 1 unreadable model or input, mismatched or missing\n"
            "input, failed run or write, 2 bad command line\n",
    .run = run_run,
};
