// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The world: hosts on a network, the event loop, and a bounded `drive`.
//!
//! Events are datagram arrivals at a link or host, host wakeups (timer
//! deadlines and the NIC becoming idle), scheduled path faults, and periodic
//! samples. A host transmits only while its NIC is idle, so the transport sees
//! back-pressure at line rate instead of an infinite send queue.
//!
//! [`World::drive`] runs until every flow has finished (each work request
//! completed or failed). It fails when nothing completes and no byte is placed
//! for a bound of virtual time (livelock or deadlock), when the event cap is
//! hit, or when the event queue empties with work outstanding.

use crate::clock::{EventQueue, Time};
use crate::datagram::{Datagram, HostId};
use crate::endpoint::Endpoint;
use crate::link::Outcome;
use crate::network::{LinkId, Network, PathFault, Route};
use crate::workload::{check_flow, FlowCheck, FlowLog, FlowSpec};

enum Ev {
    /// `d` arrives at the input of hop `hop` of `route`, or at its host after the last.
    Arrive { d: Datagram, route: Route, hop: u8 },
    /// Host `host` wakes up (if `at` is still its scheduled wakeup).
    Wake { host: HostId },
    /// Core path fault.
    Path { path: usize, down: bool },
    /// One link blackholed or restored.
    Link { link: LinkId, down: bool },
    /// Periodic sample.
    Sample,
}

/// Limits of [`World::drive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriveLimits {
    /// Fail when no completion and no placed byte happen for this long (virtual ns).
    pub stall_ns: Time,
    /// Fail after this many events.
    pub max_events: u64,
    /// Fail when virtual time passes this.
    pub max_time: Time,
}

impl Default for DriveLimits {
    fn default() -> Self {
        DriveLimits {
            stall_ns: 200 * crate::clock::MS,
            max_events: 50_000_000,
            max_time: 60_000 * crate::clock::MS,
        }
    }
}

/// Why [`World::drive`] gave up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError {
    /// No progress for `stall_ns`: livelock or deadlock.
    Stalled {
        /// Time of the last progress.
        last_progress: Time,
        /// Time of giving up.
        now: Time,
    },
    /// The event cap was hit.
    EventCap(u64),
    /// The time cap was hit.
    TimeCap(Time),
    /// Nothing left to happen, yet work is outstanding.
    Idle(Time),
}

/// One periodic sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// Time.
    pub at: Time,
    /// Payload bytes each host has sent so far.
    pub sent: Vec<u64>,
    /// Payload bytes placed into each host's memory so far.
    pub placed: Vec<u64>,
    /// Backlog of each watched link, bytes.
    pub backlog: Vec<u64>,
    /// Payload bytes the watched receiver placed from each host so far.
    pub placed_from: Vec<u64>,
}

/// Hosts, network and events.
pub struct World {
    /// Event queue and virtual clock.
    q: EventQueue<Ev>,
    /// The network.
    pub net: Network,
    /// Hosts by id.
    pub hosts: Vec<Box<dyn Endpoint>>,
    /// Flows by id.
    pub flows: Vec<FlowSpec>,
    nic_free_at: Vec<Time>,
    wake_at: Vec<Option<Time>>,
    progress: u64,
    last_progress: Time,
    sample_every: Time,
    sample_until: Time,
    watch: Vec<LinkId>,
    watch_host: Option<HostId>,
    /// Samples taken so far.
    pub samples: Vec<Sample>,
    /// Time each flow finished (last requester completion), by flow id.
    pub finished_at: Vec<Option<Time>>,
    /// Flows that wait for another ([`FlowSpec::after`]) and how many of their
    /// messages are released so far.
    waiting: Vec<(usize, usize)>,
    /// Timer wakeups that asked for a time not in the future (clamped to now + 1 ns).
    pub timer_spins: u64,
    /// Datagram trace, when enabled with [`World::enable_trace`].
    pub trace: Option<Vec<String>>,
}

impl World {
    /// A world of `hosts` on `net`; host `i` must have id `i`.
    pub fn new(net: Network, hosts: Vec<Box<dyn Endpoint>>) -> Self {
        let n = hosts.len();
        World {
            q: EventQueue::new(),
            net,
            hosts,
            flows: Vec::new(),
            nic_free_at: vec![0; n],
            wake_at: vec![None; n],
            progress: 0,
            last_progress: 0,
            sample_every: 0,
            sample_until: 0,
            watch: Vec::new(),
            watch_host: None,
            samples: Vec::new(),
            finished_at: Vec::new(),
            waiting: Vec::new(),
            timer_spins: 0,
            trace: None,
        }
    }

    /// Records every datagram sent, dropped and delivered (for debugging a seed).
    pub fn enable_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    fn log(&mut self, what: &str, d: &Datagram, route: Route) {
        if let Some(t) = &mut self.trace {
            let b = &d.data;
            let word = |i: usize| {
                b.get(i..i + 4)
                    .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
            };
            t.push(format!(
                "{:>10} {what:<8} {}->{} sport {:5} link {:2} len {:5} type {:#04x} path {:2} psn {:#010x} w16 {:#010x} w20 {:#010x}{}",
                self.q.now(),
                d.src,
                d.dst,
                d.sport,
                route.hop(0).unwrap_or(0),
                b.len(),
                b.get(1).copied().unwrap_or(0),
                b.get(3).copied().unwrap_or(0),
                word(12),
                word(16),
                word(20),
                if d.ecn == crate::datagram::Ecn::Ce { " CE" } else { "" },
            ));
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Time {
        self.q.now()
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.q.popped()
    }

    /// Adds a flow and lets both ends set it up now. Returns its id.
    pub fn add_flow(&mut self, spec: FlowSpec) -> usize {
        let id = self.flows.len();
        let now = self.now();
        for h in [spec.src, spec.dst] {
            self.hosts[h].add_flow(id, &spec, now);
        }
        if spec.after.is_some() {
            self.waiting.push((id, spec.initially_released()));
        }
        self.flows.push(spec);
        self.finished_at.push(None);
        for h in 0..self.hosts.len() {
            self.service(h);
        }
        id
    }

    /// Schedules a core path fault.
    pub fn schedule_fault(&mut self, f: PathFault) {
        self.q.schedule(
            f.down_at,
            Ev::Path {
                path: f.path,
                down: true,
            },
        );
        if let Some(up) = f.up_at {
            self.q.schedule(
                up,
                Ev::Path {
                    path: f.path,
                    down: false,
                },
            );
        }
    }

    /// Blackholes `link` at `down_at` and restores it at `up_at`, if set (a link of
    /// a multiplane fabric: [`Network::plane_link`](crate::network::Network::plane_link)).
    pub fn schedule_link_fault(&mut self, link: LinkId, down_at: Time, up_at: Option<Time>) {
        self.q.schedule(down_at, Ev::Link { link, down: true });
        if let Some(up) = up_at {
            self.q.schedule(up, Ev::Link { link, down: false });
        }
    }

    /// Takes a [`Sample`] every `every` ns until `until`, including the backlog
    /// of the links in `watch` and what `receiver` placed from each host.
    pub fn sample(
        &mut self,
        every: Time,
        until: Time,
        watch: Vec<LinkId>,
        receiver: Option<HostId>,
    ) {
        self.watch_host = receiver;
        self.sample_every = every;
        self.sample_until = until;
        self.watch = watch;
        self.q.schedule(self.now(), Ev::Sample);
    }

    /// Runs until every flow finished, or fails per `limits`. Returns the finish time.
    pub fn drive(&mut self, limits: DriveLimits) -> Result<Time, DriveError> {
        self.last_progress = self.now();
        loop {
            if self.all_finished() {
                return Ok(self.now());
            }
            let now = self.now();
            if now.saturating_sub(self.last_progress) > limits.stall_ns {
                return Err(DriveError::Stalled {
                    last_progress: self.last_progress,
                    now,
                });
            }
            if self.q.popped() >= limits.max_events {
                return Err(DriveError::EventCap(self.q.popped()));
            }
            if now > limits.max_time {
                return Err(DriveError::TimeCap(now));
            }
            // (With sampling on, the queue never empties; the stall bound ends such runs.)
            let Some((at, ev)) = self.q.pop() else {
                return Err(DriveError::Idle(now));
            };
            self.step(at, ev);
        }
    }

    fn step(&mut self, now: Time, ev: Ev) {
        match ev {
            Ev::Arrive { d, route, hop } => {
                if hop as usize >= route.len() {
                    let h = d.dst;
                    let mark = self.progress_mark(h);
                    self.log("recv", &d, route);
                    self.hosts[h].on_datagram(now, d);
                    self.service_from(h, mark);
                    return;
                }
                let copy = self.trace.is_some().then(|| d.clone());
                let Some(link) = route.hop(hop as usize) else {
                    return;
                };
                match self.net.links[link].offer(now, d) {
                    Outcome::Delivered(v) => {
                        for (at, d) in v {
                            self.q.schedule(
                                at,
                                Ev::Arrive {
                                    d,
                                    route,
                                    hop: hop + 1,
                                },
                            );
                        }
                    }
                    Outcome::Dropped => {
                        if let Some(d) = copy {
                            let last = hop as usize + 1 == route.len();
                            self.log(if last { "DROP-down" } else { "DROP-core" }, &d, route);
                        }
                    }
                }
            }
            Ev::Wake { host } => {
                if self.wake_at[host] == Some(now) {
                    self.wake_at[host] = None;
                    self.service(host);
                }
            }
            Ev::Path { path, down } => self.net.set_path_down(path, down),
            Ev::Link { link, down } => {
                if let Some(l) = self.net.links.get_mut(link) {
                    l.blackholed = down;
                }
            }
            Ev::Sample => {
                let s = Sample {
                    at: now,
                    sent: self.hosts.iter().map(|h| h.stats().payload_bytes).collect(),
                    placed: self
                        .hosts
                        .iter()
                        .map(|h| h.memory().stats.bytes_placed)
                        .collect(),
                    backlog: self
                        .watch
                        .iter()
                        .map(|&l| self.net.links[l].backlog_bytes(now))
                        .collect(),
                    placed_from: match self.watch_host {
                        Some(r) => (0..self.hosts.len())
                            .map(|h| self.hosts[r].placed_from(h))
                            .collect(),
                        None => Vec::new(),
                    },
                };
                self.samples.push(s);
                if !self.all_finished() && now + self.sample_every <= self.sample_until {
                    self.q.schedule(now + self.sample_every, Ev::Sample);
                }
            }
        }
    }

    /// Fires due timers of host `h`, transmits while its NIC is idle, and
    /// schedules its next wakeup.
    fn service(&mut self, h: HostId) {
        let mark = self.progress_mark(h);
        self.service_from(h, mark);
    }

    /// Progress counters of host `h`: (completions + bytes placed, completions).
    fn progress_mark(&self, h: HostId) -> (u64, u64) {
        (self.host_progress(h), self.hosts[h].completions())
    }

    /// [`service`](Self::service), counting progress since `mark`.
    fn service_from(&mut self, h: HostId, (before, completions): (u64, u64)) {
        let now = self.now();
        if self.hosts[h].poll_timeout().is_some_and(|t| t <= now) {
            self.hosts[h].on_timeout(now);
        }
        while self.nic_free_at[h] <= now {
            let Some(d) = self.hosts[h].poll_transmit(now) else {
                break;
            };
            let done = now + self.net_nic_serialize(d.wire_len());
            self.nic_free_at[h] = done;
            let route = self.net.route(&d);
            self.log("send", &d, route);
            self.q.schedule(done, Ev::Arrive { d, route, hop: 0 });
        }
        let after = self.host_progress(h);
        if after != before {
            self.progress += after - before;
            self.last_progress = now;
            if self.hosts[h].completions() != completions {
                self.note_finished(now);
                self.release_waiting(now);
            }
        }
        let nic_busy = self.nic_free_at[h] > now;
        let mut next = self.hosts[h].poll_timeout();
        if nic_busy {
            // A past deadline (e.g. a pacing clock that already allows sending)
            // is served when the NIC frees up.
            let free = self.nic_free_at[h];
            next = Some(next.map_or(free, |t| if t <= now { free } else { t.min(free) }));
        }
        if let Some(mut t) = next {
            if t <= now {
                self.timer_spins += 1;
                t = now + 1;
            }
            if self.wake_at[h].is_none_or(|w| t < w || w < now) {
                self.wake_at[h] = Some(t);
                self.q.schedule(t, Ev::Wake { host: h });
            }
        }
    }

    fn net_nic_serialize(&self, bytes: usize) -> Time {
        let rate = self.net.cfg.nic_rate_bps;
        if rate == 0 {
            0
        } else {
            ((bytes as u128 * 8_000_000_000).div_ceil(u128::from(rate))) as Time
        }
    }

    fn host_progress(&self, h: HostId) -> u64 {
        self.hosts[h].completions() + self.hosts[h].memory().stats.bytes_placed
    }

    fn note_finished(&mut self, now: Time) {
        for f in 0..self.flows.len() {
            if self.finished_at[f].is_none() && self.flow_finished(f) {
                self.finished_at[f] = Some(now);
            }
        }
    }

    /// Releases to the sources of waiting flows the messages that what their flows
    /// delivered so far allows, and lets those sources send.
    fn release_waiting(&mut self, now: Time) {
        let mut wake = Vec::new();
        for i in 0..self.waiting.len() {
            let (f, released) = self.waiting[i];
            let Some(a) = self.flows[f].after.filter(|&a| a < self.flows.len()) else {
                continue;
            };
            let delivered = self.hosts[self.flows[a].dst]
                .flow_log(a)
                .map_or(0, |l| l.recv.len());
            let allowed = (delivered + 1).min(self.flows[f].msgs.len());
            if allowed > released {
                self.waiting[i].1 = allowed;
                let src = self.flows[f].src;
                self.hosts[src].release(f, allowed, now);
                wake.push(src);
            }
        }
        for h in wake {
            self.service(h);
        }
    }

    fn flow_finished(&self, f: usize) -> bool {
        let spec = &self.flows[f];
        let (Some(src), Some(dst)) = (
            self.hosts[spec.src].flow_log(f),
            self.hosts[spec.dst].flow_log(f),
        ) else {
            return false;
        };
        let sends_done = src.send.len() >= spec.msgs.len();
        let failed = src
            .send
            .iter()
            .any(|l| l.wc.status != metaroce_proto::WcStatus::Success);
        let recvs = spec.msgs.iter().filter(|m| m.op.consumes_recv()).count();
        sends_done && (failed || dst.recv.len() >= recvs)
    }

    /// Whether every flow has finished.
    pub fn all_finished(&self) -> bool {
        self.finished_at.iter().all(Option::is_some)
    }

    /// The logs of flow `f` at its source and destination.
    pub fn flow_logs(&self, f: usize) -> (Option<&FlowLog>, Option<&FlowLog>) {
        let spec = &self.flows[f];
        (
            self.hosts[spec.src].flow_log(f),
            self.hosts[spec.dst].flow_log(f),
        )
    }

    /// Checks every flow (see [`check_flow`]).
    pub fn check(&self) -> Vec<FlowCheck> {
        (0..self.flows.len())
            .map(|f| {
                let spec = &self.flows[f];
                let empty = FlowLog::default();
                let (s, d) = self.flow_logs(f);
                check_flow(
                    f,
                    spec,
                    s.unwrap_or(&empty),
                    d.unwrap_or(&empty),
                    self.hosts[spec.src].memory(),
                    self.hosts[spec.dst].memory(),
                )
            })
            .collect()
    }

    /// All error messages of [`check`](Self::check), empty if every flow is correct.
    pub fn errors(&self) -> Vec<String> {
        self.check().into_iter().flat_map(|c| c.errors).collect()
    }
}
