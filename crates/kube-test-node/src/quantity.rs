//! Kubernetes quantities (`32Mi`, `500m`, `1.5`, `2e3`) read as numbers, for the limits
//! Docker takes: memory in bytes, CPU in billionths of a core.

/// The quantity's value as a float (`500m` is 0.5, `1Ki` is 1024), or None if it is not one.
pub fn parse(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * factor)
}

/// A memory quantity in bytes, rounded up as the kubelet does.
pub fn bytes(q: &str) -> Option<i64> {
    parse(q).map(|v| v.ceil() as i64)
}

/// A CPU quantity in billionths of a core (Docker's `NanoCpus`).
pub fn nano_cpus(q: &str) -> Option<i64> {
    parse(q).map(|v| (v * 1e9).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_suffixes_are_read_as_kubernetes_reads_them() {
        assert_eq!(bytes("32Mi"), Some(32 * 1024 * 1024));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("2e3"), Some(2000));
        assert_eq!(bytes("128974848"), Some(128_974_848));
        assert_eq!(nano_cpus("500m"), Some(500_000_000));
        assert_eq!(nano_cpus("1.5"), Some(1_500_000_000));
        assert_eq!(bytes("12Q"), None);
    }
}
