// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Work to run: flows of messages between hosts, their memory layout, the
//! completion log each end keeps, and the end-of-run correctness checks.
//!
//! A flow is one QP pair from `src` (requester) to `dst` (responder). Message
//! `i` of a flow has a fixed payload, [`pattern`]`(flow, i)`, and a fixed place
//! in the responder's memory, so after the run every byte can be compared.

use std::collections::HashSet;

use metaroce_proto::{Completion, QpId, WcOpcode, WcStatus};

use crate::clock::Time;
use crate::datagram::HostId;
use crate::memory::{Backing, HostMemory, Region};

/// Operation of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// RDMA WRITE into the responder's write region.
    Write,
    /// RDMA WRITE with immediate (also consumes a receive).
    WriteImm,
    /// SEND into a posted receive buffer.
    Send,
    /// RDMA READ from the responder's read region into the local buffer.
    Read,
    /// Atomic fetch-and-add of `index + 1` on the responder's counter.
    FetchAdd,
}

impl Op {
    /// Whether the message consumes a receive at the responder.
    pub fn consumes_recv(self) -> bool {
        matches!(self, Op::Send | Op::WriteImm)
    }
}

/// One message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgSpec {
    /// Operation.
    pub op: Op,
    /// Length in bytes (atomics: 8).
    pub len: u32,
}

/// A flow: messages on one QP pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Requester host.
    pub src: HostId,
    /// Responder host.
    pub dst: HostId,
    /// Messages in post order.
    pub msgs: Vec<MsgSpec>,
    /// Keep real bytes and compare them (false: sinks, for big runs).
    pub verify: bool,
    /// A flow this one waits for: its message `k` is posted only once `k` messages
    /// of that flow have completed at their destination (a collective's step, which
    /// needs the previous step's data). Every message there must consume a receive
    /// (WRITE with immediate or SEND), as a receiver learns of nothing else.
    pub after: Option<usize>,
}

impl FlowSpec {
    /// `count` WRITEs of `len` bytes.
    pub fn writes(src: HostId, dst: HostId, count: usize, len: u32, verify: bool) -> Self {
        FlowSpec {
            src,
            dst,
            msgs: vec![MsgSpec { op: Op::Write, len }; count],
            verify,
            after: None,
        }
    }

    /// The messages the source may post before flow `after` delivered any: all of
    /// them, or one if the flow waits.
    pub fn initially_released(&self) -> usize {
        if self.after.is_some() {
            self.msgs.len().min(1)
        } else {
            self.msgs.len()
        }
    }

    /// Payload bytes the requester moves (both directions).
    pub fn total_bytes(&self) -> u64 {
        self.msgs.iter().map(|m| u64::from(m.len)).sum()
    }
}

/// Where a flow's bytes live.
#[derive(Clone, Debug)]
pub struct FlowLayout {
    /// Offset of each message in the flow's regions.
    pub offsets: Vec<u64>,
    /// Sum of message lengths.
    pub total: u64,
    /// Responder region written by WRITEs.
    pub write_rkey: u32,
    /// Responder region read by READs (pre-filled with the patterns).
    pub read_rkey: u32,
    /// Responder's 8-byte atomic counter.
    pub atomic_rkey: u32,
    /// Base virtual address of the write and read regions.
    pub va: u64,
}

impl FlowLayout {
    /// The layout of flow number `flow`.
    pub fn new(flow: usize, spec: &FlowSpec) -> Self {
        let mut offsets = Vec::with_capacity(spec.msgs.len());
        let mut total = 0u64;
        for m in &spec.msgs {
            offsets.push(total);
            total += u64::from(m.len);
        }
        let f = flow as u32;
        FlowLayout {
            offsets,
            total,
            write_rkey: 0x1000_0000 | f << 4 | 1,
            read_rkey: 0x1000_0000 | f << 4 | 2,
            atomic_rkey: 0x1000_0000 | f << 4 | 3,
            va: 0x7f00_0000_0000 + (flow as u64) * (1 << 36),
        }
    }

    /// Registers the responder's regions in `mem`.
    pub fn register_responder(&self, flow: usize, spec: &FlowSpec, mem: &mut HostMemory) {
        let len = self.total as usize;
        let has = |op: Op| spec.msgs.iter().any(|m| m.op == op);
        let mut read = Backing::new(if has(Op::Read) { len } else { 0 }, spec.verify);
        if let Backing::Bytes(v) = &mut read {
            for (i, m) in spec.msgs.iter().enumerate() {
                if m.op == Op::Read {
                    let off = self.offsets[i] as usize;
                    fill_pattern(flow, i, &mut v[off..off + m.len as usize]);
                }
            }
        }
        let region = |data, w, r, a| Region {
            base: self.va,
            data,
            remote_write: w,
            remote_read: r,
            remote_atomic: a,
        };
        mem.register(
            self.write_rkey,
            region(Backing::new(len, spec.verify), true, false, false),
        );
        mem.register(self.read_rkey, region(read, false, true, false));
        mem.register(
            self.atomic_rkey,
            region(Backing::new(8, true), false, false, true),
        );
    }

    /// The requester's buffer for message `i`: its payload, or room for a READ/atomic result.
    pub fn requester_buffer(&self, flow: usize, spec: &FlowSpec, i: usize) -> Backing {
        let m = spec.msgs[i];
        let mut b = Backing::new(m.len as usize, spec.verify || m.op == Op::FetchAdd);
        if let (Backing::Bytes(v), Op::Write | Op::WriteImm | Op::Send) = (&mut b, m.op) {
            fill_pattern(flow, i, v);
        }
        b
    }
}

/// Deterministic payload of message `msg` of flow `flow`.
pub fn fill_pattern(flow: usize, msg: usize, out: &mut [u8]) {
    let mut x = (flow as u64) << 32 ^ msg as u64 ^ 0x5DEE_CE66_D1CE_4E5B;
    for chunk in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// A completion as logged by an endpoint, with its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logged {
    /// The completion.
    pub wc: Completion,
    /// When it was reported.
    pub at: Time,
}

/// What one end of a flow saw.
#[derive(Clone, Debug, Default)]
pub struct FlowLog {
    /// The endpoint's connection (peer) index that carries the flow.
    pub conn: usize,
    /// The endpoint's QP of the flow.
    pub qp: QpId,
    /// Requester completions (at `src`).
    pub send: Vec<Logged>,
    /// Receive completions (at `dst`).
    pub recv: Vec<Logged>,
    /// When the requester posted its first message.
    pub started: Option<Time>,
}

/// Verdict on one flow after a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowCheck {
    /// Messages completed successfully, in order, exactly once.
    pub ok_completions: usize,
    /// Everything that was wrong (empty: the flow is correct).
    pub errors: Vec<String>,
}

/// Checks one flow: every WR completed exactly once, in post order, with
/// success; every receive completed in order; and (if `spec.verify`) every
/// delivered byte equals the byte sent.
pub fn check_flow(
    flow: usize,
    spec: &FlowSpec,
    src_log: &FlowLog,
    dst_log: &FlowLog,
    src_mem: &HostMemory,
    dst_mem: &HostMemory,
) -> FlowCheck {
    let mut c = FlowCheck::default();
    let layout = FlowLayout::new(flow, spec);
    let n = spec.msgs.len();
    let mut seen = HashSet::new();
    for (k, l) in src_log.send.iter().enumerate() {
        if !seen.insert(l.wc.wr_id) {
            c.errors
                .push(format!("flow {flow}: wr {} completed twice", l.wc.wr_id));
        }
        if l.wc.wr_id != k as u64 {
            c.errors.push(format!(
                "flow {flow}: completion {k} is wr {} (out of order)",
                l.wc.wr_id
            ));
        } else if l.wc.status == WcStatus::Success {
            c.ok_completions += 1;
        } else {
            c.errors
                .push(format!("flow {flow}: wr {k} failed with {:?}", l.wc.status));
        }
    }
    if src_log.send.len() != n {
        c.errors.push(format!(
            "flow {flow}: {} of {n} send completions",
            src_log.send.len()
        ));
    }
    let recvs: Vec<usize> = (0..n)
        .filter(|&i| spec.msgs[i].op.consumes_recv())
        .collect();
    for (k, l) in dst_log.recv.iter().enumerate() {
        let Some(&i) = recvs.get(k) else {
            c.errors
                .push(format!("flow {flow}: extra receive completion {:?}", l.wc));
            continue;
        };
        let want = if spec.msgs[i].op == Op::Send {
            WcOpcode::Recv
        } else {
            WcOpcode::RecvRdmaWithImm
        };
        if l.wc.wr_id != i as u64 || l.wc.status != WcStatus::Success || l.wc.opcode != want {
            c.errors.push(format!(
                "flow {flow}: receive {k} is {:?}, expected wr {i} {want:?}",
                l.wc
            ));
        } else if spec.msgs[i].op == Op::Send && l.wc.byte_len != spec.msgs[i].len {
            c.errors.push(format!(
                "flow {flow}: receive {i} byte_len {}",
                l.wc.byte_len
            ));
        } else if spec.msgs[i].op == Op::WriteImm && l.wc.imm != Some(imm_of(flow, i)) {
            c.errors
                .push(format!("flow {flow}: receive {i} imm {:?}", l.wc.imm));
        }
    }
    if dst_log.recv.len() != recvs.len() {
        c.errors.push(format!(
            "flow {flow}: {} of {} receive completions",
            dst_log.recv.len(),
            recvs.len()
        ));
    }
    if spec.verify {
        check_bytes(
            flow,
            spec,
            &layout,
            (src_log, src_mem),
            (dst_log, dst_mem),
            &mut c.errors,
        );
    }
    c
}

/// Immediate value of message `i` of flow `flow`.
pub fn imm_of(flow: usize, i: usize) -> u32 {
    (flow as u32) << 20 ^ i as u32 ^ 0xA5A5_0000
}

fn check_bytes(
    flow: usize,
    spec: &FlowSpec,
    layout: &FlowLayout,
    (src_log, src_mem): (&FlowLog, &HostMemory),
    (dst_log, dst_mem): (&FlowLog, &HostMemory),
    errors: &mut Vec<String>,
) {
    let src_key = |i: usize| (src_log.conn, src_log.qp, i as u64);
    let mut expected = Vec::new();
    let mut adds = 0u64;
    let mut origs = HashSet::new();
    for (i, m) in spec.msgs.iter().enumerate() {
        expected.clear();
        expected.resize(m.len as usize, 0);
        fill_pattern(flow, i, &mut expected);
        let off = layout.offsets[i] as usize;
        let got: Option<&[u8]> = match m.op {
            Op::Write | Op::WriteImm => dst_mem
                .regions
                .get(&layout.write_rkey)
                .and_then(|r| r.data.bytes())
                .map(|b| &b[off..off + m.len as usize]),
            Op::Send => dst_mem
                .recv
                .get(&(dst_log.conn, dst_log.qp, i as u64))
                .and_then(|b| b.bytes()),
            Op::Read => src_mem.send.get(&src_key(i)).and_then(|b| b.bytes()),
            Op::FetchAdd => {
                adds += i as u64 + 1;
                let b = src_mem.send.get(&src_key(i)).and_then(|b| b.bytes());
                if let Some(b) = b.and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                    if !origs.insert(u64::from_ne_bytes(b)) {
                        errors.push(format!("flow {flow}: atomic {i} returned a repeated value"));
                    }
                }
                continue;
            }
        };
        match got {
            Some(g) if g == expected.as_slice() => {}
            Some(g) => {
                let at = g
                    .iter()
                    .zip(&expected)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                errors.push(format!(
                    "flow {flow}: message {i} ({:?}) differs at byte {at}",
                    m.op
                ));
            }
            None => errors.push(format!(
                "flow {flow}: message {i} ({:?}) has no buffer",
                m.op
            )),
        }
    }
    if adds > 0 {
        let counter = dst_mem
            .regions
            .get(&layout.atomic_rkey)
            .and_then(|r| r.data.bytes());
        let v = counter
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_ne_bytes);
        if v != Some(adds) {
            errors.push(format!(
                "flow {flow}: atomic counter {v:?}, expected {adds} (not exactly once)"
            ));
        }
    }
}

/// Jain's fairness index of `xs` (1 = perfectly fair).
pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (xs.len() as f64 * s2)
    }
}
