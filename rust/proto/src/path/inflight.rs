// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Sender-side record of one path's unresolved packets, indexed by PSN.
//!
//! At most [`SACK_BITS`] PSNs lie between the oldest unresolved packet (`una`)
//! and the next PSN, so every in-flight packet fits the receiver's SACK window.
//! A packet is resolved when acknowledged, or when declared lost and its data
//! handed to a new packet. A lost packet keeps its slot until then.
//!
//= Documentation/metaroce/spec.rst#per-path-sequencing

use crate::constants::SACK_BITS;
use crate::psn::seq_diff;
use crate::timer::Instant;
use pin_init::{init, init_array_from_fn, Init};

/// Which data a packet carried: a segment of a QP's request or response stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// Local QP index.
    pub(crate) qp: u16,
    /// Response stream (READ/atomic response) rather than request stream.
    pub(crate) resp: bool,
    /// Message sequence number.
    pub(crate) msn: u32,
    /// Stream segment number.
    pub(crate) ssn: u32,
}

/// State of a ring slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// No unresolved packet.
    #[default]
    Empty,
    /// Sent, not yet acknowledged or declared lost.
    InFlight,
    /// Declared lost; its data waits for retransmission.
    Lost,
}

/// One sent packet.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sent {
    pub(crate) sent_at: Instant,
    pub(crate) chunk: Chunk,
    pub(crate) bytes: u16,
    pub(crate) state: SlotState,
}

/// The ring.
#[derive(Clone, Debug)]
pub(crate) struct Inflight {
    slots: [Sent; SACK_BITS],
    una: u32,
    next: u32,
    pub(crate) in_flight: u32,
    pub(crate) lost: u32,
    pub(crate) bytes_in_flight: u32,
}

impl Inflight {
    /// By value (6 KiB): tests only.
    #[cfg(test)]
    pub(crate) fn new(first_psn: u32) -> Self {
        Inflight {
            slots: [Sent::default(); SACK_BITS],
            una: first_psn,
            next: first_psn,
            in_flight: 0,
            lost: 0,
            bytes_in_flight: 0,
        }
    }

    /// An empty ring whose next PSN is `first_psn`, built in place.
    pub(crate) fn init(first_psn: u32) -> impl Init<Self> {
        init!(Inflight {
            slots <- init_array_from_fn(|_| Sent::default()),
            una: first_psn,
            next: first_psn,
            in_flight: 0,
            lost: 0,
            bytes_in_flight: 0,
        })
    }

    /// Empties the ring in place; the next PSN becomes `first_psn`.
    pub(crate) fn reset(&mut self, first_psn: u32) {
        self.slots.iter_mut().for_each(|s| *s = Sent::default());
        self.una = first_psn;
        self.next = first_psn;
        self.in_flight = 0;
        self.lost = 0;
        self.bytes_in_flight = 0;
    }

    /// Oldest unresolved PSN: every PSN before it is resolved.
    pub(crate) fn una(&self) -> u32 {
        self.una
    }

    /// Whether a new PSN fits in the window.
    pub(crate) fn has_room(&self) -> bool {
        self.next.wrapping_sub(self.una) < SACK_BITS as u32
    }

    fn index(psn: u32) -> usize {
        psn as usize % SACK_BITS
    }

    /// The slot of `psn` if it lies in `[una, next)`.
    pub(crate) fn get(&self, psn: u32) -> Option<&Sent> {
        if self.contains(psn) {
            self.slots.get(Self::index(psn))
        } else {
            None
        }
    }

    /// The slot of `psn` if it lies in `[una, next)` and is still unresolved
    /// (in flight, or lost and not yet handed on).
    pub(crate) fn get_unresolved(&self, psn: u32) -> Option<&Sent> {
        self.get(psn).filter(|s| s.state != SlotState::Empty)
    }

    fn contains(&self, psn: u32) -> bool {
        seq_diff(psn, self.una) >= 0 && seq_diff(psn, self.next) < 0
    }

    /// Records a new packet; returns its PSN, or `None` if the window is full.
    pub(crate) fn push(&mut self, chunk: Chunk, bytes: u16, now: Instant) -> Option<u32> {
        if !self.has_room() {
            return None;
        }
        let psn = self.next;
        let slot = self.slots.get_mut(Self::index(psn))?;
        *slot = Sent {
            sent_at: now,
            chunk,
            bytes,
            state: SlotState::InFlight,
        };
        self.next = psn.wrapping_add(1);
        self.in_flight = self.in_flight.saturating_add(1);
        self.bytes_in_flight = self.bytes_in_flight.saturating_add(u32::from(bytes));
        Some(psn)
    }

    /// Marks an in-flight `psn` acknowledged; returns its record.
    pub(crate) fn ack(&mut self, psn: u32) -> Option<Sent> {
        let s = self.take_if(psn, SlotState::InFlight)?;
        self.in_flight = self.in_flight.saturating_sub(1);
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u32::from(s.bytes));
        self.advance();
        Some(s)
    }

    /// Declares an in-flight `psn` lost; returns its record.
    pub(crate) fn mark_lost(&mut self, psn: u32) -> Option<Sent> {
        if !self.contains(psn) {
            return None;
        }
        let slot = self.slots.get_mut(Self::index(psn))?;
        if slot.state != SlotState::InFlight {
            return None;
        }
        slot.state = SlotState::Lost;
        let s = *slot;
        self.in_flight = self.in_flight.saturating_sub(1);
        self.lost = self.lost.saturating_add(1);
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u32::from(s.bytes));
        Some(s)
    }

    /// Frees a lost `psn` whose data was handed on (or is no longer needed).
    pub(crate) fn release_lost(&mut self, psn: u32) -> Option<Sent> {
        let s = self.take_if(psn, SlotState::Lost)?;
        self.lost = self.lost.saturating_sub(1);
        self.advance();
        Some(s)
    }

    fn take_if(&mut self, psn: u32, state: SlotState) -> Option<Sent> {
        if !self.contains(psn) {
            return None;
        }
        let slot = self.slots.get_mut(Self::index(psn))?;
        if slot.state != state {
            return None;
        }
        let s = *slot;
        slot.state = SlotState::Empty;
        Some(s)
    }

    fn advance(&mut self) {
        while self.una != self.next {
            match self.slots.get(Self::index(self.una)) {
                Some(s) if s.state == SlotState::Empty => self.una = self.una.wrapping_add(1),
                _ => break,
            }
        }
    }

    /// First lost PSN, if any.
    #[cfg(test)]
    pub(crate) fn first_lost(&self) -> Option<u32> {
        if self.lost == 0 {
            return None;
        }
        let mut psn = self.una;
        while psn != self.next {
            if self
                .slots
                .get(Self::index(psn))
                .is_some_and(|s| s.state == SlotState::Lost)
            {
                return Some(psn);
            }
            psn = psn.wrapping_add(1);
        }
        None
    }

    /// PSNs in `[una, next)` (for scans).
    pub(crate) fn range(&self) -> (u32, u32) {
        (self.una, self.next)
    }

    /// The record at `psn` without checks beyond the window.
    pub(crate) fn slot(&self, psn: u32) -> Option<&Sent> {
        self.get(psn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: MR-PSN-2
    #[test]
    fn push_ack_advance() {
        let mut f = Inflight::new(u32::MAX - 1);
        let c = Chunk::default();
        let a = f.push(c, 10, Instant::ZERO).unwrap();
        let b = f.push(c, 20, Instant::ZERO).unwrap();
        let d = f.push(c, 30, Instant::ZERO).unwrap();
        assert_eq!((a, b, d), (u32::MAX - 1, u32::MAX, 0));
        assert_eq!(f.bytes_in_flight, 60);
        assert!(f.ack(b).is_some());
        assert!(f.ack(b).is_none());
        assert_eq!(f.una(), a);
        assert!(f.mark_lost(a).is_some());
        assert_eq!(f.first_lost(), Some(a));
        assert_eq!(f.una(), a);
        assert!(f.release_lost(a).is_some());
        assert_eq!(f.una(), 0);
        assert_eq!(f.in_flight, 1);
        assert_eq!(f.lost, 0);
    }

    // spec: MR-PSN-3
    #[test]
    fn window_limit() {
        let mut f = Inflight::new(0);
        for _ in 0..SACK_BITS {
            assert!(f.push(Chunk::default(), 1, Instant::ZERO).is_some());
        }
        assert!(!f.has_room());
        assert!(f.push(Chunk::default(), 1, Instant::ZERO).is_none());
        f.ack(0);
        assert!(f.has_room());
        assert!(f.get(1000).is_none());
    }
}
