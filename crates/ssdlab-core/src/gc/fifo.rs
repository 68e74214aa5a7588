//! FIFO (least-recently-written) victim selection: reclaim blocks in the order they filled, as a
//! log-structured store cleans its oldest segment. Desnoyers (SYSTOR 2012) gives its write
//! amplification under uniform traffic in closed form.

use super::{BlockState, PlaneView, VictimPolicy};

pub struct Fifo;

impl VictimPolicy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn select(&mut self, view: &PlaneView<'_>) -> Option<usize> {
        view.state
            .iter()
            .zip(view.closed_seq)
            .enumerate()
            .filter(|(_, (&state, _))| state == BlockState::Full)
            .min_by_key(|(_, (_, &seq))| seq)
            .map(|(i, _)| i)
    }
}
