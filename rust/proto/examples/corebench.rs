// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Microbenchmark of the protocol core, one core, no I/O:
//! `cargo run --release --example corebench [seconds]`.
//!
//! Two connections are joined back to back (lossless, no pacing). Time is
//! measured per phase: send (poll_transmit building data headers), receive
//! (handle_datagram: parse, SACK update, placement call, plus ACK emission) and
//! ACK processing (handle_datagram of ACKs at the sender). Payload bytes are
//! not copied by the core; the harness appends zeros outside the timed region.

use metaroce_proto::constants::MIN_TRANSMIT_BUF;
use metaroce_proto::{
    AtomicOp, Config, Connection, Dest, Event, Instant, MemError, Memory, Opcode, QpId, WorkRequest,
};
use pin_init::InPlaceInit;
use std::time::{Duration, Instant as Clock};

struct NullMem;

impl Memory for NullMem {
    fn place(&mut self, _: QpId, _: Dest, data: &[u8]) -> Result<(), MemError> {
        std::hint::black_box(data);
        Ok(())
    }
    fn check_read(&mut self, _: QpId, _: u32, _: u64, _: u32) -> Result<(), MemError> {
        Ok(())
    }
    fn atomic(&mut self, _: QpId, _: u32, _: u64, _: AtomicOp) -> Result<u64, MemError> {
        Ok(0)
    }
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mtu = 4096u32;
    let mut cfg = Config::new(0x11);
    cfg.mtu = mtu;
    cfg.pacing = false;
    cfg.paths = 8;
    let now0 = Instant::from_nanos(1_000_000);
    let mut a = Box::init(Connection::init_aimd(cfg, now0, 1)).unwrap_or_else(|e| match e {});
    cfg.local_conn_id = 0x22;
    cfg.peer_conn_id = 0x11;
    let mut b = Box::init(Connection::init_aimd(cfg, now0, 2)).unwrap_or_else(|e| match e {});
    let qa = a.open_qp(1, 2).unwrap();
    b.open_qp(2, 1).unwrap();

    let msg = 1u32 << 20;
    let mut next_id = 0u64;
    let mut post = |a: &mut Connection, n: usize| {
        for _ in 0..n {
            next_id += 1;
            let wr = WorkRequest {
                wr_id: next_id,
                opcode: Opcode::Write,
                len: msg,
                rkey: 1,
                ..Default::default()
            };
            if a.post_send(qa, wr).is_err() {
                break;
            }
        }
    };
    post(&mut a, 32);

    let zeros = vec![0u8; mtu as usize];
    let mut buf = vec![0u8; MIN_TRANSMIT_BUF];
    let mut data: Vec<Vec<u8>> = Vec::new();
    let mut acks: Vec<Vec<u8>> = Vec::new();
    let (mut t_send, mut t_recv, mut t_ack) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut n_data, mut n_ack, mut n_done) = (0u64, 0u64, 0u64);
    let mut now = now0;
    let start = Clock::now();
    let mut mem = NullMem;
    while start.elapsed() < Duration::from_secs(secs) {
        now = now.add_nanos(10_000);
        a.handle_timeout(now);
        b.handle_timeout(now);
        // Send path.
        data.clear();
        let t = Clock::now();
        let mut lens = [(0usize, 0u32); 512];
        let mut k = 0;
        while k < lens.len() {
            let Some(tx) = a.poll_transmit(now, &mut buf) else {
                break;
            };
            lens[k] = (tx.len, tx.payload.map_or(0, |p| p.len()));
            k += 1;
            data.push(buf[..tx.len].to_vec());
        }
        t_send += t.elapsed();
        for (pkt, (_, plen)) in data.iter_mut().zip(lens.iter()) {
            pkt.extend_from_slice(&zeros[..*plen as usize]);
        }
        n_data += data.len() as u64;
        // Receive path (+ ACK emission).
        acks.clear();
        let t = Clock::now();
        for pkt in &data {
            let _ = b.handle_datagram(now, false, pkt, &mut mem);
            while let Some(tx) = b.poll_transmit(now, &mut buf) {
                acks.push(buf[..tx.len].to_vec());
            }
        }
        t_recv += t.elapsed();
        n_ack += acks.len() as u64;
        // ACK processing.
        let t = Clock::now();
        for pkt in &acks {
            let _ = a.handle_datagram(now, false, pkt, &mut mem);
        }
        t_ack += t.elapsed();
        while let Some(e) = a.poll_event() {
            if let Event::Completion(_) = e {
                n_done += 1;
            }
        }
        while b.poll_event().is_some() {}
        post(&mut a, 32);
    }
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    println!("corebench: mtu {mtu}, 8 paths, {secs} s wall, {n_data} data packets, {n_ack} ACKs, {n_done} 1 MiB WRITEs");
    println!(
        "  send    (poll_transmit, data)      : {:>12.0} packets/s",
        rate(n_data, t_send)
    );
    println!(
        "  receive (handle_datagram + ACK gen): {:>12.0} packets/s",
        rate(n_data, t_recv)
    );
    println!(
        "  ACK processing                     : {:>12.0} ACKs/s ({:.0} acked packets/s)",
        rate(n_ack, t_ack),
        rate(n_data, t_ack)
    );
    let total = t_send + t_recv + t_ack;
    println!(
        "  whole core, both ends              : {:>12.0} packets/s ({:.1} Gbit/s of 4 KiB payload)",
        rate(n_data, total),
        rate(n_data, total) * f64::from(mtu) * 8.0 / 1e9
    );
}
