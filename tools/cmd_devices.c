/* sgrt devices: the RDMA devices libibverbs finds (SPEC M6). */
#include <stdio.h>

#include "cli.h"

static int run_devices(const cli_command *cmd, int argc, char **argv) {
  int json = 0;
  const cli_option opts[] = {{"json", 0, NULL, &json}};
  int rc = cli_parse(cmd, argc, argv, opts, 1, NULL, 0, 0);
  if (rc != CLI_CONTINUE) return rc;
  sg_rdma_device *devs;
  size_t n;
  sg_status st = sg_rdma_devices(&devs, &n);
  if (st != SG_OK) return cli_fail(st, "devices: %s", sg_last_error());
  if (json) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_CreateArray();
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
    return cli_print_json(cli_json_finish(o, 1));
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
  return CLI_EXIT_OK;
}

const cli_command cli_cmd_devices = {
    "devices",
    "[--json]",
    "list RDMA devices (name, link layer, speed) or say there are none",
    "  --json    print a JSON object {rdma_devices: [...], transport}\n",
    run_devices,
};
