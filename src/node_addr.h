/* src/node_addr.h - where this process's node is reached from other nodes
 * (client.c), for connections made straight between processes
 * (collective.c). */
#ifndef RD_SRC_NODE_ADDR_H
#define RD_SRC_NODE_ADDR_H

#include <stddef.h>

/* The node's IP address ("127.0.0.1" on an embedded cluster) and the
 * cluster's token ("" on an embedded cluster, which has none): 0, or
 * RD_ESTATE before rd_init. */
int rd__node_addr(char *ip, size_t iplen, char *token, size_t toklen);

#endif
