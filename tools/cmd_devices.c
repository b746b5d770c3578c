/* sgrt devices: the GPUs sessions can use ("cuda:N", docs/cuda.md) and the
 * RDMA devices libibverbs finds (SPEC M6), or why there are none. */
#include <stdio.h>

#include "cli.h"

static void version_text(int v, char *buf, size_t cap) {
  if (v > 0) snprintf(buf, cap, "%d.%d", v / 1000, (v % 1000) / 10);
  else snprintf(buf, cap, "none");
}

static int run_devices(const cli_command *cmd, int argc, char **argv) {
  int json = 0;
  const cli_option opts[] = {{"json", 0, NULL, &json}};
  int rc = cli_parse(cmd, argc, argv, opts, 1, NULL, 0, 0);
  if (rc != CLI_CONTINUE) return rc;
  sg_gpu_device *gpus;
  size_t n_gpus;
  int driver, runtime;
  char why[512];
  sg_status st = sg_gpu_devices(&gpus, &n_gpus, &driver, &runtime, why, sizeof why);
  if (st != SG_OK) return cli_fail(st, "devices: %s", sg_last_error());
  sg_rdma_device *devs;
  size_t n;
  st = sg_rdma_devices(&devs, &n);
  if (st != SG_OK) {
    sg_gpu_devices_free(gpus);
    return cli_fail(st, "devices: %s", sg_last_error());
  }
  char dv[16], rv[16];
  version_text(driver, dv, sizeof dv);
  version_text(runtime, rv, sizeof rv);
  if (json) {
    cJSON *o = cJSON_CreateObject(), *g = cJSON_CreateArray(), *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n_gpus; i++) {
      cJSON *d = cJSON_CreateObject();
      char dev[32], cc[16];
      snprintf(dev, sizeof dev, "cuda:%d", gpus[i].index);
      snprintf(cc, sizeof cc, "%d.%d", gpus[i].cc_major, gpus[i].cc_minor);
      cJSON_AddStringToObject(d, "device", dev);
      cJSON_AddStringToObject(d, "name", gpus[i].name);
      cJSON_AddStringToObject(d, "compute_capability", cc);
      cJSON_AddNumberToObject(d, "memory_bytes", (double)gpus[i].memory_bytes);
      cJSON_AddNumberToObject(d, "multiprocessors", gpus[i].multiprocessors);
      cJSON_AddStringToObject(d, "pci_bus_id", gpus[i].pci_bus_id);
      cJSON_AddItemToArray(g, d);
    }
    cJSON_AddItemToObject(o, "gpus", g);
    cJSON_AddStringToObject(o, "cuda_driver", dv);
    cJSON_AddStringToObject(o, "cuda_runtime", rv);
    if (n_gpus == 0) cJSON_AddStringToObject(o, "no_gpu_reason", why);
    for (size_t i = 0; i < n; i++) {
      cJSON *d = cJSON_CreateObject();
      cJSON_AddStringToObject(d, "name", devs[i].name);
      cJSON_AddNumberToObject(d, "port", devs[i].port);
      cJSON_AddStringToObject(d, "link_layer", devs[i].link_layer);
      cJSON_AddNumberToObject(d, "speed_gbps", devs[i].speed_gbps);
      cJSON_AddBoolToObject(d, "active", devs[i].active);
      cJSON_AddItemToArray(arr, d);
    }
    cJSON_AddItemToObject(o, "rdma_devices", arr);
    cJSON_AddStringToObject(o, "transport", n ? "rdma" : "tcp+shm");
    sg_rdma_devices_free(devs);
    sg_gpu_devices_free(gpus);
    return cli_print_json(cli_json_finish(o, 1));
  }
  if (n_gpus == 0) {
    printf("no GPUs: %s\n", why);
  } else {
    printf("%-8s %-28s %4s %10s %5s  %s\n", "device", "GPU", "cc", "memory", "SMs", "PCI");
    for (size_t i = 0; i < n_gpus; i++)
      printf("cuda:%-3d %-28s %d.%d %6.1f GiB %5d  %s\n", gpus[i].index, gpus[i].name, gpus[i].cc_major,
             gpus[i].cc_minor, (double)gpus[i].memory_bytes / (1 << 30), gpus[i].multiprocessors,
             gpus[i].pci_bus_id);
    printf("CUDA driver %s, runtime %s\n", dv, rv);
  }
  if (n == 0) {
    printf("no RDMA devices found; UCX uses its TCP and shared-memory transports\n");
  } else {
    printf("%-16s %4s  %-10s %10s  %s\n", "device", "port", "link", "speed", "state");
    for (size_t i = 0; i < n; i++)
      printf("%-16s %4d  %-10s %7.1f Gb/s  %s\n", devs[i].name, devs[i].port, devs[i].link_layer,
             devs[i].speed_gbps, devs[i].active ? "active" : "down");
  }
  sg_rdma_devices_free(devs);
  sg_gpu_devices_free(gpus);
  return CLI_EXIT_OK;
}

const cli_command cli_cmd_devices = {
    "devices",
    "[--json]",
    "list GPUs (name, memory, compute capability, driver) and RDMA devices, or say why there are none",
    "  --json    print a JSON object {gpus: [...], cuda_driver, cuda_runtime, no_gpu_reason (when\n"
    "            there are none), rdma_devices: [...], transport}\n",
    run_devices,
};
