// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Instantiates the generic core with kernel flags to list panic paths.
#![no_std]
use metaroce_proto::*;
/// Memory.
pub struct M;
impl Memory for M {
    fn place(&mut self, _: QpId, _: Dest, _: &[u8]) -> Result<(), MemError> {
        Ok(())
    }
    fn check_read(&mut self, _: QpId, _: u32, _: u64, _: u32) -> Result<(), MemError> {
        Ok(())
    }
    fn atomic(&mut self, _: QpId, _: u32, _: u64, _: AtomicOp) -> Result<u64, MemError> {
        Ok(0)
    }
}
/// Calls everything.
pub fn inst(c: &mut Connection, buf: &mut [u8], d: &[u8], now: Instant, w: WorkRequest) -> u64 {
    let _ = c.handle_datagram(now, true, d, &mut M);
    c.handle_timeout(now);
    let _ = c.post_send(QpId(0), w);
    let _ = c.post_recv(QpId(1), 5, 6);
    let _ = c.open_qp(1, 2);
    let _ = c.open_qp_psn(3, 4, 5, 6);
    let _ = c.qp_to_error(QpId(2));
    c.close(0);
    let mut n: u64 = 0;
    while let Some(t) = c.poll_transmit(now, buf) {
        n = n.wrapping_add(t.len as u64);
    }
    while c.poll_event().is_some() {
        n = n.wrapping_add(1);
    }
    n.wrapping_add(c.poll_timeout().map_or(0, |t| t.as_nanos()))
}
