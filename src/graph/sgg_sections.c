/* .sgg reader, part 2: decodes the known sections into a graph. The
 * container has been validated (sgg_read.c): every known section is present,
 * lies inside the file and matches its checksum, so what remains is to
 * distrust its contents. Variable-length lists (strings, op input/output
 * lists, attributes, integer lists, initializers) must be stored back to back
 * in record order; that makes a canonical file the only valid encoding of a
 * graph and keeps the work of loading linear in the file's size (nothing can
 * be referenced twice to amplify a small file). */
#include <stdio.h>
#include <string.h>

#include "graph/sgg_format.h"

/* "tensors section, record 12 (file offset 0x1a40): " + message. */
__attribute__((format(printf, 6, 7))) static sg_status rec_error(sg_status st, uint32_t sec, const char *what,
                                                                 uint64_t index, uint64_t file_off,
                                                                 const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (what == NULL)
    return sg__error(st, "%s section (file offset 0x%llx): %s", sgg_section_name(sec),
                     (unsigned long long)file_off, msg);
  return sg__error(st, "%s section, %s %llu (file offset 0x%llx): %s", sgg_section_name(sec), what,
                   (unsigned long long)index, (unsigned long long)file_off, msg);
}

/* Reads the two u32 counts that open a section and checks that the section
 * is exactly `prefix + per_a * a + per_b * b` bytes long. */
static sg_status section_counts(const sgg_reader *r, uint32_t type, uint64_t per_a, uint64_t per_b,
                                uint32_t *a, uint32_t *b) {
  const sgg_section *s = &r->sec[type];
  if (s->length < SGG_SECTION_PREFIX)
    return rec_error(SG_ERR_FORMAT, type, NULL, 0, s->offset, "%llu bytes, shorter than its %d-byte prefix",
                     (unsigned long long)s->length, SGG_SECTION_PREFIX);
  *a = sgg_rd32(s->p);
  *b = sgg_rd32(s->p + 4);
  /* u32 counts times small record sizes cannot overflow u64. */
  uint64_t want = SGG_SECTION_PREFIX + per_a * *a + per_b * *b;
  if (want != s->length)
    return rec_error(SG_ERR_FORMAT, type, NULL, 0, s->offset,
                     "counts %u and %u need %llu bytes, the section has %llu", *a, *b,
                     (unsigned long long)want, (unsigned long long)s->length);
  return SG_OK;
}

static sg_status read_strings(sgg_reader *r) {
  const sgg_section *s = &r->sec[SGG_SEC_STRINGS];
  if (s->length < SGG_SECTION_PREFIX)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_STRINGS, NULL, 0, s->offset,
                     "%llu bytes, shorter than its %d-byte prefix", (unsigned long long)s->length,
                     SGG_SECTION_PREFIX);
  uint32_t n = sgg_rd32(s->p);
  if (sgg_rd32(s->p + 4) != 0)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_STRINGS, NULL, 0, s->offset + 4, "reserved field is not zero");
  if (4ull * n > s->length - SGG_SECTION_PREFIX)
    return rec_error(SG_ERR_RANGE, SGG_SEC_STRINGS, NULL, 0, s->offset,
                     "%u string offsets do not fit in %llu bytes", n, (unsigned long long)s->length);
  r->n_strings = n;
  r->str_offsets = s->p + SGG_SECTION_PREFIX;
  r->blob = r->str_offsets + 4ull * n;
  r->blob_length = s->length - SGG_SECTION_PREFIX - 4ull * n;
  uint64_t blob_file = s->offset + SGG_SECTION_PREFIX + 4ull * n;
  uint64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t off = sgg_rd32(r->str_offsets + 4ull * i);
    if (off != at)
      return rec_error(SG_ERR_FORMAT, SGG_SEC_STRINGS, "string", i, s->offset + SGG_SECTION_PREFIX + 4ull * i,
                       "offset %u, expected %llu (strings are stored back to back)", off,
                       (unsigned long long)at);
    uint64_t left = r->blob_length - at;
    const uint8_t *nul = memchr(r->blob + at, 0, (size_t)(left < SG__MAX_NAME ? left : SG__MAX_NAME));
    if (nul == NULL) {
      if (left < SG__MAX_NAME)
        return rec_error(SG_ERR_FORMAT, SGG_SEC_STRINGS, "string", i, blob_file + at,
                         "not NUL-terminated inside the section");
      return rec_error(SG_ERR_RANGE, SGG_SEC_STRINGS, "string", i, blob_file + at, "longer than %d bytes",
                       SG__MAX_NAME - 1);
    }
    uint64_t len = (uint64_t)(nul - (r->blob + at));
    if (len == 0) return rec_error(SG_ERR_FORMAT, SGG_SEC_STRINGS, "string", i, blob_file + at, "empty name");
    at += len + 1;
  }
  if (at != r->blob_length)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_STRINGS, NULL, 0, blob_file + at,
                     "%llu bytes after the last string", (unsigned long long)(r->blob_length - at));
  return SG_OK;
}

/* String `id`, or NULL when out of range. */
static const char *string_at(const sgg_reader *r, uint32_t id) {
  if (id >= r->n_strings) return NULL;
  return (const char *)r->blob + sgg_rd32(r->str_offsets + 4ull * id);
}

static sg_status read_tensor(sgg_reader *r, uint32_t t, uint64_t *data_at) {
  const sgg_section *s = &r->sec[SGG_SEC_TENSORS], *d = &r->sec[SGG_SEC_DATA];
  const uint8_t *p = s->p + SGG_SECTION_PREFIX + (uint64_t)SGG_TENSOR_RECORD * t;
  uint64_t foff = s->offset + SGG_SECTION_PREFIX + (uint64_t)SGG_TENSOR_RECORD * t;
#define TERR(st, ...) rec_error(st, SGG_SEC_TENSORS, "record", t, foff, __VA_ARGS__)
  uint32_t name_id = sgg_rd32(p + SGG_T_NAME);
  const char *name = string_at(r, name_id);
  if (name == NULL)
    return TERR(SG_ERR_RANGE, "name string id %u is out of range (%u strings)", name_id, r->n_strings);
  unsigned dtype = sgg_rd16(p + SGG_T_DTYPE), role = sgg_rd16(p + SGG_T_ROLE);
  uint32_t ndim = sgg_rd32(p + SGG_T_NDIM), flags = sgg_rd32(p + SGG_T_FLAGS);
  if (!sg__dtype_valid((sg_dtype)dtype))
    return TERR(SG_ERR_UNSUPPORTED, "tensor '%s': unknown dtype %u", name, dtype);
  if (!sg__role_valid((sg_role)role))
    return TERR(SG_ERR_UNSUPPORTED, "tensor '%s': unknown role %u", name, role);
  if (ndim > SG_MAX_DIMS)
    return TERR(SG_ERR_RANGE, "tensor '%s': ndim %u exceeds %d", name, ndim, SG_MAX_DIMS);
  if (flags & ~SGG_TENSOR_HAS_DATA)
    return TERR(SG_ERR_FORMAT, "tensor '%s': unknown flags 0x%x", name, flags);
  sg__tensor T = {
      .name = name, .dtype = (sg_dtype)dtype, .role = (sg_role)role, .ndim = (int)ndim, .producer = -1};
  int64_t numel = 1;
  for (int i = 0; i < SG_MAX_DIMS; i++) {
    int64_t v = sgg_rdi64(p + SGG_T_DIMS + 8 * i);
    if ((uint32_t)i >= ndim) {
      if (v != 0)
        return TERR(SG_ERR_FORMAT, "tensor '%s': unused dim %d is %lld, must be 0", name, i, (long long)v);
      continue;
    }
    if (v < 1) return TERR(SG_ERR_RANGE, "tensor '%s': dim %d is %lld", name, i, (long long)v);
    if (__builtin_mul_overflow(numel, v, &numel) || numel > SG__MAX_NUMEL)
      return TERR(SG_ERR_RANGE, "tensor '%s': element count exceeds 2^56 (dim %d is %lld)", name, i,
                  (long long)v);
    T.dims[i] = v;
  }
  T.nbytes = (size_t)numel * sg_dtype_size(T.dtype);
  uint64_t off = sgg_rd64(p + SGG_T_DATA_OFFSET), size = sgg_rd64(p + SGG_T_DATA_SIZE);
  if (flags & SGG_TENSOR_HAS_DATA) {
    if (T.role == SG_ROLE_INPUT || T.role == SG_ROLE_ACTIVATION || T.role == SG_ROLE_GRADIENT)
      return TERR(SG_ERR_FORMAT, "tensor '%s': role %s cannot have data", name, sg_role_name(T.role));
    if (size != T.nbytes)
      return TERR(SG_ERR_FORMAT, "tensor '%s': data size %llu does not match its shape (%zu bytes)", name,
                  (unsigned long long)size, T.nbytes);
    uint64_t want = sgg_align_up(*data_at, SGG_DATA_ALIGN);
    if (off != want)
      return TERR(SG_ERR_FORMAT,
                  "tensor '%s': data offset %llu, expected %llu (initializers are stored in tensor "
                  "order, %d-byte aligned)",
                  name, (unsigned long long)off, (unsigned long long)want, SGG_DATA_ALIGN);
    if (off > d->length || size > d->length - off)
      return TERR(SG_ERR_RANGE,
                  "tensor '%s': data at %llu, %llu bytes, extends past the data section (%llu bytes)", name,
                  (unsigned long long)off, (unsigned long long)size, (unsigned long long)d->length);
    for (uint64_t k = *data_at; k < off; k++)
      if (d->p[k] != 0)
        return TERR(SG_ERR_FORMAT, "tensor '%s': nonzero padding before its data (file offset 0x%llx)", name,
                    (unsigned long long)(d->offset + k));
    T.data = d->p + off;
    *data_at = off + size;
  } else {
    if (T.role == SG_ROLE_CONSTANT) return TERR(SG_ERR_FORMAT, "constant '%s' has no data", name);
    if (off != 0 || size != 0)
      return TERR(SG_ERR_FORMAT, "tensor '%s' has no data but a data offset or size", name);
  }
  int32_t id;
  SG_CHECK(sg__graph_push_tensor(r->g, &T, &id));
  sg_status st = sg__names_insert(r->g, false, id);
  if (st == SG_ERR_DUPLICATE)
    return TERR(SG_ERR_DUPLICATE, "tensor name '%s' is already used by record %d", name,
                sg__tensor_lookup(r->g, name));
  if (st != SG_OK) return TERR(SG_ERR_NO_MEMORY, "out of memory indexing tensor '%s'", name);
  return SG_OK;
#undef TERR
}

static sg_status read_tensors(sgg_reader *r) {
  const sgg_section *s = &r->sec[SGG_SEC_TENSORS], *d = &r->sec[SGG_SEC_DATA];
  if (s->length < SGG_SECTION_PREFIX)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_TENSORS, NULL, 0, s->offset,
                     "%llu bytes, shorter than its %d-byte prefix", (unsigned long long)s->length,
                     SGG_SECTION_PREFIX);
  uint32_t n = sgg_rd32(s->p);
  if (n > SG__MAX_TENSORS)
    return rec_error(SG_ERR_RANGE, SGG_SEC_TENSORS, NULL, 0, s->offset,
                     "tensor count %u exceeds the limit of %u", n, SG__MAX_TENSORS);
  uint32_t reserved;
  SG_CHECK(section_counts(r, SGG_SEC_TENSORS, SGG_TENSOR_RECORD, 0, &n, &reserved));
  if (reserved != 0)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_TENSORS, NULL, 0, s->offset + 4, "reserved field is not zero");
  uint64_t data_at = 0;
  for (uint32_t t = 0; t < n; t++) SG_CHECK(read_tensor(r, t, &data_at));
  if (data_at != d->length)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_DATA, NULL, 0, d->offset + data_at,
                     "%llu bytes after the last initializer", (unsigned long long)(d->length - data_at));
  return SG_OK;
}

typedef struct op_cursor {
  uint32_t n_ops, n_io, n_attrs, n_ints;
  uint32_t io, attr, ints; /* next unread entry of each list */
} op_cursor;

static sg_status read_attrs(sgg_reader *r, uint32_t k, const char *op_name, const sg__op_def *def, uint32_t n,
                            op_cursor *c, sg_attr **out) {
  const sgg_section *s = &r->sec[SGG_SEC_ATTRS];
  const uint8_t *ints = s->p + SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * c->n_attrs;
  sg_attr *attrs = NULL;
  if (n > 0) {
    attrs = sg__arena_alloc(&r->g->arena, sizeof *attrs * n, 8);
    if (attrs == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "out of memory reading the attributes of op '%s'", op_name);
  }
  for (uint32_t a = 0; a < n; a++) {
    uint32_t idx = c->attr++;
    const uint8_t *p = s->p + SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * idx;
    uint64_t foff = s->offset + SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * idx;
#define AERR(st, ...) rec_error(st, SGG_SEC_ATTRS, "record", idx, foff, __VA_ARGS__)
    uint32_t name_id = sgg_rd32(p + SGG_A_NAME), type = sgg_rd32(p + SGG_A_TYPE);
    uint32_t count = sgg_rd32(p + SGG_A_COUNT), first = sgg_rd32(p + SGG_A_FIRST);
    const char *name = string_at(r, name_id);
    if (name == NULL)
      return AERR(SG_ERR_RANGE, "op %u '%s': name string id %u is out of range (%u strings)", k, op_name,
                  name_id, r->n_strings);
    sg_attr *A = &attrs[a];
    A->name = name;
    A->type = (sg_attr_type)type;
    if (type == SG_ATTR_INT || type == SG_ATTR_FLOAT) {
      if (count != 0 || first != 0)
        return AERR(SG_ERR_FORMAT, "op %u '%s': attribute '%s' is a scalar but has a count or list offset", k,
                    op_name, name);
      if (type == SG_ATTR_INT) A->i = sgg_rdi64(p + SGG_A_VALUE);
      else A->f = sgg_rdf64(p + SGG_A_VALUE);
    } else if (type == SG_ATTR_INTS) {
      if (sgg_rd64(p + SGG_A_VALUE) != 0)
        return AERR(SG_ERR_FORMAT, "op %u '%s': attribute '%s' is a list but has a scalar value", k, op_name,
                    name);
      if (first != c->ints)
        return AERR(SG_ERR_FORMAT,
                    "op %u '%s': attribute '%s' starts at list entry %u, expected %u (lists are "
                    "stored back to back)",
                    k, op_name, name, first, c->ints);
      if (count > SG__MAX_ATTR_INTS || count > c->n_ints - c->ints)
        return AERR(SG_ERR_RANGE,
                    "op %u '%s': attribute '%s' has %u values; %u remain in the section (limit %d)", k,
                    op_name, name, count, c->n_ints - c->ints, SG__MAX_ATTR_INTS);
      int64_t *v = NULL;
      if (count > 0) {
        v = sg__arena_alloc(&r->g->arena, sizeof *v * count, 8);
        if (v == NULL)
          return sg__error(SG_ERR_NO_MEMORY, "out of memory reading attribute '%s' of op '%s'", name,
                           op_name);
        for (uint32_t i = 0; i < count; i++) v[i] = sgg_rdi64(ints + 8ull * (c->ints + i));
      }
      A->count = (int)count;
      A->ints = v;
      c->ints += count;
    } else {
      return AERR(SG_ERR_UNSUPPORTED, "op %u '%s': attribute '%s' has unknown type %u", k, op_name, name,
                  type);
    }
#undef AERR
  }
  /* Schema check (names, types, duplicates, defaults) is the builder's own,
   * with the file position added to its message. */
  sg_status st = sg__canon_attrs(r->g, def, op_name, (int)n, attrs, out);
  if (st != SG_OK) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    uint32_t first = c->attr - n;
    uint64_t foff = s->offset + SGG_SECTION_PREFIX + (uint64_t)SGG_ATTR_RECORD * first;
    if (n == 0)
      return sg__error(st, "attrs section, op %u has no records (file offset 0x%llx): %s", k,
                       (unsigned long long)foff, msg);
    return sg__error(st, "attrs section, records %u..%u of op %u (file offset 0x%llx): %s", first,
                     first + n - 1, k, (unsigned long long)foff, msg);
  }
  return SG_OK;
}

static sg_status read_op(sgg_reader *r, uint32_t k, op_cursor *c) {
  const sgg_section *s = &r->sec[SGG_SEC_OPS];
  sg_graph *g = r->g;
  const uint8_t *p = s->p + SGG_SECTION_PREFIX + (uint64_t)SGG_OP_RECORD * k;
  const uint8_t *io = s->p + SGG_SECTION_PREFIX + (uint64_t)SGG_OP_RECORD * c->n_ops;
  uint64_t foff = s->offset + SGG_SECTION_PREFIX + (uint64_t)SGG_OP_RECORD * k;
#define OERR(st, ...) rec_error(st, SGG_SEC_OPS, "op", k, foff, __VA_ARGS__)
  uint32_t kind = sgg_rd32(p + SGG_O_KIND), name_id = sgg_rd32(p + SGG_O_NAME);
  uint32_t first_in = sgg_rd32(p + SGG_O_FIRST_INPUT), n_in = sgg_rd32(p + SGG_O_N_INPUTS);
  uint32_t first_out = sgg_rd32(p + SGG_O_FIRST_OUTPUT), n_out = sgg_rd32(p + SGG_O_N_OUTPUTS);
  uint32_t first_attr = sgg_rd32(p + SGG_O_FIRST_ATTR), n_attrs = sgg_rd32(p + SGG_O_N_ATTRS);
  const char *name = string_at(r, name_id);
  if (name == NULL)
    return OERR(SG_ERR_RANGE, "name string id %u is out of range (%u strings)", name_id, r->n_strings);
  const sg__op_def *def = sg__op_def_get((sg_op_kind)kind);
  if (def == NULL)
    return OERR(SG_ERR_UNSUPPORTED, "op '%s' has unknown op kind %u (written by a newer sgrt?)", name, kind);
  if (first_in != c->io)
    return OERR(SG_ERR_FORMAT,
                "%s '%s': inputs start at list entry %u, expected %u (lists are stored back to back)",
                def->name, name, first_in, c->io);
  if (n_in > SG__MAX_OP_IO || n_in > c->n_io - c->io)
    return OERR(SG_ERR_RANGE, "%s '%s': %u inputs; %u list entries remain (limit %d)", def->name, name, n_in,
                c->n_io - c->io, SG__MAX_OP_IO);
  c->io += n_in;
  if (first_out != c->io)
    return OERR(SG_ERR_FORMAT,
                "%s '%s': outputs start at list entry %u, expected %u (lists are stored back to back)",
                def->name, name, first_out, c->io);
  if (n_out > SG__MAX_OP_IO || n_out > c->n_io - c->io)
    return OERR(SG_ERR_RANGE, "%s '%s': %u outputs; %u list entries remain (limit %d)", def->name, name,
                n_out, c->n_io - c->io, SG__MAX_OP_IO);
  c->io += n_out;
  if (first_attr != c->attr)
    return OERR(SG_ERR_FORMAT, "%s '%s': attributes start at record %u, expected %u (stored back to back)",
                def->name, name, first_attr, c->attr);
  /* More attributes than the schema has must repeat or invent one; the bound
   * also keeps the schema check's pairwise comparison small. */
  if (n_attrs > (uint32_t)def->n_attrs)
    return OERR(SG_ERR_ATTRIBUTE, "%s '%s' has %u attributes; %s has %d", def->name, name, n_attrs, def->name,
                def->n_attrs);
  if (n_attrs > c->n_attrs - c->attr)
    return OERR(SG_ERR_RANGE, "%s '%s': %u attributes; %u records remain", def->name, name, n_attrs,
                c->n_attrs - c->attr);

  sg__op op = {.kind = (sg_op_kind)kind, .n_inputs = (int)n_in, .n_outputs = (int)n_out};
  op.name = sg__arena_strdup(&g->arena, name);
  op.inputs = sg__arena_alloc(&g->arena, sizeof(int32_t) * (n_in ? n_in : 1), 4);
  op.outputs = sg__arena_alloc(&g->arena, sizeof(int32_t) * (n_out ? n_out : 1), 4);
  if (!op.name || !op.inputs || !op.outputs)
    return sg__error(SG_ERR_NO_MEMORY, "out of memory reading op '%s'", name);
  for (uint32_t i = 0; i < n_in; i++) {
    uint32_t v = sgg_rd32(io + 4ull * (first_in + i));
    if (v == SGG_NO_TENSOR) {
      if (i >= 32 || !(def->optional_inputs >> i & 1u))
        return OERR(SG_ERR_ARITY, "%s '%s': input %u is absent but not optional", def->name, name, i);
      op.inputs[i] = -1;
      continue;
    }
    if (v >= g->n_tensors)
      return OERR(SG_ERR_RANGE, "%s '%s': input %u is tensor id %u, out of range (%u tensors)", def->name,
                  name, i, v, g->n_tensors);
    op.inputs[i] = (int32_t)v;
  }
  for (uint32_t i = 0; i < n_out; i++) {
    uint32_t v = sgg_rd32(io + 4ull * (first_out + i));
    if (v >= g->n_tensors)
      return OERR(SG_ERR_RANGE, "%s '%s': output %u is tensor id %u, out of range (%u tensors)", def->name,
                  name, i, v, g->n_tensors);
    sg__tensor *t = &g->tensors[v];
    if (t->producer >= 0)
      return OERR(SG_ERR_DUPLICATE, "%s '%s': output %u, tensor '%s', is also produced by op %d", def->name,
                  name, i, t->name, t->producer);
    t->producer = (int32_t)k;
    op.outputs[i] = (int32_t)v;
  }
  SG_CHECK(read_attrs(r, k, name, def, n_attrs, c, &op.attrs));
  op.n_attrs = def->n_attrs;
  SG_CHECK(sg__graph_push_op(g, &op));
  sg_status st = sg__names_insert(g, true, (int32_t)k);
  if (st == SG_ERR_DUPLICATE)
    return OERR(SG_ERR_DUPLICATE, "op name '%s' is already used by op %d", name, sg__op_lookup(g, name));
  if (st != SG_OK) return OERR(SG_ERR_NO_MEMORY, "out of memory indexing op '%s'", name);
  return SG_OK;
#undef OERR
}

static sg_status read_ops(sgg_reader *r) {
  const sgg_section *s = &r->sec[SGG_SEC_OPS], *a = &r->sec[SGG_SEC_ATTRS];
  op_cursor c = {0};
  if (s->length >= SGG_SECTION_PREFIX && sgg_rd32(s->p) > SG__MAX_OPS)
    return rec_error(SG_ERR_RANGE, SGG_SEC_OPS, NULL, 0, s->offset, "op count %u exceeds the limit of %u",
                     sgg_rd32(s->p), SG__MAX_OPS);
  SG_CHECK(section_counts(r, SGG_SEC_OPS, SGG_OP_RECORD, 4, &c.n_ops, &c.n_io));
  SG_CHECK(section_counts(r, SGG_SEC_ATTRS, SGG_ATTR_RECORD, 8, &c.n_attrs, &c.n_ints));
  for (uint32_t k = 0; k < c.n_ops; k++) SG_CHECK(read_op(r, k, &c));
  if (c.io != c.n_io)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_OPS, NULL, 0, s->offset,
                     "%u input/output list entries belong to no op", c.n_io - c.io);
  if (c.attr != c.n_attrs)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_ATTRS, NULL, 0, a->offset, "%u attribute records belong to no op",
                     c.n_attrs - c.attr);
  if (c.ints != c.n_ints)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_ATTRS, NULL, 0, a->offset,
                     "%u list values belong to no attribute", c.n_ints - c.ints);
  return SG_OK;
}

static sg_status read_graph_io(sgg_reader *r) {
  const sgg_section *s = &r->sec[SGG_SEC_GRAPH_IO];
  sg_graph *g = r->g;
  uint32_t n, reserved;
  SG_CHECK(section_counts(r, SGG_SEC_GRAPH_IO, 4, 0, &n, &reserved));
  if (reserved != 0)
    return rec_error(SG_ERR_FORMAT, SGG_SEC_GRAPH_IO, NULL, 0, s->offset + 4, "reserved field is not zero");
  if (n == 0) return SG_OK;
  if (n > g->n_tensors)
    return rec_error(SG_ERR_RANGE, SGG_SEC_GRAPH_IO, NULL, 0, s->offset, "%u outputs but only %u tensors", n,
                     g->n_tensors);
  /* A bitmap keeps the duplicate check linear. */
  uint8_t *seen = sg__calloc(g->n_tensors, 1);
  if (seen == NULL || sg__grow((void **)&g->outputs, &g->cap_outputs, n, sizeof *g->outputs) != SG_OK) {
    sg__free(seen);
    return sg__error(SG_ERR_NO_MEMORY, "out of memory reading the graph outputs");
  }
  sg_status st = SG_OK;
  for (uint32_t i = 0; i < n && st == SG_OK; i++) {
    uint64_t foff = s->offset + SGG_SECTION_PREFIX + 4ull * i;
    uint32_t v = sgg_rd32(s->p + SGG_SECTION_PREFIX + 4ull * i);
    if (v >= g->n_tensors)
      st = rec_error(SG_ERR_RANGE, SGG_SEC_GRAPH_IO, "output", i, foff,
                     "tensor id %u is out of range (%u tensors)", v, g->n_tensors);
    else if (seen[v])
      st = rec_error(SG_ERR_DUPLICATE, SGG_SEC_GRAPH_IO, "output", i, foff, "tensor '%s' is listed twice",
                     g->tensors[v].name);
    else {
      seen[v] = 1;
      g->outputs[g->n_outputs++] = (int32_t)v;
    }
  }
  sg__free(seen);
  return st;
}

sg_status sg__sgg_read_sections(sgg_reader *r) {
  SG_CHECK(read_strings(r));
  SG_CHECK(read_tensors(r));
  SG_CHECK(read_ops(r));
  SG_CHECK(read_graph_io(r));
  return SG_OK;
}
