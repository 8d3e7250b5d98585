//! Usage in the shape the published client reads: tokens, requests and active seconds, split
//! `by_model` and `by_agent`; and the sum that keeps a session's whole-conversation usage.

use sandbox_agents_model::Usage;
use serde_json::{json, Map, Value};

fn tokens(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "requests": u.requests,
    })
}

/// One turn's usage: every step's tokens (all on `model`, all by `agent`) and the turn's
/// wall-clock seconds.
pub(crate) fn turn_usage(
    u: &Usage,
    active_seconds: f64,
    model: &str,
    agent: &str,
) -> Map<String, Value> {
    let mut m = match tokens(u) {
        Value::Object(m) => m,
        _ => unreachable!("tokens() builds an object"),
    };
    m.insert("active_seconds".into(), json!(active_seconds));
    let mut by_model = Map::new();
    by_model.insert(model.to_owned(), tokens(u));
    let mut by_agent = Map::new();
    by_agent.insert(agent.to_owned(), tokens(u));
    m.insert("by_model".into(), Value::Object(by_model));
    m.insert("by_agent".into(), Value::Object(by_agent));
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
        };
        let mut total = Map::new();
        add_into(&mut total, &turn_usage(&u, 1.5, "m", "a"));
        add_into(&mut total, &turn_usage(&u, 0.5, "m", "b"));
        assert_eq!(total["total_tokens"], 10);
        assert_eq!(total["active_seconds"], 2.0);
        assert_eq!(total["by_model"]["m"]["requests"], 2);
        assert_eq!(total["by_agent"]["b"]["input_tokens"], 3);
    }
}
