//! Statistics, the machine facts and the Markdown report.

use std::time::Duration;

/// p50 / p99 (nearest rank) / mean / min / max, in milliseconds.
pub struct Stats {
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

pub fn stats(samples: &[Duration]) -> Stats {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |q: f64| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    Stats {
        p50: rank(0.50),
        p99: rank(0.99),
        mean: ms.iter().sum::<f64>() / ms.len() as f64,
        min: ms[0],
        max: ms[ms.len() - 1],
    }
}

/// One measured variant: its label, what it is, and its samples.
pub struct Row {
    pub label: &'static str,
    pub what: &'static str,
    pub samples: Vec<Duration>,
}

impl Row {
    pub fn new(label: &'static str, what: &'static str) -> Self {
        Row {
            label,
            what,
            samples: Vec::new(),
        }
    }
}

/// One part of the report: a table of variants (the raw baseline last), and notes under it.
pub struct Part {
    pub title: &'static str,
    pub rows: Vec<Row>,
    pub notes: String,
}

pub fn command(program: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The median over iterations of `a[i] / b[i]`: each pair ran back to back, so load that
/// drifts over the run cancels out of it better than out of a ratio of medians.
fn paired(a: &[Duration], b: &[Duration]) -> f64 {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
        .collect();
    r.sort_by(f64::total_cmp);
    match r.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => r[n / 2],
        n => (r[n / 2 - 1] + r[n / 2]) / 2.0,
    }
}

/// Busy and total jiffies of all CPUs (`/proc/stat`), to tell how busy the machine was.
pub fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle + iowait
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

pub fn report(facts: &[(&str, String)], parts: &[Part]) -> String {
    let mut s = String::from("| Machine | |\n|---|---|\n");
    for (k, v) in facts {
        s += &format!("| {k} | {v} |\n");
    }
    for Part { title, rows, notes } in parts {
        let Some(raw) = rows.last() else {
            continue;
        };
        let base = stats(&raw.samples);
        s += &format!("\n### {title}\n\n| Path | p50 ms | p99 ms | mean ms | min–max ms | ÷ raw (p50) | ÷ raw (mean) | ÷ raw (paired) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in rows {
            let st = stats(&r.samples);
            s += &format!(
                "| {} <br><sub>{}</sub> | {:.1} | {:.1} | {:.1} | {:.1}–{:.1} | {:.2} | {:.2} | {:.2} |\n",
                r.label,
                r.what,
                st.p50,
                st.p99,
                st.mean,
                st.min,
                st.max,
                st.p50 / base.p50,
                st.mean / base.mean,
                paired(&r.samples, &raw.samples)
            );
        }
        if !notes.is_empty() {
            s += &format!("\n{notes}");
        }
    }
    s
}
