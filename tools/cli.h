/* The llamaweb CLI: one file per subcommand (tools/cmd-*.c), each exporting one entry point registered in
 * the table in tools/main.c. Entry points get argv without the program name (argv[0] is the subcommand). */
#ifndef LW_CLI_H
#define LW_CLI_H

#include <stddef.h>

int lw__cmd_info(int argc, char **argv);
int lw__cmd_bench_kernels(int argc, char **argv);
int lw__cmd_synth(int argc, char **argv);
int lw__cmd_run(int argc, char **argv);
int lw__cmd_bench(int argc, char **argv);
int lw__cmd_tokenize(int argc, char **argv);
int lw__cmd_template(int argc, char **argv);

/* A whole file, NUL-terminated, malloc'd (free() it); NULL when it cannot be read. len may be NULL. */
char *lw__cli_read_file(const char *path, size_t *len);

#endif
