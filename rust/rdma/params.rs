// SPDX-License-Identifier: GPL-2.0

//! The module parameters writable at run time (`/sys/module/metaroce/parameters/`),
//! defined in C (rust/helpers/params.c): the `module!` macro's are read-only.

/// `rx_capacity_mbps`: a device's inbound capacity for rate hints in Mb/s, 0 = its
/// netdev's link speed.
pub fn rx_capacity_mbps() -> u32 {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_rx_capacity_mbps() }
}

/// `rate_hints`: whether ACKs carry the receiver's fair-share rate hint.
pub fn rate_hints() -> bool {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_rate_hints() }
}

/// `gso`: whether a burst of a path's datagrams leaves as one UDP GSO buffer
/// ([`crate::skb::GsoBurst`]).
pub fn gso() -> bool {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_gso() }
}

/// `tail_probe`: whether a new connection's paths keep probe timers (the protocol
/// core's `tail_probe`).
pub fn tail_probe() -> bool {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_tail_probe() }
}

/// `gro`: whether tunnel sockets take UDP GSO/GRO buffers whole and walk their
/// datagrams in place (read when a namespace's sockets are created).
pub fn gro() -> bool {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_gro() }
}

/// `path_burst`: data packets a new connection puts on one path before it moves on
/// to the next (the protocol core's `path_burst`).
pub fn path_burst() -> u32 {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_path_burst() }
}

/// `pacing_burst_us`: how far a new connection's pacing clock may lag behind the current
/// time, in microseconds (the protocol core's `pacing_burst_ns`).
pub fn pacing_burst_us() -> u32 {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_pacing_burst_us() }
}

/// `pacing_gain_pct`: a new connection's pacing rate as a share, in percent, of its
/// window per smoothed RTT (the protocol core's `pacing_gain`, in 1/1024 units).
pub fn pacing_gain_pct() -> u32 {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_pacing_gain_pct() }
}

/// `window_ack_req`: a new connection asks for an ACK at a full window only when that
/// window holds at most this many packets (0: always; the protocol core's
/// `window_ack_req`).
pub fn window_ack_req() -> u32 {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_window_ack_req() }
}

/// `paths`: the number of paths (UDP source ports) of a new connection (the
/// protocol core's `paths`, which it clamps to 1..=16).
pub fn paths() -> u32 {
    // SAFETY: Reads a module parameter with READ_ONCE; any context.
    unsafe { crate::bindings::metaroce_param_paths() }
}
