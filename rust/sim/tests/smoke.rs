use metaroce_sim::scenario::*;
use metaroce_sim::workload::FlowSpec;
use metaroce_sim::world::DriveLimits;

#[test]
fn smoke_meta() { metaroce_sim::with_stack(|| {
    let mut w = build_world(pair_network(8), Transport::meta(8), 1);
    w.add_flow(FlowSpec::writes(0, 1, 16, 65536, true));
    let r = w.drive(DriveLimits::default());
    println!("{r:?} events {} spins {}", w.events(), w.timer_spins);
    for h in &w.hosts { println!("{:?}", h.stats()); }
    assert_eq!(w.errors(), Vec::<String>::new());
    r.unwrap();
})}

#[test]
fn smoke_gbn() { metaroce_sim::with_stack(|| {
    let mut w = build_world(pair_network(8), Transport::gbn(), 1);
    w.add_flow(FlowSpec::writes(0, 1, 16, 65536, true));
    let r = w.drive(DriveLimits::default());
    println!("{r:?} events {}", w.events());
    for h in &w.hosts { println!("{:?}", h.stats()); }
    assert_eq!(w.errors(), Vec::<String>::new());
    r.unwrap();
})}
