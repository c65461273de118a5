#!/usr/bin/env bash
# Seeds the fuzz corpora: the real records of tests/data/records, a real
# XCache's g-stream datagrams (tests/data/gstream) and a record in the JSON
# form (fuzz/seeds/summary, that of tests/json.rs) for the summary target;
# the XDR packets in fuzz/seeds/xdr (real gmetric 3.7.2 and gateway packets)
# for the xdr target.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/summary corpus/xdr
cp ../tests/data/records/*.xml corpus/summary/
cp ../tests/data/gstream/*.bin corpus/summary/
cp seeds/summary/* corpus/summary/
cp seeds/xdr/* corpus/xdr/
