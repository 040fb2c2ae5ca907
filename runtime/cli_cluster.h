/* runtime/cli_cluster.h - the cluster commands of `raydist` (cli_cluster.c). */
#ifndef RD_RUNTIME_CLI_CLUSTER_H
#define RD_RUNTIME_CLI_CLUSTER_H

int rd__cli_start(int argc, char **argv);
int rd__cli_stop(int argc, char **argv);
int rd__cli_status(int argc, char **argv);

#endif
