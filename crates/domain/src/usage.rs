//! Usage over time: what `GET /api/usage` asks (a window and a grouping) and answers (tokens,
//! requests, turns and seconds per group). The sums themselves are computed in the database.

use crate::FieldError;
use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime, UtcOffset};
use utoipa::ToSchema;

/// How usage is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UsageGroupBy {
    /// By the agent that spent it (an agent's slug).
    Agent,
    /// By model.
    Model,
    /// By UTC day (`YYYY-MM-DD`).
    Day,
}

impl UsageGroupBy {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageGroupBy::Agent => "agent",
            UsageGroupBy::Model => "model",
            UsageGroupBy::Day => "day",
        }
    }
}

/// The window a report covers when nothing else is asked: the 30 days up to now.
pub const DEFAULT_WINDOW: Duration = Duration::days(30);
/// The widest window one report covers.
pub const MAX_WINDOW: Duration = Duration::days(366);

/// A parsed request: usage within `[from, to)`, split by `group_by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageQuery {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
    pub group_by: UsageGroupBy,
}

impl UsageQuery {
    /// Parses the query's parameters as sent: `to` defaults to `now`, `from` to 30 days
    /// before `to`, `group_by` to `day`. Times are RFC 3339 with an offset (kept in UTC); a
    /// `+` that a query string turned into a space is read as the `+` it was. Every problem is
    /// one field error (`loc: ["query", name]`).
    pub fn parse(
        from: Option<&str>,
        to: Option<&str>,
        group_by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut parse_time = |name: &str, raw: Option<&str>| -> Option<Option<OffsetDateTime>> {
            let Some(raw) = raw else { return Some(None) };
            let text = raw.trim().replace(' ', "+");
            match OffsetDateTime::parse(&text, &Rfc3339) {
                Ok(t) => Some(Some(t.to_offset(UtcOffset::UTC))),
                Err(_) => {
                    errors.push(error(
                        name,
                        "Input should be an RFC 3339 date and time with an offset, like \
                         2026-12-01T00:00:00Z",
                        raw,
                    ));
                    None
                }
            }
        };
        let (from, to) = (parse_time("from", from), parse_time("to", to));
        let group_by = match group_by.map(str::trim) {
            None | Some("day") => Some(UsageGroupBy::Day),
            Some("agent") => Some(UsageGroupBy::Agent),
            Some("model") => Some(UsageGroupBy::Model),
            Some(other) => {
                errors.push(error(
                    "group_by",
                    "Input should be 'agent', 'model' or 'day'",
                    other,
                ));
                None
            }
        };
        let (Some(from), Some(to), Some(group_by)) = (from, to, group_by) else {
            return Err(errors);
        };
        let to = to.unwrap_or(now);
        let from = from.unwrap_or(to - DEFAULT_WINDOW);
        if from >= to {
            return Err(vec![error(
                "from",
                "from must be before to (the window is [from, to))",
                &format_time(from),
            )]);
        }
        if to - from > MAX_WINDOW {
            return Err(vec![error(
                "from",
                "the window is at most 366 days: ask for a later from or an earlier to",
                &format_time(from),
            )]);
        }
        Ok(UsageQuery { from, to, group_by })
    }
}

fn error(field: &str, msg: &str, input: &str) -> FieldError {
    FieldError {
        kind: "value_error".into(),
        loc: vec![Value::from("query"), Value::from(field)],
        msg: msg.into(),
        input: Value::from(input),
    }
}

fn format_time(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// What was spent in one group (or in all of them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, ToSchema)]
pub struct UsageTotals {
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Tokens in all, as the model reported them.
    pub total_tokens: i64,
    /// Model requests.
    pub requests: i64,
    /// Turns (runs) that started in the window and spent anything here.
    pub runs: i64,
    /// Wall-clock seconds turns were working.
    pub active_seconds: f64,
    /// Seconds sandboxes were up within the window: those of the agent's sessions, of the
    /// sessions using the model, or the part of the day.
    pub sandbox_seconds: f64,
}

impl UsageTotals {
    /// The sum of `groups`.
    pub fn sum<'a>(groups: impl IntoIterator<Item = &'a UsageGroup>) -> Self {
        let mut t = UsageTotals::default();
        for g in groups {
            let u = &g.usage;
            t.input_tokens += u.input_tokens;
            t.output_tokens += u.output_tokens;
            t.total_tokens += u.total_tokens;
            t.requests += u.requests;
            t.runs += u.runs;
            t.active_seconds += u.active_seconds;
            t.sandbox_seconds += u.sandbox_seconds;
        }
        t
    }
}

/// One group of a report.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct UsageGroup {
    /// The agent's slug, the model's name, or the UTC day (`YYYY-MM-DD`).
    pub key: String,
    #[serde(flatten)]
    pub usage: UsageTotals,
}

/// Usage of one project within a window, split by agent, model or day.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct UsageReport {
    /// The window's start (inclusive).
    #[serde(with = "time::serde::rfc3339")]
    pub from: OffsetDateTime,
    /// The window's end (exclusive).
    #[serde(with = "time::serde::rfc3339")]
    pub to: OffsetDateTime,
    pub group_by: UsageGroupBy,
    /// The groups with any usage: days in order, agents and models by total tokens (most
    /// first). Days without usage are left out.
    pub groups: Vec<UsageGroup>,
    /// The sum of the groups.
    pub total: UsageTotals,
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-12-01 12:00 UTC);

    fn fields(r: Result<UsageQuery, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err()
            .into_iter()
            .map(|e| e.loc[1].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_default_window_is_the_last_thirty_days_by_day() {
        let q = UsageQuery::parse(None, None, None, NOW).unwrap();
        assert_eq!(q.to, NOW);
        assert_eq!(q.from, datetime!(2026-11-01 12:00 UTC));
        assert_eq!(q.group_by, UsageGroupBy::Day);
        let q = UsageQuery::parse(None, Some("2026-06-30T00:00:00Z"), Some("model"), NOW).unwrap();
        assert_eq!(q.from, datetime!(2026-05-31 0:00 UTC));
        assert_eq!(q.group_by, UsageGroupBy::Model);
    }

    #[test]
    fn a_plus_that_became_a_space_is_a_plus() {
        let q =
            UsageQuery::parse(Some("2026-11-30T00:00:00 02:00"), None, Some("agent"), NOW).unwrap();
        assert_eq!(q.from, datetime!(2026-11-29 22:00 UTC));
    }

    #[test]
    fn bad_input_names_every_field_at_fault() {
        assert_eq!(
            fields(UsageQuery::parse(
                Some("yesterday"),
                Some("2026-13-01"),
                Some("week"),
                NOW
            )),
            ["from", "to", "group_by"]
        );
        assert_eq!(
            fields(UsageQuery::parse(
                Some("2026-12-01T00:00:00Z"),
                Some("2026-12-01T00:00:00Z"),
                None,
                NOW
            )),
            ["from"]
        );
        assert_eq!(
            fields(UsageQuery::parse(
                Some("2025-01-01T00:00:00Z"),
                None,
                None,
                NOW
            )),
            ["from"]
        );
        assert!(UsageQuery::parse(Some("2025-12-01T12:00:00Z"), None, None, NOW).is_ok());
    }
}
