/* Graphviz DOT output of a graph (SPEC O3): ops as boxes, source tensors as
 * ellipses, edges labelled with the shape of the tensor they carry. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

/* Fill colours per role of a source tensor, so weights stand out from data. */
static const char *role_color(sg_role role) {
  switch (role) {
    case SG_ROLE_INPUT: return "#cfe2ff";
    case SG_ROLE_PARAMETER: return "#ffe5b4";
    case SG_ROLE_CONSTANT: return "#e2e3e5";
    case SG_ROLE_STATE: return "#d1e7dd";
    case SG_ROLE_OPTIMIZER_STATE: return "#f8d7da";
    case SG_ROLE_ACTIVATION:
    case SG_ROLE_GRADIENT: break;
  }
  return "#ffffff";
}

/* Writes `s` for use inside a double-quoted DOT string. Names of a
 * finalized graph are valid UTF-8 without control characters (the verifier
 * checks), so only quotes and backslashes need escaping. */
static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
}

/* "[8,3,32,32] f32" */
static void put_shape(FILE *f, const sg__tensor *t) {
  char buf[SG__SHAPE_STR];
  fputs(sg__shape_str(buf, t->dtype, t->ndim, t->dims), f);
}

static bool is_output(const sg_graph *g, int32_t id) {
  for (uint32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == id) return true;
  return false;
}

static void write_graph(const sg_graph *g, FILE *f) {
  fputs("digraph sgrt {\n"
        "  rankdir=TB;\n"
        "  node [fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [fontname=\"Helvetica\", fontsize=9];\n",
        f);

  /* Source tensors: every tensor no op produces. */
  for (uint32_t i = 0; i < g->n_tensors; i++) {
    const sg__tensor *t = &g->tensors[i];
    if (t->producer != -1) continue;
    fprintf(f, "  t%u [shape=ellipse, style=filled, fillcolor=\"%s\"%s, label=\"", i, role_color(t->role),
            is_output(g, (int32_t)i) ? ", peripheries=2" : "");
    put_escaped(f, t->name);
    fputs("\\n", f);
    put_shape(f, t);
    fprintf(f, "\\n%s\"];\n", sg_role_name(t->role));
  }

  for (uint32_t i = 0; i < g->n_ops; i++) {
    const sg__op *op = &g->ops[i];
    fprintf(f, "  op%u [shape=box, style=\"rounded,filled\", fillcolor=\"#f5f5f5\", label=\"%s\\n", i,
            sg_op_kind_name(op->kind));
    put_escaped(f, op->name);
    fputs("\"];\n", f);
  }

  /* Edges into each op, from the producing op or the source tensor. */
  for (uint32_t i = 0; i < g->n_ops; i++) {
    const sg__op *op = &g->ops[i];
    for (int k = 0; k < op->n_inputs; k++) {
      int32_t id = op->inputs[k];
      if (id < 0) continue;
      const sg__tensor *t = &g->tensors[id];
      if (t->producer == -1) fprintf(f, "  t%d -> op%u [label=\"", id, i);
      else fprintf(f, "  op%d -> op%u [label=\"", t->producer, i);
      put_shape(f, t);
      fputs("\"];\n", f);
    }
  }

  /* Marked outputs that ops produce get their own node, so that a loss or a
   * prediction is visible as the end of the graph. */
  for (uint32_t i = 0; i < g->n_outputs; i++) {
    int32_t id = g->outputs[i];
    const sg__tensor *t = &g->tensors[id];
    if (t->producer == -1) continue;
    fprintf(f, "  out%u [shape=ellipse, peripheries=2, label=\"", i);
    put_escaped(f, t->name);
    fputs("\\n", f);
    put_shape(f, t);
    fprintf(f, "\"];\n  op%d -> out%u [label=\"", t->producer, i);
    put_shape(f, t);
    fputs("\"];\n", f);
  }
  fputs("}\n", f);
}

sg_status sg_graph_write_dot(const sg_graph *g, const char *path) {
  if (g == NULL || path == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_graph_write_dot: NULL argument");
  if (path[0] == '\0') return sg__error(SG_ERR_INVALID_ARG, "sg_graph_write_dot: path is empty");
  /* Only a verified graph is written: ids, producers and names are valid. */
  if (!g->finalized) return sg__error(SG_ERR_STATE, "sg_graph_write_dot: finalize the graph first");

  bool to_stdout = strcmp(path, "-") == 0;
  FILE *f = stdout;
  /* A FIFO, a device or a directory is refused, not waited on ("-" is stdout). */
  if (!to_stdout) SG_CHECK(sg__fopen_regular(path, true, &f));
  errno = 0;
  write_graph(g, f);
  int failed = ferror(f), err = errno;
  int closed = to_stdout ? fflush(f) : fclose(f);
  if (closed != 0 && !failed) {
    failed = 1;
    err = errno;
  }
  /* A partial file is left in place, as a failed write left it. */
  if (failed)
    return sg__error(SG_ERR_IO, "writing DOT to '%s' failed: %s", to_stdout ? "stdout" : path,
                     err ? strerror(err) : "write error");
  return SG_OK;
}
