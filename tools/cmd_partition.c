/* cmd_partition.c — `gspmd partition`: placeholder until the SPMD partitioner lands. */
#include "cli.h"

int gs_cli_partition(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "gspmd partition: the SPMD partitioner is not in this build yet\n");
    return 2;
}
