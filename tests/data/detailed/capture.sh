#!/bin/bash
# Capture of xrootd 5.5.3's detailed stream (detailed.cfg) with known transfers.
set -u
R=/tmp/dcap/root; P=45311; H=45312; M=45313
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
start() { su -s /bin/sh nobody -c "xrootd -c $R/x.cfg -n det -l $R/xrootd.log -b" ; sleep 2; }
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
