//! The benchmark at a tiny size, so that it cannot rot: it must run, reach GC steady state and
//! report sane figures. Speed targets are checked by `make bench`, not here.

#[test]
fn tiny_simspeed_runs_and_reports_sane_figures() {
    let r = ssdlab_benches::run(&ssdlab_benches::Params::tiny()).expect("the tiny bench runs");
    assert!(r.random_write_req_per_s > 0.0 && r.random_read_req_per_s > 0.0);
    for utilisation in [
        r.random_write_die_utilisation,
        r.random_read_die_utilisation,
    ] {
        assert!(
            utilisation > 0.0 && utilisation <= 1.0,
            "die utilisation {utilisation} outside (0, 1]"
        );
    }
    assert!(
        r.random_write_waf > 1.0,
        "random writes after preconditioning must trigger GC: {r:?}"
    );
    // `run` refuses a WAF outside the analytic model's range (widened by the tolerance); the
    // range itself is that of a device in GC steady state.
    let (low, high) = r.random_write_model_waf;
    assert!(1.0 < low && low < high, "model range {low}-{high}");
    let tolerance = ssdlab_benches::MODEL_WAF_TOLERANCE;
    assert!(
        (low * (1.0 - tolerance)..=high * (1.0 + tolerance)).contains(&r.random_write_waf),
        "{r:?}"
    );
    assert!(r.physical_pages > 0 && r.logical_bytes > 0);
    if let Some(b) = r.bytes_per_physical_page {
        assert!(b < 64.0, "device state should be a few bytes per page: {b}");
    }
    // The FTL alone on the same device and writes: in GC steady state, and copying no more
    // than the timed run, whose background GC only adds early collections.
    let a = ssdlab_benches::ftl_alone(&ssdlab_benches::Params::tiny()).expect("the FTL alone runs");
    assert!(a.random_write_per_s > 0.0, "{a:?}");
    assert!(
        a.moves_per_write > 1.0 && a.moves_per_write + 1.0 <= r.random_write_waf,
        "GC moves per write alone {a:?}, timed run's WAF {}",
        r.random_write_waf
    );
}
