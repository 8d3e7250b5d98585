//! Skill bundles: named skills trees of a project that CI pushes to, and their immutable,
//! numbered versions.

use crate::slug::Slug;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Longest description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 4_000;
/// Largest archive a push accepts, in bytes (gzip-compressed or plain tar, as uploaded).
pub const MAX_ARCHIVE_BYTES: u64 = 200 * 1024 * 1024;
/// Most members (files, directories, and headers of any other kind) an archive may hold.
pub const MAX_ARCHIVE_MEMBERS: u64 = 50_000;
/// Most bytes the regular files of an archive may hold once unpacked: the compressed size
/// says little about what a gzip stream expands to.
pub const MAX_UNPACKED_BYTES: u64 = 1024 * 1024 * 1024;

/// A named skills tree of the project. Create it once, then push versions to it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SkillBundle {
    /// The bundle's id (a UUID).
    pub id: String,
    /// Unique in the project; agents name the bundle by it (`skills_source.bundle`).
    pub slug: String,
    /// For people; `""` when none was given.
    pub description: String,
    /// The highest version not retired; null until something has been pushed (an agent on
    /// this bundle cannot boot until then).
    pub latest_version: Option<i32>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Changed by every push and retirement.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// One pushed tree: immutable, numbered from a per-bundle counter that never reissues a
/// number (a retired version's number stays used).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SkillBundleVersion {
    /// The version's number: one more than any number ever issued for this bundle.
    pub version: i32,
    /// The archive's size as uploaded, in bytes.
    pub size_bytes: i64,
    /// The regular files in the tree.
    pub file_count: i32,
    /// The sha256 of the uploaded bytes, lowercase hex: a push of the same archive shows the
    /// same digest.
    pub digest: String,
    /// Every directory (relative to the archive's root, sorted) that holds a `SKILL.md`: what
    /// skill discovery finds in the sandbox. `"."` when the root itself is a skill.
    pub skills: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// The body of `POST /api/skill-bundles`: registers the name; push versions afterwards.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SkillBundleCreate {
    /// Unique in the project (409 when taken): 1 to 63 lowercase letters, digits and dashes,
    /// starting with a letter or digit, and not shaped like a UUID.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$", min_length = 1, max_length = 63)]
    pub slug: String,
    /// For people, at most 4,000 characters. Default `""`.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(default = "", max_length = 4000)]
    pub description: String,
}

impl SkillBundleCreate {
    pub fn validate(&self, v: &mut Violations) {
        if let Err(msg) = Slug::parse(&self.slug) {
            v.push(
                "value_error",
                &["slug"],
                msg,
                Value::from(self.slug.as_str()),
            );
        }
        if self.description.chars().count() > MAX_DESCRIPTION_LEN {
            v.push(
                "value_error",
                &["description"],
                format!("the description must be at most {MAX_DESCRIPTION_LEN} characters"),
                Value::Null,
            );
        }
    }
}
