//! Plane allocation: which plane (and so which die and channel) receives each host page.
//!
//! A policy sees, per die, when the work already queued on it will be done, and chooses; the
//! FTL then fills that plane's frontier for the page's placement handle. Placement handles keep
//! their own open blocks per plane, so the choice of plane never mixes handles in a block.
//! Adding a policy touches its own file and the registry in [`plane_allocator`].

mod dynamic;
mod stripe;
mod wordline;

pub use dynamic::LeastLoaded;
pub use stripe::Stripe;
pub use wordline::WordlineStripe;

use crate::config::AllocationKind;
use crate::nand::Geometry;

/// Chooses the plane of the next host page.
pub trait PlaneAllocator: Send {
    fn name(&self) -> &'static str;
    /// The plane for the next host page of `handle`. `die_free_ns[d]` is when die `d` will
    /// have finished the work already given to it; `now_ns` is the current time (a die free
    /// before it is idle, and all idle dies are equal).
    fn choose(&mut self, handle: u32, die_free_ns: &[u64], now_ns: u64) -> u32;
}

/// The policy registry.
pub fn plane_allocator(
    kind: AllocationKind,
    geo: &Geometry,
    handles: u32,
) -> Box<dyn PlaneAllocator> {
    match kind {
        AllocationKind::Dynamic => Box::new(LeastLoaded::new(geo, handles)),
        AllocationKind::Static => Box::new(Stripe::new(geo, handles)),
        AllocationKind::Wordline => Box::new(WordlineStripe::new(geo, handles)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn geometry() -> Geometry {
        let cfg = Config::from_toml(
            "[geometry]\nchannels=2\nchips_per_channel=2\ndies_per_chip=1\nplanes_per_die=2\nblocks_per_plane=32\npages_per_block=16\nover_provisioning=0.3\n[cell]\ntype=\"slc\"\n",
            "t",
            &[],
        )
        .unwrap();
        Geometry::new(&cfg, &cfg.derived())
    }

    #[test]
    fn on_an_idle_device_both_policies_stripe_channel_first() {
        let geo = geometry();
        let idle = vec![0u64; geo.dies as usize];
        let mut stripe = Stripe::new(&geo, 1);
        let mut dynamic = LeastLoaded::new(&geo, 1);
        for i in 0..16 {
            let s = stripe.choose(0, &idle, 100);
            assert_eq!(s, geo.stripe_order[i % geo.planes as usize]);
            assert_eq!(dynamic.choose(0, &idle, 100), s, "page {i}");
        }
    }

    #[test]
    fn dynamic_avoids_busy_dies_and_static_does_not() {
        let geo = geometry();
        // Every die but the last is busy far into the future.
        let mut load = vec![1_000_000u64; geo.dies as usize];
        let last = geo.dies - 1;
        load[last as usize] = 0;
        let mut dynamic = LeastLoaded::new(&geo, 2);
        for _ in 0..8 {
            let plane = dynamic.choose(1, &load, 10);
            assert_eq!(geo.die_of_plane(plane), last);
        }
        let mut stripe = Stripe::new(&geo, 2);
        let dies: std::collections::BTreeSet<u32> = (0..8)
            .map(|_| geo.die_of_plane(stripe.choose(1, &load, 10)))
            .collect();
        assert_eq!(dies.len(), geo.dies as usize);
    }

    #[test]
    fn dynamic_takes_the_first_least_loaded_die_from_its_cursor_in_stripe_order() {
        let geo = geometry();
        let mut order: Vec<u32> = Vec::new();
        for &plane in &geo.stripe_order {
            let die = geo.die_of_plane(plane);
            if !order.contains(&die) {
                order.push(die);
            }
        }
        let n = order.len();
        let mut dynamic = LeastLoaded::new(&geo, 1);
        let mut cursor = 0;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for case in 0..2000 {
            // Few distinct loads, so that ties (and idle dies, at `now`) are common.
            let mut next = || rng.gen_range(0..4u64) * 100;
            let load: Vec<u64> = (0..geo.dies).map(|_| next()).collect();
            let now = next();
            let key = |pos: usize| load[order[pos] as usize].max(now);
            let best = (0..n)
                .map(|k| (cursor + k) % n)
                .min_by_key(|&pos| key(pos))
                .expect("dies");
            let plane = dynamic.choose(0, &load, now);
            assert_eq!(geo.die_of_plane(plane), order[best], "case {case}");
            cursor = (best + 1) % n;
        }
    }
}
