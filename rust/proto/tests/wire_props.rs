// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Codec properties: parse(emit(x)) == x for every header; arbitrary bytes never panic.

mod common;

use metaroce_proto::constants::{COMMON_HEADER_LEN, MAX_ACK_BLOCKS};
use metaroce_proto::wire::{
    headers_len, AckBlock, AckRepr, Control, ControlCode, DataExt, Flags, Header, Nak, NakCode,
    Packet, PacketRepr, Status, StreamHeader,
};
use metaroce_proto::{Config, Connection, Instant};
use pin_init::InPlaceInit;
use proptest::prelude::*;

fn header() -> impl Strategy<Value = Header> {
    (any::<u8>(), any::<u8>(), any::<u32>(), 1u32.., any::<u32>()).prop_map(
        |(flags, path, dst, src, psn)| Header {
            ty: 0,
            flags: Flags(flags & Flags::KNOWN),
            path,
            dst_conn: dst,
            src_conn: src,
            psn,
        },
    )
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Ok),
        Just(Status::AccessError),
        Just(Status::InvalidRequest),
        Just(Status::RemoteOpError)
    ]
}

fn data_ext() -> impl Strategy<Value = DataExt> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), any::<Option<u32>>()).prop_map(|(rsn, total_len, imm)| {
            DataExt::Send {
                rsn,
                total_len,
                imm,
            }
        }),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
            any::<Option<(u32, u32)>>()
        )
            .prop_map(|(rkey, va, total_len, imm)| DataExt::Write {
                rkey,
                va,
                total_len,
                imm
            }),
        (any::<u32>(), any::<u64>(), any::<u32>()).prop_map(|(rkey, va, len)| DataExt::ReadReq {
            rkey,
            va,
            len
        }),
        (any::<u32>(), status())
            .prop_map(|(total_len, status)| DataExt::ReadResp { total_len, status }),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<Option<u64>>()
        )
            .prop_map(|(rkey, va, compare_add, swap)| DataExt::Atomic {
                rkey,
                va,
                compare_add,
                swap
            }),
        (any::<u64>(), status()).prop_map(|(orig, status)| DataExt::AtomicResp { orig, status }),
    ]
}

fn repr() -> impl Strategy<Value = PacketRepr> {
    let stream = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(qpn, msn, ssn, offset)| StreamHeader {
            qpn,
            msn,
            ssn,
            offset,
        },
    );
    let block = (
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u32>(),
        proptest::array::uniform32(any::<u8>()),
    )
        .prop_map(|(path, dup_count, ce_count, cum_psn, sack)| AckBlock {
            path,
            dup_count,
            ce_count,
            cum_psn,
            sack,
        });
    let nak_code = prop_oneof![
        Just(NakCode::Rnr),
        Just(NakCode::AccessError),
        Just(NakCode::InvalidRequest),
        Just(NakCode::RemoteOpError)
    ];
    prop_oneof![
        (header(), stream, data_ext()).prop_map(|(h, stream, ext)| PacketRepr::Data {
            header: Header {
                ty: ext.packet_type() as u8,
                ..h
            },
            stream,
            ext
        }),
        (
            header(),
            any::<u32>(),
            any::<u16>(),
            proptest::collection::vec(block, 0..=MAX_ACK_BLOCKS)
        )
            .prop_map(|(h, rate_hint, ack_delay, blocks)| {
                let mut ack = AckRepr {
                    rate_hint,
                    ack_delay,
                    count: blocks.len() as u8,
                    ..Default::default()
                };
                ack.blocks[..blocks.len()].copy_from_slice(&blocks);
                PacketRepr::Ack {
                    header: Header { ty: 0x10, ..h },
                    ack,
                }
            }),
        (
            header(),
            any::<u8>(),
            nak_code,
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(h, path, code, rnr_timer, psn, qpn, msn, ssn)| PacketRepr::Nak {
                    header: Header { ty: 0x11, ..h },
                    nak: Nak {
                        path,
                        code,
                        rnr_timer,
                        psn,
                        qpn,
                        msn,
                        ssn
                    }
                }
            ),
        (
            header(),
            prop_oneof![
                Just(ControlCode::Open),
                Just(ControlCode::Close),
                Just(ControlCode::PathFloor)
            ],
            any::<u8>(),
            any::<u32>()
        )
            .prop_map(|(h, code, path, value)| {
                let path = if code == ControlCode::PathFloor {
                    path
                } else {
                    0
                };
                PacketRepr::Control {
                    header: Header { ty: 0x12, ..h },
                    control: Control { code, path, value },
                }
            }),
    ]
}

struct NoMem;

impl metaroce_proto::Memory for NoMem {
    fn place(
        &mut self,
        _: metaroce_proto::QpId,
        _: metaroce_proto::Dest,
        _: &[u8],
    ) -> Result<(), metaroce_proto::MemError> {
        Ok(())
    }
    fn check_read(
        &mut self,
        _: metaroce_proto::QpId,
        _: u32,
        _: u64,
        _: u32,
    ) -> Result<(), metaroce_proto::MemError> {
        Ok(())
    }
    fn atomic(
        &mut self,
        _: metaroce_proto::QpId,
        _: u32,
        _: u64,
        _: metaroce_proto::AtomicOp,
    ) -> Result<u64, metaroce_proto::MemError> {
        Ok(0)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    // spec: MR-GEN-2
    #[test]
    fn roundtrip(r in repr(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = [0u8; 1024];
        let n = r.emit(&mut buf).unwrap();
        prop_assert_eq!(PacketRepr::parse(&buf[..n]), Ok(r));
        // Emission into a short buffer fails cleanly.
        prop_assert!(r.emit(&mut buf[..n - 1]).is_err());
        // A truncated packet never parses.
        prop_assert!(PacketRepr::parse(&buf[..n - 1]).is_err());
        // Payload rides after the headers of data packets.
        let mut v = buf[..n].to_vec();
        v.extend_from_slice(&payload);
        let p = Packet::new_checked(&v).unwrap();
        if matches!(r, PacketRepr::Data { .. }) {
            prop_assert_eq!(p.payload(), &payload[..]);
        }
        // The first bytes tell how many the headers take: exactly the headers of a
        // data packet, at least them otherwise; that prefix parses alike.
        let need = headers_len(&v[..COMMON_HEADER_LEN]);
        if matches!(r, PacketRepr::Data { .. }) {
            prop_assert_eq!(need, n);
        } else {
            prop_assert!(need >= n);
        }
        let head = Packet::new_checked(&v[..need.min(v.len())]).unwrap();
        prop_assert_eq!(head.header(), p.header());
        prop_assert_eq!(PacketRepr::parse(&buf[..need.min(n)]), Ok(r));
    }

    // spec: MR-VAL-4
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), ver in any::<bool>()) {
        let mut bytes = bytes;
        if ver && !bytes.is_empty() {
            bytes[0] = metaroce_proto::constants::VERSION_DRAFT0;
        }
        let _ = PacketRepr::parse(&bytes);
        prop_assert!(headers_len(&bytes) >= COMMON_HEADER_LEN);
        if let Ok(p) = Packet::new_checked(&bytes) {
            let _ = (p.stream(), p.data_ext(), p.payload(), p.ack(), p.nak(), p.control());
            for i in 0..20 {
                let _ = p.ack_block(i);
            }
        }
    }
}

// spec: MR-VAL-4
#[test]
fn connection_survives_garbage() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..Default::default()
    });
    let strat = proptest::collection::vec(
        (
            repr(),
            proptest::collection::vec(any::<u8>(), 0..40),
            any::<u64>(),
        ),
        1..30,
    );
    runner
        .run(&strat, |pkts| {
            let mut cfg = Config::new(7);
            cfg.peer_conn_id = 9;
            let mut c = Box::init(Connection::init_aimd(cfg, Instant::ZERO, 1))
                .unwrap_or_else(|e| match e {});
            let qp = c.open_qp(5, 6).unwrap();
            let _ = c.post_recv(qp, 1, 100);
            let _ = c.post_send(
                qp,
                metaroce_proto::WorkRequest {
                    wr_id: 1,
                    len: 5000,
                    ..Default::default()
                },
            );
            let mut buf = [0u8; metaroce_proto::constants::MIN_TRANSMIT_BUF];
            let mut now = 0u64;
            for (r, payload, t) in pkts {
                let r = match r {
                    PacketRepr::Data {
                        header,
                        mut stream,
                        ext,
                    } => {
                        stream.qpn = if t % 2 == 0 { 5 } else { stream.qpn };
                        stream.ssn %= 64;
                        stream.msn %= 8;
                        PacketRepr::Data {
                            header: Header {
                                dst_conn: 7,
                                src_conn: 9,
                                path: header.path % 20,
                                psn: header.psn,
                                ..header
                            },
                            stream,
                            ext,
                        }
                    }
                    other => other,
                };
                let mut v = vec![0u8; 1024];
                let n = r.emit(&mut v).unwrap();
                v.truncate(n);
                v.extend_from_slice(&payload);
                now += t % 1_000_000;
                let _ = c.handle_datagram(Instant::from_nanos(now), t % 3 == 0, &v, &mut NoMem);
                c.handle_timeout(Instant::from_nanos(now));
                while c
                    .poll_transmit(Instant::from_nanos(now), &mut buf)
                    .is_some()
                {}
                while c.poll_event().is_some() {}
                let _ = c.poll_timeout();
            }
            Ok(())
        })
        .unwrap();
}
