// SPDX-License-Identifier: GPL-2.0

//! The devices' side of the MetaRoCE UDP tunnel: per-namespace sockets on
//! [`UDP_PORT`], receive dispatch by ingress netdev, per-device counters and the debugfs
//! test transmitter.
//!
//! A received datagram goes to the transport engine of the device of the netdev it
//! came in on (or is counted as `rx_no_device` in its namespace).

use crate::counters::{self, NetCounters, Sources};
use crate::driver::MetaRoceDriver;
use crate::engine::Engine;
use core::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    str::FromStr,
};
use kernel::{
    debugfs::{self, Dir},
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
    uaccess::UserSliceReader,
};
use metaroce_proto::constants::UDP_PORT;
use rdma::{
    device::Registry,
    netdev::{NetDevice, NetDeviceId},
    udp::{DatagramHandler, Destination, Ecn, Received, TunnelRef, UdpTunnel, UdpTunnels},
};

/// Most datagrams one write to the `xmit` file sends.
const XMIT_MAX_COUNT: u32 = 100_000;
/// Largest test payload (a jumbo frame's worth).
const XMIT_MAX_LEN: usize = 9000;
/// Default test payload length.
const XMIT_DEFAULT_LEN: usize = 64;

/// Hands received datagrams to the device of their ingress netdev.
#[pin_data]
pub(crate) struct Demux {
    /// The devices' engines by netdev; taken in softirq context, hence IRQ-safe.
    #[pin]
    devices: SpinLockIrq<KVec<(NetDeviceId, Arc<Engine>)>>,
}

impl Demux {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- new_spinlock_irq!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    fn insert(&self, netdev: NetDeviceId, engine: Arc<Engine>) -> Result {
        self.devices.lock().push((netdev, engine), GFP_ATOMIC)?;
        Ok(())
    }

    fn remove(&self, engine: &Arc<Engine>) {
        let removed = {
            let mut devices = self.devices.lock();
            let i = devices.iter().position(|(_, e)| Arc::ptr_eq(e, engine));
            i.and_then(|i| devices.remove(i).ok())
        };
        // The `Arc` is dropped here, outside the lock.
        drop(removed);
    }
}

impl DatagramHandler for Demux {
    fn on_datagram(&self, rx: Received<'_>) {
        let id = rx.netdev().id();
        let engine = self
            .devices
            .lock()
            .iter()
            .find(|(d, _)| *d == id)
            .map(|(_, e)| e.clone());
        match engine {
            Some(e) => e.receive(rx),
            None => rx.discard_unclaimed(),
        }
    }
}

/// What the devices share: the tunnel registry and the debugfs directory.
pub(crate) struct NetContext {
    tunnels: Arc<UdpTunnels<Demux>>,
    debugfs: Dir,
}

impl NetContext {
    /// Creates the tunnel registry for [`UDP_PORT`] (no socket yet) and
    /// `/sys/kernel/debug/metaroce/`.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            tunnels: UdpTunnels::new(UDP_PORT, Demux::new()?)?,
            debugfs: Dir::new(c"metaroce"),
        })
    }
}

/// The network state of one device.
pub(crate) struct DeviceNet {
    counters: Arc<NetCounters>,
    engine: Arc<Engine>,
    tunnel: TunnelRef<Demux>,
    _xmit: Pin<KBox<debugfs::File<DeviceLookup>>>,
    _conns: Pin<KBox<debugfs::File<DeviceLookup>>>,
    _paths: Pin<KBox<debugfs::File<DeviceLookup>>>,
    _dir: Dir,
}

impl DeviceNet {
    /// Opens the tunnel of `netdev`'s namespace for the device `name` and creates its
    /// `xmit` file.
    pub(crate) fn new(
        ctx: &NetContext,
        registry: &Arc<Registry<MetaRoceDriver>>,
        netdev: &NetDevice,
        name: &CStr,
    ) -> Result<Self> {
        let counters = Arc::new(NetCounters::new(), GFP_KERNEL)?;
        let engine = Engine::new(registry.clone(), netdev, counters.clone())?;
        let tunnel = ctx.tunnels.open(netdev)?;
        let dir = ctx.debugfs.subdir(name);
        let xmit = KBox::pin_init(
            dir.write_callback_file(
                c"xmit",
                DeviceLookup {
                    registry: registry.clone(),
                    netdev: netdev.id(),
                },
                &xmit_write,
            ),
            GFP_KERNEL,
        )?;
        let conns = KBox::pin_init(
            dir.read_callback_file(
                c"conns",
                DeviceLookup {
                    registry: registry.clone(),
                    netdev: netdev.id(),
                },
                &conns_show,
            ),
            GFP_KERNEL,
        )?;
        let paths = KBox::pin_init(
            dir.read_callback_file(
                c"paths",
                DeviceLookup {
                    registry: registry.clone(),
                    netdev: netdev.id(),
                },
                &paths_show,
            ),
            GFP_KERNEL,
        )?;
        // Last, so that nothing fails after the device can receive.
        tunnel.handler().insert(netdev.id(), engine.clone())?;
        Ok(Self {
            counters,
            engine,
            tunnel,
            _xmit: xmit,
            _conns: conns,
            _paths: paths,
            _dir: dir,
        })
    }

    /// The device's transport engine.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The UDP tunnel of the device's namespace.
    pub(crate) fn tunnel(&self) -> &UdpTunnel<Demux> {
        &self.tunnel
    }

    /// Counts a transmission's outcome.
    pub(crate) fn count_tx(&self, ret: Result, len: usize) {
        self.counters.count_tx(ret, len);
    }

    /// The device's datagram counters.
    pub(crate) fn counters(&self) -> &NetCounters {
        &self.counters
    }

    /// Fills `values` in the order of [`counters::HW_COUNTERS`].
    pub(crate) fn read_counters(&self, values: &mut [u64]) {
        let sources = Sources {
            net: &self.counters,
            engine: &self.engine.stats,
            conns: self.engine.conns(),
            transport: self.engine.transport_counters(),
            ns: self.tunnel.stats(),
        };
        counters::read_port(&sources, values);
    }

    /// Sends `count` test datagrams of `len` bytes to `dst` on [`UDP_PORT`], ECT(0), from
    /// source ports `src_port`, `src_port + 1`, ... (skipping 0), through `netdev`.
    /// Returns the first error after trying all of them.
    fn xmit_test(
        &self,
        netdev: &NetDevice,
        dst: IpAddr,
        src_port: u16,
        count: u32,
        len: usize,
    ) -> Result {
        let src = match dst {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let mut payload = KVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            payload.push(b"MetaRoCE-test "[i % 14], GFP_KERNEL)?;
        }
        let mut first_err = Ok(());
        for i in 0..count {
            // Source ports cycle through 1..=65535.
            let port = (u32::from(src_port).saturating_sub(1) + i) % 65535 + 1;
            let to = Destination {
                src,
                dst,
                src_port: port as u16,
                dst_port: UDP_PORT,
                ecn: Ecn::Ect0,
            };
            let ret = self.tunnel.send_slice(netdev, &to, &payload, GFP_KERNEL);
            self.counters.count_tx(ret, len);
            if first_err.is_ok() {
                first_err = ret;
            }
        }
        first_err
    }
}

impl Drop for DeviceNet {
    fn drop(&mut self) {
        self.tunnel.handler().remove(&self.engine);
        self.engine.shutdown_all();
    }
}

/// The data of a device's debugfs files: how to find the device.
struct DeviceLookup {
    registry: Arc<Registry<MetaRoceDriver>>,
    netdev: NetDeviceId,
}

/// Writing `DST_IP SRC_PORT COUNT [LEN]` to `/sys/kernel/debug/metaroce/DEV/xmit` sends
/// COUNT test datagrams (see [`DeviceNet::xmit_test`]).
fn xmit_write(file: &DeviceLookup, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 128];
    let n = reader.len();
    if n >= buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    let text = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?;
    let mut words = text.split_ascii_whitespace();
    let dst = IpAddr::from_str(words.next().ok_or(EINVAL)?).map_err(|_| EINVAL)?;
    let src_port: u16 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let count: u32 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let len: usize = match words.next() {
        Some(w) => w.parse().map_err(|_| EINVAL)?,
        None => XMIT_DEFAULT_LEN,
    };
    if words.next().is_some() || src_port == 0 || count > XMIT_MAX_COUNT || len > XMIT_MAX_LEN {
        return Err(EINVAL);
    }
    let dev = file.registry.get_by_netdev(file.netdev).ok_or(ENODEV)?;
    let netdev = dev.netdev().ok_or(ENODEV)?;
    dev.data()
        .net()
        .xmit_test(&netdev, dst, src_port, count, len)
}

/// Reading `/sys/kernel/debug/metaroce/DEV/conns` shows the state of the device's
/// connections: each one's execution context, protocol core and bound QPs (see
/// Documentation/metaroce/driver.rst, "Troubleshooting").
fn conns_show(file: &DeviceLookup, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match file.registry.get_by_netdev(file.netdev) {
        Some(dev) => dev.data().net().engine().write_conns(f),
        None => writeln!(f, "no device"),
    }
}

/// Reading `/sys/kernel/debug/metaroce/DEV/paths` shows each open connection's rate
/// hints and the state of each of its paths, one line each (see
/// Documentation/metaroce/driver.rst, "Paths").
fn paths_show(file: &DeviceLookup, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match file.registry.get_by_netdev(file.netdev) {
        Some(dev) => dev.data().net().engine().write_paths(f),
        None => writeln!(f, "no device"),
    }
}
