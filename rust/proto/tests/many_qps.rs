// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! One connection per peer pair carrying a thousand QPs, in a store that grows
//! when every slot is taken (as the kernel driver's does).

mod common;

use metaroce_proto::cc::Aimd;
use metaroce_proto::constants::MIN_TRANSMIT_BUF;
use metaroce_proto::{
    AtomicOp, Config, Connection, Dest, Event, Instant, MemError, Memory, Opcode, PostError, QpId,
    QpSlot, QpStore, WcStatus, WorkRequest,
};
use pin_init::InPlaceInit;

/// A growable store of boxed slots.
#[derive(Default)]
struct VecStore(Vec<Box<QpSlot>>);

impl QpStore for VecStore {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Option<&QpSlot> {
        self.0.get(i).map(|b| &**b)
    }
    fn get_mut(&mut self, i: usize) -> Option<&mut QpSlot> {
        self.0.get_mut(i).map(|b| &mut **b)
    }
}

type Conn = Connection<Aimd, VecStore>;

/// Counts placed bytes per QP; refuses nothing.
#[derive(Default)]
struct Mem {
    placed: Vec<u64>,
}

impl Memory for Mem {
    fn place(&mut self, qp: QpId, _: Dest, data: &[u8]) -> Result<(), MemError> {
        let i = qp.index();
        if self.placed.len() <= i {
            self.placed.resize(i + 1, 0);
        }
        self.placed[i] += data.len() as u64;
        Ok(())
    }
    fn check_read(&mut self, _: QpId, _: u32, _: u64, _: u32) -> Result<(), MemError> {
        Ok(())
    }
    fn atomic(&mut self, _: QpId, _: u32, _: u64, _: AtomicOp) -> Result<u64, MemError> {
        Ok(0)
    }
}

fn conn(local: u32, peer: u32) -> Box<Conn> {
    let mut cfg = Config::new(local);
    cfg.peer_conn_id = peer;
    cfg.mtu = 1024;
    Box::init(Connection::init_with(
        cfg,
        Aimd::new(cfg.aimd),
        VecStore::default(),
        Instant::from_nanos(1),
        u64::from(local),
    ))
    .unwrap_or_else(|e| match e {})
}

/// Binds a QP, adding a slot when all are taken.
fn open(c: &mut Conn, local: u32, remote: u32) -> QpId {
    match c.open_qp_psn(local, remote, 0, 0) {
        Ok(id) => id,
        Err(PostError::TooManyQps) => {
            c.qps_mut()
                .0
                .push(Box::init(QpSlot::init()).unwrap_or_else(|e| match e {}));
            c.open_qp_psn(local, remote, 0, 0).unwrap()
        }
        Err(e) => panic!("open_qp_psn: {e:?}"),
    }
}

// spec: MR-QP-5, MR-QP-7
#[test]
fn a_thousand_qps_share_one_connection() {
    const N: u32 = 1000;
    let mut c = [conn(0x11, 0), conn(0x22, 0x11)];
    let mut mem = [Mem::default(), Mem::default()];
    let ids: Vec<(QpId, QpId)> = (0..N)
        .map(|i| {
            (
                open(&mut c[0], 100 + i, 5000 + i),
                open(&mut c[1], 5000 + i, 100 + i),
            )
        })
        .collect();
    assert_eq!(c[0].qps().len(), N as usize);
    for (k, &(a, b)) in ids.iter().enumerate() {
        c[1].post_recv(b, 1, 4096).unwrap();
        let wr = WorkRequest {
            wr_id: k as u64,
            opcode: Opcode::Send,
            len: 100 + k as u32,
            ..Default::default()
        };
        c[0].post_send(a, wr).unwrap();
    }
    let (mut now, mut buf) = (Instant::from_nanos(1), vec![0u8; MIN_TRANSMIT_BUF]);
    let mut done = [0usize; 2];
    for _ in 0..20_000 {
        now = now.add_nanos(2_000);
        for side in 0..2 {
            let mut out = Vec::new();
            while let Some(t) = c[side].poll_transmit(now, &mut buf) {
                let mut pkt = buf[..t.len].to_vec();
                pkt.resize(t.len + t.payload.map_or(0, |p| p.len() as usize), 0xab);
                out.push(pkt);
            }
            for pkt in out {
                let _ = c[1 - side].handle_datagram(now, false, &pkt, &mut mem[1 - side]);
            }
            if c[side].poll_timeout().is_some_and(|t| t <= now) {
                c[side].handle_timeout(now);
            }
            while let Some(e) = c[side].poll_event() {
                if let Event::Completion(cq) = e {
                    assert_eq!(cq.status, WcStatus::Success);
                    done[side] += 1;
                }
            }
        }
        if done == [N as usize; 2] {
            break;
        }
    }
    assert_eq!(done, [N as usize; 2]);
    for (k, &(_, b)) in ids.iter().enumerate() {
        assert_eq!(mem[1].placed[b.index()], 100 + k as u64);
    }
    // Slots are reused: closing one QP and opening another takes no new slot.
    c[0].close_qp(ids[7].0);
    let again = open(&mut c[0], 99_999, 1);
    assert_eq!(again, ids[7].0);
    assert_eq!(c[0].qps().len(), N as usize);
}
