//! Typed identifiers. Ids are UUIDv7 (time-ordered, so new rows index well), rendered as the
//! canonical hyphenated string. A slug can never parse as a UUID (see [`crate::slug`]), so an
//! "id or slug" reference is never ambiguous.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Parses the canonical form; anything else is not an id of ours.
            pub fn parse(s: &str) -> Option<Self> {
                Uuid::try_parse(s).ok().map(Self)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl From<Uuid> for $name {
            fn from(u: Uuid) -> Self {
                Self(u)
            }
        }
    };
}

id_type!(
    /// A project: the unit of tenancy. Every project-scoped row carries one.
    ProjectId
);
id_type!(
    /// An agent definition.
    AgentId
);
id_type!(
    /// A git deploy key of a project.
    GitKeyId
);
id_type!(
    /// A session: one conversation and the sandbox it owns.
    SessionId
);
id_type!(
    /// One turn of the agent loop.
    RunId
);
id_type!(
    /// A webhook subscription.
    WebhookId
);
id_type!(
    /// One delivery of one event to one subscription, the same across its retries.
    DeliveryId
);
