//! When a schedule is due: its cron expression read in its time zone (croner and chrono-tz:
//! daylight-saving changes included, no cron arithmetic of ours). A time the expression
//! names that does not exist that day (a spring-forward gap) fires at the first one that
//! does; a time that happens twice (fall back) fires once.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use std::str::FromStr;
use time::OffsetDateTime;

/// A schedule's expression and zone, parsed.
#[derive(Clone, Debug)]
pub struct When {
    cron: Cron,
    tz: Tz,
}

impl When {
    /// Parses both; the error says which one does not parse, for a 422 that names it.
    pub fn parse(cron: &str, timezone: &str) -> Result<When, (&'static str, String)> {
        let c = Cron::from_str(cron.trim()).map_err(|e| {
            (
                "cron",
                format!("the cron expression does not parse: {e}; five fields (minute hour day-of-month month day-of-week), or six with seconds first"),
            )
        })?;
        let tz = Tz::from_str(timezone.trim()).map_err(|_| {
            (
                "timezone",
                format!("'{timezone}' is not an IANA time zone (such as Europe/Paris or UTC)"),
            )
        })?;
        Ok(When { cron: c, tz })
    }

    /// The first due time strictly after `after`; None when the expression names no time
    /// after it (croner searches a bounded range of years).
    pub fn next_after(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        let at = to_chrono(after).with_timezone(&self.tz);
        let next = self.cron.find_next_occurrence(&at, false).ok()?;
        Some(from_chrono(next.with_timezone(&Utc)))
    }

    /// The due times after `after` up to `until` (at most `cap` of them, counted).
    pub fn count_between(&self, after: OffsetDateTime, until: OffsetDateTime, cap: usize) -> usize {
        let mut n = 0;
        let mut t = after;
        while n < cap {
            match self.next_after(t) {
                Some(next) if next <= until => {
                    n += 1;
                    t = next;
                }
                _ => break,
            }
        }
        n
    }

    /// `at` in the schedule's zone, for people.
    pub fn local(&self, at: OffsetDateTime) -> String {
        to_chrono(at).with_timezone(&self.tz).to_rfc3339()
    }
}

fn to_chrono(t: OffsetDateTime) -> DateTime<Utc> {
    let nanos = t.unix_timestamp_nanos();
    Utc.timestamp_nanos(nanos as i64)
}

fn from_chrono(t: DateTime<Utc>) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.timestamp_nanos_opt().unwrap_or(0)))
        .expect("a time croner found is in range")
}

#[cfg(test)]
mod tests {
    use super::When;
    use time::macros::datetime;

    #[test]
    fn weekdays_at_nine_in_paris_across_the_spring_change() {
        let w = When::parse("0 9 * * 1-5", "Europe/Paris").unwrap();
        // Friday 2026-03-27 10:00 Paris (09:00 UTC, winter time): next is Monday the 30th at
        // 09:00 Paris, which is 07:00 UTC in summer time.
        let next = w.next_after(datetime!(2026-03-27 09:00 UTC)).unwrap();
        assert_eq!(next, datetime!(2026-03-30 07:00 UTC));
        assert_eq!(w.local(next), "2026-03-30T09:00:00+02:00");
    }

    #[test]
    fn a_time_in_the_spring_gap_fires_once_at_the_next_that_exists_and_fall_back_fires_once() {
        let gap = When::parse("30 2 * * *", "Europe/Paris").unwrap();
        // 2026-03-29 02:30 does not exist in Paris: 03:00 CEST (01:00 UTC) instead.
        let next = gap.next_after(datetime!(2026-03-28 12:00 UTC)).unwrap();
        assert_eq!(next, datetime!(2026-03-29 01:00 UTC));
        assert_eq!(
            gap.next_after(next).unwrap(),
            datetime!(2026-03-30 00:30 UTC)
        );
        // 2026-10-25 02:30 happens twice in Paris: it fires once.
        let twice = When::parse("30 2 * * *", "Europe/Paris").unwrap();
        let first = twice.next_after(datetime!(2026-10-24 12:00 UTC)).unwrap();
        let second = twice.next_after(first).unwrap();
        assert!(
            second - first > time::Duration::hours(23),
            "{first} {second}"
        );
    }

    #[test]
    fn what_does_not_parse_says_which_field() {
        assert_eq!(When::parse("61 * * * *", "UTC").unwrap_err().0, "cron");
        assert_eq!(When::parse("* * *", "UTC").unwrap_err().0, "cron");
        assert_eq!(
            When::parse("0 9 * * *", "Mars/Olympus").unwrap_err().0,
            "timezone"
        );
        assert!(
            When::parse("*/2 * * * * *", "UTC").is_ok(),
            "six fields: seconds first"
        );
    }

    #[test]
    fn missed_due_times_are_counted() {
        let w = When::parse("0 * * * *", "UTC").unwrap();
        let n = w.count_between(
            datetime!(2026-01-01 00:00 UTC),
            datetime!(2026-01-01 05:30 UTC),
            100,
        );
        assert_eq!(n, 5);
    }
}
