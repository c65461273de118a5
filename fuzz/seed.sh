#!/usr/bin/env bash
# Seeds the fuzz corpora: the real records of tests/data/records, a real
# XCache's g-stream datagrams (tests/data/gstream) and a record in the JSON
# form (fuzz/seeds/summary, that of tests/gmond/json.rs) and a real xrootd
# 6.1.0's XML and JSON records (tests/data/records-5.9) for the summary target;
# the XDR packets in fuzz/seeds/xdr (real gmetric 3.7.2 and gateway packets)
# for the xdr target; a state file of each version (fuzz/seeds/state_file)
# for the state_file target; a message of the exchange (fuzz/seeds/peer)
# for the peer target.
# Into fuzz/corpus, or into the directory given (the smoke test's fresh one).
set -euo pipefail
dest=$(realpath -m "${1:-$(dirname "$0")/corpus}")
cd "$(dirname "$0")"
mkdir -p "$dest/summary" "$dest/xdr" "$dest/state_file" "$dest/peer"
cp ../tests/data/records/*.xml "$dest/summary/"
cp ../tests/data/gstream/*.bin "$dest/summary/"
cp seeds/summary/* "$dest/summary/"
cp ../tests/data/records-5.9/*.xml ../tests/data/records-5.9/*.json "$dest/summary/"
cp seeds/xdr/* "$dest/xdr/"
cp seeds/state_file/* "$dest/state_file/"
cp seeds/peer/* "$dest/peer/"
