// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A socket wrapper that drops and reorders outgoing datagrams, for tests.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::transport::{Received, Transport};

/// What a [`LossySocket`] does to outgoing datagrams, in parts per million.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Impairment {
    /// Datagrams dropped.
    pub drop_ppm: u32,
    /// Datagrams held back and sent after the next one.
    pub reorder_ppm: u32,
    /// Seed of the decisions (a run is repeatable for a given packet sequence).
    pub seed: u64,
}

/// A [`Transport`] that impairs what the wrapped one sends.
#[derive(Debug)]
pub struct LossySocket<T> {
    inner: T,
    impairment: Impairment,
    rng: u64,
    held: Option<(Option<u16>, Vec<u8>, SocketAddr)>,
    /// Datagrams dropped so far.
    pub dropped: u64,
    /// Datagrams reordered so far.
    pub reordered: u64,
}

impl<T: Transport> LossySocket<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, impairment: Impairment) -> Self {
        LossySocket {
            inner,
            impairment,
            rng: impairment.seed | 1,
            held: None,
            dropped: 0,
            reordered: 0,
        }
    }

    /// A uniform draw in parts per million (xorshift64).
    fn draw_ppm(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 1_000_000) as u32
    }

    fn forward(
        &mut self,
        src_port: Option<u16>,
        datagram: &[u8],
        to: SocketAddr,
    ) -> io::Result<()> {
        match src_port {
            Some(p) => self.inner.send_from(p, datagram, to),
            None => self.inner.send_to(datagram, to),
        }
    }

    /// Drops, holds back or sends one datagram.
    fn impair(&mut self, src_port: Option<u16>, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        if self.draw_ppm() < self.impairment.drop_ppm {
            self.dropped += 1;
            return Ok(());
        }
        if self.held.is_none() && self.draw_ppm() < self.impairment.reorder_ppm {
            self.reordered += 1;
            self.held = Some((src_port, datagram.to_vec(), to));
            return Ok(());
        }
        self.forward(src_port, datagram, to)?;
        self.flush_held()
    }

    fn flush_held(&mut self) -> io::Result<()> {
        match self.held.take() {
            Some((port, d, to)) => self.forward(port, &d, to),
            None => Ok(()),
        }
    }
}

impl<T: Transport> Transport for LossySocket<T> {
    fn send_to(&mut self, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        self.impair(None, datagram, to)
    }

    fn send_from(&mut self, src_port: u16, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        self.impair(Some(src_port), datagram, to)
    }

    fn recv_from(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Received>> {
        let r = self.inner.recv_from(buf, timeout)?;
        if r.is_none() {
            // Idle: a held datagram has waited long enough.
            self.flush_held()?;
        }
        Ok(r)
    }
}
