/* RDMA device discovery through libibverbs (SPEC M6), for `sgrt devices` and
 * the partitioner's device table. With no device (these machines) the list is
 * empty and UCX carries on over TCP and shared memory. */
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "core/core.h"
#include "sgrt/comm.h"

/* Gb/s per lane of ibv_port_attr.active_speed codes. */
static double lane_gbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2.5;  /* SDR */
    case 2: return 5.0;  /* DDR */
    case 4: return 10.0; /* QDR (also FDR10 on some drivers) */
    case 8: return 10.3125;
    case 16: return 14.0625;  /* FDR */
    case 32: return 25.78125; /* EDR */
    case 64: return 53.125;   /* HDR */
    case 128: return 106.25;  /* NDR */
    default: return 0;
  }
}
static int width_lanes(uint8_t w) {
  switch (w) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

sg_status sg_rdma_devices(sg_rdma_device **out, size_t *count) {
  if (out == NULL || count == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_rdma_devices: NULL argument");
  *out = NULL;
  *count = 0;
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list == NULL || n <= 0) {
    if (list) ibv_free_device_list(list);
    return SG_OK; /* no RDMA devices (or no verbs driver): not an error */
  }
  size_t cap = 0, used = 0;
  sg_rdma_device *devs = NULL;
  sg_status st = SG_OK;
  for (int i = 0; i < n && st == SG_OK; i++) {
    struct ibv_context *ctx = ibv_open_device(list[i]);
    if (ctx == NULL) continue;
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da) == 0) {
      for (int port = 1; port <= da.phys_port_cnt; port++) {
        struct ibv_port_attr pa;
        if (ibv_query_port(ctx, (uint8_t)port, &pa) != 0) continue;
        if (used == cap) {
          size_t nc = cap ? cap * 2 : 4;
          sg_rdma_device *g = sg__realloc(devs, nc * sizeof *g);
          if (g == NULL) {
            st = sg__error(SG_ERR_NO_MEMORY, "sg_rdma_devices: out of memory");
            break;
          }
          devs = g;
          cap = nc;
        }
        sg_rdma_device *d = &devs[used++];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", ibv_get_device_name(list[i]));
        snprintf(d->link_layer, sizeof d->link_layer, "%s",
                 pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
                 : pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet"
                                                            : "unknown");
        d->port = port;
        d->active = pa.state == IBV_PORT_ACTIVE;
        d->speed_gbps = d->active ? lane_gbps(pa.active_speed) * width_lanes(pa.active_width) : 0;
      }
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (st != SG_OK) {
    sg__free(devs);
    return st;
  }
  *out = devs;
  *count = used;
  return SG_OK;
}

void sg_rdma_devices_free(sg_rdma_device *devices) { sg__free(devices); }
