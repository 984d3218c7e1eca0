// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The active side: each verb against a [`serve`](crate::serve)d region, with
//! the data checked, and the bandwidth and latency loops.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use metaroce_proto::{Completion, Opcode, PostError, WcStatus, WorkRequest};

use crate::endpoint::{Endpoint, WaitError};
use crate::responder::RegionSpec;
use crate::transport::Transport;

/// How long one operation may take before the check fails.
const OP_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a check failed.
#[derive(Debug)]
pub enum CheckError {
    /// No completion came.
    Wait(WaitError),
    /// A completion carried an error status.
    Status(Completion),
    /// The bytes or value that came back are wrong.
    Mismatch(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Wait(e) => write!(f, "{e}"),
            CheckError::Status(c) => write!(f, "completion {c:?}"),
            CheckError::Mismatch(s) => write!(f, "data mismatch: {s}"),
        }
    }
}

impl std::error::Error for CheckError {}

impl From<WaitError> for CheckError {
    fn from(e: WaitError) -> Self {
        CheckError::Wait(e)
    }
}

/// Bytes of a pattern that differs per `seed` and per position.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            (i.wrapping_mul(131).wrapping_add(seed.wrapping_mul(7919)) >> 3) as u8 ^ seed as u8
        })
        .collect()
}

/// Drives work requests of one endpoint and checks what they return.
pub struct Requester<'a, T> {
    ep: &'a mut Endpoint<T>,
    region: RegionSpec,
    next_wr: u64,
    /// Receive completions that came while waiting for a send completion.
    received: VecDeque<(Completion, Vec<u8>)>,
}

impl<'a, T: Transport> Requester<'a, T> {
    /// Works against the peer's `region`.
    pub fn new(ep: &'a mut Endpoint<T>, region: RegionSpec) -> Self {
        Requester {
            ep,
            region,
            next_wr: 1,
            received: VecDeque::new(),
        }
    }

    fn post(&mut self, mut wr: WorkRequest, buf: Vec<u8>) -> Result<u64, CheckError> {
        wr.wr_id = self.next_wr;
        self.next_wr += 1;
        self.ep
            .post_send(wr, buf)
            .map_err(|e| CheckError::Wait(WaitError::Post(e)))?;
        Ok(wr.wr_id)
    }

    /// Waits for the send completion of `wr_id` (requests complete in order).
    fn complete(&mut self, wr_id: u64) -> Result<Vec<u8>, CheckError> {
        loop {
            let (c, buf) = self.ep.wait(OP_TIMEOUT)?;
            if c.status != WcStatus::Success {
                return Err(CheckError::Status(c));
            }
            if matches!(
                c.opcode,
                metaroce_proto::WcOpcode::Recv | metaroce_proto::WcOpcode::RecvRdmaWithImm
            ) {
                self.received.push_back((c, buf));
            } else if c.wr_id == wr_id {
                return Ok(buf);
            }
        }
    }

    fn run(&mut self, wr: WorkRequest, buf: Vec<u8>) -> Result<Vec<u8>, CheckError> {
        let id = self.post(wr, buf)?;
        self.complete(id)
    }

    /// RDMA WRITE of `len` bytes (a pattern of `seed`) at `offset`.
    pub fn write(&mut self, offset: u64, len: u32, seed: u64) -> Result<(), CheckError> {
        let wr = WorkRequest {
            opcode: Opcode::Write,
            len,
            remote_addr: self.region.va + offset,
            rkey: self.region.rkey,
            ..WorkRequest::default()
        };
        self.run(wr, pattern(seed, len as usize)).map(|_| ())
    }

    /// RDMA READ of `len` bytes at `offset`.
    pub fn read(&mut self, offset: u64, len: u32) -> Result<Vec<u8>, CheckError> {
        let wr = WorkRequest {
            opcode: Opcode::Read,
            len,
            remote_addr: self.region.va + offset,
            rkey: self.region.rkey,
            ..WorkRequest::default()
        };
        self.run(wr, vec![0; len as usize])
    }

    fn atomic(
        &mut self,
        opcode: Opcode,
        offset: u64,
        compare_add: u64,
        swap: u64,
    ) -> Result<u64, CheckError> {
        let wr = WorkRequest {
            opcode,
            len: 8,
            remote_addr: self.region.va + offset,
            rkey: self.region.rkey,
            compare_add,
            swap,
            ..WorkRequest::default()
        };
        let buf = self.run(wr, vec![0; 8])?;
        let b: [u8; 8] = buf
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default();
        Ok(u64::from_ne_bytes(b))
    }

    /// WRITE a pattern, READ it back and compare.
    pub fn check_write_read(&mut self, len: u32, seed: u64) -> Result<(), CheckError> {
        self.write(0, len, seed)?;
        let got = self.read(0, len)?;
        if got != pattern(seed, len as usize) {
            return Err(CheckError::Mismatch(format!(
                "READ after WRITE of {len} bytes"
            )));
        }
        Ok(())
    }

    /// SEND a pattern and check the responder's echo.
    pub fn check_send_recv(&mut self, len: u32, seed: u64) -> Result<(), CheckError> {
        let recv_id = self.next_wr;
        self.next_wr += 1;
        self.ep
            .post_recv(recv_id, len)
            .map_err(|e| CheckError::Wait(WaitError::Post(e)))?;
        let sent = pattern(seed, len as usize);
        let wr = WorkRequest {
            opcode: Opcode::Send,
            len,
            ..WorkRequest::default()
        };
        self.run(wr, sent.clone())?;
        let (c, mut data) = match self.received.pop_front() {
            Some(r) => r,
            None => self.ep.wait(OP_TIMEOUT)?,
        };
        if c.status != WcStatus::Success || c.wr_id != recv_id {
            return Err(CheckError::Status(c));
        }
        data.truncate(c.byte_len as usize);
        if data != sent {
            return Err(CheckError::Mismatch(format!("echo of a {len}-byte SEND")));
        }
        Ok(())
    }

    /// FETCH_ADD and CMP_SWAP on the region's last 8 bytes, checked by READs.
    pub fn check_atomics(&mut self) -> Result<(), CheckError> {
        let off = u64::from(self.region.size.saturating_sub(8)) & !7;
        let v0 = self.atomic(Opcode::FetchAdd, off, 0, 0)?;
        let fa = self.atomic(Opcode::FetchAdd, off, 5, 0)?;
        let cs = self.atomic(Opcode::CompareSwap, off, v0.wrapping_add(5), 0xfeed_f00d)?;
        let failed_cs = self.atomic(Opcode::CompareSwap, off, 0xfeed_f00d ^ 1, 1)?;
        let mem = self.read(off, 8)?;
        let now: [u8; 8] = mem
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default();
        let ok = fa == v0
            && cs == v0.wrapping_add(5)
            && failed_cs == 0xfeed_f00d
            && u64::from_ne_bytes(now) == 0xfeed_f00d;
        if !ok {
            return Err(CheckError::Mismatch(format!(
                "atomics: start {v0:#x}, fetch_add {fa:#x}, cmp_swap {cs:#x}, failed cmp_swap {failed_cs:#x}, then {:#x}",
                u64::from_ne_bytes(now)
            )));
        }
        Ok(())
    }

    /// `count` WRITEs of `len` bytes with up to `depth` outstanding; returns
    /// bytes per second.
    pub fn write_bandwidth(
        &mut self,
        len: u32,
        count: u64,
        depth: usize,
    ) -> Result<f64, CheckError> {
        let start = Instant::now();
        let (mut posted, mut done) = (0u64, 0u64);
        let data = pattern(1, len as usize);
        while done < count {
            while posted < count && (posted - done) < depth as u64 {
                let wr = WorkRequest {
                    wr_id: self.next_wr,
                    opcode: Opcode::Write,
                    len,
                    remote_addr: self.region.va,
                    rkey: self.region.rkey,
                    ..WorkRequest::default()
                };
                match self.ep.post_send(wr, data.clone()) {
                    Ok(()) => {
                        self.next_wr += 1;
                        posted += 1;
                    }
                    Err(PostError::QueueFull) => break,
                    Err(e) => return Err(CheckError::Wait(WaitError::Post(e))),
                }
            }
            let (c, _) = self.ep.wait(OP_TIMEOUT)?;
            if c.status != WcStatus::Success {
                return Err(CheckError::Status(c));
            }
            done += 1;
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        Ok((count * u64::from(len)) as f64 / secs)
    }

    /// `count` READs of `len` bytes one at a time; returns the round trips, sorted.
    pub fn read_latency(&mut self, len: u32, count: u64) -> Result<Vec<Duration>, CheckError> {
        let mut rtts = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let t = Instant::now();
            self.read(0, len)?;
            rtts.push(t.elapsed());
        }
        rtts.sort();
        Ok(rtts)
    }
}
