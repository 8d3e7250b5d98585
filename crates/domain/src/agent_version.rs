//! Agent versions: every accepted definition of an agent, immutable, and which one a session
//! runs. A session pins a version at creation (the agent's current one unless it asks for
//! another) or follows every edit (`"latest"`); the agents its subagents reach are pinned
//! with it, at the versions they had when it pinned (`AgentPins`).

use crate::agent::Agent;
use crate::AgentId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use time::OffsetDateTime;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// Who made a version: the kind of credential, and which one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChangedBy {
    /// `user` (a person signed in to the UI), `api_key`, `token` (the deployment's shared
    /// token) or `open` (a server without auth).
    pub kind: String,
    /// The person's or API key's id; null for `token` and `open`.
    pub id: Option<String>,
    /// The person's email or the API key's name, as they were then; null for `token` and
    /// `open`.
    pub name: Option<String>,
}

/// One version in an agent's history (`GET /api/agents/{ref}/versions`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct AgentVersionSummary {
    /// 1 for the agent's creation, one more for every accepted edit.
    pub version: i64,
    /// When the edit was accepted.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Who made it; null for versions recorded before versions had authors.
    pub changed_by: Option<ChangedBy>,
    /// The fields that differ from the version before, sorted; `[]` for version 1.
    pub changed: Vec<String>,
    /// The version whose fields this one copied, when it was a restore; else null.
    pub restored_from: Option<i64>,
}

/// One version, whole (`GET /api/agents/{ref}/versions/{version}`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct AgentVersion {
    #[serde(flatten)]
    pub summary: AgentVersionSummary,
    /// The definition as it was: what a session pinned to this version runs (`version` is
    /// this one, `updated_at` its `created_at`; `archived_at` is the agent's now).
    pub agent: Agent,
}

/// `POST /api/agents/{ref}/versions/{version}/restore`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreVersion {
    /// The agent's current `version`, as the caller read it (the optimistic lock: a stale one
    /// is a 409 and changes nothing).
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub version: i64,
}

/// Which version of its agent a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionPin {
    /// Every edit, as it is made.
    Latest,
    /// This version, whatever edits follow.
    Version(i64),
}

impl VersionPin {
    /// The stored column: null for `Latest`.
    pub fn version(self) -> Option<i64> {
        match self {
            VersionPin::Latest => None,
            VersionPin::Version(v) => Some(v),
        }
    }

    pub fn from_column(v: Option<i64>) -> Self {
        v.map_or(VersionPin::Latest, VersionPin::Version)
    }
}

impl Serialize for VersionPin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            VersionPin::Latest => s.serialize_str("latest"),
            VersionPin::Version(v) => s.serialize_i64(*v),
        }
    }
}

impl<'de> Deserialize<'de> for VersionPin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "agent_version is a version number (1 or more) or \"latest\"";
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) if s == "latest" => Ok(VersionPin::Latest),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(v) if v >= 1 => Ok(VersionPin::Version(v)),
                _ => Err(serde::de::Error::custom(WHAT)),
            },
            _ => Err(serde::de::Error::custom(WHAT)),
        }
    }
}

impl PartialSchema for VersionPin {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::Integer))
                    .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                        utoipa::openapi::KnownFormat::Int64,
                    )))
                    .minimum(Some(1))
                    .maximum(Some(i64::MAX)),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::String))
                    .enum_values(Some(["latest"])),
            )
            .description(Some(
                "A version number of the agent (the session runs it whatever edits follow), \
                 or \"latest\" (the session follows every edit).",
            ))
            .into()
    }
}

impl ToSchema for VersionPin {}

/// The versions a pinned session runs, by agent: its own agent's and those of every agent
/// its subagents reach, as they were when it pinned. An agent not in the map (one created
/// since) runs as it is now.
pub type AgentPins = BTreeMap<AgentId, i64>;

/// An agent as it is now, for pinning: its version and the slugs its subagents name.
#[derive(Clone, Debug)]
pub struct AgentHead {
    pub id: AgentId,
    pub slug: String,
    pub version: i64,
    pub subagents: Vec<String>,
}

/// The pins of a session whose agent `root` runs at `version`, whose subagents are
/// `subagents` (that version's): `root` at `version`, and every agent reachable from it
/// through subagents at its current version in `heads` (a slug no agent has is left out).
pub fn pins(root: AgentId, version: i64, subagents: &[String], heads: &[AgentHead]) -> AgentPins {
    let by_slug: BTreeMap<&str, &AgentHead> = heads.iter().map(|h| (h.slug.as_str(), h)).collect();
    let mut pins = AgentPins::from([(root, version)]);
    let mut next: Vec<&str> = subagents.iter().map(String::as_str).collect();
    while let Some(slug) = next.pop() {
        let Some(head) = by_slug.get(slug) else {
            continue;
        };
        if pins.contains_key(&head.id) {
            continue;
        }
        pins.insert(head.id, head.version);
        next.extend(head.subagents.iter().map(String::as_str));
    }
    pins
}

#[cfg(test)]
mod tests {
    use super::{pins, AgentHead, VersionPin};
    use crate::AgentId;

    #[test]
    fn pins_reach_every_subagent_once_and_keep_the_roots_own_version() {
        let head = |slug: &str, version, subagents: &[&str]| AgentHead {
            id: AgentId::new(),
            slug: slug.into(),
            version,
            subagents: subagents.iter().map(|s| s.to_string()).collect(),
        };
        let root = head("root", 9, &["a"]);
        let a = head("a", 2, &["b", "gone"]);
        let b = head("b", 5, &["a", "root"]);
        let stray = head("stray", 1, &[]);
        let heads = [root.clone(), a.clone(), b.clone(), stray.clone()];
        // The session pinned version 3 of root, whose subagents were ["b"]: a is reached
        // through b, root stays at 3, and an agent no path reaches is not pinned.
        let got = pins(root.id, 3, &["b".into()], &heads);
        assert_eq!(got.len(), 3);
        assert_eq!(got[&root.id], 3);
        assert_eq!(got[&a.id], 2);
        assert_eq!(got[&b.id], 5);
        assert!(!got.contains_key(&stray.id));
    }

    #[test]
    fn a_pin_is_a_positive_number_or_latest() {
        let parse = |s: &str| serde_json::from_str::<VersionPin>(s);
        assert_eq!(parse("3").unwrap(), VersionPin::Version(3));
        assert_eq!(parse("\"latest\"").unwrap(), VersionPin::Latest);
        for bad in [
            "0",
            "-1",
            "1.5",
            "\"3\"",
            "\"Latest\"",
            "null",
            "[]",
            "{}",
            "true",
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(
                err.contains("agent_version is a version number"),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            serde_json::to_string(&VersionPin::Latest).unwrap(),
            "\"latest\""
        );
        assert_eq!(serde_json::to_string(&VersionPin::Version(2)).unwrap(), "2");
    }
}
