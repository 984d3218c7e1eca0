// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A host running the MetaRoCE core: one [`Connection`] per peer, byte-vector
//! memory, and an application that keeps its send and receive queues full.
//!
//! The host plays the driver's part: it demultiplexes datagrams to connections
//! (by peer address), drops datagrams whose UDP checksum fails, gathers
//! payload bytes for every [`Transmit`], keeps the receiver's fair share of its
//! downlink and advertises it to every sender, and turns completions into
//! newly posted work.

use std::collections::BTreeMap;

use metaroce_proto::cc::FairShare;
use metaroce_proto::constants::{MIN_TRANSMIT_BUF, UDP_PORT, VERSION_DRAFT0};
use metaroce_proto::{
    Config, Connection, Event, Instant, Opcode, Payload, PostError, QpId, WcOpcode, WorkRequest,
};

use crate::clock::Time;
use crate::datagram::{Datagram, Ecn, HostId};
use crate::endpoint::{Endpoint, EndpointStats};
use crate::memory::{Backing, HostMemory};
use crate::workload::{imm_of, FlowLayout, FlowLog, FlowSpec, Logged, Op};
use pin_init::InPlaceInit;

/// Most senders the receiver's fair share tracks.
const FAIR_SLOTS: usize = 256;

/// How a MetaRoCE host is set up.
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Template for every connection (ids are filled in per peer).
    pub conn: Config,
    /// Tell each connection its peer's id up front (false: learn it from `OPEN`).
    pub known_peer_ids: bool,
    /// Inbound capacity shared out as rate hints, bytes/s (0: no hints).
    pub fair_share_bps: u64,
    /// A sender counts as active for the fair share this long after its last packet.
    pub fair_window_ns: u64,
    /// Share of the capacity handed out (per mille) while two or more senders
    /// are active; the rest is headroom that drains a standing queue.
    pub fair_headroom_permille: u64,
    /// Drop datagrams whose UDP checksum fails (false: hand them to the core).
    pub verify_checksum: bool,
}

impl HostConfig {
    /// Defaults around `conn`.
    pub fn new(conn: Config) -> Self {
        HostConfig {
            conn,
            known_peer_ids: true,
            fair_share_bps: 0,
            fair_window_ns: 50_000,
            fair_headroom_permille: FairShare::<FAIR_SLOTS>::DEFAULT_HEADROOM_PERMILLE,
            verify_checksum: true,
        }
    }
}

/// The connection id host `a` uses for its connection to host `b`.
pub fn conn_id(a: HostId, b: HostId) -> u32 {
    ((a as u32 + 1) << 12) | (b as u32 + 1)
}

struct Peer {
    host: HostId,
    conn: Box<Connection>,
    placed: u64,
}

struct FlowState {
    spec: FlowSpec,
    layout: FlowLayout,
    is_src: bool,
    log: FlowLog,
    next_post: usize,
    /// Messages the source may post ([`FlowSpec::after`]).
    released: usize,
    /// Indices of messages that consume receives, and how many are posted.
    recvs: Vec<usize>,
    next_recv: usize,
}

/// A host whose transport is the MetaRoCE core.
pub struct MetaHost {
    id: HostId,
    cfg: HostConfig,
    seed: u64,
    peers: Vec<Peer>,
    mem: HostMemory,
    flows: BTreeMap<usize, FlowState>,
    /// Flow of each (peer index, QP).
    by_qp: BTreeMap<(usize, QpId), usize>,
    buf: Vec<u8>,
    rr: usize,
    fair: FairShare<FAIR_SLOTS>,
    hint: u64,
    completions: u64,
    stats: EndpointStats,
}

fn ns(t: Time) -> Instant {
    Instant::from_nanos(t)
}

impl MetaHost {
    /// A host with no connections yet.
    pub fn new(id: HostId, cfg: HostConfig, seed: u64) -> Self {
        MetaHost {
            id,
            cfg,
            seed,
            peers: Vec::new(),
            mem: HostMemory::default(),
            flows: BTreeMap::new(),
            by_qp: BTreeMap::new(),
            buf: vec![0; MIN_TRANSMIT_BUF.max(256)],
            rr: 0,
            fair: FairShare::new(cfg.fair_share_bps, cfg.fair_window_ns)
                .with_headroom(cfg.fair_headroom_permille),
            hint: cfg.fair_share_bps,
            completions: 0,
            stats: EndpointStats::default(),
        }
    }

    /// The connection to `peer`, if any.
    pub fn connection(&self, peer: HostId) -> Option<&Connection> {
        self.peers.iter().find(|p| p.host == peer).map(|p| &*p.conn)
    }

    fn peer_index(&mut self, peer: HostId, now: Time) -> usize {
        if let Some(i) = self.peers.iter().position(|p| p.host == peer) {
            return i;
        }
        let mut cfg = self.cfg.conn;
        cfg.local_conn_id = conn_id(self.id, peer);
        cfg.peer_conn_id = if self.cfg.known_peer_ids {
            conn_id(peer, self.id)
        } else {
            0
        };
        cfg.rate_hint_bps = self.hint;
        let seed = self.seed ^ (self.id as u64) << 40 ^ (peer as u64) << 20;
        self.peers.push(Peer {
            host: peer,
            conn: Box::init(Connection::init_aimd(cfg, ns(now), seed))
                .unwrap_or_else(|e| match e {}),
            placed: 0,
        });
        self.peers.len() - 1
    }

    /// Posts as many pending sends and receives of every flow as the queues take.
    fn post_work(&mut self, now: Time) {
        for (&flow, f) in self.flows.iter_mut() {
            let Some(peer) = self.peers.get_mut(f.log.conn) else {
                continue;
            };
            let conn = &mut peer.conn;
            let qp = f.log.qp;
            if f.is_src {
                while f.next_post < f.released {
                    let i = f.next_post;
                    let m = f.spec.msgs[i];
                    let va = f.layout.va + f.layout.offsets[i];
                    let mut wr = WorkRequest {
                        wr_id: i as u64,
                        len: m.len,
                        ..Default::default()
                    };
                    match m.op {
                        Op::Write => {
                            (wr.opcode, wr.remote_addr, wr.rkey) =
                                (Opcode::Write, va, f.layout.write_rkey)
                        }
                        Op::WriteImm => {
                            (wr.opcode, wr.remote_addr, wr.rkey) =
                                (Opcode::WriteImm, va, f.layout.write_rkey);
                            wr.imm = imm_of(flow, i);
                        }
                        Op::Send => wr.opcode = Opcode::Send,
                        Op::Read => {
                            (wr.opcode, wr.remote_addr, wr.rkey) =
                                (Opcode::Read, va, f.layout.read_rkey)
                        }
                        Op::FetchAdd => {
                            (wr.opcode, wr.remote_addr, wr.rkey) =
                                (Opcode::FetchAdd, f.layout.va, f.layout.atomic_rkey);
                            wr.compare_add = i as u64 + 1;
                        }
                    }
                    match conn.post_send(qp, wr) {
                        Ok(()) => {
                            let b = f.layout.requester_buffer(flow, &f.spec, i);
                            self.mem.send.insert((f.log.conn, qp, i as u64), b);
                            f.log.started.get_or_insert(now);
                            f.next_post += 1;
                        }
                        Err(PostError::QueueFull) => break,
                        Err(_) => {
                            // The QP failed: what was posted gets flushed; stop posting.
                            f.next_post = f.spec.msgs.len();
                        }
                    }
                }
            } else {
                while f.next_recv < f.recvs.len() {
                    let i = f.recvs[f.next_recv];
                    let len = f.spec.msgs[i].len;
                    match conn.post_recv(qp, i as u64, len) {
                        Ok(()) => {
                            self.mem.recv.insert(
                                (f.log.conn, qp, i as u64),
                                Backing::new(len as usize, f.spec.verify),
                            );
                            f.next_recv += 1;
                        }
                        Err(PostError::QueueFull) => break,
                        Err(_) => f.next_recv = f.recvs.len(),
                    }
                }
            }
        }
    }

    /// Logs every pending event of connection `pi`.
    fn drain_events(&mut self, pi: usize, now: Time) {
        let Some(peer) = self.peers.get_mut(pi) else {
            return;
        };
        while let Some(e) = peer.conn.poll_event() {
            match e {
                Event::Completion(wc) => {
                    self.completions += 1;
                    if let Some(f) = self
                        .by_qp
                        .get(&(pi, wc.qp))
                        .and_then(|fl| self.flows.get_mut(fl))
                    {
                        let rec = Logged { wc, at: now };
                        if matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                            f.log.recv.push(rec);
                        } else {
                            f.log.send.push(rec);
                        }
                    }
                }
                Event::PathRetired { .. } => self.stats.paths_retired += 1,
                Event::QpError { .. }
                | Event::ResponderError { .. }
                | Event::FirstRequest { .. }
                | Event::Closed { .. } => {}
            }
        }
    }

    fn update_hint(&mut self, now: Time) {
        if self.cfg.fair_share_bps == 0 {
            return;
        }
        let share = self.fair.share_bps(ns(now));
        if share != self.hint {
            self.hint = share;
            for p in &mut self.peers {
                p.conn.set_rate_hint(share);
            }
        }
    }
}

impl Endpoint for MetaHost {
    fn add_flow(&mut self, flow: usize, spec: &FlowSpec, now: Time) {
        let is_src = spec.src == self.id;
        if !is_src && spec.dst != self.id {
            return;
        }
        let peer = if is_src { spec.dst } else { spec.src };
        let pi = self.peer_index(peer, now);
        let (local, remote) = if is_src {
            (0x100, 0x200)
        } else {
            (0x200, 0x100)
        };
        let qpn = |base: u32| base + flow as u32;
        let Ok(qp) = self.peers[pi].conn.open_qp(qpn(local), qpn(remote)) else {
            panic!(
                "host {}: cannot open a QP for flow {flow} (too many QPs on one connection?)",
                self.id
            );
        };
        let layout = FlowLayout::new(flow, spec);
        if !is_src {
            layout.register_responder(flow, spec, &mut self.mem);
        }
        let recvs = (0..spec.msgs.len())
            .filter(|&i| spec.msgs[i].op.consumes_recv())
            .collect();
        let log = FlowLog {
            conn: pi,
            qp,
            ..Default::default()
        };
        self.by_qp.insert((pi, qp), flow);
        self.flows.insert(
            flow,
            FlowState {
                spec: spec.clone(),
                layout,
                is_src,
                log,
                next_post: 0,
                released: spec.initially_released(),
                recvs,
                next_recv: 0,
            },
        );
        self.post_work(now);
    }

    fn release(&mut self, flow: usize, msgs: usize, now: Time) {
        if let Some(f) = self.flows.get_mut(&flow) {
            f.released = f.released.max(msgs.min(f.spec.msgs.len()));
        }
        self.post_work(now);
    }

    fn on_datagram(&mut self, now: Time, d: Datagram) {
        if self.cfg.verify_checksum && !d.checksum_ok() {
            self.stats.checksum_drops += 1;
            return;
        }
        let Some(pi) = self.peers.iter().position(|p| p.host == d.src) else {
            self.stats.rx_dropped += 1;
            return;
        };
        let is_data = d.data.first() == Some(&VERSION_DRAFT0)
            && d.data.get(1).is_some_and(|&t| t != 0 && t < 0x10);
        if is_data && self.cfg.fair_share_bps > 0 {
            self.fair.on_receive(pi, ns(now));
            self.update_hint(now);
        }
        let before = self.mem.stats.bytes_placed;
        let mut mem = self.mem.for_conn(pi);
        let _ = self.peers[pi]
            .conn
            .handle_datagram(ns(now), d.ecn == Ecn::Ce, &d.data, &mut mem);
        self.peers[pi].placed += self.mem.stats.bytes_placed - before;
        self.drain_events(pi, now);
        self.post_work(now);
    }

    fn on_timeout(&mut self, now: Time) {
        self.update_hint(now);
        for pi in 0..self.peers.len() {
            if self.peers[pi]
                .conn
                .poll_timeout()
                .is_some_and(|t| t.as_nanos() <= now)
            {
                self.peers[pi].conn.handle_timeout(ns(now));
                self.drain_events(pi, now);
            }
        }
        self.post_work(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Datagram> {
        let n = self.peers.len();
        for k in 0..n {
            let pi = (self.rr + k) % n;
            let peer = &mut self.peers[pi];
            let Some(t) = peer.conn.poll_transmit(ns(now), &mut self.buf) else {
                continue;
            };
            self.rr = pi + 1;
            let host = peer.host;
            let mut data = Vec::with_capacity(t.len + t.payload.map_or(0, |p| p.len() as usize));
            data.extend_from_slice(&self.buf[..t.len]);
            let ok = match t.payload {
                None => true,
                Some(Payload::Wr {
                    qp,
                    wr_id,
                    offset,
                    len,
                }) => self.mem.gather_wr((pi, qp, wr_id), offset, len, &mut data),
                Some(Payload::Mr { rkey, va, len, .. }) => {
                    self.mem.gather_mr(rkey, va, len, &mut data)
                }
            };
            assert!(
                ok,
                "host {}: the core asked for payload {:?} that the driver cannot gather",
                self.id, t.payload
            );
            // Drain events the transmit may have produced (e.g. QP errors).
            self.drain_events(pi, now);
            return Some(Datagram::new(
                self.id,
                host,
                t.src_port,
                UDP_PORT,
                Ecn::Ect,
                data,
            ));
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.peers
            .iter()
            .filter_map(|p| p.conn.poll_timeout())
            .map(|t| t.as_nanos())
            .min()
    }

    fn flow_log(&self, flow: usize) -> Option<&FlowLog> {
        self.flows.get(&flow).map(|f| &f.log)
    }

    fn path_ports(&self, peer: HostId) -> Vec<u16> {
        self.connection(peer).map_or_else(Vec::new, |c| {
            let n = usize::from(c.config().paths);
            (0..n).filter_map(|i| c.path_port(i)).collect()
        })
    }

    fn memory(&self) -> &HostMemory {
        &self.mem
    }

    fn stats(&self) -> EndpointStats {
        let mut s = self.stats;
        for p in &self.peers {
            let c = p.conn.stats();
            s.data_packets += c.tx_data;
            s.retransmits += c.tx_retransmits;
            s.payload_bytes += c.tx_bytes;
            s.acks += c.tx_acks;
            s.naks += c.tx_naks;
            s.timeouts += c.timeouts;
            s.spurious_timeouts += c.spurious_timeouts;
            s.rx_dropped += c.rx_dropped;
        }
        s
    }

    fn completions(&self) -> u64 {
        self.completions
    }

    fn placed_from(&self, peer: HostId) -> u64 {
        self.peers
            .iter()
            .find(|p| p.host == peer)
            .map_or(0, |p| p.placed)
    }
}
