#!/usr/bin/env python3
"""tests/cluster/jobs_http.py HOST:PORT TOKEN RAYDIST SESSION - the jobs HTTP
API (runtime/job_http.c) of a node of the test cluster, through urllib as
any HTTP client would use it: submit, poll, logs, stop, delete, and every
bad request answered with its status and a reason."""
import io
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile

addr, token, raydist, session = sys.argv[1:5]
base = "http://" + addr


def call(method, path, body=None, tok=token, raw=None, headers=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method)
    if tok is not None:
        req.add_header("Authorization", "Bearer " + tok)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, {"error": text}


def check(cond, what):
    if not cond:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)


def expect(method, path, code, needle, body=None, **kw):
    st, r = call(method, path, body, **kw)
    check(st == code and needle in r.get("error", ""), "%s %s: %d %r, not %d with %r" % (method, path, st, r, code, needle))


def wait_end(jid, secs=60):
    until = time.time() + secs
    while time.time() < until:
        st, j = call("GET", "/api/jobs/%s" % jid)
        check(st == 200, "GET job %s: %d %r" % (jid, st, j))
        if j["status"] not in ("RUNNING", "PENDING"):
            return j
        time.sleep(0.1)
    check(False, "job %s did not end in %d s" % (jid, secs))


def wait_log(jid, needle):
    for _ in range(200):
        st, r = call("GET", "/api/jobs/%s/logs" % jid)
        if needle in r.get("logs", ""):
            return
        time.sleep(0.05)
    check(False, "job %s never logged %r" % (jid, needle))


# the token guards every request
expect("GET", "/api/jobs/", 401, "Authorization: Bearer", tok=None)
expect("GET", "/api/jobs/", 401, "Authorization: Bearer", tok="wrong-token")
expect("POST", "/api/jobs/", 401, "Authorization: Bearer", {"entrypoint": "touch /tmp/never"}, tok="x")

# a job that fails, with env_vars and metadata; found by its submission id
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo \"hello $GREETING\"; printf 'caf\\303\\251 \\377\\n'; echo oops >&2; exit 3",
                                    "submission_id": "http-one", "runtime_env": {"env_vars": {"GREETING": "world"}},
                                    "metadata": {"owner": "ci", "note": "a \"quoted\" one"}})
check(st == 200 and r["submission_id"] == "http-one" and r["job_id"].isdigit(), "submit: %d %r" % (st, r))
one = r["job_id"]
j = wait_end("http-one")
check(j["job_id"] == one and j["status"] == "FAILED" and j["driver_exit_code"] == 3 and j["message"] == "FAILED (exit 3)",
      "job one: %r" % j)
check(j["entrypoint"].startswith("echo \"hello $GREETING\"") and j["metadata"] == {"owner": "ci", "note": "a \"quoted\" one"},
      "job one's entrypoint or metadata: %r" % j)
check(j["type"] == "SUBMISSION" and j["end_time"] >= j["start_time"] > 0, "job one's times: %r" % j)
st, lg = call("GET", "/api/jobs/%s/logs" % one)   # as Ray's SDK asks: {"logs"} alone, which is all it takes
check(st == 200 and list(lg) == ["logs"] and "hello world\n" in lg["logs"], "job one's plain logs: %r" % lg)
st, lg = call("GET", "/api/jobs/%s/logs?offset=0" % one)
check(st == 200 and "hello world\n" in lg["logs"] and "oops\n" in lg["logs"], "job one's logs: %r" % lg)
check("caf\u00e9 \ufffd\n" in lg["logs"], "job one's logs: not UTF-8 with U+FFFD for a bad byte: %r" % lg["logs"])
check(lg["ended"] is True and lg["more"] is False and lg["dropped"] == 0 and lg["offset"] > 0, "job one's log fields: %r" % lg)
# the dashboard lists it with the node's other submitted jobs
with urllib.request.urlopen(base + "/api/cluster", timeout=30) as m:
    dash = json.loads(m.read().decode())
sub = [x for x in dash["submitted_jobs"] if x["id"] == int(one)]
check(len(sub) == 1 and sub[0]["name"] == "http-one" and sub[0]["state"] == "FAILED (exit 3)", "dashboard: %r" % dash["submitted_jobs"])
with urllib.request.urlopen(base + "/", timeout=30) as m:
    check(b"<td>http-one</td><td>FAILED (exit 3)</td>" in m.read(), "the dashboard page: no row of job one")
# a job whose command line holds bytes that are not UTF-8 (submitted with
# the CLI, whose argv can): the dashboard's JSON and the API stay valid
# UTF-8 JSON, the bad byte as U+FFFD
p = subprocess.run([raydist, "job", "submit", "--session", session, "--", "true", b"caf\xc3\xa9-\xff-\x01"],
                   capture_output=True)
check(p.returncode == 0 and p.stdout.startswith(b"job "), "CLI submit with a non-UTF-8 argument: %r" % (p,))
odd = int(p.stdout.split()[1])
with urllib.request.urlopen(base + "/api/cluster", timeout=30) as m:
    raw = m.read()
try:
    dash = json.loads(raw.decode("utf-8"))
except ValueError as e:
    check(False, "/api/cluster is not UTF-8 JSON with a non-UTF-8 job command: %s" % e)
sub = [x for x in dash["submitted_jobs"] if x["id"] == odd]
check(len(sub) == 1 and "caf\u00e9-\ufffd-\u0001" in sub[0]["command"], "dashboard, the odd job: %r" % sub)
st, j = call("GET", "/api/jobs/%d" % odd)
check(st == 200 and "caf\u00e9-\ufffd-\u0001" in j["entrypoint"], "the odd job's details: %d %r" % (st, j))
wait_end(odd)
check(call("DELETE", "/api/jobs/%d" % odd)[0] == 200, "delete the odd job")
st, tail = call("GET", "/api/jobs/%s/logs?offset=6" % one)
check(st == 200 and tail["logs"].startswith("world\n") and tail["offset"] == lg["offset"], "logs from offset 6: %r" % tail)
st, none = call("GET", "/api/jobs/%s/logs?offset=%d" % (one, lg["offset"]))
check(st == 200 and none["logs"] == "", "logs past the end: %r" % none)

# ?wait_s: the answer comes with the news (output past the offset, the end), not before
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo first; sleep 1; echo second; sleep 1"})
check(st == 200, "submit the waiting one: %r" % r)
wid = r["job_id"]
wait_log(wid, "first\n")
t0 = time.time()
st, lg = call("GET", "/api/jobs/%s/logs?offset=6&wait_s=10" % wid)
took = time.time() - t0
check(st == 200 and lg["logs"] == "second\n" and lg["offset"] == 13 and 0.3 < took < 5, "logs?wait_s: %r in %.2f s" % (lg, took))
t0 = time.time()
st, j = call("GET", "/api/jobs/%s?wait_s=10" % wid)
took = time.time() - t0
check(st == 200 and j["status"] == "SUCCEEDED" and 0.3 < took < 5, "details?wait_s: %r in %.2f s" % (j, took))
t0 = time.time()
st, lg = call("GET", "/api/jobs/%s/logs?offset=13&wait_s=10" % wid)
check(st == 200 and lg["logs"] == "" and lg["ended"] is True and time.time() - t0 < 1, "logs?wait_s of an ended job: %r" % lg)
expect("GET", "/api/jobs/%s/logs?wait_s=31" % wid, 400, "wait_s must be")
expect("GET", "/api/jobs/%s?wait_s=x" % wid, 400, "wait_s must be")
check(call("DELETE", "/api/jobs/%s" % wid)[0] == 200, "delete the waiting one")

# at most 8 held at once (each holds one of the port's 16 connections): a
# ninth is answered at once, and /metrics still answers meanwhile
st, r = call("POST", "/api/jobs/", {"entrypoint": "sleep 20"})
check(st == 200, "submit the sleeper: %r" % r)
sid = r["job_id"]
took = []
def held():
    t0 = time.time()
    st, _ = call("GET", "/api/jobs/%s?wait_s=2" % sid)
    took.append((st, time.time() - t0))
ts = [threading.Thread(target=held) for _ in range(8)]
for t in ts:
    t.start()
time.sleep(0.5)
t0 = time.time()
st, j = call("GET", "/api/jobs/%s?wait_s=2" % sid)
ninth = time.time() - t0
with urllib.request.urlopen(base + "/metrics", timeout=10) as m:
    check(m.status == 200 and b"raydist_" in m.read(), "/metrics while 8 wait")
for t in ts:
    t.join()
check(st == 200 and j["status"] == "RUNNING" and ninth < 1, "the ninth waiter: %d in %.2f s" % (st, ninth))
check(len(took) == 8 and all(c == 200 and 1.5 < d < 6 for c, d in took), "the eight held: %r" % took)
check(call("POST", "/api/jobs/%s/stop" % sid)[1] == {"stopped": True}, "stop the sleeper")
check(call("DELETE", "/api/jobs/%s" % sid)[0] == 200, "delete the sleeper")

# Ray's SDK sends every field, unset ones as null
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo sdk-style", "submission_id": None, "job_id": None, "runtime_env": None,
                                    "metadata": None, "entrypoint_num_cpus": None, "entrypoint_num_gpus": None,
                                    "entrypoint_memory": None, "entrypoint_resources": None})
check(st == 200 and r["submission_id"] == r["job_id"], "SDK-style submit: %d %r" % (st, r))
j = wait_end(r["job_id"])
check(j["status"] == "SUCCEEDED" and j["driver_exit_code"] == 0 and j["metadata"] == {} and j["entrypoint_num_gpus"] is None, "SDK-style job: %r" % j)

# the API's jobs are the node's: `raydist job list` shows them
out = subprocess.run([raydist, "job", "list", "--session", session], capture_output=True, text=True, errors="replace").stdout
check(any(l.split()[:2] == [one, "http-one"] for l in out.splitlines()), "raydist job list: %s" % out)

# stop: a running job, then again
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo started; exec sleep 60", "submission_id": "http-long"})
check(st == 200, "submit long: %r" % r)
wait_log("http-long", "started")
expect("DELETE", "/api/jobs/http-long", 400, "stop it first")
t0 = time.time()
st, r = call("POST", "/api/jobs/http-long/stop")
check(st == 200 and r == {"stopped": True}, "stop: %d %r" % (st, r))
j = wait_end("http-long", 5)
check(j["status"] == "STOPPED" and time.time() - t0 < 10, "stopped job: %r" % j)
st, r = call("POST", "/api/jobs/http-long/stop")
check(st == 200 and r == {"stopped": False}, "second stop: %d %r" % (st, r))

# entrypoint resources: the first job holds both of the head's CPUs while
# it runs; a second asking one CPU runs where one is free now, node b or c
# (as Ray places a job's driver on a node with room)
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo holding; exec sleep 60", "submission_id": "cpu-a",
                                    "entrypoint_num_cpus": 2, "entrypoint_num_gpus": 0, "entrypoint_resources": {}})
check(st == 200, "submit cpu-a: %d %r" % (st, r))
wait_log("cpu-a", "holding")
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo \"second on $RAYDIST_NODE_IP\"", "submission_id": "cpu-b",
                                    "entrypoint_num_cpus": 1, "entrypoint_memory": None, "entrypoint_resources": None})
check(st == 200, "submit cpu-b: %d %r" % (st, r))
j = wait_end("cpu-b", 30)
st, r = call("GET", "/api/jobs/cpu-b/logs")
m = re.search(r"^raydist job: runs on node (127\.0\.0\.[23]) as its job [0-9]+$", r["logs"], re.M)
check(j["status"] == "SUCCEEDED" and j["entrypoint_num_cpus"] == 1 and j["entrypoint_num_gpus"] == 0 and
      j["entrypoint_resources"] == {} and m and ("second on " + m.group(1)) in r["logs"], "cpu-b ran elsewhere: %r %r" % (j, r))


def running_on(jids, secs=30):
    """Waits until each job in jids has logged "on IP" (it runs there);
    their IPs."""
    ips, until = {}, time.time() + secs
    while len(ips) < len(jids) and time.time() < until:
        for jid in jids:
            m = re.search(r"^on (127\.0\.0\.[0-9]+)$", call("GET", "/api/jobs/%s/logs" % jid)[1].get("logs", ""), re.M)
            if m:
                ips[jid] = m.group(1)
        time.sleep(0.1)
    check(len(ips) == len(jids), "not all of %r ran together within %d s: %r %r" %
          (jids, secs, ips, [call("GET", "/api/jobs/%s" % j)[1].get("message") for j in jids]))
    return [ips[j] for j in jids]


def submit_together(jobs):
    """Submits each (id, fields) of jobs at once, from a thread each."""
    got = {}
    def one(jid, extra):
        body = {"entrypoint": "echo \"on $RAYDIST_NODE_IP\"; exec sleep 60", "submission_id": jid}
        body.update(extra)
        got[jid] = call("POST", "/api/jobs/", body)
    ts = [threading.Thread(target=one, args=j) for j in jobs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for jid, _ in jobs:
        check(got[jid][0] == 200, "submit %s: %r" % (jid, got[jid]))


def waiting_as(jid, want, secs=30):
    """Waits until job jid's message is all of the pattern want (it is
    PENDING, or RUNNING while its mirror has not heard from the node it
    waits on); the match."""
    until = time.time() + secs
    while True:
        st, j = call("GET", "/api/jobs/" + jid)
        check(st == 200 and j["status"] in ("PENDING", "RUNNING"), "%s waits: %r" % (jid, j))
        m = re.fullmatch(want, j.get("message") or "")
        if m or time.time() > until:
            break
        time.sleep(0.1)
    check(m, "%s waits (%s): %r" % (jid, want, j))
    return m


def stop_all(jids):
    for jid in jids:
        check(call("POST", "/api/jobs/%s/stop" % jid)[1] == {"stopped": True}, "stop " + jid)
    for jid in jids:
        check(wait_end(jid, 30)["status"] == "STOPPED", jid + " stopped")


# two jobs submitted together that only b and c can hold (pool=1 each): one
# runs on each, at once.  The first one's room on the node its mirror's
# seek named is claimed in the head's view until that node reports the job
# (before, both went to the node the view showed free first, and the
# second waited there behind the first while the other node idled)
submit_together([("pool-1", {"entrypoint_resources": {"pool": 1}}), ("pool-2", {"entrypoint_resources": {"pool": 1}})])
ips = running_on(["pool-1", "pool-2"])
check(sorted(ips) == ["127.0.0.2", "127.0.0.3"], "pool-1 and pool-2 on b and c: %r" % ips)
# two more, while both are busy: they wait one on b and one on c (the node
# with the fewest jobs waiting on it), and run together once the first two
# end (before, both waited on b, the first node that could hold them, and
# ran one after the other while c idled)
submit_together([("pool-3", {"entrypoint_resources": {"pool": 1}}), ("pool-4", {"entrypoint_resources": {"pool": 1}})])
waits = {jid: waiting_as(jid, r"PENDING \(waits for pool=1\) on (127\.0\.0\.[0-9]+)").group(1) for jid in ("pool-3", "pool-4")}
check(sorted(waits.values()) == ["127.0.0.2", "127.0.0.3"], "pool-3 and pool-4 wait on b and c: %r" % waits)
stop_all(["pool-1", "pool-2"])
ips = running_on(["pool-3", "pool-4"])
check(sorted(ips) == ["127.0.0.2", "127.0.0.3"], "pool-3 and pool-4 on b and c: %r" % ips)
# one more waits on one of them, x; when the job on the other, y, ends
# first, it is withdrawn from x and runs on y while x's job runs on, as a
# Ray job waiting for its entrypoint resources goes to whichever node frees
# them first (before, it waited on x until x's job ended)
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo \"on $RAYDIST_NODE_IP\"; exec sleep 60", "submission_id": "pool-5",
                                    "entrypoint_resources": {"pool": 1}})
check(st == 200, "submit pool-5: %r" % (r,))
x = waiting_as("pool-5", r"PENDING \(waits for pool=1\) on (127\.0\.0\.[23])").group(1)
on_x, on_y = ("pool-3", "pool-4") if ips[0] == x else ("pool-4", "pool-3")
y = ips[1] if ips[0] == x else ips[0]
t0 = time.time()
stop_all([on_y])
check(running_on(["pool-5"]) == [y], "pool-5 moved to " + y)
print("pool-5 ran on %s %.1f s after the stop of the job there began (it waited on %s)" % (y, time.time() - t0, x))
st, r = call("GET", "/api/jobs/pool-5/logs")
check(("raydist job: withdrawn from node %s to run on node %s, where its room came free first" % (x, y)) in r["logs"] and
      call("GET", "/api/jobs/" + on_x)[1]["status"] == "RUNNING", "pool-5's move: %r" % r)
stop_all([on_x, "pool-5"])
check(call("POST", "/api/jobs/cpu-a/stop")[1] == {"stopped": True}, "stop cpu-a")
check(wait_end("cpu-a", 30)["status"] == "STOPPED", "cpu-a stopped")
# two jobs that each need every CPU of a node, submitted at once to an idle
# head: one runs here, the other on b or c, together (the head's CPUs are
# promised to the first placed until its keeper asks for them; before, the
# second found them free too, came here and waited)
submit_together([("two-a", {"entrypoint_num_cpus": 2}), ("two-b", {"entrypoint_num_cpus": 2})])
ips = sorted(running_on(["two-a", "two-b"]))
check(ips[0] == "127.0.0.1" and ips[1] in ("127.0.0.2", "127.0.0.3"), "one of two-a, two-b here, one on b or c: %r" % ips)
# a third runs on the node left; with all three busy, a fourth waits here
# (no node has fewer jobs waiting: this node's of equals, and no mirror)
# and a fifth on b or c (the head has one waiting, they none)
body = {"entrypoint": "echo \"on $RAYDIST_NODE_IP\"; exec sleep 60", "entrypoint_num_cpus": 2}
check(call("POST", "/api/jobs/", dict(body, submission_id="two-c"))[0] == 200, "submit two-c")
third = running_on(["two-c"])[0]
check(third in ("127.0.0.2", "127.0.0.3") and third != ips[1], "two-c on the node left: %s" % third)
for jid, want in (("two-d", r"PENDING \(waits for CPU=2\)"), ("two-e", r"PENDING \(waits for CPU=2\) on 127\.0\.0\.[23]")):
    check(call("POST", "/api/jobs/", dict(body, submission_id=jid))[0] == 200, "submit " + jid)
    waiting_as(jid, want)
stop_all(["two-e", "two-d", "two-c", "two-a", "two-b"])
# what only the head has (solo=1): the second waits PENDING (no driver yet)
# here and runs once the first lets go
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo holding; exec sleep 60", "submission_id": "solo-a",
                                    "entrypoint_resources": {"solo": 1}})
check(st == 200, "submit solo-a: %d %r" % (st, r))
wait_log("solo-a", "holding")
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo second", "submission_id": "solo-b", "entrypoint_resources": {"solo": 1}})
check(st == 200, "submit solo-b: %d %r" % (st, r))
st, j = call("GET", "/api/jobs/solo-b")
check(st == 200 and j["status"] == "PENDING" and j["message"] == "PENDING (waits for solo=1)" and j["driver_pid"] is None and
      j["end_time"] is None and j["entrypoint_num_cpus"] == 0 and j["entrypoint_resources"] == {"solo": 1}, "solo-b waits: %r" % j)
check(call("POST", "/api/jobs/solo-a/stop")[1] == {"stopped": True}, "stop solo-a")
j = wait_end("solo-b", 30)
check(j["status"] == "SUCCEEDED" and j["driver_pid"] > 0, "solo-b once solo-a let go: %r" % j)
st, r = call("GET", "/api/jobs/solo-b/logs")
check("second" in r["logs"] and "waiting for solo=1 of the node" in r["logs"] and "runs on node" not in r["logs"],
      "solo-b's log: %r" % r)
# a label selector this node (no labels) satisfies: run
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo selected", "entrypoint_label_selector": {"zone": "!east", "gpu": "!in(A100,H100)"}})
check(st == 200, "a satisfied label selector: %d %r" % (st, r))
check(wait_end(r["job_id"])["status"] == "SUCCEEDED", "the selected job")
# a pending job stopped: STOPPED, it never ran
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo holding; exec sleep 60", "submission_id": "cpu-c", "entrypoint_resources": {"solo": 1}})
wait_log("cpu-c", "holding")
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo never", "submission_id": "cpu-d", "entrypoint_resources": {"solo": 1}})
check(st == 200 and call("GET", "/api/jobs/cpu-d")[1]["status"] == "PENDING", "cpu-d waits")
check(call("POST", "/api/jobs/cpu-d/stop")[1] == {"stopped": True}, "stop the pending cpu-d")
j = wait_end("cpu-d", 10)
check(j["status"] == "STOPPED" and j["driver_pid"] is None and "never" not in call("GET", "/api/jobs/cpu-d/logs")[1]["logs"],
      "the stopped pending job: %r" % j)
check(call("POST", "/api/jobs/cpu-c/stop")[1] == {"stopped": True}, "stop cpu-c")

# delete: gone from the list and the node
st, r = call("DELETE", "/api/jobs/http-long")
check(st == 200 and r == {"deleted": True}, "delete: %d %r" % (st, r))
expect("GET", "/api/jobs/http-long", 404, "no job 'http-long'")
st, lst = call("GET", "/api/jobs/")
check(st == 200 and isinstance(lst, list), "list: %r" % lst)
ids = [x["submission_id"] for x in lst]
check("http-one" in ids and "http-long" not in ids, "list after delete: %r" % ids)

# Ray's version check and package uploads (its SDK: GET /api/version, then
# GET /api/packages/gcs/NAME and, when 404, PUT it; then a submit whose
# runtime_env.working_dir names it)
with urllib.request.urlopen(base + "/api/version", timeout=10) as r:   # no token: Ray's SDK asks first
    v = json.loads(r.read().decode())
check(v["version"] == "4" and v["ray_version"].count(".") == 2 and v["server"] == "libraydist", "version: %r" % v)
zbuf = io.BytesIO()
with zipfile.ZipFile(zbuf, "w") as z:
    z.writestr("run.sh", "#!/bin/sh\necho \"cwd=$(pwd)\"\ncat sub/data.txt\n")
    z.writestr("sub/data.txt", "zipped payload\n")
pkg = zbuf.getvalue()
pname = "_ray_pkg_0123456789abcdef.zip"


def exchange(head, data=b"", cut=False):
    """Sends a raw request (head with its headers, the blank line added,
    then data; cut: no more after it) and reads the connection to its end."""
    host_, port_ = addr.rsplit(":", 1)
    with socket.create_connection((host_, int(port_)), timeout=30) as s:
        s.sendall(head.encode() + b"\r\n" + data)
        if cut:
            s.shutdown(socket.SHUT_WR)
        resp = b""
        while True:
            b = s.recv(65536)
            if not b:
                return resp
            resp += b


def put(path, data, tok=token, length=None):
    head = "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (path, len(data) if length is None else length)
    if tok:
        head += "Authorization: Bearer %s\r\n" % tok
    resp = exchange(head, data, cut=length is not None and length > len(data))
    code = int(resp.split(b" ", 2)[1]) if resp.startswith(b"HTTP/") else 0
    return code, resp.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")


expect("GET", "/api/packages/gcs/" + pname, 404, "no package gcs://" + pname)
check(put("/api/packages/gcs/" + pname, pkg, tok=None)[0] == 401, "a package without the token")
check(put("/api/packages/gcs/" + pname, pkg, tok="wrong")[0] == 401, "a package with a wrong token")
code, body = put("/api/packages/gcs/.hidden.zip", pkg)
check(code == 400 and "package name" in body, "a package named .hidden: %d %s" % (code, body))
code, body = put("/api/packages/s3/" + pname, pkg)
check(code == 400 and "only gcs packages" in body, "an s3 package: %d %s" % (code, body))
code, body = put("/api/packages/gcs/" + pname, b"", length=600 << 20)   # refused from its head
check(code == 413 and "at most 536870912" in body, "a 600 MiB package: %d %s" % (code, body))
first = exchange("PUT /api/packages/gcs/%s HTTP/1.0\r\nAuthorization: Bearer %s\r\n" % (pname, token)).decode()   # no length
check(first.startswith("HTTP/1.0 411 Length Required"), "a PUT without a length: %r" % first)
expect("DELETE", "/api/packages/gcs/" + pname, 405, "takes GET and PUT")
code, body = put("/api/packages/gcs/" + pname, pkg[:10], length=len(pkg))   # cut off: nothing kept
check(code == 0, "a cut-off upload was answered: %d %s" % (code, body))
expect("GET", "/api/packages/gcs/" + pname, 404, "no package")
code, body = put("/api/packages/gcs/" + pname, pkg)
check(code == 200 and json.loads(body) == {"uploaded": pname, "bytes": len(pkg)}, "upload: %d %s" % (code, body))
st, r = call("GET", "/api/packages/gcs/" + pname)
check(st == 200 and r == {"package": "gcs://" + pname}, "the package after its upload: %d %r" % (st, r))
st, r = call("POST", "/api/jobs/", {"entrypoint": "sh run.sh", "runtime_env": {"working_dir": "gcs://" + pname, "excludes": None}})
check(st == 200, "submit with a working_dir package: %d %r" % (st, r))
j = wait_end(r["job_id"])
st, lg = call("GET", "/api/jobs/%s/logs" % r["job_id"])
check(j["status"] == "SUCCEEDED" and "zipped payload\n" in lg["logs"] and
      re.search(r"cwd=%s/jobs/%s/wd\n" % (re.escape(session), r["job_id"]), lg["logs"]), "the package's job: %r %r" % (j, lg))
# entrypoint resources the head has not, node c has: the job runs there,
# the head's job following it (its log, its end, its exit code), its
# working_dir shipped along
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo \"on $RAYDIST_NODE_IP X=$X\"; sh run.sh; exit 3", "submission_id": "fwd-c",
                                    "entrypoint_resources": {"only_c": 1}, "runtime_env": {"env_vars": {"X": "1"}, "working_dir": "gcs://" + pname}})
check(st == 200 and r["submission_id"] == "fwd-c", "a job for node c: %d %r" % (st, r))
j = wait_end("fwd-c")
st, lg = call("GET", "/api/jobs/fwd-c/logs")
check(j["status"] == "FAILED" and j["driver_exit_code"] == 3 and j["entrypoint_resources"] == {"only_c": 1} and
      re.search(r"^raydist job: runs on node 127\.0\.0\.3 as its job [0-9]+$", lg["logs"], re.M) and
      "on 127.0.0.3 X=1\n" in lg["logs"] and "zipped payload\n" in lg["logs"], "the job run on node c: %r %r" % (j, lg))
# a label selector node b's labels satisfy (zone=west), the head's not: it
# runs on b, asking no resources
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo \"west on $RAYDIST_NODE_IP\"", "submission_id": "sel-b",
                                    "entrypoint_label_selector": {"zone": "west", "gpu": "in(A100,H100)"}})
check(st == 200, "a job for zone=west: %d %r" % (st, r))
j = wait_end("sel-b")
st, lg = call("GET", "/api/jobs/sel-b/logs")
check(j["status"] == "SUCCEEDED" and re.search(r"^raydist job: runs on node 127\.0\.0\.2 as its job [0-9]+$", lg["logs"], re.M) and
      "west on 127.0.0.2\n" in lg["logs"], "the job run on node b by its labels: %r %r" % (j, lg))
session_b = session.replace("node-127.0.0.1", "node-127.0.0.2")
# one holding node b's only_b, a second waiting for it there; the first
# stopped through the head: stopped on b, and the second runs
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo started; exec sleep 60", "submission_id": "fwd-b1", "entrypoint_resources": {"only_b": 1}})
check(st == 200, "fwd-b1: %d %r" % (st, r))
wait_log("fwd-b1", "started")
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo second", "submission_id": "fwd-b2", "entrypoint_resources": {"only_b": 1}})
check(st == 200, "fwd-b2: %d %r" % (st, r))
wait_log("fwd-b2", "raydist job: waiting for only_b=1 of the node to be free")
st, j = call("GET", "/api/jobs/fwd-b2")
check(j["status"] == "PENDING" and j["message"] == "PENDING (waits for only_b=1) on 127.0.0.2", "fwd-b2 waits on b: %r" % j)
t0 = time.time()
check(call("POST", "/api/jobs/fwd-b1/stop")[1] == {"stopped": True}, "stop fwd-b1")
j = wait_end("fwd-b1", 30)
check(j["status"] == "STOPPED" and time.time() - t0 < 10, "fwd-b1 stopped: %r" % j)
j = wait_end("fwd-b2", 30)
check(j["status"] == "SUCCEEDED" and "second\n" in call("GET", "/api/jobs/fwd-b2/logs")[1]["logs"], "fwd-b2 ran: %r" % j)
out = subprocess.run([raydist, "job", "list", "--session", session_b], capture_output=True, text=True, errors="replace").stdout
check(re.search(r"STOPPED .*echo started; exec sleep 60", out) and re.search(r"SUCCEEDED .*echo second", out),
      "node b's jobs: %s" % out)
code, body = put("/api/packages/gcs/_ray_pkg_bad.zip", b"not a zip at all")
check(code == 200, "upload of a bad zip: %d" % code)
expect("POST", "/api/jobs/", 500, "cannot unpack the working directory", {"entrypoint": "ls", "runtime_env": {"working_dir": "gcs://_ray_pkg_bad.zip"}})

# the log tail is a WebSocket (Ray's `ray job logs -f`): the handshake's
# accept key, the text frames (a bad byte as U+FFFD), the close (1000)
def ws_tail(jid, tok=token, key="dGhlIHNhbXBsZSBub25jZQ=="):
    head = ("GET /api/jobs/%s/logs/tail HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (jid, key))
    if tok:
        head += "Authorization: Bearer %s\r\n" % tok
    data = exchange(head)
    hs, _, rest = data.partition(b"\r\n\r\n")
    frames = []
    if not hs.startswith(b"HTTP/1.1 101 "):
        rest = b""   # an HTTP answer, not frames
    while len(rest) >= 2:
        op, n, i = rest[0] & 0x0F, rest[1] & 0x7F, 2
        if n == 126:
            n, i = int.from_bytes(rest[2:4], "big"), 4
        elif n == 127:
            n, i = int.from_bytes(rest[2:10], "big"), 10
        frames.append((rest[0] & 0x80, op, rest[i:i + n]))
        rest = rest[i + n:]
    return hs.decode(errors="replace"), frames


hs, frames = ws_tail(one)
check(hs.startswith("HTTP/1.1 101 ") and "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in hs, "tail handshake: %r" % hs)
text = b"".join(f[2] for f in frames if f[1] == 1).decode("utf-8")   # strict: frames are UTF-8
check(all(f[0] for f in frames) and frames[-1][1] == 8 and frames[-1][2][:2] == b"\x03\xe8", "tail frames: %r" % frames)
check("hello world\n" in text and "caf\u00e9 \ufffd\n" in text, "tail text: %r" % text)
# a character whose bytes come a second apart reaches the tail whole, after
# the tail has waited on its first byte
st, r = call("POST", "/api/jobs/", {"entrypoint": "echo start; printf '\\303'; sleep 1; printf '\\251 done\\n'"})
check(st == 200, "submit the split character: %d %r" % (st, r))
wait_log(r["job_id"], "start")
hs, frames = ws_tail(r["job_id"])
text = b"".join(f[2] for f in frames if f[1] == 1).decode("utf-8")
check(text == "start\n\u00e9 done\n" and frames[-1][1] == 8, "the split character's tail: %r" % frames)
check(call("DELETE", "/api/jobs/%s" % r["job_id"])[0] == 200, "delete the split character's job")
hs, frames = ws_tail(one, tok=None)
check(hs.startswith("HTTP/1.0 401 "), "a tail without the token: %r" % hs)
hs, frames = ws_tail("99999")
check(hs.startswith("HTTP/1.0 404 "), "a tail of no job: %r" % hs)
expect("GET", "/api/jobs/%s/logs/tail" % one, 400, "is a WebSocket")

# bad requests: a status and a reason, nothing run
expect("POST", "/api/jobs/", 400, "malformed JSON at byte", raw=b"{\"entrypoint\": ")
expect("POST", "/api/jobs/", 400, "must be a JSON object", raw=b"[1, 2]")
expect("POST", "/api/jobs/", 400, "'entrypoint' is given twice", raw=b'{"entrypoint": "true", "entrypoint": "false"}')
expect("POST", "/api/jobs/", 400, "'A' is given twice", raw=b'{"entrypoint": "true", "runtime_env": {"env_vars": {"A": "1", "A": "2"}}}')
expect("POST", "/api/jobs/", 400, "entrypoint is missing", {"submission_id": "x-1"})
expect("POST", "/api/jobs/", 400, "non-empty string", {"entrypoint": ""})
expect("POST", "/api/jobs/", 400, "non-empty string", {"entrypoint": ["ls"]})
expect("POST", "/api/jobs/", 400, "unknown field 'entry'", {"entry": "ls"})
expect("POST", "/api/jobs/", 400, "must name an uploaded zip package", {"entrypoint": "ls", "runtime_env": {"working_dir": "."}})
expect("POST", "/api/jobs/", 400, "no package gcs://_ray_pkg_none.zip", {"entrypoint": "ls", "runtime_env": {"working_dir": "gcs://_ray_pkg_none.zip"}})
expect("POST", "/api/jobs/", 400, "runtime_env.pip is not supported", {"entrypoint": "ls", "runtime_env": {"pip": ["numpy"]}})
expect("POST", "/api/jobs/", 400, "the job's {CPU: 0, GPU: 1} can never be held here", {"entrypoint": "ls", "entrypoint_num_gpus": 1})
expect("POST", "/api/jobs/", 400, "the job's {CPU: 3, GPU: 0} can never be held here", {"entrypoint": "ls", "entrypoint_num_cpus": 3})
expect("POST", "/api/jobs/", 400, "nope: 1} can never be held here", {"entrypoint": "ls", "entrypoint_resources": {"nope": 1}})
expect("POST", "/api/jobs/", 400, "only_c: 5} can never be held here (a job runs on the node it is submitted to; no live node has them)", {"entrypoint": "ls", "entrypoint_resources": {"only_c": 5}})
expect("POST", "/api/jobs/", 400, "'GPU' is not a custom resource's name", {"entrypoint": "ls", "entrypoint_resources": {"GPU": 1}})
expect("POST", "/api/jobs/", 400, "entrypoint_resources must be an object of numbers", {"entrypoint": "ls", "entrypoint_resources": [1]})
expect("POST", "/api/jobs/", 400, "entrypoint_resources.a must be a number >= 0", {"entrypoint": "ls", "entrypoint_resources": {"a": "1"}})
expect("POST", "/api/jobs/", 400, "CPU=1.5 is not an amount (whole above 1)", {"entrypoint": "ls", "entrypoint_num_cpus": 1.5})
expect("POST", "/api/jobs/", 400, "entrypoint_num_cpus must be a number >= 0", {"entrypoint": "ls", "entrypoint_num_cpus": -1})
expect("POST", "/api/jobs/", 400, "entrypoint_memory must be a number >= 0", {"entrypoint": "ls", "entrypoint_memory": 1e30})
expect("POST", "/api/jobs/", 400, "no live node whose labels satisfy the job's entrypoint_label_selector (zone=north) has its {CPU: 0, GPU: 0}, and no kind of node the autoscaler can start would (this node's labels: none)", {"entrypoint": "ls", "entrypoint_label_selector": {"zone": "north"}})
expect("POST", "/api/jobs/", 400, "no live node whose labels satisfy the job's entrypoint_label_selector (zone=west) has its {CPU: 0, GPU: 0, only_c: 1}", {"entrypoint": "ls", "entrypoint_label_selector": {"zone": "west"}, "entrypoint_resources": {"only_c": 1}})
expect("POST", "/api/jobs/", 400, "entrypoint_label_selector.zone must be a string", {"entrypoint": "ls", "entrypoint_label_selector": {"zone": 1}})
expect("POST", "/api/jobs/", 400, "entrypoint_label_selector: ", {"entrypoint": "ls", "entrypoint_label_selector": {"zone": "in(a"}})
expect("POST", "/api/jobs/", 400, "entrypoint_label_selector must be an object of strings", {"entrypoint": "ls", "entrypoint_label_selector": ["zone"]})
expect("POST", "/api/jobs/", 400, "env_vars names", {"entrypoint": "ls", "runtime_env": {"env_vars": {"1A": "x"}}})
expect("POST", "/api/jobs/", 400, "env_vars values must be strings", {"entrypoint": "ls", "runtime_env": {"env_vars": {"A": 1}}})
expect("POST", "/api/jobs/", 400, "metadata must be an object of strings", {"entrypoint": "ls", "metadata": {"a": 1}})
expect("POST", "/api/jobs/", 400, "exists (job %s)" % one, {"entrypoint": "ls", "submission_id": "http-one"})
expect("POST", "/api/jobs/", 400, "must not be a number", {"entrypoint": "ls", "submission_id": "42"})
expect("POST", "/api/jobs/", 400, "none of newline", {"entrypoint": "ls", "submission_id": "a/b"})
# a body over 64 KiB is refused from its head (sent alone: the answer comes before any body)
host, port = addr.rsplit(":", 1)
with socket.create_connection((host, int(port)), timeout=30) as s:
    s.sendall(("POST /api/jobs/ HTTP/1.0\r\nAuthorization: Bearer %s\r\nContent-Length: 70000\r\n\r\n" % token).encode())
    first = s.recv(200).decode()
check(first.startswith("HTTP/1.0 413 "), "a 70 KB body: %r" % first)
expect("PUT", "/api/jobs/", 405, "GET (list) and POST (submit)", {"entrypoint": "ls"})
expect("GET", "/api/jobs/%s/stop" % one, 405, "takes POST")
expect("POST", "/api/jobs/%s/logs" % one, 405, "takes GET")
expect("GET", "/api/jobs/%s/frob" % one, 404, "no such path")
expect("GET", "/api/jobs/99999", 404, "no job '99999'")
expect("GET", "/api/jobs/%s/logs?offset=abc" % one, 400, "offset must be a whole number")
out = subprocess.run([raydist, "job", "list", "--session", session], capture_output=True, text=True, errors="replace").stdout
check(len([l for l in out.splitlines() if l[:1].isdigit()]) == 24, "bad requests made jobs: %s" % out)   # one, sdk-style, the package's, cpu-a to -d, pool-1 to -5, two-a to -e, solo-a, -b, selected, fwd-c, sel-b, fwd-b1, -b2

# mangled requests (heads, lengths, bodies, JSON): an answer or a close,
# never a crash or a hang, and the API answers as before afterwards
import random
rng = random.Random(7)
good = ('POST /api/jobs/ HTTP/1.0\r\nAuthorization: Bearer %s\r\nContent-Length: %%d\r\n\r\n' % token).encode()
bodies = [b'{"entrypoint": "exit 0", "submission_id": "s", "runtime_env": {"env_vars": {"A": "b"}}, "metadata": {"k": "v"}}',
          b'{"entrypoint": null, "metadata": {"a": ["x"]}, "runtime_env": {"env_vars": null}}']
answered = closed = 0


def mangled(data):
    """Sends data and no more; the first bytes of the answer, b"" when the
    node closed the connection instead."""
    with socket.create_connection((host, int(port)), timeout=30) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            return s.recv(64)
        except (ConnectionResetError, BrokenPipeError):
            return b""


for i in range(400):
    body = bytearray(rng.choice(bodies))
    for _ in range(rng.randint(1, 4)):
        body[rng.randrange(len(body))] = rng.randrange(256)
    head = bytearray(good % (len(body) + rng.choice([0, 0, 0, -5, 3])))
    if rng.random() < 0.3:
        head[rng.randrange(len(head))] = rng.randrange(256)
    if mangled(bytes(head) + bytes(body)).startswith(b"HTTP/1.0 "):
        answered += 1
    else:
        closed += 1
# and mangled uploads and log tails (heads, lengths, bytes after the handshake)
heads = [("PUT /api/packages/gcs/_ray_pkg_mangled.zip HTTP/1.1\r\nAuthorization: Bearer %s\r\nContent-Length: %%d\r\n\r\n"
          % token).encode(),
         ("GET /api/jobs/%s/logs/tail HTTP/1.1\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          "Authorization: Bearer %s\r\nX-Len: %%d\r\n\r\n" % (one, token)).encode()]
for i in range(300):
    body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    head = bytearray(rng.choice(heads) % (len(body) + rng.choice([0, 0, -5, 3, 100000])))
    if rng.random() < 0.3:
        head[rng.randrange(len(head))] = rng.randrange(256)
    if mangled(bytes(head) + body).startswith(b"HTTP/1."):
        answered += 1
    else:
        closed += 1
print("mangled requests: %d answered, %d closed" % (answered, closed))
st, lst = call("GET", "/api/jobs/")
check(st == 200 and isinstance(lst, list), "the API after mangled requests: %d %r" % (st, lst))
out = subprocess.run([raydist, "job", "list", "--session", session], capture_output=True, text=True, errors="replace").stdout
mangled_jobs = [l for l in out.splitlines() if l[:1].isdigit()][3:]
for l in mangled_jobs:   # a mangled body may still be a valid submit: those ran `exit 0`-like entrypoints; let them end
    wait_end(l.split()[0])
print("jobs_http: ok (%d jobs from mangled requests that were still valid)" % len(mangled_jobs))
