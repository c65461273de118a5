//! Any datagram through the XDR decoder (gmond's 136 requests, dry runs):
//! an error or a packet, never a panic or a huge allocation; a packet
//! encodes to bytes that decode to the same packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xrd2ganglia::ganglia::xdr;

fuzz_target!(|data: &[u8]| {
    if let Ok(packet) = xdr::decode(data) {
        let mut again = Vec::new();
        xdr::encode(&mut again, &packet);
        let back = xdr::decode(&again).expect("our encoding decodes");
        // As text: a NaN float is not equal to itself.
        assert_eq!(back.to_string(), packet.to_string());
    }
});
