// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Seed corpora for `fuzz/`: every packet type as emitted by the codec, and a
//! few connection scripts. `METAROCE_WRITE_SEEDS=1 cargo test --test fuzz_seeds`
//! rewrites them; otherwise the committed seeds are checked to parse.

use metaroce_proto::wire::{
    AckBlock, AckRepr, Control, ControlCode, DataExt, Flags, Header, Nak, NakCode, PacketRepr, Status, StreamHeader,
};
use std::path::PathBuf;

fn packets() -> Vec<(&'static str, Vec<u8>)> {
    let h = Header { ty: 0, flags: Flags(Flags::FIRST | Flags::LAST), path: 1, dst_conn: 0x22, src_conn: 0x11, psn: 42 };
    let s = StreamHeader { qpn: 2, msn: 0, ssn: 0, offset: 0 };
    let exts = [
        ("send", DataExt::Send { rsn: 0, total_len: 4, imm: None }),
        ("send_imm", DataExt::Send { rsn: 0, total_len: 4, imm: Some(7) }),
        ("write", DataExt::Write { rkey: 1, va: 0x100, total_len: 4, imm: None }),
        ("write_imm", DataExt::Write { rkey: 1, va: 0x100, total_len: 4, imm: Some((0, 9)) }),
        ("read_req", DataExt::ReadReq { rkey: 1, va: 0x100, len: 64 }),
        ("read_resp", DataExt::ReadResp { total_len: 4, status: Status::Ok }),
        ("cmp_swap", DataExt::Atomic { rkey: 1, va: 8, compare_add: 1, swap: Some(2) }),
        ("fetch_add", DataExt::Atomic { rkey: 1, va: 8, compare_add: 1, swap: None }),
        ("atomic_resp", DataExt::AtomicResp { orig: 5, status: Status::Ok }),
    ];
    let mut out = Vec::new();
    for (name, ext) in exts {
        let mut b = vec![0u8; 256];
        let n = PacketRepr::Data { header: Header { ty: ext.packet_type() as u8, ..h }, stream: s, ext }.emit(&mut b).unwrap();
        b.truncate(n);
        if matches!(ext, DataExt::Send { .. } | DataExt::Write { .. } | DataExt::ReadResp { .. }) {
            b.extend_from_slice(b"data");
        }
        out.push((name, b));
    }
    let mut ack = AckRepr { rate_hint: 1000, ack_delay: 3, count: 2, ..Default::default() };
    ack.blocks[0] = AckBlock { path: 0, dup_count: 0, ce_count: 1, cum_psn: 40, sack: [0; 32] };
    ack.blocks[1] = AckBlock { path: 1, dup_count: 0, ce_count: 0, cum_psn: 41, sack: [0b101; 32] };
    let others = [
        ("ack", PacketRepr::Ack { header: h, ack }),
        ("nak", PacketRepr::Nak { header: h, nak: Nak { path: 1, code: NakCode::Rnr, rnr_timer: 2, psn: 42, qpn: 2, msn: 0, ssn: 0 } }),
        ("close", PacketRepr::Control { header: h, control: Control { code: ControlCode::Close, path: 0, value: 0 } }),
    ];
    for (name, r) in others {
        let mut b = vec![0u8; 1024];
        let n = r.emit(&mut b).unwrap();
        b.truncate(n);
        out.push((name, b));
    }
    out
}

/// Connection scripts in the `connection` target's op encoding.
fn scripts() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        // B posts a receive; A sends 1000 bytes; ping-pong deliveries and transmits.
        ("send", vec![0x81, 0x10, 0x00, 0x00, 0x00, 0x03, 0xe8, 2, 3, 0, 0, 0x82, 3, 0, 0, 2, 3, 0, 0, 0x82, 3, 0, 0, 7, 7]),
        // A writes, a packet is dropped, time passes to the RTO, retransmission is delivered.
        ("write_loss", vec![0x00, 0x42, 0x01, 0x00, 2, 4, 0, 3, 0, 0, 0x82, 3, 0, 0, 5, 0x30, 0x00, 2, 3, 0, 0, 3, 0, 0, 0x82, 3, 0, 0, 7]),
        // READ and FETCH_ADD, with a duplicated, bit-flipped delivery.
        ("read_atomic", vec![0x00, 0x44, 0x00, 0x40, 0x00, 0x46, 0x00, 0x08, 2, 3, 0, 3, 3, 1, 5, 3, 0, 0, 0x82, 3, 0, 0, 3, 0, 0, 2, 3, 0, 0]),
    ]
}

fn dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
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
                assert_eq!(committed, bytes, "{} is stale: rerun with METAROCE_WRITE_SEEDS=1", path.display());
            }
            if target == "packet_parse" {
                assert!(PacketRepr::parse(&bytes).is_ok(), "{name}");
            }
        }
    }
}
