// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Every parser on arbitrary bytes: must never panic, and whatever parses
//! must re-emit to bytes that parse to the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_proto::wire::{
    headers_len, AckHeader, Control, DataExt, Header, Nak, Packet, PacketRepr, PacketType,
    StreamHeader, UdHeader,
};

fuzz_target!(|data: &[u8]| {
    let _ = Header::parse(data);
    let _ = StreamHeader::parse(data);
    let _ = AckHeader::parse(data);
    let _ = Nak::parse(data);
    let _ = Control::parse(data);
    for t in 0..=0x12u8 {
        if let Ok(ty) = PacketType::from_u8(t) {
            let _ = DataExt::parse(ty, data);
        }
    }
    let need = headers_len(data);
    if let Ok(p) = Packet::new_checked(data) {
        // The prefix the first bytes ask for holds every header.
        let head = Packet::new_checked(&data[..need.min(data.len())])
            .expect("headers_len covers the headers");
        assert_eq!(head.header(), p.header());
        let _ = (
            p.stream(),
            p.data_ext(),
            p.payload(),
            p.ack(),
            p.nak(),
            p.control(),
        );
        for i in 0..20 {
            let _ = p.ack_block(i);
        }
    }
    if let Ok(r) = PacketRepr::parse(data) {
        let mut buf = [0u8; 1024];
        let n = r.emit(&mut buf).expect("parsed packet re-emits");
        assert_eq!(PacketRepr::parse(&buf[..n]), Ok(r));
    }
    if let Ok((h, payload)) = UdHeader::parse(data) {
        assert!(UdHeader::is_ud(data));
        let mut buf = [0u8; 64];
        let n = h.emit(&mut buf).expect("parsed datagram header re-emits");
        assert_eq!(n + payload.len(), data.len());
        assert_eq!(UdHeader::parse(&buf[..n]).map(|(h, _)| h), Ok(h));
    }
});
