//! The results as Markdown (stdout) and JSON (`--json`).

use crate::append::{Mode, Outcome};
use crate::fanout::LatencyRow;
use crate::machine::Machine;
use crate::stats::{ms, rate, Summary};
use serde_json::{json, Value};
use std::fmt::Write;

pub struct Results {
    pub machine: Machine,
    pub seconds: f64,
    pub pace_events: usize,
    pub pace_rate: f64,
    pub append: Vec<Outcome>,
    pub latency: Vec<LatencyRow>,
}

fn raw_rate(results: &Results, writers: usize) -> Option<f64> {
    results
        .append
        .iter()
        .find(|o| o.mode == Mode::Raw && o.writers == writers)
        .map(Outcome::events_per_s)
}

fn ratio(o: &Outcome, raw: Option<f64>) -> Option<f64> {
    raw.filter(|r| *r > 0.0).map(|r| o.events_per_s() / r)
}

fn lat(s: &Option<Summary>, f: impl Fn(&Summary) -> u64) -> String {
    s.as_ref().map_or_else(|| "–".into(), |s| ms(f(s)))
}

/// A duration as `850 ms` or `2.40 s`.
fn seconds(d: std::time::Duration) -> String {
    if d.as_secs() == 0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

pub fn markdown(r: &Results) -> String {
    let mut out = String::new();
    let m = &r.machine;
    let _ = writeln!(out, "# sandbox-agents-bench\n");
    let _ = writeln!(out, "| machine | |\n|---|---|");
    let _ = writeln!(out, "| commit | {} |", m.commit);
    let _ = writeln!(out, "| date | {} |", m.date);
    let _ = writeln!(out, "| nproc | {} ({}) |", m.cpus, m.cpu_model);
    let _ = writeln!(out, "| memory | {} |", m.memory);
    let _ = writeln!(out, "| kernel | {} |", m.kernel);
    let _ = writeln!(out, "| PostgreSQL | {} |", m.postgres);
    let settings: Vec<String> = m
        .pg_settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(out, "| settings | {} |", settings.join(", "));
    let _ = writeln!(
        out,
        "| load average (1/5/15 min) | {} at start, {} at end |",
        m.load_start, m.load_end
    );

    if !r.append.is_empty() {
        let mut writers: Vec<usize> = r.append.iter().map(|o| o.writers).collect();
        writers.dedup();
        let mut modes: Vec<Mode> = Vec::new();
        for o in &r.append {
            if !modes.contains(&o.mode) {
                modes.push(o.mode);
            }
        }
        let _ = writeln!(
            out,
            "\n## Append throughput (events/s; ×raw = ratio to the raw INSERT at the same concurrency; {} s per cell)\n",
            r.seconds
        );
        let mut head = String::from("| writers |");
        let mut rule = String::from("|---:|");
        for mode in &modes {
            let _ = write!(head, " {} |", mode.label());
            rule.push_str("---:|");
        }
        let _ = writeln!(out, "{head}\n{rule}");
        for &w in &writers {
            let raw = raw_rate(r, w);
            let mut line = format!("| {w} |");
            for mode in &modes {
                match r.append.iter().find(|o| o.writers == w && o.mode == *mode) {
                    Some(o) if *mode == Mode::Raw => {
                        let _ = write!(line, " {} |", rate(o.events_per_s()));
                    }
                    Some(o) => {
                        let x = ratio(o, raw).map_or_else(String::new, |x| format!(" (×{x:.2})"));
                        let _ = write!(line, " {}{x} |", rate(o.events_per_s()));
                    }
                    None => line.push_str(" – |"),
                }
            }
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(
            out,
            "\nPer cell (latency is per transaction as a writer saw it, pool acquire included):\n"
        );
        let _ = writeln!(
            out,
            "| case | writers | txn/s | events/s | ×raw | txn p50 ms | txn p99 ms | txn max ms | errors |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for o in &r.append {
            let x =
                ratio(o, raw_rate(r, o.writers)).map_or_else(|| "–".into(), |x| format!("{x:.2}"));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                o.mode.label(),
                o.writers,
                rate(o.txns as f64 / o.elapsed.as_secs_f64()),
                rate(o.events_per_s()),
                x,
                lat(&o.txn_latency, |s| s.p50),
                lat(&o.txn_latency, |s| s.p99),
                lat(&o.txn_latency, |s| s.max),
                o.errors
            );
        }
        for o in r.append.iter().filter(|o| o.errors > 0) {
            let _ = writeln!(
                out,
                "\n**ERROR** in {} × {}: {} failed; first: {}",
                o.mode.label(),
                o.writers,
                o.errors,
                o.first_error.as_deref().unwrap_or("?")
            );
        }
    }

    if !r.latency.is_empty() {
        let _ = writeln!(
            out,
            "\n## Append → delivery latency ({} events at {}/s, one event per transaction)\n",
            r.pace_events, r.pace_rate
        );
        let _ = writeln!(
            out,
            "| path | receivers | delivered / expected | p50 ms | p99 ms | max ms | last receiver p50 ms | last receiver p99 ms | sender stmt p50 ms | all open after | CPU µs per delivery | status |"
        );
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for l in &r.latency {
            let expected = l.receivers as u64 * l.events as u64;
            let _ = writeln!(
                out,
                "| {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                l.label,
                l.receivers,
                l.delivered,
                expected,
                lat(&l.latency, |s| s.p50),
                lat(&l.latency, |s| s.p99),
                lat(&l.latency, |s| s.max),
                lat(&l.all_receivers, |s| s.p50),
                lat(&l.all_receivers, |s| s.p99),
                lat(&l.send, |s| s.p50),
                l.setup.map_or_else(|| "–".into(), seconds),
                l.cpu_per_delivery
                    .map_or_else(|| "–".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e6)),
                if l.problems.is_empty() {
                    "ok"
                } else {
                    "**ERROR**"
                }
            );
        }
        // Ours next to the raw fan-out with as many sockets: what our server adds.
        for raw in r.latency.iter().filter(|l| l.key.starts_with("raw_sse_")) {
            let ours_key = &raw.key["raw_".len()..];
            // A row that lost or repeated frames has no latency worth dividing.
            let Some(ours) = r
                .latency
                .iter()
                .find(|l| l.key == ours_key && l.problems.is_empty())
                .filter(|_| raw.problems.is_empty())
            else {
                continue;
            };
            let ratio =
                |a: &Option<Summary>, b: &Option<Summary>, f: fn(&Summary) -> u64| match (a, b) {
                    (Some(a), Some(b)) if f(b) > 0 => format!("{:.2}", f(a) as f64 / f(b) as f64),
                    _ => "–".into(),
                };
            let _ = writeln!(
                out,
                "\nOurs ÷ the raw fan-out, {} receivers: p50 {}, p99 {}, last receiver p50 {}.",
                ours.receivers,
                ratio(&ours.latency, &raw.latency, |s| s.p50),
                ratio(&ours.latency, &raw.latency, |s| s.p99),
                ratio(&ours.all_receivers, &raw.all_receivers, |s| s.p50),
            );
        }
        for l in r.latency.iter().filter(|l| !l.problems.is_empty()) {
            for p in &l.problems {
                let _ = writeln!(out, "\n**ERROR** in {}: {p}", l.label);
            }
        }
    }
    out
}

pub fn json(r: &Results) -> Value {
    let append: Vec<Value> = r
        .append
        .iter()
        .map(|o| {
            json!({
                "case": o.mode.key(),
                "label": o.mode.label(),
                "writers": o.writers,
                "seconds": o.elapsed.as_secs_f64(),
                "txns": o.txns,
                "events": o.events,
                "events_per_s": o.events_per_s(),
                "ratio_to_raw": ratio(o, raw_rate(r, o.writers)),
                "txn_latency": o.txn_latency.as_ref().map(Summary::json),
                "errors": o.errors,
                "first_error": o.first_error,
            })
        })
        .collect();
    let latency: Vec<Value> = r
        .latency
        .iter()
        .map(|l| {
            json!({
                "case": l.key,
                "label": l.label,
                "receivers": l.receivers,
                "events": l.events,
                "delivered": l.delivered,
                "expected": l.receivers as u64 * l.events as u64,
                "latency": l.latency.as_ref().map(Summary::json),
                "last_receiver": l.all_receivers.as_ref().map(Summary::json),
                "sender_statement": l.send.as_ref().map(Summary::json),
                "all_open_after_s": l.setup.map(|d| d.as_secs_f64()),
                "cpu_us_per_delivery": l.cpu_per_delivery.map(|d| d.as_secs_f64() * 1e6),
                "problems": l.problems,
            })
        })
        .collect();
    json!({
        "machine": r.machine.json(),
        "append": { "seconds_per_cell": r.seconds, "results": append },
        "latency": { "events": r.pace_events, "rate_per_s": r.pace_rate, "results": latency },
    })
}
