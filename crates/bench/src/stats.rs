//! Percentiles by sorting (nearest-rank), and small formatting helpers.

use serde_json::{json, Value};

/// A distribution of durations, in microseconds.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub n: usize,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: f64,
}

impl Summary {
    /// `None` for an empty sample.
    pub fn of(mut samples: Vec<u64>) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |p: f64| {
            // Nearest rank: the smallest value with at least p% of the sample at or below it.
            let r = ((p / 100.0) * n as f64).ceil() as usize;
            samples[r.clamp(1, n) - 1]
        };
        Some(Summary {
            n,
            p50: rank(50.0),
            p99: rank(99.0),
            max: samples[n - 1],
            mean: samples.iter().map(|&v| v as f64).sum::<f64>() / n as f64,
        })
    }

    pub fn json(&self) -> Value {
        json!({ "n": self.n, "p50_us": self.p50, "p99_us": self.p99, "max_us": self.max, "mean_us": self.mean })
    }
}

/// Microseconds as milliseconds with a precision that suits the magnitude.
pub fn ms(us: u64) -> String {
    let ms = us as f64 / 1000.0;
    if ms < 10.0 {
        format!("{ms:.2}")
    } else if ms < 100.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

/// A rate with thousands separators, e.g. `12,345`.
pub fn rate(per_s: f64) -> String {
    let s = (per_s.round() as u64).to_string();
    // The first group holds 1 to 3 digits, every later one exactly 3.
    let head = match s.len() % 3 {
        0 => 3.min(s.len()),
        r => r,
    };
    let mut out = s[..head].to_owned();
    for group in s.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(group).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Summary::of((1..=100).collect()).unwrap();
        assert_eq!((s.p50, s.p99, s.max), (50, 99, 100));
        let one = Summary::of(vec![7]).unwrap();
        assert_eq!((one.p50, one.p99, one.max), (7, 7, 7));
        assert!(Summary::of(Vec::new()).is_none());
    }

    #[test]
    fn rates_are_grouped() {
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(999.0), "999");
        assert_eq!(rate(0.2), "0");
        assert_eq!(rate(123456.0), "123,456");
    }
}
