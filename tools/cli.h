/* Shared pieces of the sgrt command-line tool: the subcommand table entry,
 * option parsing, one-line error reporting, graph loading and JSON output.
 * Each subcommand lives in its own cmd_*.c file and is listed in sgrt.c. */
#ifndef SGRT_TOOLS_CLI_H
#define SGRT_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <sgrt/sgrt.h>

/* Exit codes of every subcommand (documented in docs/cli.md). */
enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_FAIL = 1,  /* the file or the operation failed */
  CLI_EXIT_USAGE = 2, /* bad command line */
};

typedef struct cli_command cli_command;
struct cli_command {
  const char *name;    /* "inspect" */
  const char *args;    /* "FILE [--json]", for the usage lines */
  const char *summary; /* one line for `sgrt --help` */
  const char *help;    /* option descriptions for `sgrt NAME --help` */
  /* argv[0] is the subcommand's name; returns an exit code. */
  int (*run)(const cli_command *cmd, int argc, char **argv);
};

/* The subcommands, one per cmd_*.c file. */
extern const cli_command cli_cmd_inspect;
extern const cli_command cli_cmd_verify;
extern const cli_command cli_cmd_dot;

/* The values of an option that may repeat (--dim a=1 --dim b=2), in order; v[n] is NULL, so that v
 * is a NULL-terminated array as the library's string-list params take. */
#define CLI_LIST_MAX 64
typedef struct cli_list {
  const char *v[CLI_LIST_MAX + 1];
  int n;
} cli_list;

/* One option of a subcommand. Exactly one of `value`, `flag` and `list` is set. */
typedef struct cli_option {
  const char *long_name; /* "output" for --output */
  char short_name;       /* 'o' for -o; 0 for none */
  const char **value;    /* option takes a value (--output X, --output=X, -o X); the last one given wins */
  int *flag;             /* option is a flag, set to 1 when given */
  cli_list *list;        /* option takes a value and may repeat: each one is appended */
} cli_option;

/* Result of cli_parse when the command should go on. */
#define CLI_CONTINUE (-1)

/*
 * Parses argv[1..argc-1] of subcommand `cmd`: options from `opts`, "--help"
 * and "-h", "--" to end options, and between min_pos and max_pos positional
 * arguments stored in `pos`. Returns CLI_CONTINUE on success; otherwise the
 * exit code to return at once (CLI_EXIT_OK after printing help, or
 * CLI_EXIT_USAGE after reporting the mistake on one stderr line).
 */
int cli_parse(const cli_command *cmd, int argc, char **argv, const cli_option *opts, int n_opts,
              const char **pos, int min_pos, int max_pos);

/* Prints the help of one subcommand on stdout. */
void cli_print_command_help(const cli_command *cmd);

/* Writes "sgrt: <message>" as exactly one line on stderr (control characters
 * in the message are escaped, so a name read from a file cannot split it). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copies `s` into buf (cap bytes, truncating) with control characters
 * replaced by '?', for printing names read from files; returns buf. */
const char *cli_printable(const char *s, char *buf, size_t cap);

/* Reports a command-line mistake of `cmd` (NULL: of sgrt itself) on one line
 * and returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports a failed library call as "sgrt: <what>: STATUS: <last error>" and
 * returns CLI_EXIT_FAIL. */
int cli_fail(sg_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sizes of an ONNX model's symbolic input dims, from --dim NAME=N (repeatable: dims, NULL-terminated,
 * or NULL) and --batch N (0: none; sizes every symbolic dim that dims does not name), as
 * sg_onnx_params.dims and .batch. */
typedef struct cli_sizes {
  long batch;
  const char *const *dims;
} cli_sizes;
/* Parses --batch (NULL: not given) and the --dim values into *out (dims points into `dim`). Each
 * --dim must be NAME=N with N a whole number in [1, CLI_BATCH_MAX]. Returns CLI_CONTINUE or the
 * usage-error exit code. */
int cli_parse_sizes(const cli_command *cmd, const char *batch_s, const cli_list *dim, cli_sizes *out);
/* Whether dims names the symbolic dim `name` ("" never is). */
bool cli_sizes_names(const cli_sizes *sz, const char *name);

/* Loads (and thereby verifies) a model: a .sgg file, or an ONNX model (a
 * path ending in ".onnx", or a file without the .sgg magic that parses as
 * ONNX). `sz` (NULL: none) sizes symbolic dims of ONNX inputs; given for a
 * .sgg file it is SG_ERR_INVALID_ARG. On failure returns the status with the
 * message in msg (cap bytes) and *out NULL. */
sg_status cli_open_model(const char *path, const cli_sizes *sz, sg_graph **out, char *msg, size_t cap);
/* cli_open_model that reports a failure as
 * "sgrt: cannot load 'PATH': STATUS: <message>" and returns CLI_EXIT_FAIL. */
int cli_load_model(const char *path, const cli_sizes *sz, sg_graph **out);
/* The symbolic input dims of an ONNX model (sg_onnx_symbolic_dims), up to CLI_MAX_SYMBOLIC of them;
 * 0 for a .sgg file, a model without any, or a file that does not parse (the import says why). */
#define CLI_MAX_SYMBOLIC 64
size_t cli_symbolic_dims(const char *path, sg_onnx_symbolic_dim *out);
/* For inspect and verify: cli_open_model, and when the model has symbolic input dims that neither
 * --dim nor --batch sizes, imported with those at 1 so that it can be reported; *n_sym (with the
 * dims in sym, CLI_MAX_SYMBOLIC room) says how many there were. */
sg_status cli_open_model_symbolic(const char *path, const cli_sizes *sz, sg_graph **out, char *msg,
                                  size_t cap, sg_onnx_symbolic_dim *sym, size_t *n_sym);
/* JSON array of the symbolic dims: [{"input": NAME, "dim": D, "name": PARAM}, ...]. */
cJSON *cli_json_symbolic(const sg_onnx_symbolic_dim *sym, size_t n);
/* cli_load_model(path, NULL, out). */
int cli_load(const char *path, sg_graph **out);
/* 1 when the path ends in ".onnx". */
int cli_is_onnx_path(const char *path);
/* 1 when the file starts with the .sgg magic. */
int cli_is_sgg_file(const char *path);
/* Largest --batch (and --dim size) accepted. */
#define CLI_BATCH_MAX 1000000
/* Parses the value of --batch, a whole number in [1, CLI_BATCH_MAX] (NULL:
 * not given, *out = 0). Returns CLI_CONTINUE or the usage-error exit code. */
int cli_parse_batch(const cli_command *cmd, const char *s, long *out);
/* The help lines of --batch and --dim, for the commands that load a model. */
#define CLI_SIZES_HELP                                                                    \
  "  --batch N         ONNX: size of every symbolic input dim that --dim does not name\n" \
  "                    (the batch dim of dynamic_axes), 1..1000000\n"                     \
  "  --dim NAME=N      ONNX: size of the symbolic input dims named NAME (dynamic_axes'\n" \
  "                    \"seq\", torch.export's Dim(\"seq\")), 1..1000000; repeat for each name\n"

/* Numeric option values, through the one strict parser of cli_number.h.
 * `opt` is the option as the usage text spells it ("-n", "--iters"). A value
 * that is not a whole number (or a number) in [lo, hi] is reported as
 * "sgrt: CMD: OPT 'VALUE' is not a whole number in [LO, HI] (see ...)" and
 * CLI_EXIT_USAGE returned; otherwise *out is set and CLI_CONTINUE returned. */
int cli_int_option(const cli_command *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
                   int64_t *out);
/* The same for a real number in [lo, hi] (finite; no hex, inf or nan). */
int cli_real_option(const cli_command *cmd, const char *opt, const char *s, double lo, double hi,
                    double *out);

/* ---- files named on the command line ------------------------------------- */

/* "a FIFO", "a directory", "a character device", "a socket", ... of a st_mode. */
const char *cli_file_kind(unsigned mode);
/* Opens a path named on the command line for reading (write false) or for
 * writing (write true: created or truncated), never blocking: the path is
 * opened with O_NONBLOCK and the descriptor (not the path) checked with
 * fstat, so a FIFO, a device, a socket or a directory is refused at once,
 * with "'PATH' is a FIFO, not a regular file" in err; any other failure
 * leaves strerror's text there. Returns a blocking descriptor of a regular
 * file, or -1. */
int cli_open_regular(const char *path, bool write, char *err, size_t cap);
/* cli_open_regular as a stdio stream ("rb" or "wb"), or NULL. */
FILE *cli_fopen_regular(const char *path, bool write, char *err, size_t cap);

/* Format version stored in the header of a .sgg file that loaded. */
int cli_sgg_version(const char *path, unsigned *major, unsigned *minor);

/* "0123456789abcdef": 16 hex digits and a NUL. */
void cli_hex64(uint64_t v, char out[17]);

/* JSON helpers. Each returns NULL (or 0) when out of memory, so that a
 * command can build a whole object and check once. */
/* A string with invalid UTF-8 replaced by U+FFFD: names come from files. */
cJSON *cli_json_string(const char *s);
/* [d0, d1, ...] */
cJSON *cli_json_shape(int ndim, const int64_t *dims);
/* {"name", "dtype", "shape"} of tensor t. */
cJSON *cli_json_tensor(const sg_graph *g, sg_tensor t);
/* Adds `item` under `key` (or to an array when key is NULL); frees it and
 * returns 0 when item is NULL or adding fails, else 1. */
int cli_json_add(cJSON *parent, const char *key, cJSON *item);
/* Returns obj when ok, else deletes it and returns NULL. */
cJSON *cli_json_finish(cJSON *obj, int ok);

/* Prints `obj` on one line of stdout and frees it. NULL (a failed build of
 * the object) is reported as out of memory. Returns an exit code. */
int cli_print_json(cJSON *obj);

#endif /* SGRT_TOOLS_CLI_H */
