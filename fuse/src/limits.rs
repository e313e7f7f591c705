//! How much of the mount's work one source may hold: at most `running` of
//! its backend calls at once, at most `running + waiting` of its requests
//! admitted at all (running or waiting for a turn). A request past that is
//! refused at once, so a flood of reads on a stalled source costs a bounded
//! number of tasks, and no source's requests ever wait on another's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits of every source, made on first use and dropped once no
/// request of theirs is left.
#[derive(Debug)]
pub(crate) struct SourceLimits {
    running: usize,
    admitted: usize,
    gates: Mutex<HashMap<String, Arc<Gate>>>,
}

#[derive(Debug)]
struct Gate {
    /// Turns at the backend.
    running: Arc<Semaphore>,
    /// Requests running or waiting for a turn.
    admitted: Arc<Semaphore>,
}

/// A request admitted for one source; holding it counts against the
/// source's bound until it is dropped.
#[derive(Debug)]
pub(crate) struct Admission {
    _permit: OwnedSemaphorePermit,
}

/// A turn at one source's backend, given back when dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    _permit: OwnedSemaphorePermit,
}

impl SourceLimits {
    /// `running` backend calls of one source at once (at least one), and
    /// `waiting` more of its requests waiting for a turn.
    pub(crate) fn new(running: usize, waiting: usize) -> Self {
        let running = running.max(1);
        SourceLimits {
            running,
            admitted: running.saturating_add(waiting).min(Semaphore::MAX_PERMITS),
            gates: Mutex::new(HashMap::new()),
        }
    }

    /// Admits one more request of `source`, or `None` when as many as its
    /// bound are running or waiting already. Never waits.
    pub(crate) fn admit(&self, source: &str) -> Option<Admission> {
        let permit = Arc::clone(&self.gate(source).admitted).try_acquire_owned().ok()?;
        Some(Admission { _permit: permit })
    }

    /// Waits for a turn at `source`'s backend: at most `running` are out at
    /// once, per source; other sources' turns are never waited on.
    pub(crate) async fn turn(&self, source: &str) -> Turn {
        let running = Arc::clone(&self.gate(source).running);
        let permit = running
            .acquire_owned()
            .await
            .expect("a source's semaphore is never closed");
        Turn { _permit: permit }
    }

    fn gate(&self, source: &str) -> Arc<Gate> {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(gate) = gates.get(source) {
            return Arc::clone(gate);
        }
        // A gate nobody holds has every permit free: forgetting it loses
        // nothing, and keeps the map to the sources in use.
        gates.retain(|_, gate| Arc::strong_count(gate) > 1 || gate.in_use());
        let gate = Arc::new(Gate {
            running: Arc::new(Semaphore::new(self.running)),
            admitted: Arc::new(Semaphore::new(self.admitted)),
        });
        gates.insert(source.to_owned(), Arc::clone(&gate));
        gate
    }
}

impl Gate {
    /// True while a permit of it is out (an admission or a turn outlives
    /// the `Arc` it was taken through).
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.running) > 1 || Arc::strong_count(&self.admitted) > 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One step of a model run.
    #[derive(Debug, Clone)]
    enum Step {
        /// A request of source `0` arrives.
        Admit(usize),
        /// The oldest admitted request of a source that has none running
        /// takes a turn, if one is free.
        Turn(usize),
        /// The oldest request of a source ends (answered or timed out).
        Finish(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..3usize).prop_map(Step::Admit),
            (0..3usize).prop_map(Step::Turn),
            (0..3usize).prop_map(Step::Finish),
        ]
    }

    fn try_turn(limits: &SourceLimits, source: &str) -> Option<Turn> {
        let running = Arc::clone(&limits.gate(source).running);
        running.try_acquire_owned().ok().map(|permit| Turn { _permit: permit })
    }

    proptest! {
        /// Whatever arrives and ends in whatever order: a source never has
        /// more than `running` turns or `running + waiting` admissions out,
        /// a request is admitted whenever its own source is under its
        /// bound (whatever the others hold), and a source whose requests
        /// all ended leaves nothing behind.
        #[test]
        fn each_source_is_bounded_on_its_own(
            running in 1..4usize,
            waiting in 0..4usize,
            steps in proptest::collection::vec(step(), 0..200),
        ) {
            let limits = SourceLimits::new(running, waiting);
            let names = ["a", "b", "c"];
            // Per source: admitted requests, each with its turn if it has one.
            let mut held: Vec<Vec<(Admission, Option<Turn>)>> = vec![Vec::new(), Vec::new(), Vec::new()];
            for step in steps {
                match step {
                    Step::Admit(s) => {
                        let before = held[s].len();
                        match limits.admit(names[s]) {
                            Some(admission) => {
                                prop_assert!(before < running + waiting);
                                held[s].push((admission, None));
                            }
                            None => prop_assert_eq!(before, running + waiting),
                        }
                    }
                    Step::Turn(s) => {
                        let turns = held[s].iter().filter(|(_, t)| t.is_some()).count();
                        if let Some(slot) = held[s].iter_mut().find(|(_, t)| t.is_none()) {
                            let turn = try_turn(&limits, names[s]);
                            prop_assert_eq!(turn.is_some(), turns < running);
                            slot.1 = turn;
                        }
                    }
                    Step::Finish(s) => {
                        if !held[s].is_empty() {
                            held[s].remove(0);
                        }
                    }
                }
                for (s, requests) in held.iter().enumerate() {
                    prop_assert!(requests.len() <= running + waiting, "source {}", names[s]);
                    prop_assert!(requests.iter().filter(|(_, t)| t.is_some()).count() <= running);
                }
            }
            held.iter_mut().for_each(Vec::clear);
            // A new source's first request forgets every idle gate.
            limits.admit("d").unwrap();
            prop_assert_eq!(limits.gates.lock().unwrap().len(), 1);
        }
    }

    #[tokio::test]
    async fn a_waiting_turn_goes_on_when_one_is_given_back() {
        let limits = Arc::new(SourceLimits::new(1, 1));
        let first = limits.turn("s3").await;
        let waiter = tokio::spawn({
            let limits = Arc::clone(&limits);
            async move {
                let _turn = limits.turn("s3").await;
            }
        });
        // Another source is not held up by the waiting one.
        let _other = limits.turn("local").await;
        drop(first);
        waiter.await.unwrap();
    }
}
