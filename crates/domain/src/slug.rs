//! Slugs: the stable, URL-safe names callers use in paths and `X-Project`.

use serde::Serialize;
use std::fmt;
use std::sync::LazyLock;

static SLUG_RE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^[a-z0-9][a-z0-9-]{0,62}$").expect("valid regex"));

/// A validated slug: `^[a-z0-9][a-z0-9-]{0,62}$`, and never shaped like a UUID, so that a
/// `{ref}` that parses as an id is always an id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Slug(String);

impl Slug {
    pub fn parse(s: &str) -> Result<Self, String> {
        if !SLUG_RE.is_match(s) {
            return Err(format!(
                "'{s}' is not a valid slug: use 1 to 63 lowercase letters, digits and dashes, starting with a letter or digit"
            ));
        }
        if uuid::Uuid::try_parse(s).is_ok() {
            return Err(format!(
                "'{s}' looks like an id; a slug must not be shaped like a UUID"
            ));
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_documented_pattern() {
        assert!(Slug::parse("renewal-analyst").is_ok());
        assert!(Slug::parse("a").is_ok());
        assert!(Slug::parse("9lives").is_ok());
        assert!(Slug::parse("").is_err());
        assert!(Slug::parse("-lead").is_err());
        assert!(Slug::parse("Upper").is_err());
        assert!(Slug::parse("has space").is_err());
        assert!(Slug::parse("a/b").is_err());
        assert!(Slug::parse(&"a".repeat(64)).is_err());
        assert!(Slug::parse(&"a".repeat(63)).is_ok());
    }

    #[test]
    fn a_uuid_is_never_a_slug() {
        assert!(Slug::parse("0190a8b2-7c1d-7b3e-9f00-0123456789ab").is_err());
    }
}
