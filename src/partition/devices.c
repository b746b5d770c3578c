/* Device tables (SPEC P3): built-in presets and a JSON format read with
 * cJSON. Every error names the field at fault ("devices[2].memory_bytes"). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "partition/partition_internal.h"

/* ---- presets -------------------------------------------------------------- */

typedef struct preset {
  const char *name;
  sg_device_kind kind;
  double peak, memory, bw, link_bw, link_lat;
} preset;

/* a100 and ascend910b: the seed's table (sec. 2.2: INT8 peak, memory
 * bandwidth, device-to-device latency; the 40 GB/s PCIe 4.0 figure behind
 * alpha = 0.3) and its 80 GB A100 (sec. 2.5); NVLink 3 gives the A100 600
 * GB/s. The seed has no CPU figures: "cpu" is a typical two-socket server
 * (2 x 32 cores with AVX-512 FMA, 8 DDR4 channels per socket, 100 Gb/s
 * network). "host" is filled in from this machine (sg__device_host). */
static const preset presets[] = {
    {"a100", SG_DEVICE_GPU, 624e12, 80e9, 2.0e12, 600e9, 1.2e-6},
    {"ascend910b", SG_DEVICE_NPU, 512e12, 64e9, 1.2e12, 40e9, 8.7e-6},
    {"cpu", SG_DEVICE_CPU, 4.0e12, 512e9, 300e9, 12.5e9, 10e-6},
    {"host", SG_DEVICE_CPU, 0, 0, 0, 0, 0},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])
#define PRESET_LIST "a100, ascend910b, cpu, host"

sg__device sg__device_host(void) {
  /* oneDNN's sgemm reaches ~250 GFLOP/s on the 2-core development machine
   * (DESIGN.md): 125 GFLOP/s per core. Memory bandwidth and the local
   * shared-memory link are conservative figures for one socket. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  sg__device d = {0};
  d.kind = SG_DEVICE_CPU;
  d.peak = 125e9 * (double)(cores > 0 ? cores : 1);
  d.memory = pages > 0 && page > 0 ? (double)pages * (double)page : 8e9;
  d.bw = 20e9;
  d.link_bw = 10e9;
  d.link_lat = 1e-6;
  return d;
}

static const preset *find_preset(const char *name) {
  for (size_t i = 0; i < N_PRESETS; i++)
    if (strcmp(presets[i].name, name) == 0) return &presets[i];
  return NULL;
}

static sg__device from_preset(const preset *p) {
  if (strcmp(p->name, "host") == 0) return sg__device_host();
  sg__device d = {0};
  d.kind = p->kind;
  d.peak = p->peak;
  d.memory = p->memory;
  d.bw = p->bw;
  d.link_bw = p->link_bw;
  d.link_lat = p->link_lat;
  return d;
}

/* ---- tables ------------------------------------------------------------- */

void sg__devices_free(sg__device *dev, int n) {
  if (dev == NULL) return;
  for (int i = 0; i < n; i++) sg__free(dev[i].name);
  sg__free(dev);
}

sg_status sg__devices_copy(const sg__device *src, int n, sg__device **out) {
  sg__device *d = sg__calloc((size_t)(n > 0 ? n : 1), sizeof *d);
  if (d == NULL) return sg__error(SG_ERR_NO_MEMORY, "device table: out of memory");
  for (int i = 0; i < n; i++) {
    d[i] = src[i];
    d[i].name = sg__strdup(src[i].name ? src[i].name : "device");
    if (d[i].name == NULL) {
      sg__devices_free(d, i);
      return sg__error(SG_ERR_NO_MEMORY, "device table: out of memory");
    }
  }
  *out = d;
  return SG_OK;
}

void sg_device_table_destroy(sg_device_table *t) {
  if (t == NULL) return;
  sg__devices_free(t->dev, t->n);
  sg__free(t);
}

int sg_device_table_count(const sg_device_table *t) { return t ? t->n : 0; }

const char *sg_device_kind_name(sg_device_kind kind) {
  switch (kind) {
    case SG_DEVICE_CPU: return "cpu";
    case SG_DEVICE_GPU: return "gpu";
    case SG_DEVICE_NPU: return "npu";
  }
  return "?";
}

void sg__device_info_of(const sg__device *d, sg_device_info *out) {
  out->name = d->name;
  out->kind = d->kind;
  out->peak_flops = d->peak;
  out->memory_bytes = isinf(d->memory) ? 0.0 : d->memory;
  out->memory_bandwidth = d->bw;
  out->link_bandwidth = d->link_bw;
  out->link_latency = d->link_lat;
}

sg_status sg_device_table_get(const sg_device_table *t, int i, sg_device_info *out) {
  if (t == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_device_table_get: NULL argument");
  if (i < 0 || i >= t->n)
    return sg__error(SG_ERR_RANGE, "sg_device_table_get: device %d of a table of %d", i, t->n);
  sg__device_info_of(&t->dev[i], out);
  return SG_OK;
}

static sg_status new_table(int n, sg_device_table **out) {
  sg_device_table *t = sg__calloc(1, sizeof *t);
  if (t == NULL || (t->dev = sg__calloc((size_t)n, sizeof *t->dev)) == NULL) {
    sg__free(t);
    return sg__error(SG_ERR_NO_MEMORY, "device table: out of memory");
  }
  *out = t;
  return SG_OK;
}

sg_status sg_device_table_preset(const char *name, int count, sg_device_table **out) {
  if (out) *out = NULL;
  if (name == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_device_table_preset: NULL argument");
  if (count < 1 || count > SG_PARTITION_MAX_PARTS)
    return sg__error(SG_ERR_INVALID_ARG, "sg_device_table_preset: count %d is outside 1..%d", count,
                     SG_PARTITION_MAX_PARTS);
  const preset *p = find_preset(name);
  if (p == NULL)
    return sg__error(SG_ERR_NOT_FOUND, "device table: unknown preset '%.64s' (known: " PRESET_LIST ")", name);
  sg_device_table *t = NULL;
  SG_CHECK(new_table(count, &t));
  for (int i = 0; i < count; i++) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s-%d", p->name, i);
    t->dev[i] = from_preset(p);
    t->dev[i].name = sg__strdup(buf);
    t->n = i + 1;
    if (t->dev[i].name == NULL) {
      sg_device_table_destroy(t);
      return sg__error(SG_ERR_NO_MEMORY, "device table: out of memory");
    }
  }
  *out = t;
  return SG_OK;
}

/* ---- JSON ----------------------------------------------------------------- */

typedef struct field {
  const char *key;
  size_t offset; /* into sg__device; SIZE_MAX for non-numeric fields */
  double scale;  /* JSON unit -> SI */
  bool positive; /* > 0, else >= 0 */
} field;

static const field number_fields[] = {
    {"peak_flops", offsetof(sg__device, peak), 1.0, true},
    {"memory_bytes", offsetof(sg__device, memory), 1.0, true},
    {"memory_bandwidth", offsetof(sg__device, bw), 1.0, true},
    {"link_bandwidth", offsetof(sg__device, link_bw), 1.0, true},
    {"link_latency_us", offsetof(sg__device, link_lat), 1e-6, false},
};
#define N_NUMBER_FIELDS (sizeof number_fields / sizeof number_fields[0])

static bool known_key(const char *k) {
  static const char *const other[] = {"name", "kind", "preset", "count", "comment"};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
    if (strcmp(k, other[i]) == 0) return true;
  for (size_t i = 0; i < N_NUMBER_FIELDS; i++)
    if (strcmp(k, number_fields[i].key) == 0) return true;
  return false;
}

static sg_status parse_kind(const char *s, int idx, sg_device_kind *out) {
  static const sg_device_kind kinds[] = {SG_DEVICE_CPU, SG_DEVICE_GPU, SG_DEVICE_NPU};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(s, sg_device_kind_name(kinds[i])) == 0) {
      *out = kinds[i];
      return SG_OK;
    }
  return sg__error(SG_ERR_FORMAT,
                   "device table: devices[%d].kind: unknown kind '%.64s' (known: cpu, gpu, npu)", idx, s);
}

/* One entry of "devices": fills *d (name not set) and its repeat count. */
static sg_status parse_entry(const cJSON *e, int idx, sg__device *d, int *count, const char **name) {
  if (!cJSON_IsObject(e))
    return sg__error(SG_ERR_FORMAT, "device table: devices[%d]: must be an object", idx);
  for (const cJSON *c = e->child; c; c = c->next)
    if (c->string == NULL || !known_key(c->string))
      return sg__error(SG_ERR_FORMAT,
                       "device table: devices[%d].%.64s: unknown field (known: name, kind, preset, count, "
                       "peak_flops, memory_bytes, memory_bandwidth, link_bandwidth, link_latency_us)",
                       idx, c->string ? c->string : "?");
  memset(d, 0, sizeof *d);
  bool have[N_NUMBER_FIELDS] = {false};
  bool have_kind = false;
  const cJSON *ps = cJSON_GetObjectItemCaseSensitive(e, "preset");
  if (ps) {
    if (!cJSON_IsString(ps))
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].preset: must be a string", idx);
    const preset *p = find_preset(ps->valuestring);
    if (p == NULL)
      return sg__error(SG_ERR_NOT_FOUND,
                       "device table: devices[%d].preset: unknown preset '%.64s' (known: " PRESET_LIST ")",
                       idx, ps->valuestring);
    *d = from_preset(p);
    for (size_t i = 0; i < N_NUMBER_FIELDS; i++) have[i] = true;
    have_kind = true;
  }
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
  if (kind) {
    if (!cJSON_IsString(kind))
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].kind: must be a string (cpu, gpu, npu)",
                       idx);
    SG_CHECK(parse_kind(kind->valuestring, idx, &d->kind));
    have_kind = true;
  }
  if (!have_kind)
    return sg__error(SG_ERR_FORMAT, "device table: devices[%d].kind: missing (give it or a preset)", idx);
  for (size_t i = 0; i < N_NUMBER_FIELDS; i++) {
    const field *f = &number_fields[i];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, f->key);
    if (v == NULL) {
      if (!have[i])
        return sg__error(SG_ERR_FORMAT, "device table: devices[%d].%s: missing (give it or a preset)", idx,
                         f->key);
      continue;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].%s: must be a finite number", idx, f->key);
    double x = v->valuedouble;
    if (f->positive ? !(x > 0.0) : x < 0.0)
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].%s: must be %s, got %g", idx, f->key,
                       f->positive ? "> 0" : ">= 0", x);
    *(double *)((char *)d + f->offset) = x * f->scale;
  }
  *count = 1;
  const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(e, "count");
  if (cnt) {
    if (!cJSON_IsNumber(cnt) || cnt->valuedouble != floor(cnt->valuedouble) || cnt->valuedouble < 1 ||
        cnt->valuedouble > SG_PARTITION_MAX_PARTS)
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].count: must be an integer in 1..%d", idx,
                       SG_PARTITION_MAX_PARTS);
    *count = (int)cnt->valuedouble;
  }
  *name = NULL;
  const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
  if (nm) {
    const char *problem = cJSON_IsString(nm) ? sg__name_problem(nm->valuestring) : "it is not a string";
    if (problem)
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].name: not a valid name: %s", idx, problem);
    if (strlen(nm->valuestring) > 200)
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].name: longer than 200 bytes", idx);
    *name = nm->valuestring;
  }
  const cJSON *comment = cJSON_GetObjectItemCaseSensitive(e, "comment");
  if (comment && !cJSON_IsString(comment))
    return sg__error(SG_ERR_FORMAT, "device table: devices[%d].comment: must be a string", idx);
  return SG_OK;
}

static sg_status from_json(const cJSON *root, sg_device_table **out) {
  const cJSON *list = root;
  if (cJSON_IsObject(root)) {
    for (const cJSON *c = root->child; c; c = c->next)
      if (c->string == NULL || (strcmp(c->string, "devices") != 0 && strcmp(c->string, "comment") != 0))
        return sg__error(SG_ERR_FORMAT, "device table: %.64s: unknown field (known: devices, comment)",
                         c->string ? c->string : "?");
    list = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (list == NULL) return sg__error(SG_ERR_FORMAT, "device table: devices: missing (no devices)");
  }
  if (!cJSON_IsArray(list))
    return sg__error(SG_ERR_FORMAT, "device table: devices: must be an array of device objects");
  int entries = cJSON_GetArraySize(list);
  if (entries == 0) return sg__error(SG_ERR_FORMAT, "device table: devices: is empty (no devices)");
  /* First pass: validate and count. */
  int total = 0, idx = 0;
  for (const cJSON *e = list->child; e; e = e->next, idx++) {
    sg__device d;
    int count;
    const char *name;
    SG_CHECK(parse_entry(e, idx, &d, &count, &name));
    total += count;
    if (total > SG_PARTITION_MAX_PARTS)
      return sg__error(SG_ERR_FORMAT, "device table: devices[%d].count: more than %d devices in all", idx,
                       SG_PARTITION_MAX_PARTS);
  }
  sg_device_table *t = NULL;
  SG_CHECK(new_table(total, &t));
  idx = 0;
  for (const cJSON *e = list->child; e; e = e->next, idx++) {
    sg__device d;
    int count;
    const char *name;
    sg_status st = parse_entry(e, idx, &d, &count, &name);
    for (int j = 0; st == SG_OK && j < count; j++) {
      char buf[256];
      if (name && count == 1) snprintf(buf, sizeof buf, "%s", name);
      else if (name) snprintf(buf, sizeof buf, "%s-%d", name, j);
      else snprintf(buf, sizeof buf, "%s%d", sg_device_kind_name(d.kind), t->n);
      for (int i = 0; i < t->n; i++)
        if (strcmp(t->dev[i].name, buf) == 0)
          st = sg__error(SG_ERR_FORMAT, "device table: devices[%d].name: '%s' is used twice", idx, buf);
      if (st != SG_OK) break;
      t->dev[t->n] = d;
      t->dev[t->n].name = sg__strdup(buf);
      if (t->dev[t->n].name == NULL) st = sg__error(SG_ERR_NO_MEMORY, "device table: out of memory");
      else t->n++;
    }
    if (st != SG_OK) {
      sg_device_table_destroy(t);
      return st;
    }
  }
  *out = t;
  return SG_OK;
}

sg_status sg_device_table_parse(const char *json, sg_device_table **out) {
  if (out) *out = NULL;
  if (json == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_device_table_parse: NULL argument");
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
  if (root == NULL) {
    const char *at = end ? end : cJSON_GetErrorPtr();
    long off = at && at >= json ? (long)(at - json) : -1;
    return sg__error(SG_ERR_FORMAT, "device table: malformed JSON at byte %ld", off);
  }
  sg_status st = from_json(root, out);
  cJSON_Delete(root);
  return st;
}

sg_status sg_device_table_load(const char *path, sg_device_table **out) {
  if (out) *out = NULL;
  if (path == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_device_table_load: NULL argument");
  FILE *f;
  /* Not a FIFO or a device: reading one could block or never end. */
  if (sg__fopen_regular(path, false, &f) != SG_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", sg_last_error());
    return sg__error(SG_ERR_IO, "device table: %s", msg);
  }
  /* Tables are small; 16 MiB is far beyond any real one. */
  enum { LIMIT = 16 << 20 };
  char *buf = sg__malloc(LIMIT + 1);
  if (buf == NULL) {
    fclose(f);
    return sg__error(SG_ERR_NO_MEMORY, "device table '%s': out of memory", path);
  }
  size_t n = fread(buf, 1, LIMIT + 1, f);
  int err = ferror(f);
  fclose(f);
  sg_status st;
  if (err) st = sg__error(SG_ERR_IO, "device table '%s': read error", path);
  else if (n > LIMIT) st = sg__error(SG_ERR_FORMAT, "device table '%s': larger than 16 MiB", path);
  else if (memchr(buf, 0, n))
    st = sg__error(SG_ERR_FORMAT, "device table '%s': malformed JSON (a NUL byte)", path);
  else {
    buf[n] = '\0';
    st = sg_device_table_parse(buf, out);
    if (st != SG_OK) {
      /* Prefix the path, keeping the field named by the parser. */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", sg_last_error());
      const char *rest = strncmp(msg, "device table: ", 14) == 0 ? msg + 14 : msg;
      sg__error(st, "device table '%s': %s", path, rest);
    }
  }
  sg__free(buf);
  return st;
}
