/* runtime/cluster.h - what a node daemon adds when it is part of a cluster:
 * membership in the GCS (register, heartbeats, the cluster view), TCP links
 * to the other daemons (spillback leases bridged frame by frame), pulls of
 * objects held on other nodes, code shipping and the cluster token.
 *
 * node.c calls these hooks from its loop; each returns at once when the node
 * runs alone (an embedded cluster), so the single-node path is unchanged. */
#ifndef RD_RUNTIME_CLUSTER_H
#define RD_RUNTIME_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "gcs_client.h"
#include "node_internal.h"
#include "pg_place.h"

/* Join the cluster named in opts (gcs_address); no-op without one. */
int rd__cluster_start(const rd_node_opts *o, char *err, size_t errlen);
/* Leave the GCS and stop the servers; before the loop closes its handles. */
void rd__cluster_stop(void);
/* Free what is left, once the loop has closed its handles. */
void rd__cluster_free(void);
int rd__cluster_on(void);
/* Requests respill() sent to another node since start; (job, env set, node) entries
 * avoided now (rd__cluster_avoid).  0 when not in a cluster. */
uint64_t rd__cluster_respilled(void);
uint64_t rd__cluster_refused_busy(void);   /* spilled requests refused by a busy target */
uint64_t rd__cluster_pull_retries(void);   /* pulls made again after a transient failure */
size_t rd__cluster_channels(void);         /* lease and actor channels open over links now */
/* The GCS has freed actor_id's name (or gave up): actor registers parked
 * on it are asked again. */
void rd__cluster_name_freed(uint64_t actor_id);
int rd__cluster_avoided(void);
uint32_t rd__cluster_index(void);
/* The head's index in this node's view; 0 when no head is alive in it. */
uint32_t rd__cluster_head(void);
/* Other live nodes in this node's view whose totals hold res (a job's
 * entrypoint resources this node has not): ", on 10.0.0.5 (jobs API
 * http://10.0.0.5:8265), ..." (at most four) into out, "" when none. */
void rd__cluster_nodes_holding(const rd_resources *res, char *out, size_t len);
/* Another live node in this node's view to run a job whose entrypoint
 * resources res (and label selector sel, NULL or "": none) this node has
 * not: one with them free now (its last report), else one whose totals
 * hold them; 1 and its address in ip, or 0. */
int rd__cluster_node_for(const rd_resources *res, const char *sel, char *ip, size_t len);
/* The same, but only a node with them free now (its last report). */
int rd__cluster_node_free_for(const rd_resources *res, const char *sel, char *ip, size_t len);
/* Of the other live nodes whose totals hold res and whose labels satisfy
 * sel, the one for which load (the caller's count of jobs waiting there)
 * is least, the first in the view of equals: 1, its address in ip and its
 * load in *least; or 0. */
int rd__cluster_node_least(const rd_resources *res, const char *sel, int (*load)(const char *ip, void *arg), void *arg,
                           char *ip, size_t len, int *least);
/* A kind of node the autoscaler can start (the view's node types, none
 * outside a cluster or without an autoscaler) whose resources hold res and
 * whose labels satisfy sel (NULL or "": any): 1 and its name in name, or 0. */
int rd__cluster_launchable(const rd_resources *res, const char *sel, char *name, size_t len);
/* The cluster as of the last heartbeat (every node, alive and dead); valid
 * until the loop's next turn. */
const rd_gcs_node *rd__cluster_view(size_t *n);
/* 1 when `token` is the cluster's token (always 1 outside a cluster). */
int rd__cluster_token_ok(const char *token);
const char *rd__cluster_token(void);
/* The gate of a node-local HTTP API guarded by the cluster token (the
 * logs, the stacks): 1 when auth is "Bearer TOKEN"; else 0, answered
 * through reply (403 off a cluster, naming `api`; 401 without the token).
 * Off a cluster, local (not NULL nor "": an embedded node's own token,
 * SESSION/token) is the token asked for instead of the 403. */
int rd__cluster_http_gate(const char *api, const char *local, const char *auth,
                          void (*reply)(void *, int, const char *, size_t), void *arg);
/* rd_kv_* on a cluster (through the GCS): 1, answered later; 0 when this
 * node is not part of one. */
int rd__cluster_kv(node_client *c, const Rd__KvRequest *m);
/* This node's address (127.0.0.1 outside a cluster). */
const char *rd__cluster_ip(void);
/* Worker output for a driver on node `node`, over the link (dropped when
 * there is none). */
void rd__cluster_send_output(uint32_t node, const Rd__WorkerOutput *m);
int rd__cluster_alive_nodes(void);

/* A lease request from a local owner: 0 = schedule it here, 1 = taken
 * (forwarded to another node, or answered with an error). */
int rd__cluster_lease_request(node_client *c, const Rd__LeaseRequest *m, const rd_resources *res,
                              const node_env *env, const char *sel);
/* Node `node` (0: this one) cannot start job's workers with env set `env`
 * (NULL: none; job any of its records) (why): leave it out of placements of
 * those workers' requests for RAYDIST_NODE_AVOID_MS (60 s).  1 when
 * recorded, so requests may go elsewhere; 0 when not in a cluster. */
int rd__cluster_avoid(const node_job *job, const node_env *env, uint32_t node, const char *why);
/* 1 when the cancel/return named a remote lease and was handled here. */
int rd__cluster_lease_cancel(node_client *c, uint64_t req_id);
int rd__cluster_lease_return(node_client *c, const Rd__LeaseReturn *m);
/* Ask the owner (on the peer behind link) of worker w's lease to give it back. */
void rd__cluster_lease_yield(node_client *link, const node_worker *w);
/* A queued request of a peer node (r->owner is its link) got worker w,
 * leased with fd the owner's end of its socket, or failed with status. */
void rd__cluster_granted(lease_req *r, node_worker *w, int status, int fd);
/* A worker's record is about to be freed. */
void rd__cluster_worker_gone(node_worker *w);
/* w ended: the bridged sockets of its lease's owner or its actor's callers
 * on other nodes say `word` (how) in place of "died" when they close. */
void rd__cluster_worker_word(node_worker *w, const char *word);
/* Kill w, leased to an owner on another node, telling the owner why
 * (status, why) through its channel.  0 when w serves no such lease. */
int rd__cluster_worker_kill(node_worker *w, int status, const char *why);
/* Any client is going away: its remote requests and bridged channels end. */
void rd__cluster_client_dropped(node_client *c);
/* `raydist job --address` (job_link.c): a LINK_JOB from a tool link,
 * answered LINK_JOB_REPLY; stop: the commands it runs are killed. */
void rd__job_link(node_client *c, const Rd__LinkJob *m);
void rd__job_link_stop(void);
/* Runs the node's own `raydist` with argv (argv[0] only shown), its stdout
 * and stderr kept (1 MiB each), killed after limit_ms; done gets status 0
 * and the command's exit status and output, or a status saying why it did
 * not run (why; exit_code -1).  done is called exactly once, on the loop,
 * maybe before this returns; not at all when this fails: RD_EAGAIN (16
 * commands run already), RD_ECANCELED (the node stops), RD_ENOMEM, with
 * why.  For the jobs HTTP API (job_http.c); link requests share the 16. */
typedef void (*rd__job_cmd_done)(void *arg, int status, const char *why, int exit_code, const char *out,
                                 const char *err);
int rd__job_cmd(const char *const *argv, uint64_t limit_ms, rd__job_cmd_done done, void *arg, char *why,
                size_t whylen);
/* Calls fire(arg) once, on the loop, when job id of this node has written
 * past byte off of its log (off UINT64_MAX: only its end counts), has
 * ended or is gone, or after wait_ms (at most 30 s), whichever comes
 * first: looked at on every change in the job's directory (inotify), at
 * its deadline, and at least once a second (every 50 ms without inotify),
 * and at once (fire called before this returns) when it is so already.  0; RD_EAGAIN when 256 wait already,
 * RD_ECANCELED when the node stops, RD_ENOMEM (fire not called).  At the
 * node's stop every waiting fire is called.  For `job logs --follow` and
 * `job wait` over a tool link, and the jobs HTTP API's ?wait_s. */
typedef void (*rd__job_wait_fn)(void *arg);
int rd__job_wait(int id, uint64_t off, uint64_t wait_ms, rd__job_wait_fn fire, void *arg);
/* On a thread-pool thread: the code `hash` at path, fetched from the GCS
 * code table unless it is there already: 0 or its error (err says it). */
int rd__cluster_code_ensure(const char *hash, const char *path, char *err, size_t errlen);
/* A driver said hello: ship its executable to the GCS for the other nodes. */
void rd__cluster_on_driver(node_client *c, const char *exe);
/* The last driver of job j here left: its GCS job entry ends. */
void rd__cluster_job_end(node_job *j);
/* A cluster event (Ray's) from this node: the GCS records it, sent off
 * the loop (retried while the GCS is away).  source RAYLET (the node's
 * own) or JOBS (a submitted job's); severity INFO, WARNING or ERROR; pid
 * the process it is about (0: none); kv NULL or
 * key, value, ..., NULL (Ray's custom_fields: at most 6, the GCS adds
 * node_id and node_ip); the message from fmt.  At most 30 a minute: past
 * that they are counted, and the count is an event before the next one
 * after the minute.
 * Nothing off a cluster (an embedded node). */
void rd__cluster_event(const char *source, const char *severity, int pid, const char *const *kv, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Objects: start pulls for ids held on other nodes (nodes[] from the owner).
 * fresh: a new request, which tries again an object whose pull failed;
 * otherwise (a parked get looked at again) that failure stands. */
void rd__cluster_prefetch(const uint64_t *ids, const uint32_t *nodes, size_t n, int fresh);
/* The store's spill thread finished jobs: pins and creates for transfers
 * that waited for it go on. */
void rd__cluster_retry_hops(void);
/* 0 nothing known, RD_EAGAIN while a pull runs, or the error of a failed pull
 * (message in *why). */
int rd__cluster_obj_status(uint64_t id, const char **why);
/* The owner deleted objects; those held on other nodes are deleted there. */
void rd__cluster_forward_deletes(const uint64_t *ids, const uint32_t *nodes, size_t n, uint32_t client);
/* rd_return_refs: hand the objects ids[i] held on other nodes (nodes[i])
 * over to client `owner` there (MSG_LINK_HANDOVER, one-way). */
void rd__cluster_forward_handover(const uint64_t *ids, const uint32_t *nodes, size_t n, uint32_t owner);

/* Actors.  The node where an actor is created keeps its record and may host
 * it on another node (placement as for leases, default policy). */
/* Where to host an actor: 0 here (or no cluster), a node index, or 0 with
 * *err set when no live node can. */
void rd__cluster_actor_give_back(node_actor *a, uint32_t to, const char *why);
/* Actor a goes to node t: its room claimed there (rd__cluster_view_claim). */
void rd__cluster_actor_claim(node_actor *a, uint32_t t);
uint32_t rd__cluster_actor_place(node_actor *a, int *err, char *why, size_t whylen);
/* Ask a->host to start the actor (now, or once the job's code is stored). */
void rd__cluster_actor_create(node_actor *a);
/* A socket to actor a hosted on a->host, for caller c (a client or a link);
 * a link for a third node is told to ask a->host itself (redirect) unless
 * no_redirect or it saw a->host_pid go (dead_pid). */
void rd__cluster_actor_connect(node_actor *a, node_client *c, uint64_t req_id, int dead_pid, int no_redirect);
/* A connect for an actor recorded on another node: forwarded there (1). */
int rd__cluster_actor_elsewhere(node_client *c, const Rd__ActorConnect *m);
/* Answer a link's connect: bridge fd over the link. */
void rd__cluster_connect_reply(node_client *link, uint64_t req_id, node_actor *a, int status, const char *err, int fd);
/* Hosted for a peer: tell its record node the actor is alive, or dead. */
void rd__cluster_actor_state(node_actor *a, int alive, const char *why);
/* A kill for an actor recorded on another node: forwarded there (1). */
int rd__cluster_actor_kill_elsewhere(node_client *c, const Rd__ActorKill *m);
/* A detached actor (m->detached) that client c creates on a node that is
 * not the head is recorded on the head, so that it outlives this node as
 * well as its creator: sent there (1), once job's code is in the GCS, and
 * c is answered with the head's answer.  0: record it here (not in a
 * cluster, not detached, this node is the head or no head is alive, the
 * job has no code in the GCS). */
int rd__cluster_actor_record_at_head(node_client *c, const Rd__ActorCreate *m, node_job *job);
/* Recorded here, hosted elsewhere: kill it there. */
void rd__cluster_actor_kill(node_actor *a, int no_restart);

/* Actor names are cluster-wide, kept in the GCS actor table.  Register a's
 * name, then call rd__node_actor_registered; 0 when not in a cluster. */
int rd__cluster_actor_register(node_actor *a, node_client *c, uint64_t req_id);
/* A recorded actor is dead for good: free its name in the GCS. */
int rd__cluster_actor_dead(node_actor *a, const char *why);
/* A name not known here: ask the GCS, answer c (1), or 0 when not in a cluster. */
int rd__cluster_actor_lookup(node_client *c, uint64_t req_id, const char *name);
/* rd_actor_list_named on a cluster: answered from the GCS's actor table
 * (1), or 0 when not in a cluster (the node answers from its own). */
int rd__cluster_actor_list_named(node_client *c, uint64_t req_id, const char *ns, int all);

/* Frames of a link (types MSG_LINK_*): 1 handled, 0 not a link frame. */
/* Placement groups (pg.c): the GCS handle, a link to a peer (opened if need
 * be; NULL when unreachable or not clustered), which peer a link is, whether
 * a node is alive in the view, the other live nodes for placement, and a
 * lease forwarded to a bundle on another node. */
rd_gcs *rd__cluster_gcs(void);
/* From the continuation of a GCS call run on the thread pool: when rc says
 * the GCS did not answer (RD_ECONN, RD_ETIMEDOUT), queues the call to run
 * again in 250 ms and returns 1 (the continuation returns at once), as long
 * as the node waits for its GCS (*since_ns, 0 at first, marks when the
 * failures began).  0: go on with rc.  Calls still waiting when the node
 * stops end with their continuation's status UV_ECANCELED. */
int rd__cluster_gcs_retry(uv_work_t *w, uv_work_cb run, uv_after_work_cb done, int rc, uint64_t *since_ns);
node_client *rd__cluster_link(uint32_t peer);
uint32_t rd__cluster_link_peer(const node_client *c);
int rd__cluster_node_alive(uint32_t index);
int rd__cluster_node_usable(uint32_t index);   /* alive, and its link did not just fail */
size_t rd__cluster_pg_nodes(rd_pg_node *out, size_t max);
/* The nodes the autoscaler could still start (each node type's max_workers
 * less its workers), as snapshot entries with made-up indexes above 4095:
 * for asking whether a group could ever be placed, never for placing it. */
size_t rd__cluster_pg_potential(rd_pg_node *out, size_t max);
void rd__cluster_lease_to(node_client *c, uint64_t req_id, const rd_resources *res, int priority, uint32_t target,
                          uint64_t pg_id, int bundle, const node_env *env);
int rd__cluster_handle_frame(node_client *c, const rd__frame *f);
/* rd__node_gc: what cluster.c holds (forwarded requests, avoided nodes),
 * and whether code fetches are in flight (no sweep then). */
void rd__cluster_held(rd__held *h);
/* Takes res off node t's room in this node's view, and off every view
 * after it until t's report counts it: a request, a bundle or an actor was
 * just sent there.  The id (0: none) is for what comes of it: t holds it
 * now (ack; the claim ends once a report of t later than that is seen), or
 * t refused it or never got it (cancel: the view gets the room back). */
uint64_t rd__cluster_view_claim(uint32_t t, const rd_resources *res);
/* The same for the live node of the view at address ip (0: none, or this
 * node): a job the jobs API sends there (job_hold.c). */
uint64_t rd__cluster_claim_at(const char *ip, const rd_resources *res);
void rd__cluster_claim_ack(uint64_t id);
/* ack, saying when t holds it at the latest (ns, rd__now_ns's clock; may
 * be ahead: a job's driver takes its room a moment after its submit). */
void rd__cluster_claim_held_from(uint64_t id, uint64_t ns);
void rd__cluster_claim_cancel(uint64_t id);
int rd__cluster_fetching(void);

#endif
