/* raydist/collective.h - collective communication between the processes of a
 * job (included by raydist.h): Ray's ray.util.collective for C.
 *
 * `world` processes (actors, tasks or the driver, on any nodes) join a named
 * group, each with its own rank, and then call the same operations in the
 * same order: all-reduce, reduce-scatter, broadcast, all-gather, barrier;
 * two of them can also send each other messages (rd_send, rd_recv).  The bytes go
 * straight between the members over TCP, around a ring (each member talks to
 * its two neighbours), not through an owner or the object store, so an
 * all-reduce moves 2 (world - 1) / world times the buffer per member, however
 * many members there are.  Members find each other through a named actor
 * (the rendezvous) that the first one to join creates and the last
 * barrier of the join kills.
 *
 * A group belongs to the thread that joined it; it is not thread-safe.
 * After an error (a member that left or died, a timeout, mismatched calls)
 * the group is broken: every later call returns RD_ECONN, and the other
 * members see their connections close and fail too, instead of waiting.
 * Leave it and join a new one. */
#ifndef RAYDIST_COLLECTIVE_H
#define RAYDIST_COLLECTIVE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rd_collective rd_collective;

/* Element types and reductions of rd_allreduce. */
enum { RD_FLOAT32 = 1, RD_FLOAT64 = 2, RD_INT32 = 3, RD_INT64 = 4 };
enum { RD_SUM = 1, RD_PROD = 2, RD_MIN = 3, RD_MAX = 4 };

#define RD_COLLECTIVE_MAX_WORLD 1024
#define RD_COLLECTIVE_MAX_NAME 100

/* Join group `name` as member `rank` of `world` (1..RD_COLLECTIVE_MAX_WORLD):
 * returns once every member has joined and the ring is connected.
 * timeout_ms (RD_TIMEOUT_INF: none) bounds the join and, afterwards, each
 * operation's wait for the other members.  Errors: RD_EINVAL (bad name,
 * world or rank; another member joined with a different world),
 * RD_ETIMEDOUT (not every member joined in time; of two members that join
 * with one rank, the later registration wins and the other times out),
 * RD_ECONN, RD_ESYS, RD_ESTATE (rd_init not called). */
RD_EXTERN int rd_collective_join(const char *name, int world, int rank, int64_t timeout_ms,
                                 rd_collective **out) RD_MUST_CHECK;
/* Close the connections and free the group (NULL: nothing).  The others'
 * next operation fails with RD_ECONN. */
RD_EXTERN void rd_collective_leave(rd_collective *g);
RD_EXTERN int rd_collective_rank(const rd_collective *g);
RD_EXTERN int rd_collective_world(const rd_collective *g);

/* buf (count elements of dtype, aligned for it) becomes, in every member,
 * the element-wise reduction of all the members' bufs.  Every member gets
 * the same bytes; integer sums and products wrap (two's complement).
 * Every member must pass the same count, dtype and op: a difference is
 * found and fails the call with RD_EINVAL (RD_ECONN in the others). */
RD_EXTERN int rd_allreduce(rd_collective *g, void *buf, size_t count, int dtype, int op) RD_MUST_CHECK;
/* send holds world blocks of recv_count elements; recv (recv_count
 * elements) gets block `rank` reduced over every member's send (the first
 * half of an all-reduce: what a sharded optimizer needs).  Same rules as
 * rd_allreduce; send and recv must not overlap. */
RD_EXTERN int rd_reduce_scatter(rd_collective *g, const void *send, void *recv, size_t recv_count, int dtype,
                                int op) RD_MUST_CHECK;
/* buf (size bytes) of member `root` is copied into buf in every other one. */
RD_EXTERN int rd_broadcast(rd_collective *g, void *buf, size_t size, int root) RD_MUST_CHECK;
/* recv (world * size bytes) gets every member's send (size bytes) in rank
 * order, its own included; send may point into recv at its own block. */
RD_EXTERN int rd_allgather(rd_collective *g, const void *send, size_t size, void *recv) RD_MUST_CHECK;
/* Returns once every member has called it. */
RD_EXTERN int rd_barrier(rd_collective *g) RD_MUST_CHECK;

/* Point to point (pipeline stages passing activations): rd_send's size
 * bytes of buf go to member dst, whose rd_recv(g, buf, size, src = this
 * rank) takes them.  Messages between two members arrive in the order they
 * were sent, apart from the collective operations, and over a connection
 * of their own, made at their first rd_send or rd_recv with each other
 * (which waits until the other makes one with it too).  A send returns once
 * its bytes are on their way: up to the sockets' buffers (4 MiB on one
 * host) before the receiver takes them, so two members that both send a
 * large message to each other before receiving wait for ever (till the
 * timeout); send from one and receive at the other first, or use
 * rd_sendrecv.  A size other
 * than the one sent fails the rd_recv with RD_EINVAL, and the sender at its
 * next call, as the group is then broken.  RD_EINVAL for dst or src equal
 * to this member's rank or out of range. */
RD_EXTERN int rd_send(rd_collective *g, const void *buf, size_t size, int dst) RD_MUST_CHECK;
RD_EXTERN int rd_recv(rd_collective *g, void *buf, size_t size, int src) RD_MUST_CHECK;
/* Both at once: sbuf (ssize bytes) to dst while rbuf (rsize bytes) comes
 * from src (dst and src may be one member), so members that exchange large
 * messages (a ring shift, a swap) do not wait on each other's sends.  The
 * other ends may use rd_sendrecv, rd_send or rd_recv. */
RD_EXTERN int rd_sendrecv(rd_collective *g, const void *sbuf, size_t ssize, int dst, void *rbuf, size_t rsize,
                          int src) RD_MUST_CHECK;

#ifdef __cplusplus
}
#endif
#endif /* RAYDIST_COLLECTIVE_H */
