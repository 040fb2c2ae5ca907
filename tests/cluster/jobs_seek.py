"""tests/cluster/jobs_seek.py HOST:PORT TOKEN RAYDIST - jobs submitted
through the head's jobs API whose entrypoint resources no live node has
but a kind of node the autoscaler can start has (cluster_test.sh's
autoscaler case: types big, which joins, and never, which never does).

* never=1: PENDING "waits for a node with never=1", its mirror counted as
  a seeking hold on the head and as the head's demand in `raydist status`,
  the reason in its log; stopped while it waits, it is STOPPED and the
  hold is gone, its entrypoint never ran;
* big=1: a big node starts for it, the job runs there (its log names the
  node, and the entrypoint prints that node's address) and SUCCEEDED;
* entrypoint_label_selector tier=big (big nodes' label) and no resources,
  once no big node is left: the same;
* two big=1 jobs, the second submitted while the first runs: it waits as
  demand and runs on a second big node, beside the first;
* nowhere=1, tier=huge (no node, no node type): refused at once (400).
"""
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

addr, token, raydist = sys.argv[1:4]


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request("http://" + addr + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check(cond, what):
    if not cond:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)


def until(secs, what, probe):
    end = time.time() + secs
    while time.time() < end:
        v = probe()
        if v:
            return v
        time.sleep(0.1)
    check(False, what)


def seeking():
    with urllib.request.urlopen("http://" + addr + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('raydist_job_holds{state="seeking"} '):
                return int(float(line.split()[1]))
    return -1


def job(sid):
    st, j = call("GET", "/api/jobs/" + sid)
    check(st == 200, "GET %s: %d %r" % (sid, st, j))
    return j


def ended(sid):
    j = job(sid)
    return j if j["status"] not in ("PENDING", "RUNNING") else None


def log(sid):
    st, j = call("GET", "/api/jobs/%s/logs" % sid)
    check(st == 200, "logs of %s: %d %r" % (sid, st, j))
    return j["logs"]


def status_says(needle):
    out = subprocess.run([raydist, "status"], capture_output=True, text=True).stdout
    return out if needle in out else None


# never: waits, is demand, and a stop ends it
st, r = call("POST", "/api/jobs/",
             {"entrypoint": "echo never ran", "submission_id": "seek-never", "entrypoint_resources": {"never": 1}})
check(st == 200, "submit seek-never: %d %r" % (st, r))
j = until(30, "seek-never not PENDING for a node",
          lambda: (lambda j: j if j["message"] == "PENDING (waits for a node with never=1)" else None)(job("seek-never")))
check(j["status"] == "PENDING", "seek-never: %r" % j)
until(30, "no seeking hold on the head", lambda: seeking() == 1)
until(30, "status: no demand for never=1 on the head", lambda: status_says("never: 1} x 1 on node 1"))
want = "waiting for the autoscaler to start a node of type 'never': no live node has {CPU: 0, GPU: 0, never: 1}"
until(30, "seek-never's log does not say why it waits", lambda: want in log("seek-never"))
st, r = call("POST", "/api/jobs/seek-never/stop")
check(st == 200 and r.get("stopped") is True, "stop seek-never: %d %r" % (st, r))
j = until(30, "seek-never did not end", lambda: ended("seek-never"))
check(j["status"] == "STOPPED", "seek-never after its stop: %r" % j)
until(30, "the seeking hold stays after the stop", lambda: seeking() == 0)
check("never ran" not in log("seek-never"), "seek-never's entrypoint ran: %r" % log("seek-never"))

def on_big_node(sid, ask, waited):
    """Submits job sid asking ask (entrypoint fields), which no live node
    has: its log says it waited for a big node (waited: what no node had),
    and it ran on one, SUCCEEDED.  Its details, and the node's address."""
    body = {"entrypoint": 'echo "%s on $RAYDIST_NODE_IP"' % sid, "submission_id": sid}
    body.update(ask)
    st, r = call("POST", "/api/jobs/", body)
    check(st == 200, "submit %s: %d %r" % (sid, st, r))
    j = until(120, sid + " did not end", lambda: ended(sid))
    text = log(sid)
    check(j["status"] == "SUCCEEDED", "%s: %r, log %r" % (sid, j, text))
    want = "waiting for the autoscaler to start a node of type 'big': no live node has " + waited
    check(want in text, "%s's log does not say why it waited: %r" % (sid, text))
    m = re.search(r"^raydist job: runs on node (127\.0\.0\.1[0-9][0-9]) as its job [0-9]+$", text, re.M)
    check(m is not None and ("%s on %s" % (sid, m.group(1))) in text.splitlines(), "%s did not run on a big node: %r" % (sid, text))
    return j, m.group(1)


# big: a node of type big starts for it, and it runs there
j, big = on_big_node("seek-big", {"entrypoint_resources": {"big": 1}}, "{CPU: 0, GPU: 0, big: 1}")
check(j["entrypoint_resources"] == {"big": 1}, "seek-big's entrypoint resources: %r" % j)
check(seeking() == 0, "a seeking hold left after seek-big")
# a label selector only big nodes satisfy (tier=big), no resources: once
# the big node has gone, a big node starts for it again
until(60, "the big node did not go once idle", lambda: status_says("type big: 0 alive, 0 starting"))
on_big_node("seek-tier", {"entrypoint_label_selector": {"tier": "big"}}, "{CPU: 0, GPU: 0} with labels 'tier=big'")

# two big=1 jobs, the first running (on a big node started for it) when
# the second comes: the second waits as demand, not behind the first on
# its node, and runs on a second big node started for it, beside the first
# (Ray's pending job makes the autoscaler add a node); before, it went to
# the first's node and waited there while it ran
def running_on(sid):
    m = re.search(r"^%s on (127\.0\.0\.[0-9]+)$" % sid, log(sid), re.M)   # (a launch's address: 20 + its id)
    return m.group(1) if m else None


for sid in ("busy-1", "busy-2"):
    st, r = call("POST", "/api/jobs/", {"entrypoint": 'echo "%s on $RAYDIST_NODE_IP"; exec sleep 60' % sid,
                                        "submission_id": sid, "entrypoint_resources": {"big": 1}})
    check(st == 200, "submit %s: %d %r" % (sid, st, r))
    if sid == "busy-1":
        first = until(120, "busy-1 did not run on a big node", lambda: running_on("busy-1"))
second = until(120, "busy-2 did not run beside busy-1 (%r)" % job("busy-2").get("message"), lambda: running_on("busy-2"))
check(second != first and job("busy-1")["status"] == "RUNNING", "busy-2 on %s beside busy-1 on %s" % (second, first))
check("waiting for a node with {CPU: 0, GPU: 0, big: 1} free (live ones are busy), or for the autoscaler to start "
      "a node of type 'big'" in log("busy-2"), "busy-2's log does not say why it waited: %r" % log("busy-2"))
for sid in ("busy-1", "busy-2"):
    check(call("POST", "/api/jobs/%s/stop" % sid)[1] == {"stopped": True}, "stop " + sid)
    check(until(30, sid + " did not end", lambda: ended(sid))["status"] == "STOPPED", sid + " stopped")

# what no node type has either: refused at once
st, r = call("POST", "/api/jobs/", {"entrypoint": "true", "entrypoint_resources": {"nowhere": 1}})
check(st == 400 and "no live node has them" in str(r), "submit nowhere=1: %d %r" % (st, r))
st, r = call("POST", "/api/jobs/", {"entrypoint": "true", "entrypoint_label_selector": {"tier": "huge"}})
check(st == 400 and "no kind of node the autoscaler can start would" in str(r), "submit tier=huge: %d %r" % (st, r))
print("ok: seek-never waited and was stopped, seek-big ran on", big, "and seek-tier on a big node too; busy-1 on",
      first, "and busy-2 on", second)
