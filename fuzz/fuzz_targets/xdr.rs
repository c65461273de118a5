//! Any datagram through the XDR decoder (gmond's 136 requests, dry runs):
//! an error or a packet, never a panic or a huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xrd2ganglia::ganglia::xdr;

fuzz_target!(|data: &[u8]| {
    if let Ok(packet) = xdr::decode(data) {
        let _ = packet.to_string();
    }
});
