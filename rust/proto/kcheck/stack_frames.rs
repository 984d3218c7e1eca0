// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Instantiates the generic core with kernel flags to measure stack frames:
//! one function per public entry point of `Connection<Aimd>`, so that each
//! method's frame shows (with what LLVM inlines into it) under its own name.
#![no_std]
use core::mem::MaybeUninit;
use metaroce_proto::*;
use pin_init::InPlaceWrite;
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
/// Runs the in-place initializer into a slot (as `KBox::init` does).
#[inline(never)]
pub fn init(
    slot: &'static mut MaybeUninit<Connection>,
    cfg: Config,
    now: Instant,
    seed: u64,
) -> &'static mut Connection {
    slot.write_init(Connection::init_aimd(cfg, now, seed))
        .unwrap_or_else(|e| match e {})
}
/// Same, with the generic initializer and a controller by value.
#[inline(never)]
pub fn init_cc(
    slot: &'static mut MaybeUninit<Connection>,
    cfg: Config,
    now: Instant,
    seed: u64,
) -> &'static mut Connection {
    slot.write_init(Connection::init(cfg, cc::Aimd::new(cfg.aimd), now, seed))
        .unwrap_or_else(|e| match e {})
}
/// `reset`.
#[inline(never)]
pub fn reset(c: &mut Connection, cfg: Config, now: Instant) {
    c.reset(cfg, cc::Aimd::new(cfg.aimd), now, 7);
}
/// `handle_datagram`.
#[inline(never)]
pub fn handle_datagram(c: &mut Connection, d: &[u8], now: Instant) -> bool {
    c.handle_datagram(now, true, d, &mut M).is_ok()
}
/// `handle_timeout`.
#[inline(never)]
pub fn handle_timeout(c: &mut Connection, now: Instant) {
    c.handle_timeout(now);
}
/// `post_send`.
#[inline(never)]
pub fn post_send(c: &mut Connection, w: WorkRequest) -> bool {
    c.post_send(QpId(0), w).is_ok()
}
/// `post_recv`.
#[inline(never)]
pub fn post_recv(c: &mut Connection) -> bool {
    c.post_recv(QpId(1), 5, 6).is_ok()
}
/// `open_qp`, `open_qp_psn`.
#[inline(never)]
pub fn open_qp(c: &mut Connection) -> bool {
    c.open_qp(1, 2).is_ok() && c.open_qp_psn(3, 4, 5, 6).is_ok()
}
/// `qp_to_error`, `close_qp`, `close`.
#[inline(never)]
pub fn close(c: &mut Connection) {
    let _ = c.qp_to_error(QpId(2));
    c.close_qp(QpId(3));
    c.close(0);
}
/// `poll_transmit`.
#[inline(never)]
pub fn poll_transmit(c: &mut Connection, now: Instant, buf: &mut [u8]) -> u64 {
    let mut n: u64 = 0;
    while let Some(t) = c.poll_transmit(now, buf) {
        n = n.wrapping_add(t.len as u64);
    }
    n
}
/// `poll_event`, `poll_timeout`.
#[inline(never)]
pub fn poll(c: &mut Connection) -> u64 {
    let mut n: u64 = 0;
    while c.poll_event().is_some() {
        n = n.wrapping_add(1);
    }
    n.wrapping_add(c.poll_timeout().map_or(0, |t| t.as_nanos()))
}
