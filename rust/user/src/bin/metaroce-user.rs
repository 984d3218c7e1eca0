// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `metaroce-user`: a userspace MetaRoCE endpoint over UDP.
//!
//! ```text
//! metaroce-user server --peer IP [options]        # region + SEND echo
//! metaroce-user check  --peer IP [options]        # every verb, data checked
//! metaroce-user bw     --peer IP [options]        # WRITE bandwidth
//! metaroce-user lat    --peer IP [options]        # READ round trips
//! metaroce-user pingpong [--connect IP[:PORT]]     # ibv_rc_pingpong's peer
//! ```
//!
//! The two sides agree out of band, on the command line, on QPNs, PSNs and the
//! server's rkey, address and size (the defaults match). See
//! Documentation/metaroce/userspace.rst.

use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use metaroce_proto::constants::UDP_PORT;
use metaroce_user::exchange::{self, Destination, ANY_IP};
use metaroce_user::{
    serve, Endpoint, EndpointConfig, Impairment, LossySocket, PathPorts, RegionSpec, Requester,
};

/// Prints a line; a closed stdout (`| head`) is no error.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

const USAGE: &str = "usage: metaroce-user server|check|bw|lat --peer IP[:PORT] [--bind IP[:PORT]]
       metaroce-user pingpong [--connect IP[:TCPPORT]] [--tcp-port N] [--bind IP[:PORT]]
  [--qpn N] [--peer-qpn N] [--psn N] [--peer-psn N] [--conn-id N]
  [--rkey N] [--va N] [--region BYTES] [--size BYTES] [--iters N] [--depth N]
  [--paths N] [--mtu BYTES] [--time SECS] [--loss PPM] [--reorder PPM]
numbers take 0x for hex; the UDP port defaults to 4793 on both sides";

/// Command-line settings.
struct Args {
    mode: String,
    peer: SocketAddr,
    bind: SocketAddr,
    ep: EndpointConfig,
    region: RegionSpec,
    size: u32,
    iters: u64,
    depth: usize,
    time: u64,
    impairment: Impairment,
    /// `pingpong`: the ibv_rc_pingpong server to connect to (else: listen).
    connect: Option<SocketAddr>,
    /// `pingpong`: the TCP port of the exchange.
    tcp_port: u16,
}

fn number(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("not a number: {s}"))
}

fn address(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, UDP_PORT))
        .map_err(|_| format!("not an address: {s}"))
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mode = argv.next().ok_or("no mode")?;
    if !matches!(
        mode.as_str(),
        "server" | "check" | "bw" | "lat" | "pingpong"
    ) {
        return Err(format!("unknown mode {mode}"));
    }
    let mut a = Args {
        mode,
        peer: SocketAddr::new(IpAddr::from([127, 0, 0, 1]), UDP_PORT),
        bind: SocketAddr::new(IpAddr::from([0, 0, 0, 0]), UDP_PORT),
        ep: EndpointConfig {
            conn_id: 0,
            ..EndpointConfig::default()
        },
        region: RegionSpec {
            rkey: 0x1234,
            va: 0x10_0000,
            size: 1 << 20,
        },
        size: 65536,
        iters: 1000,
        depth: 16,
        time: 3600,
        impairment: Impairment::default(),
        connect: None,
        tcp_port: 18515,
    };
    let mut peer = None;
    while let Some(flag) = argv.next() {
        let v = argv.next().ok_or(format!("{flag} needs a value"))?;
        let n = || number(&v);
        let small = |max: u64| {
            n().and_then(|x| {
                if x <= max {
                    Ok(x)
                } else {
                    Err(format!("{flag} {v}: too large"))
                }
            })
        };
        match flag.as_str() {
            "--peer" => peer = Some(address(&v)?),
            "--connect" => a.connect = Some(address(&v)?),
            "--tcp-port" => a.tcp_port = small(u16::MAX.into())? as u16,
            "--bind" => a.bind = address(&v)?,
            "--qpn" => a.ep.local_qpn = small(0xff_ffff)? as u32,
            "--peer-qpn" => a.ep.remote_qpn = small(0xff_ffff)? as u32,
            "--psn" => a.ep.sq_psn = small(0xff_ffff)? as u32,
            "--peer-psn" => a.ep.rq_psn = small(0xff_ffff)? as u32,
            "--conn-id" => a.ep.conn_id = small(u32::MAX.into())? as u32,
            "--paths" => a.ep.paths = small(16)? as u8,
            "--mtu" => a.ep.mtu = small(9000)? as u32,
            "--rkey" => a.region.rkey = small(u32::MAX.into())? as u32,
            "--va" => a.region.va = n()?,
            "--region" => a.region.size = small(1 << 30)? as u32,
            "--size" => a.size = small(1 << 30)? as u32,
            "--iters" => a.iters = n()?,
            "--depth" => a.depth = small(64)?.max(1) as usize,
            "--time" => a.time = n()?,
            "--loss" => a.impairment.drop_ppm = small(1_000_000)? as u32,
            "--reorder" => a.impairment.reorder_ppm = small(1_000_000)? as u32,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if a.mode == "pingpong" {
        a.size = a.size.min(4096);
        a.iters = a.iters.min(1000);
    } else {
        a.peer = peer.ok_or("--peer is required")?;
    }
    if a.ep.conn_id == 0 {
        a.ep.conn_id = std::process::id() | 1;
    }
    a.impairment.seed = u64::from(std::process::id());
    if a.mode != "server" && a.size > a.region.size {
        return Err("--size exceeds --region".into());
    }
    Ok(a)
}

/// Speaks ibv_rc_pingpong's TCP exchange, then echoes (as its server) or
/// sends `iters` SENDs of `size` bytes and checks each echo (as its client).
fn pingpong(mut a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let local = Destination {
        qpn: a.ep.local_qpn,
        psn: a.ep.sq_psn,
        ip: if a.bind.ip().is_unspecified() {
            ANY_IP
        } else {
            a.bind.ip()
        },
    };
    let peer = match a.connect {
        Some(mut server) => {
            if server.port() == UDP_PORT {
                server.set_port(a.tcp_port);
            }
            exchange::connect(server, local)?
        }
        None => {
            let l = TcpListener::bind(SocketAddr::new(a.bind.ip(), a.tcp_port))?;
            exchange::accept(&l, local)?
        }
    };
    out!(
        "pingpong: peer QPN {:#x} PSN {:#x} at {}",
        peer.qpn,
        peer.psn,
        peer.ip
    );
    a.peer = SocketAddr::new(peer.ip, UDP_PORT);
    a.ep.remote_qpn = peer.qpn;
    a.ep.rq_psn = peer.psn;
    let sock = LossySocket::new(PathPorts::new(UdpSocket::bind(a.bind)?), a.impairment);
    let mut ep = Endpoint::new(sock, a.peer, a.ep).map_err(|e| format!("open QP: {e:?}"))?;
    if a.connect.is_none() {
        let end = Instant::now() + Duration::from_secs(a.time);
        let echoed = serve(&mut ep, a.region, || Instant::now() < end)?;
        out!("pingpong: echoed {echoed} SENDs");
        return Ok(());
    }
    let start = Instant::now();
    let mut r = Requester::new(&mut ep, a.region);
    for i in 0..a.iters {
        if let Err(e) = r.check_send_recv(a.size, i) {
            // What the transport saw, to tell loss from a peer that went quiet.
            eprintln!("pingpong: round trip {i} failed: {:?}", ep.stats());
            return Err(e.into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    out!(
        "pingpong: {} round trips of {} bytes checked in {secs:.3} s: {:.1} us per iteration",
        a.iters,
        a.size,
        secs * 1e6 / a.iters.max(1) as f64
    );
    Ok(())
}

fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.mode == "pingpong" {
        return pingpong(a);
    }
    let mut sock = LossySocket::new(PathPorts::new(UdpSocket::bind(a.bind)?), a.impairment);
    if a.mode == "server" {
        // One connection per client run: a CLOSE ends it, a new one opens,
        // with a new id (spec [MR-CONN-14]: a packet for the closed connection
        // must not reach the next one).
        let end = Instant::now() + Duration::from_secs(a.time);
        let mut cfg = a.ep;
        while Instant::now() < end {
            let mut ep = Endpoint::new(sock, a.peer, cfg).map_err(|e| format!("open QP: {e:?}"))?;
            cfg.conn_id = fresh_conn_id(cfg.conn_id);
            let echoed = serve(&mut ep, a.region, || Instant::now() < end)?;
            let s = ep.stats();
            out!(
                "server: connection done, {echoed} SENDs echoed, {} packets in, {} data out, {} retransmits",
                s.rx_packets, s.tx_data, s.tx_retransmits
            );
            sock = ep.into_transport();
        }
        return Ok(());
    }
    let mut ep = Endpoint::new(sock, a.peer, a.ep).map_err(|e| format!("open QP: {e:?}"))?;
    let mut r = Requester::new(&mut ep, a.region);
    match a.mode.as_str() {
        "check" => {
            for (i, len) in [1, 8, a.ep.mtu, a.ep.mtu + 1, a.size]
                .into_iter()
                .enumerate()
            {
                let len = len.min(a.region.size - 8).max(1);
                r.check_write_read(len, i as u64 + 1)?;
                out!("ok WRITE+READ {len} bytes");
                r.check_send_recv(len, i as u64 + 100)?;
                out!("ok SEND/RECV {len} bytes");
            }
            r.check_atomics()?;
            out!("ok FETCH_ADD + CMP_SWAP");
        }
        "bw" => {
            let bps = r.write_bandwidth(a.size, a.iters, a.depth)?;
            out!(
                "WRITE {} x {} bytes, depth {}: {:.1} MB/s",
                a.iters,
                a.size,
                a.depth,
                bps / 1e6
            );
        }
        _ => {
            let rtts = r.read_latency(a.size, a.iters.max(1))?;
            let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
            out!(
                "READ {} bytes x {}: round trip min {:.1} us, median {:.1} us, p99 {:.1} us",
                a.size,
                rtts.len(),
                at(0.0),
                at(0.5),
                at(0.99)
            );
        }
    }
    drop(r);
    for _ in 0..20 {
        ep.progress(Duration::from_millis(5))?;
    }
    let s = *ep.stats();
    ep.close()?;
    out!(
        "transport: {} data packets, {} retransmits, {} timeouts; socket dropped {} reordered {}",
        s.tx_data,
        s.tx_retransmits,
        s.timeouts,
        ep.transport().dropped,
        ep.transport().reordered
    );
    Ok(())
}

/// A random non-zero connection id other than `prev` (spec [MR-CONN-2]).
fn fresh_conn_id(prev: u32) -> u32 {
    use std::hash::{BuildHasher, Hasher};
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(prev);
        let id = h.finish() as u32;
        if id != 0 && id != prev {
            return id;
        }
    }
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("metaroce-user: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metaroce-user: {e}");
            ExitCode::FAILURE
        }
    }
}
