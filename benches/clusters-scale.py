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

Usage: python3 benches/clusters-scale.py --bin target/release/xrd2ganglia
       [--sites 50] [--per-site 40] [--interval 60] [--sustain 180]
       [--step 15]
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
    gw = subprocess.Popen([a.bin, "serve", "--config", conf], stderr=open(os.path.join(d, "gw.log"), "w"))
    gconf = os.path.join(d, "gmetad.conf")
    with open(gconf, "w") as f:
        f.write(f'data_source "fed" {a.step} 127.0.0.1:{xml}\nsetuid off\nxml_port {gx}\n'
                f'interactive_port {gi}\nserver_threads 2\ntrusted_hosts 127.0.0.1\nrrd_rootdir "{rrds}"\n')
        if a.rras:
            f.write(f'RRAs {" ".join(chr(34) + r + chr(34) for r in a.rras.split())}\n')
    time.sleep(1)
    gm = subprocess.Popen(["gmetad", "-c", gconf, "-d", "1"], stderr=open(os.path.join(d, "gmetad.log"), "w"),
                          stdout=subprocess.DEVNULL)
    fleet = Fleet(a.sites, a.per_site, udp)
    n = len(fleet.servers)
    print(f"{n} servers, {a.sites} sites, every {a.interval:.0f} s, gmetad step {a.step} s; dir {d}")

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
            stop.wait(max(0.0, 2.0 - (time.monotonic() - t0)))

    disk_stop = []

    def gmetad_watch(samples):
        last = cpu_seconds(gm.pid)
        t = time.monotonic()
        while not stop.wait(1):
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
    # Burst: all at once.
    b0 = time.monotonic()
    for i in range(n):
        fleet.send(i)
    burst_send_s = time.monotonic() - b0
    time.sleep(max(3 * a.step, 20))
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
    gmetad_status = gm.poll()
    gmetad_log = open(os.path.join(d, "gmetad.log")).read()[-2000:]
    gm.send_signal(signal.SIGTERM)
    gw.send_signal(signal.SIGTERM)
    gm.wait(10)
    gw.wait(10)

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
    if mtimes:
        # The last cycle: host RRDs written within one step of the newest.
        last = [t for t in mtimes if t >= mtimes[-1] - a.step / 2]
        print(f"gmetad: last cycle wrote {len(last)} hosts' RRDs over {last[-1] - last[0]:.1f} s")
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
