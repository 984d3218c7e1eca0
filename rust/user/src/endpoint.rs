// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! One connection with one QP to one peer, driven over a [`Transport`].

use pin_init::InPlaceInit;
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant as StdInstant};

use metaroce_proto::{
    constants::MIN_TRANSMIT_BUF, Completion, Config, Connection, Event, Instant, Payload,
    PostError, QpId, Stats, WcOpcode, WorkRequest,
};

use crate::memory::LocalMemory;
use crate::transport::Transport;

/// The largest datagram the endpoint receives.
const MAX_DATAGRAM: usize = 65_536;

/// The most datagrams taken from the socket before the timers run.
const RX_BATCH: usize = 256;

/// The smallest retransmission timeout of a userspace endpoint.
const USER_RTO_MIN_NS: u64 = 2_000_000;

/// The retransmission timeout before the first RTT sample, and the local ACK
/// timeout: a QP fails after `retry_limit` of them without progress (spec
/// [MR-RTX-13]), about 70 ms with verbs' 7 retries.
const USER_RTO_INITIAL_NS: u64 = 10_000_000;

/// What the two sides agree on out of band, and local transport settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// This side's QPN (the peer's `remote_qpn`).
    pub local_qpn: u32,
    /// The peer's QPN.
    pub remote_qpn: u32,
    /// The PSN this side starts sending with (verbs `sq_psn`, the peer's `rq_psn`).
    pub sq_psn: u32,
    /// The PSN the peer starts sending with (verbs `rq_psn`).
    pub rq_psn: u32,
    /// This side's connection id (non-zero); the peer learns it from OPEN.
    pub conn_id: u32,
    /// Paths to spray over.
    pub paths: u8,
    /// Largest payload per packet, bytes (fit the path MTU: IP, UDP and
    /// MetaRoCE headers come on top).
    pub mtu: u32,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            local_qpn: 0x11,
            remote_qpn: 0x11,
            sq_psn: 0,
            rq_psn: 0,
            conn_id: 1,
            paths: 4,
            mtu: 1024,
        }
    }
}

/// Why [`Endpoint::wait`] returned without a completion.
#[derive(Debug)]
pub enum WaitError {
    /// The socket failed.
    Io(io::Error),
    /// No completion within the time allowed.
    Timeout,
    /// The peer closed the connection.
    Closed,
    /// The core refused the work request.
    Post(PostError),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Io(e) => write!(f, "socket: {e}"),
            WaitError::Timeout => write!(f, "timed out waiting for a completion"),
            WaitError::Closed => write!(f, "the peer closed the connection"),
            WaitError::Post(e) => write!(f, "post refused: {e:?}"),
        }
    }
}

impl std::error::Error for WaitError {}

impl From<io::Error> for WaitError {
    fn from(e: io::Error) -> Self {
        WaitError::Io(e)
    }
}

/// A MetaRoCE endpoint: one connection, one QP, the memory it places into.
pub struct Endpoint<T> {
    transport: T,
    peer: SocketAddr,
    conn: Box<Connection>,
    qp: QpId,
    memory: LocalMemory,
    epoch: StdInstant,
    completions: VecDeque<Completion>,
    closed: bool,
    rx_buf: Vec<u8>,
    tx_buf: Vec<u8>,
    packet: Vec<u8>,
}

impl<T: Transport> Endpoint<T> {
    /// Opens the connection to `peer` (its IP and MetaRoCE UDP port) and binds
    /// the QP. Nothing is sent until work is posted or a packet comes in.
    pub fn new(transport: T, peer: SocketAddr, cfg: EndpointConfig) -> Result<Self, PostError> {
        let mut c = Config::new(cfg.conn_id.max(1));
        c.paths = cfg.paths;
        c.mtu = cfg.mtu;
        // A process is scheduled, not interrupted: a peer's ACK may wait for a
        // time slice, so the kernel's 100 us floor would time out spuriously.
        c.rto_min_ns = USER_RTO_MIN_NS;
        c.rto_initial_ns = USER_RTO_INITIAL_NS;
        let epoch = StdInstant::now();
        let seed = u64::from(cfg.conn_id) << 32 ^ u64::from(std::process::id());
        let mut conn = Box::init(Connection::init_aimd(c.sanitized(), Instant::ZERO, seed))
            .unwrap_or_else(|e| match e {});
        let qp = conn.open_qp_psn(cfg.local_qpn, cfg.remote_qpn, cfg.sq_psn, cfg.rq_psn)?;
        Ok(Endpoint {
            transport,
            peer,
            conn,
            qp,
            memory: LocalMemory::default(),
            epoch,
            completions: VecDeque::new(),
            closed: false,
            rx_buf: vec![0; MAX_DATAGRAM],
            tx_buf: vec![0; MIN_TRANSMIT_BUF.max(256)],
            packet: Vec::with_capacity(MAX_DATAGRAM),
        })
    }

    /// The memory remote operations and receives land in.
    pub fn memory(&self) -> &LocalMemory {
        &self.memory
    }

    /// The memory, to register regions or change them locally.
    pub fn memory_mut(&mut self) -> &mut LocalMemory {
        &mut self.memory
    }

    /// The transport (e.g. to read a [`LossySocket`](crate::LossySocket)'s counters).
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// Ends the endpoint and returns its transport (to open the next one on it).
    pub fn into_transport(self) -> T {
        self.transport
    }

    /// The connection's transport counters.
    pub fn stats(&self) -> &Stats {
        self.conn.stats()
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Posts a send work request with its local buffer: the payload of a SEND
    /// or WRITE, the destination of a READ (as long as the READ) or an atomic
    /// (8 bytes). The buffer comes back with the completion from [`wait`](Self::wait).
    pub fn post_send(&mut self, mut wr: WorkRequest, buf: Vec<u8>) -> Result<(), PostError> {
        wr.ack_req = true;
        self.memory.set_send_buf(wr.wr_id, buf);
        let r = self.conn.post_send(self.qp, wr);
        if r.is_err() {
            self.memory.take_send_buf(wr.wr_id);
        }
        r
    }

    /// Posts a receive buffer of `len` bytes for SENDs and WRITE_WITH_IMM.
    pub fn post_recv(&mut self, wr_id: u64, len: u32) -> Result<(), PostError> {
        self.memory.set_recv_buf(wr_id, len as usize);
        let r = self.conn.post_recv(self.qp, wr_id, len);
        if r.is_err() {
            self.memory.take_recv_buf(wr_id);
        }
        r
    }

    /// Closes the connection (the peer sees CLOSE) and sends what is left.
    pub fn close(&mut self) -> io::Result<()> {
        self.conn.close(0);
        self.flush()
    }

    /// Sends every packet the core has ready now.
    fn flush(&mut self) -> io::Result<()> {
        loop {
            let now = self.now();
            let Some(t) = self.conn.poll_transmit(now, &mut self.tx_buf) else {
                return Ok(());
            };
            self.packet.clear();
            self.packet.extend_from_slice(&self.tx_buf[..t.len]);
            let gathered = match t.payload {
                None => true,
                Some(Payload::Wr {
                    wr_id, offset, len, ..
                }) => self.memory.gather_wr(wr_id, offset, len, &mut self.packet),
                Some(Payload::Mr { rkey, va, len, .. }) => {
                    self.memory.gather_mr(rkey, va, len, &mut self.packet)
                }
            };
            if !gathered {
                if let Some(p) = t.payload {
                    self.conn.payload_unavailable(&p);
                }
                continue;
            }
            self.transport
                .send_from(t.src_port, &self.packet, self.peer)?;
        }
    }

    fn collect_events(&mut self) {
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Completion(c) => self.completions.push_back(c),
                Event::Closed { .. } => self.closed = true,
                Event::QpError { .. }
                | Event::ResponderError { .. }
                | Event::FirstRequest { .. }
                | Event::PathRetired { .. } => {}
            }
        }
    }

    /// Runs the connection for at most `max_wait`: sends what is ready, waits for
    /// one datagram or the core's next timer, and handles what came.
    pub fn progress(&mut self, max_wait: Duration) -> io::Result<()> {
        self.flush()?;
        let now = self.now();
        let wait = match self.conn.poll_timeout() {
            Some(t) => Duration::from_nanos(t.nanos_since(now)).min(max_wait),
            None => max_wait,
        };
        // Every datagram already queued goes in before the timers: a process
        // scheduled late finds the ACKs that answer its packets waiting, and
        // must not declare those packets lost first (which then only
        // retransmits what the peer has, until the QP's retry count runs out).
        let mut wait = wait;
        for _ in 0..RX_BATCH {
            let Some(r) = self.transport.recv_from(&mut self.rx_buf, wait)? else {
                break;
            };
            wait = Duration::ZERO;
            // One peer per endpoint: datagrams from any other host are not ours.
            if r.from.ip() == self.peer.ip() {
                let now = self.now();
                let _ =
                    self.conn
                        .handle_datagram(now, r.ce, &self.rx_buf[..r.len], &mut self.memory);
            }
        }
        let now = self.now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        self.collect_events();
        self.flush()
    }

    /// The next completion, if one is ready, with its buffer (a send work
    /// request's local buffer, or a receive's data).
    pub fn poll_completion(&mut self) -> Option<(Completion, Vec<u8>)> {
        self.collect_events();
        let c = self.completions.pop_front()?;
        let buf = match c.opcode {
            WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => self.memory.take_recv_buf(c.wr_id),
            _ => self.memory.take_send_buf(c.wr_id),
        };
        Some((c, buf.unwrap_or_default()))
    }

    /// Runs the connection until a completion is ready or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> Result<(Completion, Vec<u8>), WaitError> {
        let deadline = StdInstant::now() + timeout;
        loop {
            if let Some(c) = self.poll_completion() {
                return Ok(c);
            }
            if self.closed {
                return Err(WaitError::Closed);
            }
            let left = deadline.saturating_duration_since(StdInstant::now());
            if left.is_zero() {
                return Err(WaitError::Timeout);
            }
            self.progress(left.min(Duration::from_millis(10)))?;
        }
    }

    /// Whether the peer closed the connection.
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}
