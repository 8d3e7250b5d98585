//! Usage over time: what `GET /api/usage` asks (a window and a grouping) and answers (tokens,
//! requests, turns and seconds per group). The sums themselves are computed in the database.

use crate::FieldError;
use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, Duration, OffsetDateTime, UtcOffset};
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
    /// `+` that a query string turned into a space is read as the `+` it was. A plain date
    /// (`YYYY-MM-DD`, a UTC day) is also accepted, because that is what a date picker gives:
    /// `from` is the start of its day, and `to` the end of its day (the next midnight), so
    /// `from=2026-12-01&to=2026-12-05` covers five whole days, the 5th included, as a person
    /// reading a date range expects. Every problem is one field error (`loc: ["query", name]`).
    pub fn parse(
        from: Option<&str>,
        to: Option<&str>,
        group_by: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut parse_time =
            |name: &str, raw: Option<&str>, day_end: bool| -> Option<Option<OffsetDateTime>> {
                let Some(raw) = raw else { return Some(None) };
                match parse_instant(raw, day_end) {
                    Some(t) => Some(Some(t)),
                    None => {
                        errors.push(error(
                            name,
                            "Input should be an RFC 3339 date and time with an offset, like \
                         2026-12-01T00:00:00Z, or a date, like 2026-12-01",
                            raw,
                        ));
                        None
                    }
                }
            };
        let (from, to) = (parse_time("from", from, false), parse_time("to", to, true));
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

/// An RFC 3339 time (in UTC), or a plain `YYYY-MM-DD` date: the start of that UTC day, or
/// with `day_end` the start of the next one (the window is `[from, to)`, so that includes
/// the whole day).
fn parse_instant(raw: &str, day_end: bool) -> Option<OffsetDateTime> {
    let text = raw.trim().replace(' ', "+");
    if let Ok(t) = OffsetDateTime::parse(&text, &Rfc3339) {
        return Some(t.to_offset(UtcOffset::UTC));
    }
    let date = Date::parse(&text, format_description!("[year]-[month]-[day]")).ok()?;
    let date = if day_end { date.next_day()? } else { date };
    Some(date.midnight().assume_utc())
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
    /// Of `total_tokens`, those spent consolidating memory (the model calls that merge what a
    /// stopped session learnt into its agent's memory, counted in the window of the stop).
    pub memory_tokens: i64,
    /// Of `requests`, the memory consolidations' model requests.
    pub memory_requests: i64,
    /// What the priced model requests cost, in US dollars (the provider's figure for each,
    /// else the model catalogue's per-token prices).
    pub cost_usd: f64,
    /// Model requests without a price, so not in `cost_usd`: a model the catalogue has no
    /// prices for, or requests made before this server priced calls.
    pub unpriced_requests: i64,
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
            t.memory_tokens += u.memory_tokens;
            t.memory_requests += u.memory_requests;
            t.cost_usd += u.cost_usd;
            t.unpriced_requests += u.unpriced_requests;
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
    fn a_plain_date_is_a_utc_day_and_to_includes_its_day() {
        let q = UsageQuery::parse(Some("2026-11-01"), Some("2026-11-05"), None, NOW).unwrap();
        assert_eq!(q.from, datetime!(2026-11-01 0:00 UTC));
        assert_eq!(q.to, datetime!(2026-11-06 0:00 UTC));
        // One day is a window of a day, not an empty one.
        let q = UsageQuery::parse(Some("2026-11-05"), Some("2026-11-05"), None, NOW).unwrap();
        assert_eq!(q.to - q.from, Duration::days(1));
        // An RFC 3339 `to` keeps its meaning: the instant, exclusive.
        let q =
            UsageQuery::parse(Some("2026-11-01"), Some("2026-11-05T00:00:00Z"), None, NOW).unwrap();
        assert_eq!(q.to, datetime!(2026-11-05 0:00 UTC));
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
