// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Virtual time and the event queue that advances it.
//!
//! Time is a plain `u64` of nanoseconds since the start of a run. Events fire in
//! time order; events scheduled for the same nanosecond fire in the order they
//! were scheduled, so a run is a pure function of its configuration and seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Virtual time in nanoseconds since the start of the run.
pub type Time = u64;

/// Nanoseconds per microsecond.
pub const US: Time = 1_000;
/// Nanoseconds per millisecond.
pub const MS: Time = 1_000_000;

/// A heap entry: ordered by time, then by insertion sequence.
struct Entry<E> {
    at: Time,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A deterministic priority queue of timed events plus the virtual clock.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    now: Time,
    seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            now: 0,
            seq: 0,
            popped: 0,
        }
    }

    /// The current virtual time (the time of the last popped event).
    pub fn now(&self) -> Time {
        self.now
    }

    /// Number of events popped so far.
    pub fn popped(&self) -> u64 {
        self.popped
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Schedules `event` at `at`; a time in the past is moved to now.
    pub fn schedule(&mut self, at: Time, event: E) {
        let at = at.max(self.now);
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// Time of the next event, if any.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Removes the next event and advances the clock to its time.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let Reverse(e) = self.heap.pop()?;
        self.now = e.at;
        self.popped += 1;
        Some((e.at, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pop_orders_by_time_then_insertion() {
        let mut q = EventQueue::new();
        q.schedule(20, 'c');
        q.schedule(10, 'a');
        q.schedule(10, 'b');
        assert_eq!(q.pop(), Some((10, 'a')));
        assert_eq!(q.pop(), Some((10, 'b')));
        assert_eq!(q.now(), 10);
        q.schedule(5, 'd');
        assert_eq!(q.pop(), Some((10, 'd')));
        assert_eq!(q.pop(), Some((20, 'c')));
        assert_eq!(q.pop(), None);
        assert_eq!(q.popped(), 4);
    }
}
