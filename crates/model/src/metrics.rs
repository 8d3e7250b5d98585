//! What each model call adds to the process's metrics (`GET /metrics`): its duration by model
//! and outcome, and the tokens it used. Model names come from agents, so any caller could
//! invent them: the first [`MAX_MODELS`] names seen get a label of their own and the rest
//! share `other`, keeping the series bounded.

use crate::{ModelError, Usage};
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;

const MAX_MODELS: usize = 64;

static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn label(model: &str) -> String {
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let seen = seen.get_or_insert_with(HashSet::new);
    if seen.contains(model) {
        return model.to_owned();
    }
    if seen.len() < MAX_MODELS {
        seen.insert(model.to_owned());
        return model.to_owned();
    }
    "other".to_owned()
}

/// One call being measured; dropped without an outcome, it counts as `cancelled` (the run
/// was interrupted, or the caller stopped reading).
pub(crate) struct CallMetrics {
    model: String,
    started: Instant,
    done: bool,
}

impl CallMetrics {
    pub(crate) fn start(model: &str) -> Self {
        CallMetrics {
            model: label(model),
            started: Instant::now(),
            done: false,
        }
    }

    fn record(&mut self, outcome: &'static str) {
        self.done = true;
        metrics::histogram!(
            "sandbox_agents_model_request_duration_seconds",
            "model" => self.model.clone(),
            "outcome" => outcome
        )
        .record(self.started.elapsed());
    }

    pub(crate) fn ok(mut self, usage: &Usage) {
        self.record("ok");
        for (kind, n) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
        ] {
            metrics::counter!("sandbox_agents_model_tokens_total", "model" => self.model.clone(), "type" => kind)
                .increment(n);
        }
    }

    pub(crate) fn failed(mut self, e: &ModelError) {
        self.record(match e {
            ModelError::Http { .. } => "http_error",
            ModelError::Connect(_) => "connect_error",
            ModelError::Timeout(_) => "timeout",
            ModelError::Protocol(_) => "protocol_error",
            ModelError::Config(_) => "config_error",
        });
    }
}

impl Drop for CallMetrics {
    fn drop(&mut self) {
        if !self.done {
            self.record("cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_model_names_beyond_the_cap_share_one_label() {
        let base = uuid_like();
        let labels: Vec<String> = (0..MAX_MODELS + 10)
            .map(|i| label(&format!("{base}-{i}")))
            .collect();
        assert!(labels.iter().filter(|l| *l == "other").count() >= 10);
        // A name seen before the cap keeps its label.
        assert_eq!(label(&labels[0].clone()), labels[0]);
    }

    fn uuid_like() -> String {
        format!("{:?}", std::time::SystemTime::now())
    }
}
