//! The picture's bound in rails: past [`MAX_LANES`] lanes, the rails with
//! the least happening are folded into one summary line instead of being
//! drawn (4,096 devices × 16 ports made a 92 MB page). A step between
//! building the model and drawing it; nothing else changes.

use std::collections::HashSet;

use crate::model::{Kind, Lane, Model};

/// The most lanes drawn.
pub const MAX_LANES: usize = 256;

/// What the folded rails were, told in a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    /// Rails not drawn.
    pub rails: usize,
    /// Of those, how many ended active, paused and inert.
    pub active: usize,
    /// Ended paused.
    pub paused: usize,
    /// Ended inert.
    pub inert: usize,
    /// Their recoveries.
    pub recoveries: usize,
    /// Their marks (events, drains).
    pub marks: usize,
    /// The rails drawn, by name (the summary table shows these only).
    pub drawn: HashSet<String>,
}

/// How much happens in a lane: what the picture is for.
fn activity(lane: &Lane) -> usize {
    lane.runs.len() + lane.recoveries.len() + lane.gens.len() + lane.marks.len()
}

/// Keeps the [`MAX_LANES`] lanes with the most happening (in their order;
/// ties to the earlier), folding the others; `None` when all fit.
pub fn fold(model: &mut Model) -> Option<Folded> {
    if model.lanes.len() <= MAX_LANES {
        return None;
    }
    let mut order: Vec<usize> = (0..model.lanes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(activity(&model.lanes[i])));
    let mut kept = vec![false; model.lanes.len()];
    for &i in &order[..MAX_LANES] {
        kept[i] = true;
    }
    let mut folded = Folded::default();
    let lanes = std::mem::take(&mut model.lanes);
    for (lane, keep) in lanes.into_iter().zip(kept) {
        if keep {
            folded.drawn.insert(lane.name.clone());
            model.lanes.push(lane);
            continue;
        }
        folded.rails += 1;
        match lane.runs.last().map(|r| r.state.kind) {
            Some(Kind::Paused) => folded.paused += 1,
            Some(Kind::Inert) => folded.inert += 1,
            _ => folded.active += 1,
        }
        folded.recoveries += lane.recoveries.len();
        folded.marks += lane.marks.len();
    }
    Some(folded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Run, State};

    fn lane(name: &str, runs: usize) -> Lane {
        let runs = (0..runs)
            .map(|i| Run {
                start: i as u64,
                end: i as u64 + 1,
                state: State { kind: if i % 2 == 0 { Kind::Active } else { Kind::Paused }, reason: None },
                line: None,
            })
            .collect();
        Lane { name: name.into(), runs, ..Lane::default() }
    }

    #[test]
    fn the_busiest_lanes_are_kept_in_order_and_the_rest_told() {
        let mut model =
            Model { lanes: (0..MAX_LANES + 10).map(|i| lane(&format!("d{i}/1"), 1)).collect(), ..Model::default() };
        model.lanes[MAX_LANES + 9] = lane("busy/1", 6);
        let folded = fold(&mut model).expect("folded");
        assert_eq!(model.lanes.len(), MAX_LANES);
        assert_eq!(folded.rails, 10);
        assert!(folded.drawn.contains("busy/1"), "the busy one is drawn");
        assert_eq!(model.lanes.last().unwrap().name, "busy/1", "in its order");
        assert_eq!((folded.active, folded.paused, folded.inert), (10, 0, 0));
        let mut small = Model { lanes: vec![lane("a/1", 1)], ..Model::default() };
        assert_eq!(fold(&mut small), None);
    }
}
