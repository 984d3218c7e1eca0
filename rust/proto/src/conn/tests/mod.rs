// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! State-level regression tests: two connections joined by a hand-driven
//! queue, so a test can drop, hold, forge or replay single packets and look
//! at internal state. The harness is here; the tests are in files named after
//! the files they test.

extern crate std;

use std::boxed::Box;
use std::vec::Vec;

use super::*;
use crate::constants::{
    MAX_REORDER_THRESHOLD, MIN_TRANSMIT_BUF, REASM_WINDOW, SACK_BITS, SRQ_CLAIM_WINDOW,
};
use crate::event::WcStatus;
use crate::memory::{AtomicOp, Dest, MemError, Memory};
use crate::path::inflight::Inflight;
use crate::wire::{Flags, Header, NakCode, Packet, PacketRepr, PacketType};
use crate::wr::{Opcode, WorkRequest};
use pin_init::InPlaceInit;

mod ack;
mod connection;
mod qp;
mod rx;
mod tx;
mod undo;

/// Memory that accepts everything except rkey 0xBAD and local placements
/// when `refuse_local` is set; counts placed bytes.
#[derive(Default)]
struct Mem {
    placed: u64,
    refuse_local: bool,
    /// Receives left in the shared receive queue, and how many were taken.
    srq_left: u32,
    srq_taken: u32,
}

impl Memory for Mem {
    fn place(&mut self, _: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        match dest {
            Dest::Remote { rkey: 0xBAD, .. } => return Err(MemError::Access),
            Dest::Local { .. } if self.refuse_local => return Err(MemError::Access),
            _ => {}
        }
        self.placed += data.len() as u64;
        Ok(())
    }
    fn check_read(&mut self, _: QpId, _: u32, _: u64, _: u32) -> Result<(), MemError> {
        Ok(())
    }
    fn atomic(&mut self, _: QpId, _: u32, _: u64, _: AtomicOp) -> Result<u64, MemError> {
        Ok(7)
    }
    fn take_shared_recv(&mut self, _: QpId) -> Option<(u64, u32)> {
        self.srq_left = self.srq_left.checked_sub(1)?;
        self.srq_taken += 1;
        Some((1000 + u64::from(self.srq_taken), 4096))
    }
}

struct Net {
    c: [Box<Connection>; 2],
    mem: [Mem; 2],
    now: Instant,
}

fn t0() -> Instant {
    Instant::from_nanos(1_000_000)
}

impl Net {
    fn new(paths: u8) -> Net {
        let mut cfg = Config::new(0x11);
        cfg.paths = paths;
        cfg.mtu = 1024;
        cfg.peer_conn_id = 0x22;
        // In place, as the kernel driver does (KBox::init).
        let a = Box::init(Connection::init_aimd(cfg, t0(), 1)).unwrap_or_else(|e| match e {});
        cfg.local_conn_id = 0x22;
        cfg.peer_conn_id = 0x11;
        let b = Box::init(Connection::init_aimd(cfg, t0(), 2)).unwrap_or_else(|e| match e {});
        Net {
            c: [a, b],
            mem: [Mem::default(), Mem::default()],
            now: t0(),
        }
    }

    /// A pair of connections over `paths` paths with one QP bound on each side
    /// (QPN 1 to QPN 2); returns the sender's.
    fn with_qp(paths: u8) -> (Net, QpId) {
        let mut n = Net::new(paths);
        let qp = n.c[0].open_qp(1, 2).unwrap();
        n.c[1].open_qp(2, 1).unwrap();
        (n, qp)
    }

    /// Every packet `from` would send now (headers plus a zero payload).
    fn out(&mut self, from: usize) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut buf = [0u8; MIN_TRANSMIT_BUF];
        while let Some(t) = self.c[from].poll_transmit(self.now, &mut buf) {
            let mut p = buf[..t.len].to_vec();
            p.resize(t.len + t.payload.map_or(0, |p| p.len() as usize), 0);
            v.push(p);
        }
        v
    }

    fn deliver(&mut self, to: usize, pkts: &[Vec<u8>]) {
        for p in pkts {
            let _ = self.c[to].handle_datagram(self.now, false, p, &mut self.mem[to]);
        }
    }

    /// Delivers `pkts` to side 1, lets its delayed ACK fire and delivers the
    /// ACK to side 0.
    fn ack_back(&mut self, pkts: &[Vec<u8>]) {
        self.deliver(1, pkts);
        self.now = self.now.add_nanos(self.c[1].cfg.ack_delay_ns);
        self.c[1].handle_timeout(self.now);
        let acks = self.out(1);
        self.deliver(0, &acks);
    }

    /// Exchanges everything both ways until quiet, letting delayed ACKs
    /// (not retransmission timers) fire.
    fn settle(&mut self) {
        let mut idle = 0;
        for _ in 0..256 {
            let a = self.out(0);
            let b = self.out(1);
            if a.is_empty() && b.is_empty() {
                idle += 1;
                if idle > 2 {
                    return;
                }
                self.now = self.now.add_nanos(self.c[0].cfg.ack_delay_ns);
                for c in self.c.iter_mut() {
                    if c.poll_timeout().is_some_and(|t| t <= self.now) {
                        c.handle_timeout(self.now);
                    }
                }
                continue;
            }
            idle = 0;
            self.deliver(1, &a);
            self.deliver(0, &b);
        }
    }

    fn at(&mut self, us: u64) {
        self.now = self.now.max(t0().add_nanos(us * 1000));
        for c in self.c.iter_mut() {
            if c.poll_timeout().is_some_and(|t| t <= self.now) {
                c.handle_timeout(self.now);
            }
        }
    }

    /// Every event of side `i`, in order.
    fn events(&mut self, i: usize) -> Vec<Event> {
        core::iter::from_fn(|| self.c[i].poll_event()).collect()
    }

    fn completions(&mut self, i: usize) -> Vec<crate::event::Completion> {
        let mut v = Vec::new();
        while let Some(e) = self.c[i].poll_event() {
            if let Event::Completion(c) = e {
                v.push(c);
            }
        }
        v
    }
}

fn write(id: u64, len: u32, rkey: u32) -> WorkRequest {
    WorkRequest {
        wr_id: id,
        opcode: Opcode::Write,
        len,
        rkey,
        ..Default::default()
    }
}

fn send(id: u64, len: u32) -> WorkRequest {
    WorkRequest {
        wr_id: id,
        opcode: Opcode::Send,
        len,
        ..Default::default()
    }
}

fn hdr(p: &[u8]) -> Header {
    *Packet::new_checked(p).unwrap().header()
}

fn is_data(p: &[u8]) -> bool {
    Packet::new_checked(p).is_ok_and(|p| p.packet_type().is_data())
}

fn fresh(cfg: Config, seed: u64) -> Box<Connection> {
    Box::init(Connection::init_aimd(cfg, t0(), seed)).unwrap_or_else(|e| match e {})
}

fn seq_diff_u(a: u32, b: u32) -> i32 {
    crate::psn::seq_diff(a, b)
}

fn read(id: u64, len: u32) -> WorkRequest {
    WorkRequest {
        wr_id: id,
        opcode: Opcode::Read,
        len,
        rkey: 5,
        remote_addr: 0x1000,
        ..Default::default()
    }
}

/// A packet in the name of connection `from` to its peer (both ids right), as an
/// attacker who knows them would forge it.
fn forge(n: &Net, from: usize, repr: impl FnOnce(Header) -> PacketRepr) -> Vec<u8> {
    let h = Header {
        src_conn: n.c[from].cfg.local_conn_id,
        dst_conn: n.c[1 - from].cfg.local_conn_id,
        ..Default::default()
    };
    let mut buf = [0u8; MIN_TRANSMIT_BUF];
    let len = repr(h).emit(&mut buf).unwrap();
    buf[..len].to_vec()
}

/// An ACK from `from` with `count` blocks for path 0, each with `cum_psn` and
/// the SACK bits `bits` (relative to `cum_psn`) set.
fn forged_ack(n: &Net, from: usize, count: u8, cum_psn: u32, bits: &[u32]) -> Vec<u8> {
    let mut sack = [0u8; crate::constants::SACK_BYTES];
    for &b in bits {
        sack[b as usize / 8] |= 1 << (b % 8);
    }
    let block = crate::wire::AckBlock {
        path: 0,
        dup_count: 0,
        ce_count: 0,
        cum_psn,
        sack,
    };
    let ack = crate::wire::AckRepr {
        count,
        blocks: [block; crate::constants::MAX_ACK_BLOCKS],
        ..Default::default()
    };
    forge(n, from, |header| PacketRepr::Ack { header, ack })
}
