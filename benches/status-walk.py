#!/usr/bin/env python3
"""What one `xrd2ganglia status` costs a gateway with N sources.

Starts `serve` (BIN) on a loopback port with a control socket in a scratch
directory, sends the real record ds_loaded.xml once from each of N
loopback addresses (each its own source), waits until `status` lists
them all, then times 15 `status --json` requests from the command's start
to its exit: an upper bound of how long each receive task pauses to walk
its sources. Stops the gateway by its pid.

Usage: python3 benches/status-walk.py target/release/xrd2ganglia 7000
"""
import json, os, socket, subprocess, sys, tempfile, time, statistics
BIN = sys.argv[1]; N = int(sys.argv[2])
rec = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/data/records/ds_loaded.xml")).read().strip()
d = tempfile.mkdtemp(prefix="x2g-walk-")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
conf = os.path.join(d, "c.toml")
open(conf, "w").write(f'listen = ["127.0.0.1:{port}"]\ncontrol_socket = "{d}/ctl"\nstate_file = ""\nstats_interval = 0\nself_metrics_interval = 0\nmax_sources = 20000\nrecv_buffer = 4194304\n[[channel]]\nhost = "127.0.0.1"\nport = 9\n')
gw = subprocess.Popen([BIN, "serve", "--config", conf], stderr=open(os.path.join(d, "log"), "w"))
time.sleep(1.0)
for i in range(N):
    ip = f"127.{1 + i // 62500}.{(i // 250) % 250 + 1}.{i % 250 + 1}"
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.bind((ip, 0))
    c.sendto(rec.replace('src="vm:', f'src="srv{i}.example:').encode(), ("127.0.0.1", port)); c.close()
    if i % 500 == 499: time.sleep(0.05)
def status():
    t = time.monotonic()
    out = subprocess.run([BIN, "status", "--socket", f"{d}/ctl", "--json"], capture_output=True, text=True)
    return time.monotonic() - t, out
for _ in range(50):
    dt, out = status()
    n = len(json.loads(out.stdout)["sources"])
    if n >= N: break
    time.sleep(0.2)
times = []
for _ in range(15):
    dt, out = status(); times.append(dt * 1000)
# the client alone: asking a socket nothing answers on
t0 = time.monotonic(); subprocess.run([BIN, "status", "--socket", f"{d}/nothing"], capture_output=True); spawn = (time.monotonic() - t0) * 1000
print(f"sources={n} status round trip ms: min {min(times):.1f} median {statistics.median(times):.1f} max {max(times):.1f}; client alone (no gateway) {spawn:.1f} ms; json bytes {len(out.stdout)}")
gw.terminate(); gw.wait()
subprocess.run(["rm", "-rf", d])
