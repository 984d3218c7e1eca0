// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Seed corpora for `fuzz/`: every packet type as emitted by the codec, and a
//! few connection scripts. `METAROCE_WRITE_SEEDS=1 cargo test --test fuzz_seeds`
//! rewrites them; otherwise the committed seeds are checked to parse.

use metaroce_proto::wire::{
    AckBlock, AckRepr, Control, ControlCode, DataExt, Flags, Header, Nak, NakCode, PacketRepr,
    Status, StreamHeader,
};
use std::path::PathBuf;

fn packets() -> Vec<(&'static str, Vec<u8>)> {
    let h = Header {
        ty: 0,
        flags: Flags(Flags::FIRST | Flags::LAST),
        path: 1,
        dst_conn: 0x22,
        src_conn: 0x11,
        psn: 42,
    };
    let s = StreamHeader {
        qpn: 2,
        msn: 0,
        ssn: 0,
        offset: 0,
    };
    let exts = [
        (
            "send",
            DataExt::Send {
                rsn: 0,
                total_len: 4,
                imm: None,
            },
        ),
        (
            "send_imm",
            DataExt::Send {
                rsn: 0,
                total_len: 4,
                imm: Some(7),
            },
        ),
        (
            "write",
            DataExt::Write {
                rkey: 1,
                va: 0x100,
                total_len: 4,
                imm: None,
            },
        ),
        (
            "write_imm",
            DataExt::Write {
                rkey: 1,
                va: 0x100,
                total_len: 4,
                imm: Some((0, 9)),
            },
        ),
        (
            "read_req",
            DataExt::ReadReq {
                rkey: 1,
                va: 0x100,
                len: 64,
            },
        ),
        (
            "read_resp",
            DataExt::ReadResp {
                total_len: 4,
                status: Status::Ok,
            },
        ),
        (
            "cmp_swap",
            DataExt::Atomic {
                rkey: 1,
                va: 8,
                compare_add: 1,
                swap: Some(2),
            },
        ),
        (
            "fetch_add",
            DataExt::Atomic {
                rkey: 1,
                va: 8,
                compare_add: 1,
                swap: None,
            },
        ),
        (
            "atomic_resp",
            DataExt::AtomicResp {
                orig: 5,
                status: Status::Ok,
            },
        ),
    ];
    let mut out = Vec::new();
    for (name, ext) in exts {
        let mut b = vec![0u8; 256];
        let n = PacketRepr::Data {
            header: Header {
                ty: ext.packet_type() as u8,
                ..h
            },
            stream: s,
            ext,
        }
        .emit(&mut b)
        .unwrap();
        b.truncate(n);
        if matches!(
            ext,
            DataExt::Send { .. } | DataExt::Write { .. } | DataExt::ReadResp { .. }
        ) {
            b.extend_from_slice(b"data");
        }
        out.push((name, b));
    }
    let mut ack = AckRepr {
        rate_hint: 1000,
        ack_delay: 3,
        count: 2,
        ..Default::default()
    };
    ack.blocks[0] = AckBlock {
        path: 0,
        dup_count: 0,
        ce_count: 1,
        cum_psn: 40,
        sack: [0; 32],
    };
    ack.blocks[1] = AckBlock {
        path: 1,
        dup_count: 0,
        ce_count: 0,
        cum_psn: 41,
        sack: [0b101; 32],
    };
    let others = [
        ("ack", PacketRepr::Ack { header: h, ack }),
        (
            "nak",
            PacketRepr::Nak {
                header: h,
                nak: Nak {
                    path: 1,
                    code: NakCode::Rnr,
                    rnr_timer: 2,
                    psn: 42,
                    qpn: 2,
                    msn: 0,
                    ssn: 0,
                },
            },
        ),
        (
            "close",
            PacketRepr::Control {
                header: h,
                control: Control {
                    code: ControlCode::Close,
                    path: 0,
                    value: 0,
                },
            },
        ),
        (
            "ack_far",
            PacketRepr::Ack {
                header: h,
                ack: far_ack(16),
            },
        ),
        (
            "path_floor",
            PacketRepr::Control {
                header: h,
                control: Control {
                    code: ControlCode::PathFloor,
                    path: 1,
                    value: 1 << 31,
                },
            },
        ),
        (
            "open_close",
            PacketRepr::Control {
                header: open(h),
                control: Control {
                    code: ControlCode::Close,
                    path: 0,
                    value: 0,
                },
            },
        ),
    ];
    for (name, r) in others {
        let mut b = vec![0u8; 1024];
        let n = r.emit(&mut b).unwrap();
        b.truncate(n);
        out.push((name, b));
    }
    out
}

/// An ACK with `count` blocks for paths 0..3 whose `cum_psn` lies about 2^31
/// beyond anything sent, with SACK bits: forged (spec MR-SACK-22).
fn far_ack(count: u8) -> AckRepr {
    let mut ack = AckRepr {
        count,
        ..Default::default()
    };
    for (i, b) in ack.blocks.iter_mut().enumerate() {
        *b = AckBlock {
            path: (i % 4) as u8,
            dup_count: 0,
            ce_count: 0,
            cum_psn: 0x7fff_ffff,
            sack: [0x81; 32],
        };
    }
    ack
}

/// `h` as a packet that does not know the receiver's id: `OPEN`, `dst_conn` 0.
fn open(h: Header) -> Header {
    Header {
        flags: Flags(Flags::OPEN),
        dst_conn: 0,
        ..h
    }
}

/// Op 6 of the `connection` target: `r` as a raw datagram to `side` (0 is
/// connection 0x11, 1 is 0x22), sent in the name of the other side.
fn raw(side: u8, r: PacketRepr) -> Vec<u8> {
    let mut b = vec![0u8; 1024];
    let n = r.emit(&mut b).unwrap();
    let mut v = vec![side << 7 | 6, u8::try_from(n).unwrap()];
    v.extend_from_slice(&b[..n]);
    v
}

/// Connection scripts in the `connection` target's op encoding.
fn scripts() -> Vec<(&'static str, Vec<u8>)> {
    let to_a = Header {
        dst_conn: 0x11,
        src_conn: 0x22,
        ..Default::default()
    };
    let to_b = Header {
        dst_conn: 0x22,
        src_conn: 0x11,
        ..Default::default()
    };
    // Half the PSN space apart: one is far ahead of B's path 0, the other behind.
    let floor = |value| {
        let control = Control {
            code: ControlCode::PathFloor,
            path: 0,
            value,
        };
        raw(
            1,
            PacketRepr::Control {
                header: to_b,
                control,
            },
        )
    };
    let close = Control {
        code: ControlCode::Close,
        path: 0,
        value: 0,
    };
    // Both sides transmit, eight deliveries, both sides' timers (delayed ACKs).
    let mut settle = vec![2, 0x82];
    settle.extend([3, 0, 0].repeat(8));
    settle.extend([7, 0x87]);
    // A writes 1000 bytes and both settle (each side has then seen its own id
    // from the other), `forged` arrives, A writes again and both settle.
    let around = |forged: Vec<u8>| {
        let mut v = vec![0x00, 0x42, 0x03, 0xe8];
        v.extend(settle.repeat(3));
        v.extend(forged);
        v.extend([0x00, 0x42, 0x01, 0x00]);
        v.extend(settle.repeat(3));
        v
    };
    vec![
        (
            "forged_ack",
            around(raw(
                0,
                PacketRepr::Ack {
                    header: to_a,
                    ack: far_ack(4),
                },
            )),
        ),
        (
            "forged_floor",
            around([floor(0x7fff_ffff), floor(0xffff_ffff)].concat()),
        ),
        (
            "open_close",
            around(raw(
                1,
                PacketRepr::Control {
                    header: open(to_b),
                    control: close,
                },
            )),
        ),
        // B posts a receive; A sends 1000 bytes; ping-pong deliveries and transmits.
        (
            "send",
            vec![
                0x81, 0x10, 0x00, 0x00, 0x00, 0x03, 0xe8, 2, 3, 0, 0, 0x82, 3, 0, 0, 2, 3, 0, 0,
                0x82, 3, 0, 0, 7, 7,
            ],
        ),
        // A writes, a packet is dropped, time passes to the RTO, retransmission is delivered.
        (
            "write_loss",
            vec![
                0x00, 0x42, 0x01, 0x00, 2, 4, 0, 3, 0, 0, 0x82, 3, 0, 0, 5, 0x30, 0x00, 2, 3, 0, 0,
                3, 0, 0, 0x82, 3, 0, 0, 7,
            ],
        ),
        // READ and FETCH_ADD, with a duplicated, bit-flipped delivery.
        (
            "read_atomic",
            vec![
                0x00, 0x44, 0x00, 0x40, 0x00, 0x46, 0x00, 0x08, 2, 3, 0, 3, 3, 1, 5, 3, 0, 0, 0x82,
                3, 0, 0, 3, 0, 0, 2, 3, 0, 0,
            ],
        ),
    ]
}

fn dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

#[test]
fn seeds_are_current() {
    let sets = [("packet_parse", packets()), ("connection", scripts())];
    let write = std::env::var_os("METAROCE_WRITE_SEEDS").is_some();
    for (target, seeds) in sets {
        let d = dir(target);
        if write {
            std::fs::create_dir_all(&d).unwrap();
        }
        for (name, bytes) in seeds {
            let path = d.join(format!("seed-{name}"));
            if write {
                std::fs::write(&path, &bytes).unwrap();
            } else if let Ok(committed) = std::fs::read(&path) {
                assert_eq!(
                    committed,
                    bytes,
                    "{} is stale: rerun with METAROCE_WRITE_SEEDS=1",
                    path.display()
                );
            }
            if target == "packet_parse" {
                assert!(PacketRepr::parse(&bytes).is_ok(), "{name}");
            }
        }
    }
}
