//! Cost-benefit victim selection (Rosenblum & Ousterhout, LFS, SOSP 1991; Kawaguchi et al.,
//! USENIX 1995): maximise age·(1−u)/(2u), where u is the block's valid fraction and age the time
//! since its newest write; old, mostly-invalid blocks are cheap to clean and unlikely to be
//! invalidated further if left alone.

use super::{BlockState, PlaneView, VictimPolicy};

pub struct CostBenefit;

impl VictimPolicy for CostBenefit {
    fn name(&self) -> &'static str {
        "cost_benefit"
    }

    fn select(&mut self, view: &PlaneView<'_>) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        for i in 0..view.state.len() {
            if view.state[i] != BlockState::Full {
                continue;
            }
            let u = view.valid_pages[i] as f64 / view.pages_per_block as f64;
            let age = view.now_ns.saturating_sub(view.last_write_ns[i]) as f64 + 1.0;
            let score = if u == 0.0 {
                f64::INFINITY
            } else {
                age * (1.0 - u) / (2.0 * u)
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }
}
