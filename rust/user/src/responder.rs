// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The passive side: a region open to remote WRITE, READ and atomics, and an
//! echo of every SEND (so the requester can verify SEND/RECV end to end).

use std::time::Duration;

use metaroce_proto::{Opcode, WcOpcode, WcStatus, WorkRequest};

use crate::endpoint::{Endpoint, WaitError};
use crate::memory::Access;
use crate::transport::Transport;

/// Where the responder's region lives and how large its receives are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionSpec {
    /// The region's rkey.
    pub rkey: u32,
    /// Its virtual address (a multiple of 8).
    pub va: u64,
    /// Its size in bytes, also the size of each posted receive.
    pub size: u32,
}

/// Receives the responder keeps posted.
const RECV_DEPTH: u64 = 16;

/// Registers the region, keeps receives posted and echoes each SEND back,
/// until the peer closes or `keep_going` says to stop (it is asked at least
/// every 100 ms). Returns the SENDs echoed. CLOSE is not retransmitted (spec
/// [MR-CONN-10]): a lost one leaves the stop to `keep_going`.
pub fn serve<T: Transport>(
    ep: &mut Endpoint<T>,
    region: RegionSpec,
    mut keep_going: impl FnMut() -> bool,
) -> Result<u64, WaitError> {
    ep.memory_mut().register(
        region.rkey,
        region.va,
        vec![0; region.size as usize],
        Access::ALL,
    );
    for i in 0..RECV_DEPTH {
        ep.post_recv(i, region.size).map_err(WaitError::Post)?;
    }
    let (mut next_recv, mut next_send, mut echoed) = (RECV_DEPTH, 1u64 << 32, 0);
    while keep_going() {
        let (c, data) = match ep.wait(Duration::from_millis(100)) {
            Ok(c) => c,
            Err(WaitError::Timeout) => continue,
            Err(WaitError::Closed) => break,
            Err(e) => return Err(e),
        };
        if c.status != WcStatus::Success || c.opcode != WcOpcode::Recv {
            continue;
        }
        ep.post_recv(next_recv, region.size)
            .map_err(WaitError::Post)?;
        next_recv += 1;
        let mut data = data;
        data.truncate(c.byte_len as usize);
        let wr = WorkRequest {
            wr_id: next_send,
            opcode: Opcode::Send,
            len: c.byte_len,
            ..WorkRequest::default()
        };
        next_send += 1;
        // A full send queue drains as the echoes complete.
        while let Err(metaroce_proto::PostError::QueueFull) = ep.post_send(wr, data.clone()) {
            ep.progress(Duration::from_millis(1))?;
        }
        echoed += 1;
    }
    Ok(echoed)
}
