// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Test harness: two connections joined by a seeded lossy, reordering,
//! duplicating in-memory link, with a virtual clock and a bounded drive loop.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "shared harness; each test binary uses a subset"
)]

use metaroce_proto::constants::MIN_TRANSMIT_BUF;
use metaroce_proto::wire::Packet;
use metaroce_proto::{
    AtomicOp, Completion, Config, Connection, Dest, Event, Instant, MemError, Memory, Payload,
    QpId, RxPayload, WcStatus, WorkRequest,
};
use pin_init::InPlaceInit;
use std::collections::HashMap;

/// Deterministic PRNG for the link.
pub struct TestRng(u64);

impl TestRng {
    pub fn new(seed: u64) -> Self {
        TestRng(seed ^ 0x2545_F491_4F6C_DD1D | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// True with probability `p_permille / 1000`.
    pub fn chance(&mut self, p_permille: u32) -> bool {
        (self.next() % 1000) < u64::from(p_permille)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Application memory of one node.
#[derive(Default)]
pub struct Mem {
    /// rkey -> (base va, bytes).
    pub mrs: HashMap<u32, (u64, Vec<u8>)>,
    /// Receive wr_id -> buffer.
    pub recv: HashMap<u64, Vec<u8>>,
    /// Send wr_id -> local buffer (source for SEND/WRITE, sink for READ/atomic).
    pub local: HashMap<u64, Vec<u8>>,
    /// A shared receive queue: `(wr_id, len)` taken in order by any QP that needs one.
    pub shared: std::collections::VecDeque<(u64, u32)>,
    pub placed_bytes: u64,
    pub atomics_executed: u64,
    /// The tail of the datagram being received split (see `LinkCfg::split`).
    pub tail: Vec<u8>,
    /// Payloads placed from a head and a tail.
    pub split_placements: u64,
}

impl Mem {
    fn mr_range(&mut self, rkey: u32, va: u64, len: usize) -> Result<&mut [u8], MemError> {
        let (base, buf) = self.mrs.get_mut(&rkey).ok_or(MemError::Access)?;
        let off = va.checked_sub(*base).ok_or(MemError::Access)? as usize;
        let end = off.checked_add(len).ok_or(MemError::Access)?;
        buf.get_mut(off..end).ok_or(MemError::Access)
    }

    /// Payload bytes for a transmit.
    pub fn gather(&mut self, p: &Payload) -> Vec<u8> {
        match *p {
            Payload::Wr {
                wr_id, offset, len, ..
            } => {
                let b = &self.local[&wr_id];
                b[offset as usize..(offset + len) as usize].to_vec()
            }
            Payload::Mr { rkey, va, len, .. } => {
                self.mr_range(rkey, va, len as usize).unwrap().to_vec()
            }
        }
    }
}

impl Memory for Mem {
    fn place(&mut self, _qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        let dst = match dest {
            Dest::Remote { rkey, va } => self.mr_range(rkey, va, data.len())?,
            Dest::Recv { wr_id, offset } => {
                let b = self.recv.get_mut(&wr_id).ok_or(MemError::Invalid)?;
                b.get_mut(offset as usize..offset as usize + data.len())
                    .ok_or(MemError::Invalid)?
            }
            Dest::Local { wr_id, offset } => {
                let b = self.local.get_mut(&wr_id).ok_or(MemError::Invalid)?;
                b.get_mut(offset as usize..offset as usize + data.len())
                    .ok_or(MemError::Invalid)?
            }
        };
        dst.copy_from_slice(data);
        self.placed_bytes += data.len() as u64;
        Ok(())
    }

    /// Places head and tail as one payload: validated as a whole before any byte lands.
    fn place_split(&mut self, qp: QpId, dest: Dest, data: RxPayload<'_>) -> Result<(), MemError> {
        assert_eq!(
            data.tail as usize,
            self.tail.len(),
            "the tail the core names is the driver's"
        );
        if data.tail == 0 {
            return self.place(qp, dest, data.head);
        }
        let mut all = data.head.to_vec();
        all.extend_from_slice(&self.tail);
        self.place(qp, dest, &all)?;
        self.split_placements += 1;
        Ok(())
    }

    fn check_read(&mut self, _qp: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        self.mr_range(rkey, va, len as usize).map(|_| ())
    }

    fn atomic(&mut self, _qp: QpId, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        if va & 7 != 0 {
            return Err(MemError::Invalid);
        }
        let b = self.mr_range(rkey, va, 8)?;
        let old = u64::from_ne_bytes(b[..8].try_into().unwrap());
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            AtomicOp::FetchAdd { add } => old.wrapping_add(add),
        };
        b.copy_from_slice(&new.to_ne_bytes());
        self.atomics_executed += 1;
        Ok(old)
    }

    fn take_shared_recv(&mut self, _qp: QpId) -> Option<(u64, u32)> {
        self.shared.pop_front()
    }
}

pub struct Node {
    pub conn: Box<Connection>,
    pub mem: Mem,
    pub completions: Vec<Completion>,
    pub events: Vec<Event>,
}

/// Link impairments, in permille, and delays in ns.
#[derive(Clone, Copy, Debug)]
pub struct LinkCfg {
    pub loss: u32,
    pub dup: u32,
    pub ce: u32,
    pub latency: u64,
    pub jitter: u64,
    /// Datagrams handed over split at a random point, as a driver does with a socket
    /// buffer's linear part and pages (`Connection::handle_datagram_split`).
    pub split: u32,
}

impl Default for LinkCfg {
    fn default() -> Self {
        LinkCfg {
            loss: 0,
            dup: 0,
            ce: 0,
            latency: 5_000,
            jitter: 0,
            split: 0,
        }
    }
}

struct InFlight {
    at: u64,
    seq: u64,
    to: usize,
    ce: bool,
    data: Vec<u8>,
}

pub struct Pair {
    pub nodes: [Node; 2],
    pub now: Instant,
    pub link: LinkCfg,
    pub rng: TestRng,
    queue: Vec<InFlight>,
    seq: u64,
    pub sent_packets: u64,
    /// Source ports whose packets (from node 0) vanish: a blackholed route.
    pub dead_ports: Vec<u16>,
    /// Drop everything from node 1 (responder unreachable).
    pub mute_b: bool,
    /// The clock does not advance beyond this (see `run_until`).
    pub clock_cap: Option<u64>,
}

impl Pair {
    pub fn new(cfg: Config, link: LinkCfg, seed: u64) -> Self {
        Self::with_mtus(cfg, [cfg.mtu; 2], link, seed)
    }

    /// A pair whose nodes segment with different payload MTUs (spec [MR-WIRE-6]).
    pub fn with_mtus(mut cfg: Config, mtus: [u32; 2], link: LinkCfg, seed: u64) -> Self {
        let now = Instant::from_nanos(1_000_000);
        cfg.local_conn_id = 0x1111;
        cfg.peer_conn_id = 0;
        cfg.mtu = mtus[0];
        let a = Box::init(Connection::init_aimd(cfg, now, seed)).unwrap_or_else(|e| match e {});
        cfg.mtu = mtus[1];
        cfg.local_conn_id = 0x2222;
        cfg.peer_conn_id = 0x1111;
        let b = Box::init(Connection::init_aimd(cfg, now, seed.wrapping_add(1)))
            .unwrap_or_else(|e| match e {});
        let node = |conn: Box<Connection>| Node {
            conn,
            mem: Mem::default(),
            completions: Vec::new(),
            events: Vec::new(),
        };
        Pair {
            nodes: [node(a), node(b)],
            now,
            link,
            rng: TestRng::new(seed),
            queue: Vec::new(),
            seq: 0,
            sent_packets: 0,
            dead_ports: Vec::new(),
            mute_b: false,
            clock_cap: None,
        }
    }

    /// Opens QP `qpn` on both sides (node 0's qpn+100 talks to node 1's qpn+200).
    pub fn open_qp(&mut self, n: u32) -> QpId {
        let a = self.nodes[0].conn.open_qp(100 + n, 200 + n).unwrap();
        let b = self.nodes[1].conn.open_qp(200 + n, 100 + n).unwrap();
        assert_eq!(a, b);
        a
    }

    fn flush_tx(&mut self) {
        let mut buf = vec![0u8; MIN_TRANSMIT_BUF];
        for i in 0..2 {
            while let Some(t) = self.nodes[i].conn.poll_transmit(self.now, &mut buf) {
                let mut pkt = buf[..t.len].to_vec();
                if let Some(p) = t.payload {
                    pkt.extend(self.nodes[i].mem.gather(&p));
                }
                self.sent_packets += 1;
                if self.rng.chance(self.link.loss)
                    || (i == 0 && self.dead_ports.contains(&t.src_port))
                    || (i == 1 && self.mute_b)
                {
                    continue;
                }
                let copies = if self.rng.chance(self.link.dup) { 2 } else { 1 };
                for _ in 0..copies {
                    let at = self.now.as_nanos()
                        + self.link.latency
                        + self.rng.below(self.link.jitter + 1);
                    let ce = self.rng.chance(self.link.ce);
                    self.seq += 1;
                    self.queue.push(InFlight {
                        at,
                        seq: self.seq,
                        to: 1 - i,
                        ce,
                        data: pkt.clone(),
                    });
                }
            }
        }
    }

    fn collect_events(&mut self) {
        for n in self.nodes.iter_mut() {
            while let Some(e) = n.conn.poll_event() {
                match e {
                    Event::Completion(c) => n.completions.push(c),
                    other => n.events.push(other),
                }
            }
        }
    }

    /// Runs one step: transmit, deliver due packets, fire timers, advance the clock.
    /// Returns false when nothing is pending anywhere.
    pub fn step(&mut self) -> bool {
        self.flush_tx();
        self.collect_events();
        let now = self.now.as_nanos();
        let mut due: Vec<InFlight> = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            if self.queue[i].at <= now {
                due.push(self.queue.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|p| (p.at, p.seq));
        let delivered = !due.is_empty();
        for p in due {
            let n = &mut self.nodes[p.to];
            // Drivers keep the headers in the linear part: split inside the payload.
            let payload = Packet::new_checked(&p.data).map_or(0, |k| k.payload().len());
            if payload > 0 && self.rng.chance(self.link.split) {
                let at = p.data.len() - self.rng.below(payload as u64 + 1) as usize;
                n.mem.tail = p.data[at..].to_vec();
                let tail = n.mem.tail.len() as u32;
                let _ =
                    n.conn
                        .handle_datagram_split(self.now, p.ce, &p.data[..at], tail, &mut n.mem);
                n.mem.tail.clear();
            } else {
                let _ = n.conn.handle_datagram(self.now, p.ce, &p.data, &mut n.mem);
            }
        }
        for n in self.nodes.iter_mut() {
            if n.conn.poll_timeout().is_some_and(|t| t <= self.now) {
                n.conn.handle_timeout(self.now);
            }
        }
        self.flush_tx();
        self.collect_events();
        if delivered {
            return true;
        }
        // Advance the clock to the next thing that happens.
        let mut next = self.queue.iter().map(|p| p.at).min();
        for n in self.nodes.iter() {
            if let Some(t) = n.conn.poll_timeout() {
                let t = t.as_nanos().max(now + 1);
                next = Some(next.map_or(t, |x| x.min(t)));
            }
        }
        match next {
            Some(t) => {
                let t = self.clock_cap.map_or(t, |c| t.min(c));
                self.now = Instant::from_nanos(t.max(now));
                true
            }
            None => false,
        }
    }

    /// Runs until the clock reaches `t` ns after the start (1 ms), without
    /// skipping past it.
    pub fn run_until(&mut self, us: u64) {
        let t = 1_000_000 + us * 1_000;
        self.clock_cap = Some(t);
        for _ in 0..1_000_000 {
            if self.now.as_nanos() >= t {
                break;
            }
            if !self.step() {
                self.now = Instant::from_nanos(t);
            }
        }
        self.clock_cap = None;
    }

    /// Drives until `done` holds; panics after `max_steps` (livelock).
    pub fn drive_until(&mut self, max_steps: usize, mut done: impl FnMut(&Pair) -> bool) {
        for _ in 0..max_steps {
            if done(self) {
                return;
            }
            if !self.step() && done(self) {
                return;
            }
        }
        if !done(self) {
            for (i, n) in self.nodes.iter().enumerate() {
                eprintln!(
                    "node {i}: timeout {:?} stats {:?} inflight {} completions {}",
                    n.conn.poll_timeout(),
                    n.conn.stats(),
                    n.conn.bytes_in_flight(),
                    n.completions.len()
                );
                eprintln!("  debug: {}", n.conn.debug_state());
            }
            panic!(
                "no completion after {max_steps} steps (livelock?) at t={:?}",
                self.now
            );
        }
    }
}

/// A deterministic byte pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = TestRng::new(seed);
    (0..len).map(|_| r.next() as u8).collect()
}

pub fn wr(wr_id: u64, opcode: metaroce_proto::Opcode, len: u32) -> WorkRequest {
    WorkRequest {
        wr_id,
        opcode,
        len,
        ..Default::default()
    }
}

pub fn ok(c: &Completion) -> bool {
    c.status == WcStatus::Success
}
