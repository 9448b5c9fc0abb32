/* cmd_propagate.c — `gspmd propagate`: placeholder until sharding propagation lands. */
#include "cli.h"

int gs_cli_propagate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "gspmd propagate: sharding propagation is not in this build yet\n");
    return 2;
}
