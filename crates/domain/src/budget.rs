//! A session's budget: limits on what its turns may spend, checked before every model call
//! (`agent::budget`). A limit reached ends the turn with `stop_reason: "budget_reached"`,
//! which is not a failure; raising the limit lets the next message go on.
//!
//! Invariant: a call starts only while every limit is above what was used, so a budget is
//! overshot by at most the one call that crossed it.

use crate::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Limits on what a session's turns spend, all optional (absent: no limit). Counted over the
/// whole session: every turn, its subagents, compaction and retries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// US dollars the session's model calls may cost (`usage.cost_usd`). Calls without a
    /// price (`unpriced_requests`) are not counted: give such models a token limit too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_cost_usd: Option<f64>,
    /// Tokens the session's model calls may use (`usage.total_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000000000000_i64)]
    pub max_total_tokens: Option<i64>,
    /// Model steps of the session's agent over all its turns (the sum of its runs' `turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_turns: Option<i64>,
    /// Seconds the session's sandbox may have been up (`sandbox_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 31536000)]
    pub max_sandbox_seconds: Option<f64>,
}

/// The largest value each limit takes (a 422 above): far past any real budget, so that a
/// typo's extra zeros are caught rather than stored as "no limit".
pub const MAX_COST_USD: f64 = 1_000_000.0;
pub const MAX_TOTAL_TOKENS: i64 = 1_000_000_000_000;
pub const MAX_TURNS: i64 = 1_000_000;
/// A year, as `MAX_SESSION_SECONDS`.
pub const MAX_SANDBOX_SECONDS: f64 = 31_536_000.0;

/// What a session has used, in a budget's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetUse {
    pub cost_usd: f64,
    pub total_tokens: i64,
    pub turns: i64,
    pub sandbox_seconds: f64,
}

/// The limit a session reached: its name (`max_cost_usd`, ...), the limit, and what was used.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BudgetHit {
    pub limit: &'static str,
    pub max: f64,
    pub used: f64,
}

impl Budget {
    /// The first limit `used` has reached, in the order of the fields; None while every
    /// limit is above what was used (a model call may start).
    pub fn reached(&self, used: &BudgetUse) -> Option<BudgetHit> {
        let limits = [
            ("max_cost_usd", self.max_cost_usd, used.cost_usd),
            (
                "max_total_tokens",
                self.max_total_tokens.map(|n| n as f64),
                used.total_tokens as f64,
            ),
            (
                "max_turns",
                self.max_turns.map(|n| n as f64),
                used.turns as f64,
            ),
            (
                "max_sandbox_seconds",
                self.max_sandbox_seconds,
                used.sandbox_seconds,
            ),
        ];
        limits.into_iter().find_map(|(limit, max, used)| {
            let max = max?;
            (used >= max).then_some(BudgetHit { limit, max, used })
        })
    }

    /// Whether it sets no limit at all.
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }

    /// Every limit is a finite number, zero or more.
    pub fn validate(&self, v: &mut Violations, path: &[&str]) {
        let mut check = |field: &str, value: Option<f64>, input: Value| {
            if value.is_some_and(|x| !x.is_finite() || x < 0.0) {
                let mut loc = path.to_vec();
                loc.push(field);
                v.push(
                    "greater_than_equal",
                    &loc,
                    format!("{field} is a limit: a number, 0 or more"),
                    input,
                );
            }
        };
        check("max_cost_usd", self.max_cost_usd, self.max_cost_usd.into());
        check(
            "max_total_tokens",
            self.max_total_tokens.map(|n| n as f64),
            self.max_total_tokens.into(),
        );
        check(
            "max_turns",
            self.max_turns.map(|n| n as f64),
            self.max_turns.into(),
        );
        check(
            "max_sandbox_seconds",
            self.max_sandbox_seconds,
            self.max_sandbox_seconds.into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_reached_is_named_with_what_was_used() {
        let b = Budget {
            max_cost_usd: Some(1.0),
            max_turns: Some(3),
            ..Budget::default()
        };
        let mut used = BudgetUse {
            cost_usd: 0.99,
            turns: 2,
            ..BudgetUse::default()
        };
        assert_eq!(b.reached(&used), None);
        used.turns = 3;
        let hit = b.reached(&used).unwrap();
        assert_eq!((hit.limit, hit.max, hit.used), ("max_turns", 3.0, 3.0));
        used.cost_usd = 1.5;
        assert_eq!(b.reached(&used).unwrap().limit, "max_cost_usd");
        assert_eq!(Budget::default().reached(&used), None);
        // A limit of zero allows no call.
        let zero = Budget {
            max_total_tokens: Some(0),
            ..Budget::default()
        };
        assert!(zero.reached(&BudgetUse::default()).is_some());
    }

    #[test]
    fn negative_limits_are_refused_by_name() {
        let mut v = Violations::new();
        Budget {
            max_cost_usd: Some(-1.0),
            max_turns: Some(-2),
            max_total_tokens: Some(5),
            max_sandbox_seconds: Some(1e12),
        }
        .validate(&mut v, &["budget"]);
        let errors = v.into_result().unwrap_err();
        let locs: Vec<String> = errors
            .iter()
            .map(|e| serde_json::to_string(&e.loc).unwrap())
            .collect();
        assert_eq!(
            locs,
            [
                r#"["body","budget","max_cost_usd"]"#,
                r#"["body","budget","max_turns"]"#
            ]
        );
    }

    #[test]
    fn unknown_limits_do_not_parse() {
        assert!(serde_json::from_str::<Budget>(r#"{"max_dollars": 1}"#).is_err());
        assert!(serde_json::from_str::<Budget>(r#"{"max_cost_usd": "1"}"#).is_err());
    }
}
