//! Usage in the shape the published client reads: tokens, requests and active seconds, split
//! `by_model` and `by_agent` (the [`Ledger`] a turn keeps), each with its cost (`cost_usd`, and
//! `unpriced_requests` for the calls no price was found for); and the sum that keeps a
//! session's whole-conversation usage.

use sandbox_agents_model::Usage;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

fn tokens(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "requests": u.requests,
        "cost_usd": u.cost_usd,
        "unpriced_requests": u.unpriced_requests,
    })
}

/// What a turn's model calls used, whole and split by model and by agent (the session's
/// agent, or the subagent that made the call). Saved with a parked run's progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ledger {
    pub total: Usage,
    pub by_model: BTreeMap<String, Usage>,
    pub by_agent: BTreeMap<String, Usage>,
}

impl Ledger {
    /// Counts one model call of `agent` on `model`.
    pub fn add(&mut self, model: &str, agent: &str, u: Usage) {
        self.total += u;
        *self.by_model.entry(model.to_owned()).or_default() += u;
        *self.by_agent.entry(agent.to_owned()).or_default() += u;
    }
}

/// One turn's usage: its model calls' tokens, split `by_model` and `by_agent`, and the turn's
/// wall-clock seconds.
pub(crate) fn turn_usage(l: &Ledger, active_seconds: f64) -> Map<String, Value> {
    let mut m = match tokens(&l.total) {
        Value::Object(m) => m,
        _ => unreachable!("tokens() builds an object"),
    };
    m.insert("active_seconds".into(), json!(active_seconds));
    let split = |b: &BTreeMap<String, Usage>| {
        Value::Object(b.iter().map(|(k, u)| (k.clone(), tokens(u))).collect())
    };
    m.insert("by_model".into(), split(&l.by_model));
    m.insert("by_agent".into(), split(&l.by_agent));
    m
}

/// What a memory consolidation's model calls spent, in the shape of a turn's usage without
/// `active_seconds` (no turn was working), plus `memory`: the same tokens again, marking
/// them as consolidation's. Added to the stopped session's usage, the totals and the
/// `by_model` / `by_agent` splits hold every token it cost, as a bill would, and `memory`
/// says how much of it consolidation was (summed over its consolidations).
pub(crate) fn consolidation_usage(l: &Ledger) -> Map<String, Value> {
    let mut m = turn_usage(l, 0.0);
    m.remove("active_seconds");
    m.insert("memory".into(), tokens(&l.total));
    m
}

/// Adds `more` into `total`, key by key: numbers are summed (integers stay integers),
/// objects are added recursively, anything else from `more` replaces what was there.
pub(crate) fn add_into(total: &mut Map<String, Value>, more: &Map<String, Value>) {
    for (k, v) in more {
        match (total.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => add_into(a, b),
            (Some(Value::Number(a)), Value::Number(b)) => {
                let sum = match (a.as_u64(), b.as_u64()) {
                    (Some(x), Some(y)) => json!(x + y),
                    _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
                };
                total.insert(k.clone(), sum);
            }
            _ => {
                total.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usages_add_up_by_key() {
        let u = Usage {
            input_tokens: 3,
            output_tokens: 2,
            total_tokens: 5,
            requests: 1,
            cost_usd: 0.25,
            ..Usage::default()
        };
        let mut total = Map::new();
        let mut a = Ledger::default();
        a.add("m", "a", u);
        let mut b = Ledger::default();
        b.add("m", "b", u);
        b.add("n", "b", u);
        add_into(&mut total, &turn_usage(&a, 1.5));
        add_into(&mut total, &turn_usage(&b, 0.5));
        assert_eq!(total["total_tokens"], 15);
        assert_eq!(total["active_seconds"], 2.0);
        assert_eq!(total["by_model"]["m"]["requests"], 2);
        assert_eq!(total["by_model"]["n"]["requests"], 1);
        assert_eq!(total["by_agent"]["b"]["input_tokens"], 6);
        assert_eq!(total["cost_usd"], 0.75);
        assert_eq!(total["by_model"]["n"]["cost_usd"], 0.25);
        assert_eq!(total["unpriced_requests"], 0);
    }
}
