//! Greedy victim selection: the full block with the fewest valid pages (least copying now).
//! The classic policy analysed by Hu et al. (SYSTOR 2009) and Desnoyers (SYSTOR 2012).

use super::{BlockState, PlaneView, VictimPolicy};

pub struct Greedy;

impl VictimPolicy for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn select(&mut self, view: &PlaneView<'_>) -> Option<usize> {
        let mut best: Option<(u32, usize)> = None;
        for (i, (&valid, &state)) in view.valid_pages.iter().zip(view.state).enumerate() {
            if state == BlockState::Full && best.is_none_or(|(v, _)| valid < v) {
                best = Some((valid, i));
                if valid == 0 {
                    break;
                }
            }
        }
        best.map(|(_, i)| i)
    }
}
