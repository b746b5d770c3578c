/* Helpers shared by the subcommands of the sgrt tool. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_number.h"

/* ---- one-line messages on stderr ----------------------------------------- */

/* Writes `s` with control characters escaped, so it stays on one line. */
static void put_one_line(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\n') fputs("\\n", f);
    else if (*p == '\r') fputs("\\r", f);
    else if (*p == '\t') fputs("\\t", f);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
    else fputc(*p, f);
  }
}

const char *cli_printable(const char *s, char *buf, size_t cap) {
  size_t i = 0;
  for (; s[i] && i + 1 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    buf[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  buf[i] = '\0';
  return buf;
}

static void vreport(const char *prefix, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fputs(prefix, stderr);
  put_one_line(stderr, msg);
  fputc('\n', stderr);
  fflush(stderr);
}

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("sgrt: ", fmt, ap);
  va_end(ap);
}

int cli_usage_error(const cli_command *cmd, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cmd) cli_error("%s: %s (see 'sgrt %s --help')", cmd->name, msg, cmd->name);
  else cli_error("%s (see 'sgrt --help')", msg);
  return CLI_EXIT_USAGE;
}

int cli_fail(sg_status st, const char *fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *detail = sg_last_error();
  if (detail[0]) cli_error("%s: %s: %s", what, sg_status_str(st), detail);
  else cli_error("%s: %s", what, sg_status_str(st));
  return CLI_EXIT_FAIL;
}

/* ---- options ------------------------------------------------------------- */

void cli_print_command_help(const cli_command *cmd) {
  printf("usage: sgrt %s %s\n\n%s\n", cmd->name, cmd->args, cmd->summary);
  if (cmd->help && cmd->help[0]) printf("\n%s", cmd->help);
}

static const cli_option *find_long(const cli_option *opts, int n, const char *name, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(opts[i].long_name) == len && strncmp(opts[i].long_name, name, len) == 0) return &opts[i];
  return NULL;
}

static const cli_option *find_short(const cli_option *opts, int n, char c) {
  for (int i = 0; i < n; i++)
    if (opts[i].short_name != 0 && opts[i].short_name == c) return &opts[i];
  return NULL;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, const cli_option *opts, int n_opts,
              const char **pos, int min_pos, int max_pos) {
  int n_pos = 0;
  bool only_positional = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const cli_option *o = NULL;
    const char *inline_value = NULL;
    if (!only_positional && strcmp(a, "--") == 0) {
      only_positional = true;
      continue;
    }
    if (only_positional || a[0] != '-' || a[1] == '\0') { /* "-" is a positional (stdout/stdin) */
      if (n_pos == max_pos) return cli_usage_error(cmd, "unexpected argument '%s'", a);
      pos[n_pos++] = a;
      continue;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      cli_print_command_help(cmd);
      return CLI_EXIT_OK;
    }
    if (a[1] == '-') {
      const char *name = a + 2;
      const char *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      o = find_long(opts, n_opts, name, len);
      if (o == NULL) return cli_usage_error(cmd, "unknown option '%.*s'", (int)(len + 2), a);
      if (eq) inline_value = eq + 1;
    } else {
      o = find_short(opts, n_opts, a[1]);
      if (o == NULL) return cli_usage_error(cmd, "unknown option '-%c'", a[1]);
      if (a[2] != '\0') inline_value = a + 2; /* -oFILE */
    }
    if (o->flag) {
      if (inline_value) return cli_usage_error(cmd, "option '--%s' takes no value", o->long_name);
      *o->flag = 1;
    } else {
      if (inline_value == NULL) {
        if (i + 1 >= argc) return cli_usage_error(cmd, "option '--%s' needs a value", o->long_name);
        inline_value = argv[++i];
      }
      if (inline_value[0] == '\0')
        return cli_usage_error(cmd, "option '--%s' needs a non-empty value", o->long_name);
      if (o->list == NULL) {
        *o->value = inline_value;
      } else {
        if (o->list->n == CLI_LIST_MAX)
          return cli_usage_error(cmd, "option '--%s' is given more than %d times", o->long_name,
                                 CLI_LIST_MAX);
        o->list->v[o->list->n++] = inline_value;
        o->list->v[o->list->n] = NULL;
      }
    }
  }
  if (n_pos < min_pos)
    return cli_usage_error(cmd, "missing argument (usage: sgrt %s %s)", cmd->name, cmd->args);
  for (int i = n_pos; i < max_pos; i++) pos[i] = NULL;
  return CLI_CONTINUE;
}

/* ---- files ---------------------------------------------------------------- */

const char *cli_file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

/* The library's sg__open_regular, which the tool cannot link (it uses only
 * libsgrt's exported API): the same checks, with the message in err. */
int cli_open_regular(const char *path, bool write, char *err, size_t cap) {
  /* O_NONBLOCK: opening a FIFO waits for its other end, perhaps forever. */
  int flags = (write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  int fd = open(path, flags, 0666);
  struct stat sb;
  if (fd < 0) {
    int e = errno;
    /* ENXIO (a FIFO without a reader, a socket) or EISDIR: say what it is. */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
      snprintf(err, cap, "'%s' is %s, not a regular file", path, cli_file_kind((unsigned)sb.st_mode));
    else snprintf(err, cap, "%s", strerror(e));
    errno = e;
    return -1;
  }
  int e = 0, fl;
  if (fstat(fd, &sb) != 0) {
    e = errno;
    snprintf(err, cap, "%s", strerror(e));
  } else if (!S_ISREG(sb.st_mode)) {
    e = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
    snprintf(err, cap, "'%s' is %s, not a regular file", path, cli_file_kind((unsigned)sb.st_mode));
  } else if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    e = errno;
    snprintf(err, cap, "%s", strerror(e));
  }
  if (e != 0) {
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

FILE *cli_fopen_regular(const char *path, bool write, char *err, size_t cap) {
  int fd = cli_open_regular(path, write, err, cap);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, write ? "wb" : "rb");
  if (f == NULL) {
    int e = errno;
    snprintf(err, cap, "%s", strerror(e));
    close(fd);
    errno = e;
  }
  return f;
}

/* ---- graphs -------------------------------------------------------------- */

static const unsigned char sgg_magic[8] = {0x89, 'S', 'G', 'G', '\r', '\n', 0x1a, '\n'};

int cli_is_onnx_path(const char *path) {
  size_t n = strlen(path);
  return n >= 5 && strcmp(path + n - 5, ".onnx") == 0;
}

int cli_is_sgg_file(const char *path) {
  unsigned char h[4];
  char err[256];
  FILE *f = cli_fopen_regular(path, false, err, sizeof err);
  if (f == NULL) return 0;
  size_t got = fread(h, 1, sizeof h, f);
  fclose(f);
  return got == sizeof h && memcmp(h, sgg_magic, sizeof h) == 0;
}

sg_status cli_open_model(const char *path, const cli_sizes *sz, sg_graph **out, char *msg, size_t cap) {
  sg_clear_error();
  *out = NULL;
  sg_onnx_params p = sg_onnx_params_init();
  bool sized = sz != NULL && (sz->batch > 0 || (sz->dims != NULL && sz->dims[0] != NULL));
  if (sized) {
    p.batch = sz->batch > 0 ? sz->batch : 0;
    p.dims = sz->dims;
  }
  if (sized && cli_is_sgg_file(path)) {
    snprintf(msg, cap, "--batch and --dim apply to ONNX models; '%s' is a .sgg file, whose shapes are static",
             path);
    return SG_ERR_INVALID_ARG;
  }
  sg_status st = cli_is_onnx_path(path) ? sg_onnx_import(path, &p, out) : sg_graph_load(path, out);
  snprintf(msg, cap, "%s", sg_last_error());
  /* Not .sgg at all (no magic): perhaps an ONNX model under another name. */
  if (st != SG_ERR_FORMAT || cli_is_onnx_path(path) || cli_is_sgg_file(path)) return st;
  sg_clear_error();
  sg_status onnx_st = sg_onnx_import(path, &p, out);
  if (onnx_st == SG_OK) return SG_OK;
  /* Reported as the .sgg failure it first was, with why ONNX failed too. */
  size_t n = strlen(msg);
  snprintf(msg + n, cap - n, "; not an ONNX model either: %s: %s", sg_status_str(onnx_st), sg_last_error());
  return st;
}

size_t cli_symbolic_dims(const char *path, sg_onnx_symbolic_dim *out) {
  size_t n = 0;
  if (cli_is_sgg_file(path) || sg_onnx_symbolic_dims(path, out, CLI_MAX_SYMBOLIC, &n) != SG_OK) n = 0;
  sg_clear_error();
  return n < CLI_MAX_SYMBOLIC ? n : CLI_MAX_SYMBOLIC;
}

bool cli_sizes_names(const cli_sizes *sz, const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; name[0] && sz != NULL && sz->dims != NULL && sz->dims[i] != NULL; i++) {
    const char *eq = strrchr(sz->dims[i], '='); /* the library splits NAME=N at the last '=' too */
    if (eq != NULL && (size_t)(eq - sz->dims[i]) == len && memcmp(sz->dims[i], name, len) == 0) return true;
  }
  return false;
}

sg_status cli_open_model_symbolic(const char *path, const cli_sizes *sz, sg_graph **out, char *msg,
                                  size_t cap, sg_onnx_symbolic_dim *sym, size_t *n_sym) {
  size_t n = sz != NULL && sz->batch > 0 ? 0 : cli_symbolic_dims(path, sym), left = 0;
  for (size_t k = 0; k < n; k++) /* keep those that --dim does not size */
    if (!cli_sizes_names(sz, sym[k].name)) sym[left++] = sym[k];
  *n_sym = left;
  cli_sizes at1 = {left > 0 ? 1 : (sz ? sz->batch : 0), sz ? sz->dims : NULL};
  return cli_open_model(path, &at1, out, msg, cap);
}

cJSON *cli_json_symbolic(const sg_onnx_symbolic_dim *sym, size_t n) {
  cJSON *arr = cJSON_CreateArray();
  int ok = arr != NULL;
  for (size_t i = 0; ok && i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    int ok2 = o != NULL;
    ok2 = ok2 && cli_json_add(o, "input", cli_json_string(sym[i].input));
    ok2 = ok2 && cli_json_add(o, "dim", cJSON_CreateNumber(sym[i].dim));
    ok2 = ok2 && cli_json_add(o, "name", cli_json_string(sym[i].name));
    ok = cli_json_add(arr, NULL, cli_json_finish(o, ok2));
  }
  return cli_json_finish(arr, ok);
}

int cli_load_model(const char *path, const cli_sizes *sz, sg_graph **out) {
  char msg[2048];
  sg_status st = cli_open_model(path, sz, out, msg, sizeof msg);
  if (st == SG_OK) return CLI_EXIT_OK;
  *out = NULL;
  if (msg[0]) cli_error("cannot load '%s': %s: %s", path, sg_status_str(st), msg);
  else cli_error("cannot load '%s': %s", path, sg_status_str(st));
  return CLI_EXIT_FAIL;
}

int cli_parse_batch(const cli_command *cmd, const char *s, long *out) {
  *out = 0;
  if (s == NULL) return CLI_CONTINUE;
  int64_t v;
  int rc = cli_int_option(cmd, "--batch", s, 1, CLI_BATCH_MAX, &v);
  if (rc == CLI_CONTINUE) *out = (long)v;
  return rc;
}

int cli_parse_sizes(const cli_command *cmd, const char *batch_s, const cli_list *dim, cli_sizes *out) {
  out->dims = NULL;
  int rc = cli_parse_batch(cmd, batch_s, &out->batch);
  for (int i = 0; rc == CLI_CONTINUE && dim != NULL && i < dim->n; i++) {
    const char *eq = strrchr(dim->v[i], '=');
    if (eq == NULL || eq == dim->v[i])
      return cli_usage_error(cmd, "--dim '%s' is not NAME=N (the name of a symbolic dim and its size)",
                             dim->v[i]);
    for (int j = 0; j < i; j++) {
      const char *eq2 = strrchr(dim->v[j], '=');
      if (eq2 - dim->v[j] == eq - dim->v[i] && memcmp(dim->v[j], dim->v[i], (size_t)(eq - dim->v[i])) == 0)
        return cli_usage_error(cmd, "--dim sizes '%.*s' twice ('%s' and '%s')", (int)(eq - dim->v[i]),
                               dim->v[i], dim->v[j], dim->v[i]);
    }
    int64_t v;
    if (!cli_number_int(eq + 1, 1, CLI_BATCH_MAX, &v))
      return cli_usage_error(cmd, "--dim '%s': the size must be a whole number in [1, %d]", dim->v[i],
                             CLI_BATCH_MAX);
  }
  if (rc == CLI_CONTINUE && dim != NULL && dim->n > 0) out->dims = dim->v;
  return rc;
}

int cli_int_option(const cli_command *cmd, const char *opt, const char *s, int64_t lo, int64_t hi,
                   int64_t *out) {
  char problem[512];
  if (cli_number_int(s, lo, hi, out)) return CLI_CONTINUE;
  return cli_usage_error(cmd, "%s", cli_number_int_problem(problem, sizeof problem, opt, s, lo, hi));
}

int cli_real_option(const cli_command *cmd, const char *opt, const char *s, double lo, double hi,
                    double *out) {
  char problem[512];
  if (cli_number_real(s, lo, hi, false, out)) return CLI_CONTINUE;
  return cli_usage_error(cmd, "%s", cli_number_real_problem(problem, sizeof problem, opt, s, lo, hi, false));
}

int cli_load(const char *path, sg_graph **out) { return cli_load_model(path, NULL, out); }

int cli_sgg_version(const char *path, unsigned *major, unsigned *minor) {
  /* docs/format.md: 8-byte magic, then u16 major and u16 minor, little-endian.
   * The loader has validated the whole header; this only reads it back. */
  static const unsigned char magic[8] = {0x89, 'S', 'G', 'G', '\r', '\n', 0x1a, '\n'};
  unsigned char h[12];
  char err[512];
  FILE *f = cli_fopen_regular(path, false, err, sizeof err);
  if (f == NULL) {
    cli_error("cannot reopen '%s': %s", path, err);
    return CLI_EXIT_FAIL;
  }
  size_t got = fread(h, 1, sizeof h, f);
  fclose(f);
  if (got != sizeof h || memcmp(h, magic, sizeof magic) != 0) {
    cli_error("'%s' changed while it was read: its header is no longer a .sgg header", path);
    return CLI_EXIT_FAIL;
  }
  *major = (unsigned)h[8] | (unsigned)h[9] << 8;
  *minor = (unsigned)h[10] | (unsigned)h[11] << 8;
  return CLI_EXIT_OK;
}

void cli_hex64(uint64_t v, char out[17]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--) {
    out[i] = digits[v & 0xf];
    v >>= 4;
  }
  out[16] = '\0';
}

/* ---- JSON ---------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s, 0 if there is none. */
static size_t utf8_len(const unsigned char *s, size_t left) {
  size_t n;
  unsigned min, cp;
  if (s[0] < 0x80) return 1;
  if ((s[0] & 0xe0) == 0xc0) n = 2, min = 0x80, cp = s[0] & 0x1fu;
  else if ((s[0] & 0xf0) == 0xe0) n = 3, min = 0x800, cp = s[0] & 0x0fu;
  else if ((s[0] & 0xf8) == 0xf0) n = 4, min = 0x10000, cp = s[0] & 0x07u;
  else return 0;
  if (n > left) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

cJSON *cli_json_string(const char *s) {
  if (s == NULL) return cJSON_CreateNull();
  size_t len = strlen(s);
  /* Each invalid byte becomes the 3-byte U+FFFD. */
  char *clean = malloc(len * 3 + 1);
  if (clean == NULL) return NULL;
  const unsigned char *p = (const unsigned char *)s;
  size_t left = len, o = 0;
  while (left > 0) {
    size_t n = utf8_len(p, left);
    if (n == 0) {
      memcpy(clean + o, "\xef\xbf\xbd", 3);
      o += 3;
      n = 1;
    } else {
      memcpy(clean + o, p, n);
      o += n;
    }
    p += n;
    left -= n;
  }
  clean[o] = '\0';
  cJSON *item = cJSON_CreateString(clean);
  free(clean);
  return item;
}

cJSON *cli_json_shape(int ndim, const int64_t *dims) {
  cJSON *arr = cJSON_CreateArray();
  if (arr == NULL) return NULL;
  for (int i = 0; i < ndim; i++) {
    if (!cli_json_add(arr, NULL, cJSON_CreateNumber((double)dims[i]))) {
      cJSON_Delete(arr);
      return NULL;
    }
  }
  return arr;
}

cJSON *cli_json_tensor(const sg_graph *g, sg_tensor t) {
  sg_tensor_info info;
  if (sg_graph_tensor_info(g, t, &info) != SG_OK) return NULL;
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  int ok = cli_json_add(o, "name", cli_json_string(info.name));
  ok = ok && cli_json_add(o, "dtype", cJSON_CreateString(sg_dtype_name(info.dtype)));
  ok = ok && cli_json_add(o, "shape", cli_json_shape(info.ndim, info.dims));
  return cli_json_finish(o, ok);
}

int cli_json_add(cJSON *parent, const char *key, cJSON *item) {
  if (item == NULL) return 0;
  cJSON_bool added = key ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item);
  if (!added) {
    cJSON_Delete(item);
    return 0;
  }
  return 1;
}

cJSON *cli_json_finish(cJSON *obj, int ok) {
  if (ok) return obj;
  cJSON_Delete(obj);
  return NULL;
}

int cli_print_json(cJSON *obj) {
  if (obj == NULL) {
    cli_error("out of memory building the JSON output");
    return CLI_EXIT_FAIL;
  }
  char *text = cJSON_PrintUnformatted(obj);
  cJSON_Delete(obj);
  if (text == NULL) {
    cli_error("out of memory printing the JSON output");
    return CLI_EXIT_FAIL;
  }
  puts(text);
  cJSON_free(text);
  return CLI_EXIT_OK;
}
