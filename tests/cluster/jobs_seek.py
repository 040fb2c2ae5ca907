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
* nowhere=1 (no node, no node type): refused at once (400).
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

# big: a node of type big starts for it, and it runs there
st, r = call("POST", "/api/jobs/",
             {"entrypoint": 'echo "on $RAYDIST_NODE_IP"', "submission_id": "seek-big", "entrypoint_resources": {"big": 1}})
check(st == 200, "submit seek-big: %d %r" % (st, r))
j = until(120, "seek-big did not end", lambda: ended("seek-big"))
text = log("seek-big")
check(j["status"] == "SUCCEEDED", "seek-big: %r, log %r" % (j, text))
want = "waiting for the autoscaler to start a node of type 'big': no live node has {CPU: 0, GPU: 0, big: 1}"
check(want in text, "seek-big's log does not say why it waited: %r" % text)
m = re.search(r"^raydist job: runs on node (127\.0\.0\.2[0-9]) as its job [0-9]+$", text, re.M)
check(m is not None and ("on " + m.group(1)) in text.splitlines(), "seek-big did not run on a big node: %r" % text)
check(j["entrypoint_resources"] == {"big": 1}, "seek-big's entrypoint resources: %r" % j)
check(seeking() == 0, "a seeking hold left after seek-big")

# what no node type has either: refused at once
st, r = call("POST", "/api/jobs/", {"entrypoint": "true", "entrypoint_resources": {"nowhere": 1}})
check(st == 400 and "no live node has them" in str(r), "submit nowhere=1: %d %r" % (st, r))
print("ok: seek-never waited and was stopped, seek-big ran on", m.group(1))
