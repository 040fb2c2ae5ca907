/* src/watch.h - watches on this process's objects (client.c), for pool.c.
 *
 * A watch keeps an object for rd_wait and rd_get as a reference does, but
 * does not count as a taker of a stream's items: a streaming call's stream
 * whose last reference the caller drops is abandoned (its items dropped, its
 * producer let run to its end) even while watched, so a pool can see the
 * call end without holding it back. */
#ifndef RD_SRC_WATCH_H
#define RD_SRC_WATCH_H

#include "raydist.h"

/* Watch ref (a live object of this process): 0, or RD_EINVAL. */
int rd__watch_add(rd_ref ref);
/* End one watch; the object goes if nothing else keeps it. */
void rd__watch_drop(rd_ref ref);

#endif
