/* objectstore/store.c - placeholder until the store lands. */
