#!/usr/bin/env python3
"""A federation through the XML port into a real gmetad, one cluster per site.

SITES x PER_SITE simulated servers (default 50 x 40 = 2,000), each its own
loopback address, each sending the real record tests/data/records/
srv_xrootd.xml (its src, site, tod and byte counters changed per report)
every INTERVAL seconds, phases spread evenly; then a burst of all of them
at once. The gateway (`serve`, `cluster_by_site = true`, `send = false`)
is polled by a real gmetad every STEP seconds, and by this script every
2 s for freshness.

Measured:
* freshness: per poll of the gateway's document and host, lag = its TN -
  the age of its last report at the poll's start; a host is fresh when
  lag <= 2 s. Hosts missing from a document after they reported.
* gmetad: cluster directories and hosts with RRDs under rrd_rootdir; per
  poll cycle, the span of its host RRDs' modification times (how long
  writing one poll's RRDs took) and its CPU seconds per cycle.
* the gateway's CPU seconds and RSS (VmRSS, VmHWM).
* gmetad's cycle: its busiest thread's CPU per step (its one data source
  is one thread that polls, parses and writes the RRDs: near a whole step
  means it no longer keeps up), the interval between writes of probe
  RRDs (one per site, stat'ed every second; without rrdcached), and at
  the end the age of a sample of host RRDs' last update (`rrdtool last`,
  through rrdcached with --rrdcached): ages beyond a step or two mean
  hosts' RRDs fall behind.
* with --rrdcached: gmetad writes through an rrdcached of this script's
  own (private unix socket, -w 60 -z 30), whose STATS are read every step
  (updates received per step, queue length) and whose CPU is counted.
* the burst: the peak of the gateway's socket's receive queue
  (/proc/net/udp rx_queue, the kernel's memory per datagram included,
  sampled every 2 ms) and the socket's drops.

Usage: python3 benches/clusters-scale.py --bin target/release/xrd2ganglia
       [--sites 50] [--per-site 40] [--interval 60] [--sustain 180]
       [--step 15] [--rras "RRA:AVERAGE:0.5:1:244"] [--rrdcached]
       [--recv-buffer BYTES] [--max-sources N] [--poll-interval 2]
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = open(os.path.join(HERE, "../tests/data/records/srv_xrootd.xml")).read().strip()
HOST_RE = re.compile(rb'<HOST NAME="([^"]*)" IP="[^"]*" TAGS="[^"]*" REPORTED="\d+" TN="(\d+)"')
CLUSTER_RE = re.compile(rb'<CLUSTER NAME="([^"]*)"')


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Fleet:
    def __init__(self, sites, per_site, port):
        self.servers = []
        for i in range(sites * per_site):
            site, n = divmod(i, per_site)
            ip = f"127.20.{i // 250}.{i % 250 + 1}"
            host = f"s{site:02d}-{n:02d}.example"
            self.servers.append((ip, host, f"SITE{site:02d}"))
        self.port = port
        self.sent = {}  # host -> monotonic times of its last two reports
        self.reports = {}
        self.lock = threading.Lock()

    def send(self, i):
        ip, host, site = self.servers[i]
        k = self.reports.get(i, 0) + 1
        self.reports[i] = k
        rec = (RECORD.replace('src="vm:', f'src="{host}:', 1)
               .replace('site="TESTSITE"', f'site="{site}"', 1)
               .replace('tod="1795303790"', f'tod="{int(time.time())}"', 1)
               .replace("<in>5248682</in>", f"<in>{5248682 + k * 60000}</in>", 1)
               .replace("<out>5248704</out>", f"<out>{5248704 + k * 90000}</out>", 1))
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((ip, 0))
        s.sendto(rec.encode(), ("127.0.0.1", self.port))
        s.close()
        with self.lock:
            prev = self.sent.get(host, (None, None))[1]
            self.sent[host] = (prev, time.monotonic())


def udp_drops(port):
    """The kernel's drop count at the gateway's listening socket."""
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port:
                return int(fields[-1])
    return None


def read_doc(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    chunks = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        chunks.append(b)
    s.close()
    return b"".join(chunks)


def udp_rx_queue(port):
    """The bytes queued at the gateway's listening socket (skb truesize)."""
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port:
                return int(fields[4].split(":")[1], 16)
    return None


def thread_cpu(pid):
    """CPU seconds of each thread of pid."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except OSError:
                pass
    except OSError:
        pass
    return out


def rrdcached_stats(sock):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(sock)
        s.sendall(b"STATS\n")
        buf = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            buf += b
            lines = buf.decode().splitlines()
            if lines and len(lines) > int(lines[0].split()[0]):
                break
        s.close()
        return {k.strip(): int(v) for k, v in (l.split(":", 1) for l in buf.decode().splitlines()[1:] if ":" in l)}
    except (OSError, ValueError):
        return {}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--sites", type=int, default=50)
    ap.add_argument("--per-site", type=int, default=40)
    ap.add_argument("--interval", type=float, default=60)
    ap.add_argument("--sustain", type=float, default=180)
    ap.add_argument("--step", type=int, default=15)
    ap.add_argument("--rras", default="",
                    help="gmetad's RRAs line (default: gmetad's own, 631 KB per RRD: "
                         "2,000 servers' RRDs then need about 190 GB)")
    ap.add_argument("--min-free-gb", type=float, default=10,
                    help="stop gmetad when the file system has less free (default 10)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (RRDs, logs)")
    ap.add_argument("--rrdcached", action="store_true",
                    help="gmetad writes through an rrdcached of this script's own (RRDCACHED_ADDRESS)")
    ap.add_argument("--recv-buffer", type=int, default=0,
                    help="the gateway's recv_buffer (default: the gateway's, 4194304); "
                         "the kernel caps it at net.core.rmem_max")
    ap.add_argument("--max-sources", type=int, default=0,
                    help="the gateway's max_sources (default: the gateway's, 10000: more servers "
                         "than that are evicted and missing from the document)")
    ap.add_argument("--poll-interval", type=float, default=2,
                    help="seconds between this script's freshness polls of the document (default 2)")
    a = ap.parse_args()

    d = tempfile.mkdtemp(prefix="x2g-scale-")
    rrds = os.path.join(d, "rrds")
    os.makedirs(rrds)
    udp, xml, gx, gi = free_port(), free_port(), free_port(), free_port()
    conf = os.path.join(d, "gw.toml")
    with open(conf, "w") as f:
        f.write(f'listen = ["127.0.0.1:{udp}"]\nsend = false\nxml_listen = ["127.0.0.1:{xml}"]\n'
                f'state_file = ""\nstats_interval = 0\nself_metrics_interval = 0\n'
                f'cluster_by_site = true\n')
        if a.max_sources:
            f.write(f'max_sources = {a.max_sources}\n')
        if a.recv_buffer:
            f.write(f'recv_buffer = {a.recv_buffer}\n')
    gw = subprocess.Popen([a.bin, "serve", "--config", conf], stderr=open(os.path.join(d, "gw.log"), "w"))
    gconf = os.path.join(d, "gmetad.conf")
    with open(gconf, "w") as f:
        f.write(f'data_source "fed" {a.step} 127.0.0.1:{xml}\nsetuid off\nxml_port {gx}\n'
                f'interactive_port {gi}\nserver_threads 2\ntrusted_hosts 127.0.0.1\nrrd_rootdir "{rrds}"\n')
        if a.rras:
            f.write(f'RRAs {" ".join(chr(34) + r + chr(34) for r in a.rras.split())}\n')
    time.sleep(1)
    env = dict(os.environ)
    rc, sock = None, os.path.join(d, "rrdcached.sock")
    if a.rrdcached:
        rc = subprocess.Popen(["rrdcached", "-g", "-l", f"unix:{sock}", "-b", rrds, "-B", "-w", "60", "-z", "30",
                               "-p", os.path.join(d, "rrdcached.pid")],
                              stdout=open(os.path.join(d, "rrdcached.log"), "w"), stderr=subprocess.STDOUT)
        for _ in range(50):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        env["RRDCACHED_ADDRESS"] = f"unix:{sock}"
    gm = subprocess.Popen(["gmetad", "-c", gconf, "-d", "1"], stderr=open(os.path.join(d, "gmetad.log"), "w"),
                          stdout=subprocess.DEVNULL, env=env)
    fleet = Fleet(a.sites, a.per_site, udp)
    n = len(fleet.servers)
    print(f"{n} servers, {a.sites} sites, every {a.interval:.0f} s, gmetad step {a.step} s"
          f"{', through rrdcached' if rc else ''}; dir {d}; load average {loadavg()}", flush=True)

    stop = threading.Event()
    metrics_per_host = []
    polls = []  # (duration, hosts, clusters, fresh, stale, max_lag, missing, bytes)

    def poller():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                doc = read_doc(xml)
            except OSError as e:
                polls.append(("error", str(e)))
                continue
            dt = time.monotonic() - t0
            with fleet.lock:
                sent = dict(fleet.sent)
            seen, fresh, stale, max_lag = set(), 0, 0, 0.0
            # A report is judged once it was sent 0.5 s before the poll
            # (time for the gateway to take it); one sent later, or during
            # the read, is not yet due in this document.
            due = {}
            for h, (prev, last) in sent.items():
                at = last if last <= t0 - 0.5 else prev
                if at is not None:
                    due[h] = at
            for m in HOST_RE.finditer(doc):
                host, tn = m.group(1).decode(), int(m.group(2))
                seen.add(host)
                if host in due:
                    lag = tn - (t0 - due[host])
                    max_lag = max(max_lag, lag)
                    if lag <= 2:
                        fresh += 1
                    else:
                        stale += 1
            missing = sum(1 for h in due if h not in seen)
            polls.append((dt, len(seen), len(CLUSTER_RE.findall(doc)), fresh, stale, max_lag, missing, len(doc)))
            if seen:
                metrics_per_host.append(doc.count(b"<METRIC ") / len(seen))
            stop.wait(max(0.0, a.poll_interval - (time.monotonic() - t0)))

    disk_stop = []

    thread_max = []  # per step: the busiest gmetad thread's CPU seconds
    rc_samples = []  # per step: (updates received, queue length, rrdcached CPU)
    probe_writes = {}  # probe RRD -> times its mtime changed
    probes = {}

    def gmetad_watch(samples):
        last = cpu_seconds(gm.pid)
        last_threads = thread_cpu(gm.pid)
        last_rc = (rrdcached_stats(sock).get("UpdatesReceived", 0), cpu_seconds(rc.pid)) if rc else None
        t = time.monotonic()
        while not stop.wait(1):
            # One probe RRD per site: when its mtime changes, gmetad wrote it.
            if len(probes) < a.sites:
                for c in os.listdir(rrds):
                    if c == "__SummaryInfo__" or c in probes:
                        continue
                    p = os.path.join(rrds, c, f"s{c[4:]}-00.example", "xrootd.srv.link.in.rrd")
                    if os.path.exists(p):
                        probes[c] = p
            for c, p in probes.items():
                try:
                    m = os.stat(p).st_mtime
                except OSError:
                    continue
                w = probe_writes.setdefault(c, [])
                if not w or w[-1][1] != m:
                    w.append((time.monotonic(), m))
            # The machine's disk is shared: gmetad is stopped before it fills it.
            free = shutil.disk_usage(d).free
            if free < a.min_free_gb * 1e9 and gm.poll() is None:
                gm.send_signal(signal.SIGTERM)
                disk_stop.append(free)
            if time.monotonic() - t >= a.step:
                t = time.monotonic()
                now = cpu_seconds(gm.pid)
                samples.append(now - last)
                last = now
                threads_now = thread_cpu(gm.pid)
                thread_max.append(max((v - last_threads.get(k, 0) for k, v in threads_now.items()), default=0))
                last_threads = threads_now
                if rc:
                    st = rrdcached_stats(sock)
                    now_rc = (st.get("UpdatesReceived", 0), cpu_seconds(rc.pid))
                    rc_samples.append((now_rc[0] - last_rc[0], st.get("QueueLength", 0), now_rc[1] - last_rc[1]))
                    last_rc = now_rc

    gsamples = []
    threads = [threading.Thread(target=poller), threading.Thread(target=gmetad_watch, args=(gsamples,))]
    for t in threads:
        t.start()
    gw_cpu0 = cpu_seconds(gw.pid)
    start = time.monotonic()
    # Steady: each server at its phase.
    k = 0
    while time.monotonic() - start < a.sustain:
        due = start + (k // n) * a.interval + (k % n) * a.interval / n
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        fleet.send(k % n)
        k += 1
    steady_polls = len(polls)
    steady_drops = udp_drops(udp)
    steady_cpu = cpu_seconds(gw.pid) - gw_cpu0
    steady_s = time.monotonic() - start
    # Burst: all at once; the socket's receive queue sampled meanwhile.
    rxq = []
    burst_done = threading.Event()

    def rx_watch():
        while not burst_done.wait(0.002):
            q = udp_rx_queue(udp)
            if q is not None:
                rxq.append(q)

    rxt = threading.Thread(target=rx_watch)
    rxt.start()
    b0 = time.monotonic()
    for i in range(n):
        fleet.send(i)
    burst_send_s = time.monotonic() - b0
    time.sleep(2)
    burst_done.set()
    rxt.join()
    time.sleep(max(3 * a.step, 20) - 2)
    burst_drops = udp_drops(udp)
    stop.set()
    for t in threads:
        t.join()

    rss, hwm = status_kb(gw.pid, "VmRSS"), status_kb(gw.pid, "VmHWM")
    total_cpu = cpu_seconds(gw.pid) - gw_cpu0
    # gmetad's RRDs: cluster directories, hosts with RRDs, the last cycle's write span.
    clusters = [c for c in os.listdir(rrds) if c != "__SummaryInfo__"]
    hosts_with_rrds, mtimes, rrd_files, rrd_bytes = 0, [], 0, 0
    for c in clusters:
        for h in os.listdir(os.path.join(rrds, c)):
            if h == "__SummaryInfo__":
                continue
            p = os.path.join(rrds, c, h)
            files = [f for f in os.listdir(p) if f.endswith(".rrd")]
            rrd_files += len(files)
            rrd_bytes += sum(os.stat(os.path.join(p, f)).st_size for f in files)
            if files:
                hosts_with_rrds += 1
                mtimes.append(os.stat(os.path.join(p, files[0])).st_mtime)
    mtimes.sort()
    # A sample of hosts: the age of their RRDs' last update (through rrdcached if used).
    sample = []
    for c in sorted(clusters):
        hs = sorted(h for h in os.listdir(os.path.join(rrds, c)) if h != "__SummaryInfo__")
        sample += [os.path.join(rrds, c, h, "xrootd.srv.link.in.rrd") for h in hs[:: max(1, len(hs) // 4)]]
    ages = []
    if sample:
        cmds = "".join(f"last {'--daemon unix:' + sock + ' ' if rc else ''}{p}\n" for p in sample)
        r = subprocess.run(["rrdtool", "-"], input=cmds, capture_output=True, text=True)
        t_now = time.time()
        ages = [t_now - int(l) for l in r.stdout.split() if l.isdigit()]
    gmetad_status = gm.poll()
    gmetad_log = open(os.path.join(d, "gmetad.log")).read()[-2000:]
    gm.send_signal(signal.SIGTERM)
    gw.send_signal(signal.SIGTERM)
    gm.wait(10)
    gw.wait(10)
    rc_stats = {}
    if rc:
        rc_stats = rrdcached_stats(sock)
        rc_cpu = cpu_seconds(rc.pid)
        rc.send_signal(signal.SIGTERM)  # it flushes what it holds, then exits
        try:
            rc.wait(600)
        except subprocess.TimeoutExpired:
            rc.kill()
            rc.wait()

    def summary(ps, label):
        ok = [p for p in ps if p[0] != "error"]
        if not ok:
            print(f"{label}: no polls")
            return
        print(f"{label}: {len(ok)} polls ({len(ps) - len(ok)} failed); poll {min(p[0] for p in ok):.2f}-"
              f"{max(p[0] for p in ok):.2f} s, {max(p[7] for p in ok) / 1e6:.1f} MB; hosts up to "
              f"{max(p[1] for p in ok)}, clusters up to {max(p[2] for p in ok)}; stale host-polls "
              f"{sum(p[4] for p in ok)} of {sum(p[3] + p[4] for p in ok)}, max lag {max(p[5] for p in ok):.1f} s; "
              f"missing {sum(p[6] for p in ok)}")

    summary(polls[:steady_polls], f"steady {steady_s:.0f} s")
    summary(polls[steady_polls:], f"burst (all {n} sent in {burst_send_s:.2f} s)")
    print(f"kernel drops at the gateway's socket: {steady_drops} after the steady part, "
          f"{burst_drops} after the burst")
    print(f"gateway: CPU {steady_cpu:.1f} s over {steady_s:.0f} s steady ({100 * steady_cpu / steady_s:.1f}% of a core), "
          f"{total_cpu:.1f} s in all; RSS {rss / 1024:.0f} MB, peak {hwm / 1024:.0f} MB")
    print(f"gmetad: {len(clusters)} cluster directories, {hosts_with_rrds} hosts with RRDs of {n}; CPU per "
          f"{a.step} s cycle: " + ", ".join(f"{s:.1f}" for s in gsamples))
    print(f"gmetad: {rrd_files} host RRDs, {rrd_bytes / 1e9:.2f} GB; the document: "
          f"{max(metrics_per_host, default=0):.0f} metrics per host")
    if disk_stop:
        print(f"gmetad STOPPED by this script: {disk_stop[0] / 1e9:.1f} GB left on the file system")
    if mtimes and not rc:  # (rrdcached writes later, in batches)
        # The last cycle: host RRDs written within one step of the newest.
        last = [t for t in mtimes if t >= mtimes[-1] - a.step / 2]
        print(f"gmetad: last cycle wrote {len(last)} hosts' RRDs over {last[-1] - last[0]:.1f} s")
    print(f"gmetad: busiest thread's CPU per {a.step} s step: " + ", ".join(f"{s:.1f}" for s in thread_max))
    iv = [b[0] - a_[0] for w in probe_writes.values() for a_, b in zip(w[1:], w[2:])]
    if iv and not rc:
        print(f"gmetad: interval between writes of a site's probe RRD ({len(probe_writes)} probes, "
              f"{len(iv)} intervals): median {pct(iv, 0.5):.1f} s, 90% {pct(iv, 0.9):.1f} s, max {max(iv):.1f} s")
    if ages:
        print(f"gmetad: {len(ages)} sampled hosts' RRDs, last update age at the end: median {pct(ages, 0.5):.0f} s, "
              f"max {max(ages):.0f} s")
    if rc:
        print(f"rrdcached: updates received per {a.step} s step: " + ", ".join(str(u) for u, _, _ in rc_samples))
        print(f"rrdcached: queue length per step: " + ", ".join(str(q) for _, q, _ in rc_samples))
        print(f"rrdcached: CPU {rc_cpu:.1f} s in all ({', '.join(f'{c:.1f}' for _, _, c in rc_samples)} per step); "
              f"stats at the end: " + ", ".join(f"{k} {v}" for k, v in rc_stats.items()))
    if rxq:
        print(f"burst: the socket's receive queue peaked at {max(rxq)} bytes ({max(rxq) / n:.0f} per server)")
    print(f"load average at the end: {loadavg()}")
    gwlog = [l for l in open(os.path.join(d, "gw.log")).read().splitlines() if "recv_buffer" in l or "rmem" in l]
    if gwlog:
        print("gateway's log on its buffer: " + gwlog[0][:300])
    if gmetad_status is not None:
        print(f"gmetad EXITED during the run ({gmetad_status}); its log's end:\n{gmetad_log}")
    elif gmetad_log.strip():
        print(f"gmetad's log's end:\n{gmetad_log}")
    if a.keep:
        print(f"kept {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
