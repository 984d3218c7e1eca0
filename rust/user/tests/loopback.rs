// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Two endpoints over loopback UDP: every verb with its data checked, clean and
//! through a socket that drops and reorders.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use metaroce_user::{
    serve, Endpoint, EndpointConfig, Impairment, LossySocket, PathPorts, RegionSpec, Requester,
};

const REGION: RegionSpec = RegionSpec {
    rkey: 0x1234,
    va: 0x10_0000,
    size: 64 * 1024,
};

fn config(local_qpn: u32, remote_qpn: u32, conn_id: u32, psns: (u32, u32)) -> EndpointConfig {
    EndpointConfig {
        local_qpn,
        remote_qpn,
        sq_psn: psns.0,
        rq_psn: psns.1,
        conn_id,
        paths: 4,
        mtu: 1024,
    }
}

/// Runs a server and `client` against it, each side's sends impaired as `impairment` says.
fn pair<F>(impairment: Impairment, client: F)
where
    F: FnOnce(&mut Requester<'_, LossySocket<PathPorts>>) + Send + 'static,
{
    let s_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let c_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (s_addr, c_addr) = (s_sock.local_addr().unwrap(), c_sock.local_addr().unwrap());
    let server_imp = Impairment {
        seed: impairment.seed ^ 0x5eed,
        ..impairment
    };
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let server = thread::spawn(move || {
        let sock = LossySocket::new(PathPorts::new(s_sock), server_imp);
        let mut ep = Endpoint::new(sock, c_addr, config(0x22, 0x11, 2, (500, 7000))).unwrap();
        serve(&mut ep, REGION, || !stop.load(Ordering::Relaxed)).unwrap()
    });
    let sock = LossySocket::new(PathPorts::new(c_sock), impairment);
    let mut ep = Endpoint::new(sock, s_addr, config(0x11, 0x22, 1, (7000, 500))).unwrap();
    {
        let mut r = Requester::new(&mut ep, REGION);
        client(&mut r);
    }
    // Let the last ACKs reach the server before it hears CLOSE.
    for _ in 0..20 {
        ep.progress(Duration::from_millis(5)).unwrap();
    }
    ep.close().unwrap();
    done.store(true, Ordering::Relaxed);
    let echoed = server.join().unwrap();
    assert!(echoed <= 1000);
    let s = ep.stats();
    assert!(s.rx_packets > 0, "{s:?}");
    if impairment.drop_ppm > 0 {
        // The impairment bit, and the core repaired it.
        assert!(ep.transport().dropped > 0);
        assert!(s.tx_retransmits > 0, "{s:?}");
    }
}

fn every_verb(r: &mut Requester<'_, LossySocket<PathPorts>>) {
    for (i, len) in [1u32, 8, 1000, 1024, 1025, 4096, 60_000]
        .into_iter()
        .enumerate()
    {
        r.check_write_read(len, i as u64 + 1)
            .unwrap_or_else(|e| panic!("WRITE/READ {len}: {e}"));
        r.check_send_recv(len, i as u64 + 100)
            .unwrap_or_else(|e| panic!("SEND/RECV {len}: {e}"));
    }
    r.check_atomics().unwrap_or_else(|e| panic!("atomics: {e}"));
    r.check_atomics()
        .unwrap_or_else(|e| panic!("atomics again: {e}"));
}

#[test]
fn loopback_clean_every_verb() {
    pair(Impairment::default(), every_verb);
}

#[test]
fn loopback_lossy_every_verb() {
    let imp = Impairment {
        drop_ppm: 20_000,
        reorder_ppm: 50_000,
        seed: 42,
    };
    pair(imp, every_verb);
}

#[test]
fn loopback_write_bandwidth_under_loss() {
    let imp = Impairment {
        drop_ppm: 10_000,
        reorder_ppm: 10_000,
        seed: 7,
    };
    pair(imp, |r| {
        let bps = r.write_bandwidth(16 * 1024, 200, 16).unwrap();
        assert!(bps > 0.0);
        r.check_write_read(32 * 1024, 9).unwrap();
    });
}
