#!/bin/bash
# Capture of xrootd 6.x's detailed stream (detailed.cfg) with the traffic of
# capture.sh (the 5.5.3 capture): the same clients (Debian 12's xrdcp,
# xrdfs 5.5.3 and curl), the same files, the same order, one restart.
# XRD6: the build directory of xrootd v6.1.0 (cmake, `make xrootd XrdHttp-6
# XrdSec-6 XrdSecsss-6 XrdSecunix-6 XrdSecProt-6`; docs/detailed.md says how).
# OUT: the recording to write (dump --record's format).
set -u
XRD6=${XRD6:-/work/x6build/build}
OUT=${OUT:-/tmp/dcap6/xrootd-6.1.0.jsonl}
R=/tmp/dcap6/root; P=45411; H=45412; M=45413
rm -rf $R; mkdir -p $R/export/data/store $R/admin $R/run $R/sss $R/cli
sed -e "s#@ROOT@#$R#g" -e "s/47101/$P/; s/47102/$H/; s/127.0.0.1:3333/127.0.0.1:$M/g" /work/shared/xrootd-configs/detailed.cfg > $R/x.cfg
head -c 10485760 /dev/urandom > $R/export/data/f10m
head -c 3000000 /dev/urandom > $R/export/data/f3m
head -c 1000000 /dev/urandom > $R/export/data/store/f1m
head -c 10485760 /dev/urandom > $R/cli/up10m
head -c 2000000 /dev/urandom > $R/cli/put2m
xrdsssadmin -k alicekey -u alice -g atlas add $R/sss/alice.keytab >/dev/null
sleep 1.2; xrdsssadmin -k bobkey -u bob -g cms add $R/sss/bob.keytab >/dev/null
{ cat $R/sss/alice.keytab; echo; cat $R/sss/bob.keytab; echo; } > $R/sss/server.keytab
chmod 600 $R/sss/*.keytab
chown -R nobody $R/export $R/admin $R/run $R/sss/server.keytab; chown nobody $R
# The collector: every datagram on 127.0.0.1:$M, one JSON line each.
python3 -u - "$M" "$OUT" <<'PY' &
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
with open(sys.argv[2], "w") as out:
    while True:
        d, a = s.recvfrom(65535)
        e = {"time": round(time.time(), 3), "from": "%s:%d" % a}
        try:  # summary records as text, the binary stream as hex
            if not d.startswith(b"<"):
                raise UnicodeDecodeError("utf-8", d, 0, 1, "binary")
            e["text"] = d.decode()
        except UnicodeDecodeError:
            e["hex"] = d.hex()
        out.write(json.dumps(e) + "\n"); out.flush()
PY
COLLECTOR=$!
# xrootd's first packet (`=`) to a port not bound yet is refused, and the
# refusal then fails its next send too: start it once the collector listens.
until ss -lun | grep -q "127.0.0.1:$M "; do sleep 0.1; done
LIB=$XRD6/lib
[ -d $LIB ] || LIB=$XRD6/src
start() { su -s /bin/sh nobody -c "LD_LIBRARY_PATH=$LIB $XRD6/bin/xrootd -c $R/x.cfg -n det -l $R/xrootd.log -b" ; sleep 2; }
stop() { kill $(cat $R/run/det/xrootd.pid 2>/dev/null || cat $R/run/xrootd.pid) ; sleep 2; }
start
A="env XrdSecPROTOCOL=sss XrdSecSSSKT=$R/sss/alice.keytab"
B="env XrdSecPROTOCOL=sss XrdSecSSSKT=$R/sss/bob.keytab"
U="env XrdSecPROTOCOL=unix"
$A xrdcp -s -f root://127.0.0.1:$P//data/f3m /dev/null && echo "alice read f3m 3000000"
$A xrdcp -s -f $R/cli/up10m root://127.0.0.1:$P//data/up_alice && echo "alice wrote 10485760"
$B xrdcp -s -f root://127.0.0.1:$P//data/f10m /dev/null && echo "bob read f10m 10485760"
$U xrdcp -s -f root://127.0.0.1:$P//data/store/f1m /dev/null && echo "unix read store/f1m 1000000"
$A xrdcp -s -f root://127.0.0.1:$P//data/nonexistent /dev/null; echo "alice failed open rc=$?"
$B xrdfs root://127.0.0.1:$P stat /data/f3m >/dev/null && echo "bob stat"
curl -s -o /dev/null -w "http get %{size_download}\n" http://127.0.0.1:$H/data/f3m
curl -s -o /dev/null -T $R/cli/put2m -w "http put %{size_upload} %{http_code}\n" http://127.0.0.1:$H/data/put_http
sleep 5
stop
echo restart
start
$A xrdcp -s -f root://127.0.0.1:$P//data/f3m /dev/null && echo "after restart: alice read f3m 3000000"
sleep 5
stop
kill $COLLECTOR
ls -l $R/export/data
