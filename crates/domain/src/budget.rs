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
#[serde(deny_unknown_fields, remote = "Self")]
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

// Both are JSON objects only (`patch::object_only`: the derived parser would take an array
// of nulls as "no limits").
crate::patch::object_only_serde!(Budget, ProjectLimits);

/// The largest value each limit takes (a 422 above): far past any real budget, so that a
/// typo's extra zeros are caught rather than stored as "no limit".
pub const MAX_COST_USD: f64 = 1_000_000.0;
pub const MAX_TOTAL_TOKENS: i64 = 1_000_000_000_000;
pub const MAX_TURNS: i64 = 1_000_000;
/// A year, as `MAX_SESSION_SECONDS`.
pub const MAX_SANDBOX_SECONDS: f64 = 31_536_000.0;

/// A project's limits that an operator sets (`PATCH /api/projects/{ref}`), over every server
/// process: counted in PostgreSQL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct ProjectLimits {
    /// US dollars the project's model calls may cost in a calendar month (UTC). Over it, no
    /// turn starts (402) and a turn in flight stops before its next call; at 80 % a
    /// `session.spend_warning` event (and webhook) goes out once a month. Calls without a
    /// price are not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub monthly_cost_usd: Option<f64>,
    /// Sandboxes the project may run at once, in place of the server's
    /// `--max-sandboxes-per-project` for it (the deployment's `--max-sandboxes` still holds).
    /// A session past it waits in the fair queue (`session.queued`), as under the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000000)]
    pub max_sandboxes: Option<i64>,
    /// Turns the project may have in flight at once, in place of the server's
    /// `--max-runs-per-project` for it (the deployment's `--max-runs` still holds). A turn
    /// past it waits in the fair queue (`session.run_queued`), as under the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000000)]
    pub max_runs: Option<i64>,
    /// API requests per minute made in the project by its callers (its API keys and members,
    /// every server process together), in place of the server's per-credential
    /// `--rate-limit-per-minute` for them; bursts of up to this many (at most
    /// `--rate-limit-burst`). Over it, 429 with Retry-After. Operators are not counted, so
    /// one can always lift it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000000)]
    pub requests_per_minute: Option<i64>,
}

/// The largest count a project limit takes (`max_sandboxes`, `max_runs`,
/// `requests_per_minute`).
pub const MAX_PROJECT_COUNT: i64 = 1_000_000;

impl ProjectLimits {
    /// The monthly limit, when `spent` this month has reached it.
    pub fn month_reached(&self, spent: f64) -> Option<BudgetHit> {
        let max = self.monthly_cost_usd?;
        (spent >= max).then_some(BudgetHit {
            limit: "monthly_cost_usd",
            max,
            used: spent,
        })
    }

    pub fn validate(&self, v: &mut Violations, path: &[&str]) {
        if self
            .monthly_cost_usd
            .is_some_and(|x| !x.is_finite() || !(0.0..=MAX_COST_USD).contains(&x))
        {
            let mut loc = path.to_vec();
            loc.push("monthly_cost_usd");
            v.push(
                "value_error",
                &loc,
                format!("monthly_cost_usd is a limit: a number from 0 to {MAX_COST_USD}"),
                self.monthly_cost_usd.into(),
            );
        }
        for (name, value) in [
            ("max_sandboxes", self.max_sandboxes),
            ("max_runs", self.max_runs),
            ("requests_per_minute", self.requests_per_minute),
        ] {
            if value.is_some_and(|n| !(1..=MAX_PROJECT_COUNT).contains(&n)) {
                let mut loc = path.to_vec();
                loc.push(name);
                v.push(
                    "value_error",
                    &loc,
                    format!("{name} is a limit: a whole number from 1 to {MAX_PROJECT_COUNT}"),
                    value.into(),
                );
            }
        }
    }
}

/// The share of the monthly limit at which the warning goes out.
pub const SPEND_WARNING_AT: f64 = 0.8;

/// Why a turn may not start: the project's monthly spend has reached its limit.
pub fn monthly_limit_reached(limit: f64, spent: f64, month: &str) -> String {
    format!(
        "the project's monthly spend limit (monthly_cost_usd: ${limit}) is reached: ${spent:.4} \
         spent on model calls in {month} (UTC); no turn starts until an operator raises the \
         limit (PATCH /api/projects/{{ref}} with limits.monthly_cost_usd) or the month ends"
    )
}

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

    /// Every limit is a finite number from 0 to its maximum (`MAX_*`).
    pub fn validate(&self, v: &mut Violations, path: &[&str]) {
        let mut check = |field: &str, value: Option<f64>, max: f64, input: Value| {
            if value.is_some_and(|x| !x.is_finite() || !(0.0..=max).contains(&x)) {
                let mut loc = path.to_vec();
                loc.push(field);
                v.push(
                    "value_error",
                    &loc,
                    format!("{field} is a limit: a number from 0 to {max}"),
                    input,
                );
            }
        };
        check(
            "max_cost_usd",
            self.max_cost_usd,
            MAX_COST_USD,
            self.max_cost_usd.into(),
        );
        check(
            "max_total_tokens",
            self.max_total_tokens.map(|n| n as f64),
            MAX_TOTAL_TOKENS as f64,
            self.max_total_tokens.into(),
        );
        check(
            "max_turns",
            self.max_turns.map(|n| n as f64),
            MAX_TURNS as f64,
            self.max_turns.into(),
        );
        check(
            "max_sandbox_seconds",
            self.max_sandbox_seconds,
            MAX_SANDBOX_SECONDS,
            self.max_sandbox_seconds.into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where each violation is, as JSON.
    fn locs(v: Violations) -> Vec<String> {
        v.into_result()
            .unwrap_err()
            .iter()
            .map(|e| serde_json::to_string(&e.loc).unwrap())
            .collect()
    }

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
    fn limits_below_zero_or_over_their_maximum_are_refused_by_name() {
        let mut v = Violations::new();
        Budget {
            max_cost_usd: Some(-1.0),
            max_turns: Some(-2),
            max_total_tokens: Some(5),
            max_sandbox_seconds: Some(1e12),
        }
        .validate(&mut v, &["budget"]);
        assert_eq!(
            locs(v),
            [
                r#"["body","budget","max_cost_usd"]"#,
                r#"["body","budget","max_turns"]"#,
                r#"["body","budget","max_sandbox_seconds"]"#
            ]
        );
    }

    #[test]
    fn unknown_limits_do_not_parse() {
        assert!(serde_json::from_str::<Budget>(r#"{"max_dollars": 1}"#).is_err());
        assert!(serde_json::from_str::<Budget>(r#"{"max_cost_usd": "1"}"#).is_err());
    }

    #[test]
    fn only_objects_parse_and_they_round_trip() {
        for text in ["[]", "[null, null]", "[1]", "1", "\"x\""] {
            assert!(serde_json::from_str::<Budget>(text).is_err(), "{text}");
            assert!(
                serde_json::from_str::<ProjectLimits>(text).is_err(),
                "{text}"
            );
        }
        let b: Budget = serde_json::from_str(r#"{"max_turns": 3}"#).unwrap();
        assert_eq!(serde_json::to_string(&b).unwrap(), r#"{"max_turns":3}"#);
        let l: ProjectLimits = serde_json::from_str(r#"{"max_runs": 2}"#).unwrap();
        assert_eq!(serde_json::to_string(&l).unwrap(), r#"{"max_runs":2}"#);
        assert_eq!(
            serde_json::from_str::<Option<Budget>>("null").unwrap(),
            None
        );
    }

    #[test]
    fn project_counts_are_whole_numbers_from_one_and_named_when_out_of_range() {
        let mut v = Violations::new();
        ProjectLimits {
            monthly_cost_usd: Some(10.0),
            max_sandboxes: Some(0),
            max_runs: Some(MAX_PROJECT_COUNT),
            requests_per_minute: Some(MAX_PROJECT_COUNT + 1),
        }
        .validate(&mut v, &["limits"]);
        assert_eq!(
            locs(v),
            [
                r#"["body","limits","max_sandboxes"]"#,
                r#"["body","limits","requests_per_minute"]"#
            ]
        );
        assert!(serde_json::from_str::<ProjectLimits>(r#"{"max_runs": 1.5}"#).is_err());
        assert!(serde_json::from_str::<ProjectLimits>(r#"{"max_sessions": 1}"#).is_err());
    }
}
