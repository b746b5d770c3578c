/* sgrt: the command-line tool. Dispatches to one subcommand per cmd_*.c file;
 * a new subcommand is one file plus one line in `commands` below. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef SGRT_CLI_VERSION
#error "SGRT_CLI_VERSION must be defined by the build"
#endif

extern const cli_command cli_cmd_run;       /* tools/cmd_run.c */
extern const cli_command cli_cmd_partition; /* tools/cmd_partition.c */
extern const cli_command cli_cmd_launch, cli_cmd_devices,
    cli_cmd_bench;                      /* tools/cmd_{launch,devices,bench}.c */
extern const cli_command cli_cmd_cache; /* tools/cmd_cache.c */

static const cli_command *const commands[] = {
    &cli_cmd_inspect, &cli_cmd_verify,  &cli_cmd_dot,   &cli_cmd_run,   &cli_cmd_partition,
    &cli_cmd_launch,  &cli_cmd_devices, &cli_cmd_bench, &cli_cmd_cache,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const cli_command *find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i]->name, name) == 0) return commands[i];
  return NULL;
}

static void print_usage(FILE *f) {
  fputs("usage: sgrt [--help | --version] COMMAND [ARGS...]\n"
        "\n"
        "sgrt — static-graph distributed training runtime.\n"
        "\n"
        "commands:\n",
        f);
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i]->name, commands[i]->summary);
  fputs("\n"
        "Run 'sgrt COMMAND --help' for a command's options. Exit status: 0 success,\n"
        "1 failure (unreadable or invalid input, failed operation), 2 bad command line.\n"
        "Environment: SG_LOG_LEVEL=none|error|warn|info|debug|trace sets library logging.\n",
        f);
}

static void print_version(void) {
  printf("sgrt %s (libsgrt %s, .sgg format %d.%d)\n", SGRT_CLI_VERSION, sg_version(), SG_SGG_VERSION_MAJOR,
         SG_SGG_VERSION_MINOR);
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) return cli_usage_error(NULL, "missing command");
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
    print_usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
    print_version();
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "help") == 0) {
    if (argc == 2) {
      print_usage(stdout);
      return CLI_EXIT_OK;
    }
    const cli_command *cmd = find_command(argv[2]);
    if (cmd == NULL) return cli_usage_error(NULL, "unknown command '%s'", argv[2]);
    cli_print_command_help(cmd);
    return CLI_EXIT_OK;
  }
  if (name[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", name);
  const cli_command *cmd = find_command(name);
  if (cmd == NULL) return cli_usage_error(NULL, "unknown command '%s'", name);
  return cmd->run(cmd, argc - 1, argv + 1);
}

int main(int argc, char **argv) {
  int rc = dispatch(argc, argv);
  /* Output that never reached its destination (a full disk, a closed pipe) is
   * a failure, not a success. A command that failed has said so already. */
  if ((fflush(stdout) != 0 || ferror(stdout)) && rc == CLI_EXIT_OK) {
    cli_error("writing to stdout failed: %s", errno ? strerror(errno) : "write error");
    rc = CLI_EXIT_FAIL;
  }
  return rc;
}
