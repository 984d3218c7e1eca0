// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Two connected connections driven by fuzz input: posts, deliveries (with
//! drops, duplicates and byte flips), raw datagrams, and time. Must never
//! panic or overflow, whatever the peer sends.

#![no_main]

use libfuzzer_sys::fuzz_target;
use metaroce_proto::constants::MIN_TRANSMIT_BUF;
use metaroce_proto::{
    AtomicOp, Config, Connection, Dest, Instant, MemError, Memory, Opcode, Payload, QpId,
    RxPayload, WorkRequest,
};
use pin_init::InPlaceInit;

/// Memory that accepts rkey 1 over [0, 64 KiB) and checks bounds, with a few shared
/// receives (an SRQ) for QPs that run out of their own.
struct Mem {
    shared: u32,
}

impl Memory for Mem {
    fn place(&mut self, _: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        match dest {
            Dest::Remote { rkey: 1, va }
                if va
                    .checked_add(data.len() as u64)
                    .is_some_and(|e| e <= 65536) =>
            {
                Ok(())
            }
            Dest::Remote { .. } => Err(MemError::Access),
            _ => Ok(()),
        }
    }
    fn place_split(&mut self, _: QpId, dest: Dest, data: RxPayload<'_>) -> Result<(), MemError> {
        match dest {
            Dest::Remote { rkey: 1, va }
                if va.checked_add(data.len()).is_some_and(|e| e <= 65536) =>
            {
                Ok(())
            }
            Dest::Remote { .. } => Err(MemError::Access),
            _ => Ok(()),
        }
    }
    fn check_read(&mut self, _: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        if rkey == 1 && va.checked_add(u64::from(len)).is_some_and(|e| e <= 65536) {
            Ok(())
        } else {
            Err(MemError::Access)
        }
    }
    fn atomic(&mut self, _: QpId, rkey: u32, va: u64, _: AtomicOp) -> Result<u64, MemError> {
        if rkey == 1 && va.is_multiple_of(8) && va < 65536 {
            Ok(va)
        } else {
            Err(MemError::Access)
        }
    }
    fn take_shared_recv(&mut self, _: QpId) -> Option<(u64, u32)> {
        self.shared = self.shared.checked_sub(1)?;
        Some((1000 + u64::from(self.shared), 4096))
    }
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from(self.byte()?) << 8 | u16::from(self.byte()?))
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let now0 = Instant::from_nanos(1_000_000);
    let mut cfg = Config::new(0x11);
    cfg.mtu = 256;
    cfg.paths = 4;
    // Probe timeouts ([MR-RTX-15]) for half the inputs (the first byte, not consumed).
    cfg.tail_probe = data.first().is_some_and(|b| b & 0x40 != 0);
    let mut conns = [
        Box::init(Connection::init_aimd(cfg, now0, 1)).unwrap_or_else(|e| match e {}),
        {
            cfg.local_conn_id = 0x22;
            cfg.peer_conn_id = 0x11;
            Box::init(Connection::init_aimd(cfg, now0, 2)).unwrap_or_else(|e| match e {})
        },
    ];
    let qp = [
        conns[0].open_qp(1, 2).unwrap(),
        conns[1].open_qp(2, 1).unwrap(),
    ];
    let mut now = now0;
    let mut queue: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut buf = vec![0u8; MIN_TRANSMIT_BUF];
    let mut next_id = 1u64;
    while let Some(op) = input.byte() {
        let side = usize::from(op >> 7);
        match op & 0x7 {
            0 => {
                let kind = input.byte().unwrap_or(0);
                let len = u32::from(input.u16().unwrap_or(0)) % 4096;
                let opcode = [
                    Opcode::Send,
                    Opcode::SendImm,
                    Opcode::Write,
                    Opcode::WriteImm,
                    Opcode::Read,
                    Opcode::CompareSwap,
                    Opcode::FetchAdd,
                ][usize::from(kind % 7)];
                let wr = WorkRequest {
                    wr_id: next_id,
                    opcode,
                    len,
                    rkey: u32::from(kind >> 6),
                    remote_addr: u64::from(kind & 0x38),
                    ack_req: next_id.is_multiple_of(2),
                    ..Default::default()
                };
                next_id += 1;
                let _ = conns[side].post_send(qp[side], wr);
            }
            1 => {
                let len = u32::from(input.u16().unwrap_or(0));
                let _ = conns[side].post_recv(qp[side], next_id, len);
                next_id += 1;
            }
            2 => {
                while let Some(t) = conns[side].poll_transmit(now, &mut buf) {
                    let mut pkt = buf[..t.len].to_vec();
                    let plen = t.payload.as_ref().map_or(0, Payload::len);
                    pkt.resize(t.len + plen as usize, 0xab);
                    queue.push((1 - side, pkt));
                    if queue.len() > 4096 {
                        break;
                    }
                }
            }
            3 => {
                let i = usize::from(input.byte().unwrap_or(0));
                if !queue.is_empty() {
                    let (to, mut pkt) = queue.swap_remove(i % queue.len());
                    let flip = input.byte().unwrap_or(0);
                    if flip & 1 == 1 && !pkt.is_empty() {
                        let at = usize::from(input.byte().unwrap_or(0)) % pkt.len();
                        pkt[at] ^= input.byte().unwrap_or(1);
                    }
                    if flip & 2 == 2 {
                        queue.push((to, pkt.clone()));
                    }
                    let mut mem = Mem {
                        shared: u32::from(flip >> 4) & 3,
                    };
                    if flip & 8 == 8 {
                        // In two pieces, as a driver hands over a socket buffer's
                        // linear part and pages; the split may cut the headers.
                        let at = usize::from(input.byte().unwrap_or(0)) * pkt.len() / 255;
                        let (head, tail) = pkt.split_at(at.min(pkt.len()));
                        let _ = conns[to].handle_datagram_split(
                            now,
                            flip & 4 == 4,
                            head,
                            tail.len() as u32,
                            &mut mem,
                        );
                    } else {
                        let _ = conns[to].handle_datagram(now, flip & 4 == 4, &pkt, &mut mem);
                    }
                }
            }
            4 => {
                let i = usize::from(input.byte().unwrap_or(0));
                if !queue.is_empty() {
                    queue.swap_remove(i % queue.len());
                }
            }
            5 => {
                let dt = u64::from(input.u16().unwrap_or(0)) * 100;
                now = now.add_nanos(dt);
                for c in conns.iter_mut() {
                    c.handle_timeout(now);
                }
            }
            6 => {
                let n = usize::from(input.byte().unwrap_or(0));
                let raw = input.bytes(n).to_vec();
                let _ = conns[side].handle_datagram(now, false, &raw, &mut Mem { shared: 1 });
            }
            _ => {
                if let Some(t) = conns[side].poll_timeout() {
                    now = now.max(t);
                    conns[side].handle_timeout(now);
                }
            }
        }
        for c in conns.iter_mut() {
            while c.poll_event().is_some() {}
        }
    }
});
