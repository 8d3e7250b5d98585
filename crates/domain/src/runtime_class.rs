//! The runtime class an agent or an environment may name for its sandboxes (a Kubernetes
//! RuntimeClass: gVisor, Kata), from the list the operator offers
//! (`--kubernetes-runtime-classes`). The name is checked here for its shape (a DNS subdomain,
//! as the API server requires); whether the server offers it is [`not_offered`], checked by
//! the services that store it, since the list is the server's.

use crate::validation::Violations;
use serde_json::Value;

/// A RuntimeClass's name is a DNS subdomain: at most 253 characters.
pub const MAX_LEN: usize = 253;

/// Whether `name` is a DNS subdomain (RFC 1123): lowercase letters, digits, `-` and `.`,
/// starting and ending with a letter or digit.
pub fn is_valid(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= MAX_LEN
        && edge(bytes[0])
        && edge(bytes[bytes.len() - 1])
        && bytes.iter().all(|b| edge(*b) || *b == b'-' || *b == b'.')
}

/// The 422 for a malformed `name` at `loc`.
pub fn validate(name: Option<&str>, v: &mut Violations, loc: &[&str]) {
    if let Some(name) = name.filter(|n| !is_valid(n)) {
        v.push(
            "value_error",
            loc,
            format!(
                "runtime_class is a RuntimeClass's name: lowercase letters, digits, '-' and '.', \
                 starting and ending with a letter or digit, at most {MAX_LEN} characters; send \
                 null for the default"
            ),
            Value::from(name),
        );
    }
}

/// Why `name` cannot be used on a server offering `offered` (its 422's message), if it cannot.
pub fn not_offered(name: &str, offered: &[String]) -> Option<String> {
    if offered.iter().any(|o| o == name) {
        return None;
    }
    Some(if offered.is_empty() {
        format!(
            "this server offers no runtime class to choose, so '{name}' cannot be used: an \
             operator lists them with --kubernetes-runtime-classes (GET /api/backends shows \
             them); send null for the default"
        )
    } else {
        format!(
            "this server does not offer the runtime class '{name}'; use one of: {} (GET \
             /api/backends), or null for the default",
            offered.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{is_valid, not_offered};

    #[test]
    fn names_are_dns_subdomains() {
        for ok in ["gvisor", "kata-qemu", "runsc.v2", "a", "0"] {
            assert!(is_valid(ok), "{ok}");
        }
        let long = "a".repeat(254);
        for bad in ["", "GVisor", "-x", "x-", ".x", "a_b", "a b", long.as_str()] {
            assert!(!is_valid(bad), "{bad}");
        }
    }

    #[test]
    fn a_name_must_be_offered() {
        let offered = ["gvisor".to_owned(), "kata".to_owned()];
        assert_eq!(not_offered("gvisor", &offered), None);
        let msg = not_offered("runc", &offered).unwrap();
        assert!(msg.contains("gvisor, kata"), "{msg}");
        let msg = not_offered("gvisor", &[]).unwrap();
        assert!(msg.contains("--kubernetes-runtime-classes"), "{msg}");
    }
}
